//! The hash of the engine's packed keys (the piece caches, the shared table, the vocabulary's
//! table of short tokens): one place, so that those modules need not import each other for it.

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
