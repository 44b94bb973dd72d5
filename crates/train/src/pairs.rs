//! [`PairTable`]: the merge loop's pairs, each with its count and the words where it was made.
//!
//! A plain `HashMap<PairKey, PairInfo>` held each record in its buckets: 56 bytes a bucket, up
//! to twice as many buckets as pairs, and while it doubled, the old buckets and the new ones at
//! once. On a 1 GB corpus at 32,000 tokens (a million pairs) its last doubling was the peak of
//! training's resident memory. Here the records live in a slab (a `Vec`, slots of freed pairs
//! reused), and the hash table holds only slot numbers, 4 bytes (and a control byte) a bucket:
//! a doubling of the table moves 5 bytes a bucket, and the slab grows in place (a big `Vec` is
//! reallocated by remapping its pages, and only the slots in use are ever touched).

use hashbrown::HashTable;
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

/// A slot of the slab: a pair's record, or (when `info.words` is empty and the slot is on the
/// free list) a link to the next free slot in `key`.
struct Slot {
    key: PairKey,
    info: PairInfo,
}

/// No next free slot.
const NO_SLOT: u32 = u32::MAX;

/// Pair key -> [`PairInfo`], in a slab indexed by a hash table of slot numbers.
pub(crate) struct PairTable {
    index: HashTable<u32>,
    slots: Vec<Slot>,
    /// The first free slot (its `key` links to the next), or [`NO_SLOT`].
    free: u32,
}

fn hash(key: PairKey) -> u64 {
    rustc_hash::FxBuildHasher.hash_one(key)
}

impl PairTable {
    /// No pairs.
    pub(crate) fn new() -> PairTable {
        PairTable {
            index: HashTable::new(),
            slots: Vec::new(),
            free: NO_SLOT,
        }
    }

    fn find(&self, key: PairKey) -> Option<u32> {
        let slots = &self.slots;
        self.index
            .find(hash(key), |&slot| slots[slot as usize].key == key)
            .copied()
    }

    /// The record of `key`, if it is in the table.
    pub(crate) fn get(&self, key: PairKey) -> Option<&PairInfo> {
        self.find(key).map(|slot| &self.slots[slot as usize].info)
    }

    /// The record of `key`, if it is in the table, to change.
    pub(crate) fn get_mut(&mut self, key: PairKey) -> Option<&mut PairInfo> {
        self.find(key)
            .map(|slot| &mut self.slots[slot as usize].info)
    }

    /// Whether `key` is in the table.
    pub(crate) fn contains_key(&self, key: PairKey) -> bool {
        self.find(key).is_some()
    }

    /// The record of `key`: the one in the table, or a new empty one (count 0, no words).
    pub(crate) fn entry_or_default(&mut self, key: PairKey) -> &mut PairInfo {
        let slot = match self.find(key) {
            Some(slot) => slot,
            None => self.insert_new(key, PairInfo::default()),
        };
        &mut self.slots[slot as usize].info
    }

    /// Puts `info` as the record of `key`, which must not be in the table.
    pub(crate) fn insert_new(&mut self, key: PairKey, info: PairInfo) -> u32 {
        debug_assert!(!self.contains_key(key), "a pair inserted twice");
        let slot = if self.free != NO_SLOT {
            let slot = self.free;
            let record = &mut self.slots[slot as usize];
            self.free = record.key as u32;
            *record = Slot { key, info };
            slot
        } else {
            let slot = u32::try_from(self.slots.len())
                .ok()
                .filter(|&slot| slot != NO_SLOT)
                .expect("more than 2^32 - 1 pairs");
            self.slots.push(Slot { key, info });
            slot
        };
        let slots = &self.slots;
        self.index
            .insert_unique(hash(key), slot, |&slot| hash(slots[slot as usize].key));
        slot
    }

    /// Takes the record of `key` out of the table (its slot is reused by a later pair).
    pub(crate) fn remove(&mut self, key: PairKey) -> Option<PairInfo> {
        let slots = &self.slots;
        let entry = self
            .index
            .find_entry(hash(key), |&slot| slots[slot as usize].key == key)
            .ok()?;
        let (slot, _) = entry.remove();
        let record = &mut self.slots[slot as usize];
        let info = std::mem::take(&mut record.info);
        record.key = PairKey::from(self.free);
        self.free = slot;
        Some(info)
    }

    /// Every pair and its record, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (PairKey, &PairInfo)> + '_ {
        self.index.iter().map(|&slot| {
            let record = &self.slots[slot as usize];
            (record.key, &record.info)
        })
    }
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
        assert_eq!(table.index.len(), model.len());
        let mut seen = 0;
        for (key, info) in table.iter() {
            assert_eq!(model.get(&key), Some(info));
            seen += 1;
        }
        assert_eq!(seen, model.len());
    }

    /// Random inserts, raises, lowers and removes over few keys (so that slots are freed and
    /// reused often) give what a `HashMap` gives, at every step.
    #[test]
    fn behaves_as_a_hash_map() {
        for seed in 0..20u64 {
            let mut rng = Rng(seed);
            let mut table = PairTable::new();
            let mut model: HashMap<PairKey, PairInfo> = HashMap::new();
            let keys = 1 + rng.below(200);
            for step in 0..3000u32 {
                // Keys with both halves set, as pair keys are.
                let key = (rng.below(keys) << 32) | rng.below(7);
                match rng.below(5) {
                    0 | 1 => {
                        let by = 1 + rng.below(10);
                        let info = table.entry_or_default(key);
                        info.count += by;
                        info.words.push(step);
                        let expected = model.entry(key).or_default();
                        expected.count += by;
                        expected.words.push(step);
                    }
                    2 => {
                        assert_eq!(table.remove(key), model.remove(&key));
                    }
                    3 => {
                        if let Some(info) = table.get_mut(key) {
                            info.count = info.count.saturating_sub(1);
                        }
                        if let Some(info) = model.get_mut(&key) {
                            info.count = info.count.saturating_sub(1);
                        }
                    }
                    _ => {
                        assert_eq!(table.get(key), model.get(&key));
                        assert_eq!(table.contains_key(key), model.contains_key(&key));
                    }
                }
            }
            assert_same(&table, &model);
            // Emptied, and filled again from the free slots only.
            let all: Vec<PairKey> = model.keys().copied().collect();
            let slots = table.slots.len();
            for key in &all {
                assert_eq!(table.remove(*key), model.remove(key));
            }
            assert_same(&table, &model);
            for key in &all {
                table.insert_new(
                    *key,
                    PairInfo {
                        count: 1,
                        words: vec![1],
                    },
                );
            }
            assert_eq!(table.index.len(), all.len());
            assert_eq!(table.slots.len(), slots, "freed slots are reused");
            for key in &all {
                assert_eq!(table.get(*key).map(|info| info.count), Some(1));
            }
        }
    }
}
