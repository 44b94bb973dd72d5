//! A hint to the CPU to load memory that will be read soon: the one mechanism the tables that
//! wait on memory share (each thread's cache, the table threads share, the vocabulary's table).

/// Hints the CPU to load the cache line holding the byte at `address`, which may be any address
/// (a no-op where there is no such hint).
#[inline(always)]
pub(crate) fn prefetch_address(address: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it never faults, whatever the address (valid or not),
    // and changes no memory. SSE, which it needs, is part of every x86_64 CPU.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(address.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}
