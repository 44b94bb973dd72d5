//! The character classes the scanners need, one byte per code point, looked up in two levels.
//!
//! The table is made from regex-syntax's Unicode tables (see [`crate::class_data`]) by the build
//! script, and its bytes are part of the library: made at run time, it had cost every process
//! 15 million instructions at its first scan.

pub(crate) use crate::class_data::{
    flat_table, ranges, LETTER, LOWER, NUMBER, OTHER, SPACE, UPPER,
};
use crate::class_data::{BLOCK, BLOCK_BITS};

/// In [`BYTES`] only: a byte of a multi-byte character, to be decoded.
pub(crate) const NON_ASCII: u8 = 128;

/// The classes of ASCII characters, known by heart (a test checks them against the Unicode-built
/// table), and `NON_ASCII` for the other bytes: the scanners' fast path needs no table lookup.
pub(crate) const BYTES: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut byte = 0;
    while byte < 256 {
        table[byte] = match byte as u8 {
            b'A'..=b'Z' => LETTER | UPPER,
            b'a'..=b'z' => LETTER | LOWER,
            b'0'..=b'9' => NUMBER,
            b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ' => SPACE,
            0x80..=0xFF => NON_ASCII,
            _ => OTHER,
        };
        byte += 1;
    }
    table
};

/// The classes of every code point.
pub(crate) struct Table {
    /// The classes of the Basic Multilingual Plane (U+0000 to U+FFFF), flat: every script of
    /// running text in common use (Latin, Greek, Cyrillic, Arabic, Hebrew, the Indic scripts,
    /// Thai, CJK, Hangul, ...) is found with one load, where the two levels below take two
    /// dependent ones; 64 KiB, of which a text touches only its scripts' lines.
    bmp: &'static [u8; 0x10000],
    /// Block number of each run of `BLOCK` code points (little-endian `u16`s).
    index: &'static [u8],
    /// The distinct blocks, back to back.
    blocks: &'static [u8],
}

impl Table {
    /// The classes of `c`, a code point below U+10000 (a character of two or three UTF-8 bytes).
    #[inline]
    pub(crate) fn get_bmp(&self, c: u16) -> u8 {
        self.bmp[c as usize]
    }

    /// The classes of `c` (bits `LETTER`, `NUMBER`, `SPACE`, `UPPER`, `LOWER`, `OTHER`).
    #[inline]
    pub(crate) fn get(&self, c: u32) -> u8 {
        if c < 0x10000 {
            return self.bmp[c as u16 as usize];
        }
        self.get_two_level(c)
    }

    /// The classes of `c` from the two levels (any code point).
    #[inline]
    fn get_two_level(&self, c: u32) -> u8 {
        let at = 2 * (c >> BLOCK_BITS) as usize;
        let block = u16::from_le_bytes([self.index[at], self.index[at + 1]]) as usize;
        self.blocks[block * BLOCK + (c as usize & (BLOCK - 1))]
    }
}

/// The table (see the module's documentation).
pub(crate) fn table() -> &'static Table {
    static TABLE: Table = Table {
        bmp: include_bytes!(concat!(env!("OUT_DIR"), "/class_bmp.bin")),
        index: include_bytes!(concat!(env!("OUT_DIR"), "/class_index.bin")),
        blocks: include_bytes!(concat!(env!("OUT_DIR"), "/class_blocks.bin")),
    };
    &TABLE
}

/// The high bit of each of eight bytes.
pub(crate) const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// Whether one of the eight ASCII bytes of `word` is a digit (its bytes minus `0` are then
/// below 10: the classic test for a byte below n, exact for bytes below 128).
#[inline]
pub(crate) fn has_digit(word: u64) -> bool {
    let offsets = word ^ 0x3030_3030_3030_3030;
    (offsets.wrapping_sub(0x0A0A_0A0A_0A0A_0A0A) & !offsets & HIGH_BITS) != 0
}

/// Unicode punctuation (general categories Pc, Pd, Ps, Pe, Pi, Pf, Po), as `tokenizers`' `is_punc`.
pub(crate) fn is_unicode_punctuation(c: char) -> bool {
    // (regex-syntax's ranges for \p{P}, the data fancy_regex matches it with; sorted)
    static PUNCTUATION: std::sync::LazyLock<Vec<(u32, u32)>> =
        std::sync::LazyLock::new(|| ranges(r"\p{P}"));
    if c.is_ascii() {
        return false;
    }
    let code = c as u32;
    let after = PUNCTUATION.partition_point(|&(start, _)| start <= code);
    after > 0 && code <= PUNCTUATION[after - 1].1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each class bit and the regex that says which characters have it.
    const CLASS_PATTERNS: [(&str, u8); 6] = [
        (r"^\p{L}$", LETTER),
        (r"^\p{N}$", NUMBER),
        (r"^\s$", SPACE),
        (r"^[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]$", UPPER),
        (r"^[\p{Ll}\p{Lm}\p{Lo}\p{M}]$", LOWER),
        (r"^[^\s\p{L}\p{N}]$", OTHER),
    ];

    #[test]
    fn ascii_by_heart_is_the_unicode_table() {
        for byte in 0..128u32 {
            assert_eq!(BYTES[byte as usize], table().get(byte), "{byte:#x}");
        }
        assert!(BYTES[128..].iter().all(|&classes| classes == NON_ASCII));
    }

    /// The flat table of the Basic Multilingual Plane, which two- and three-byte characters take,
    /// holds what the two levels hold, and what fancy_regex says, for every one of its code points.
    #[test]
    fn flat_bmp_table_is_the_two_levels_and_fancy_regex() {
        let table = table();
        let checks =
            CLASS_PATTERNS.map(|(pattern, bit)| (fancy_regex::Regex::new(pattern).unwrap(), bit));
        for code in 0..0x10000u32 {
            let flat = table.get_bmp(code as u16);
            assert_eq!(flat, table.get_two_level(code), "{code:#x}");
            assert_eq!(flat, table.get(code), "{code:#x}");
            let Some(c) = char::from_u32(code) else {
                continue; // a surrogate: no character, never in a str
            };
            for (regex, bit) in &checks {
                let expected = regex.is_match(c.encode_utf8(&mut [0; 4])).unwrap();
                assert_eq!(flat & bit != 0, expected, "{regex:?} {c:?}");
            }
        }
    }

    /// The bytes the build script wrote are the table made now from regex-syntax's data.
    #[test]
    fn built_table_is_the_one_made_now() {
        let (bmp, index, blocks) = crate::class_data::two_levels();
        let table = table();
        assert_eq!(&table.bmp[..], &bmp[..]);
        let index: Vec<u8> = index
            .iter()
            .flat_map(|number| number.to_le_bytes())
            .collect();
        assert_eq!(table.index, &index[..]);
        assert_eq!(table.blocks, &blocks[..]);
        assert_eq!(index.len(), 2 * (0x110000 / BLOCK));
    }

    #[test]
    fn table_is_compact_and_agrees_with_fancy_regex() {
        let table = table();
        assert!(table.blocks.len() < 200_000, "{} bytes", table.blocks.len());
        for (pattern, bit) in CLASS_PATTERNS {
            let regex = fancy_regex::Regex::new(pattern).unwrap();
            for c in (0..0x110000u32).step_by(7).filter_map(char::from_u32) {
                let expected = regex.is_match(c.encode_utf8(&mut [0; 4])).unwrap();
                assert_eq!(table.get(c as u32) & bit != 0, expected, "{pattern} {c:?}");
            }
        }
    }
}
