//! [`PairTable`]: the merge loop's pairs, each with its count and the words where it was made.
//!
//! A plain `HashMap<PairKey, PairInfo>` held each record in its buckets: 56 bytes a bucket, up
//! to twice as many buckets as pairs, and while it doubled, the old buckets and the new ones at
//! once. On a 1 GB corpus at 32,000 tokens (a million pairs) its last doubling was the peak of
//! training's resident memory. Here a bucket holds what the hot paths read, the pair, its count
//! (32 bits; the rare bigger ones aside) and a slot number: 16 bytes; the word lists live in a
//! slab of slots (a `Vec`, the slots of removed pairs reused), touched only when a list is taken
//! or grown. A doubling of the table moves 16 bytes a bucket, and the slab grows in place (a big
//! `Vec` is reallocated by remapping its pages, and only the slots in use are ever touched).
//! Finding a pair and changing its count read one bucket, as in the plain map: an index of slot
//! numbers alone (a smaller table) made every lookup read the slab too, and the merge loop
//! 10-20% slower.

use hashbrown::HashTable;
use rustc_hash::FxHashMap;
use std::hash::BuildHasher;

/// A pair of token ids as one key: left in the high half.
pub(crate) type PairKey = u64;

/// A word's number in the merge loop's word table.
pub(crate) type WordId = u32;

/// A pair's count and the words where it was made (ascending, unless a merge made the bytes of
/// a token that was already there, when the list may be out of order and hold a word twice).
#[derive(Default, Debug, PartialEq, Eq)]
pub(crate) struct PairInfo {
    pub(crate) count: u64,
    pub(crate) words: Vec<WordId>,
}

/// A bucket of the table: the pair, its count and the slot of its word list, 16 bytes (the table
/// is the biggest part of the merge loop's memory after the words). A count of [`BIG`] or more
/// is [`BIG`] here and exact in [`PairTable::big`].
#[derive(Clone, Copy)]
struct Bucket {
    key: PairKey,
    count: u32,
    slot: u32,
}

/// The count of a bucket whose pair's count is in [`PairTable::big`].
const BIG: u32 = u32::MAX;

// The table's size is the point of this module: a bucket that grew would go unnoticed.
const _: () = assert!(std::mem::size_of::<Bucket>() == 16);

fn hash(key: PairKey) -> u64 {
    rustc_hash::FxBuildHasher.hash_one(key)
}

/// Pair key -> count and word list: counts in a hash table, word lists in a slab.
pub(crate) struct PairTable {
    table: HashTable<Bucket>,
    /// The counts of [`BIG`] or more, exact (a pair seen 4 billion times: few, if any).
    big: FxHashMap<PairKey, u64>,
    lists: Vec<Vec<WordId>>,
    /// Slots of `lists` free to reuse (each holds an empty list).
    free: Vec<u32>,
}

impl PairTable {
    /// No pairs.
    pub(crate) fn new() -> PairTable {
        PairTable {
            table: HashTable::new(),
            big: FxHashMap::default(),
            lists: Vec::new(),
            free: Vec::new(),
        }
    }

    /// No pairs, with room for `pairs` of them (and their lists) without growing.
    pub(crate) fn with_capacity(pairs: usize) -> PairTable {
        PairTable {
            table: HashTable::with_capacity(pairs),
            big: FxHashMap::default(),
            lists: Vec::with_capacity(pairs),
            free: Vec::new(),
        }
    }

    fn bucket(&self, key: PairKey) -> Option<&Bucket> {
        self.table.find(hash(key), |bucket| bucket.key == key)
    }

    /// The count of `key`, if it is in the table.
    pub(crate) fn count(&self, key: PairKey) -> Option<u64> {
        self.bucket(key).map(|bucket| self.exact(bucket))
    }

    /// The exact count of a bucket.
    fn exact(&self, bucket: &Bucket) -> u64 {
        if bucket.count == BIG {
            self.big[&bucket.key]
        } else {
            u64::from(bucket.count)
        }
    }

    /// The count to put in the bucket of `key` for a count of `count` (noting a big one).
    fn store(big: &mut FxHashMap<PairKey, u64>, key: PairKey, count: u64) -> u32 {
        match u32::try_from(count) {
            Ok(small) if small != BIG => {
                big.remove(&key);
                small
            }
            _ => {
                big.insert(key, count);
                BIG
            }
        }
    }

    /// Whether `key` is in the table.
    pub(crate) fn contains_key(&self, key: PairKey) -> bool {
        self.bucket(key).is_some()
    }

    /// A slot for a new list.
    fn new_slot(&mut self, words: Vec<WordId>) -> u32 {
        if let Some(slot) = self.free.pop() {
            self.lists[slot as usize] = words;
            return slot;
        }
        let slot = u32::try_from(self.lists.len()).expect("more than 2^32 pairs");
        self.lists.push(words);
        slot
    }

    /// Puts `info` as the record of `key`, which must not be in the table.
    pub(crate) fn insert_new(&mut self, key: PairKey, info: PairInfo) {
        debug_assert!(!self.contains_key(key), "a pair inserted twice");
        let slot = self.new_slot(info.words);
        let count = PairTable::store(&mut self.big, key, info.count);
        self.table
            .insert_unique(hash(key), Bucket { key, count, slot }, hash_of);
    }

    /// Adds `by` to the count of `key` (a new pair if it is not in the table), and gives its word
    /// list, to note the words where it was made.
    pub(crate) fn raise(&mut self, key: PairKey, by: u64) -> &mut Vec<WordId> {
        let hash = hash(key);
        let slot = match self.table.find_mut(hash, |bucket| bucket.key == key) {
            Some(bucket) => {
                let count = match bucket.count {
                    BIG => self.big[&key],
                    small => u64::from(small),
                };
                bucket.count = PairTable::store(&mut self.big, key, count + by);
                bucket.slot
            }
            None => {
                let slot = self.new_slot(Vec::new());
                let count = PairTable::store(&mut self.big, key, by);
                self.table
                    .insert_unique(hash, Bucket { key, count, slot }, hash_of);
                slot
            }
        };
        &mut self.lists[slot as usize]
    }

    /// Takes `by` from the count of `key`, which must be in the table with at least that count;
    /// a pair whose count falls to 0 is removed (no word holds it any more: its list is freed).
    pub(crate) fn lower(&mut self, key: PairKey, by: u64) {
        let Ok(mut entry) = self.table.find_entry(hash(key), |bucket| bucket.key == key) else {
            panic!("a pair that occurs is counted");
        };
        let bucket = entry.get_mut();
        let count = match bucket.count {
            BIG => self.big[&key],
            small => u64::from(small),
        } - by;
        if count > 0 {
            bucket.count = PairTable::store(&mut self.big, key, count);
        } else {
            self.big.remove(&key);
            let (bucket, _) = entry.remove();
            self.free_slot(bucket.slot);
        }
    }

    fn free_slot(&mut self, slot: u32) -> Vec<WordId> {
        self.free.push(slot);
        std::mem::take(&mut self.lists[slot as usize])
    }

    /// Takes the record of `key` out of the table (its slot is reused by a later pair).
    pub(crate) fn remove(&mut self, key: PairKey) -> Option<PairInfo> {
        let entry = self
            .table
            .find_entry(hash(key), |bucket| bucket.key == key)
            .ok()?;
        let (bucket, _) = entry.remove();
        let count = match bucket.count {
            BIG => self.big.remove(&key).expect("a big count is noted"),
            small => u64::from(small),
        };
        let words = self.free_slot(bucket.slot);
        Some(PairInfo { count, words })
    }

    /// Every pair and its count, in no particular order.
    pub(crate) fn counts(&self) -> impl Iterator<Item = (PairKey, u64)> + '_ {
        self.table
            .iter()
            .map(|bucket| (bucket.key, self.exact(bucket)))
    }

    /// Every pair and its record (the words cloned), in no particular order (for tests).
    #[cfg(test)]
    fn records(&self) -> Vec<(PairKey, PairInfo)> {
        self.table
            .iter()
            .map(|bucket| {
                let info = PairInfo {
                    count: self.exact(bucket),
                    words: self.lists[bucket.slot as usize].clone(),
                };
                (bucket.key, info)
            })
            .collect()
    }
}

fn hash_of(bucket: &Bucket) -> u64 {
    hash(bucket.key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A small generator, so that the test needs no dependency and is the same every run.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % n
        }
    }

    fn assert_same(table: &PairTable, model: &HashMap<PairKey, PairInfo>) {
        let records = table.records();
        assert_eq!(records.len(), model.len());
        for (key, info) in records {
            assert_eq!(model.get(&key), Some(&info));
            assert_eq!(table.count(key), Some(info.count));
        }
        let counts: HashMap<PairKey, u64> = table.counts().collect();
        assert_eq!(counts.len(), model.len());
        // No big count left behind by a pair that fell below 2^32 - 1 or went.
        let big = model.values().filter(|info| info.count >= u64::from(BIG));
        assert_eq!(table.big.len(), big.count());
    }

    /// Random raises, lowers (to 0 too) and removes over few keys (so that slots are freed and
    /// reused often) give what a `HashMap` gives, at every step.
    #[test]
    fn behaves_as_a_hash_map() {
        for seed in 0..20u64 {
            let mut rng = Rng(seed);
            let mut table = PairTable::new();
            let mut model: HashMap<PairKey, PairInfo> = HashMap::new();
            let keys = 1 + rng.below(200);
            for step in 0..3000u32 {
                // Keys with both halves set, as pair keys are, and counts above 32 bits.
                let key = (rng.below(keys) << 32) | rng.below(7);
                match rng.below(5) {
                    0 | 1 => {
                        // Sometimes crossing 2^32 - 1 (kept apart), either way.
                        let by = match rng.below(4) {
                            0 => u64::from(BIG) - 1 - rng.below(3),
                            1 => 1 << 33,
                            _ => 1 + rng.below(10),
                        };
                        table.raise(key, by).push(step);
                        let expected = model.entry(key).or_default();
                        expected.count += by;
                        expected.words.push(step);
                    }
                    2 => {
                        assert_eq!(table.remove(key), model.remove(&key));
                    }
                    3 => {
                        if let Some(expected) = model.get_mut(&key) {
                            let by = match rng.below(3) {
                                0 => expected.count - rng.below(expected.count.min(3)),
                                _ => 1 + rng.below(expected.count.min(20)),
                            };
                            table.lower(key, by);
                            expected.count -= by;
                            if expected.count == 0 {
                                model.remove(&key);
                            }
                        }
                    }
                    _ => {
                        let expected = model.get(&key).map(|info| info.count);
                        assert_eq!(table.count(key), expected);
                        assert_eq!(table.contains_key(key), model.contains_key(&key));
                    }
                }
            }
            assert_same(&table, &model);
            // Emptied, and filled again from the free slots only.
            let all: Vec<PairKey> = model.keys().copied().collect();
            let slots = table.lists.len();
            for key in &all {
                assert_eq!(table.remove(*key), model.remove(key));
            }
            assert_same(&table, &model);
            for (n, key) in all.iter().enumerate() {
                let info = PairInfo {
                    count: n as u64 + 1,
                    words: vec![n as WordId],
                };
                table.insert_new(*key, info);
            }
            assert_eq!(table.lists.len(), slots, "freed slots are reused");
            for (n, key) in all.iter().enumerate() {
                assert_eq!(table.count(*key), Some(n as u64 + 1));
                let info = table.remove(*key).expect("inserted");
                assert_eq!(info.words, vec![n as WordId]);
            }
        }
    }

    /// Lowering a pair that is not in the table is a bug of the merge loop, not a no-op.
    #[test]
    #[should_panic(expected = "a pair that occurs is counted")]
    fn lowering_a_missing_pair_panics() {
        PairTable::new().lower(1 << 32, 1);
    }
}
