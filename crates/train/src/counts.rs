//! [`PretokenCounts`]: how often each pre-token occurs, the input of the merge loop.

use hashbrown::HashTable;
use rustc_hash::FxHasher;
use std::hash::Hasher;

/// Pre-token bytes -> how often they occur (64-bit counts).
///
/// Each distinct pre-token gets an id, in order of first appearance; its bytes live in one arena
/// (`arena[starts[id]..starts[id + 1]]`), its count in `counts[id]`, and the hash table holds only
/// ids (4 bytes a slot). A corpus has millions of distinct pre-tokens: one heap allocation each
/// would double the memory and the time of counting; and the frequent ones, which come early,
/// share a few cache lines.
#[derive(Clone)]
pub struct PretokenCounts {
    table: HashTable<u32>,
    arena: Vec<u8>,
    starts: Vec<usize>,
    counts: Vec<u64>,
    total: u64,
}

impl Default for PretokenCounts {
    fn default() -> PretokenCounts {
        PretokenCounts {
            table: HashTable::new(),
            arena: Vec::new(),
            starts: vec![0],
            counts: Vec::new(),
            total: 0,
        }
    }
}

pub(crate) fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut hasher = FxHasher::default();
    hasher.write(bytes);
    hasher.finish()
}

/// Whether `a` and `b` are the same bytes. Pre-tokens are short: up to 16 bytes they are
/// compared as two overlapping words each, inline, instead of by a call to `memcmp` (which was
/// an eighth of the time of counting a big corpus).
#[inline(always)]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().expect("8"));
    let half = |s: &[u8], at: usize| u32::from_le_bytes(s[at..at + 4].try_into().expect("4"));
    match n {
        // The first and the last 8 (or 4) bytes cover all of them (overlapping when fewer).
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        4..=7 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        0..=3 => a.iter().zip(b).all(|(x, y)| x == y),
        _ => a == b,
    }
}

/// The bytes of pre-token `id`.
#[inline]
fn key<'a>(arena: &'a [u8], starts: &[usize], id: u32) -> &'a [u8] {
    &arena[starts[id as usize]..starts[id as usize + 1]]
}

impl PretokenCounts {
    /// No pre-tokens.
    pub fn new() -> PretokenCounts {
        PretokenCounts::default()
    }

    /// The number of distinct pre-tokens.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Whether there is no pre-token at all.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// The number of pre-token occurrences (the sum of all counts).
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Counts `pretoken` `count` more times.
    #[inline]
    pub fn add(&mut self, pretoken: &[u8], count: u64) {
        self.add_get_id(pretoken, count);
    }

    /// Counts `pretoken` `count` more times, and returns its id (for [`PretokenCounts::add_to_id`]).
    #[inline]
    pub(crate) fn add_get_id(&mut self, pretoken: &[u8], count: u64) -> u32 {
        self.add_hashed(pretoken, hash_bytes(pretoken), count)
    }

    /// [`PretokenCounts::add_get_id`] with the pre-token's hash ([`hash_bytes`]) already known.
    #[inline]
    pub(crate) fn add_hashed(&mut self, pretoken: &[u8], hash: u64, count: u64) -> u32 {
        self.total += count;
        let (arena, starts) = (&self.arena, &self.starts);
        if let Some(&id) = self
            .table
            .find(hash, |&id| same_bytes(key(arena, starts, id), pretoken))
        {
            self.counts[id as usize] += count;
            return id;
        }
        let id = u32::try_from(self.counts.len()).expect("more than 2^32 distinct pre-tokens");
        self.arena.extend_from_slice(pretoken);
        self.starts.push(self.arena.len());
        self.counts.push(count);
        let (arena, starts) = (&self.arena, &self.starts);
        self.table
            .insert_unique(hash, id, |&id| hash_bytes(key(arena, starts, id)));
        id
    }

    /// Counts the pre-token of id `id` `count` more times.
    #[inline]
    pub(crate) fn add_to_id(&mut self, id: u32, count: u64) {
        self.total += count;
        self.counts[id as usize] += count;
    }

    /// How often `pretoken` was counted (0 if never).
    pub fn get(&self, pretoken: &[u8]) -> u64 {
        let (arena, starts) = (&self.arena, &self.starts);
        self.table
            .find(hash_bytes(pretoken), |&id| {
                same_bytes(key(arena, starts, id), pretoken)
            })
            .map_or(0, |&id| self.counts[id as usize])
    }

    /// Adds every count of `other` to these.
    pub fn merge(&mut self, other: &PretokenCounts) {
        let (arena, starts) = (&self.arena, &self.starts);
        self.table
            .reserve(other.len().saturating_sub(self.len() / 2), |&id| {
                hash_bytes(key(arena, starts, id))
            });
        for (pretoken, count) in other.iter() {
            self.add(pretoken, count);
        }
    }

    /// Adds `other`'s counts to these, or these to `other`'s, whichever is fewer additions, and
    /// returns the sum.
    pub fn merged(self, other: PretokenCounts) -> PretokenCounts {
        let (mut big, small) = if self.len() >= other.len() {
            (self, other)
        } else {
            (other, self)
        };
        big.merge(&small);
        big
    }

    /// No pre-tokens yet, with room for `distinct` of them holding `bytes` bytes in all
    /// (filling a table of known size never rehashes).
    pub fn with_capacity(distinct: usize, bytes: usize) -> PretokenCounts {
        let mut starts = Vec::with_capacity(distinct + 1);
        starts.push(0);
        PretokenCounts {
            table: HashTable::with_capacity(distinct),
            arena: Vec::with_capacity(bytes),
            starts,
            counts: Vec::with_capacity(distinct),
            total: 0,
        }
    }

    /// The bytes of the pre-token of id `id` (ids are `0..len()`, in order of first appearance).
    #[inline]
    pub fn pretoken(&self, id: u32) -> &[u8] {
        key(&self.arena, &self.starts, id)
    }

    /// The count of the pre-token of id `id`.
    #[inline]
    pub fn count_of(&self, id: u32) -> u64 {
        self.counts[id as usize]
    }

    /// The distinct pre-tokens' bytes end to end (pre-token `id` at `starts[id]..starts[id + 1]`).
    pub(crate) fn arena(&self) -> &[u8] {
        &self.arena
    }

    /// The counts of `parts`, which hold no pre-token in common (the parts of a split by hash):
    /// their entries are copied end to end, parts emptied as they go (so that the peak memory
    /// is about one copy), and indexed once into a table of the right size, without a lookup.
    pub(crate) fn concat_disjoint(parts: Vec<PretokenCounts>) -> PretokenCounts {
        let distinct = parts.iter().map(PretokenCounts::len).sum();
        let bytes = parts.iter().map(|part| part.arena.len()).sum();
        let mut result = PretokenCounts::with_capacity(distinct, bytes);
        for part in parts {
            let shift = result.arena.len();
            result.arena.extend_from_slice(&part.arena);
            result
                .starts
                .extend(part.starts[1..].iter().map(|start| start + shift));
            result.counts.extend_from_slice(&part.counts);
            result.total += part.total;
        }
        let (arena, starts) = (&result.arena, &result.starts);
        for id in 0..result.counts.len() as u32 {
            let hash = hash_bytes(key(arena, starts, id));
            result
                .table
                .insert_unique(hash, id, |&id| hash_bytes(key(arena, starts, id)));
        }
        result
    }

    /// The total length of the distinct pre-tokens, in bytes.
    pub fn pretoken_bytes(&self) -> usize {
        self.arena.len()
    }

    /// The memory the entries take, in bytes: the pre-tokens' bytes, and per pre-token its start
    /// (8), its count (8) and its hash-table slot (4 and a control byte, at 7/8 load). What is
    /// allocated may be up to twice that, the arrays growing by doubling. (The rule by which a
    /// spilling counter decides to spill, `crate::spill`.)
    pub fn entry_bytes(&self) -> usize {
        self.arena.len() + self.len() * (8 + 8 + 6)
    }

    /// The ids of the pre-tokens in byte order of the pre-tokens (a canonical order, the same for
    /// equal counts however they were made).
    pub fn sorted_ids(&self) -> Vec<u32> {
        // Sorted by each pre-token's first 8 bytes as a number first (zeros past its end), the
        // bytes compared only on a tie: most comparisons then touch a flat array, not the arena
        // (a third of the time of comparing bytes throughout, on 300,000 pre-tokens).
        let (arena, starts) = (&self.arena, &self.starts);
        let mut keyed: Vec<(u64, u32)> = (0..self.len() as u32)
            .map(|id| {
                let bytes = key(arena, starts, id);
                let mut prefix = [0u8; 8];
                let len = bytes.len().min(8);
                prefix[..len].copy_from_slice(&bytes[..len]);
                (u64::from_be_bytes(prefix), id)
            })
            .collect();
        keyed.sort_unstable_by(|a, b| {
            a.0.cmp(&b.0)
                .then_with(|| key(arena, starts, a.1).cmp(key(arena, starts, b.1)))
        });
        keyed.into_iter().map(|(_, id)| id).collect()
    }

    /// The ids of the pre-tokens in order of the SHA-256 of their bytes: the order of an index on
    /// that hash (PostgreSQL's key on pre-tokens), where rows written in it are appended instead
    /// of scattered over the index (measured: half the time of a COPY of 300,000 rows).
    pub fn sha256_sorted_ids(&self) -> Vec<u32> {
        use sha2::{Digest, Sha256};
        let mut keyed: Vec<([u8; 32], u32)> = (0..self.len() as u32)
            .map(|id| (Sha256::digest(self.pretoken(id)).into(), id))
            .collect();
        keyed.sort_unstable();
        keyed.into_iter().map(|(_, id)| id).collect()
    }

    /// Every distinct pre-token with its count, in order of first appearance.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .map(|(id, &count)| (key(&self.arena, &self.starts, id as u32), count))
    }

    /// The counts as three flat arrays, the compact form for storage and transport (one
    /// allocation each instead of an object per pre-token): the pre-tokens' bytes end to end,
    /// `len() + 1` offsets into them (`data[offsets[i]..offsets[i + 1]]` is pre-token `i`), and
    /// the counts. `sorted`: pre-tokens in byte order (a canonical form, the same for equal
    /// counts however they were made), else in order of first appearance.
    pub fn to_arrays(&self, sorted: bool) -> (Vec<u8>, Vec<u64>, Vec<u64>) {
        let order: Vec<u32> = if sorted {
            self.sorted_ids()
        } else {
            (0..self.len() as u32).collect()
        };
        let mut data = Vec::with_capacity(self.arena.len());
        let mut offsets = Vec::with_capacity(self.len() + 1);
        let mut counts = Vec::with_capacity(self.len());
        offsets.push(0);
        for id in order {
            data.extend_from_slice(key(&self.arena, &self.starts, id));
            offsets.push(data.len() as u64);
            counts.push(self.counts[id as usize]);
        }
        (data, offsets, counts)
    }

    /// Counts from the arrays of [`PretokenCounts::to_arrays`] (`offsets` may start above 0, as
    /// in a slice of an Arrow column); a pre-token given twice gets the sum of its counts, and a
    /// zero count adds nothing. An error names what is inconsistent, or counts whose sum does not
    /// fit in 64 bits.
    pub fn from_arrays(
        data: &[u8],
        offsets: &[u64],
        counts: &[u64],
    ) -> Result<PretokenCounts, String> {
        if offsets.len() != counts.len() + 1 {
            return Err(format!(
                "{} offsets for {} counts: there must be one offset more than counts",
                offsets.len(),
                counts.len()
            ));
        }
        if counts
            .iter()
            .try_fold(0u64, |sum, &count| sum.checked_add(count))
            .is_none()
        {
            return Err("the counts add up to 2**64 or more".to_string());
        }
        let mut result = PretokenCounts::new();
        for (index, (bounds, &count)) in offsets.windows(2).zip(counts).enumerate() {
            let (start, end) = (bounds[0], bounds[1]);
            if start > end || end > data.len() as u64 {
                return Err(format!(
                    "pre-token {index} spans bytes {start}..{end} of {} bytes of data",
                    data.len()
                ));
            }
            if count > 0 {
                result.add(&data[start as usize..end as usize], count);
            }
        }
        Ok(result)
    }

    /// The same counts without the pre-tokens counted fewer than `min_count` times.
    pub fn pruned(&self, min_count: u64) -> PretokenCounts {
        self.iter()
            .filter(|&(_, count)| count >= min_count)
            .collect()
    }

    /// The counts split into `parts` disjoint parts (at least 1) by a hash of each pre-token,
    /// the same for the same pre-token in any counts: part `i` of several counts can be added up
    /// apart from the other parts (a reduce spread over several machines).
    pub fn split(&self, parts: usize) -> Vec<PretokenCounts> {
        let parts = parts.max(1);
        let mut result: Vec<PretokenCounts> = (0..parts).map(|_| PretokenCounts::new()).collect();
        for (pretoken, count) in self.iter() {
            // The high bits: FxHash's low bits vary least.
            let part = ((hash_bytes(pretoken) >> 32) % parts as u64) as usize;
            result[part].add(pretoken, count);
        }
        result
    }

    /// Forgets every count (and frees their memory).
    pub fn clear(&mut self) {
        *self = PretokenCounts::new();
    }

    /// Forgets every count but keeps the memory, to be filled again.
    pub(crate) fn clear_keeping_memory(&mut self) {
        self.table.clear();
        self.arena.clear();
        self.starts.truncate(1);
        self.counts.clear();
        self.total = 0;
    }
}

/// Slots of a [`HotCache`] (a power of two): enough for the words that make up most of a text,
/// small enough to stay in the CPU's nearest caches.
const HOT_SLOTS: usize = 1 << 14;

/// The longest key a [`HotCache`] slot holds.
const HOT_KEY_BYTES: usize = 16;

/// One cached key (at most 16 bytes, zero-padded, as two words) and its pending count.
#[derive(Clone, Copy)]
#[repr(align(32))] // one slot never straddles two cache lines
struct HotSlot {
    low: u64,
    high: u64,
    id: u32,
    pending: u32,
    len: u8,
}

const EMPTY_SLOT: HotSlot = HotSlot {
    low: 0,
    high: 0,
    id: 0,
    pending: 0,
    len: u8::MAX,
};

/// The first `len` (at most 8) bytes of `bytes` (which holds 8) as a little-endian word.
#[inline]
fn word(bytes: &[u8], len: usize) -> u64 {
    let value = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
    if len >= 8 {
        value
    } else {
        value & ((1u64 << (8 * len)) - 1)
    }
}

/// A small direct-mapped cache in front of [`PretokenCounts`], for counting many short keys one
/// at a time: a key found in its slot is counted there (no hash-table probe, no cache miss), and
/// the counts pass to the table when the slot is taken by another key or at [`HotCache::flush`].
/// Until then, the table's counts for cached keys are short.
pub(crate) struct HotCache {
    slots: Vec<HotSlot>,
}

impl HotCache {
    pub(crate) fn new() -> HotCache {
        HotCache {
            slots: vec![EMPTY_SLOT; HOT_SLOTS],
        }
    }

    /// Counts `text[start..end]` once into `counts`, through the cache. (The key is read as two
    /// words straight from `text` when 16 bytes follow `start`, so the whole text is passed.)
    #[inline]
    pub(crate) fn add_one(
        &mut self,
        counts: &mut PretokenCounts,
        text: &[u8],
        start: usize,
        end: usize,
    ) {
        let len = end - start;
        if len > HOT_KEY_BYTES {
            counts.add(&text[start..end], 1);
            return;
        }
        let (low, high) = if start + HOT_KEY_BYTES <= text.len() {
            let bytes = &text[start..start + HOT_KEY_BYTES];
            (
                word(bytes, len),
                if len > 8 {
                    word(&bytes[8..], len - 8)
                } else {
                    0
                },
            )
        } else {
            let mut padded = [0u8; HOT_KEY_BYTES];
            padded[..len].copy_from_slice(&text[start..end]);
            (
                word(&padded, len),
                word(&padded[8..], len.saturating_sub(8)),
            )
        };
        let mixed = (low ^ high.rotate_left(29) ^ len as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let slot = &mut self.slots[(mixed >> (64 - HOT_SLOTS.trailing_zeros())) as usize];
        if slot.low == low
            && slot.high == high
            && usize::from(slot.len) == len
            && slot.pending < u32::MAX
        {
            slot.pending += 1;
            return;
        }
        if slot.len != u8::MAX && slot.pending > 0 {
            counts.add_to_id(slot.id, u64::from(slot.pending));
        }
        let id = counts.add_get_id(&text[start..end], 1);
        *slot = HotSlot {
            low,
            high,
            id,
            pending: 0,
            len: len as u8,
        };
    }

    /// Hands every pending count to `counts` and empties the cache.
    pub(crate) fn flush(&mut self, counts: &mut PretokenCounts) {
        for slot in &mut self.slots {
            if slot.len != u8::MAX && slot.pending > 0 {
                counts.add_to_id(slot.id, u64::from(slot.pending));
            }
            *slot = EMPTY_SLOT;
        }
    }
}

impl<'a> FromIterator<(&'a [u8], u64)> for PretokenCounts {
    fn from_iter<I: IntoIterator<Item = (&'a [u8], u64)>>(iter: I) -> PretokenCounts {
        let mut counts = PretokenCounts::new();
        for (pretoken, count) in iter {
            counts.add(pretoken, count);
        }
        counts
    }
}

impl std::fmt::Debug for PretokenCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PretokenCounts")
            .field("distinct", &self.len())
            .field("total", &self.total)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn counts_like_a_hash_map() {
        let words: Vec<Vec<u8>> = (0..5000u32)
            .map(|i| format!(" w{}", i % 1234).into_bytes())
            .collect();
        let mut counts = PretokenCounts::new();
        let mut expected: HashMap<Vec<u8>, u64> = HashMap::new();
        for (i, word) in words.iter().enumerate() {
            let n = (i % 3) as u64 + 1;
            counts.add(word, n);
            *expected.entry(word.clone()).or_default() += n;
        }
        counts.add(b"", 2); // the empty pre-token is a key like any other
        *expected.entry(Vec::new()).or_default() += 2;
        assert_eq!(counts.len(), expected.len());
        assert_eq!(counts.total(), expected.values().sum::<u64>());
        let got: HashMap<Vec<u8>, u64> = counts.iter().map(|(k, v)| (k.to_vec(), v)).collect();
        assert_eq!(got, expected);
        assert_eq!(counts.get(b" w7"), expected[&b" w7".to_vec()]);
        assert_eq!(counts.get(b"absent"), 0);
    }

    #[test]
    fn arrays_round_trip_and_sort() {
        let counts: PretokenCounts = [
            (&b" b"[..], 3),
            (&b"a"[..], 1),
            (&b""[..], 2),
            (&b"\xff"[..], 9),
        ]
        .into_iter()
        .collect();
        let (data, offsets, values) = counts.to_arrays(true);
        assert_eq!(data, b" ba\xff".to_vec());
        assert_eq!(offsets, vec![0, 0, 2, 3, 4]);
        assert_eq!(values, vec![2, 3, 1, 9]);
        let back = PretokenCounts::from_arrays(&data, &offsets, &values).unwrap();
        let as_map = |c: &PretokenCounts| {
            c.iter()
                .map(|(k, v)| (k.to_vec(), v))
                .collect::<HashMap<_, _>>()
        };
        assert_eq!(as_map(&back), as_map(&counts));
        assert_eq!(back.total(), counts.total());
        let (_, unsorted_offsets, unsorted) = counts.to_arrays(false);
        assert_eq!(unsorted, vec![3, 1, 2, 9]);
        assert_eq!(unsorted_offsets, vec![0, 2, 3, 3, 4]);
    }

    #[test]
    fn from_arrays_sums_repeats_and_refuses_bad_offsets() {
        let back = PretokenCounts::from_arrays(b"xxy", &[0, 1, 2, 3], &[1, 2, 0]).unwrap();
        assert_eq!((back.len(), back.get(b"x"), back.get(b"y")), (1, 3, 0));
        assert!(PretokenCounts::from_arrays(b"xy", &[0, 1], &[1, 1]).is_err());
        assert!(PretokenCounts::from_arrays(b"xy", &[0, 3], &[1]).is_err());
        assert!(PretokenCounts::from_arrays(b"xy", &[1, 0], &[1]).is_err());
        assert!(PretokenCounts::from_arrays(b"xy", &[0, 1, 2], &[u64::MAX, 1]).is_err());
    }

    #[test]
    fn byte_order_with_shared_prefixes_and_zero_bytes() {
        // Keys equal in their first 8 bytes (zeros past a short key's end included) fall back to
        // comparing all their bytes.
        let keys: Vec<&[u8]> = vec![
            b"abcdefgh",
            b"abcdefghi",
            b"abcdefgh\x00",
            b"a",
            b"a\x00",
            b"",
            b"\x00",
            b"abcdefgg\xff",
            b"\xff\xff",
            b"abcdefghh",
            b"a\x00\x00\x00\x00\x00\x00\x00\x00",
        ];
        let counts: PretokenCounts = keys.iter().map(|&k| (k, 1)).collect();
        let sorted: Vec<&[u8]> = counts
            .sorted_ids()
            .into_iter()
            .map(|id| counts.pretoken(id))
            .collect();
        let mut expected = keys.clone();
        expected.sort();
        assert_eq!(sorted, expected);
    }

    #[test]
    fn sha256_order_is_the_order_of_the_digests() {
        use sha2::{Digest, Sha256};
        let counts: PretokenCounts = [
            (&b" the"[..], 3),
            (&b"a"[..], 1),
            (&b""[..], 2),
            (&b"\xff"[..], 9),
        ]
        .into_iter()
        .collect();
        let ids = counts.sha256_sorted_ids();
        let digests: Vec<Vec<u8>> = ids
            .iter()
            .map(|&id| Sha256::digest(counts.pretoken(id)).to_vec())
            .collect();
        assert!(digests.windows(2).all(|pair| pair[0] < pair[1]));
        let mut all = ids.clone();
        all.sort_unstable();
        assert_eq!(all, vec![0, 1, 2, 3]);
    }

    #[test]
    fn pruning_and_splitting() {
        let counts: PretokenCounts = (0..1000u32)
            .map(|i| (format!("w{i}").into_bytes(), u64::from(i % 7)))
            .collect::<Vec<_>>()
            .iter()
            .map(|(k, v)| (k.as_slice(), *v))
            .collect();
        let pruned = counts.pruned(5);
        assert!(pruned.iter().all(|(_, c)| c >= 5));
        assert_eq!(pruned.len(), counts.iter().filter(|&(_, c)| c >= 5).count());
        let parts = counts.split(4);
        assert_eq!(parts.len(), 4);
        assert!(parts.iter().all(|part| !part.is_empty()));
        let mut joined = PretokenCounts::new();
        for part in &parts {
            for (pretoken, _) in part.iter() {
                assert_eq!(joined.get(pretoken), 0, "a pre-token in two parts");
            }
            joined.merge(part);
        }
        let as_map = |c: &PretokenCounts| {
            c.iter()
                .map(|(k, v)| (k.to_vec(), v))
                .collect::<HashMap<_, _>>()
        };
        assert_eq!(as_map(&joined), as_map(&counts));
    }

    #[test]
    fn merging_adds_counts() {
        let a: PretokenCounts = [(&b"x"[..], 1), (&b"y"[..], 2)].into_iter().collect();
        let b: PretokenCounts = [(&b"y"[..], 5), (&b"z"[..], u64::from(u32::MAX) * 4)]
            .into_iter()
            .collect();
        let sum = a.clone().merged(b.clone());
        assert_eq!(sum.len(), 3);
        assert_eq!(sum.get(b"y"), 7);
        assert_eq!(sum.get(b"z"), u64::from(u32::MAX) * 4);
        assert_eq!(sum.total(), a.total() + b.total());
        let mut other = b;
        other.merge(&a);
        assert_eq!(
            other.iter().collect::<HashMap<_, _>>(),
            sum.iter().collect::<HashMap<_, _>>()
        );
    }

    #[test]
    fn disjoint_parts_join_into_the_whole() {
        let counts: PretokenCounts = (0..3000u32)
            .map(|i| (format!(" w{}", i % 1777).into_bytes(), u64::from(i % 5) + 1))
            .fold(PretokenCounts::new(), |mut counts, (word, n)| {
                counts.add(&word, n);
                counts
            });
        for parts in [1, 2, 7, 128] {
            let joined = PretokenCounts::concat_disjoint(counts.split(parts));
            assert_eq!(joined.len(), counts.len());
            assert_eq!(joined.total(), counts.total());
            for (pretoken, count) in counts.iter() {
                assert_eq!(joined.get(pretoken), count); // (found through the new index)
            }
        }
        assert!(PretokenCounts::concat_disjoint(Vec::new()).is_empty());
    }

    #[test]
    fn same_bytes_is_slice_equality() {
        let texts: Vec<Vec<u8>> = (0..40usize)
            .flat_map(|len| {
                let base: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
                let mut last = base.clone();
                if let Some(byte) = last.last_mut() {
                    *byte ^= 1;
                }
                let mut first = base.clone();
                if let Some(byte) = first.first_mut() {
                    *byte ^= 0x80;
                }
                [base, last, first]
            })
            .collect();
        for a in &texts {
            for b in &texts {
                assert_eq!(same_bytes(a, b), a == b, "{a:?} {b:?}");
            }
        }
    }
}
