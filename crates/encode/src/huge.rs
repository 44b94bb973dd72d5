//! Tables of megabytes on the kernel's huge pages (2 MB) where it offers them, rather than 4 KB
//! ones. The encoder's tables (the piece cache's slots, the vocabulary's, the pair rule's) are
//! read at random, one cache line per lookup: on 4 KB pages a lookup in a table of several
//! megabytes often misses the TLB as well, and under a hypervisor such a miss walks two sets of
//! page tables. Such a table is mapped on its own, aligned to 2 MB, and the kernel is asked
//! for huge pages (`madvise(MADV_HUGEPAGE)`, which Linux honours when transparent huge pages are
//! `always` or `madvise`, the usual settings) before its first write. Elsewhere, when the kernel
//! says no, or for a smaller table, it is an ordinary allocation.
//!
//! Measured in fresh processes through Python, one core, 10 MB, medians of 10 alternating pairs:
//! a cold pass 1.085x faster over 46 languages with o200k_base, 1.02-1.07x on the other texts
//! and vocabularies, and warm passes 1.015-1.09x; loading unchanged.
//!
//! Its own mapping, not the allocator's: glibc serves a large allocation from the heap once a
//! mapping of that size has been freed (its threshold rises), and a table that doubles frees one
//! at each doubling, so most tables ended up in heap memory already touched on small pages.

use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// Tables smaller than this are ordinary allocations: a huge page is 2 MB.
const HUGE_PAGE: usize = 2 << 20;

/// A fixed-length slice of `T`, on huge pages where it is large enough and the kernel offers
/// them (see the module's doc). Its start and length are plain fields, so that reading an
/// element costs what it costs in a `Box<[T]>`.
pub(crate) struct HugeSlice<T> {
    start: NonNull<T>,
    len: usize,
    /// The bytes of its own mapping (from `start`), or 0 where it is a `Box<[T]>`'s memory.
    mapped: usize,
}

// SAFETY: a HugeSlice owns its elements, as a Box<[T]> does: sent or shared as T is.
unsafe impl<T: Send> Send for HugeSlice<T> {}
unsafe impl<T: Sync> Sync for HugeSlice<T> {}

impl<T: Clone> HugeSlice<T> {
    /// `len` copies of `value`.
    pub(crate) fn filled(len: usize, value: T) -> HugeSlice<T> {
        HugeSlice::from_fn(len, |_| value.clone())
    }
}

impl<T> HugeSlice<T> {
    /// `len` elements, the element at `i` made by `make(i)`.
    pub(crate) fn from_fn(len: usize, mut make: impl FnMut(usize) -> T) -> HugeSlice<T> {
        let bytes = len.saturating_mul(std::mem::size_of::<T>());
        #[cfg(target_os = "linux")]
        if bytes >= HUGE_PAGE && std::mem::align_of::<T>() <= HUGE_PAGE {
            if let Some((start, mapped)) = map_huge(bytes) {
                let start = start.cast::<T>();
                for i in 0..len {
                    // SAFETY: the mapping holds `len` elements from `start`, aligned (2 MB).
                    // (Should `make` panic, the mapping and what it holds leak: safe.)
                    unsafe { start.as_ptr().add(i).write(make(i)) };
                }
                return HugeSlice { start, len, mapped };
            }
        }
        let boxed: Box<[T]> = (0..len).map(make).collect();
        let start = NonNull::from(Box::leak(boxed)).cast::<T>();
        HugeSlice {
            start,
            len,
            mapped: 0,
        }
    }
}

/// A fresh anonymous mapping of at least `bytes`, starting on a 2 MB boundary, with huge pages
/// asked for: its start and its length; None if the kernel refuses the mapping.
#[cfg(target_os = "linux")]
fn map_huge(bytes: usize) -> Option<(NonNull<u8>, usize)> {
    let mapped = bytes.div_ceil(HUGE_PAGE) * HUGE_PAGE;
    // (one huge page more than needed, so that a 2 MB boundary lies within the first)
    let reserved = mapped + HUGE_PAGE;
    // SAFETY: a new private anonymous mapping, touching no memory of the process.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            reserved,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return None;
    }
    let base = base as usize;
    let start = base.next_multiple_of(HUGE_PAGE);
    // SAFETY: the head and the tail unmapped are parts of the reservation just made, outside
    // [start, start + mapped); MADV_HUGEPAGE changes how that range is backed, not its contents,
    // and its failure (no transparent huge pages here) leaves it on small pages: ignored.
    unsafe {
        if start > base {
            libc::munmap(base as *mut libc::c_void, start - base);
        }
        let tail = base + reserved - (start + mapped);
        if tail > 0 {
            libc::munmap((start + mapped) as *mut libc::c_void, tail);
        }
        libc::madvise(start as *mut libc::c_void, mapped, libc::MADV_HUGEPAGE);
    }
    NonNull::new(start as *mut u8).map(|start| (start, mapped))
}

/// Asks the kernel for huge pages behind the part of `memory` (memory of the caller's, not yet
/// written: a vector's spare capacity, a buffer just allocated) that holds whole 2 MB pages, so
/// that writing it faults a page in per 2 MB rather than per 4 KB; a no-op for less, or where
/// the kernel has no transparent huge pages. For the buffers of megabytes a first pass writes
/// once, front to back (a text's UTF-8, its ids): in a fresh process each 4 KB fault cost some
/// 2.4 microseconds of system time on a virtual machine, 6,400 of them in a first pass over 10 MB
/// of English (15.7 ms, a sixth of the pass).
pub fn advise_huge_pages<T>(memory: &mut [std::mem::MaybeUninit<T>]) {
    #[cfg(target_os = "linux")]
    {
        let begin = memory.as_mut_ptr() as usize;
        let end = begin + std::mem::size_of_val(memory);
        let (first, last) = (
            begin.next_multiple_of(HUGE_PAGE),
            end / HUGE_PAGE * HUGE_PAGE,
        );
        if last > first {
            // SAFETY: [first, last) lies within `memory`, which the caller owns (borrowed
            // mutably); MADV_HUGEPAGE changes how that range is backed, not its contents, and
            // its failure (no transparent huge pages here) leaves it on small pages: ignored.
            unsafe {
                libc::madvise(
                    first as *mut libc::c_void,
                    last - first,
                    libc::MADV_HUGEPAGE,
                );
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = memory;
}

/// Lets glibc serve allocations of up to 32 MB from its heap, where freed memory is used again,
/// rather than from fresh mappings, faulted in afresh each time: a block of just under that size
/// is mapped and freed, untouched, which raises glibc's threshold for mapping to it (and the
/// threshold for giving the heap's top back to twice that), as any program's first free of so
/// big a block does. The ids of a text of megabytes are such a block: without this, the first
/// passes of a fresh process mapped their vectors afresh, and a second pass over 10 MB of
/// English with o200k_base, the first's ids freed, took 265 page faults and ran 0.93x as fast
/// as with the threshold raised (0 faults). Nothing where the allocator is not glibc's.
pub fn let_the_heap_serve_big_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // (glibc raises the threshold on freeing a mapped block of at most 32 MB: this one's
        // size with its header stays below that; it is never written, so it costs no memory;
        // where the address space is limited and it cannot be had, nothing changes)
        let mut block: Vec<u8> = Vec::new();
        if block.try_reserve_exact((32 << 20) - (64 << 10)).is_ok() {
            drop(std::hint::black_box(block));
        }
    }
}

impl<T> Drop for HugeSlice<T> {
    fn drop(&mut self) {
        let elements = std::ptr::slice_from_raw_parts_mut(self.start.as_ptr(), self.len);
        if self.mapped == 0 {
            // SAFETY: the memory of the Box<[T]> leaked in `from_fn`, taken back once.
            drop(unsafe { Box::from_raw(elements) });
            return;
        }
        #[cfg(target_os = "linux")]
        // SAFETY: the mapping is this slice's own, its `len` elements initialised, and nothing
        // borrows it any more: they are dropped, then the mapping goes.
        unsafe {
            std::ptr::drop_in_place(elements);
            libc::munmap(self.start.as_ptr().cast(), self.mapped);
        }
    }
}

impl<T> Deref for HugeSlice<T> {
    type Target = [T];

    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: `len` initialised elements from `start`, owned by this slice.
        unsafe { std::slice::from_raw_parts(self.start.as_ptr(), self.len) }
    }
}

impl<T> DerefMut for HugeSlice<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, borrowed mutably through `self`.
        unsafe { std::slice::from_raw_parts_mut(self.start.as_ptr(), self.len) }
    }
}

impl<T: Clone> Clone for HugeSlice<T> {
    fn clone(&self) -> HugeSlice<T> {
        HugeSlice::from_fn(self.len(), |i| self[i].clone())
    }
}

impl<T> Default for HugeSlice<T> {
    fn default() -> HugeSlice<T> {
        HugeSlice::from_fn(0, |_| unreachable!("no elements"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_and_large_slices_hold_what_was_written() {
        for len in [
            0,
            1,
            1000,
            (HUGE_PAGE / 8) - 1,
            HUGE_PAGE / 8,
            3 * HUGE_PAGE / 8 + 5,
        ] {
            let mut slice = HugeSlice::filled(len, 7u64);
            assert_eq!(slice.len(), len);
            assert!(slice.iter().all(|&x| x == 7));
            for (i, x) in slice.iter_mut().enumerate() {
                *x = i as u64;
            }
            let copy = slice.clone();
            drop(slice);
            assert!(
                copy.iter().enumerate().all(|(i, &x)| x == i as u64),
                "{len}"
            );
        }
    }

    #[test]
    fn large_slices_start_on_a_huge_page() {
        let slice = HugeSlice::filled(HUGE_PAGE / 16 * 3, 1u128);
        if cfg!(target_os = "linux") {
            assert_eq!(slice.as_ptr() as usize % HUGE_PAGE, 0);
        }
    }

    #[test]
    fn elements_are_made_in_order_and_dropped_once() {
        use std::rc::Rc;
        let counted = Rc::new(());
        let len = HUGE_PAGE / std::mem::size_of::<(usize, Rc<()>)>() + 3;
        let slice = HugeSlice::from_fn(len, |i| (i, Rc::clone(&counted)));
        assert!(slice.iter().enumerate().all(|(i, (j, _))| i == *j));
        assert_eq!(Rc::strong_count(&counted), len + 1);
        let copy = slice.clone();
        assert_eq!(Rc::strong_count(&counted), 2 * len + 1);
        drop(slice);
        drop(copy);
        assert_eq!(Rc::strong_count(&counted), 1);
    }

    #[test]
    fn aligned_elements_stay_aligned() {
        #[derive(Clone, Copy)]
        #[repr(align(64))]
        struct Line([u8; 64]);
        let slice = HugeSlice::filled(40_000, Line([3; 64]));
        assert_eq!(slice.as_ptr() as usize % 64, 0);
        assert!(slice.iter().all(|line| line.0 == [3; 64]));
    }
}
