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
use crate::Pretokenizer;

/// Falcon's last stage's regex, as its tokenizer.json has it.
pub(crate) const THREE_DIGITS: &str = "[0-9][0-9][0-9]";

/// Calls `f(start, end)` on the byte span of each piece of `text`, left to right. `gpt2`: a
/// pre-tokenizer of GPT-2's pattern.
pub(crate) fn pieces(text: &str, gpt2: &Pretokenizer, mut f: impl FnMut(usize, usize)) {
    let bytes = text.as_bytes();
    let base = text.as_ptr() as usize;
    let mut i = 0;
    while i < bytes.len() {
        // Stage 1: the run of characters of one kind from `i`.
        let start = i;
        let (punctuation, len) = punctuation_at(text, i);
        i = run_end(text, i + len, punctuation);
        if punctuation {
            digits(bytes, start, i, &mut f);
        } else {
            gpt2.for_each_piece(&text[start..i], |piece| {
                let from = piece.as_ptr() as usize - base;
                digits(bytes, from, from + piece.len(), &mut f);
            });
        }
    }
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

/// The end of the run from `i` of characters that are punctuation, or are not (`punctuation`).
#[inline]
fn run_end(text: &str, mut i: usize, punctuation: bool) -> usize {
    let bytes = text.as_bytes();
    while i < bytes.len() {
        // (ASCII, most of most texts, without a call or decoding)
        let byte = bytes[i];
        if byte.is_ascii() {
            if byte.is_ascii_punctuation() != punctuation {
                break;
            }
            i += 1;
            continue;
        }
        let (next, len) = punctuation_at(text, i);
        if next != punctuation {
            break;
        }
        i += len;
    }
    i
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
        let gpt2 = Pretokenizer::new(crate::GPT2_PATTERN).unwrap();
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
            |text, f| pieces(text, &gpt2, f),
        );
    }
}
