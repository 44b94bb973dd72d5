//! The slots of the pre-token tables (each thread's cache, the table threads share): where a
//! key's lookup starts, to prefetch it, and a slot's inline ids copied out. Apart from both
//! tables, which each use them.

use crate::bpe::TokenId;
use crate::prefetch::prefetch_address;

/// A short piece with at most this many ids keeps them in its slot.
pub(crate) const INLINE_IDS: usize = 3;

/// Where a table's lookups start, for prefetching: the slot of a key whose hash is `hash` is at
/// `base + (hash & mask) * stride`. Read from the table once per batch of pieces, so that each
/// piece's prefetch is a few instructions (no bounds check nor reload of the table's fields,
/// which a prefetch needs no more than it needs a valid address).
#[derive(Clone, Copy)]
pub(crate) struct SlotsAt {
    base: *const u8,
    mask: usize,
    stride: usize,
}

impl SlotsAt {
    /// Where the lookups of `slots` (a power of two of them) start.
    #[inline]
    pub(crate) fn of<T>(slots: &[T]) -> SlotsAt {
        SlotsAt {
            base: slots.as_ptr().cast(),
            mask: slots.len().wrapping_sub(1),
            stride: std::mem::size_of::<T>(),
        }
    }

    /// Asks the CPU to bring the slot where the lookup of a key whose hash is `hash` starts into
    /// its cache.
    #[inline(always)]
    pub(crate) fn prefetch(self, hash: u64) {
        // (wrapping: the address is only computed, never read through)
        prefetch_address(
            self.base
                .wrapping_add((hash as usize & self.mask).wrapping_mul(self.stride)),
        );
    }
}

/// Appends the first `count` of a slot's inline ids to `out`. All of them are copied, as one
/// fixed-size move, into room reserved past the end, and the length grows by `count`: most pieces
/// have one or two ids, and a copy whose length depends on the count would be a call or a branch
/// per piece.
#[inline(always)]
pub(crate) fn emit_inline(out: &mut Vec<TokenId>, ids: &[TokenId; INLINE_IDS], count: usize) {
    debug_assert!(count <= INLINE_IDS);
    out.reserve(INLINE_IDS);
    let len = out.len();
    // SAFETY: `reserve` made room for at least INLINE_IDS more ids past `len`, so the write of
    // INLINE_IDS ids at `len` stays inside the allocation, and it cannot overlap `ids` (a slot of
    // a table, not this vector). Those ids are then initialized, so the new length `len + count`
    // (count <= INLINE_IDS, checked by the caller) covers only initialized ids.
    unsafe {
        std::ptr::copy_nonoverlapping(ids.as_ptr(), out.as_mut_ptr().add(len), INLINE_IDS);
        out.set_len(len + count.min(INLINE_IDS));
    }
}
