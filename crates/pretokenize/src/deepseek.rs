//! DeepSeek-V3's pre-tokenizer by hand: the pieces its pipeline of three `Split`s and a
//! `ByteLevel` makes (`deepseek-ai/DeepSeek-V3`'s tokenizer.json, shared by DeepSeek-R1 and
//! DeepSeek-V2's family), in one pass over the text instead of three regexes, one inside the
//! pieces of the other.
//!
//! The stages, each on the pieces of the one before, `Isolated` (a match and the text between
//! matches are pieces alike):
//! 1. `\p{N}{1,3}`: each run of numbers, three characters a piece.
//! 2. `[一-龥぀-ゟ゠-ヿ]+`: each run of common CJK ideographs, hiragana and katakana.
//! 3. The words, on the stretches left: `[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+`
//!    `|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`.
//!
//! A test compares the pieces with the pipeline's (the general engine, itself tested against
//! Hugging Face's) on random text.

use std::sync::OnceLock;

use crate::classes::{has_digit, HIGH_BITS};

/// DeepSeek-V3's `Split` regexes, as its tokenizer.json has them (and the importer passes them).
pub(crate) const NUMBERS: &str = r"\p{N}{1,3}";
/// The second `Split`.
pub(crate) const CJK: &str = "[一-龥぀-ゟ゠-ヿ]+";
/// The third `Split`.
pub(crate) const WORDS: &str = concat!(
    r##"[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"##,
    r#"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"#
);

const NUMBER: u8 = 1;
const LETTER: u8 = 2;
const MARK: u8 = 4;
const PUNCTUATION: u8 = 8;
const SYMBOL: u8 = 16;
const SPACE: u8 = 32;
/// In the second stage's ranges.
const IDEOGRAPH: u8 = 64;
/// `\r` or `\n`.
const NEWLINE: u8 = 128;

/// The classes of every code point (1.1 MB, built on first use from regex-syntax's tables, the
/// data the regexes match with).
fn classes() -> &'static [u8] {
    static TABLE: OnceLock<Vec<u8>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = crate::classes::flat_table(&[
            (r"\p{N}", NUMBER),
            (r"\p{L}", LETTER),
            (r"\p{M}", MARK),
            (r"\p{P}", PUNCTUATION),
            (r"\p{S}", SYMBOL),
            (r"\s", SPACE),
            ("[一-龥぀-ゟ゠-ヿ]", IDEOGRAPH),
        ]);
        table[usize::from(b'\r')] |= NEWLINE;
        table[usize::from(b'\n')] |= NEWLINE;
        table
    })
}

/// The text with each character's classes, looked up as the scanner goes.
struct Scan<'t> {
    bytes: &'t [u8],
    table: &'static [u8],
}

impl Scan<'_> {
    /// The classes of the character at `i` and its length (0 and 0 at the end).
    #[inline(always)]
    fn at(&self, i: usize) -> (u8, usize) {
        let Some(&lead) = self.bytes.get(i) else {
            return (0, 0);
        };
        if lead.is_ascii() {
            return (self.table[usize::from(lead)], 1);
        }
        let (code, len) = crate::utf8::decode_at(self.bytes, i);
        (self.table[code as usize], len)
    }

    /// The end of the run of characters with a class of `classes` from `i`, before `end`.
    #[inline]
    fn run(&self, mut i: usize, end: usize, classes: u8) -> usize {
        // (ASCII, most of most texts, without decoding)
        while i < end && self.bytes[i].is_ascii() {
            if self.table[usize::from(self.bytes[i])] & classes == 0 {
                return i;
            }
            i += 1;
        }
        while i < end {
            let (class, len) = self.at(i);
            if class & classes == 0 {
                break;
            }
            i += len;
        }
        i
    }

    /// The end of the run of ASCII letters from `i`, before `end`: eight bytes at a time, so
    /// that a word of up to eight letters takes no branch that depends on its length.
    #[inline]
    fn ascii_letters_end(&self, mut i: usize, end: usize) -> usize {
        while let Some(eight) = self.bytes.get(i..i + 8).filter(|_| i + 8 <= end) {
            let word = u64::from_le_bytes(eight.try_into().expect("eight bytes"));
            let not_letters = !ascii_letters(word) & HIGH_BITS;
            if not_letters != 0 {
                return i + (not_letters.trailing_zeros() / 8) as usize;
            }
            i += 8;
        }
        self.bytes[i..end]
            .iter()
            .position(|byte| !byte.is_ascii_alphabetic())
            .map_or(end, |offset| i + offset)
    }

    /// The end of the match of the words' regex (stage 3) at `i` in the stretch ending at
    /// `end`, or None where no alternative matches there.
    fn word(&self, i: usize, end: usize) -> Option<usize> {
        // (the commonest pieces first: an ASCII word, with the space before it or not; its
        // letters, then any letters and marks after them, are the run of the second alternative)
        let start = usize::from(self.bytes[i] == b' ');
        if self
            .bytes
            .get(i + start)
            .is_some_and(u8::is_ascii_alphabetic)
            && i + start < end
        {
            let letters = self.ascii_letters_end(i + start, end);
            return Some(self.run(letters, end, LETTER | MARK));
        }
        let (class, len) = self.at(i);
        let lead = self.bytes[i];
        let next = || if i + len < end { self.at(i + len).0 } else { 0 };
        // `[ASCII punctuation][A-Za-z]+`
        if lead.is_ascii_punctuation() && i + len < end && self.bytes[i + 1].is_ascii_alphabetic() {
            return Some(self.ascii_letters_end(i + 1, end));
        }
        // `[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+` (a mark as the leader, then letters, is the
        // run from the mark all the same)
        if class & (LETTER | MARK) != 0 {
            return Some(self.run(i, end, LETTER | MARK));
        }
        if class & (NEWLINE | PUNCTUATION | SYMBOL) == 0 && next() & (LETTER | MARK) != 0 {
            return Some(self.run(i + len, end, LETTER | MARK));
        }
        // ` ?[\p{P}\p{S}]+[\r\n]*`
        let marks = if class & (PUNCTUATION | SYMBOL) != 0 {
            Some(i)
        } else if lead == b' ' && next() & (PUNCTUATION | SYMBOL) != 0 {
            Some(i + 1)
        } else {
            None
        };
        if let Some(from) = marks {
            let after = self.run(from, end, PUNCTUATION | SYMBOL);
            return Some(self.run(after, end, NEWLINE));
        }
        if class & SPACE == 0 {
            return None;
        }
        // `\s*[\r\n]+`: to the run's last newline; `\s+(?!\S)`: the run but its last character
        // (the whole run at the end); `\s+`: a single character
        let (mut at, mut last, mut after_newline) = (i, i, None);
        while at < end {
            let (class, len) = self.at(at);
            if class & SPACE == 0 {
                break;
            }
            if class & NEWLINE != 0 {
                after_newline = Some(at + len);
            }
            last = at;
            at += len;
        }
        Some(match after_newline {
            Some(after) => after,
            None if at == end || last == i => at,
            None => last,
        })
    }

    /// Stage 3 on the stretch `[start, end)`: each match a piece, and each stretch between.
    fn words(&self, start: usize, end: usize, f: &mut impl FnMut(usize, usize)) {
        let mut i = start;
        let mut gap = None; // where text no match covers began
        while i < end {
            match self.word(i, end) {
                Some(matched) => {
                    if let Some(from) = gap.take() {
                        f(from, i);
                    }
                    f(i, matched);
                    i = matched;
                }
                None => {
                    gap.get_or_insert(i);
                    i += self.at(i).1;
                }
            }
        }
        if let Some(from) = gap {
            f(from, end);
        }
    }
}

/// The high bit of each byte of `word` that is an ASCII letter: the byte folded to lower case
/// (its 0x20 bit set) lies in `a`..=`z`, found by two additions that carry into the high bit of
/// their own byte only (made on the low seven bits; bytes from 0x80 up are then left out).
#[inline(always)]
fn ascii_letters(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let folded = (word & !HIGH_BITS) | (0x20 * ONES);
    let from_a = folded + (0x80 - u64::from(b'a')) * ONES; // high bit: the byte is `a` or above
    let past_z = folded + (0x80 - u64::from(b'z') - 1) * ONES; // high bit: above `z`
    from_a & !past_z & !word & HIGH_BITS
}

/// Calls `f(start, end)` on the byte span of each piece of `text`, left to right.
pub(crate) fn pieces(text: &str, mut f: impl FnMut(usize, usize)) {
    let scan = Scan {
        bytes: text.as_bytes(),
        table: classes(),
    };
    let mut i = 0;
    let mut stretch = 0; // where the text for stage 3 began
    while i < text.len() {
        // (no ASCII character but a digit is a number or in the CJK ranges: eight bytes of
        // ASCII without a digit are passed at once)
        if let Some(chunk) = scan.bytes.get(i..i + 8) {
            let word = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
            if word & HIGH_BITS == 0 && !has_digit(word) {
                i += 8;
                continue;
            }
        }
        let lead = scan.bytes[i];
        if lead.is_ascii() && !lead.is_ascii_digit() {
            i += 1;
            continue;
        }
        let (class, len) = scan.at(i);
        if class & (NUMBER | IDEOGRAPH) == 0 {
            i += len;
            continue;
        }
        scan.words(stretch, i, &mut f);
        if class & NUMBER != 0 {
            // (three numbers a piece, which stage 3 leaves whole: a number is no letter, mark,
            // punctuation, symbol or space, so no alternative of its regex matches in one)
            let mut count = 0;
            let mut from = i;
            while i < text.len() {
                let (class, len) = scan.at(i);
                if class & NUMBER == 0 {
                    break;
                }
                i += len;
                count += 1;
                if count == 3 {
                    f(from, i);
                    (from, count) = (i, 0);
                }
            }
            if count > 0 {
                f(from, i);
            }
        } else {
            // (the run is a piece of stage 2, which stage 3 splits in turn: the ranges hold
            // punctuation and symbols too, `・` and `゛`; a number in them would have been taken
            // by stage 1 first, but there is none, which a test checks)
            let from = i;
            i = scan.run(i, text.len(), IDEOGRAPH);
            scan.words(from, i, &mut f);
        }
        stretch = i;
    }
    scan.words(stretch, text.len(), &mut f);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Behavior, Matcher, Pipeline, Stage};

    fn pipeline() -> Pipeline {
        let split = |pattern: &str| Stage::Split {
            matcher: Matcher::Regex(fancy_regex::Regex::new(pattern).unwrap()),
            behavior: Behavior::Isolated,
            invert: false,
        };
        Pipeline::new(vec![
            split(NUMBERS),
            split(CJK),
            split(WORDS),
            Stage::ByteLevel { use_regex: false },
        ])
    }

    #[test]
    fn the_file_s_spelling_with_a_carriage_return_and_a_newline_is_recognised() {
        let split = |pattern: &str| Stage::Split {
            matcher: Matcher::Regex(fancy_regex::Regex::new(pattern).unwrap()),
            behavior: Behavior::Isolated,
            invert: false,
        };
        let written = WORDS.replace(r"\r", "\r").replace(r"\n", "\n");
        assert_ne!(written, WORDS);
        let stages = |words: &str| {
            vec![
                split(NUMBERS),
                split(CJK),
                split(words),
                Stage::ByteLevel { use_regex: false },
            ]
        };
        assert!(Pipeline::new(stages(&written)).is_deepseek_v3());
        assert!(!Pipeline::new(stages(r"\p{L}+|\s+")).is_deepseek_v3());
    }

    #[test]
    fn eight_bytes_hold_a_digit_exactly_when_one_of_them_is() {
        let mut nasty = crate::tests::Nasty::new(3);
        for _ in 0..100_000 {
            let bytes: [u8; 8] = std::array::from_fn(|_| nasty.below(128) as u8);
            let word = u64::from_le_bytes(bytes);
            assert_eq!(
                has_digit(word),
                bytes.iter().any(u8::is_ascii_digit),
                "{bytes:?}"
            );
        }
    }

    #[test]
    fn eight_bytes_at_a_time_find_the_ascii_letters_byte_by_byte() {
        for first in 0..=255u8 {
            for second in [
                0u8, b'a', b'Z', b'@', b'[', b'`', b'{', 0x80, 0xC1, 0xE1, 0xFA, 0xFF,
            ] {
                let bytes = [first, second, b'q', first, 0xDA, b'A', first ^ 0x80, b'z'];
                let word = u64::from_le_bytes(bytes);
                let expected = bytes.iter().enumerate().fold(0u64, |mask, (k, byte)| {
                    mask | (u64::from(byte.is_ascii_alphabetic()) << (8 * k + 7))
                });
                assert_eq!(ascii_letters(word), expected, "{bytes:?}");
            }
        }
    }

    #[test]
    fn no_number_is_in_the_ideographs_ranges() {
        let table = classes();
        assert!(!table
            .iter()
            .any(|&class| class & NUMBER != 0 && class & IDEOGRAPH != 0));
    }

    #[test]
    fn the_pieces_are_the_pipelines() {
        let pipeline = pipeline();
        assert!(pipeline.is_deepseek_v3());
        let extra = [
            "中文字",
            "ひらがな",
            "カタカナ",
            "一二三",
            "123456",
            "٣٤٥",
            "Ⅻ",
            "(the",
            "((x",
            " (a",
            "«mot»",
            "$5",
            "'s",
            "don't",
            "\u{200d}",
            "\u{200d} ",
            "\u{301}",
            "e\u{301}",
            "\t\tx",
            " \u{a0}y",
            "\r\n\r\n  z",
            "  \n",
            "😀!",
            "\u{85}a",
            "x\u{2028} y",
            ".\n\n",
            " .\r",
            "＃",
            "…",
            "ニカ・ニサヌ",
            "か\u{3099}",
            "゛゜",
            "゠ア",
            "\u{3040}",
            "ー",
            "ヿ",
            "一、二",
        ];
        crate::tests::assert_pass_matches_the_stages(
            &pipeline,
            &extra,
            (31, 6000, 4),
            |text, f| pieces(text, f),
        );
    }
}
