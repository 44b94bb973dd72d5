//! The cut rule: where a text may be split into parts pre-tokenized on their own.
//!
//! For the split-safe patterns (see [`Pretokenizer::is_split_safe`]) two places are piece
//! boundaries with the same pieces on either side as the two sides pre-tokenized on their own:
//!
//! * just before a space between two characters that are not whitespace (every piece holding
//!   such a space starts with it, and no whitespace run continues across it);
//! * just after a newline `\n` between a character that is not whitespace and one that is neither
//!   whitespace nor `/`: a lone newline before non-whitespace is a piece of its own or ends a
//!   punctuation piece (cl100k `[\r\n]*+`, o200k `[\r\n/]*`, which would also take a `/`), it
//!   is at the end of the text alone a piece of its own too, and no pattern lets a newline lead a
//!   word. Texts without spaces (Chinese, Japanese, Thai) can be cut at their lines this way.
//!
//! Special tokens add conditions: such a space must not be followed by a special token (the
//! token is cut out before pre-tokenization, so the space would end its piece of text and join
//! the whitespace run before it), and no cut may lie inside one. The start of a special token is
//! always a safe cut, for any pattern.

use crate::{Pretokenizer, SpecialTokens};

/// Whether `c` is whitespace to Python's `regex` module's `\s` (Unicode `White_Space`): unlike
/// `str.isspace()` and the `re` module it excludes the separators `\x1c`-`\x1f`.
#[inline]
pub fn is_regex_whitespace(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\x0b' | '\x0c' | '\r' | ' ' | '\u{85}' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}'
    )
}

/// The last byte offset at which `text`, a prefix of a longer stream, can be cut without changing
/// its pre-tokens and special tokens, whatever follows; 0 if there is none.
///
/// For a split-safe pattern that is a cut of the module's rule (before a space between two
/// characters that are not whitespace and not followed by a special token, or after a newline
/// between a character that is not whitespace and one that is neither whitespace nor `/`), not
/// inside a special token, and `max(longest special, 1)` bytes or more before the end, so that a
/// special token still arriving cannot reach back over it. For other patterns only the start of a
/// special token (ending that far from the end) is a known boundary. (Python's
/// `Tokenizer._last_safe_cut`, which knows the space but not the newline, and counts the reserve
/// in characters, not bytes.)
pub fn last_safe_cut(text: &str, pretokenizer: &Pretokenizer, specials: &SpecialTokens) -> usize {
    let bytes = text.as_bytes();
    let reserve = specials.longest_len().max(1);
    if bytes.len() <= reserve {
        return 0;
    }
    let mut end = bytes.len() - reserve;
    if !pretokenizer.is_split_safe() {
        return specials
            .find_iter(bytes)
            .take_while(|&(_, start, _)| start < end)
            .filter(|&(_, _, stop)| stop <= end)
            .last()
            .map_or(0, |(_, start, _)| start);
    }
    // Special tokens found from the start of the text (a place no special token covers), so that
    // overlapping ones pair up as they do when encoding; one that ends after `end` may still grow
    // into a longer one, but cannot cover a cut before `end`.
    let spans: Vec<(usize, usize)> = if specials.any_has_space() || specials.any_has_newline() {
        specials
            .find_iter(bytes)
            .map(|(_, start, stop)| (start, stop))
            .collect()
    } else {
        Vec::new()
    };
    while end > 0 {
        let Some(found) = memchr::memrchr2(b' ', b'\n', &bytes[..end]) else {
            return 0;
        };
        end = found;
        if let Some(cut) = cut_at(bytes, found) {
            // (a space before a special token would end its text's piece, not lead the next;
            // found < end, so a special token covering a newline's cut is whole in the text)
            let before_special = bytes[found] == b' ' && specials.starts_at(bytes, found + 1);
            if !before_special && !strictly_inside(&spans, cut) {
                return cut;
            }
        }
    }
    0
}

/// The character whose UTF-8 encoding ends just before byte `end`, if the bytes there are one
/// whole, valid character (a window of a file may start inside one).
fn char_before(bytes: &[u8], end: usize) -> Option<char> {
    let start = (end.saturating_sub(4)..end)
        .rev()
        .find(|&start| bytes[start] & 0xC0 != 0x80)?;
    let mut chars = std::str::from_utf8(&bytes[start..end]).ok()?.chars();
    chars.next()
}

/// The character whose UTF-8 encoding starts at byte `start`, if it is whole and valid.
fn char_at(bytes: &[u8], start: usize) -> Option<char> {
    let len = match *bytes.get(start)? {
        0x00..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => return None,
    };
    std::str::from_utf8(bytes.get(start..start + len)?)
        .ok()?
        .chars()
        .next()
}

/// Whether `byte`, an ASCII byte, is whitespace to `\s`.
#[inline(always)]
fn is_ascii_space(byte: u8) -> bool {
    matches!(byte, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ')
}

/// Whether a whole character that is not whitespace starts at byte `start` (ASCII without
/// decoding: counting asks this of nearly every space and newline of a corpus).
#[inline(always)]
fn not_space_at(bytes: &[u8], start: usize) -> bool {
    match bytes.get(start) {
        Some(&byte) if byte.is_ascii() => !is_ascii_space(byte),
        Some(_) => char_at(bytes, start).is_some_and(|c| !is_regex_whitespace(c)),
        None => false,
    }
}

/// Whether a whole character that is not whitespace ends just before byte `end`.
#[inline(always)]
fn not_space_before(bytes: &[u8], end: usize) -> bool {
    match end.checked_sub(1).map(|last| bytes[last]) {
        Some(byte) if byte.is_ascii() => !is_ascii_space(byte),
        Some(_) => char_before(bytes, end).is_some_and(|c| !is_regex_whitespace(c)),
        None => false,
    }
}

/// Whether the space at byte `space` lies between characters that are not whitespace: the
/// module's first cut, just before that space (special tokens aside).
#[inline]
pub fn is_space_cut(bytes: &[u8], space: usize) -> bool {
    not_space_before(bytes, space) && not_space_at(bytes, space + 1)
}

/// Whether a cut at `cut`, just after a newline (`bytes[cut - 1]`), lies between a character
/// that is not whitespace (before the newline) and one that is neither whitespace nor `/`: the
/// module's second cut (special tokens aside).
#[inline]
pub fn is_newline_cut(bytes: &[u8], cut: usize) -> bool {
    debug_assert_eq!(
        cut.checked_sub(1).map(|newline| bytes[newline]),
        Some(b'\n')
    );
    not_space_before(bytes, cut - 1) && bytes.get(cut) != Some(&b'/') && not_space_at(bytes, cut)
}

/// The cut the space or newline at byte `at` makes, if it makes one (special tokens aside):
/// `at` itself before a space ([`is_space_cut`]), `at + 1` after a newline ([`is_newline_cut`]).
#[inline]
pub fn cut_at(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes[at] {
        b' ' => is_space_cut(bytes, at).then_some(at),
        b'\n' => is_newline_cut(bytes, at + 1).then_some(at + 1),
        _ => None,
    }
}

/// Whether one of `spans` (in order, not overlapping) has `position` strictly inside.
fn strictly_inside(spans: &[(usize, usize)], position: usize) -> bool {
    let index = spans.partition_point(|&(start, _)| start <= position);
    index > 0 && {
        let (start, stop) = spans[index - 1];
        start < position && position < stop
    }
}

/// The first safe cut at or after byte `from` in `bytes` (a window of a file, possibly not valid
/// UTF-8 at its ends), for splitting a corpus into chunks; `None` if the window has none.
///
/// Candidates are the start of a special token that no other occurrence of a special token
/// starting before it covers, and, for a split-safe pattern when no special token contains a
/// space or a newline, the two cuts of the module's rule: before a space between two characters
/// that are not whitespace and is not followed by a special token, and after a newline between a
/// character that is not whitespace and one that is neither whitespace nor `/`. (Python's
/// `corpus._find_cut` allows only spaces between printable ASCII characters.) A cut is only reported when at least `max(longest special, 1)`
/// bytes follow it in the window, so that what follows the window cannot change the verdict;
/// and a special token's occurrence can only be seen to be covered by one that starts inside the
/// window, so a window should start `longest special - 1` bytes before `from` where it can.
/// Consecutive windows should therefore overlap by at least `2 * longest special` bytes.
pub fn next_safe_cut(
    bytes: &[u8],
    from: usize,
    pretokenizer: &Pretokenizer,
    specials: &SpecialTokens,
) -> Option<usize> {
    let reserve = specials.longest_len().max(1);
    if bytes.len() <= reserve || from >= bytes.len() - reserve {
        return None;
    }
    // Cuts must lie before `limit`.
    let mut limit = bytes.len() - reserve;
    let mut best = None;
    for token in specials.tokens().iter().filter(|token| !token.is_empty()) {
        let finder = memchr::memmem::Finder::new(token.as_bytes());
        let mut position = from;
        while position < limit {
            let Some(found) = finder.find(&bytes[position..limit + token.len() - 1]) else {
                break;
            };
            let found = position + found;
            if !covered_by_other_special(bytes, found, specials) {
                limit = found;
                best = Some(found);
                break;
            }
            position = found + 1;
        }
    }
    if pretokenizer.is_split_safe() && !specials.any_has_space() && !specials.any_has_newline() {
        let mut position = from;
        while let Some(found) = memchr::memchr2(b' ', b'\n', &bytes[position..limit]) {
            let found = position + found;
            if let Some(cut) = cut_at(bytes, found) {
                if bytes[found] == b'\n' || !specials.starts_at(bytes, found + 1) {
                    return Some(cut);
                }
            }
            position = found + 1;
        }
    }
    best
}

/// Whether an occurrence of some special token starts before `found` and covers it.
fn covered_by_other_special(bytes: &[u8], found: usize, specials: &SpecialTokens) -> bool {
    specials.tokens().iter().any(|token| {
        let token = token.as_bytes();
        (found.saturating_sub(token.len().saturating_sub(1))..found)
            .any(|begin| !token.is_empty() && bytes[begin..].starts_with(token))
    })
}

/// How much of a text is read at once when looking for a cut in it ([`find_cut`]).
pub const CUT_WINDOW_BYTES: usize = 64 << 10;

/// The first safe cut ([`next_safe_cut`]) at or after byte `target` of a UTF-8 text of `size`
/// bytes that is read a window at a time: `read(start, end, window)` puts bytes `start..end` of
/// the text in `window` (replacing what it held). 0 for a target at or before the start, `size`
/// where no cut follows the target. The one place that knows how the windows must lie for
/// [`next_safe_cut`] (the engine's chunks of a file and Python's shards of any seekable source
/// both start and end where it says); a window is [`CUT_WINDOW_BYTES`] and a little more, and
/// more are read only where the text has no cut.
pub fn find_cut<E>(
    size: u64,
    target: u64,
    pretokenizer: &Pretokenizer,
    specials: &SpecialTokens,
    window: &mut Vec<u8>,
    mut read: impl FnMut(u64, u64, &mut Vec<u8>) -> Result<(), E>,
) -> Result<u64, E> {
    if target == 0 {
        return Ok(0);
    }
    if target >= size {
        return Ok(size);
    }
    // next_safe_cut wants to see, before the place it starts looking, as much as a special token
    // covering that place could start earlier; and it decides nothing in the last `reserve` bytes
    // of a window, so consecutive windows overlap by that much more.
    let reserve = specials.longest_len().max(1) as u64;
    let mut from = target;
    loop {
        let start = from.saturating_sub(reserve);
        let end = (from + CUT_WINDOW_BYTES as u64 + reserve).min(size);
        read(start, end, window)?;
        if let Some(cut) = next_safe_cut(window, (from - start) as usize, pretokenizer, specials) {
            return Ok(start + cut as u64);
        }
        if end >= size {
            return Ok(size);
        }
        from = end - reserve;
    }
}
