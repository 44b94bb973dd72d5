//! The pre-token cache: natural text repeats its words, so each distinct pre-token is merged once.
//!
//! A [`PieceCache`] is used by one thread at a time without locks; the encoder keeps a small pool
//! of them ([`CachePool`]) and lends one to each encoding call or worker thread for its whole run,
//! so that the hot path never touches a lock. Each cache is bounded (it starts afresh when full)
//! and so is the pool.

use crate::bpe::TokenId;
use crate::huge::HugeSlice;
use crate::mix::mix;
use crate::shared::{Inserted, SharedCache, SharedTable, COUNT_EVERY};
use crate::slots::{emit_inline, SlotsAt, INLINE_IDS};
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Pre-tokens longer than this are not cached: they are rare, and would make entries unbounded.
/// Runs of 65 to 256 bytes are words of scripts written without spaces (Chinese, Japanese,
/// Thai, Khmer, Tibetan): in a second pass over 10 MB of text in 33 languages, merging them
/// again was an eighth of the time (o200k_base), so they are kept, within [`LONG_BYTES`].
pub(crate) const MAX_CACHED_PIECE: usize = 256;

/// The most bytes the pieces of more than [`MEDIUM_BYTES`] and their ids may take in one cache
/// (each piece's bytes and four per id): past it the cache starts afresh, as when it holds its
/// capacity, so that text of nothing but long pieces keeps it small.
const LONG_BYTES: usize = 32 << 20;

/// Distinct pre-tokens remembered by one cache by default: three quarters of 2**21, what a
/// table of 2**21 slots takes (see [`Table`]; a table grows to it only for a text that brings
/// that many). A gigabyte of English brings some 400,000 new pieces every 100 MB: a cache of
/// three quarters of 2**20 started afresh every 200 MB, and merged the pieces it had forgotten
/// again (GPT-2, 1 GB to `.npy` on one thread: 6.7 s, now 5.7 s, peak RSS 128 MB, now 151 MB).
pub const DEFAULT_CACHE_ENTRIES: usize = 3 << 19;

/// Pre-tokens of at most this many bytes are keyed by their bytes packed in a `u128`.
pub(crate) const SHORT_BYTES: usize = 15;
/// Each table starts with this many slots and doubles when three quarters full (see [`Table`]).
pub(crate) const FIRST_SLOTS: usize = 1 << 10;

/// The distinct short pieces (at most [`SHORT_BYTES`]) and medium pieces (at most
/// [`MEDIUM_BYTES`]) a cache makes room for before a text, per square root of its bytes (see
/// [`PieceCache::reserve_for_text`]). A text's new words grow about as the square root of its
/// length (Heaps' law): 10 MB of text in 46 languages brings some 120,000 short pieces and
/// 25,000 medium ones (10 MB of English: 95,000 and 5,000), and a text twice as long not twice
/// as many. Below [`RESERVE_FROM_BYTES`], the tables grow as they fill, as they always do.
const SHORT_PIECES_PER_ROOT: f64 = 38.0;
const MEDIUM_PIECES_PER_ROOT: f64 = 8.0;
const RESERVE_FROM_BYTES: usize = 1 << 20;

/// The short-table key of a piece, if it is short.
#[inline]
pub(crate) fn short_key(piece: &[u8]) -> Option<u128> {
    if piece.is_empty() || piece.len() > SHORT_BYTES {
        return None;
    }
    let mut key = [0u8; 16];
    key[..piece.len()].copy_from_slice(piece);
    key[15] = piece.len() as u8;
    Some(u128::from_le_bytes(key))
}

/// [`short_key`] of the piece `text[start..start + len]`, read as one 16-byte load where the
/// text has 16 bytes from `start` (no byte copy, which would stall the load that follows).
#[inline]
pub(crate) fn short_key_in(text: &[u8], start: usize, len: usize) -> Option<u128> {
    if len == 0 || len > SHORT_BYTES {
        return None;
    }
    match text.get(start..start + 16) {
        Some(window) => Some(short_key_of_window(window, len)),
        None => short_key(&text[start..start + len]),
    }
}

/// [`short_key`] of the first `len` bytes (1 to 15) of `window`, 16 bytes of text.
#[inline(always)]
pub(crate) fn short_key_of_window(window: &[u8], len: usize) -> u128 {
    let mut word = [0u8; 16];
    word.copy_from_slice(window);
    crate::mix::key_of_window(u128::from_le_bytes(word), len)
}

/// The first key word the batch's loop gives a piece of more than [`MEDIUM_BYTES`]: its top
/// byte is no short key's length, so no short slot holds it (see [`ShortSlots::emit_run`]).
pub(crate) const NOT_SHORT: u128 = u128::MAX;

/// Pieces of 16 to this many bytes are keyed by their bytes packed in two `u128`s.
pub(crate) const MEDIUM_BYTES: usize = 31;

/// The medium-table key of a piece of 16 to 31 bytes: its first 15 bytes with its length in the
/// top byte, then its other bytes and zeros. The first word's top byte, 16 to 31, is never a
/// short key's (1 to 15): a medium piece's first word never matches a short slot, so the batch's
/// loop compares a piece's first word with its slot's key without first asking how long the
/// piece is (see [`ShortSlots::emit_run`]).
#[inline]
pub(crate) fn medium_key(piece: &[u8]) -> Option<[u128; 2]> {
    let len = piece.len();
    if len <= SHORT_BYTES || len > MEDIUM_BYTES {
        return None;
    }
    let mut low = [0u8; 16];
    low[..SHORT_BYTES].copy_from_slice(&piece[..SHORT_BYTES]);
    low[15] = len as u8;
    let mut high = [0u8; 16];
    high[..len - SHORT_BYTES].copy_from_slice(&piece[SHORT_BYTES..]);
    Some([u128::from_le_bytes(low), u128::from_le_bytes(high)])
}

/// [`medium_key`] of the piece `text[start..start + len]`, read as two 16-byte loads where the
/// text has 32 bytes from `start` (as [`short_key_in`]: a copy of a length known only at run
/// time is a call to `memcpy`, for every piece of text that is not English).
#[inline]
pub(crate) fn medium_key_in(text: &[u8], start: usize, len: usize) -> Option<[u128; 2]> {
    if len <= SHORT_BYTES || len > MEDIUM_BYTES {
        return None;
    }
    match text.get(start..start + 32) {
        Some(window) => {
            let word = |bytes: &[u8]| {
                let mut word = [0u8; 16];
                word.copy_from_slice(bytes);
                u128::from_le_bytes(word)
            };
            let low = word(&window[..16]) & crate::mix::LOW_BYTES[SHORT_BYTES];
            Some([
                low | ((len as u128) << 120),
                word(&window[SHORT_BYTES..SHORT_BYTES + 16])
                    & crate::mix::LOW_BYTES[len - SHORT_BYTES],
            ])
        }
        None => medium_key(&text[start..start + len]),
    }
}

/// A key of an open-addressing table: packed bytes and length, never zero for a piece.
trait Key: Copy + Eq {
    const EMPTY: Self;
    fn hash(self) -> u64;
}

impl Key for u128 {
    const EMPTY: u128 = 0;
    #[inline]
    fn hash(self) -> u64 {
        mix(self)
    }
}

impl Key for [u128; 2] {
    const EMPTY: [u128; 2] = [0, 0];
    #[inline]
    fn hash(self) -> u64 {
        medium_hash(self)
    }
}

/// The hash of a medium key (see [`mix`]).
#[inline]
pub(crate) fn medium_hash(key: [u128; 2]) -> u64 {
    mix(key[0] ^ key[1].rotate_left(61))
}

/// One slot: the key, and the piece's ids inline, or where they are in the cache's `ids`
/// (`[start, len]`) when there are more.
#[derive(Clone, Copy)]
#[repr(C, align(32))] // (a short slot never straddles two cache lines; a medium one fills one)
struct Slot<K> {
    key: K,
    ids: [TokenId; INLINE_IDS],
    count: u32,
}

impl Slot<u128> {
    /// Writes the slot's inline ids and their count at `to`, as one 16-byte move: a run of
    /// found pieces copies them whole. (Built as an array of four ids, the value was taken apart
    /// into three loads and stores, and the count read again after them.)
    ///
    /// # Safety
    /// `to` is valid for writing 16 bytes (any alignment).
    #[inline(always)]
    unsafe fn copy_ids_and_count(&self, to: *mut TokenId) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_storeu_si128};
            // SAFETY: SSE2 is part of x86-64; 16 bytes are read from the slot (see
            // `ids_and_count_at`) and written at `to` (the caller's promise).
            unsafe {
                let value = _mm_loadu_si128(self.ids_and_count_at().cast::<__m128i>());
                _mm_storeu_si128(to.cast::<__m128i>(), value);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        // SAFETY: the caller's promise.
        unsafe {
            to.cast::<[TokenId; INLINE_IDS + 1]>()
                .write_unaligned(self.ids_and_count_at().read())
        };
    }

    /// Where the slot's ids, then its count, are: 16 bytes, readable as
    /// `[TokenId; INLINE_IDS + 1]`.
    #[inline(always)]
    fn ids_and_count_at(&self) -> *const [TokenId; INLINE_IDS + 1] {
        const IDS: usize = std::mem::offset_of!(Slot<u128>, ids);
        const _: () = assert!(
            std::mem::offset_of!(Slot<u128>, count) == IDS + INLINE_IDS * 4,
            "the count follows the ids"
        );
        // The slot is `repr(C)`: its ids and then its count are the 16 bytes from `IDS`
        // (asserted above), all initialized `u32`s, aligned for `TokenId`.
        std::ptr::from_ref(self)
            .cast::<u8>()
            .wrapping_add(IDS)
            .cast::<[TokenId; INLINE_IDS + 1]>()
    }
}

/// An open-addressing table (linear probing, at most three quarters full) whose slots hold the
/// key and the ids: a lookup mostly costs one cache miss (two slots share a cache line).
#[derive(Clone)]
struct Table<K: Key> {
    slots: HugeSlice<Slot<K>>,
    len: usize,
}

impl<K: Key> Table<K> {
    fn new() -> Table<K> {
        Table::with_slots(FIRST_SLOTS)
    }

    /// A table of `slots` slots (a power of two).
    fn with_slots(slots: usize) -> Table<K> {
        Table {
            slots: HugeSlice::filled(slots, Self::empty_slot()),
            len: 0,
        }
    }

    /// The most entries a table of `slots` slots takes before it doubles: three quarters. At
    /// most half, the table of a warm English encode (157K pieces, GPT-2) took 16 MB instead of
    /// 8. The longer probes this costs are mostly within a slot's cache line: a warm pass's
    /// simulated misses of a 1 MB cache rose 4% (cachegrind). Timed, it ran 1.08x faster, but
    /// one build against itself gave 0.90x in the same kind of run: no speed-up is shown.
    fn full_at(slots: usize) -> usize {
        slots / 4 * 3
    }

    /// The fewest slots (a power of two, at least [`FIRST_SLOTS`]) that take `entries` entries.
    fn slots_for(entries: usize) -> usize {
        let mut slots = FIRST_SLOTS;
        while Self::full_at(slots) < entries {
            slots *= 2;
        }
        slots
    }

    fn empty_slot() -> Slot<K> {
        Slot {
            key: K::EMPTY,
            ids: [0; INLINE_IDS],
            count: 0,
        }
    }

    #[inline]
    fn find(&self, key: K) -> usize {
        self.find_hashed(key, key.hash())
    }

    /// [`Table::find`] with the key's hash already computed.
    #[inline(always)]
    fn find_hashed(&self, key: K, hash: u64) -> usize {
        let mask = self.slots.len() - 1;
        let mut at = hash as usize & mask;
        loop {
            let slot_key = self.slots[at].key;
            if slot_key == key || slot_key == K::EMPTY {
                return at;
            }
            at = (at + 1) & mask;
        }
    }

    /// Appends the ids of `key` (whose hash is `hash`) to `out`, if known, taking those that do
    /// not fit in a slot from `ids`; whether they were.
    #[inline(always)]
    fn emit(&self, key: K, hash: u64, ids: &[TokenId], out: &mut Vec<TokenId>) -> bool {
        emit_from(&self.slots, key, hash, ids, out)
    }

    #[inline]
    fn get<'a>(&'a self, key: K, ids: &'a [TokenId]) -> Option<&'a [TokenId]> {
        let slot = &self.slots[self.find(key)];
        if slot.key == K::EMPTY {
            return None;
        }
        Some(if slot.count as usize <= INLINE_IDS {
            &slot.ids[..slot.count as usize]
        } else {
            &ids[slot.ids[0] as usize..(slot.ids[0] + slot.ids[1]) as usize]
        })
    }

    fn insert(&mut self, key: K, piece_ids: &[TokenId], ids: &mut Vec<TokenId>) {
        if Self::full_at(self.slots.len()) < self.len + 1 {
            self.grow();
        }
        let at = self.find(key);
        let mut slot = Slot {
            key,
            ids: [0; INLINE_IDS],
            count: piece_ids.len() as u32,
        };
        if piece_ids.len() <= INLINE_IDS {
            slot.ids[..piece_ids.len()].copy_from_slice(piece_ids);
        } else {
            slot.ids[0] = ids.len() as u32;
            slot.ids[1] = piece_ids.len() as u32;
            ids.extend_from_slice(piece_ids);
        }
        if self.slots[at].key == K::EMPTY {
            self.len += 1;
        }
        self.slots[at] = slot;
    }

    fn grow(&mut self) {
        self.resize(2 * self.slots.len());
    }

    /// Room for `entries` entries in all, without growing on the way (a table never shrinks).
    fn reserve(&mut self, entries: usize) {
        let slots = Self::slots_for(entries);
        if slots > self.slots.len() {
            self.resize(slots);
        }
    }

    /// The same entries in a table of `slots` slots (a power of two that takes them).
    fn resize(&mut self, slots: usize) {
        let bigger = HugeSlice::filled(slots, Self::empty_slot());
        let old = std::mem::replace(&mut self.slots, bigger);
        for slot in old.iter().filter(|slot| slot.key != K::EMPTY) {
            let at = self.find(slot.key);
            self.slots[at] = *slot;
        }
    }

    fn clear(&mut self) {
        self.slots.fill(Self::empty_slot());
        self.len = 0;
    }
}

/// The slot of `key` (whose hash is `hash`) among a table's slots, if the table has it: the
/// probe of [`Table::find_hashed`], but a found key is told from an empty slot once.
#[inline(always)]
fn slot_of<K: Key>(slots: &[Slot<K>], key: K, hash: u64) -> Option<&Slot<K>> {
    let mask = slots.len() - 1;
    let mut at = hash as usize & mask;
    loop {
        let slot = &slots[at];
        if slot.key == key {
            return Some(slot);
        }
        if slot.key == K::EMPTY {
            return None; // (the table has no such key)
        }
        at = (at + 1) & mask;
    }
}

/// [`Table::emit`] over a table's slots (see [`ShortSlots`]).
#[inline(always)]
fn emit_from<K: Key>(
    slots: &[Slot<K>],
    key: K,
    hash: u64,
    ids: &[TokenId],
    out: &mut Vec<TokenId>,
) -> bool {
    let Some(slot) = slot_of(slots, key, hash) else {
        return false;
    };
    let count = slot.count as usize;
    if count <= INLINE_IDS {
        emit_inline(out, &slot.ids, count);
    } else {
        emit_stored(out, ids, slot.ids[0] as usize, slot.ids[1] as usize);
    }
    true
}

/// How many of a piece's stored ids [`emit_stored`] copies as one block.
const STORED_BLOCK: usize = 16;

/// Appends `ids[start..start + count]`, a piece's ids kept in its table's store (more than
/// [`INLINE_IDS`]), to `out`. Up to [`STORED_BLOCK`] of them are copied as one block of that
/// fixed size, a few vector moves, and the length then cut back to `count`: a copy of a length
/// known only at run time is a call to `memcpy` per piece, which took a tenth of a warm pass
/// over text in eleven scripts (o200k_base, whose words there are often 4-16 ids).
#[inline(always)]
fn emit_stored(out: &mut Vec<TokenId>, ids: &[TokenId], start: usize, count: usize) {
    match stored_block(ids, start, count) {
        Some(block) => {
            let len = out.len();
            out.extend_from_slice(block);
            out.truncate(len + count);
        }
        // (a longer piece, or one at the store's end: fewer than a block's ids after it)
        None => out.extend_from_slice(&ids[start..start + count]),
    }
}

/// The block of [`STORED_BLOCK`] ids from `start` in a store, if the `count` ids of a piece
/// there fit in it and the store has that many ids from `start`.
#[inline(always)]
fn stored_block(ids: &[TokenId], start: usize, count: usize) -> Option<&[TokenId; STORED_BLOCK]> {
    let block = ids.get(start..start + STORED_BLOCK)?;
    (count <= STORED_BLOCK).then(|| block.try_into().expect("a block's length"))
}

/// A cache's table of short pieces, borrowed for a run of lookups: its fields are read once,
/// not for every piece (where the cache is behind a `&mut`, they are read again after every
/// call that could change them). Made again after anything that may change the cache.
pub(crate) struct ShortSlots<'c> {
    slots: &'c [Slot<u128>],
    ids: &'c [TokenId],
}

impl ShortSlots<'_> {
    /// Appends the ids of the pieces of a batch from `index` on while they are short and known
    /// (most pieces of a warm pass); the index of the first that is not (or the batch's
    /// length). `words`, `spans`, `hashes`: the batch's keys, spans `(start, length)` and
    /// hashes (see [`crate::Encoder`]'s batch loop).
    ///
    /// A loop of its own, its state in registers: room for a block of stored ids
    /// ([`STORED_BLOCK`]) per piece left is reserved first, and each piece's slot's ids and
    /// their count are copied whole, as one value of four words (those past its ids are written
    /// over by the next piece, or lie past the end); the count then moves the cursor. In the
    /// batch's loop, through the vector, each piece reloaded its length and capacity and spilled
    /// its state (a fifth more instructions per piece).
    #[inline(always)]
    pub(crate) fn emit_run(
        &self,
        words: &[[u128; 2]],
        spans: &[(usize, usize)],
        hashes: &[u64],
        mut index: usize,
        out: &mut Vec<TokenId>,
    ) -> usize {
        // (the most ids a piece writes: a stored block's)
        const WRITTEN: usize = STORED_BLOCK;
        const _: () = assert!(INLINE_IDS == 3, "a slot's ids are copied as three");
        let pieces = words.len().min(spans.len()).min(hashes.len());
        out.reserve((pieces - index.min(pieces)) * WRITTEN);
        let mut base = out.as_mut_ptr();
        let mut len = out.len();
        let mask = self.slots.len().wrapping_sub(1);
        while index < pieces {
            // The piece's first slot holds its key, most often. Only a short piece's first key
            // word can match a short slot (a medium piece's never does, see `medium_key`, nor
            // `NOT_SHORT`), so its length is looked at only when it does not.
            let key = words[index][0];
            let first = &self.slots[hashes[index] as usize & mask];
            let slot = if first.key == key {
                first
            } else {
                // (short: a length of 1 to 15)
                if spans[index].1.wrapping_sub(1) >= SHORT_BYTES {
                    break;
                }
                let Some(slot) = slot_of(self.slots, key, hashes[index]) else {
                    break;
                };
                slot
            };
            let count = slot.count as usize;
            if count > INLINE_IDS {
                // More ids than a slot holds (words of scripts the vocabulary has few tokens
                // for, or long words; 13% of the pieces of 46 languages with cl100k_base):
                // up to a block of them are copied as one, here, from the store. (Out of line,
                // a call for each such piece took 6% of a warm pass over those languages.)
                if let Some(block) = stored_block(self.ids, slot.ids[0] as usize, count) {
                    // SAFETY: as below (a block is WRITTEN ids); the length then covers only
                    // the `count` ids that are the piece's.
                    unsafe {
                        base.add(len)
                            .cast::<[TokenId; STORED_BLOCK]>()
                            .write_unaligned(*block)
                    };
                    len += count;
                    index += 1;
                    continue;
                }
                // (more than a block, or too near the store's end for one)
                // SAFETY: see below; the ids before `len` are initialized.
                unsafe { out.set_len(len) };
                index += 1;
                (base, len) = Self::emit_stored_then_room(out, self.ids, slot, pieces - index);
                continue;
            }
            // SAFETY: room for WRITTEN ids per piece from `index` on was reserved past the
            // length, and `len` grows by at most WRITTEN per piece, so the ids written at `len`
            // are inside the allocation; the length then covers only the `count` (at most
            // INLINE_IDS, just checked) of them that are ids, all initialized.
            unsafe { slot.copy_ids_and_count(base.add(len)) };
            len += count;
            index += 1;
        }
        // SAFETY: see above; the ids before `len` are initialized.
        unsafe { out.set_len(len) };
        index
    }

    /// For [`ShortSlots::emit_run`]: appends the ids of `slot`, kept in `ids` (more than
    /// [`INLINE_IDS`]), to `out`, then makes room for the [`STORED_BLOCK`] ids of each of the
    /// `pieces` pieces left; where `out`'s ids start and its length.
    #[inline(never)]
    fn emit_stored_then_room(
        out: &mut Vec<TokenId>,
        ids: &[TokenId],
        slot: &Slot<u128>,
        pieces: usize,
    ) -> (*mut TokenId, usize) {
        emit_stored(out, ids, slot.ids[0] as usize, slot.ids[1] as usize);
        out.reserve(pieces * STORED_BLOCK);
        (out.as_mut_ptr(), out.len())
    }

    /// Appends the ids of the short piece with key `key` (whose [`mix`] is `hash`) to `out`, if
    /// known; whether they were. The warm encoder's hot path: the hash is the one computed for
    /// the prefetch, and a piece's ids, when inline, are copied without a branch on their count.
    #[inline(always)]
    pub(crate) fn emit(&self, key: u128, hash: u64, out: &mut Vec<TokenId>) -> bool {
        emit_from(self.slots, key, hash, self.ids, out)
    }
}

/// Pre-token bytes -> ids. Almost every piece of natural text has at most 15 bytes, and most of
/// the rest at most 31: those live in two open-addressing tables whose slots hold the key and
/// the ids; longer pieces go to a hash map. Ids that do not fit a slot sit in one vector.
pub(crate) struct PieceCache {
    short: Table<u128>,
    medium: Table<[u128; 2]>,
    long: FxHashMap<Box<[u8]>, (u32, u32)>,
    /// The bytes the long pieces take (see [`LONG_BYTES`]).
    long_bytes: usize,
    ids: Vec<TokenId>,
    capacity: usize,
    /// While threads encode one job together, a cache they share behind this one: a piece one
    /// thread has merged, the others copy instead of merging it again (a lock per local miss).
    /// Only for the pieces `table` does not take.
    pub(crate) shared: Option<Arc<Mutex<PieceCache>>>,
    /// While threads encode one job together, the encoder's table that they share without locks,
    /// in front of this cache: short pieces whose ids fit in its slots live there, not here.
    pub(crate) table: Option<Arc<SharedTable>>,
    /// New entries this thread put in `table` and has not yet added to its count.
    pub(crate) table_inserts: usize,
    /// The encoder's batch of pieces, kept for the next text (see [`crate::Batch`]).
    pub(crate) batch: Option<Box<crate::Batch>>,
    /// The warm table this cache started as (see [`CachePool::seed`]), and starts as again when
    /// full: its pieces are here, so the encoder need not look them up there too.
    pub(crate) seed: Option<Arc<PieceCache>>,
}

impl PieceCache {
    pub(crate) fn new(capacity: usize) -> PieceCache {
        PieceCache {
            short: Table::new(),
            medium: Table::new(),
            long: FxHashMap::default(),
            long_bytes: 0,
            ids: Vec::new(),
            capacity,
            shared: None,
            table: None,
            table_inserts: 0,
            batch: None,
            seed: None,
        }
    }

    /// A cache of `capacity` entries that starts as a copy of `seed` (a warm table).
    fn seeded(seed: &Arc<PieceCache>, capacity: usize) -> PieceCache {
        let mut cache = PieceCache::new(capacity);
        cache.restart_from(seed);
        cache.seed = Some(Arc::clone(seed));
        cache
    }

    /// Makes this cache's pieces `seed`'s.
    fn restart_from(&mut self, seed: &PieceCache) {
        self.short = seed.short.clone();
        self.medium = seed.medium.clone();
        self.long = seed.long.clone();
        self.long_bytes = seed.long_bytes;
        self.ids = seed.ids.clone();
    }

    /// Makes room for the distinct pieces that a text of `bytes` bytes is expected to bring
    /// (see [`SHORT_PIECES_PER_ROOT`]; at most the capacity), so that its tables do not double
    /// their way there from a thousand slots: each doubling made a table anew, faulted its
    /// memory in and put every piece back. A first pass over 10 MB ran 1.10-1.15x faster so
    /// (fresh processes through Python: English with cl100k_base and GPT-2, 46 languages with
    /// cl100k_base and o200k_base). Not while threads share a table (short pieces go there).
    pub(crate) fn reserve_for_text(&mut self, bytes: usize) {
        if self.table.is_some() || bytes < RESERVE_FROM_BYTES {
            return;
        }
        let root = (bytes as f64).sqrt();
        let expected = |per_root: f64| ((root * per_root) as usize).min(self.capacity);
        let (short, medium) = (
            expected(SHORT_PIECES_PER_ROOT),
            expected(MEDIUM_PIECES_PER_ROOT),
        );
        self.short.reserve(short);
        self.medium.reserve(medium);
    }

    /// A cache of `capacity` entries whose tables are made big enough for `short` short and
    /// `medium` medium pieces at once (no growing while they are put in).
    pub(crate) fn with_room(capacity: usize, short: usize, medium: usize) -> PieceCache {
        PieceCache {
            short: Table::with_slots(Table::<u128>::slots_for(short)),
            medium: Table::with_slots(Table::<[u128; 2]>::slots_for(medium)),
            ..PieceCache::new(capacity)
        }
    }

    /// Puts the ids of a short piece in the shared `table` (see [`PieceCache::table`]), replacing
    /// the table by `tables`' next one when it is full. False if there is no table, or the ids do
    /// not fit in its slots: the caller keeps them here instead.
    pub(crate) fn insert_shared(
        &mut self,
        tables: &SharedCache,
        key: u128,
        ids: &[TokenId],
    ) -> bool {
        let Some(table) = self.table.as_ref().filter(|t| ids.len() <= t.most_ids()) else {
            return false;
        };
        match table.insert(key, ids) {
            Inserted::New => {
                self.table_inserts += 1;
                if self.table_inserts == COUNT_EVERY {
                    table.count(COUNT_EVERY);
                    self.table_inserts = 0;
                }
            }
            Inserted::Not => {}
            Inserted::Full => {
                if let Some(next) = tables.replace(table) {
                    self.table_inserts = 0; // (the full table is left: its count matters no more)
                    if next.insert(key, ids) == Inserted::New {
                        self.table_inserts = 1;
                    }
                    self.table = Some(next);
                }
            }
        }
        true
    }

    /// Leaves the shared table, adding this thread's uncounted inserts to its count.
    pub(crate) fn leave_table(&mut self) {
        if let Some(table) = self.table.take() {
            table.count(self.table_inserts);
        }
        self.table_inserts = 0;
    }

    /// This cache's short pieces, for a run of [`ShortSlots::emit`].
    #[inline(always)]
    pub(crate) fn short_slots(&self) -> ShortSlots<'_> {
        ShortSlots {
            slots: &self.short.slots,
            ids: &self.ids,
        }
    }

    /// [`ShortSlots::emit`] for a piece of 16 to 31 bytes (`hash`: its [`medium_hash`]).
    #[inline(always)]
    pub(crate) fn emit_medium(&self, key: [u128; 2], hash: u64, out: &mut Vec<TokenId>) -> bool {
        self.medium.emit(key, hash, &self.ids, out)
    }

    /// Where lookups of short pieces start, to bring the slot a lookup will read into the CPU's
    /// cache a few pieces ahead of it, so that the lookup does not wait for memory (a big cache's
    /// slots are scattered over megabytes: without this, that wait is most of a warm encode's
    /// time). Valid until the cache next changes.
    #[inline(always)]
    pub(crate) fn short_slots_at(&self) -> SlotsAt {
        SlotsAt::of(&self.short.slots)
    }

    /// [`PieceCache::short_slots_at`] for pieces of 16 to 31 bytes.
    #[inline(always)]
    pub(crate) fn medium_slots_at(&self) -> SlotsAt {
        SlotsAt::of(&self.medium.slots)
    }

    /// The ids of a piece (`key`: its short key, if it has one), if known.
    #[inline]
    pub(crate) fn get(&self, piece: &[u8], key: Option<u128>) -> Option<&[TokenId]> {
        if let Some(key) = key {
            return self.short.get(key, &self.ids);
        }
        if let Some(key) = medium_key(piece) {
            return self.medium.get(key, &self.ids);
        }
        if piece.len() > MAX_CACHED_PIECE {
            return None;
        }
        let &(start, len) = self.long.get(piece)?;
        Some(&self.ids[start as usize..(start + len) as usize])
    }

    /// Remembers the ids of a piece (`key`: its short key, if it has one); when the cache holds
    /// its capacity, it starts afresh.
    pub(crate) fn insert(&mut self, piece: &[u8], key: Option<u128>, ids: &[TokenId]) {
        let medium = if key.is_none() {
            medium_key(piece)
        } else {
            None
        };
        let long_bytes = match (key, medium) {
            (None, None) => piece.len() + 4 * ids.len(),
            _ => 0,
        };
        if self.len() >= self.capacity
            || self.ids.len() + ids.len() >= u32::MAX as usize
            || self.long_bytes + long_bytes > LONG_BYTES
        {
            if let Some(seed) = self
                .seed
                .clone()
                .filter(|seed| seed.len() < self.capacity / 2)
            {
                self.restart_from(&seed);
            } else {
                self.short.clear();
                self.medium.clear();
                self.long.clear();
                self.long_bytes = 0;
                self.ids.clear();
            }
        }
        if let Some(key) = key {
            self.short.insert(key, ids, &mut self.ids);
        } else if let Some(key) = medium {
            self.medium.insert(key, ids, &mut self.ids);
        } else {
            self.long_bytes += long_bytes;
            let start = self.ids.len() as u32;
            self.ids.extend_from_slice(ids);
            self.long.insert(piece.into(), (start, ids.len() as u32));
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.short.len + self.medium.len + self.long.len()
    }
}

/// Caches not in use, lent out one per call or thread.
pub(crate) struct CachePool {
    idle: Mutex<Vec<PieceCache>>,
    capacity: usize,
    max_idle: usize,
    /// What each cache starts as, once the encoder has a warm table (see [`CachePool::seed`]).
    seed: OnceLock<Arc<PieceCache>>,
}

impl CachePool {
    /// A cache for threads to share during one job (see [`PieceCache::shared`]).
    pub(crate) fn new_shared(&self) -> Arc<Mutex<PieceCache>> {
        Arc::new(Mutex::new(PieceCache::new(self.capacity)))
    }

    pub(crate) fn new(capacity: usize) -> CachePool {
        let max_idle = std::thread::available_parallelism()
            .map_or(4, |n| n.get())
            .max(2);
        CachePool {
            idle: Mutex::new(Vec::new()),
            capacity,
            max_idle,
            seed: OnceLock::new(),
        }
    }

    /// From now on, each cache lent starts as a copy of `warm` (the encoder's warm table): a
    /// piece of the table is then found in one lookup, where looking in the table first and
    /// the cache second cost two lookups, and two slots fetched, for each piece (a second pass
    /// over English ran 0.75-0.87x as fast as without a table, over text in many languages
    /// 0.6x). The copy, made once per cache, is a few megabytes.
    pub(crate) fn seed(&self, warm: Arc<PieceCache>) {
        let _ = self.seed.set(warm);
        // (caches made before, if any, would miss the table's pieces: they go)
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// The fullest idle cache (it knows the most pre-tokens), or a new one.
    pub(crate) fn take(&self) -> PieceCache {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let fullest = (0..idle.len()).max_by_key(|&i| idle[i].len());
        match (fullest, self.seed.get()) {
            (Some(i), _) => idle.swap_remove(i),
            (None, Some(seed)) => PieceCache::seeded(seed, self.capacity),
            (None, None) => PieceCache::new(self.capacity),
        }
    }

    /// A cache back into the pool; beyond `max_idle` caches, the emptiest goes.
    pub(crate) fn give(&self, cache: PieceCache) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.push(cache);
        if idle.len() > self.max_idle {
            let emptiest = (0..idle.len()).min_by_key(|&i| idle[i].len()).unwrap_or(0);
            idle.swap_remove(emptiest);
        }
    }

    /// Runs `f` with a cache lent for its duration, with the lock-free `table` in front of it
    /// and `shared` behind it.
    pub(crate) fn with_shared<R>(
        &self,
        table: Arc<SharedTable>,
        shared: &Arc<Mutex<PieceCache>>,
        f: impl FnOnce(&mut PieceCache) -> R,
    ) -> R {
        self.with(|cache| {
            cache.shared = Some(Arc::clone(shared));
            cache.table = Some(table);
            let result = f(cache);
            cache.leave_table();
            cache.shared = None;
            result
        })
    }

    /// Runs `f` with a cache lent for its duration.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut PieceCache) -> R) -> R {
        let mut cache = self.take();
        let result = f(&mut cache);
        self.give(cache);
        result
    }
}

#[cfg(test)]
mod tests {
    //! The cache must give back exactly what was put in: keys are packed bytes, so pieces that
    //! differ only in trailing zero bytes or in length must stay apart.
    use super::*;

    fn put(cache: &mut PieceCache, piece: &[u8], ids: &[TokenId]) {
        cache.insert(piece, short_key(piece), ids);
    }

    fn get<'c>(cache: &'c PieceCache, piece: &[u8]) -> Option<&'c [TokenId]> {
        cache.get(piece, short_key(piece))
    }

    #[test]
    fn keys_read_in_place_equal_keys_built_byte_by_byte() {
        let text: Vec<u8> = (0..40u8).map(|b| b.wrapping_mul(37)).collect();
        for start in 0..text.len() {
            for len in 0..=(text.len() - start).min(20) {
                let piece = &text[start..start + len];
                let expected = if len == 0 { None } else { short_key(piece) };
                assert_eq!(short_key_in(&text, start, len), expected, "{start} {len}");
            }
        }
    }

    #[test]
    fn medium_keys_read_in_place_equal_keys_built_byte_by_byte() {
        let text: Vec<u8> = (0..80u8).map(|b| b.wrapping_mul(37)).collect();
        for start in 0..text.len() {
            for len in 0..=(text.len() - start).min(40) {
                let piece = &text[start..start + len];
                let key = medium_key_in(&text, start, len);
                assert_eq!(key, medium_key(piece), "{start} {len}");
                assert_eq!(key.is_some(), (16..=31).contains(&len), "{start} {len}");
            }
        }
    }

    #[test]
    fn medium_keys_tell_pieces_apart_and_never_look_short() {
        // Pieces of zeros and of a byte between 1 and 15 (what a short key's length byte is):
        // pieces that differ only in trailing zeros, or whose 16th byte looks like a length.
        let text: Vec<u8> = (0..64u8)
            .map(|b| [0, 0, 3, 15, 0, 16][b as usize % 6])
            .collect();
        let mut seen = std::collections::HashMap::new();
        for start in 0..text.len() {
            for len in 16..=(text.len() - start).min(31) {
                let piece = &text[start..start + len];
                let key = medium_key(piece).expect("medium");
                assert_eq!((key[0] >> 120) as usize, len, "{piece:?}");
                assert!(short_key(&piece[..15]) != Some(key[0]), "{piece:?}");
                if let Some(other) = seen.insert(key, piece) {
                    assert_eq!(other, piece, "two pieces, one key");
                }
            }
        }
    }

    #[test]
    fn emitted_ids_are_the_ids_put_in() {
        // Short and medium pieces with 1 to 40 ids: inline (up to 3), copied from the store as
        // one block (4 to 16; the last piece put in, 4 ids at the store's very end, as a slice)
        // and longer, looked up by the hash that the encoder computes for the prefetch, appended
        // after ids already in `out`.
        let mut cache = PieceCache::new(1000);
        let pieces: Vec<Vec<u8>> = (2..=31).map(|len| vec![b'a' + len as u8; len]).collect();
        let ids_of = |i: usize| -> Vec<TokenId> {
            (0..=((i * 7) % 40) as u32)
                .map(|k| 100 * k + i as u32)
                .collect()
        };
        let counts: Vec<usize> = (0..pieces.len()).map(|i| ids_of(i).len()).collect();
        assert!(counts.contains(&16) && counts.contains(&17) && counts.contains(&40));
        assert_eq!(counts.last(), Some(&4));
        for (i, piece) in pieces.iter().enumerate() {
            put(&mut cache, piece, &ids_of(i));
        }
        for (i, piece) in pieces.iter().enumerate() {
            let mut out = vec![7, 8];
            let found = match (short_key(piece), medium_key(piece)) {
                (Some(key), _) => cache.short_slots().emit(key, mix(key), &mut out),
                (None, Some(key)) => cache.emit_medium(key, medium_hash(key), &mut out),
                (None, None) => unreachable!("pieces of 2 to 31 bytes"),
            };
            assert!(found, "{piece:?}");
            assert_eq!(out, [vec![7, 8], ids_of(i)].concat(), "{piece:?}");
        }
        let mut out = vec![7];
        let absent = short_key(b"zz").expect("short");
        assert!(!cache.short_slots().emit(absent, mix(absent), &mut out));
        let absent = medium_key(&[b'z'; 20]).expect("medium");
        assert!(!cache.emit_medium(absent, medium_hash(absent), &mut out));
        assert_eq!(out, [7], "a miss appends nothing");
    }

    #[test]
    fn pieces_that_pack_alike_stay_apart() {
        let mut cache = PieceCache::new(1000);
        let pieces: Vec<Vec<u8>> = vec![
            b"a".to_vec(),
            b"a\0".to_vec(),
            b"\0a".to_vec(),
            b"\0".to_vec(),
            b"\0\0".to_vec(),
            vec![b'x'; 15],
            vec![b'x'; 16],
            [vec![b'x'; 15], vec![0]].concat(),
            vec![b'x'; 31],
            [vec![b'x'; 30], vec![0]].concat(),
            vec![b'x'; 32],
            [vec![0], vec![b'x'; 17]].concat(),
            vec![0xff; 15],
            vec![7; 64],
        ];
        for (i, piece) in pieces.iter().enumerate() {
            assert_eq!(get(&cache, piece), None);
            let ids: Vec<TokenId> = (0..=i as u32).collect(); // 1 to 10 ids: inline and not
            put(&mut cache, piece, &ids);
        }
        for (i, piece) in pieces.iter().enumerate() {
            let ids: Vec<TokenId> = (0..=i as u32).collect();
            assert_eq!(get(&cache, piece), Some(ids.as_slice()), "{piece:?}");
        }
        assert_eq!(get(&cache, b"b"), None);
        assert_eq!(get(&cache, &[b'x'; 14]), None);
    }

    #[test]
    fn tables_fill_to_three_quarters_and_are_sized_for_what_they_take() {
        for entries in [0, 1, 767, 768, 769, 3 * FIRST_SLOTS, 100_000, 262_144] {
            let slots = Table::<u128>::slots_for(entries);
            assert!(slots.is_power_of_two() && slots >= FIRST_SLOTS, "{entries}");
            assert!(Table::<u128>::full_at(slots) >= entries, "{entries}");
            assert!(slots == FIRST_SLOTS || Table::<u128>::full_at(slots / 2) < entries);
        }
        let mut table: Table<u128> = Table::with_slots(FIRST_SLOTS);
        let mut ids = Vec::new();
        for i in 0..FIRST_SLOTS as u32 {
            table.insert(u128::from(i) + 1, &[i], &mut ids);
            assert!(4 * table.len <= 3 * table.slots.len(), "{i}");
        }
        assert_eq!(table.slots.len(), 2 * FIRST_SLOTS); // (doubled once, past 768 entries)
        for i in 0..FIRST_SLOTS as u32 {
            assert_eq!(table.get(u128::from(i) + 1, &ids), Some([i].as_slice()));
        }
    }

    #[test]
    fn long_pieces_are_kept_up_to_their_byte_budget() {
        // Pieces of 32 to MAX_CACHED_PIECE bytes are kept and found; one longer is never found;
        // and once the long pieces' bytes would pass LONG_BYTES, the cache starts afresh
        // (entries alone, far below its capacity, would never make it).
        let mut cache = PieceCache::new(usize::MAX);
        let piece = |i: usize, len: usize| -> Vec<u8> {
            let mut piece = format!("{i:08}").into_bytes();
            piece.resize(len, b'x');
            piece
        };
        for len in [MEDIUM_BYTES + 1, 64, 65, MAX_CACHED_PIECE] {
            put(&mut cache, &piece(len, len), &[len as u32, 7]);
            assert_eq!(
                get(&cache, &piece(len, len)),
                Some([len as u32, 7].as_slice())
            );
        }
        assert_eq!(get(&cache, &piece(0, MAX_CACHED_PIECE + 1)), None);
        let mut cache = PieceCache::new(usize::MAX);
        let ids: Vec<TokenId> = (0..64).collect();
        let each = MAX_CACHED_PIECE + 4 * ids.len();
        let fit = LONG_BYTES / each;
        for i in 0..fit {
            put(&mut cache, &piece(i, MAX_CACHED_PIECE), &ids);
        }
        assert_eq!(cache.len(), fit);
        assert_eq!(
            get(&cache, &piece(0, MAX_CACHED_PIECE)),
            Some(ids.as_slice())
        );
        put(&mut cache, &piece(fit, MAX_CACHED_PIECE), &ids);
        assert_eq!(cache.len(), 1, "started afresh");
        assert_eq!(get(&cache, &piece(0, MAX_CACHED_PIECE)), None);
        assert_eq!(
            get(&cache, &piece(fit, MAX_CACHED_PIECE)),
            Some(ids.as_slice())
        );
    }

    #[test]
    fn growing_keeps_every_entry_and_a_full_cache_starts_afresh() {
        let capacity = 3 * FIRST_SLOTS; // grows twice before it is full
        let mut cache = PieceCache::new(capacity);
        // short, medium and long pieces
        let piece = |i: usize| format!("w{i}").repeat(1 + i % 7).into_bytes();
        for i in 0..capacity {
            put(&mut cache, &piece(i), &[i as u32, 1, 2, 3]);
        }
        assert_eq!(cache.len(), capacity);
        for i in 0..capacity {
            assert_eq!(get(&cache, &piece(i)), Some([i as u32, 1, 2, 3].as_slice()));
        }
        put(&mut cache, b"one more", &[9]);
        assert_eq!(cache.len(), 1);
        assert_eq!(get(&cache, b"one more"), Some([9].as_slice()));
        assert_eq!(get(&cache, &piece(0)), None);
    }

    #[test]
    fn room_made_for_a_text_keeps_the_entries_and_needs_no_growing() {
        let short_piece = |i: usize| format!("r{i}").into_bytes();
        let medium_piece = |i: usize| format!("medium piece {i:>10}").into_bytes();
        let mut cache = PieceCache::new(DEFAULT_CACHE_ENTRIES);
        for i in 0..1000 {
            put(&mut cache, &short_piece(i), &[i as u32]);
            put(&mut cache, &medium_piece(i), &[i as u32, 1]);
        }
        // A short text makes no room; a text of 10 MB, room for its expected pieces.
        cache.reserve_for_text(RESERVE_FROM_BYTES - 1);
        assert_eq!(cache.short.slots.len(), 2 * FIRST_SLOTS);
        let bytes = 10_000_000;
        cache.reserve_for_text(bytes);
        let root = (bytes as f64).sqrt();
        let short = (root * SHORT_PIECES_PER_ROOT) as usize;
        let medium = (root * MEDIUM_PIECES_PER_ROOT) as usize;
        let (short_slots, medium_slots) = (cache.short.slots.len(), cache.medium.slots.len());
        assert!(Table::<u128>::full_at(short_slots) >= short && short > 100_000);
        assert!(Table::<[u128; 2]>::full_at(medium_slots) >= medium && medium > 20_000);
        // The entries are all still there, and the expected number more fit without growing.
        for i in 0..1000 {
            assert_eq!(get(&cache, &short_piece(i)), Some([i as u32].as_slice()));
            assert_eq!(
                get(&cache, &medium_piece(i)),
                Some([i as u32, 1].as_slice())
            );
        }
        for i in 1000..short {
            put(&mut cache, &short_piece(i), &[i as u32]);
        }
        for i in 1000..medium {
            put(&mut cache, &medium_piece(i), &[i as u32, 1]);
        }
        assert_eq!(cache.short.slots.len(), short_slots);
        assert_eq!(cache.medium.slots.len(), medium_slots);
        // A table never shrinks, and the capacity bounds the room made.
        cache.reserve_for_text(RESERVE_FROM_BYTES);
        assert_eq!(cache.short.slots.len(), short_slots);
        let mut small = PieceCache::new(5000);
        small.reserve_for_text(1 << 30);
        assert_eq!(small.short.slots.len(), Table::<u128>::slots_for(5000));
    }

    #[test]
    fn a_seeded_cache_starts_as_its_seed_and_again_when_full() {
        let piece = |i: usize| format!("s{i}").repeat(1 + i % 7).into_bytes();
        let mut seed = PieceCache::new(usize::MAX);
        for i in 0..100 {
            put(&mut seed, &piece(i), &[i as u32, 7, 7, 7, 7]);
        }
        let seed = Arc::new(seed);
        let pool = CachePool::new(1000);
        pool.seed(Arc::clone(&seed));
        let mut cache = pool.take();
        for i in 0..100 {
            assert_eq!(
                get(&cache, &piece(i)),
                Some([i as u32, 7, 7, 7, 7].as_slice())
            );
        }
        // Full (the seed's 100 and 900 more): it starts as the seed again, not empty.
        for i in 0..900 {
            put(&mut cache, format!("other {i}").as_bytes(), &[1, 2]);
        }
        assert_eq!(cache.len(), 1000);
        put(&mut cache, b"one more", &[9]);
        assert_eq!(cache.len(), 101);
        assert_eq!(get(&cache, b"one more"), Some([9].as_slice()));
        assert_eq!(get(&cache, b"other 0"), None);
        assert_eq!(get(&cache, &piece(99)), Some([99, 7, 7, 7, 7].as_slice()));
        assert_eq!(seed.len(), 100); // (the seed itself is never written)
    }
}
