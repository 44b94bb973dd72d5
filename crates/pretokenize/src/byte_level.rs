//! GPT-2's byte-level alphabet: the printable character each byte is written as, in a
//! byte-level tokenizer's files (`vocab.json`, `merges.txt`, `tokenizer.json`) and by Hugging
//! Face's `ByteLevel` pre-tokenizer. Printable Latin-1 bytes are themselves; the others are
//! U+0100 on, in the order of the bytes.

use std::sync::LazyLock;

/// The character each byte is written as.
pub static ALPHABET: LazyLock<[char; 256]> = LazyLock::new(|| {
    let mut alphabet = ['\0'; 256];
    let mut next = 0u32;
    for byte in 0..=255u8 {
        let printable = matches!(byte, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        alphabet[byte as usize] = if printable {
            char::from(byte)
        } else {
            next += 1;
            char::from_u32(0x100 + next - 1).expect("a valid character")
        };
    }
    alphabet
});

/// The alphabet read back: by code point, up to its last character (U+0143), the byte that
/// character stands for, or `NOT_IN_ALPHABET`.
static BYTES: LazyLock<Vec<u16>> = LazyLock::new(|| {
    let last = ALPHABET
        .iter()
        .map(|&c| c as usize)
        .max()
        .expect("256 characters");
    let mut bytes = vec![NOT_IN_ALPHABET; last + 1];
    for (byte, &c) in ALPHABET.iter().enumerate() {
        bytes[c as usize] = byte as u16;
    }
    bytes
});
const NOT_IN_ALPHABET: u16 = u16::MAX;

/// The bytes `text` writes in the alphabet, appended to `out`; false (`out` then holds part of
/// them) at the first character that is not in it.
pub fn decode_byte_level(text: &str, out: &mut Vec<u8>) -> bool {
    let bytes = &*BYTES;
    for c in text.chars() {
        match bytes.get(c as usize) {
            Some(&byte) if byte != NOT_IN_ALPHABET => out.push(byte as u8),
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_comes_back() {
        let written: String = ALPHABET.iter().collect();
        let mut out = Vec::new();
        assert!(decode_byte_level(&written, &mut out));
        assert_eq!(out, (0..=255u8).collect::<Vec<u8>>());
        assert_eq!(ALPHABET[b' ' as usize], '\u{120}'); // ("Ġ")
    }

    #[test]
    fn a_character_outside_it_is_refused() {
        for text in [
            " ",
            "a b",
            "\u{144}",
            "\u{ad}",
            "\n",
            "x\u{2581}",
            "\u{1f600}",
        ] {
            assert!(!decode_byte_level(text, &mut Vec::new()), "{text:?}");
        }
    }
}
