//! A merges list from token ranks (a tiktoken vocabulary), for the pair rule.
//!
//! For each multi-byte token, in rank order, tiktoken's rule is applied to its bytes with only
//! the tokens ranked below it (the lowest-ranked adjacent pair joined first, the leftmost of
//! equals); if that ends in exactly two parts, they are the merge that makes the token, else no
//! pair merge reaches it. Every part is a piece of the token itself, so a pair's join is looked
//! up as a slice of it: nothing is allocated per step.

use crate::bpe::TokenId;
use rustc_hash::FxHashMap;

/// What [`pair_merges_from_ranks`] finds: the merges `(token index, split)` in rank order, the
/// token being `token[..split] + token[split..]`, and the indices of the tokens no pair merge
/// reaches (both indices into the slice given).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reconstructed {
    pub merges: Vec<(usize, usize)>,
    pub unreachable: Vec<usize>,
}

/// The merges of `tokens` (`(bytes, rank)`, ranks distinct), in rank order; see the module.
/// `on_tokens(n)` is told of every `n` more tokens done (for a progress bar).
pub fn pair_merges_from_ranks(
    tokens: &[(&[u8], TokenId)],
    on_tokens: &mut dyn FnMut(usize),
) -> Reconstructed {
    let rank_of: FxHashMap<&[u8], TokenId> =
        tokens.iter().map(|&(token, rank)| (token, rank)).collect();
    let mut order: Vec<usize> = (0..tokens.len()).collect();
    order.sort_unstable_by_key(|&index| tokens[index].1);
    let mut found = Reconstructed::default();
    // Part i of the token being split is token[start(i)..ends[i]], start(0) = 0 and
    // start(i) = ends[i - 1]; joins[i] is the rank of parts i and i + 1 joined, if that is a
    // token ranked below the one being split. A join changes only its two neighbours' entries.
    let mut ends: Vec<usize> = Vec::new();
    let mut joins: Vec<Option<TokenId>> = Vec::new();
    let mut done = 0;
    for &index in &order {
        let (token, rank) = tokens[index];
        done += 1;
        if done % 4096 == 0 {
            on_tokens(4096);
        }
        if token.len() < 2 {
            continue;
        }
        let below = |from: usize, to: usize| {
            rank_of
                .get(&token[from..to])
                .copied()
                .filter(|&joined| joined < rank)
        };
        ends.clear();
        ends.extend(1..=token.len());
        joins.clear();
        joins.extend((0..token.len() - 1).map(|i| below(i, i + 2)));
        while ends.len() > 2 {
            // The lowest rank, the leftmost of equals.
            let mut best: Option<(TokenId, usize)> = None;
            for (i, join) in joins.iter().enumerate() {
                if let Some(joined) = *join {
                    if best.is_none_or(|(best_rank, _)| joined < best_rank) {
                        best = Some((joined, i));
                    }
                }
            }
            let Some((_, at)) = best else {
                break;
            };
            ends.remove(at); // parts at and at + 1 become one
            joins.remove(at);
            let start = |i: usize| if i == 0 { 0 } else { ends[i - 1] };
            if at > 0 {
                joins[at - 1] = below(start(at - 1), ends[at]);
            }
            if at + 1 < ends.len() {
                joins[at] = below(start(at), ends[at + 1]);
            }
        }
        if ends.len() == 2 {
            found.merges.push((index, ends[0]));
        } else {
            found.unreachable.push(index);
        }
    }
    on_tokens(done % 4096);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

    fn reconstruct(tokens: &[(&[u8], TokenId)]) -> (Pairs, Vec<Vec<u8>>) {
        let found = pair_merges_from_ranks(tokens, &mut |_| {});
        let merges = found
            .merges
            .iter()
            .map(|&(index, split)| {
                (
                    tokens[index].0[..split].to_vec(),
                    tokens[index].0[split..].to_vec(),
                )
            })
            .collect();
        let unreachable = found
            .unreachable
            .iter()
            .map(|&index| tokens[index].0.to_vec())
            .collect();
        (merges, unreachable)
    }

    #[test]
    fn merges_come_from_the_lower_ranks_in_rank_order() {
        let mut tokens: Vec<(&[u8], TokenId)> = vec![(b"a", 0), (b"b", 1), (b"c", 2)];
        // "abc" (rank 5) splits as "ab" + "c": "ab" (3) is below "bc" (4).
        tokens.extend([
            (b"ab".as_slice(), 3),
            (b"bc".as_slice(), 4),
            (b"abc".as_slice(), 5),
        ]);
        // "cab" (rank 6): "ab" joins first, leaving "c" + "ab".
        tokens.push((b"cab", 6));
        // "bca" (rank 7): "bc" first, then "bc" + "a".
        tokens.push((b"bca", 7));
        // "aaa" (rank 8): no "aa" below it: three parts, no pair merge.
        tokens.push((b"aaa", 8));
        let (merges, unreachable) = reconstruct(&tokens);
        let pairs: Vec<(&[u8], &[u8])> = merges
            .iter()
            .map(|(l, r)| (l.as_slice(), r.as_slice()))
            .collect();
        assert_eq!(
            pairs,
            vec![
                (b"a".as_slice(), b"b".as_slice()),
                (b"b", b"c"),
                (b"ab", b"c"),
                (b"c", b"ab"),
                (b"bc", b"a"),
            ]
        );
        assert_eq!(unreachable, vec![b"aaa".to_vec()]);
    }

    #[test]
    fn a_pair_ranked_above_the_token_is_not_used_and_the_leftmost_of_equals_joins_first() {
        // "abab" (rank 3) with "ab" (rank 2): the leftmost "ab" joins, then the second, then
        // "ab" + "ab". "ba" (rank 9) is above it and never used.
        let tokens: Vec<(&[u8], TokenId)> =
            vec![(b"a", 0), (b"b", 1), (b"ab", 2), (b"abab", 3), (b"ba", 9)];
        let (merges, unreachable) = reconstruct(&tokens);
        assert_eq!(merges[1], (b"ab".to_vec(), b"ab".to_vec()));
        assert!(unreachable.is_empty());
    }
}
