//! The data of the character classes the scanners need: one byte per code point, from
//! regex-syntax's Unicode tables (the very data fancy_regex uses for `\p{L}`, `\p{N}`, `\s` and
//! friends, so that the scanners and the regex path cannot disagree).
//!
//! Also compiled into the build script, which makes the two-level table once, at build time
//! (see [`two_levels`]), so that no process spends the 15 million instructions of making it: its
//! bytes are part of the library (`classes.rs`).

use std::collections::HashMap;

/// `\p{L}`.
pub(crate) const LETTER: u8 = 1;
/// `\p{N}`.
pub(crate) const NUMBER: u8 = 2;
/// `\s` (Unicode White_Space).
pub(crate) const SPACE: u8 = 4;
/// o200k's "upper" class `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`.
pub(crate) const UPPER: u8 = 8;
/// o200k's "lower" class `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`.
pub(crate) const LOWER: u8 = 16;
/// `[^\s\p{L}\p{N}]`: neither whitespace, nor a letter, nor a number.
pub(crate) const OTHER: u8 = 32;
/// Code points per block of the second level.
pub(crate) const BLOCK_BITS: u32 = 7;
pub(crate) const BLOCK: usize = 1 << BLOCK_BITS;

/// The code point ranges of a regex class such as `\p{Lu}`, as regex-syntax defines it.
pub(crate) fn ranges(class: &str) -> Vec<(u32, u32)> {
    let hir = regex_syntax::parse(class).expect("a valid Unicode class");
    match hir.kind() {
        regex_syntax::hir::HirKind::Class(regex_syntax::hir::Class::Unicode(class)) => class
            .ranges()
            .iter()
            .map(|range| (range.start() as u32, range.end() as u32))
            .collect(),
        other => panic!("{class} is not a Unicode class: {other:?}"),
    }
}

/// A byte for every code point, with the bits of each regex class (`\p{L}`, `[a-z]`, ...) that
/// holds it.
pub(crate) fn flat_table(classes: &[(&str, u8)]) -> Vec<u8> {
    let mut flat = vec![0u8; 0x110000];
    for &(class, bits) in classes {
        for (start, end) in ranges(class) {
            flat[start as usize..=end as usize]
                .iter_mut()
                .for_each(|classes| *classes |= bits);
        }
    }
    flat
}

/// The table of classes in two levels: the first `0x10000` code points' classes flat (the Basic
/// Multilingual Plane), the block number of each run of [`BLOCK`] code points, and the distinct
/// blocks back to back.
#[cfg_attr(not(test), allow(dead_code))] // (the build script's; the library's tests check it)
pub(crate) fn two_levels() -> (Vec<u8>, Vec<u16>, Vec<u8>) {
    let mut flat = flat_table(&[
        (r"\p{L}", LETTER),
        (r"\p{N}", NUMBER),
        (r"\s", SPACE),
        (r"\p{Lu}", UPPER),
        (r"\p{Lt}", UPPER),
        (r"\p{Lm}", UPPER | LOWER),
        (r"\p{Lo}", UPPER | LOWER),
        (r"\p{M}", UPPER | LOWER),
        (r"\p{Ll}", LOWER),
    ]);
    for classes in flat.iter_mut() {
        if *classes & (LETTER | NUMBER | SPACE) == 0 {
            *classes |= OTHER;
        }
    }
    let mut index = Vec::with_capacity(flat.len() / BLOCK);
    let mut blocks = Vec::new();
    let mut seen: HashMap<&[u8], u16> = HashMap::new();
    for block in flat.chunks(BLOCK) {
        let next = seen.len() as u16;
        let number = *seen.entry(block).or_insert_with(|| {
            blocks.extend_from_slice(block);
            next
        });
        index.push(number);
    }
    let bmp = flat[..0x10000].to_vec();
    (bmp, index, blocks)
}
