//! The engine's packed keys of short byte strings and their hash (the piece caches, the shared
//! table, the vocabulary's table of short tokens): one place, so that those modules need not
//! import each other for them.

/// The key of the first `len` bytes (at most 15) of `window`, 16 bytes read as one little-endian
/// word: those bytes, zeros, and `len` in the top byte, so that byte strings that differ in
/// length or content differ as keys.
#[inline(always)]
pub(crate) fn key_of_window(window: u128, len: usize) -> u128 {
    (window & LOW_BYTES[len]) | ((len as u128) << 120)
}

/// `LOW_BYTES[n]`: the mask of a `u128`'s low `n` bytes. Read from a table: computed, a 128-bit
/// shift by a length known only at run time is a dozen instructions of shifts and selects, for
/// every piece and every join the token rule looks up (3 MB of text in 46 languages, first pass
/// with o200k_base: 1.7% of the instructions).
pub(crate) const LOW_BYTES: [u128; 17] = {
    let mut masks = [u128::MAX; 17];
    let mut n = 0;
    while n < 16 {
        masks[n] = (1u128 << (8 * n)) - 1;
        n += 1;
    }
    masks
};

/// The hash of a key, whose low bits index the tables: the key's two halves, each xored with a
/// constant, multiplied into 128 bits, and the product's halves xored (a "folded multiply", as
/// foldhash and ahash use): every bit of the key reaches the low bits through the product's
/// high half. One multiplication, where the 64-bit finalizer before it took two, and five more
/// instructions per piece; the probes of a warm English pass are as few (1.075 per lookup,
/// simulated on 20 MB of wiki_en_57M, against 1.077).
#[inline]
pub(crate) fn mix(key: u128) -> u64 {
    // (the second constant is odd, and its top byte is not a short key's length, at most 15:
    // the multiplier is never 0 for a short key)
    let low = (key as u64) ^ 0x243F_6A88_85A3_08D3;
    let high = ((key >> 64) as u64) ^ 0x1319_8A2E_0370_7345;
    let product = u128::from(low) * u128::from(high);
    (product as u64) ^ ((product >> 64) as u64)
}
