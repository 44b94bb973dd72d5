//! The merge loop of byte-level BPE training, with the semantics of Stanford CS336's reference.
//!
//! Every distinct pre-token ("word") starts as its bytes; each step merges the most frequent
//! adjacent pair of tokens (occurrences within words, weighted by the words' counts), ties going
//! to the lexicographically greatest `(left bytes, right bytes)`, everywhere, left to right
//! without overlap; training stops after `max_merges` merges or when no pair is left.
//!
//! A token is its bytes: should two merges make the same bytes (`(a, bc)` and later `(ab, c)`),
//! both give the same token, as they do in the reference, where words are tuples of bytes.
//!
//! How it stays fast:
//! * each word's tokens live in one shared arena of `u32` token ids, merged in place;
//! * each pair knows its count and the words where it was made (a list that may hold words that
//!   lost the pair since; merging skips those);
//! * the best pair comes from a max-heap with lazy invalidation: a pair's count only falls
//!   between the times it is pushed, so an entry's count is an upper bound of the pair's, and an
//!   entry whose count is out of date is refreshed when it reaches the top;
//! * a merge of `(a, b)` into `n` changes only the pairs next to each new `n`: `(x, a)` becomes
//!   `(x, n)`, `(b, y)` becomes `(n, y)`, and between two new `n`, `(b, a)` becomes `(n, n)`.

use rustc_hash::FxHashMap;
use std::cmp::Ordering;

use crate::PretokenCounts;

/// A merge: the left and the right token's bytes.
pub type Merge = (Vec<u8>, Vec<u8>);

type TokenId = u32;
type WordId = u32;

/// A pair of token ids as one key: left in the high half.
type PairKey = u64;

fn pair_key(left: TokenId, right: TokenId) -> PairKey {
    (u64::from(left) << 32) | u64::from(right)
}

fn split_key(key: PairKey) -> (TokenId, TokenId) {
    ((key >> 32) as TokenId, key as TokenId)
}

/// A pair's count and the words where it was made (ascending ids unless `unsorted`).
#[derive(Default)]
struct PairInfo {
    count: u64,
    words: Vec<WordId>,
    unsorted: bool,
    /// 1 + the number of the merge during which it was last counted up (0: never), so that it is
    /// pushed onto the heap once per merge.
    raised_in: usize,
}

impl PairInfo {
    fn note_word(&mut self, word: WordId) {
        match self.words.last() {
            Some(&last) if last == word => {}
            Some(&last) => {
                self.unsorted |= last > word;
                self.words.push(word);
            }
            None => self.words.push(word),
        }
    }
}

#[derive(Clone, Copy)]
struct HeapEntry {
    count: u64,
    pair: PairKey,
}

/// A binary max-heap ordered by count, then by the pair's bytes (a comparison that needs the
/// token table, hence not `std`'s `BinaryHeap`).
struct PairHeap {
    entries: Vec<HeapEntry>,
}

impl PairHeap {
    fn push(&mut self, entry: HeapEntry, tokens: &Tokens) {
        self.entries.push(entry);
        let mut child = self.entries.len() - 1;
        while child > 0 {
            let parent = (child - 1) / 2;
            if tokens.compare(&self.entries[child], &self.entries[parent]) != Ordering::Greater {
                break;
            }
            self.entries.swap(child, parent);
            child = parent;
        }
    }

    fn sift_down(&mut self, mut parent: usize, tokens: &Tokens) {
        let len = self.entries.len();
        loop {
            let left = 2 * parent + 1;
            if left >= len {
                return;
            }
            let right = left + 1;
            let child = if right < len
                && tokens.compare(&self.entries[right], &self.entries[left]) == Ordering::Greater
            {
                right
            } else {
                left
            };
            if tokens.compare(&self.entries[child], &self.entries[parent]) != Ordering::Greater {
                return;
            }
            self.entries.swap(child, parent);
            parent = child;
        }
    }

    fn heapify(&mut self, tokens: &Tokens) {
        for index in (0..self.entries.len() / 2).rev() {
            self.sift_down(index, tokens);
        }
    }

    fn pop(&mut self, tokens: &Tokens) {
        let last = self.entries.pop().expect("pop from an empty heap");
        if !self.entries.is_empty() {
            self.entries[0] = last;
            self.sift_down(0, tokens);
        }
    }

    fn replace_top_count(&mut self, count: u64, tokens: &Tokens) {
        self.entries[0].count = count;
        self.sift_down(0, tokens);
    }
}

/// Every token's bytes, and the token of given bytes.
struct Tokens {
    bytes: Vec<Vec<u8>>,
    ids: FxHashMap<Vec<u8>, TokenId>,
}

impl Tokens {
    fn new() -> Tokens {
        let bytes: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        let ids = bytes
            .iter()
            .zip(0..)
            .map(|(b, id)| (b.clone(), id))
            .collect();
        Tokens { bytes, ids }
    }

    /// The token of `left` followed by `right`: an existing one with the same bytes, or a new one.
    fn join(&mut self, left: TokenId, right: TokenId) -> TokenId {
        let mut joined = self.bytes[left as usize].clone();
        joined.extend_from_slice(&self.bytes[right as usize]);
        let next = self.bytes.len() as TokenId;
        let id = *self.ids.entry(joined.clone()).or_insert(next);
        if id == next {
            self.bytes.push(joined);
        }
        id
    }

    /// Heap order: higher count first; among equal counts, the greater `(left bytes, right bytes)`.
    fn compare(&self, x: &HeapEntry, y: &HeapEntry) -> Ordering {
        x.count.cmp(&y.count).then_with(|| {
            let (xl, xr) = split_key(x.pair);
            let (yl, yr) = split_key(y.pair);
            let x_bytes = (&self.bytes[xl as usize], &self.bytes[xr as usize]);
            let y_bytes = (&self.bytes[yl as usize], &self.bytes[yr as usize]);
            x_bytes.cmp(&y_bytes)
        })
    }
}

/// The words: each one's tokens at `symbols[starts[w]..starts[w] + lens[w]]`.
struct Words {
    symbols: Vec<TokenId>,
    starts: Vec<usize>,
    lens: Vec<u32>,
    counts: Vec<u64>,
}

impl Words {
    /// Words of at least two bytes (shorter ones never hold a pair).
    fn from_counts(counts: &PretokenCounts) -> Words {
        let mut words = Words {
            symbols: Vec::new(),
            starts: Vec::new(),
            lens: Vec::new(),
            counts: Vec::new(),
        };
        let (mut distinct, mut symbols) = (0usize, 0usize);
        for (pretoken, _) in counts.iter() {
            if pretoken.len() >= 2 {
                distinct += 1;
                symbols += pretoken.len();
            }
        }
        words.symbols.reserve_exact(symbols);
        words.starts.reserve_exact(distinct);
        words.lens.reserve_exact(distinct);
        words.counts.reserve_exact(distinct);
        for (pretoken, count) in counts.iter() {
            if pretoken.len() < 2 || count == 0 {
                continue;
            }
            let len = u32::try_from(pretoken.len()).expect("a pre-token of 4 GiB or more");
            words.starts.push(words.symbols.len());
            words.lens.push(len);
            words.counts.push(count);
            words
                .symbols
                .extend(pretoken.iter().map(|&b| TokenId::from(b)));
        }
        assert!(
            words.counts.len() <= WordId::MAX as usize,
            "more than 2^32 distinct pre-tokens"
        );
        words
    }
}

/// The state of the merge loop between merges.
struct Trainer {
    words: Words,
    tokens: Tokens,
    pairs: FxHashMap<PairKey, PairInfo>,
    heap: PairHeap,
    merges_done: usize,
    /// Pairs counted up during the current merge (pushed onto the heap at its end).
    raised: Vec<PairKey>,
}

impl Trainer {
    fn new(counts: &PretokenCounts) -> Trainer {
        let words = Words::from_counts(counts);
        let tokens = Tokens::new();
        // All first pairs are of two bytes: count them in flat tables, not in the hash map.
        let mut byte_pair_counts = vec![0u64; 1 << 16];
        let mut byte_pair_words: Vec<Vec<WordId>> = vec![Vec::new(); 1 << 16];
        for (word, (&start, &len)) in words.starts.iter().zip(&words.lens).enumerate() {
            let word_id = word as WordId;
            let count = words.counts[word];
            for window in words.symbols[start..start + len as usize].windows(2) {
                let index = (window[0] as usize) << 8 | window[1] as usize;
                byte_pair_counts[index] += count;
                let list = &mut byte_pair_words[index];
                if list.last() != Some(&word_id) {
                    list.push(word_id);
                }
            }
        }
        let mut pairs = FxHashMap::default();
        let mut heap = PairHeap {
            entries: Vec::new(),
        };
        for (index, list) in byte_pair_words.into_iter().enumerate() {
            let count = byte_pair_counts[index];
            if count == 0 {
                continue;
            }
            let key = pair_key((index >> 8) as TokenId, (index & 0xFF) as TokenId);
            pairs.insert(
                key,
                PairInfo {
                    count,
                    words: list,
                    unsorted: false,
                    raised_in: 0,
                },
            );
            heap.entries.push(HeapEntry { count, pair: key });
        }
        heap.heapify(&tokens);
        Trainer {
            words,
            tokens,
            pairs,
            heap,
            merges_done: 0,
            raised: Vec::new(),
        }
    }

    /// The best pair, or None when no pair is left.
    fn best_pair(&mut self) -> Option<PairKey> {
        loop {
            let top = *self.heap.entries.first()?;
            let current = self.pairs.get(&top.pair).map_or(0, |info| info.count);
            if current == top.count {
                return Some(top.pair);
            }
            if current > 0 {
                // The count fell since this entry was pushed; the entry goes back at its true place.
                self.heap.replace_top_count(current, &self.tokens);
            } else {
                self.heap.pop(&self.tokens);
            }
        }
    }

    fn lower(&mut self, left: TokenId, right: TokenId, by: u64) {
        let key = pair_key(left, right);
        let info = self
            .pairs
            .get_mut(&key)
            .expect("a pair that occurs is counted");
        info.count -= by;
        if info.count == 0 {
            // No word holds it any more: drop its word list now.
            self.pairs.remove(&key);
        }
    }

    fn raise(&mut self, left: TokenId, right: TokenId, by: u64, word: WordId) {
        let key = pair_key(left, right);
        let info = self.pairs.entry(key).or_default();
        info.count += by;
        info.note_word(word);
        if info.raised_in != self.merges_done + 1 {
            info.raised_in = self.merges_done + 1;
            self.raised.push(key);
        }
    }

    /// Merges `pair` everywhere.
    fn merge(&mut self, pair: PairKey) {
        let (a, b) = split_key(pair);
        let new = self.tokens.join(a, b);
        let mut candidates = std::mem::take(
            &mut self
                .pairs
                .get_mut(&pair)
                .expect("the best pair is counted")
                .words,
        );
        if self.pairs[&pair].unsorted {
            candidates.sort_unstable();
            candidates.dedup();
        }
        for &word in &candidates {
            self.merge_in_word(word, a, b, new);
        }
        debug_assert!(
            !self.pairs.contains_key(&pair),
            "a merged pair is left nowhere"
        );
        self.pairs.remove(&pair);
        for key in std::mem::take(&mut self.raised) {
            let count = self.pairs[&key].count;
            self.heap.push(HeapEntry { count, pair: key }, &self.tokens);
        }
        self.merges_done += 1;
    }

    /// Merges `(a, b)` into `new` in one word (which may no longer hold the pair), in place.
    fn merge_in_word(&mut self, word: WordId, a: TokenId, b: TokenId, new: TokenId) {
        let start = self.words.starts[word as usize];
        let len = self.words.lens[word as usize] as usize;
        let symbols = &self.words.symbols[start..start + len];
        let Some(first) = symbols.windows(2).position(|w| w[0] == a && w[1] == b) else {
            return;
        };
        let count = self.words.counts[word as usize];
        let mut read = first;
        let mut write = first;
        // Whether the token just written was made by this merge (a pre-existing `new` token is
        // not: should `new` already exist elsewhere, the pair before it is unchanged).
        let mut wrote_new = false;
        while read < len {
            let symbols = &self.words.symbols[start..start + len];
            if read + 1 < len && symbols[read] == a && symbols[read + 1] == b {
                self.lower(a, b, count);
                if write > 0 {
                    let before = self.words.symbols[start + write - 1];
                    if wrote_new {
                        self.lower(b, a, count);
                        self.raise(new, new, count, word);
                    } else {
                        self.lower(before, a, count);
                        self.raise(before, new, count, word);
                    }
                }
                let symbols = &self.words.symbols[start..start + len];
                if read + 2 < len {
                    let after = symbols[read + 2];
                    let next_merges_too = after == a && read + 3 < len && symbols[read + 3] == b;
                    if !next_merges_too {
                        self.lower(b, after, count);
                        self.raise(new, after, count, word);
                    }
                }
                self.words.symbols[start + write] = new;
                wrote_new = true;
                read += 2;
            } else {
                self.words.symbols[start + write] = symbols[read];
                wrote_new = false;
                read += 1;
            }
            write += 1;
        }
        self.words.lens[word as usize] = write as u32;
    }
}

/// Learns up to `max_merges` merges from pre-token counts, in order, with CS336's semantics (see
/// the module documentation). `on_merge` is called after each merge with the number done so far.
///
/// The result does not depend on the order of the counts; a run with fewer merges gives a prefix
/// of this one's merges.
pub fn learn_merges(
    counts: &PretokenCounts,
    max_merges: usize,
    mut on_merge: impl FnMut(usize),
) -> Vec<Merge> {
    let mut trainer = Trainer::new(counts);
    let mut merges = Vec::new();
    while merges.len() < max_merges {
        let Some(pair) = trainer.best_pair() else {
            break;
        };
        let (a, b) = split_key(pair);
        merges.push((
            trainer.tokens.bytes[a as usize].clone(),
            trainer.tokens.bytes[b as usize].clone(),
        ));
        trainer.merge(pair);
        on_merge(merges.len());
    }
    merges
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The naive reference: words as lists of byte strings, every pair recounted after every merge.
    fn brute_force(counts: &[(Vec<u8>, u64)], max_merges: usize) -> Vec<Merge> {
        let mut words: Vec<(Vec<Vec<u8>>, u64)> = counts
            .iter()
            .map(|(w, c)| (w.iter().map(|&b| vec![b]).collect(), *c))
            .collect();
        let mut merges = Vec::new();
        while merges.len() < max_merges {
            let mut pair_counts: HashMap<(Vec<u8>, Vec<u8>), u64> = HashMap::new();
            for (word, count) in &words {
                for pair in word.windows(2) {
                    *pair_counts
                        .entry((pair[0].clone(), pair[1].clone()))
                        .or_default() += count;
                }
            }
            let Some(best) = pair_counts
                .into_iter()
                .max_by(|x, y| (x.1, &x.0).cmp(&(y.1, &y.0)))
            else {
                break;
            };
            let (left, right) = best.0;
            for (word, _) in &mut words {
                let mut merged = Vec::new();
                let mut i = 0;
                while i < word.len() {
                    if i + 1 < word.len() && word[i] == left && word[i + 1] == right {
                        merged.push([left.clone(), right.clone()].concat());
                        i += 2;
                    } else {
                        merged.push(word[i].clone());
                        i += 1;
                    }
                }
                *word = merged;
            }
            merges.push((left, right));
        }
        merges
    }

    /// A small deterministic generator (xorshift), so that the tests need no extra crate.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    fn random_counts(rng: &mut Rng) -> Vec<(Vec<u8>, u64)> {
        // Few letters, so that pairs tie and overlap ("aaa"); sometimes high bytes and long words.
        let alphabet: Vec<u8> = match rng.below(4) {
            0 => b"ab".to_vec(),
            1 => b"abc ".to_vec(),
            2 => vec![b'a', 0x00, 0xff, 0x80, b'z'],
            _ => (0..=255).collect(),
        };
        let mut map: HashMap<Vec<u8>, u64> = HashMap::new();
        for _ in 0..rng.below(40) {
            let len = if rng.below(8) == 0 {
                rng.below(60)
            } else {
                rng.below(7)
            } as usize;
            let word: Vec<u8> = (0..len)
                .map(|_| alphabet[rng.below(alphabet.len() as u64) as usize])
                .collect();
            let count = if rng.below(10) == 0 {
                1 + rng.below(1 << 40)
            } else {
                1 + rng.below(5)
            };
            *map.entry(word).or_default() += count;
        }
        map.into_iter().collect()
    }

    fn ours(counts: &[(Vec<u8>, u64)], max_merges: usize) -> Vec<Merge> {
        let counts: PretokenCounts = counts.iter().map(|(w, c)| (w.as_slice(), *c)).collect();
        learn_merges(&counts, max_merges, |_| {})
    }

    #[test]
    fn matches_brute_force_on_generated_counts() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..400 {
            let counts = random_counts(&mut rng);
            let max_merges = [0, 1, 3, 20, 1000][rng.below(5) as usize];
            assert_eq!(
                ours(&counts, max_merges),
                brute_force(&counts, max_merges),
                "{counts:?}"
            );
        }
    }

    #[test]
    fn ties_go_to_the_greatest_pair_of_bytes() {
        // (b"b", b"a") and (b"a", b"b") both occur twice; then (b"ba", b"b") beats ...
        let counts = vec![(b"abab".to_vec(), 1), (b"ba".to_vec(), 1)];
        let merges = ours(&counts, 10);
        assert_eq!(merges[0], (b"b".to_vec(), b"a".to_vec()));
        assert_eq!(merges, brute_force(&counts, 10));
        // Bytes compare as unsigned, a prefix before its extensions.
        let counts = vec![
            (vec![0x00, 0x01], 3),
            (vec![0xff, 0x00], 3),
            (vec![0x7f, 0x80], 3),
        ];
        assert_eq!(ours(&counts, 1), vec![(vec![0xff], vec![0x00])]);
    }

    #[test]
    fn runs_of_one_byte_merge_left_to_right_without_overlap() {
        for len in 2..12 {
            let counts = vec![(vec![b'a'; len], 1), (b"ab".to_vec(), 1)];
            assert_eq!(ours(&counts, 10), brute_force(&counts, 10), "{len}");
        }
    }

    #[test]
    fn fewer_merges_give_a_prefix() {
        let mut rng = Rng(777);
        for _ in 0..50 {
            let counts = random_counts(&mut rng);
            let all = ours(&counts, 500);
            for n in [0, 1, 5, 50] {
                assert_eq!(ours(&counts, n), all[..n.min(all.len())]);
            }
        }
    }

    #[test]
    fn stops_when_no_pair_is_left() {
        let counts = vec![(b"abc".to_vec(), 1), (b"d".to_vec(), 9), (b"".to_vec(), 2)];
        assert_eq!(
            ours(&counts, 100),
            vec![
                (b"b".to_vec(), b"c".to_vec()),
                (b"a".to_vec(), b"bc".to_vec())
            ]
        );
        assert!(ours(&[], 100).is_empty());
    }

    #[test]
    fn counts_above_32_bits_are_summed_exactly() {
        let big = 3u64 << 33;
        let counts = vec![
            (b"ab".to_vec(), big),
            (b"cd".to_vec(), big - 1),
            (b"cdcd".to_vec(), 1),
        ];
        // (c, d): big - 1 + 2 > big.
        assert_eq!(ours(&counts, 1), vec![(b"c".to_vec(), b"d".to_vec())]);
    }

    #[test]
    fn reports_each_merge() {
        let mut seen = Vec::new();
        let counts: PretokenCounts = [(&b"abcdef"[..], 2)].into_iter().collect();
        let merges = learn_merges(&counts, 3, |n| seen.push(n));
        assert_eq!(merges.len(), 3);
        assert_eq!(seen, vec![1, 2, 3]);
    }
}
