//! Unicode's quick check for a normalization form (UAX #15), by a table: the same answer as
//! unicode-normalization's `is_nf*_quick(text) == IsNormalized::Yes`, with one load for each
//! character of the Basic Multilingual Plane where that crate makes two hashed lookups (its
//! canonical combining class, then its quick-check property). Text in other scripts than Latin
//! is mostly such characters, and Qwen2's and GPT-NeoX's NFC looks at every one of them.

use std::sync::OnceLock;
use unicode_normalization::char::canonical_combining_class;
use unicode_normalization::{
    is_nfc_quick, is_nfd_quick, is_nfkc_quick, is_nfkd_quick, IsNormalized,
};

/// A Unicode normalization form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    Nfc,
    Nfd,
    Nfkc,
    Nfkd,
}

/// In an entry: the character's quick-check property for the form is not Yes (No or Maybe).
const NOT_YES: u16 = 0x100;

/// A character's entry: its canonical combining class (low byte), and [`NOT_YES`].
fn entry(form: Form, c: char) -> u16 {
    let alone = std::iter::once(c);
    // (one character alone: its combining class cannot be out of order, so the answer is its
    // property)
    let property = match form {
        Form::Nfc => is_nfc_quick(alone),
        Form::Nfd => is_nfd_quick(alone),
        Form::Nfkc => is_nfkc_quick(alone),
        Form::Nfkd => is_nfkd_quick(alone),
    };
    let not_yes = if property == IsNormalized::Yes {
        0
    } else {
        NOT_YES
    };
    u16::from(canonical_combining_class(c)) | not_yes
}

/// The entries of the Basic Multilingual Plane for `form`, built on first use (about a
/// millisecond, 128 KiB).
fn plane(form: Form) -> &'static [u16] {
    static PLANES: [OnceLock<Box<[u16]>>; 4] = [const { OnceLock::new() }; 4];
    PLANES[form as usize].get_or_init(|| {
        (0..0x10000u32)
            .map(|code| char::from_u32(code).map_or(0, |c| entry(form, c)))
            .collect()
    })
}

/// Whether `text` is in `form` for sure: `is_nf*_quick(text.chars()) == IsNormalized::Yes`.
/// (False: it may not be.)
#[cfg(test)]
pub(crate) fn is_surely(form: Form, text: &str) -> bool {
    first_unsure(form, text).is_none()
}

/// The byte offset of the character of `text` at which the quick check for `form` stops being
/// sure (a character whose property is not Yes, or a mark out of order), or None when `text` is
/// in the form for sure: `is_nf*_quick(text.chars()) == IsNormalized::Yes`.
pub(crate) fn first_unsure(form: Form, text: &str) -> Option<usize> {
    let plane = plane(form);
    let bytes = text.as_bytes();
    // (the class of the last character: a mark of a lower non-zero class after it is out of order)
    let mut last = 0u16;
    let mut at = 0;
    while at < bytes.len() {
        let lead = bytes[at];
        if lead.is_ascii() {
            // (ASCII is in every form, of class 0: skip to the next character that is not)
            last = 0;
            match first_non_ascii(&bytes[at..]) {
                Some(offset) => at += offset,
                None => return None,
            }
            continue;
        }
        let (code, len) = bpestore_pretokenize::decode_at(bytes, at);
        let entry = match plane.get(code as usize) {
            Some(&entry) => entry,
            None => entry(form, char::from_u32(code).expect("valid UTF-8")),
        };
        let class = entry & 0xFF;
        if entry & NOT_YES != 0 || (last > class && class != 0) {
            return Some(at);
        }
        last = class;
        at += len;
    }
    None
}

/// The offset of the first byte of `bytes` that is not ASCII, eight bytes at a time.
fn first_non_ascii(bytes: &[u8]) -> Option<usize> {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut chunks = bytes.chunks_exact(8);
    let mut at = 0;
    for chunk in chunks.by_ref() {
        let word = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        let high = word & HIGH;
        if high != 0 {
            return Some(at + (high.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|b| !b.is_ascii())
        .map(|offset| at + offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by_the_crate(form: Form, text: &str) -> bool {
        let chars = text.chars();
        IsNormalized::Yes
            == match form {
                Form::Nfc => is_nfc_quick(chars),
                Form::Nfd => is_nfd_quick(chars),
                Form::Nfkc => is_nfkc_quick(chars),
                Form::Nfkd => is_nfkd_quick(chars),
            }
    }

    #[test]
    fn the_table_answers_as_the_crate_does() {
        // Characters that exercise the check: marks of several classes (in and out of order),
        // characters a form decomposes or composes, Hangul jamo, supplementary characters.
        let atoms = [
            "a",
            " ",
            "é",
            "e",
            "\u{301}",
            "\u{323}",
            "\u{302}",
            "\u{316}",
            "\u{5b4}",
            "\u{64e}",
            "\u{94d}",
            "\u{93c}",
            "\u{e38}",
            "\u{e48}",
            "\u{1100}",
            "\u{1161}",
            "\u{11a8}",
            "\u{ac00}",
            "\u{fb01}",
            "\u{2460}",
            "\u{ff21}",
            "\u{212b}",
            "\u{2126}",
            "\u{f900}",
            "\u{1d15e}",
            "\u{1d165}",
            "\u{2f800}",
            "\u{1f600}",
            "\u{10ffff}",
            "中",
            "Я",
            "\u{345}",
            "\u{3099}",
            "\u{30ab}",
            "\u{0344}",
            "\u{1e9b}",
        ];
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        for form in [Form::Nfc, Form::Nfd, Form::Nfkc, Form::Nfkd] {
            for _ in 0..20_000 {
                let text: String = (0..next(7)).map(|_| atoms[next(atoms.len())]).collect();
                assert_eq!(
                    is_surely(form, &text),
                    by_the_crate(form, &text),
                    "{form:?} {text:?}"
                );
            }
            // every character alone, and after a mark of class 230
            for code in (0..0x110000u32).step_by(7) {
                let Some(c) = char::from_u32(code) else {
                    continue;
                };
                let alone = c.to_string();
                assert_eq!(
                    is_surely(form, &alone),
                    by_the_crate(form, &alone),
                    "{form:?} {c:?}"
                );
                let after = format!("a\u{301}{c}");
                assert_eq!(
                    is_surely(form, &after),
                    by_the_crate(form, &after),
                    "{form:?} {c:?}"
                );
            }
        }
    }
}
