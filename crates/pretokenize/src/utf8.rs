//! UTF-8 validation that names the first bad byte the way Python's decoder does.

use std::fmt;

/// Where and why bytes are not valid UTF-8: the offset of the first bad byte (the start of the
/// bad sequence, as Python's `UnicodeDecodeError.start`) and Python's reason words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Utf8Error {
    /// Offset of the first byte of the invalid (or truncated) sequence.
    pub offset: usize,
    /// `"invalid start byte"`, `"invalid continuation byte"` or `"unexpected end of data"`.
    pub reason: &'static str,
}

impl fmt::Display for Utf8Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid UTF-8 at byte offset {} ({})",
            self.offset, self.reason
        )
    }
}

impl std::error::Error for Utf8Error {}

/// The code point of the character that starts at `bytes[i]`, a lead byte of two to four bytes
/// of well-formed UTF-8 (text from a `str`), and its length.
#[inline(always)]
pub fn decode_at(bytes: &[u8], i: usize) -> (u32, usize) {
    let lead = bytes[i];
    let continuation = |k: usize| u32::from(bytes[i + k] & 0x3F);
    match lead {
        0xC0..=0xDF => ((u32::from(lead & 0x1F) << 6) | continuation(1), 2),
        0xE0..=0xEF => (
            (u32::from(lead & 0x0F) << 12) | (continuation(1) << 6) | continuation(2),
            3,
        ),
        _ => (
            (u32::from(lead & 0x07) << 18)
                | (continuation(1) << 12)
                | (continuation(2) << 6)
                | continuation(3),
            4,
        ),
    }
}

/// `bytes` as text, or the first invalid byte with Python's reason for it.
pub fn check_utf8(bytes: &[u8]) -> Result<&str, Utf8Error> {
    // simdutf8 checks 64 bytes at a time whatever their script, where the standard library goes
    // a character at a time through text that is not ASCII (a tenth of counting 77 MB of 33
    // languages); it says only whether the bytes are valid, so the standard library names the
    // first bad byte of bytes that are not.
    if let Ok(text) = simdutf8::basic::from_utf8(bytes) {
        return Ok(text);
    }
    std::str::from_utf8(bytes).map_err(|error| {
        let offset = error.valid_up_to();
        let reason = match error.error_len() {
            None => "unexpected end of data",
            // Python calls a byte that cannot start a sequence an invalid start byte; anything
            // else that fails (a bad second, third or fourth byte, overlong forms, surrogates,
            // code points past U+10FFFF) is an invalid continuation byte.
            Some(_) if matches!(bytes[offset], 0x80..=0xC1 | 0xF5..=0xFF) => "invalid start byte",
            Some(_) => "invalid continuation byte",
        };
        Utf8Error { offset, reason }
    })
}
