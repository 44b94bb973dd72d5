//! Text stored one code point per unit, as CPython keeps a `str` (one, two or four bytes a
//! character, the narrowest that holds its widest character), written as UTF-8.
//!
//! Runs of ASCII go sixteen units at a time (a test of their OR, then a narrowing the compiler
//! vectorizes), the rest a character at a time without a branch per character. The engine's
//! Python bindings write a `str`'s UTF-8 so when it is [`mostly_ascii`], where CPython's own
//! conversion took two to four times as long (`crates/python/src/text.rs`).

use std::mem::MaybeUninit;

/// A code point UTF-8 cannot hold (a surrogate, U+D800 to U+DFFF) at this index of the units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Surrogate(pub usize);

/// One unit of a wide string: `u8` (Latin-1), `u16` (UCS-2) or `u32` (UCS-4).
pub trait WideUnit: Copy + Into<u32> {
    /// The most UTF-8 bytes one unit can take.
    const MAX_UTF8: usize;
}

impl WideUnit for u8 {
    const MAX_UTF8: usize = 2;
}

impl WideUnit for u16 {
    const MAX_UTF8: usize = 3;
}

impl WideUnit for u32 {
    const MAX_UTF8: usize = 4;
}

/// Units looked at together for a run of ASCII.
const BLOCK: usize = 16;

/// Whether most of `units` lies in runs of ASCII, judged on at most 64 blocks of 16 units spread
/// over it: at least three quarters of them all ASCII. [`wide_to_utf8`] is fast on such text
/// (2-5 ms for 10 MB of English against CPython's 9-13) and not on text mostly in other scripts,
/// a character at a time (14 ms for 10 MB of 46 languages against CPython's 9-12): its caller
/// leaves that to CPython.
pub fn mostly_ascii<U: WideUnit>(units: &[U]) -> bool {
    let blocks = units.len() / BLOCK;
    if blocks == 0 {
        return units.iter().all(|&unit| unit.into() < 0x80);
    }
    let sampled = blocks.min(64);
    let ascii = (0..sampled)
        .map(|k| k * blocks / sampled * BLOCK)
        .filter(|&at| {
            units[at..at + BLOCK]
                .iter()
                .fold(0u32, |acc, &unit| acc | unit.into())
                < 0x80
        })
        .count();
    4 * ascii >= 3 * sampled
}

/// The room [`wide_to_utf8`] needs for `units` units of `U`: each at its widest, and 3 bytes
/// more (each character is written as the four bytes of a word, of which only its own count).
pub fn utf8_room<U: WideUnit>(units: usize) -> usize {
    units * U::MAX_UTF8 + 3
}

/// Writes `units` (code points, one per unit) as UTF-8 at the start of `out` (at least
/// [`utf8_room`] bytes); how many bytes that took, or the index of the first surrogate.
pub fn wide_to_utf8<U: WideUnit>(
    units: &[U],
    out: &mut [MaybeUninit<u8>],
) -> Result<usize, Surrogate> {
    assert!(
        out.len() >= utf8_room::<U>(units.len()),
        "room for the text's UTF-8"
    );
    let mut written = 0;
    let mut at = 0;
    loop {
        // A block of ASCII: each unit its one byte.
        while let Some(block) = units.get(at..at + BLOCK) {
            let block: &[U; BLOCK] = block.try_into().expect("a block of BLOCK units");
            if block.iter().fold(0u32, |acc, &unit| acc | unit.into()) >= 0x80 {
                break;
            }
            let to: &mut [MaybeUninit<u8>; BLOCK] = (&mut out[written..written + BLOCK])
                .try_into()
                .expect("room for a block");
            for (byte, &unit) in to.iter_mut().zip(block) {
                byte.write(unit.into() as u8);
            }
            at += BLOCK;
            written += BLOCK;
        }
        // Then one block (or the rest) a character at a time, without a branch per character
        // (text that is not English mixes widths at random: spaces, letters, digits): each
        // character's sequence is picked from all four, written as one word, and counted.
        let end = units.len().min(at + BLOCK);
        if at == end {
            return Ok(written);
        }
        let mut surrogates = false;
        for &unit in &units[at..end] {
            let code = unit.into();
            surrogates |= code >> 11 == 0xD800 >> 11;
            let (word, len) = utf8_word(code);
            let to: &mut [MaybeUninit<u8>; 4] = (&mut out[written..written + 4])
                .try_into()
                .expect("room for a word");
            for (byte, value) in to.iter_mut().zip(word.to_le_bytes()) {
                byte.write(value);
            }
            written += len;
        }
        if surrogates {
            let index = units[at..end]
                .iter()
                .position(|&unit| unit.into() >> 11 == 0xD800 >> 11)
                .expect("the block's surrogate");
            return Err(Surrogate(at + index));
        }
        at = end;
    }
}

/// The UTF-8 of code point `code` (at most U+10FFFF) as the little-endian bytes of a word, and
/// how many of them it takes.
#[inline(always)]
fn utf8_word(code: u32) -> (u32, usize) {
    let two = 0x80C0 | (code >> 6) | ((code & 0x3F) << 8);
    let three = 0x80_80E0 | (code >> 12) | (((code >> 6) & 0x3F) << 8) | ((code & 0x3F) << 16);
    let four = 0x8080_80F0
        | (code >> 18)
        | (((code >> 12) & 0x3F) << 8)
        | (((code >> 6) & 0x3F) << 16)
        | ((code & 0x3F) << 24);
    let word = if code < 0x80 {
        code
    } else if code < 0x800 {
        two
    } else if code < 0x1_0000 {
        three
    } else {
        four
    };
    let len =
        1 + usize::from(code >= 0x80) + usize::from(code >= 0x800) + usize::from(code >= 0x1_0000);
    (word, len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::Nasty;

    /// The code points of `text` in units of `U` (each fits: the caller picks the width).
    fn units<U: TryFrom<u32>>(text: &[u32]) -> Vec<U> {
        text.iter()
            .map(|&c| {
                U::try_from(c)
                    .ok()
                    .expect("a code point that fits the unit")
            })
            .collect()
    }

    /// `wide_to_utf8` into a vector of its own.
    fn convert<U: WideUnit>(units: &[U]) -> Result<Vec<u8>, Surrogate> {
        let mut out = Vec::with_capacity(utf8_room::<U>(units.len()));
        let written = wide_to_utf8(units, out.spare_capacity_mut())?;
        // SAFETY: wide_to_utf8 wrote the first `written` bytes.
        unsafe { out.set_len(written) };
        Ok(out)
    }

    fn std_utf8(text: &[u32]) -> Vec<u8> {
        text.iter()
            .map(|&c| char::from_u32(c).expect("a scalar value"))
            .collect::<String>()
            .into_bytes()
    }

    /// A code point below `limit` (not a surrogate), ASCII more often than not, so that runs of
    /// ASCII of every length meet characters of every width at every offset.
    fn code(rng: &mut Nasty, limit: u32) -> u32 {
        loop {
            let code = match rng.below(4) {
                0 | 1 => rng.below(0x80) as u32,
                _ => rng.below(limit as usize) as u32,
            };
            if !(0xD800..0xE000).contains(&code) {
                return code;
            }
        }
    }

    #[test]
    fn every_width_matches_the_standard_library() {
        let mut rng = Nasty::new(1);
        for round in 0..3000 {
            let len = rng.below(80);
            for (limit, width) in [(0x100, 1), (0x1_0000, 2), (0x11_0000, 4)] {
                let text: Vec<u32> = (0..len).map(|_| code(&mut rng, limit)).collect();
                let out = match width {
                    1 => convert(&units::<u8>(&text)),
                    2 => convert(&units::<u16>(&text)),
                    _ => convert(&units::<u32>(&text)),
                };
                let expected = std_utf8(&text);
                assert_eq!(
                    out,
                    Ok(expected),
                    "round {round}, width {width}, text {text:x?}"
                );
            }
        }
    }

    #[test]
    fn a_surrogate_is_named_by_its_index() {
        let mut rng = Nasty::new(2);
        for _ in 0..2000 {
            let len = 1 + rng.below(60);
            let mut text: Vec<u32> = (0..len).map(|_| code(&mut rng, 0x11_0000)).collect();
            let at = rng.below(len);
            text[at] = 0xD800 + rng.below(0x800) as u32;
            // (a later one too, at times: the first is named)
            if rng.below(2) == 0 && at + 1 < len {
                text[len - 1] = 0xDFFF;
            }
            assert_eq!(convert(&units::<u32>(&text)), Err(Surrogate(at)));
            let narrow: Vec<u32> = text
                .iter()
                .map(|&c| if c > 0xFFFF { c & 0xFFFF | 0xE000 } else { c })
                .collect();
            assert_eq!(convert(&units::<u16>(&narrow)), Err(Surrogate(at)));
        }
    }

    #[test]
    fn the_widest_characters_fill_the_room_they_are_given() {
        // (utf8_room is the worst case: every unit at its widest)
        for (code, width) in [(0xFFu32, 1), (0xFFFF, 2), (0x10_FFFF, 4)] {
            for len in [0, 1, 15, 16, 17, 40] {
                let text = vec![code; len];
                let out = match width {
                    1 => convert(&units::<u8>(&text)),
                    2 => convert(&units::<u16>(&text)),
                    _ => convert(&units::<u32>(&text)),
                };
                assert_eq!(out, Ok(std_utf8(&text)));
            }
        }
    }

    #[test]
    fn mostly_ascii_counts_the_blocks_it_samples() {
        let english: Vec<u16> =
            "Most of an English text is ASCII: its letters, digits, spaces and \
             punctuation, with an accented word like café only now and then. "
                .encode_utf16()
                .cycle()
                .take(100_000)
                .collect();
        assert!(mostly_ascii(&english));
        let russian: Vec<u16> = "простые слова "
            .encode_utf16()
            .cycle()
            .take(100_000)
            .collect();
        assert!(!mostly_ascii(&russian));
        // (a quarter of the blocks not ASCII is still mostly ASCII; a half is not)
        let mut mixed = vec![u32::from(b'a'); 64 * BLOCK];
        for block in (0..64).step_by(4) {
            mixed[block * BLOCK] = 0x4E2D;
        }
        assert!(mostly_ascii(&mixed));
        for block in (0..64).step_by(2) {
            mixed[block * BLOCK] = 0x4E2D;
        }
        assert!(!mostly_ascii(&mixed));
        assert!(mostly_ascii::<u8>(b"short"));
        assert!(!mostly_ascii::<u16>(&[0x41, 0xE9]));
        assert!(mostly_ascii::<u16>(&[]));
    }

    #[test]
    #[should_panic(expected = "room for the text's UTF-8")]
    fn too_little_room_is_refused() {
        let mut out = vec![MaybeUninit::new(0u8); 10];
        let _ = wide_to_utf8(&[0x41u16; 4], &mut out);
    }
}
