//! Words cut where no merge will join their tokens, and the pieces that are alike counted once.
//!
//! A word split by a base's merges (a SuperBPE stage-2 piece: a run of ordinary words) holds tens
//! of tokens, and nearly every such word occurs once: the merge loop would visit each of them,
//! whole, for every merge it takes part in. But a pair that merging ever makes across the
//! boundary between two of a word's first tokens `x y` ends in `x` and starts with `y`, so each
//! of its occurrences stands on an occurrence of `(x, y)`: its count is at most `(x, y)`'s first
//! count. Merged pairs are the most frequent, and the best count never rises (every occurrence of
//! a pair that a merge makes stands on one of the pair merged). So while every merge taken has a
//! count of at least `T`, no merge joins across a boundary whose pair was first counted fewer
//! than `T` times: the words can be cut there, and the parts that are alike (" of the") made one
//! word with their counts added. Every pair counted `T` times or more keeps its count, and each
//! merge is made where it would be in the whole words: the loop takes the same merges.
//!
//! `T` is chosen so that the pairs counted `T` times or more are a few times as many as the
//! merges expected. Should the best count still fall below it, or should a merge make the bytes
//! of a token already there (the token then has two histories, and the bound above one of
//! them), the loop goes back to words cut at a lower `T` (at last, whole ones) and replays the
//! merges taken so far: slower, never different.
//!
//! The first counts are estimated in a sketch, a table of counts indexed by a hash of the pair,
//! where pairs that share a slot add up: an estimate is never below the count, so a cut made on
//! it is safe, and the table is small and has no keys to compare.

use rustc_hash::FxHashMap;

use crate::pairs::PairKey;
use crate::words::{pair_key, TokenId, WordHead, Words};

/// The pairs counted `T` times or more are this many times the merges expected, in halves (two
/// and a half: on wiki_en_57M's SuperBPE pieces, `T` is then 77 to 83 % of the last merge's count
/// for t at 50, 80 and 90 % of 32,000; at twice as many, 93 to 98 %, too near: a loop that goes
/// back to words cut less, replaying its merges, takes 1.7 times as long).
const HALF_PAIRS_PER_MERGE: usize = 5;

/// Words are cut only if at most this share of their tokens' pairs is kept (below, in percent).
const MOST_KEPT_PERCENT: usize = 70;

/// First counts of pairs, estimated from above: see the module's documentation.
pub(crate) struct Sketch {
    slots: Vec<u32>,
    shift: u32,
}

impl Sketch {
    /// The sketch of `words`' pairs, each half of the words on a thread of its own.
    pub(crate) fn of(words: &Words) -> Sketch {
        let pairs = words.symbols.len().saturating_sub(words.heads.len());
        // About two slots a pair (most pairs occur once), 8 MB at most: a bigger table (fewer pairs
        // sharing a slot) cut little more, and took four times as long to fill, out of the cache.
        let bits = (2 * pairs)
            .next_power_of_two()
            .trailing_zeros()
            .clamp(10, 21);
        let middle = words.heads.len() / 2;
        let (mut slots, more) = rayon::join(
            || Sketch::count(words, &words.heads[..middle], bits),
            || Sketch::count(words, &words.heads[middle..], bits),
        );
        for (slot, more) in slots.iter_mut().zip(more) {
            *slot = slot.saturating_add(more);
        }
        Sketch {
            slots,
            shift: 64 - bits,
        }
    }

    fn count(words: &Words, heads: &[WordHead], bits: u32) -> Vec<u32> {
        let shift = 64 - bits;
        let mut slots = vec![0u32; 1 << bits];
        for head in heads {
            // (a count above 2^32 saturates: still no estimate below a count the loop can reach)
            let count = u32::try_from(head.count).unwrap_or(u32::MAX);
            for window in words.symbols[head.start..head.start + head.len as usize].windows(2) {
                let slot = &mut slots[slot_of(pair_key(window[0], window[1]), shift)];
                *slot = slot.saturating_add(count);
            }
        }
        slots
    }

    /// Which slots count `threshold` or more, a bit each: what cutting reads, for every pair
    /// of every word, from a table a thirty-second the size (it stays in the processor's cache).
    fn at_least(&self, threshold: u64) -> Kept {
        let mut bits = vec![0u64; self.slots.len().div_ceil(64)];
        for (slot, &count) in self.slots.iter().enumerate() {
            if u64::from(count) >= threshold {
                bits[slot / 64] |= 1 << (slot % 64);
            }
        }
        Kept {
            bits,
            shift: self.shift,
        }
    }

    /// The `T` to cut at, for a loop expected to take `merges` merges: the count that a few
    /// times as many slots reach; None when cutting would not pay (too few pairs are counted
    /// that often).
    pub(crate) fn threshold(&self, merges: usize) -> Option<u64> {
        let rank = (merges.saturating_mul(HALF_PAIRS_PER_MERGE) / 2).max(1);
        let mut counted: Vec<u32> = self.slots.iter().copied().filter(|&c| c > 1).collect();
        if counted.len() <= rank {
            return None;
        }
        let (_, &mut at, _) = counted.select_nth_unstable_by(rank, |x, y| y.cmp(x));
        (at > 1).then_some(u64::from(at))
    }
}

/// The pairs a cut keeps together (see [`Sketch::at_least`]): those whose slot counts enough.
struct Kept {
    bits: Vec<u64>,
    shift: u32,
}

impl Kept {
    #[inline]
    fn holds(&self, pair: PairKey) -> bool {
        let slot = slot_of(pair, self.shift);
        self.bits[slot / 64] >> (slot % 64) & 1 == 1
    }
}

#[inline]
fn slot_of(pair: PairKey, shift: u32) -> usize {
    (pair.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize
}

/// `words` cut between two tokens whose pair the sketch counts fewer than `threshold` times,
/// each part of two tokens or more a word, parts alike one word (their counts added); or None
/// when too little would be cut for it to pay.
pub(crate) fn cut(words: &Words, sketch: &Sketch, threshold: u64) -> Option<Words> {
    // Each half of the words on a thread of its own, the second half's parts then added to the
    // first's (fewer than the words: parts repeat).
    let middle = words.heads.len() / 2;
    let together = sketch.at_least(threshold);
    let ((mut parts, kept, all), (more, more_kept, more_all)) = rayon::join(
        || cut_some(words, &words.heads[..middle], &together),
        || cut_some(words, &words.heads[middle..], &together),
    );
    if (kept + more_kept) * 100 > (all + more_all) * MOST_KEPT_PERCENT {
        return None;
    }
    parts.absorb(more);
    Some(parts.into_words(&words.symbols))
}

/// The parts of the words of `heads` (see [`cut`]), with their counts; and how many of the
/// words' pairs they keep, of how many.
fn cut_some<'w>(
    words: &'w Words,
    heads: &[WordHead],
    together: &Kept,
) -> (Parts<'w>, usize, usize) {
    let mut parts = Parts::default();
    let (mut kept, mut all) = (0usize, 0usize);
    for head in heads {
        let symbols = &words.symbols[head.start..head.start + head.len as usize];
        all += symbols.len().saturating_sub(1);
        let mut start = 0;
        for end in 1..=symbols.len() {
            if end < symbols.len() && together.holds(pair_key(symbols[end - 1], symbols[end])) {
                continue;
            }
            if end - start >= 2 {
                kept += end - start - 1;
                parts.add(&symbols[start..end], head.start + start, head.count);
            }
            start = end;
        }
    }
    (parts, kept, all)
}

/// Distinct parts and their counts. A part of up to five tokens under 2^24 (most are) is keyed by
/// its tokens packed in one integer with its length, hashed and compared at once, and found in
/// the words by where it was first met; a longer one by its tokens.
#[derive(Default)]
struct Parts<'w> {
    /// Count, and where in the words' symbols the part was first met.
    short: FxHashMap<u128, (u64, usize)>,
    long: FxHashMap<&'w [TokenId], u64>,
}

impl<'w> Parts<'w> {
    /// Counts `count` more of `part`, which is at `at` in the words' symbols.
    #[inline]
    fn add(&mut self, part: &'w [TokenId], at: usize, count: u64) {
        match packed(part) {
            Some(key) => self.short.entry(key).or_insert((0, at)).0 += count,
            None => *self.long.entry(part).or_insert(0) += count,
        }
    }

    /// Adds `other`'s parts (of the same words) to these.
    fn absorb(&mut self, other: Parts<'w>) {
        for (key, (count, at)) in other.short {
            self.short.entry(key).or_insert((0, at)).0 += count;
        }
        for (part, count) in other.long {
            *self.long.entry(part).or_insert(0) += count;
        }
    }

    /// The parts as words (`symbols`: the words' tokens, where the short parts were met).
    fn into_words(self, symbols: &[TokenId]) -> Words {
        let short = self
            .short
            .into_iter()
            .map(|(key, (count, at))| (&symbols[at..at + (key >> 120) as usize], count));
        let parts: Vec<(&[TokenId], u64)> = short.chain(self.long).collect();
        let mut words = Words {
            symbols: Vec::with_capacity(parts.iter().map(|(part, _)| part.len()).sum()),
            heads: Vec::with_capacity(parts.len()),
        };
        for (part, count) in parts {
            words.heads.push(WordHead {
                start: words.symbols.len(),
                count,
                len: part.len() as u32, // (no longer than its word)
            });
            words.symbols.extend_from_slice(part);
        }
        words
    }
}

/// `part`'s tokens packed in one integer, 24 bits each, with its length in the top byte: for
/// parts of up to five tokens under 2^24 (else None).
#[inline]
fn packed(part: &[TokenId]) -> Option<u128> {
    if part.len() > 5 {
        return None;
    }
    let mut key = (part.len() as u128) << 120;
    for (i, &token) in part.iter().enumerate() {
        if token >= 1 << 24 {
            return None;
        }
        key |= u128::from(token) << (24 * i);
    }
    Some(key)
}
