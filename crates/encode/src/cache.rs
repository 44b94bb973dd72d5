//! The pre-token cache: natural text repeats its words, so each distinct pre-token is merged once.
//!
//! A [`PieceCache`] is used by one thread at a time without locks; the encoder keeps a small pool
//! of them ([`CachePool`]) and lends one to each encoding call or worker thread for its whole run,
//! so that the hot path never touches a lock. Each cache is bounded (it starts afresh when full)
//! and so is the pool.

use crate::bpe::TokenId;
use rustc_hash::FxHashMap;
use std::sync::Mutex;

/// Pre-tokens longer than this are not cached: they are rare, and would make entries unbounded.
pub(crate) const MAX_CACHED_PIECE: usize = 64;

/// Distinct pre-tokens remembered by one cache by default.
pub const DEFAULT_CACHE_ENTRIES: usize = 1 << 19;

/// Pre-token bytes -> ids, the ids of all entries in one vector.
pub(crate) struct PieceCache {
    map: FxHashMap<Box<[u8]>, (u32, u32)>,
    ids: Vec<TokenId>,
    capacity: usize,
}

impl PieceCache {
    fn new(capacity: usize) -> PieceCache {
        PieceCache {
            map: FxHashMap::default(),
            ids: Vec::new(),
            capacity,
        }
    }

    #[inline]
    pub(crate) fn get(&self, piece: &[u8]) -> Option<&[TokenId]> {
        let &(start, len) = self.map.get(piece)?;
        Some(&self.ids[start as usize..(start + len) as usize])
    }

    #[inline]
    pub(crate) fn insert(&mut self, piece: &[u8], ids: &[TokenId]) {
        if self.map.len() >= self.capacity || self.ids.len() + ids.len() >= u32::MAX as usize {
            self.map.clear();
            self.ids.clear();
        }
        let start = self.ids.len() as u32;
        self.ids.extend_from_slice(ids);
        self.map.insert(piece.into(), (start, ids.len() as u32));
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

/// Caches not in use, lent out one per call or thread.
pub(crate) struct CachePool {
    idle: Mutex<Vec<PieceCache>>,
    capacity: usize,
    max_idle: usize,
}

impl CachePool {
    pub(crate) fn new(capacity: usize) -> CachePool {
        let max_idle = std::thread::available_parallelism()
            .map_or(4, |n| n.get())
            .max(2);
        CachePool {
            idle: Mutex::new(Vec::new()),
            capacity,
            max_idle,
        }
    }

    /// The fullest idle cache (it knows the most pre-tokens), or a new one.
    pub(crate) fn take(&self) -> PieceCache {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let fullest = (0..idle.len()).max_by_key(|&i| idle[i].len());
        match fullest {
            Some(i) => idle.swap_remove(i),
            None => PieceCache::new(self.capacity),
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

    /// Runs `f` with a cache lent for its duration.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut PieceCache) -> R) -> R {
        let mut cache = self.take();
        let result = f(&mut cache);
        self.give(cache);
        result
    }
}
