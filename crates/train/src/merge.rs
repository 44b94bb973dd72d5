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

use crate::pairs::{PairInfo, PairKey, PairTable, WordId};
use crate::prune::Sketch;
use crate::words::{pair_key, split_key, TokenId, WordHead, Words};
use crate::PretokenCounts;

/// Words split into tokens (see [`MergeLoop::with_base_ids`]): the ids of every word's tokens,
/// one word after the other, and how many tokens each word has.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SplitWords {
    pub ids: Vec<u32>,
    pub lengths: Vec<u32>,
}

/// A merge: the left and the right token's bytes.
pub type Merge = (Vec<u8>, Vec<u8>);

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

/// How pairs of equal counts are ordered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TieBreak {
    /// CS336's: the lexicographically greatest `(left bytes, right bytes)` first.
    #[default]
    Cs336,
    /// Hugging Face `tokenizers`' `BpeTrainer` (byte-level, every byte in its initial alphabet):
    /// the smallest `(left id, right id)` in its ids first. Its byte tokens are numbered in the
    /// order of their byte-level characters (GPT-2's `bytes_to_unicode`: printable bytes keep
    /// their code point, the others map to 256 and up, in byte order), then each merge's new
    /// token in the order made (a merge that makes an existing token's bytes reuses its id), as
    /// here.
    HuggingFace,
    /// Hugging Face `tokenizers`' `ParityBpeTrainer`: the greatest pair of its tokens' strings
    /// (byte-level characters, compared as strings: left first, a prefix before its
    /// extensions). That is CS336's order with each byte ranked by its byte-level character.
    ByteLevelString,
}

/// A byte's rank among Hugging Face's byte-level characters (its code point under GPT-2's
/// `bytes_to_unicode`).
fn byte_level_ranks() -> [u32; 256] {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut ranks = [0u32; 256];
    let mut next = 256;
    for b in 0..=255u8 {
        ranks[b as usize] = if printable(b) {
            u32::from(b)
        } else {
            next += 1;
            next - 1
        };
    }
    ranks
}

/// Every token's bytes, and the token of given bytes.
pub(crate) struct Tokens {
    pub(crate) bytes: Vec<Vec<u8>>,
    ids: FxHashMap<Vec<u8>, TokenId>,
    tie: TieBreak,
    /// Each byte token's rank under Hugging Face's tie-break (see [`TieBreak::HuggingFace`]).
    byte_ranks: [u32; 256],
}

impl Tokens {
    pub(crate) fn new() -> Tokens {
        let bytes: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        let ids = bytes
            .iter()
            .zip(0..)
            .map(|(b, id)| (b.clone(), id))
            .collect();
        Tokens {
            bytes,
            ids,
            tie: TieBreak::Cs336,
            byte_ranks: byte_level_ranks(),
        }
    }

    /// A token's id as Hugging Face's trainer numbers it, up to a shift that keeps the order:
    /// the bytes by their byte-level characters, then the tokens merges made, in order.
    fn hf_rank(&self, id: TokenId) -> u64 {
        if id < 256 {
            u64::from(self.byte_ranks[id as usize])
        } else {
            1024 + u64::from(id)
        }
    }

    /// Two tokens' byte-level strings compared: the first byte that differs decides (by the rank
    /// of its character; the mapping is one to one, so it is the first that differs as bytes),
    /// else the shorter is the smaller.
    fn byte_level_cmp(&self, x: TokenId, y: TokenId) -> Ordering {
        let (x, y) = (&self.bytes[x as usize], &self.bytes[y as usize]);
        match x.iter().zip(y.iter()).find(|(a, b)| a != b) {
            Some((&a, &b)) => self.byte_ranks[a as usize].cmp(&self.byte_ranks[b as usize]),
            None => x.len().cmp(&y.len()),
        }
    }

    /// The token of `left` followed by `right`: an existing one with the same bytes, or a new one.
    pub(crate) fn join(&mut self, left: TokenId, right: TokenId) -> TokenId {
        let mut joined = self.bytes[left as usize].clone();
        joined.extend_from_slice(&self.bytes[right as usize]);
        let next = self.bytes.len() as TokenId;
        let id = *self.ids.entry(joined.clone()).or_insert(next);
        if id == next {
            self.bytes.push(joined);
        }
        id
    }

    /// Notes that token `id` (numbered elsewhere: a parity-aware training's table of all
    /// languages' tokens) is `bytes`. A loop that takes its ids from elsewhere knows the bytes
    /// only of the tokens its own words hold (the others are left empty): those its heap compares.
    pub(crate) fn set(&mut self, id: TokenId, bytes: &[u8]) {
        let index = id as usize;
        if self.bytes.len() <= index {
            self.bytes.resize_with(index + 1, Vec::new);
        }
        if self.bytes[index].is_empty() {
            self.bytes[index] = bytes.to_vec();
        }
    }

    /// The token of `bytes`: an existing one, or a new one (a base tokenizer's token that no
    /// merge replayed so far has made).
    fn intern(&mut self, bytes: &[u8]) -> TokenId {
        if let Some(&id) = self.ids.get(bytes) {
            return id;
        }
        let id = self.bytes.len() as TokenId;
        self.bytes.push(bytes.to_vec());
        self.ids.insert(bytes.to_vec(), id);
        id
    }

    /// Heap order: higher count first; among equal counts, the greater `(left bytes, right
    /// bytes)` (CS336), or the smaller pair of Hugging Face's ids (see [`TieBreak`]).
    fn compare(&self, x: &HeapEntry, y: &HeapEntry) -> Ordering {
        x.count.cmp(&y.count).then_with(|| {
            let (xl, xr) = split_key(x.pair);
            let (yl, yr) = split_key(y.pair);
            match self.tie {
                TieBreak::Cs336 => {
                    let x_bytes = (&self.bytes[xl as usize], &self.bytes[xr as usize]);
                    let y_bytes = (&self.bytes[yl as usize], &self.bytes[yr as usize]);
                    x_bytes.cmp(&y_bytes)
                }
                TieBreak::HuggingFace => {
                    (self.hf_rank(yl), self.hf_rank(yr)).cmp(&(self.hf_rank(xl), self.hf_rank(xr)))
                }
                TieBreak::ByteLevelString => self
                    .byte_level_cmp(xl, yl)
                    .then_with(|| self.byte_level_cmp(xr, yr)),
            }
        })
    }
}

/// Asks the CPU to start loading `value`: the words a merge visits are scattered over memory, and
/// waiting for each in turn would be most of the merge loop's time.
#[inline]
fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is only a hint; it reads nothing and cannot fault, and the pointer
        // comes from a reference, so it is valid anyway.
        unsafe { _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// The count of each pair of two bytes (indexed by `left << 8 | right`) in words `range`, and the
/// words that hold it, ascending.
fn count_byte_pairs(words: &Words, range: std::ops::Range<usize>) -> (Vec<u64>, Vec<Vec<WordId>>) {
    let mut counts = vec![0u64; 1 << 16];
    let mut lists: Vec<Vec<WordId>> = vec![Vec::new(); 1 << 16];
    // The last word noted for each pair, in a small table: reading the end of each pair's list
    // instead would miss the cache every time.
    let mut last_word = vec![WordId::MAX; 1 << 16];
    for word in range {
        let head = words.heads[word];
        let word_id = word as WordId;
        for window in words.symbols[head.start..head.start + head.len as usize].windows(2) {
            let index = (window[0] as usize) << 8 | window[1] as usize;
            counts[index] += head.count;
            if last_word[index] != word_id {
                last_word[index] = word_id;
                lists[index].push(word_id);
            }
        }
    }
    (counts, lists)
}

/// The pairs of `words`' tokens, each with its count and the words that hold it (ascending, each
/// once): what raising every window of every word in turn makes, found by sorting the windows
/// instead. A word split by a base's merges (a SuperBPE stage-2 piece, a run of words) holds tens
/// of tokens, and a corpus's such words millions of pairs: raised one window at a time, each
/// window was a miss in the hash table and another in its pair's growing list; sorted (on every
/// core), each pair is a run of windows, its list made at its size and its bucket written once.
fn index_pairs(words: &Words) -> PairTable {
    use rayon::prelude::*;
    let mut windows: Vec<(PairKey, WordId)> = Vec::with_capacity(words.symbols.len());
    for (word, head) in words.heads.iter().enumerate() {
        let word = word as WordId; // (no more than 2^32 words: checked as they were made)
        let symbols = &words.symbols[head.start..head.start + head.len as usize];
        windows.extend(
            symbols
                .windows(2)
                .map(|window| (pair_key(window[0], window[1]), word)),
        );
    }
    windows.par_sort_unstable();
    // Each pair's record, on every core: the windows cut where a pair's run ends, near the
    // middle of each core's share.
    let shares = rayon::current_num_threads().max(1);
    let mut cuts = vec![0];
    for share in 1..shares {
        let mut at = windows.len() * share / shares;
        while at > *cuts.last().expect("a cut")
            && at < windows.len()
            && windows[at - 1].0 == windows[at].0
        {
            at += 1;
        }
        cuts.push(at.max(*cuts.last().expect("a cut")));
    }
    cuts.push(windows.len());
    let records: Vec<Vec<(PairKey, PairInfo)>> = cuts
        .windows(2)
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|cut| {
            windows[cut[0]..cut[1]]
                .chunk_by(|x, y| x.0 == y.0)
                .map(|run| {
                    let count = run
                        .iter()
                        .map(|&(_, word)| words.heads[word as usize].count)
                        .sum();
                    let held = 1 + run.windows(2).filter(|two| two[0].1 != two[1].1).count();
                    let mut list = Vec::with_capacity(held);
                    list.extend(run.iter().map(|&(_, word)| word));
                    list.dedup();
                    (run[0].0, PairInfo { count, words: list })
                })
                .collect()
        })
        .collect();
    drop(windows);
    let mut pairs = PairTable::with_capacity(records.iter().map(Vec::len).sum());
    for (key, info) in records.into_iter().flatten() {
        pairs.insert_new(key, info);
    }
    pairs
}

/// The state of the merge loop between merges.
pub(crate) struct Trainer {
    /// Whether the heap is kept (a loop that only applies merges chosen elsewhere needs none:
    /// see [`Trainer::unranked`]).
    ranked: bool,
    /// No merge may make a token of more than this many words (see [`MergeLoop::with_max_words`]).
    max_words: Option<usize>,
    words: Words,
    pub(crate) tokens: Tokens,
    pub(crate) pairs: PairTable,
    heap: PairHeap,
    merges_done: usize,
    /// Pairs counted up during the current merge (pushed onto the heap at its end, once each).
    raised: Vec<PairKey>,
    /// The changes that the current merge makes, by each of the two halves of its words.
    changes: [Changes; 2],
    /// When the words are cut where no merge will join them (see [`crate::prune`]): what it
    /// takes to go back to words cut less.
    pruning: Option<Box<Pruning>>,
}

/// The words as they were before they were cut (see [`crate::prune`]), the count below which
/// their pairs were cut, and the merges taken since, to replay on words cut less.
struct Pruning {
    whole: Words,
    threshold: u64,
    taken: Vec<(PairKey, TokenId)>,
}

impl Trainer {
    pub(crate) fn new(counts: &PretokenCounts) -> Trainer {
        let words = Words::from_counts(counts);
        let tokens = Tokens::new();
        // All first pairs are of two bytes: count them in flat tables, not in the hash map; each
        // half of the words on its own thread, the second half's word lists after the first's.
        let middle = words.heads.len() / 2;
        let ((mut byte_pair_counts, mut byte_pair_words), (more_counts, more_words)) = rayon::join(
            || count_byte_pairs(&words, 0..middle),
            || count_byte_pairs(&words, middle..words.heads.len()),
        );
        for ((count, list), (more, more_list)) in byte_pair_counts
            .iter_mut()
            .zip(&mut byte_pair_words)
            .zip(more_counts.into_iter().zip(more_words))
        {
            *count += more;
            if list.is_empty() {
                *list = more_list;
            } else {
                list.extend(more_list);
            }
            // The lists stay as long as their pairs, the big ones (most of their bytes) to the
            // end of training: without the room left by pushing (nearly a third of them, on a 1 GB
            // corpus) they are 17 MB smaller at the merge loop's peak.
            list.shrink_to_fit();
        }
        let mut pairs = PairTable::new();
        let mut heap = PairHeap {
            entries: Vec::new(),
        };
        for (index, list) in byte_pair_words.into_iter().enumerate() {
            let count = byte_pair_counts[index];
            if count == 0 {
                continue;
            }
            let key = pair_key((index >> 8) as TokenId, (index & 0xFF) as TokenId);
            pairs.insert_new(key, PairInfo { count, words: list });
            heap.entries.push(HeapEntry { count, pair: key });
        }
        heap.heapify(&tokens);
        Trainer {
            ranked: true,
            max_words: None,
            words,
            tokens,
            pairs,
            heap,
            merges_done: 0,
            raised: Vec::new(),
            changes: Default::default(),
            pruning: None,
        }
    }

    /// The merge loop's state with each word already split into tokens: `split(word)` gives the
    /// byte lengths of its tokens, in order (summing to the word's length). Used to continue a
    /// tokenizer whose words are not made by replaying merges (tiktoken's token rule).
    fn from_split(
        counts: &PretokenCounts,
        known: &[Merge],
        mut split: impl FnMut(&[u8]) -> Vec<usize>,
    ) -> Trainer {
        Trainer::from_ids(counts, known, |tokens, pretoken| {
            let lengths = split(pretoken);
            assert_eq!(
                lengths.iter().sum::<usize>(),
                pretoken.len(),
                "a split must cover its word"
            );
            let mut offset = 0;
            lengths
                .into_iter()
                .map(|length| {
                    assert!(length > 0, "a split into empty tokens");
                    offset += length;
                    tokens.intern(&pretoken[offset - length..offset])
                })
                .collect()
        })
    }

    /// The merge loop's state with each word already split into tokens: `ids(tokens, word)`
    /// gives the ids of the word's tokens, in order (interning any it needs in `tokens`, which
    /// holds the bytes, then `known`'s tokens, in their merges' order).
    fn from_ids(
        counts: &PretokenCounts,
        known: &[Merge],
        mut ids: impl FnMut(&mut Tokens, &[u8]) -> Vec<TokenId>,
    ) -> Trainer {
        let mut tokens = Tokens::new();
        // A base's tokens first, numbered as replaying its merges numbers them (its merges'
        // order: Hugging Face's tie-break reads it).
        for (left, right) in known {
            let (a, b) = (tokens.intern(left), tokens.intern(right));
            tokens.join(a, b);
        }
        let mut words = Words {
            symbols: Vec::new(),
            heads: Vec::new(),
        };
        for (pretoken, count) in counts.iter() {
            if pretoken.len() < 2 || count == 0 {
                continue;
            }
            let word = ids(&mut tokens, pretoken);
            if word.len() < 2 {
                continue; // one token: it never holds a pair
            }
            WordId::try_from(words.heads.len()).expect("more than 2^32 distinct pre-tokens");
            let start = words.symbols.len();
            words.symbols.extend_from_slice(&word);
            let len =
                u32::try_from(words.symbols.len() - start).expect("a pre-token of 4 GiB or more");
            words.heads.push(WordHead { start, count, len });
        }
        Trainer::starting(tokens, words, None)
    }

    /// [`Trainer::from_ids`] of words split already: `split` holds the ids of the tokens of
    /// each word of `counts` of two bytes or more counted at least once, in the counts' order,
    /// ids of `tokens` (the bytes and a base's tokens).
    fn from_split_ids(
        counts: &PretokenCounts,
        tokens: Tokens,
        expected_merges: Option<usize>,
        split: SplitWords,
    ) -> Trainer {
        let SplitWords {
            ids: mut symbols,
            lengths,
        } = split;
        let mut heads = Vec::with_capacity(lengths.len());
        let (mut read, mut write) = (0usize, 0usize);
        let mut lengths = lengths.into_iter();
        for (_, count) in counts
            .iter()
            .filter(|(pretoken, count)| pretoken.len() >= 2 && *count > 0)
        {
            let len = lengths.next().expect("a split per word") as usize;
            if len >= 2 {
                // (words of one token hold no pair: left out, the others moved down over them)
                symbols.copy_within(read..read + len, write);
                WordId::try_from(heads.len()).expect("more than 2^32 distinct pre-tokens");
                heads.push(WordHead {
                    start: write,
                    count,
                    len: len as u32,
                });
                write += len;
            }
            read += len;
        }
        assert!(
            lengths.next().is_none() && read == symbols.len(),
            "a split per word, and no more"
        );
        symbols.truncate(write);
        Trainer::starting(tokens, Words { symbols, heads }, expected_merges)
    }

    /// The loop on `words` (cut first, if `expected_merges` says it pays: see [`crate::prune`]).
    fn starting(tokens: Tokens, words: Words, expected_merges: Option<usize>) -> Trainer {
        let mut trainer = Trainer {
            ranked: true,
            max_words: None,
            words: Words {
                symbols: Vec::new(),
                heads: Vec::new(),
            },
            tokens,
            pairs: PairTable::new(),
            heap: PairHeap {
                entries: Vec::new(),
            },
            merges_done: 0,
            raised: Vec::new(),
            changes: Default::default(),
            pruning: None,
        };
        match expected_merges.and_then(|merges| Trainer::cut_for(&words, merges)) {
            Some((cut, threshold)) => {
                trainer.pruning = Some(Box::new(Pruning {
                    whole: words,
                    threshold,
                    taken: Vec::new(),
                }));
                trainer.start_on(cut);
            }
            None => trainer.start_on(words),
        }
        trainer.rank_all();
        trainer
    }

    /// `words` cut for a loop expected to take `merges` merges, and the count they were cut
    /// at; None if cutting them does not pay.
    fn cut_for(words: &Words, merges: usize) -> Option<(Words, u64)> {
        let sketch = Sketch::of(words);
        let threshold = sketch.threshold(merges)?;
        Some((crate::prune::cut(words, &sketch, threshold)?, threshold))
    }

    /// Starts the loop on `words`: their pairs counted (see [`Trainer::rank_all`]).
    fn start_on(&mut self, words: Words) {
        self.pairs = index_pairs(&words);
        self.words = words;
    }

    /// Every pair on the heap, with its count now.
    fn rank_all(&mut self) {
        self.heap.entries = self
            .pairs
            .counts()
            .map(|(pair, count)| HeapEntry { count, pair })
            .collect();
        self.heap.heapify(&self.tokens);
    }

    /// Goes back to the words cut at count `lower` (whole, below 2), and takes again the merges
    /// taken so far: the best count fell below the one the words were cut at, or a merge made
    /// the bytes of a token that was there (see [`crate::prune`]).
    fn cut_less(&mut self, lower: u64) {
        let Some(pruning) = self.pruning.take() else {
            return;
        };
        let Pruning {
            whole,
            threshold,
            taken,
        } = *pruning;
        debug_assert!(lower < threshold, "cut less, not more");
        let sketch = (lower > 1).then(|| Sketch::of(&whole));
        match sketch.and_then(|sketch| crate::prune::cut(&whole, &sketch, lower)) {
            Some(cut) => {
                self.pruning = Some(Box::new(Pruning {
                    whole,
                    threshold: lower,
                    taken: Vec::new(),
                }));
                self.start_on(cut);
            }
            None => self.start_on(whole),
        }
        // The merges again, each where the loop made it (they were all counted above the new
        // cut; merge_into notes each in the new pruning's `taken` again): no heap meanwhile,
        // made once at the end.
        let ranked = self.ranked;
        self.ranked = false;
        for &(pair, new) in &taken {
            self.merge_into(pair, new);
        }
        self.ranked = ranked;
        self.merges_done -= taken.len();
        if ranked {
            self.rank_all();
        } else {
            self.heap.entries = Vec::new();
        }
    }

    /// Applies a base tokenizer's merge of `left` and `right`, best or not: every occurrence of
    /// the pair in the words is merged, as if the loop had chosen it. A pair that no word holds
    /// only makes its token, so that later merges of the base can use it.
    fn replay(&mut self, left: &[u8], right: &[u8]) {
        let (a, b) = (self.tokens.intern(left), self.tokens.intern(right));
        self.apply(pair_key(a, b));
    }

    /// Applies the merge of `pair` (of tokens this loop knows), chosen here or elsewhere: every
    /// occurrence merged, or, where no word holds it, only its token made. Returns how many
    /// tokens fewer the words hold (see [`Trainer::merge`]).
    pub(crate) fn apply(&mut self, pair: PairKey) -> u64 {
        if self.pairs.contains_key(pair) {
            self.merge(pair)
        } else {
            let (a, b) = split_key(pair);
            self.tokens.join(a, b);
            0
        }
    }

    /// The words of the token that merging `pair` makes: its runs of bytes other than the space.
    fn words_in(&self, pair: PairKey) -> usize {
        let (a, b) = split_key(pair);
        let bytes = self.tokens.bytes[a as usize]
            .iter()
            .chain(&self.tokens.bytes[b as usize]);
        let (mut words, mut after_space) = (0, true);
        for &byte in bytes {
            if byte != b' ' && after_space {
                words += 1;
            }
            after_space = byte == b' ';
        }
        words
    }

    /// Swaps the tables a merge notes its changes in (as big as the tokens, grown as they are
    /// made) with `scratch`: loops that merge one after another can share one set.
    pub(crate) fn swap_scratch(&mut self, scratch: &mut [Changes; 2]) {
        std::mem::swap(&mut self.changes, scratch);
    }

    /// The loop without its heap: it never chooses a pair, only applies merges chosen elsewhere
    /// ([`Trainer::apply_as`]), to know how many tokens each saves (a development set's).
    pub(crate) fn unranked(mut self) -> Trainer {
        self.ranked = false;
        self.heap.entries = Vec::new();
        self
    }

    /// The same loop with pairs of equal counts ordered by `tie`.
    pub(crate) fn set_tie_break(&mut self, tie: TieBreak) {
        self.tokens.tie = tie;
        self.heap.heapify(&self.tokens);
    }

    /// The best pair, or None when no pair is left.
    pub(crate) fn best_pair(&mut self) -> Option<PairKey> {
        loop {
            let Some(&top) = self.heap.entries.first() else {
                if let Some(pruning) = &self.pruning {
                    // (the pairs left are across the cuts, if any)
                    self.cut_less(pruning.threshold / 4);
                    continue;
                }
                return None;
            };
            let current = self.pairs.count(top.pair).unwrap_or(0);
            if current == top.count {
                if self
                    .pruning
                    .as_ref()
                    .is_some_and(|pruning| current < pruning.threshold)
                {
                    // The next merges are counted about `current` times: words cut at half that
                    // hold them all, most likely.
                    self.cut_less(current / 2);
                    continue;
                }
                if self
                    .max_words
                    .is_some_and(|most| self.words_in(top.pair) > most)
                {
                    // Never merged: off the heap (back on it if its count rises, off again then).
                    self.heap.pop(&self.tokens);
                    continue;
                }
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

    /// Lowers a pair's count by `by` (occurrences that a merge took away); at 0 it is dropped,
    /// with its word list.
    fn lower(&mut self, key: PairKey, by: u64) {
        self.pairs.lower(key, by);
    }

    /// Raises a pair's count by `by` (occurrences that a merge made, in `words`, ascending).
    fn raise(&mut self, key: PairKey, by: u64, words: Vec<WordId>) {
        let list = self.pairs.raise(key, by);
        if list.is_empty() {
            *list = words;
        } else {
            // Only when a merge makes bytes that were already a token (never, in practice): the
            // list may then be out of order (see `merge`).
            list.extend(words);
        }
        self.raised.push(key);
    }

    /// Merges `pair` everywhere; returns how many tokens fewer the words hold (weighted by their
    /// counts): the occurrences merged, which overlapping ones (`aaa`) make fewer than the pair's count.
    pub(crate) fn merge(&mut self, pair: PairKey) -> u64 {
        let (a, b) = split_key(pair);
        let known = self.tokens.bytes.len();
        let new = self.tokens.join(a, b);
        let shortened = self.merge_into(pair, new);
        if self.pruning.is_some() && (new as usize) < known {
            // A token with two histories: the cuts' bound holds for one of them only.
            self.cut_less(0);
        }
        shortened
    }

    /// Merges `pair` everywhere into token `new`, numbered elsewhere (see [`Tokens::set`]), whose
    /// bytes are `bytes`: as [`Trainer::merge`], if this loop's words hold the pair; else nothing.
    pub(crate) fn apply_as(&mut self, pair: PairKey, new: TokenId, bytes: &[u8]) -> u64 {
        if !self.pairs.contains_key(pair) {
            return 0;
        }
        self.tokens.set(new, bytes);
        self.merge_into(pair, new)
    }

    fn merge_into(&mut self, pair: PairKey, new: TokenId) -> u64 {
        let (a, b) = split_key(pair);
        let tokens = self.tokens.bytes.len();
        for changes in &mut self.changes {
            changes.grow(tokens);
        }
        let info = self.pairs.remove(pair).expect("the best pair is counted");
        let mut candidates = info.words;
        // Ascending without repeats, unless lists were joined (see `raise`): one pass over the
        // list to tell, cheap beside the visit of each word that follows.
        if !candidates.is_sorted_by(|x, y| x < y) {
            candidates.sort_unstable();
            candidates.dedup();
        }
        let merge = PairMerge { a, b, new };
        let [first, second] = &mut self.changes;
        if candidates.len() < PARALLEL_WORDS {
            merge.apply(
                &mut self.words.symbols,
                0,
                &mut self.words.heads,
                0,
                &candidates,
                first,
            );
        } else {
            // Two halves of the words, each with its own changes, on two threads: the words of the
            // second half come after those of the first in both tables, so each half can own its
            // part of them.
            let middle = candidates[candidates.len() / 2];
            let symbol_middle = self.words.heads[middle as usize].start;
            let (symbols_low, symbols_high) = self.words.symbols.split_at_mut(symbol_middle);
            let (heads_low, heads_high) = self.words.heads.split_at_mut(middle as usize);
            let (words_low, words_high) =
                candidates.split_at(candidates.partition_point(|&w| w < middle));
            rayon::join(
                || merge.apply(symbols_low, 0, heads_low, 0, words_low, first),
                || {
                    merge.apply(
                        symbols_high,
                        symbol_middle,
                        heads_high,
                        middle,
                        words_high,
                        second,
                    )
                },
            );
        }
        drop(candidates);
        // Hand the changes to the pair table: a few hash lookups per neighbour, not per word.
        let shortened = self.changes[0].shortened + self.changes[1].shortened;
        self.changes[0].shortened = 0;
        self.changes[1].shortened = 0;
        let (left, right, twins) = Changes::drain_both(&mut self.changes);
        for (neighbour, count, words) in left {
            if neighbour != a || a != b {
                self.lower(pair_key(neighbour, a), count);
            }
            self.raise(pair_key(neighbour, new), count, words);
        }
        for (neighbour, count, words) in right {
            if neighbour != b || a != b {
                self.lower(pair_key(b, neighbour), count);
            }
            self.raise(pair_key(new, neighbour), count, words);
        }
        if twins.count > 0 {
            if pair_key(b, a) != pair {
                self.lower(pair_key(b, a), twins.count);
            }
            self.raise(pair_key(new, new), twins.count, twins.words);
        }
        debug_assert!(
            !self.pairs.contains_key(pair),
            "a merged pair is left nowhere"
        );
        // A pair raised twice in one merge (a neighbour on both sides) is pushed once.
        let mut raised = std::mem::take(&mut self.raised);
        if self.ranked {
            raised.sort_unstable();
            raised.dedup();
            for &key in &raised {
                let count = self.pairs.count(key).expect("a pair counted up is counted");
                self.heap.push(HeapEntry { count, pair: key }, &self.tokens);
            }
        }
        raised.clear();
        self.raised = raised;
        self.merges_done += 1;
        if let Some(pruning) = &mut self.pruning {
            pruning.taken.push((pair, new));
        }
        shortened
    }
}

/// Merges with at least this many candidate words are done on two threads (in tests, nearly all:
/// both ways must give the same result).
const PARALLEL_WORDS: usize = if cfg!(test) { 4 } else { 4096 };

/// One merge: `(a, b)` becomes `new`.
#[derive(Clone, Copy)]
struct PairMerge {
    a: TokenId,
    b: TokenId,
    new: TokenId,
}

impl PairMerge {
    /// Merges in each of `words` (ascending), noting the pairs that change in `changes`.
    /// `symbols` and `heads` are parts of the word tables, starting at symbol `symbol_offset` and
    /// word `word_offset`, that hold all of `words`.
    fn apply(
        self,
        symbols: &mut [TokenId],
        symbol_offset: usize,
        heads: &mut [WordHead],
        word_offset: WordId,
        words: &[WordId],
        changes: &mut Changes,
    ) {
        // Prefetch distances, in words ahead: records first, then (once they are in) tokens.
        const HEAD_AHEAD: usize = 16;
        const SYMBOLS_AHEAD: usize = 8;
        for (index, &word) in words.iter().enumerate() {
            if let Some(&ahead) = words.get(index + HEAD_AHEAD) {
                prefetch(&heads[(ahead - word_offset) as usize]);
            }
            if let Some(&ahead) = words.get(index + SYMBOLS_AHEAD) {
                prefetch(&symbols[heads[(ahead - word_offset) as usize].start - symbol_offset]);
            }
            let head = &mut heads[(word - word_offset) as usize];
            let start = head.start - symbol_offset;
            let len = head.len as usize;
            if let Some(new_len) =
                self.apply_in_word(&mut symbols[start..start + len], word, head.count, changes)
            {
                head.len = new_len as u32;
                changes.shortened += (len - new_len) as u64 * head.count;
            }
        }
    }

    /// Merges in one word's tokens (which may no longer hold the pair), in place; its new length,
    /// or None if it did not hold the pair.
    #[inline]
    fn apply_in_word(
        self,
        symbols: &mut [TokenId],
        word: WordId,
        count: u64,
        changes: &mut Changes,
    ) -> Option<usize> {
        let PairMerge { a, b, new } = self;
        let len = symbols.len();
        let first = symbols.windows(2).position(|w| w[0] == a && w[1] == b)?;
        let mut read = first;
        let mut write = first;
        // Whether the token just written was made by this merge (a `new` token that was there
        // before is not: the pair it starts with is then unchanged).
        let mut wrote_new = false;
        while read < len {
            if read + 1 < len && symbols[read] == a && symbols[read + 1] == b {
                if write > 0 {
                    if wrote_new {
                        // (b, a) between two merged pairs becomes (new, new).
                        changes.twins.count += count;
                        if changes.twins.words.last() != Some(&word) {
                            changes.twins.words.push(word);
                        }
                    } else {
                        changes.left.note(symbols[write - 1], count, word);
                    }
                }
                if read + 2 < len {
                    let after = symbols[read + 2];
                    let next_merges_too = after == a && read + 3 < len && symbols[read + 3] == b;
                    if !next_merges_too {
                        changes.right.note(after, count, word);
                    }
                }
                symbols[write] = new;
                wrote_new = true;
                read += 2;
            } else {
                symbols[write] = symbols[read];
                wrote_new = false;
                read += 1;
            }
            write += 1;
        }
        Some(write)
    }
}

/// The pairs that one merge changes in some words: next to the new tokens on their left, on
/// their right, and between two of them.
#[derive(Default)]
pub(crate) struct Changes {
    left: Neighbours,
    right: Neighbours,
    twins: Twins,
    /// Tokens fewer in the words (weighted by their counts).
    shortened: u64,
}

/// Per neighbour token: the count and the words, ascending.
type NeighbourChanges = Vec<(TokenId, u64, Vec<WordId>)>;

impl Changes {
    fn grow(&mut self, tokens: usize) {
        self.left.grow(tokens);
        self.right.grow(tokens);
    }

    /// The changes of both halves of a merge together (the first half's words before the
    /// second's), leaving both empty.
    fn drain_both(halves: &mut [Changes; 2]) -> (NeighbourChanges, NeighbourChanges, Twins) {
        let [first, second] = halves;
        let left = join_neighbours(first.left.drain(), second.left.drain());
        let right = join_neighbours(first.right.drain(), second.right.drain());
        let mut twins = std::mem::take(&mut first.twins);
        let more = std::mem::take(&mut second.twins);
        twins.count += more.count;
        twins.words.extend(more.words);
        (left, right, twins)
    }
}

/// Two lists sorted by neighbour joined into one: counts added, word lists one after the other.
fn join_neighbours(first: NeighbourChanges, second: NeighbourChanges) -> NeighbourChanges {
    if second.is_empty() {
        return first;
    }
    let mut joined = Vec::with_capacity(first.len() + second.len());
    let mut second = second.into_iter().peekable();
    for (neighbour, count, mut words) in first {
        while let Some(item) = second.next_if(|item| item.0 < neighbour) {
            joined.push(item);
        }
        if let Some((_, more, more_words)) = second.next_if(|item| item.0 == neighbour) {
            words.extend(more_words);
            joined.push((neighbour, count + more, words));
        } else {
            joined.push((neighbour, count, words));
        }
    }
    joined.extend(second);
    joined
}

/// The occurrences of `(new, new)` that one merge makes, and where.
#[derive(Default)]
struct Twins {
    count: u64,
    words: Vec<WordId>,
}

/// The neighbours of one side of a merge's new tokens: per neighbour token, how many occurrences
/// (weighted) and in which words; dense tables indexed by token, so that noting one is cheap.
#[derive(Default)]
struct Neighbours {
    counts: Vec<u64>,
    words: Vec<Vec<WordId>>,
    seen: Vec<TokenId>,
}

impl Neighbours {
    fn grow(&mut self, tokens: usize) {
        self.counts.resize(tokens, 0);
        self.words.resize_with(tokens, Vec::new);
    }

    #[inline]
    fn note(&mut self, neighbour: TokenId, count: u64, word: WordId) {
        let index = neighbour as usize;
        if self.counts[index] == 0 {
            self.seen.push(neighbour);
        }
        self.counts[index] += count;
        let words = &mut self.words[index];
        if words.last() != Some(&word) {
            words.push(word);
        }
    }

    /// Every neighbour noted, with its count and words, leaving the tables empty.
    fn drain(&mut self) -> Vec<(TokenId, u64, Vec<WordId>)> {
        let mut seen = std::mem::take(&mut self.seen);
        // Neighbour order does not change the result; sorted, it does not depend on word order.
        seen.sort_unstable();
        seen.into_iter()
            .map(|neighbour| {
                let index = neighbour as usize;
                let count = std::mem::take(&mut self.counts[index]);
                (neighbour, count, std::mem::take(&mut self.words[index]))
            })
            .collect()
    }
}

/// The merge loop, one merge at a time: an iterator of the merges in order, best first.
///
/// It keeps no reference to the counts it was made from, so they can be freed before merging.
pub struct MergeLoop {
    trainer: Trainer,
}

impl MergeLoop {
    /// Prepares the merge loop on pre-token counts (the result does not depend on their order).
    pub fn new(counts: &PretokenCounts) -> MergeLoop {
        MergeLoop {
            trainer: Trainer::new(counts),
        }
    }

    /// Prepares the merge loop to continue a base tokenizer's training: the words are first split
    /// by the base's merges (each applied in order to every word, the pair rule of GPT-2 and
    /// CS336); the loop then yields only new merges. Continuing from the first `k` merges of a
    /// training on the same counts yields that training's merges after the `k`th.
    pub fn with_base(counts: &PretokenCounts, base: &[Merge]) -> MergeLoop {
        let mut trainer = Trainer::new(counts);
        for (left, right) in base {
            trainer.replay(left, right);
        }
        MergeLoop { trainer }
    }

    /// Prepares the merge loop to continue a base tokenizer whose words are split by a rule other
    /// than replaying its merges (tiktoken's token rule): `split(word)` gives the byte lengths of
    /// the word's tokens under the base, in order. The loop then learns new merges over those
    /// tokens with CS336's rules, a token being its bytes (a merge that makes the bytes of a base
    /// token makes that token).
    pub fn with_split_words(
        counts: &PretokenCounts,
        split: impl FnMut(&[u8]) -> Vec<usize>,
    ) -> MergeLoop {
        MergeLoop {
            trainer: Trainer::from_split(counts, &[], split),
        }
    }

    /// The same loop as [`MergeLoop::with_base`], the words split already: `split` holds the ids
    /// of the tokens of each word of `counts` of two bytes or more counted at least once, in the
    /// counts' order, once the base's merges are applied (found by a faster way than replaying
    /// them on every word: an encoder of the base's merges, when it splits as the replay would),
    /// a byte being its value and the token of the base's merge `i` being `256 + i`. So each of the
    /// base's merges must make bytes no earlier token has, from tokens made before it (else
    /// None: use [`MergeLoop::with_base`]). `expected_merges`: about how many merges will be
    /// taken, if known (the loop may then work on fewer, shorter words: the same merges, faster
    /// when the words are long, as a SuperBPE stage's are).
    pub fn with_base_ids(
        counts: &PretokenCounts,
        base: &[Merge],
        expected_merges: Option<usize>,
        split: SplitWords,
    ) -> Option<MergeLoop> {
        let mut tokens = Tokens::new();
        for (number, (left, right)) in base.iter().enumerate() {
            let (a, b) = (tokens.ids.get(left)?, tokens.ids.get(right)?);
            if tokens.join(*a, *b) as usize != 256 + number {
                return None;
            }
        }
        Some(MergeLoop {
            trainer: Trainer::from_split_ids(counts, tokens, expected_merges, split),
        })
    }
}

impl MergeLoop {
    /// The same loop, except that it never merges a pair whose token would hold more than
    /// `max_words` words (runs of bytes other than the space: SuperBPE's limit on its superword
    /// tokens); the base's merges, replayed, are not limited.
    pub fn with_max_words(mut self, max_words: usize) -> MergeLoop {
        self.trainer.max_words = Some(max_words);
        self
    }

    /// The same loop with pairs of equal counts ordered by `tie` (CS336's by default).
    pub fn with_tie_break(mut self, tie: TieBreak) -> MergeLoop {
        let trainer = &mut self.trainer;
        trainer.tokens.tie = tie;
        trainer.heap.heapify(&trainer.tokens);
        self
    }
}

impl Iterator for MergeLoop {
    type Item = Merge;

    /// The next merge, or None when no pair of tokens is left.
    fn next(&mut self) -> Option<Merge> {
        let trainer = &mut self.trainer;
        let pair = trainer.best_pair()?;
        let (a, b) = split_key(pair);
        let merge = (
            trainer.tokens.bytes[a as usize].clone(),
            trainer.tokens.bytes[b as usize].clone(),
        );
        trainer.merge(pair);
        Some(merge)
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
    let mut merges = Vec::new();
    for merge in MergeLoop::new(counts).take(max_merges) {
        merges.push(merge);
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
        let words: Vec<(Vec<Vec<u8>>, u64)> = counts
            .iter()
            .map(|(w, c)| (w.iter().map(|&b| vec![b]).collect(), *c))
            .collect();
        brute_force_words(words, max_merges)
    }

    /// The naive reference on words already split into tokens.
    fn brute_force_words(mut words: Vec<(Vec<Vec<u8>>, u64)>, max_merges: usize) -> Vec<Merge> {
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

    /// The naive reference of Hugging Face's order: equal counts to the smallest pair of HF ids
    /// (bytes by their byte-level character, GPT-2's `bytes_to_unicode`, written out here
    /// independently; then tokens in the order merges made them, an existing token keeping its id).
    fn brute_force_hf(counts: &[(Vec<u8>, u64)], max_merges: usize) -> Vec<Merge> {
        let mut mapped: Vec<u32> = Vec::new();
        let printable: Vec<u32> = (33..=126).chain(161..=172).chain(174..=255).collect();
        let mut extra = 256;
        for byte in 0..256u32 {
            if printable.contains(&byte) {
                mapped.push(byte);
            } else {
                mapped.push(extra);
                extra += 1;
            }
        }
        let mut ids: HashMap<Vec<u8>, u64> = (0..256usize)
            .map(|b| (vec![b as u8], u64::from(mapped[b])))
            .collect();
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
            let Some(best) = pair_counts.into_iter().max_by(|x, y| {
                x.1.cmp(&y.1)
                    .then_with(|| (ids[&y.0 .0], ids[&y.0 .1]).cmp(&(ids[&x.0 .0], ids[&x.0 .1])))
            }) else {
                break;
            };
            let (left, right) = best.0;
            let joined = [left.clone(), right.clone()].concat();
            let next = 1000 + merges.len() as u64;
            ids.entry(joined.clone()).or_insert(next);
            for (word, _) in &mut words {
                let mut merged = Vec::new();
                let mut i = 0;
                while i < word.len() {
                    if i + 1 < word.len() && word[i] == left && word[i + 1] == right {
                        merged.push(joined.clone());
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

    #[test]
    fn hf_tie_break_matches_its_brute_force_on_generated_counts() {
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        for _ in 0..300 {
            let counts = random_counts(&mut rng);
            let max_merges = [1, 3, 20, 1000][rng.below(4) as usize];
            let table: PretokenCounts = counts.iter().map(|(w, c)| (w.as_slice(), *c)).collect();
            let ours: Vec<Merge> = MergeLoop::new(&table)
                .with_tie_break(TieBreak::HuggingFace)
                .take(max_merges)
                .collect();
            assert_eq!(ours, brute_force_hf(&counts, max_merges), "{counts:?}");
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
    fn continuing_from_the_first_merges_gives_the_rest() {
        let mut rng = Rng(1515);
        for _ in 0..40 {
            let counts = random_counts(&mut rng);
            let all = ours(&counts, 500);
            let table: PretokenCounts = counts.iter().map(|(w, c)| (w.as_slice(), *c)).collect();
            for k in [0, 1, 5, 50] {
                let k = k.min(all.len());
                let rest: Vec<Merge> = MergeLoop::with_base(&table, &all[..k]).collect();
                assert_eq!(rest, all[k..], "{counts:?} from {k}");
            }
        }
    }

    /// A split of `word` into tokens that depends only on the word (as a base tokenizer's does).
    fn some_split(word: &[u8]) -> Vec<usize> {
        let mut lengths = Vec::new();
        let mut rest = word.len();
        let mut state = word.iter().fold(0x9e37_79b9_u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        while rest > 0 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let length = ((state >> 33) % 3 + 1).min(rest as u64) as usize;
            lengths.push(length);
            rest -= length;
        }
        lengths
    }

    #[test]
    fn split_words_learn_the_merges_of_the_brute_force_on_the_same_tokens() {
        let mut rng = Rng(1616);
        for _ in 0..40 {
            let counts = random_counts(&mut rng);
            let table: PretokenCounts = counts.iter().map(|(w, c)| (w.as_slice(), *c)).collect();
            let words: Vec<(Vec<Vec<u8>>, u64)> = counts
                .iter()
                .map(|(word, count)| {
                    let mut offset = 0;
                    let tokens = some_split(word)
                        .into_iter()
                        .map(|length| {
                            offset += length;
                            word[offset - length..offset].to_vec()
                        })
                        .collect();
                    (tokens, *count)
                })
                .collect();
            let ours: Vec<Merge> = MergeLoop::with_split_words(&table, some_split)
                .take(300)
                .collect();
            assert_eq!(ours, brute_force_words(words, 300), "{counts:?}");
        }
    }

    #[test]
    fn split_into_bytes_is_the_plain_merge_loop() {
        let mut rng = Rng(1717);
        for _ in 0..20 {
            let counts = random_counts(&mut rng);
            let table: PretokenCounts = counts.iter().map(|(w, c)| (w.as_slice(), *c)).collect();
            let split: Vec<Merge> =
                MergeLoop::with_split_words(&table, |word| vec![1; word.len()]).collect();
            assert_eq!(split, ours(&counts, usize::MAX));
        }
    }

    /// Runs of a few short words, as SuperBPE's second stage counts them: long words, most of
    /// them seen once, whose tokens repeat from word to word.
    fn runs_of_words(rng: &mut Rng) -> Vec<(Vec<u8>, u64)> {
        // (" t" "he" and " th" "e" both make " the")
        let vocabulary: [&[u8]; 10] = [
            b" the", b" a", b" cat", b" sat", b" on", b"at", b" th", b"e", b" t", b"he",
        ];
        let mut map: HashMap<Vec<u8>, u64> = HashMap::new();
        for _ in 0..10 + rng.below(60) {
            let words = 1 + rng.below(12);
            let run: Vec<u8> = (0..words)
                .flat_map(|_| vocabulary[rng.below(vocabulary.len() as u64) as usize].to_vec())
                .collect();
            *map.entry(run).or_default() += if rng.below(6) == 0 {
                1 + rng.below(40)
            } else {
                1
            };
        }
        map.into_iter().collect()
    }

    /// The ids of `word`'s tokens once `base` is replayed on it (a byte its value, the token
    /// of merge `i` 256 + `i`), naively.
    fn replayed_ids(word: &[u8], base: &[Merge]) -> Vec<u32> {
        let mut tokens: Vec<Vec<u8>> = word.iter().map(|&b| vec![b]).collect();
        for (left, right) in base {
            let mut merged = Vec::new();
            let mut i = 0;
            while i < tokens.len() {
                if i + 1 < tokens.len() && &tokens[i] == left && &tokens[i + 1] == right {
                    merged.push([left.as_slice(), right].concat());
                    i += 2;
                } else {
                    merged.push(tokens[i].clone());
                    i += 1;
                }
            }
            tokens = merged;
        }
        tokens
            .iter()
            .map(|token| match token.as_slice() {
                [byte] => u32::from(*byte),
                bytes => {
                    let at = base
                        .iter()
                        .position(|(l, r)| [l.as_slice(), r].concat() == bytes);
                    256 + at.expect("a token of the base") as u32
                }
            })
            .collect()
    }

    /// Continues `base` on `counts` for up to `merges` merges with words cut for a loop of
    /// `guess` merges, sent back to words cut less (whole: `back.1`) after merge `back.0`, if
    /// given; also whether the words were cut at first.
    fn continued_with_a_guess(
        counts: &[(Vec<u8>, u64)],
        base: &[Merge],
        guess: usize,
        merges: usize,
        back: Option<(usize, bool)>,
    ) -> Option<(Vec<Merge>, bool)> {
        let table: PretokenCounts = counts.iter().map(|(w, c)| (w.as_slice(), *c)).collect();
        let mut split = SplitWords::default();
        for (word, _) in table.iter().filter(|(w, c)| w.len() >= 2 && *c > 0) {
            let ids = replayed_ids(word, base);
            split.lengths.push(ids.len() as u32);
            split.ids.extend(ids);
        }
        let mut merge_loop = MergeLoop::with_base_ids(&table, base, Some(guess), split)?;
        let cut = merge_loop.trainer.pruning.is_some();
        let mut learned = Vec::new();
        while learned.len() < merges {
            if back.is_some_and(|(after, _)| after == learned.len()) {
                let threshold = merge_loop
                    .trainer
                    .pruning
                    .as_ref()
                    .map_or(0, |p| p.threshold);
                let whole = back.is_some_and(|(_, whole)| whole);
                merge_loop
                    .trainer
                    .cut_less(if whole { 0 } else { threshold / 2 });
            }
            let Some(merge) = merge_loop.next() else {
                break;
            };
            learned.push(merge);
        }
        Some((learned, cut))
    }

    #[test]
    fn words_cut_for_a_guess_of_merges_learn_what_whole_words_learn() {
        // Guesses far too small (the loop goes back to words cut less, or whole, to go on) and
        // about right; and the loop sent back at a random merge, as a merge that makes a token a
        // second way sends it (" t" "he" after " th" "e"; the cuts' bound is then unsure).
        let mut rng = Rng(4242);
        let mut cut = 0;
        for round in 0..300 {
            let counts = if round % 3 == 0 {
                random_counts(&mut rng)
            } else {
                runs_of_words(&mut rng)
            };
            let all = ours(&counts, 400);
            let k = [0, 3, 8, 20][rng.below(4) as usize].min(all.len());
            let table: PretokenCounts = counts.iter().map(|(w, c)| (w.as_slice(), *c)).collect();
            let whole: Vec<Merge> = MergeLoop::with_base(&table, &all[..k]).collect();
            assert_eq!(whole, all[k..]);
            for guess in [1, 4, 30, 1000] {
                let back = (rng.below(2) == 0).then(|| {
                    (
                        rng.below(1 + whole.len() as u64) as usize,
                        rng.below(2) == 0,
                    )
                });
                let Some((learned, was_cut)) =
                    continued_with_a_guess(&counts, &all[..k], guess, usize::MAX, back)
                else {
                    continue; // (a base whose merges make a token twice: with_base only)
                };
                assert_eq!(
                    learned, whole,
                    "{counts:?} from {k}, guessing {guess}, back {back:?}"
                );
                cut += usize::from(was_cut);
                let some = guess.min(whole.len());
                let (first, _) = continued_with_a_guess(&counts, &all[..k], guess, some, None)
                    .expect("as above");
                assert_eq!(first, whole[..some]);
            }
        }
        assert!(cut > 200, "words cut {cut} times");
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
