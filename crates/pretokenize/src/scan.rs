//! Hand-written scanners for the GPT-2, cl100k_base and o200k_base patterns (Llama-3's and
//! Qwen2's on cl100k_base's), and SuperBPE's stage 2.
//!
//! Each gives exactly the pieces of its regex (a backtracking, leftmost-first match at each
//! position in turn). Every character is matched by some alternative of these patterns, so the
//! pieces tile the text and each scanner only decides where the piece starting at `i` ends,
//! taking the alternatives in the pattern's order. ASCII is classified by a constant table, other
//! characters by [`crate::classes`], which is built from the regex engine's own Unicode data.
//! The reasoning for each alternative is written beside it; the differential tests compare every
//! scanner with fancy_regex on generated text.
//!
//! Where the text is ASCII, a fast path ([`crate::block`]) finds the pieces of 64 bytes at a time
//! from bit masks and takes over from the piece-at-a-time code; it hands back to it, for a piece
//! or more, wherever it cannot be sure (characters that are not ASCII, contractions).

use crate::block::{self, classify, Classes, Rules};
use crate::classes::{table, Table, BYTES, LETTER, LOWER, NON_ASCII, NUMBER, OTHER, SPACE, UPPER};
use crate::sink::Pieces;

/// A text and its classifier.
struct Scan<'t> {
    bytes: &'t [u8],
    table: &'static Table,
}

impl Scan<'_> {
    /// The classes and the UTF-8 length of the character whose first byte is `bytes[i]`.
    #[inline(always)]
    fn at(&self, i: usize) -> (u8, usize) {
        let classes = BYTES[self.bytes[i] as usize];
        if classes & NON_ASCII == 0 {
            return (classes, 1);
        }
        self.decode(i)
    }

    #[inline]
    fn decode(&self, i: usize) -> (u8, usize) {
        // The text is a `str`, so this is the start of a well-formed sequence.
        let bytes = self.bytes;
        let lead = bytes[i] as u32;
        // Two and three bytes (every code point below U+10000) take the flat table.
        if lead < 0xE0 {
            let code = ((lead & 0x1F) << 6) | (bytes[i + 1] as u32 & 0x3F);
            (self.table.get_bmp(code as u16), 2)
        } else if lead < 0xF0 {
            let code = ((lead & 0x0F) << 12)
                | ((bytes[i + 1] as u32 & 0x3F) << 6)
                | (bytes[i + 2] as u32 & 0x3F);
            (self.table.get_bmp(code as u16), 3)
        } else {
            let code = ((lead & 0x07) << 18)
                | ((bytes[i + 1] as u32 & 0x3F) << 12)
                | ((bytes[i + 2] as u32 & 0x3F) << 6)
                | (bytes[i + 3] as u32 & 0x3F);
            (self.table.get(code), 4)
        }
    }

    /// The classes of the character at `i`, or 0 (no class) at the end of the text.
    #[inline(always)]
    fn class_at(&self, i: usize) -> u8 {
        if i < self.bytes.len() {
            self.at(i).0
        } else {
            0
        }
    }

    /// The end of the longest run from `i` of characters having any of the classes `bits`.
    #[inline(always)]
    fn run(&self, i: usize, bits: u8) -> usize {
        // ASCII runs of one class go eight bytes at a time; the loop below takes over at the
        // first byte outside the class (often the end of the run, else a non-ASCII character).
        let mut i = match bits {
            LETTER => self.ascii_run(i, b'a', b'z', 0x20),
            LOWER => self.ascii_run(i, b'a', b'z', 0),
            UPPER => self.ascii_run(i, b'A', b'Z', 0),
            NUMBER => self.ascii_run(i, b'0', b'9', 0),
            _ => i,
        };
        let bytes = self.bytes;
        while let Some(&byte) = bytes.get(i) {
            let classes = BYTES[byte as usize];
            if classes & bits != 0 {
                i += 1;
                continue;
            }
            if classes & NON_ASCII == 0 {
                return i;
            }
            let (classes, len) = self.decode(i);
            if classes & bits == 0 {
                return i;
            }
            i += len;
        }
        i
    }

    /// The most common piece in English, an ASCII letter or a space and an ASCII letter, then
    /// letters: the end of the letters (GPT-2's ` ?\p{L}+`, cl100k's leader and `\p{L}++`, which
    /// win over every other alternative there). None for any other start.
    #[inline(always)]
    fn ascii_word(&self, i: usize) -> Option<usize> {
        let bytes = self.bytes;
        let first = if bytes[i] == b' ' { i + 1 } else { i };
        let letter = bytes
            .get(first)
            .is_some_and(|&byte| BYTES[byte as usize] & LETTER != 0);
        letter.then(|| self.run(first + 1, LETTER))
    }

    /// The end of the run from `i` of ASCII bytes that lie in `low..=high` once `fold` is OR-ed
    /// into them (`fold = 0x20` maps A-Z onto a-z and moves no other byte into a-z), eight bytes
    /// at a time: for each byte of a 64-bit word, adding `0x80 - low` to its low 7 bits sets
    /// its top bit if it is at least `low` (no carry can cross into the next byte), adding
    /// `0x7F - high` sets it if it is above `high`; bytes with the top bit set are not ASCII.
    #[inline(always)]
    fn ascii_run(&self, mut i: usize, low: u8, high: u8, fold: u8) -> usize {
        const ONES: u64 = 0x0101_0101_0101_0101;
        const TOP: u64 = ONES * 0x80;
        while let Some(chunk) = self.bytes.get(i..i + 8) {
            let word = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
            let seven_bits = (word | (ONES * fold as u64)) & !TOP;
            let at_least_low = seven_bits + ONES * (0x80 - low) as u64;
            let above_high = seven_bits + ONES * (0x7F - high) as u64;
            let outside = !(at_least_low & !above_high & !word) & TOP;
            if outside != 0 {
                return i + (outside.trailing_zeros() / 8) as usize;
            }
            i += 8;
        }
        i
    }

    /// The end of up to three numbers from `i` (`\p{N}{1,3}`; the first is known to be one).
    #[inline(always)]
    fn three_numbers(&self, mut i: usize) -> usize {
        for _ in 0..3 {
            if i >= self.bytes.len() {
                break;
            }
            let (class, len) = self.at(i);
            if class & NUMBER == 0 {
                break;
            }
            i += len;
        }
        i
    }

    /// The end of the longest run of the bytes in `set` from `i`.
    #[inline(always)]
    fn run_bytes(&self, mut i: usize, set: &[u8]) -> usize {
        while i < self.bytes.len() && set.contains(&self.bytes[i]) {
            i += 1;
        }
        i
    }

    /// A run of whitespace from `i` (which is whitespace): its end, the start of its last
    /// character, and the end of its last `\r` or `\n` if it has one.
    #[inline(always)]
    fn whitespace(&self, mut i: usize) -> (usize, usize, Option<usize>) {
        let mut last = i;
        let mut newline_end = None;
        while i < self.bytes.len() {
            let (class, len) = self.at(i);
            if class & SPACE == 0 {
                break;
            }
            if matches!(self.bytes[i], b'\r' | b'\n') {
                newline_end = Some(i + 1);
            }
            last = i;
            i += len;
        }
        (i, last, newline_end)
    }

    /// GPT-2's contraction at `i` (an apostrophe): `'(?:[sdmt]|ll|ve|re)`, case-sensitive.
    #[inline(always)]
    fn gpt2_contraction(&self, i: usize) -> Option<usize> {
        let bytes = self.bytes;
        match bytes.get(i + 1)? {
            b's' | b'd' | b'm' | b't' => Some(i + 2),
            b'l' if bytes.get(i + 2) == Some(&b'l') => Some(i + 3),
            b'v' | b'r' if bytes.get(i + 2) == Some(&b'e') => Some(i + 3),
            _ => None,
        }
    }

    /// The case-insensitive contraction at `i` of cl100k (`'(?i:[sdmt]|ll|ve|re)`) and o200k
    /// (`(?i:'s|'t|'re|'ve|'m|'ll|'d)`), which are the same set: its end, if `i` starts one.
    /// Case-insensitive means Unicode simple case folding, under which only U+017F (long s)
    /// joins the ASCII letters (as `s`).
    #[inline(always)]
    fn contraction(&self, i: usize) -> Option<usize> {
        let bytes = self.bytes;
        if bytes.get(i) != Some(&b'\'') {
            return None;
        }
        let lower = |j: usize| bytes.get(j).map(u8::to_ascii_lowercase);
        match lower(i + 1)? {
            b's' | b'd' | b'm' | b't' => Some(i + 2),
            b'l' if lower(i + 2) == Some(b'l') => Some(i + 3),
            b'v' | b'r' if lower(i + 2) == Some(b'e') => Some(i + 3),
            // U+017F is 0xC5 0xBF
            0xC5 if bytes.get(i + 2) == Some(&0xBF) => Some(i + 3),
            _ => None,
        }
    }
}

fn scan(text: &str) -> Scan<'_> {
    Scan {
        bytes: text.as_bytes(),
        table: table(),
    }
}

/// Calls `f` on each piece of `text` ending at the offsets that `end_of_piece` gives, or, with
/// `blocks`, first at the starts that the rules `R` trust in the 64 bytes from each piece start
/// (see [`crate::block`]), taking one piece with `end_of_piece` where it trusts none. The bytes
/// are classified with AVX2 where the CPU has it, else with SSE2 (or byte by byte off x86_64).
#[inline(always)]
fn tile<'t, R: Rules>(
    text: &'t str,
    f: impl Pieces<'t>,
    blocks: bool,
    rules: R,
    end_of_piece: impl Fn(&Scan<'t>, usize) -> usize,
) {
    #[cfg(target_arch = "x86_64")]
    if blocks && has_avx2_and_bit_counts() {
        // SAFETY: the CPU has what tile_avx2 requires (just detected).
        unsafe { tile_avx2(text, f, rules, end_of_piece) };
        return;
    }
    tile_with(text, f, blocks, classify, rules, end_of_piece)
}

/// Whether the CPU has AVX2 and the bit-counting instructions (`popcnt`, `lzcnt`, BMI1's
/// `tzcnt`, BMI2), as every CPU with AVX2 has.
#[cfg(target_arch = "x86_64")]
#[inline]
fn has_avx2_and_bit_counts() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("popcnt")
        && std::arch::is_x86_feature_detected!("lzcnt")
        && std::arch::is_x86_feature_detected!("bmi1")
        && std::arch::is_x86_feature_detected!("bmi2")
}

/// [`tile`] with the fast path compiled for AVX2, and for the instructions that count a mask's
/// bits: the sinks inlined here count and walk each window's ends (one instruction for a count
/// of ones, where the portable build takes a dozen; `tzcnt` and `lzcnt` defined at 0).
///
/// # Safety
/// The CPU must have AVX2, POPCNT, LZCNT, BMI1 and BMI2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt,lzcnt,bmi1,bmi2")]
unsafe fn tile_avx2<'t, R: Rules>(
    text: &'t str,
    f: impl Pieces<'t>,
    rules: R,
    end_of_piece: impl Fn(&Scan<'t>, usize) -> usize,
) {
    // SAFETY: the CPU has AVX2 (this function's contract).
    let classify = |block: &[u8; 64]| unsafe { block::classify_avx2(block) };
    tile_with(text, f, true, classify, rules, end_of_piece)
}

/// [`tile`] with the classifier `classify`. The last window is padded with bytes that are not
/// ASCII, which no start may come near.
#[inline(always)]
fn tile_with<'t, R: Rules>(
    text: &'t str,
    mut f: impl Pieces<'t>,
    blocks: bool,
    classify: impl Fn(&[u8; 64]) -> Classes,
    _rules: R,
    end_of_piece: impl Fn(&Scan<'t>, usize) -> usize,
) {
    let scan = scan(text);
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut padded;
    // How far the scalar way goes after a window failed for want of ASCII (see below).
    let mut skip = 0;
    while i < text.len() {
        if blocks {
            let window: &[u8; 64] = match bytes.get(i..i + 64) {
                Some(window) => window.try_into().expect("64 bytes"),
                None => {
                    padded = [0x80u8; 64];
                    padded[..bytes.len() - i].copy_from_slice(&bytes[i..]);
                    &padded
                }
            };
            let mut classes = classify(window);
            let starts = if classes.non_ascii == 0 {
                // All ASCII (most windows of English): every byte is known and starts a
                // character.
                R::starts(window, &classes, false) & !1
            } else {
                block::add_unicode(&mut classes, window, scan.table);
                // Starts past bit 0 before the first unknown byte and not on a continuation
                // byte (which the rules keep to anyway): each is then in the text (the
                // padding is unknown) and on a character boundary.
                let known = u64::MAX
                    .checked_shl(classes.unknown.trailing_zeros())
                    .map_or(u64::MAX, |beyond| !beyond);
                R::starts(window, &classes, true) & known & !classes.cont & !1
            };
            if starts != 0 {
                skip = 0;
                let base = i;
                // SAFETY: `i` is a piece's start, so a character boundary; the ends are starts in
                // the window (bits of `starts`, in increasing order, past bit 0) before its first
                // byte that is unknown (all of them in a window of ASCII, else bits of `known`),
                // so in the text (the padding is unknown) and after `i`; none is on a
                // continuation byte (none in ASCII, else `!cont`), so each is a character
                // boundary.
                i = unsafe { f.run(text, i, base, starts) };
                // Trusted starts that end well before the window's end stopped at something the
                // masks do not follow (a contraction, o200k's mark or capital after a letter of
                // both cases): the next window would start there and trust nothing, so the
                // scalar way takes that piece.
                if i - base >= 48 || i >= text.len() {
                    continue;
                }
            } else if classes.unknown.trailing_zeros() < 8 {
                // No start trusted for want of known bytes (near the text's end, where the
                // padding is unknown, or a character cut by the window's end): the pieces up to
                // the window's last unknown byte go the scalar way, and up to twice as far as the
                // time before while windows keep failing (up to 4 KB). Other failures (a
                // contraction, a long run) cost one piece the scalar way.
                let past = (i + 64 - classes.unknown.leading_zeros() as usize).max(i + skip);
                skip = (2 * skip).clamp(64, 4096);
                while i < past.min(text.len()) {
                    let end = end_of_piece(&scan, i);
                    f.piece(&text[i..end]);
                    i = end;
                }
                continue;
            }
        }
        let end = end_of_piece(&scan, i);
        debug_assert!(end > i && text.is_char_boundary(end));
        f.piece(&text[i..end]);
        i = end;
    }
}

/// `'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
/// `blocks`: whether to find pieces 64 bytes at a time where it can (see [`crate::block`]).
pub(crate) fn gpt2<'t>(text: &'t str, f: impl Pieces<'t>, blocks: bool) {
    tile(text, f, blocks, block::Gpt2, |scan, i| {
        let lead = scan.bytes[i];
        if let Some(end) = scan.ascii_word(i) {
            return end;
        }
        if lead == b'\'' {
            if let Some(end) = scan.gpt2_contraction(i) {
                return end;
            }
        }
        let (class, len) = scan.at(i);
        if class & (LETTER | NUMBER | OTHER) != 0 {
            return scan.run(i + len, class & (LETTER | NUMBER | OTHER));
        }
        // A space then a letter, number or other character: the space leads that run.
        if lead == b' ' {
            let next = scan.class_at(i + 1);
            if next & (LETTER | NUMBER | OTHER) != 0 {
                return scan.run(i + 1, next & (LETTER | NUMBER | OTHER));
            }
        }
        // `\s+(?!\S)`: the whole run at the end of the text; else the run but its last
        // character, which then precedes whitespace. A single whitespace character before
        // non-whitespace is `\s+` on its own.
        let (end, last, _) = scan.whitespace(i);
        if end == scan.bytes.len() || last == i {
            end
        } else {
            last
        }
    })
}

/// GPT-2's pattern after Hugging Face's `Digits`: `\p{N}|'(?:[sdmt]|ll|ve|re)| ?\p{L}+`
/// `| ?[^\s\p{L}\p{N}]+|\s+(?![^\s\p{N}])|\s+` (`RUNS`: `\p{N}+` first). A number is never led
/// by a space, and whitespace before one is a piece of its own, whole.
pub(crate) fn gpt2_digits<'t, const RUNS: bool>(text: &'t str, f: impl Pieces<'t>, blocks: bool) {
    tile(text, f, blocks, block::Gpt2Digits::<RUNS>, |scan, i| {
        let lead = scan.bytes[i];
        if let Some(end) = scan.ascii_word(i) {
            return end;
        }
        if lead == b'\'' {
            if let Some(end) = scan.gpt2_contraction(i) {
                return end;
            }
        }
        let (class, len) = scan.at(i);
        if class & NUMBER != 0 {
            return if RUNS {
                scan.run(i + len, NUMBER)
            } else {
                i + len
            };
        }
        if class & (LETTER | OTHER) != 0 {
            return scan.run(i + len, class & (LETTER | OTHER));
        }
        if lead == b' ' {
            let next = scan.class_at(i + 1);
            if next & (LETTER | OTHER) != 0 {
                return scan.run(i + 1, next & (LETTER | OTHER));
            }
        }
        // `\s+(?![^\s\p{N}])`: the whole run before a number or at the end of the text; else
        // the run but its last character; one whitespace character is `\s+` on its own.
        let (end, last, _) = scan.whitespace(i);
        if end == scan.bytes.len() || last == i || scan.class_at(end) & NUMBER != 0 {
            end
        } else {
            last
        }
    })
}

/// `'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+`
/// `|\s++$|\s*[\r\n]|\s+(?!\S)|\s`
/// `blocks`: whether to find pieces 64 bytes at a time where it can (see [`crate::block`]).
pub(crate) fn cl100k<'t>(text: &'t str, f: impl Pieces<'t>, blocks: bool) {
    cl100k_family::<true, 3, _>(text, f, blocks, block::Cl100k)
}

/// Llama-3's pattern: `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}`
/// `| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`, cl100k's but at the end of the text
/// (see [`cl100k_family`]).
pub(crate) fn llama3<'t>(text: &'t str, f: impl Pieces<'t>, blocks: bool) {
    cl100k_family::<false, 3, _>(text, f, blocks, block::Cl100k)
}

/// Qwen2's pattern: Llama-3's with `\p{N}` for `\p{N}{1,3}`.
pub(crate) fn qwen2<'t>(text: &'t str, f: impl Pieces<'t>, blocks: bool) {
    cl100k_family::<false, 1, _>(text, f, blocks, block::Qwen2)
}

/// cl100k's pattern and its relatives. Without possessive quantifiers (Llama-3's and Qwen2's
/// spelling) every alternative but the last three matches the same: an optional leader that
/// gives a letter run back cannot make another match, nor can a run of punctuation or newlines
/// that gives back characters. The whitespace differs only at the end of the text:
/// `END_RUN` is cl100k's `\s++$` (the whole run); without it, `\s*[\r\n]+` still ends the
/// piece at the run's last newline, as anywhere else. `DIGITS`: how many numbers a piece takes.
#[inline(always)]
fn cl100k_family<'t, const END_RUN: bool, const DIGITS: usize, R: block::Rules>(
    text: &'t str,
    f: impl Pieces<'t>,
    blocks: bool,
    rules: R,
) {
    tile(text, f, blocks, rules, |scan, i| {
        let lead = scan.bytes[i];
        if let Some(end) = scan.ascii_word(i) {
            return end;
        }
        if let Some(end) = scan.contraction(i) {
            return end;
        }
        let (class, len) = scan.at(i);
        if class & LETTER != 0 {
            return scan.run(i + len, LETTER);
        }
        if class & NUMBER != 0 {
            return if DIGITS == 3 {
                scan.three_numbers(i)
            } else {
                i + len
            };
        }
        // Any other character but \r and \n may lead a run of letters (possessively: if no
        // letter follows, the alternative fails; without the leader there is no letter either).
        if lead != b'\r' && lead != b'\n' && scan.class_at(i + len) & LETTER != 0 {
            return scan.run(i + len, LETTER);
        }
        if class & SPACE == 0 {
            let end = scan.run(i + len, OTHER);
            return scan.run_bytes(end, b"\r\n");
        }
        if lead == b' ' && scan.class_at(i + 1) & OTHER != 0 {
            let end = scan.run(i + 1, OTHER);
            return scan.run_bytes(end, b"\r\n");
        }
        let (end, last, newline_end) = scan.whitespace(i);
        if END_RUN && end == scan.bytes.len() {
            end // \s++$
        } else if let Some(newline_end) = newline_end {
            newline_end // \s*[\r\n]: up to the run's last newline
        } else if end == scan.bytes.len() || last == i {
            end // \s+(?!\S) at the end of the text, or one whitespace character
        } else {
            last // \s+(?!\S)
        }
    })
}

/// `[^\r\n\p{L}\p{N}]?[UPPER]*[LOWER]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
/// `|[^\r\n\p{L}\p{N}]?[UPPER]+[LOWER]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
/// `|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
/// where UPPER is `\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}` and LOWER is `\p{Ll}\p{Lm}\p{Lo}\p{M}`.
/// `blocks`: whether to find pieces 64 bytes at a time where it can (see [`crate::block`]).
/// SuperBPE's stage-2 pieces ([`crate::SUPERBPE_PATTERN`]): the piece starting at `i` is the
/// first of its alternatives that matches there, in the pattern's order.
pub(crate) fn superbpe<'t>(text: &'t str, mut f: impl Pieces<'t>) {
    let scan = scan(text);
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let end = superbpe_piece(&scan, i);
        f.piece(&text[i..end]);
        i = end;
    }
}

/// The end of the piece that starts at `i` (see [`superbpe`]).
fn superbpe_piece(scan: &Scan<'_>, i: usize) -> usize {
    let bytes = scan.bytes;
    let n = bytes.len();
    let (class, len) = scan.at(i);
    // \p{N}{1,3}
    if class & NUMBER != 0 {
        let mut end = i + len;
        for _ in 0..2 {
            if end < n && scan.class_at(end) & NUMBER != 0 {
                end += scan.at(end).1;
            } else {
                break;
            }
        }
        return end;
    }
    // ` ?[^\s\p{L}\p{N}]{2,}[\r/]*\n?`: two punctuation characters or more (after a space)
    let start = if bytes[i] == b' ' { i + 1 } else { i };
    if let Some(end) = two_or_more_other(scan, start) {
        let end = scan.run_bytes(end, b"\r/");
        return if end < n && bytes[end] == b'\n' {
            end + 1
        } else {
            end
        };
    }
    // ` +(?!\S)`: spaces followed by whitespace or the end; else all of them but the last
    if bytes[i] == b' ' {
        let end = scan.run_bytes(i, b" ");
        if end == n || scan.class_at(end) & SPACE != 0 {
            return end;
        }
        if end - i >= 2 {
            return end - 1;
        }
    }
    // The stretch up to the next place where one of the three matches: letters, whitespace
    // but the space and the newline, a space before a character that is not whitespace and
    // starts no punctuation run, a punctuation character alone (not a colon before a space);
    // then a colon before a space, or a newline, ends it.
    let mut p = i;
    while p < n {
        let (class, len) = scan.at(p);
        let next = p + len;
        let takes = if class & LETTER != 0 {
            true
        } else if bytes[p] == b' ' {
            next < n && scan.class_at(next) & SPACE == 0 && two_or_more_other(scan, next).is_none()
        } else if class & SPACE != 0 {
            bytes[p] != b'\n'
        } else if class & OTHER != 0 {
            !(bytes[p] == b':' && next < n && bytes[next] == b' ')
                && scan.class_at(next) & OTHER == 0
        } else {
            false // a number
        };
        if !takes {
            break;
        }
        p = next;
    }
    if p < n && (bytes[p] == b'\n' || (bytes[p] == b':' && p + 1 < n && bytes[p + 1] == b' ')) {
        return p + 1;
    }
    debug_assert!(p > i, "every character starts a piece of the pattern");
    p
}

/// The end of a run of two or more punctuation characters (`[^\s\p{L}\p{N}]`) from `i`, if
/// there is one.
fn two_or_more_other(scan: &Scan<'_>, i: usize) -> Option<usize> {
    if i >= scan.bytes.len() || scan.class_at(i) & OTHER == 0 {
        return None;
    }
    let second = i + scan.at(i).1;
    if scan.class_at(second) & OTHER == 0 {
        return None;
    }
    let mut end = second;
    while end < scan.bytes.len() && scan.class_at(end) & OTHER != 0 {
        end += scan.at(end).1;
    }
    Some(end)
}

pub(crate) fn o200k<'t>(text: &'t str, f: impl Pieces<'t>, blocks: bool) {
    tile(text, f, blocks, block::O200k, |scan, i| {
        if let Some(end) = o200k_ascii_word(scan, i) {
            return scan.contraction(end).unwrap_or(end);
        }
        let lead = scan.bytes[i];
        let (class, len) = scan.at(i);
        if let Some(end) = o200k_word(scan, i, class, len) {
            return scan.contraction(end).unwrap_or(end);
        }
        if class & NUMBER != 0 {
            return scan.three_numbers(i);
        }
        if class & SPACE == 0 {
            let end = scan.run(i + len, OTHER);
            return scan.run_bytes(end, b"\r\n/");
        }
        if lead == b' ' && scan.class_at(i + 1) & OTHER != 0 {
            let end = scan.run(i + 1, OTHER);
            return scan.run_bytes(end, b"\r\n/");
        }
        let (end, last, newline_end) = scan.whitespace(i);
        if let Some(newline_end) = newline_end {
            newline_end // \s*[\r\n]+: up to the run's last newline
        } else if end == scan.bytes.len() || last == i {
            end // \s+(?!\S) at the end of the text, or \s+ of one character
        } else {
            last // \s+(?!\S)
        }
    })
}

/// o200k's first two alternatives when the word starts in ASCII, with or without a space before
/// it: lowercase letters; or capitals, then lowercase letters or no letter at all (anything else
/// goes the general way). Before the contraction.
#[inline(always)]
fn o200k_ascii_word(scan: &Scan<'_>, i: usize) -> Option<usize> {
    let bytes = scan.bytes;
    let first = if bytes[i] == b' ' { i + 1 } else { i };
    let byte = *bytes.get(first)?;
    if byte.is_ascii_lowercase() {
        // [UPPER]* is empty, [LOWER]+ runs on
        return Some(scan.run(first + 1, LOWER));
    }
    if !byte.is_ascii_uppercase() {
        return None;
    }
    let mut end = first + 1;
    while bytes.get(end).is_some_and(u8::is_ascii_uppercase) {
        end += 1;
    }
    match bytes.get(end) {
        // [UPPER]* stops before a lowercase letter, where [LOWER]+ starts
        Some(next) if next.is_ascii_lowercase() => Some(scan.run(end + 1, LOWER)),
        // no lowercase letter: the first alternative fails, the second takes the capitals
        Some(next) if next.is_ascii() => Some(end),
        None => Some(end),
        Some(_) => None,
    }
}

/// The end of o200k's first or second alternative at `i` (before the optional contraction), in
/// the regex's order of trying: the first alternative with the optional leading character, then
/// without it, then the second alternative likewise.
#[inline(always)]
fn o200k_word(scan: &Scan<'_>, i: usize, class: u8, len: usize) -> Option<usize> {
    let may_lead = class & (LETTER | NUMBER) == 0 && !matches!(scan.bytes[i], b'\r' | b'\n');
    if class & LETTER == 0 && !may_lead {
        return None; // a number, \r or \n
    }
    if may_lead {
        if let Some(end) = upper_then_lower(scan, i + len) {
            return Some(end);
        }
    }
    // Without the leader: only a letter or a mark (which is UPPER and LOWER) can start a word.
    if class & (UPPER | LOWER) != 0 {
        if let Some(end) = upper_then_lower(scan, i) {
            return Some(end);
        }
    }
    if may_lead && scan.class_at(i + len) & UPPER != 0 {
        return Some(upper_run_then_lower(scan, i + len));
    }
    if class & UPPER != 0 {
        return Some(upper_run_then_lower(scan, i));
    }
    None
}

/// `[UPPER]*[LOWER]+` at `s`: the greedy UPPER run gives back characters until a LOWER one can
/// start the LOWER run. Past the UPPER run the next character is LOWER only if it is `Ll`;
/// inside it, the last character that is also LOWER (`Lm`, `Lo`, `M`) ends the match (every
/// character after it in the UPPER run is `Lu` or `Lt`, so the LOWER run is that one character).
#[inline(always)]
fn upper_then_lower(scan: &Scan<'_>, mut s: usize) -> Option<usize> {
    let mut last_lower_end = None;
    while s < scan.bytes.len() {
        let (class, len) = scan.at(s);
        if class & UPPER == 0 {
            if class & LOWER != 0 {
                return Some(scan.run(s + len, LOWER));
            }
            break;
        }
        s += len;
        if class & LOWER != 0 {
            last_lower_end = Some(s);
        }
    }
    last_lower_end
}

/// `[UPPER]+[LOWER]*` at `s`, where an UPPER character is known to start.
#[inline(always)]
fn upper_run_then_lower(scan: &Scan<'_>, s: usize) -> usize {
    let end = scan.run(s, UPPER);
    scan.run(end, LOWER)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The eight-at-a-time run against a byte loop, for every byte value at every position.
    #[test]
    fn ascii_run_stops_at_the_first_byte_outside() {
        // (low, high, fold, the class `run` takes, whether a byte is inside)
        type Case = (u8, u8, u8, u8, fn(u8) -> bool);
        let cases: [Case; 4] = [
            (b'a', b'z', 0x20, LETTER, |byte| byte.is_ascii_alphabetic()),
            (b'a', b'z', 0, LOWER, |byte| byte.is_ascii_lowercase()),
            (b'A', b'Z', 0, UPPER, |byte| byte.is_ascii_uppercase()),
            (b'0', b'9', 0, NUMBER, |byte| byte.is_ascii_digit()),
        ];
        for (low, high, fold, class, inside) in cases {
            for stop in 0..=255u8 {
                for position in 0..20 {
                    let mut bytes = vec![low; 20];
                    bytes[position] = stop;
                    let scan = Scan {
                        bytes: &bytes,
                        table: table(),
                    };
                    let expected = if inside(stop) { 20 } else { position };
                    // ascii_run leaves a tail of fewer than eight bytes to the caller's loop.
                    let end = scan.ascii_run(0, low, high, fold);
                    assert!(
                        end <= expected && (end == expected || expected - end < 8 && end >= 13)
                    );
                    if stop < 0x80 {
                        // (a lone byte from 0x80 up is no text for `run` to decode)
                        assert_eq!(scan.run(0, class), expected, "{stop:#x} at {position}");
                    }
                }
            }
        }
    }
}
