//! The pre-token cache that an encoder's threads share without locks, for short pieces.
//!
//! With a cache per thread (and a shared one behind them, behind a lock), two threads that encode
//! one text together each fill a table of their own with nearly the same pieces: the merges are
//! shared, but every piece is still inserted twice, looked up in two tables (a lock for each
//! miss), and the tables take twice the memory, so that a lookup misses the CPU's caches more
//! often. Two threads then took 10-25% more CPU time than one for the same text.
//!
//! A [`SharedTable`] is one open-addressing table that every thread reads and writes at once:
//! pieces of at most 15 bytes (almost every piece of natural text) whose ids fit in a slot: the
//! ids are packed in as many bits as the vocabulary's highest id needs, so that a slot holds 7 of
//! GPT-2's ids (16 bits each), 6 of o200k_base's (18 bits), and 3 at worst (nearly every short
//! piece has fewer: those with more are the rare words, which are most of the distinct pieces,
//! and each thread would merge them again if they were not shared). A slot is written once: a thread claims an empty slot, writes the key
//! and ids, then marks it ready (a release store); a reader that sees the mark (an acquire load)
//! sees what was written before it. Nothing is ever changed or removed, so reads need no lock and
//! no retry. A slot being written reads as a miss, and an insert that meets one gives up: both
//! are allowed of a cache.
//!
//! A table takes entries up to three quarters of its slots (and the encoder's capacity); then
//! the thread that finds it full replaces it ([`SharedCache::replace`]) with one twice as big
//! holding the same entries, or with an empty one of the same size once the encoder's capacity
//! is reached. Threads still holding the old table go on reading it, and take the new one at
//! their next refused insert.

use crate::bpe::TokenId;
use crate::huge::HugeSlice;
use crate::mix::mix;
use crate::slots::{emit_inline, SlotsAt, INLINE_IDS};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, TryLockError};

/// A table's first number of slots.
const FIRST_SLOTS: usize = 1 << 12;
/// Probes before a lookup gives up (a miss) or an insert does: tables are at most three quarters
/// full, where a run of 64 taken slots, the bound before, is met now and then (it was, in this
/// module's tests); this one almost never is, and it bounds the work when threads overfill.
const MAX_PROBES: usize = 512;
/// Inserts a thread counts before adding them to the table's shared count (one atomic addition
/// on a shared cache line per this many inserts instead of one per insert).
pub(crate) const COUNT_EVERY: usize = 64;

/// A slot's state: never written.
const EMPTY: u64 = 0;
/// Claimed by a thread that is writing it.
const BUSY: u64 = 1;
/// Written: `READY | count << COUNT_SHIFT | the first ids, packed`.
const READY: u64 = 1 << 63;
/// Where the number of ids sits in the state word (four bits, below `READY`).
const COUNT_SHIFT: u32 = 59;

/// One slot: the state word (with the count and the first ids), the short key (bytes and length
/// packed in a `u128`, never zero) and a word of more ids. Half a cache line, never straddling two.
#[derive(Default)]
#[repr(C, align(32))]
struct Slot {
    state: AtomicU64,
    key_low: AtomicU64,
    key_high: AtomicU64,
    ids: AtomicU64,
}

/// How ids are packed in a slot: `bits` each, `in_state` of them in the low bits of the state
/// word and the rest in the ids word.
#[derive(Clone, Copy)]
struct Packing {
    bits: u32,
    in_state: usize,
    /// The most ids a slot holds.
    most: usize,
}

impl Packing {
    fn for_max_id(max_id: TokenId) -> Packing {
        let bits = (u32::BITS - max_id.leading_zeros()).max(1);
        let in_state = (COUNT_SHIFT / bits) as usize;
        let in_ids = (u64::BITS / bits) as usize;
        Packing {
            bits,
            in_state,
            most: (in_state + in_ids).min(15),
        }
    }

    /// The state word and the ids word of `ids` (at most `most`).
    #[inline]
    fn pack(self, ids: &[TokenId]) -> (u64, u64) {
        let (mut state, mut word) = (READY | (ids.len() as u64) << COUNT_SHIFT, 0u64);
        for (i, &id) in ids.iter().enumerate() {
            if i < self.in_state {
                state |= u64::from(id) << (i as u32 * self.bits);
            } else {
                word |= u64::from(id) << ((i - self.in_state) as u32 * self.bits);
            }
        }
        (state, word)
    }

    /// Appends the ids packed in `state` and `word` to `out`.
    #[inline]
    fn unpack(self, state: u64, word: u64, out: &mut Vec<TokenId>) {
        let count = ((state >> COUNT_SHIFT) & 0xF) as usize;
        let mask = (1u64 << self.bits) - 1;
        if count <= self.in_state.min(INLINE_IDS) {
            // Most pieces: their ids all in the state word. As many as a slot of the caches
            // holds are unpacked, whatever the count, and the count of them appended: a loop
            // of `count` turns was a branch mispredicted on every change of count.
            // (a shift past the word, for an id a wide vocabulary's slot does not hold, gives 0:
            // only the first `count` are appended)
            let id = |i: u32| (state.checked_shr(i * self.bits).unwrap_or(0) & mask) as TokenId;
            let ids: [TokenId; INLINE_IDS] = std::array::from_fn(|i| id(i as u32));
            emit_inline(out, &ids, count);
            return;
        }
        for i in 0..count {
            let id = if i < self.in_state {
                state >> (i as u32 * self.bits)
            } else {
                word >> ((i - self.in_state) as u32 * self.bits)
            };
            out.push((id & mask) as TokenId);
        }
    }
}

/// The count of entries, alone on its cache line: the lookups read the fields beside it on every
/// piece, and must not lose them whenever it changes.
#[repr(align(64))]
struct Count(AtomicUsize);

/// A fixed-size table of short pieces and their ids, shared by threads without locks (see the
/// module's documentation).
pub(crate) struct SharedTable {
    slots: HugeSlice<Slot>,
    packing: Packing,
    /// Entries past which inserts are refused: three quarters of the slots (as the caches'
    /// tables, see `crate::cache`), or the encoder's capacity if that is fewer.
    limit: usize,
    len: Count,
}

/// A [`SharedTable`]'s slots and packing, read once for a run of lookups (the batch's loop
/// holds them in registers instead of reading them through the cache for every piece).
pub(crate) struct SharedSlots<'t> {
    slots: &'t [Slot],
    packing: Packing,
}

impl SharedSlots<'_> {
    /// [`SharedTable::get_hashed`].
    #[inline(always)]
    pub(crate) fn get_hashed(&self, key: u128, hash: u64, out: &mut Vec<TokenId>) -> bool {
        let mask = self.slots.len() - 1;
        let mut at = hash as usize & mask;
        for _ in 0..MAX_PROBES {
            let slot = &self.slots[at];
            // Acquire: the key and ids written before the slot was marked ready are seen.
            let state = slot.state.load(Ordering::Acquire);
            if state & READY == 0 {
                return false; // empty (the key is not in the table), or being written
            }
            if slot.key_low.load(Ordering::Relaxed) == key as u64
                && slot.key_high.load(Ordering::Relaxed) == (key >> 64) as u64
            {
                let word = slot.ids.load(Ordering::Relaxed);
                self.packing.unpack(state, word, out);
                return true;
            }
            at = (at + 1) & mask;
        }
        false
    }
}

/// What became of an insert.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Inserted {
    /// The piece took a new slot.
    New,
    /// Not inserted: it is there already, or another thread is writing the slot it needed.
    Not,
    /// Not inserted: the table is full.
    Full,
}

impl SharedTable {
    /// A table of `slots` slots (a power of two) that takes at most `capacity` entries.
    fn with_slots(slots: usize, packing: Packing, capacity: usize) -> SharedTable {
        debug_assert!(slots.is_power_of_two());
        SharedTable {
            slots: HugeSlice::from_fn(slots, |_| Slot::default()),
            packing,
            limit: (slots / 4 * 3).min(capacity),
            len: Count(AtomicUsize::new(0)),
        }
    }

    /// The most ids a piece may have to be kept here.
    #[inline]
    pub(crate) fn most_ids(&self) -> usize {
        self.packing.most
    }

    /// Where lookups start, for prefetching (see [`crate::cache::PieceCache::short_slots_at`]).
    #[inline(always)]
    pub(crate) fn slots_at(&self) -> SlotsAt {
        SlotsAt::of(&self.slots)
    }

    /// Appends the ids of the piece with short key `key` to `out` if they are known; whether
    /// they were.
    #[inline]
    pub(crate) fn get(&self, key: u128, out: &mut Vec<TokenId>) -> bool {
        self.get_hashed(key, mix(key), out)
    }

    /// [`SharedTable::get`] of the key whose [`mix`] is `hash` (computed once, for its prefetch
    /// and its lookup).
    #[inline(always)]
    pub(crate) fn get_hashed(&self, key: u128, hash: u64, out: &mut Vec<TokenId>) -> bool {
        self.lookups().get_hashed(key, hash, out)
    }

    /// The table's slots and packing, borrowed for a run of lookups (see
    /// [`crate::cache::ShortSlots`]).
    #[inline(always)]
    pub(crate) fn lookups(&self) -> SharedSlots<'_> {
        SharedSlots {
            slots: &self.slots,
            packing: self.packing,
        }
    }

    /// Remembers the ids (at most [`SharedTable::most_ids`]) of the piece with short key `key`.
    pub(crate) fn insert(&self, key: u128, ids: &[TokenId]) -> Inserted {
        debug_assert!(ids.len() <= self.packing.most && key != 0);
        let (state, word) = self.packing.pack(ids);
        self.insert_packed(key, state, word)
    }

    fn insert_packed(&self, key: u128, ready: u64, word: u64) -> Inserted {
        if self.len.0.load(Ordering::Relaxed) >= self.limit {
            return Inserted::Full;
        }
        let mask = self.slots.len() - 1;
        let mut at = mix(key) as usize & mask;
        for _ in 0..MAX_PROBES {
            let slot = &self.slots[at];
            let mut state = slot.state.load(Ordering::Acquire);
            if state == EMPTY {
                // Relaxed on success: what this thread writes next is published by the release
                // store that marks the slot ready, not by this claim.
                match slot
                    .state
                    .compare_exchange(EMPTY, BUSY, Ordering::Relaxed, Ordering::Acquire)
                {
                    Ok(_) => {
                        slot.key_low.store(key as u64, Ordering::Relaxed);
                        slot.key_high.store((key >> 64) as u64, Ordering::Relaxed);
                        slot.ids.store(word, Ordering::Relaxed);
                        slot.state.store(ready, Ordering::Release);
                        return Inserted::New;
                    }
                    Err(now) => state = now, // another thread took it first: look at what it holds
                }
            }
            if state & READY == 0 {
                return Inserted::Not; // being written, perhaps with this very piece
            }
            if slot.key_low.load(Ordering::Relaxed) == key as u64
                && slot.key_high.load(Ordering::Relaxed) == (key >> 64) as u64
            {
                return Inserted::Not;
            }
            at = (at + 1) & mask;
        }
        Inserted::Not
    }

    /// Adds `inserts` new entries (counted by one thread) to the table's count.
    pub(crate) fn count(&self, inserts: usize) {
        self.len.0.fetch_add(inserts, Ordering::Relaxed);
    }

    /// How many entries the table holds, about (threads add theirs in batches).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.len.0.load(Ordering::Relaxed)
    }

    /// A table twice as big with this one's entries (those being written meanwhile are left
    /// out), taking at most `capacity` entries.
    fn grown(&self, capacity: usize) -> SharedTable {
        let bigger = SharedTable::with_slots(2 * self.slots.len(), self.packing, capacity);
        let mut copied = 0;
        for slot in self.slots.iter() {
            let state = slot.state.load(Ordering::Acquire);
            if state & READY == 0 {
                continue;
            }
            let key = u128::from(slot.key_low.load(Ordering::Relaxed))
                | u128::from(slot.key_high.load(Ordering::Relaxed)) << 64;
            let word = slot.ids.load(Ordering::Relaxed);
            if bigger.insert_packed(key, state, word) == Inserted::New {
                copied += 1;
            }
        }
        bigger.count(copied);
        bigger
    }
}

/// An encoder's current [`SharedTable`], kept between calls (a second batch finds the first's
/// pieces), and replaced when full.
pub(crate) struct SharedCache {
    current: Mutex<Arc<SharedTable>>,
    /// The most entries a table may hold (the encoder's cache capacity).
    capacity: usize,
}

impl SharedCache {
    /// Tables of at most `capacity` entries, for ids up to `max_id`.
    pub(crate) fn new(capacity: usize, max_id: TokenId) -> SharedCache {
        // (no bigger than a small capacity needs)
        let slots = FIRST_SLOTS.min(capacity.max(1).saturating_mul(2).next_power_of_two());
        SharedCache {
            current: Mutex::new(Arc::new(SharedTable::with_slots(
                slots,
                Packing::for_max_id(max_id),
                capacity,
            ))),
            capacity,
        }
    }

    /// The table to use now.
    pub(crate) fn table(&self) -> Arc<SharedTable> {
        Arc::clone(&self.current.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The table that replaces `full` (which refused an insert): a bigger one with its entries,
    /// or an empty one once the capacity is reached, or the one that already replaced it; `None`
    /// while another thread is replacing it (the caller carries on with `full`).
    pub(crate) fn replace(&self, full: &Arc<SharedTable>) -> Option<Arc<SharedTable>> {
        let mut current = match self.current.try_lock() {
            Ok(current) => current,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        if Arc::ptr_eq(&current, full) {
            let next = if full.limit >= self.capacity {
                // (afresh, as a full cache)
                SharedTable::with_slots(full.slots.len(), full.packing, self.capacity)
            } else {
                full.grown(self.capacity)
            };
            *current = Arc::new(next);
        }
        Some(Arc::clone(&current))
    }
}

#[cfg(test)]
mod tests {
    //! The table must give back exactly what was put in, from any thread, and stay bounded.
    use super::*;
    use crate::cache::short_key;

    fn key(piece: &[u8]) -> u128 {
        short_key(piece).expect("a short piece")
    }

    fn got(table: &SharedTable, piece: &[u8]) -> Option<Vec<TokenId>> {
        let mut out = vec![99]; // (appended to)
        table.get(key(piece), &mut out).then(|| out[1..].to_vec())
    }

    #[test]
    fn ids_are_packed_in_as_few_bits_as_the_highest_id_needs() {
        for (max_id, most) in [
            (255, 15),
            (50_256, 7),
            (65_535, 7),
            (65_536, 6),
            (199_997, 6),
        ] {
            assert_eq!(Packing::for_max_id(max_id).most, most, "{max_id}");
        }
        assert_eq!(Packing::for_max_id(u32::MAX).most, 3);
        assert_eq!(Packing::for_max_id(0).bits, 1);
    }

    #[test]
    fn a_table_gives_back_what_was_put_in_and_nothing_else() {
        for max_id in [300, 50_256, 65_536, u32::MAX] {
            let table = SharedTable::with_slots(64, Packing::for_max_id(max_id), 64);
            let most = table.most_ids();
            let many: Vec<TokenId> = (0..most as u32).map(|i| max_id - i * 7).collect();
            assert_eq!(got(&table, b"a"), None);
            assert_eq!(table.insert(key(b"a"), &[7]), Inserted::New);
            assert_eq!(table.insert(key(b"a"), &[8]), Inserted::Not); // the first stays
            assert_eq!(table.insert(key(b"a\0"), &[1, 2, 3]), Inserted::New);
            assert_eq!(table.insert(key(b"\0a"), &[]), Inserted::New);
            assert_eq!(table.insert(key(&[0xFF; 15]), &many), Inserted::New);
            assert_eq!(table.insert(key(b"0"), &[max_id, 0, max_id]), Inserted::New);
            assert_eq!(got(&table, b"a"), Some(vec![7]));
            assert_eq!(got(&table, b"a\0"), Some(vec![1, 2, 3]));
            assert_eq!(got(&table, b"\0a"), Some(vec![]));
            assert_eq!(got(&table, &[0xFF; 15]), Some(many));
            assert_eq!(got(&table, b"0"), Some(vec![max_id, 0, max_id]));
            assert_eq!(got(&table, b"b"), None);
            assert_eq!(got(&table, b"\0"), None);
        }
    }

    #[test]
    fn a_full_table_refuses_and_is_replaced_by_a_bigger_one_with_its_entries() {
        let shared = SharedCache::new(FIRST_SLOTS, 50_000); // grows once, then starts afresh
        let piece = |i: usize| format!("p{i}").into_bytes();
        let mut table = shared.table();
        let mut inserted = 0;
        for i in 0.. {
            match table.insert(key(&piece(i)), &[i as u32, 5]) {
                Inserted::New => {
                    table.count(1);
                    inserted += 1;
                }
                Inserted::Not => panic!("{i} refused with room left"),
                Inserted::Full => break,
            }
        }
        assert_eq!(inserted, FIRST_SLOTS / 4 * 3);
        let bigger = shared.replace(&table).expect("no other thread");
        assert!(Arc::ptr_eq(&bigger, &shared.table()));
        assert!(Arc::ptr_eq(&shared.replace(&table).unwrap(), &bigger)); // replaced once only
        assert_eq!(bigger.len(), inserted);
        for i in 0..inserted {
            assert_eq!(got(&bigger, &piece(i)), Some(vec![i as u32, 5]));
        }
        table = bigger;
        for i in inserted.. {
            match table.insert(key(&piece(i)), &[i as u32]) {
                Inserted::New => table.count(1),
                Inserted::Not => panic!("{i} refused with room left"),
                Inserted::Full => break,
            }
        }
        let fresh = shared.replace(&table).unwrap();
        assert_eq!(fresh.len(), 0);
        assert_eq!(got(&fresh, &piece(0)), None);
        assert_eq!(fresh.slots.len(), table.slots.len());
        let small = SharedCache::new(3, 50_000).table(); // a small capacity, a small table
        assert_eq!(small.slots.len(), 8);
    }

    #[test]
    fn threads_inserting_at_once_all_read_what_any_inserted() {
        let table = SharedTable::with_slots(1 << 14, Packing::for_max_id(70_000), 1 << 14);
        let piece = |i: u32| format!("w{}", i % 3000).into_bytes();
        let ids = |i: u32| {
            let i = i % 3000;
            (0..i % 7).map(|j| i * 20 + j).collect::<Vec<TokenId>>()
        };
        std::thread::scope(|scope| {
            for t in 0..4u32 {
                let table = &table;
                scope.spawn(move || {
                    for i in (0..20_000u32).map(|i| i.wrapping_mul(2_654_435_761) ^ t) {
                        let mut out = Vec::new();
                        if table.get(key(&piece(i)), &mut out) {
                            assert_eq!(out, ids(i));
                        } else {
                            table.insert(key(&piece(i)), &ids(i));
                        }
                    }
                });
            }
        });
        for i in 0..3000 {
            if let Some(ids_got) = got(&table, &piece(i)) {
                assert_eq!(ids_got, ids(i));
            }
        }
    }
}
