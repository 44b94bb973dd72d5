//! Falcon's pre-tokenizer by hand: the pieces its pipeline of four pre-tokenizers makes
//! (`tiiuae/falcon-7b`'s tokenizer.json, shared by its family), in one pass over the text
//! instead of four stages, each on the pieces of the one before.
//!
//! The stages:
//! 1. `Punctuation` (`Contiguous`): each run of punctuation characters is a piece, and so is
//!    each run of other characters.
//! 2. `ByteLevel` with GPT-2's regex: each piece of stage 1 split by GPT-2's pattern (its
//!    scanner); a run of punctuation is one piece of that pattern (` ?[^\s\p{L}\p{N}]+`: no
//!    punctuation is whitespace, a letter or a number, and a contraction needs a letter). From
//!    here on, the stages see each byte as the character GPT-2's byte alphabet writes it.
//! 3. `Digits` (`Contiguous`): each run of numeric characters of the alphabet is a piece, and
//!    so is each run of others. The numeric ones are the digits and the bytes 0xB2, 0xB3, 0xB9,
//!    0xBC, 0xBD and 0xBE, which the alphabet writes `²`, `³`, `¹`, `¼`, `½` and `¾`: the second
//!    byte of `ò` (C3 B2) is cut off, as in Hugging Face's `tokenizers`.
//! 4. `Split` by `[0-9][0-9][0-9]` (`Isolated`): each three digits, leftmost first, is a piece,
//!    and so is each stretch between.
//!
//! A test compares the pieces with the pipeline's (the general engine, itself tested against
//! Hugging Face's) on random text.

use crate::classes::{has_digit, HIGH_BITS};

/// Falcon's last stage's regex, as its tokenizer.json has it.
pub(crate) const THREE_DIGITS: &str = "[0-9][0-9][0-9]";

/// Calls `f(start, end)` on the byte span of each piece of `text`, left to right.
pub(crate) fn pieces(text: &str, mut f: impl FnMut(usize, usize)) {
    let bytes = text.as_bytes();
    let base = text.as_ptr() as usize;
    let mut i = 0;
    while i < bytes.len() {
        // Stage 1: the run of characters of one kind from `i`.
        let start = i;
        let (punctuation, len) = punctuation_at(text, i);
        let numerics;
        (i, numerics) = run_end(text, i + len, punctuation);
        if punctuation {
            digits(bytes, start, i, &mut f);
        } else if numerics || bytes[start..start + len].iter().any(|&b| numeric(b)) {
            gpt2(&text[start..i], |piece| {
                let from = piece.as_ptr() as usize - base;
                digits(bytes, from, from + piece.len(), &mut f);
            });
        } else {
            // (no byte of the stretch is numeric: stages 3 and 4 leave its pieces as they are)
            gpt2(&text[start..i], |piece| {
                let from = piece.as_ptr() as usize - base;
                f(from, from + piece.len());
            });
        }
    }
}

/// Stage 2 on a stretch between punctuation: GPT-2's scanner itself, with its 64-byte fast path.
/// (Not through [`crate::Pretokenizer::for_each_piece`], whose shortcuts for one word first cost more
/// than they saved on stretches of a few words: 1.07x on the pass over English.)
#[inline(always)]
fn gpt2<'t>(stretch: &'t str, f: impl FnMut(&'t str)) {
    crate::scan::gpt2(stretch, f, true);
}

/// Whether the character at byte `i` of `text` is punctuation to `Punctuation` (ASCII
/// punctuation and symbols, or a Unicode `P*` category), and its length in bytes.
#[inline]
fn punctuation_at(text: &str, i: usize) -> (bool, usize) {
    let byte = text.as_bytes()[i];
    if byte.is_ascii() {
        return (byte.is_ascii_punctuation(), 1);
    }
    let (code, len) = crate::utf8::decode_at(text.as_bytes(), i);
    let c = char::from_u32(code).expect("a character of a str");
    (crate::classes::is_unicode_punctuation(c), len)
}

/// The end of the run from `i` of characters that are punctuation, or are not (`punctuation`),
/// and whether any of its bytes is one the alphabet writes as a numeric ([`numeric`]). Sixteen
/// bytes at a time while they are ASCII of the run's kind (most of English: a run of words
/// between two commas), a character at a time from the first that is not ASCII.
#[inline]
fn run_end(text: &str, mut i: usize, punctuation: bool) -> (usize, bool) {
    let bytes = text.as_bytes();
    let mut numerics = false;
    while i < bytes.len() {
        #[cfg(target_arch = "x86_64")]
        if let Some(chunk) = bytes.get(i..i + 16) {
            let masks = sixteen(chunk);
            let other_kind = if punctuation {
                !masks.punctuation & 0xFFFF
            } else {
                masks.punctuation
            };
            let stop = other_kind | masks.non_ascii;
            let run = stop.trailing_zeros().min(16);
            numerics |= masks.digit & ((1u32 << run) - 1) != 0;
            i += run as usize;
            if stop == 0 {
                continue;
            }
            // (bytes[i] ends the run, or is the first byte of a character that is not ASCII)
        }
        let byte = bytes[i];
        if byte.is_ascii() {
            if byte.is_ascii_punctuation() != punctuation {
                break;
            }
            numerics |= byte.is_ascii_digit();
            i += 1;
            continue;
        }
        let (next, len) = punctuation_at(text, i);
        if next != punctuation {
            break;
        }
        numerics |= bytes[i..i + len].iter().any(|&byte| numeric(byte));
        i += len;
    }
    (i, numerics)
}

/// Three classes of 16 bytes, one bit per byte (bit k for byte k).
#[cfg(target_arch = "x86_64")]
struct Sixteen {
    /// ASCII punctuation and symbols (`u8::is_ascii_punctuation`).
    punctuation: u32,
    /// Bytes 0x80 and up.
    non_ascii: u32,
    /// ASCII digits (the numeric bytes that are not ASCII are left to the scalar way, which
    /// takes every character that is not ASCII).
    digit: u32,
}

/// The classes of the first 16 bytes of `chunk` (with SSE2, which every x86_64 CPU has).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn sixteen(chunk: &[u8]) -> Sixteen {
    use std::arch::x86_64::*;
    assert!(chunk.len() >= 16);
    // SAFETY: SSE2 is part of every x86_64 CPU; the load reads chunk's first 16 bytes.
    unsafe {
        let bytes = _mm_loadu_si128(chunk.as_ptr().cast());
        // (compares of signed bytes: ASCII is 0 to 127, every other byte below 0, in order)
        let within = |low: u8, high: u8| {
            _mm_and_si128(
                _mm_cmpgt_epi8(bytes, _mm_set1_epi8(low as i8 - 1)),
                _mm_cmplt_epi8(bytes, _mm_set1_epi8(high as i8 + 1)),
            )
        };
        let punctuation = _mm_or_si128(
            _mm_or_si128(within(0x21, 0x2F), within(0x3A, 0x40)),
            _mm_or_si128(within(0x5B, 0x60), within(0x7B, 0x7E)),
        );
        Sixteen {
            punctuation: _mm_movemask_epi8(punctuation) as u32,
            non_ascii: _mm_movemask_epi8(bytes) as u32,
            digit: _mm_movemask_epi8(within(b'0', b'9')) as u32,
        }
    }
}

/// Whether GPT-2's byte alphabet writes `byte` as a numeric character (`char::is_numeric`).
#[inline(always)]
fn numeric(byte: u8) -> bool {
    byte.is_ascii_digit() || matches!(byte, 0xB2 | 0xB3 | 0xB9 | 0xBC..=0xBE)
}

/// Stages 3 and 4 on the piece `bytes[start..end]` of stage 2.
#[inline]
fn digits(bytes: &[u8], start: usize, end: usize, f: &mut impl FnMut(usize, usize)) {
    // (most pieces hold no number, and nothing is left for either stage: a piece of up to eight
    // ASCII bytes is told so by one test on a word)
    let ascii_without_digit = end - start <= 8
        && bytes.get(start..start + 8).is_some_and(|eight| {
            let word = u64::from_le_bytes(eight.try_into().expect("eight bytes"));
            let piece = word & (u64::MAX >> (8 * (8 - (end - start))));
            piece & HIGH_BITS == 0 && !has_digit(piece)
        });
    if ascii_without_digit || !bytes[start..end].iter().any(|&byte| numeric(byte)) {
        f(start, end);
        return;
    }
    let mut i = start;
    while i < end {
        let kind = numeric(bytes[i]);
        let run = bytes[i..end]
            .iter()
            .position(|&byte| numeric(byte) != kind)
            .map_or(end, |offset| i + offset);
        if kind {
            three_digits(bytes, i, run, f);
        } else {
            f(i, run);
        }
        i = run;
    }
}

/// Stage 4 on a run of numeric bytes: three ASCII digits a piece, leftmost first (each byte one
/// character of the alphabet), and each stretch between a piece.
#[inline]
fn three_digits(bytes: &[u8], start: usize, end: usize, f: &mut impl FnMut(usize, usize)) {
    let (mut i, mut stretch) = (start, start);
    while i + 3 <= end {
        if bytes[i..i + 3].iter().all(u8::is_ascii_digit) {
            if stretch < i {
                f(stretch, i);
            }
            f(i, i + 3);
            i += 3;
            stretch = i;
        } else {
            i += 1;
        }
    }
    if stretch < end {
        f(stretch, end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Behavior, Matcher, Pipeline, Stage};

    fn stages(three_digits: &str) -> Vec<Stage> {
        vec![
            Stage::Split {
                matcher: Matcher::Punctuation,
                behavior: Behavior::Contiguous,
                invert: false,
            },
            Stage::ByteLevel { use_regex: true },
            Stage::Split {
                matcher: Matcher::Numeric,
                behavior: Behavior::Contiguous,
                invert: false,
            },
            Stage::Split {
                matcher: Matcher::Regex(fancy_regex::Regex::new(three_digits).unwrap()),
                behavior: Behavior::Isolated,
                invert: false,
            },
        ]
    }

    #[test]
    fn only_falcons_stages_are_taken_for_falcons() {
        assert!(Pipeline::new(stages(THREE_DIGITS)).is_falcon());
        assert!(!Pipeline::new(stages("[0-9][0-9]")).is_falcon());
        let mut other = stages(THREE_DIGITS);
        other[2] = Stage::Split {
            matcher: Matcher::Numeric,
            behavior: Behavior::Isolated,
            invert: false,
        };
        assert!(!Pipeline::new(other).is_falcon());
        assert!(!Pipeline::new(stages(THREE_DIGITS)[1..].to_vec()).is_falcon());
    }

    #[test]
    fn the_pieces_are_the_pipelines() {
        let pipeline = Pipeline::new(stages(THREE_DIGITS));
        // Numbers of every length, digits the alphabet makes of other characters' bytes (ò is
        // C3 B2, ′ E2 80 B2, ½ C2 BD), punctuation of Unicode's categories and ASCII symbols,
        // punctuation beside spaces, letters, contractions and numbers.
        let extra = [
            "1",
            "12",
            "1234",
            "1234567",
            "12345678901",
            "ò",
            "ò1",
            "1ò23",
            "′",
            "2′3",
            "½",
            "1½",
            "²³¹",
            "٣٤٥",
            "Ⅻ",
            "(the",
            " (a",
            "a, b",
            "x.y",
            "«mot»",
            "—",
            "a—b",
            "…",
            "·",
            "$5",
            "5$",
            "+=",
            "'s",
            "don't",
            "'",
            " '",
            "\u{200d}",
            "e\u{301}",
            "\t\tx",
            " \u{a0}y",
            "\r\n\r\n  z",
            "  \n",
            "😀!",
            "中文,字",
            "、",
            "x\u{2028} y",
            ".\n\n",
            " .\r",
            "＃",
            "   ",
            "a   .",
        ];
        crate::tests::assert_pass_matches_the_stages(
            &pipeline,
            &extra,
            (53, 8000, 5),
            |text, f| pieces(text, f),
        );
    }

    #[test]
    fn long_ascii_runs_are_the_pipelines() {
        // Runs of words, spaces and digits, and of punctuation, longer than the 16 bytes a run
        // is read in at a time, each ended somewhere in the 16 (or by the text's end) by a
        // character of the other kind, ASCII or not; a run's only digit anywhere in it.
        let pipeline = Pipeline::new(stages(THREE_DIGITS));
        let mut nasty = crate::tests::Nasty::new(7);
        let words = [
            "the", " cat", " 0", "9", " x1", "  ", "\n", "\t", " sat", "Z",
        ];
        let marks = [".", ",", "!!", "~", "{", "@", "`", "[", "\\", "/", "-"];
        let others = ["é", "—", "′", "½", "中", "«", "0", "a", " "];
        for _ in 0..4000 {
            let mut text = String::new();
            for _ in 0..1 + nasty.below(4) {
                let (kind, long): (&[&str], usize) = if nasty.below(2) == 0 {
                    (&words, 16 + nasty.below(40))
                } else {
                    (&marks, 16 + nasty.below(40))
                };
                let start = text.len();
                while text.len() - start < long {
                    text.push_str(kind[nasty.below(kind.len())]);
                }
                if nasty.below(3) > 0 {
                    text.push_str(others[nasty.below(others.len())]);
                }
            }
            let mut by_pipeline = Vec::new();
            pipeline
                .stage_by_stage(&text, |start, end| by_pipeline.push((start, end)))
                .unwrap();
            let mut by_hand = Vec::new();
            pieces(&text, |start, end| by_hand.push((start, end)));
            assert_eq!(by_hand, by_pipeline, "{text:?}");
        }
    }
}
