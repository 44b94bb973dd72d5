//! BPE-dropout (Provilkov, Emelianenko and Voita, 2020, "BPE-Dropout: Simple and Effective Subword
//! Regularization"): while a pre-token is merged, each merge the rule would make next is skipped
//! with probability `p`, so that one text gets many segmentations into the same vocabulary.
//!
//! The rule, for both merge rules, on one pre-token:
//!
//! 1. (token rule only) if the whole pre-token is a token, take it, unless a draw drops that;
//! 2. list the adjacent pairs that would merge, in the order the rule prefers them: lowest rank
//!    first, then leftmost (the pair rule's rank is the merge's, the token rule's the merged
//!    token's id);
//! 3. walk that list drawing once per pair: a pair is dropped with probability `p`; the first one
//!    kept is merged, and the walk starts again from step 2 with every pair a candidate again;
//! 4. when every pair of a walk is dropped (or none is left), the pre-token is done.
//!
//! Every output decodes to the text (merges only join neighbours), `p = 0` takes the first pair
//! of each walk (the encoder does not come here then: it encodes as always, cache and all), and
//! as `p` grows the tokens get shorter, down to single bytes. The draws come from a SplitMix64
//! stream seeded by the seed, the text's index in its batch and the pre-token's byte offset in its
//! text, so the ids depend on nothing else: not on threads, blocks or the cache. tests/reference.py
//! spells out the same rule and generator, and the Python tests compare the two.
//!
//! Short pieces walk a small vector; longer ones keep the candidates in a heap over a linked list
//! (the dropped ones set aside until the next merge), so that a megabyte without whitespace stays
//! O(n log n) for any `p` below 1 on average.

use crate::bpe::{pair_heap, Linked, PairRanks, TokenId, TokenRanks, LONG_PIECE, NONE};
use std::cmp::Reverse;

/// How a text is encoded with dropout: the probability that a merge is skipped, in `[0, 1)`, and
/// the seed of the draws.
#[derive(Clone, Copy, Debug)]
pub struct Dropout {
    /// The probability that each merge considered is skipped.
    pub probability: f64,
    /// The seed: the same seed gives the same ids.
    pub seed: u64,
}

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function (Steele, Lea and Flood, 2014).
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The draws of one pre-token: SplitMix64 from a state made of the seed, the text's index and the
/// pre-token's offset.
pub(crate) struct Draws {
    state: u64,
    probability: f64,
}

impl Draws {
    pub(crate) fn new(dropout: Dropout, text: u64, offset: u64) -> Draws {
        Draws {
            state: mix(dropout.seed ^ mix(text.wrapping_add(GOLDEN) ^ mix(offset))),
            probability: dropout.probability,
        }
    }

    /// Whether any of the next `count` draws drops, without using them up (the walk that
    /// follows starts from the same draws).
    #[inline]
    pub(crate) fn any_drop_in(&self, count: usize) -> bool {
        let mut ahead = Draws {
            state: self.state,
            probability: self.probability,
        };
        (0..count).any(|_| ahead.drops())
    }

    /// Whether the next merge considered is dropped.
    #[inline]
    fn drops(&mut self) -> bool {
        self.state = self.state.wrapping_add(GOLDEN);
        // 53 random bits as a float in [0, 1).
        let unit = (mix(self.state) >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        unit < self.probability
    }
}

/// The two rules as dropout sees them: a pair's rank and what it merges into.
trait Candidates {
    fn pair(&self, left: TokenId, right: TokenId) -> Option<(u32, TokenId)>;
}

impl Candidates for PairRanks {
    #[inline]
    fn pair(&self, left: TokenId, right: TokenId) -> Option<(u32, TokenId)> {
        self.get(left, right)
    }
}

/// The token rule with a buffer for the concatenations it looks up (made once per text).
pub(crate) struct ByToken<'v> {
    ranks: TokenRanks<'v>,
    scratch: std::cell::RefCell<Vec<u8>>,
}

impl<'v> ByToken<'v> {
    pub(crate) fn new(ranks: TokenRanks<'v>) -> ByToken<'v> {
        ByToken {
            ranks,
            scratch: std::cell::RefCell::new(Vec::with_capacity(64)),
        }
    }
}

impl Candidates for ByToken<'_> {
    #[inline]
    fn pair(&self, left: TokenId, right: TokenId) -> Option<(u32, TokenId)> {
        let rank = self
            .ranks
            .rank(left, right, &mut self.scratch.borrow_mut())?;
        Some((rank, rank))
    }
}

/// Merges `tokens` (the piece's byte ids) in place by the pair rule with dropout.
pub(crate) fn merge_pairs(pairs: &PairRanks, tokens: &mut Vec<TokenId>, draws: &mut Draws) {
    merge(pairs, tokens, draws);
}

/// Merges `tokens` (the byte ids of `piece`) in place by the token rule with dropout.
pub(crate) fn merge_tokens(
    rule: &ByToken<'_>,
    piece: &[u8],
    tokens: &mut Vec<TokenId>,
    draws: &mut Draws,
) {
    if tokens.len() > 1 {
        if let Some(whole) = rule.ranks.vocab.id(piece) {
            if !draws.drops() {
                tokens.clear();
                tokens.push(whole);
                return;
            }
        }
    }
    merge(rule, tokens, draws);
}

fn merge(rule: &impl Candidates, tokens: &mut Vec<TokenId>, draws: &mut Draws) {
    if tokens.len() <= LONG_PIECE {
        merge_short(rule, tokens, draws);
    } else {
        merge_long(rule, tokens, draws);
    }
}

/// Steps 2-4 on small arrays: tokens stay where their first byte is, linked to their live
/// neighbours (no shifting), and each pair's rank is kept from walk to walk (looked up again only
/// beside a merge); a walk scans the ranks for the smallest (rank, position) not yet dropped, a
/// handful of pairs for a piece of natural text.
fn merge_short(rule: &impl Candidates, tokens: &mut Vec<TokenId>, draws: &mut Draws) {
    let n = tokens.len();
    if n > LONG_PIECE {
        return merge_long(rule, tokens, draws);
    }
    if n < 2 {
        return;
    }
    // A walk's dropped pairs are the bits of a u64; positions fit a u8.
    const _: () = assert!(LONG_PIECE < 64);
    const END: u8 = u8::MAX;
    // next[i], prev[i]: the live tokens around the live token at i (END: none). ranks[i],
    // merged[i]: the pair (i, next[i]); NONE where there is none (a dead position included).
    let mut next = [END; LONG_PIECE];
    let mut prev = [END; LONG_PIECE];
    let mut ranks = [NONE; LONG_PIECE];
    let mut merged = [0 as TokenId; LONG_PIECE];
    for i in 0..n - 1 {
        next[i] = (i + 1) as u8;
        prev[i + 1] = i as u8;
        if let Some((rank, result)) = rule.pair(tokens[i], tokens[i + 1]) {
            (ranks[i], merged[i]) = (rank, result);
        }
    }
    loop {
        let mut dropped: u64 = 0;
        let chosen = loop {
            let (mut best, mut at) = (NONE, 0);
            for (i, &rank) in ranks[..n - 1].iter().enumerate() {
                if rank < best && dropped & (1 << i) == 0 {
                    (best, at) = (rank, i);
                }
            }
            if best == NONE {
                break None;
            }
            if !draws.drops() {
                break Some(at);
            }
            dropped |= 1 << at;
        };
        let Some(at) = chosen else { break };
        // The token at `at` becomes the merge; its right neighbour goes.
        let gone = next[at] as usize;
        tokens[at] = merged[at];
        ranks[gone] = NONE;
        let after = next[gone];
        next[at] = after;
        ranks[at] = NONE;
        if after != END {
            prev[after as usize] = at as u8;
            if let Some((rank, result)) = rule.pair(tokens[at], tokens[after as usize]) {
                (ranks[at], merged[at]) = (rank, result);
            }
        }
        let before = prev[at];
        if before != END {
            let before = before as usize;
            ranks[before] = NONE;
            if let Some((rank, result)) = rule.pair(tokens[before], tokens[at]) {
                (ranks[before], merged[before]) = (rank, result);
            }
        }
    }
    // The live tokens, in order (position 0 is always live: a merge removes the right token).
    let (mut write, mut read) = (0, 0);
    while read != END as usize {
        tokens[write] = tokens[read];
        write += 1;
        read = next[read] as usize;
    }
    tokens.truncate(write);
}

/// Steps 2-4 with a heap of (rank, position) over a linked list: popping in order is walking;
/// a dropped pair waits aside until the next merge puts it back.
fn merge_long(rule: &impl Candidates, tokens: &mut Vec<TokenId>, draws: &mut Draws) {
    let rank_of = |left, right| rule.pair(left, right).map(|(rank, _)| rank);
    let mut list = Linked::new(tokens);
    let mut heap = pair_heap(tokens, rank_of);
    let mut dropped: Vec<u64> = Vec::new();
    while let Some(Reverse(entry)) = heap.pop() {
        let (rank, i) = ((entry >> 32) as u32, entry as u32);
        // A stale entry (a token of its pair merged away meanwhile) is no candidate: no draw.
        let Some(j) = list.live_next(i) else { continue };
        let Some((current, merged)) = rule.pair(list.tokens[i as usize], list.tokens[j as usize])
        else {
            continue;
        };
        if current != rank {
            continue;
        }
        if draws.drops() {
            dropped.push(entry);
            continue;
        }
        list.merge(i, j, merged);
        heap.extend(dropped.drain(..).map(Reverse));
        list.push_pairs_around(i, &mut heap, rank_of);
    }
    list.collect(tokens);
}

#[cfg(test)]
mod tests {
    //! The heap path against the vector path on generated vocabularies (the same draws must give
    //! the same tokens), and what every dropout output must be: the piece's bytes, in tokens of
    //! the vocabulary. (The rule itself is checked against tests/reference.py from Python.)
    use super::*;
    use crate::bpe::tests::{generate, pair_ranks, piece, vocab_of, Bytes, Rng};
    use crate::bpe::BytePairs;

    fn draws(seed: u64, probability: f64) -> Draws {
        Draws::new(Dropout { probability, seed }, 7, seed)
    }

    #[test]
    fn both_paths_agree_and_every_output_is_the_piece() {
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        let alphabets: [&[u8]; 3] = [b"ab", b"abc", b"abcd\xe4"];
        let rounds = if cfg!(debug_assertions) { 10 } else { 200 };
        let mut shortened = 0usize;
        for round in 0..rounds {
            let alphabet = alphabets[round % alphabets.len()];
            let (n_merges, n_extra) = (5 + rng.below(40), rng.below(15));
            let (tokens, merges) = generate(&mut rng, alphabet, n_merges, n_extra);
            let vocab = vocab_of(&tokens);
            let pairs = pair_ranks(&vocab, &merges);
            let bytes = BytePairs::new(&vocab);
            let by_token = ByToken::new(TokenRanks {
                vocab: &vocab,
                bytes: &bytes,
            });
            for case in 0..20u64 {
                let piece: Bytes = piece(&mut rng, alphabet, 100);
                let start: Vec<TokenId> =
                    piece.iter().map(|&b| vocab.byte_ids[b as usize]).collect();
                let probability = [0.0, 0.1, 0.5, 0.9][(case % 4) as usize];
                let seed = rng.next();
                let (mut short, mut long) = (start.clone(), start.clone());
                merge_short(&pairs, &mut short, &mut draws(seed, probability));
                merge_long(&pairs, &mut long, &mut draws(seed, probability));
                assert_eq!(short, long, "pair rule, {piece:?}, p={probability}");
                let (mut short, mut long) = (start.clone(), start.clone());
                merge_short(&by_token, &mut short, &mut draws(seed, probability));
                merge_long(&by_token, &mut long, &mut draws(seed, probability));
                assert_eq!(short, long, "token rule, {piece:?}, p={probability}");
                for rule in [MergeKind::Pair, MergeKind::Token] {
                    let mut tokens = start.clone();
                    match rule {
                        MergeKind::Pair => {
                            merge_pairs(&pairs, &mut tokens, &mut draws(seed, probability))
                        }
                        MergeKind::Token => merge_tokens(
                            &by_token,
                            &piece,
                            &mut tokens,
                            &mut draws(seed, probability),
                        ),
                    }
                    let joined: Bytes = tokens
                        .iter()
                        .flat_map(|&id| vocab.bytes(id).to_vec())
                        .collect();
                    assert_eq!(joined, piece, "{rule:?} rule, p={probability}");
                    shortened += usize::from(tokens.len() < piece.len());
                }
            }
        }
        assert!(
            shortened > rounds,
            "the generated cases merged too little: {shortened}"
        );
    }

    #[derive(Debug, Clone, Copy)]
    enum MergeKind {
        Pair,
        Token,
    }

    #[test]
    fn a_long_run_of_one_byte_stays_fast_at_any_probability() {
        // "a" * 200_000 with merges a+a, aa+aa, ...: each walk pops what it drops and puts it
        // back, which stays O(n log n) on average; a rescan per merge would be quadratic.
        let mut tokens: Vec<(u32, Bytes)> = (0..=255u8).map(|b| (u32::from(b), vec![b])).collect();
        let mut merges = Vec::new();
        let mut unit = b"a".to_vec();
        for id in 256..268u32 {
            let joined = [unit.clone(), unit.clone()].concat();
            merges.push((unit.clone(), unit.clone()));
            tokens.push((id, joined.clone()));
            unit = joined;
        }
        let vocab = vocab_of(&tokens);
        let pairs = pair_ranks(&vocab, &merges);
        let merge = |n: usize, probability: f64| {
            let mut ids = vec![vocab.byte_ids[usize::from(b'a')]; n];
            let started = std::time::Instant::now();
            merge_pairs(&pairs, &mut ids, &mut draws(1, probability));
            let elapsed = started.elapsed();
            let total: usize = ids.iter().map(|&id| vocab.bytes(id).len()).sum();
            assert_eq!(total, n);
            elapsed
        };
        // Relative to this machine and build, not a wall-clock threshold: 16 times the bytes
        // take about 16 times as long (n log n), where a quadratic walk takes 256 times; 64 is
        // between the two. The best of three runs of each, taken in turns, so that other work on
        // the machine slows both alike.
        for probability in [0.05, 0.5, 0.95] {
            let (mut small, mut big) = (std::time::Duration::MAX, std::time::Duration::MAX);
            for _ in 0..3 {
                small = small.min(merge(12_500, probability));
                big = big.min(merge(200_000, probability));
            }
            assert!(
                big.as_secs_f64() < 64.0 * small.as_secs_f64() + 0.05,
                "p={probability}: 200,000 bytes took {big:?}, 12,500 bytes {small:?}"
            );
        }
    }
}
