//! The piece starts of 64 bytes at a time, as bit masks, for the three hand-written scanners.
//!
//! English is mostly ASCII letters, digits, spaces and punctuation, where each pattern's piece
//! boundaries follow from the classes of a byte and its neighbours: a run of letters ends where a
//! non-letter begins, a space before a letter leads it, and so on. A window of 64 bytes from a
//! piece start is classified at once into one bit per byte and class ([`Classes`], with SSE2 on
//! x86_64), and each pattern's rules become a few shifts and logic operations on those masks
//! ([`gpt2`], [`cl100k`], [`o200k`]), which give every piece start in the window that is
//! *trusted*: certain to be a start of the regex's pieces. The scanner then hands the pieces
//! between trusted starts to its consumer without looking at their bytes again.
//!
//! A start is trusted only where the rules can be sure of it: it must lie before the last known
//! character (the masks know nothing of a character cut by the window's end, nor of the padding
//! past the text's end; some rules look one character ahead); it must not lie past a piece that
//! starts with an apostrophe (a contraction, which the masks do not follow; o200k: an apostrophe
//! after a letter, where a word may take a contraction), nor, for o200k, at or past a mark or a
//! capital after a letter of both cases (see [`o200k`]), nor inside
//! a run of whitespace that reaches the end of what is known (cl100k and o200k split such a run
//! after its last newline, which may lie further on). Each start depends on bytes before it only
//! through the piece start at bit 0, which the window begins with: the patterns have no
//! look-behind, so the pieces from a start depend only on the text from there on.
//!
//! Characters that are not ASCII get their classes from the Unicode table ([`add_unicode`]) on
//! every one of their bytes, and the rules then work on characters: no start lies on a
//! continuation byte, and a rule that looks at the character after one (the last of a run of
//! whitespace) looks at the byte after the run's last byte and moves back to its character's
//! start ([`char_start`]).
//!
//! Where no start past bit 0 is trusted the scanner takes one piece the scalar way and tries
//! again after it; the differential tests compare both ways with the regex.

use crate::classes::{Table, LETTER, LOWER, NUMBER, OTHER, SPACE, UPPER};

/// The classes of 64 bytes, one bit per byte (bit k for byte k). The SIMD classifiers fill in
/// the ASCII classes and leave every byte from 0x80 up `unknown`; [`add_unicode`] then gives the
/// characters that are not ASCII their classes from the Unicode table, on every byte of each
/// (so that `before(mask)` at the first byte of a character is the class of the character
/// before it, whatever its length), and leaves unknown only the bytes of characters that the
/// window cuts or the padding past the text's end.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Classes {
    /// Bytes 0x80 and up (a part of a character that is not ASCII).
    pub(crate) non_ascii: u64,
    /// Continuation bytes, 0x80 to 0xBF (no character, and so no piece, starts there).
    pub(crate) cont: u64,
    /// Bytes whose character's classes are not known (no rule may trust what lies past the first).
    pub(crate) unknown: u64,
    /// `\p{L}` (computed on its own: GPT-2 and cl100k need no case).
    pub(crate) letter: u64,
    /// Letters in o200k's upper class only (`\p{Lu}`, `\p{Lt}`: `A`-`Z` among ASCII).
    pub(crate) upper: u64,
    /// Letters in o200k's lower class only (`\p{Ll}`: `a`-`z` among ASCII).
    pub(crate) lower: u64,
    /// Letters in both of o200k's case classes (`\p{Lm}`, `\p{Lo}`: none in ASCII).
    pub(crate) both: u64,
    /// Characters in o200k's case classes that are not letters (`\p{M}`: none in ASCII).
    pub(crate) mark: u64,
    /// `\p{N}` (`0`-`9` among ASCII).
    pub(crate) digit: u64,
    /// Whitespace to `\s`: `\t`, `\n`, `\x0b`, `\x0c`, `\r`, space among ASCII.
    pub(crate) space: u64,
    /// `\r` and `\n`.
    pub(crate) newline: u64,
    /// The space character itself.
    pub(crate) blank: u64,
    /// `'`.
    pub(crate) apostrophe: u64,
    /// `/`.
    pub(crate) slash: u64,
}

impl Classes {
    /// Known characters that are neither letters, numbers nor whitespace (`[^\s\p{L}\p{N}]`).
    fn other(&self) -> u64 {
        !(self.unknown | self.letter | self.digit | self.space)
    }

    /// The classes of a byte at bit `bit`, one byte at a time (the reference for [`classify`]).
    #[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
    fn add_byte(&mut self, byte: u8, bit: usize) {
        let one = 1u64 << bit;
        let set = |mask: &mut u64, yes: bool| *mask |= if yes { one } else { 0 };
        set(&mut self.non_ascii, byte >= 0x80);
        set(&mut self.cont, (0x80..0xC0).contains(&byte));
        set(&mut self.unknown, byte >= 0x80);
        set(&mut self.letter, byte.is_ascii_alphabetic());
        set(&mut self.upper, byte.is_ascii_uppercase());
        set(&mut self.lower, byte.is_ascii_lowercase());
        set(&mut self.digit, byte.is_ascii_digit());
        set(&mut self.space, matches!(byte, b'\t'..=b'\r' | b' '));
        set(&mut self.newline, matches!(byte, b'\r' | b'\n'));
        set(&mut self.blank, byte == b' ');
        set(&mut self.apostrophe, byte == b'\'');
        set(&mut self.slash, byte == b'/');
    }
}

/// [`Classes::add_byte`] for each byte: the portable classifier, and the tests' reference.
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
pub(crate) fn classify_bytewise(block: &[u8; 64]) -> Classes {
    let mut classes = Classes::default();
    for (bit, &byte) in block.iter().enumerate() {
        classes.add_byte(byte, bit);
    }
    classes
}

/// Adds the classes of the bytes of the vector `$v` (16 or 32 of them) to `$classes` at bit
/// `$shift` on, with the intrinsics of one width (`$set1` and so on). Signed byte comparisons
/// suffice for ASCII ranges: the bytes from 0x80 up compare as negative, below every ASCII byte
/// (and continuation bytes, 0x80 to 0xBF, are those below 0xC0 as signed bytes).
#[cfg(target_arch = "x86_64")]
macro_rules! add_vector {
    ($classes:ident, $v:ident, $shift:expr, $int:ty,
     $set1:ident, $eq:ident, $gt:ident, $and:ident, $or:ident, $movemask:ident) => {{
        let v = $v;
        let bits = |mask| ($movemask(mask) as u32 as u64 & <$int>::MAX as u64) << $shift;
        let is = |byte: u8| $eq(v, $set1(byte as i8));
        // low..=high, ASCII bounds, of `x`
        let within = |x, low: u8, high: u8| {
            $and($gt(x, $set1(low as i8 - 1)), $gt($set1(high as i8 + 1), x))
        };
        $classes.non_ascii |= bits(v);
        $classes.unknown |= bits(v);
        $classes.cont |= bits($gt($set1(0xC0u8 as i8), v));
        // OR-ing 0x20 maps A-Z onto a-z and no other byte into a-z
        $classes.letter |= bits(within($or(v, $set1(0x20)), b'a', b'z'));
        $classes.upper |= bits(within(v, b'A', b'Z'));
        $classes.lower |= bits(within(v, b'a', b'z'));
        $classes.digit |= bits(within(v, b'0', b'9'));
        let blank = is(b' ');
        $classes.space |= bits($or(within(v, b'\t', b'\r'), blank));
        $classes.newline |= bits($or(is(b'\n'), is(b'\r')));
        $classes.blank |= bits(blank);
        $classes.apostrophe |= bits(is(b'\''));
        $classes.slash |= bits(is(b'/'));
    }};
}

/// The classes of the 64 bytes of `block`, 16 at a time with SSE2 (part of every x86_64 CPU,
/// so no detection is needed).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
pub(crate) fn classify(block: &[u8; 64]) -> Classes {
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_cmpeq_epi8, _mm_cmpgt_epi8, _mm_loadu_si128, _mm_movemask_epi8,
        _mm_or_si128, _mm_set1_epi8,
    };
    let mut classes = Classes::default();
    for (k, chunk) in block.chunks_exact(16).enumerate() {
        // SAFETY: the intrinsics need SSE2, which this function is compiled only with (the cfg
        // above; every x86_64 CPU has it). The one that touches memory, `_mm_loadu_si128`, reads
        // exactly 16 bytes from the start of `chunk`, which has 16 readable bytes, and needs no
        // alignment. The others compute on registers only.
        unsafe {
            let v = _mm_loadu_si128(chunk.as_ptr().cast::<__m128i>());
            add_vector!(
                classes,
                v,
                16 * k,
                u16,
                _mm_set1_epi8,
                _mm_cmpeq_epi8,
                _mm_cmpgt_epi8,
                _mm_and_si128,
                _mm_or_si128,
                _mm_movemask_epi8
            );
        }
    }
    classes
}

/// [`classify`] 32 bytes at a time with AVX2, for a caller compiled with AVX2.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) unsafe fn classify_avx2(block: &[u8; 64]) -> Classes {
    use std::arch::x86_64::{
        __m256i, _mm256_and_si256, _mm256_cmpeq_epi8, _mm256_cmpgt_epi8, _mm256_loadu_si256,
        _mm256_movemask_epi8, _mm256_or_si256, _mm256_set1_epi8,
    };
    let mut classes = Classes::default();
    for (k, chunk) in block.chunks_exact(32).enumerate() {
        // SAFETY: the caller guarantees AVX2. `_mm256_loadu_si256` reads exactly 32 bytes from
        // the start of `chunk`, which has 32 readable bytes, and needs no alignment; the other
        // intrinsics compute on registers only.
        unsafe {
            let v = _mm256_loadu_si256(chunk.as_ptr().cast::<__m256i>());
            add_vector!(
                classes,
                v,
                32 * k,
                u32,
                _mm256_set1_epi8,
                _mm256_cmpeq_epi8,
                _mm256_cmpgt_epi8,
                _mm256_and_si256,
                _mm256_or_si256,
                _mm256_movemask_epi8
            );
        }
    }
    classes
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
#[inline(always)]
pub(crate) fn classify(block: &[u8; 64]) -> Classes {
    classify_bytewise(block)
}

/// Gives the characters of `block` that are not ASCII their classes (see [`Classes`]), from
/// `table`, on every byte of each; a character that the window's end cuts stays unknown, as do
/// bytes that start no character of the window (the padding past the text's end, 0x80). The
/// window must start on a character boundary of valid UTF-8 (it starts a piece of a `str`), so
/// every byte from 0xC0 up in it starts a well-formed sequence.
#[inline(always)]
pub(crate) fn add_unicode(classes: &mut Classes, block: &[u8; 64], table: &Table) {
    // The classes of each character's bytes (with SEEN), then turned into masks all at once:
    // writing a character's classes costs one store, where setting its bits in every mask would
    // cost a few operations per mask. Four bytes more, for the store of the last character.
    let mut bytes = [0u8; 68];
    let mut leads = classes.non_ascii & !classes.cont;
    // Only the last character can be cut by the window's end: it then stays unknown (its
    // bytes, and the padding after it, are not written).
    if leads != 0 {
        let last = 63 - leads.leading_zeros() as usize;
        if last + utf8_len(block[last]) > 64 {
            leads &= !(1 << last);
        }
    }
    // `c`, a character's classes, in the `len` bytes from `at`, zeros in the rest of the four
    // (bytes of the next character, which is written after this one, or ASCII, or padding:
    // none is SEEN).
    let mut write = |at: usize, c: u8, len: usize| {
        let repeated = u32::from(c | SEEN) * REPEATED_BYTES[len];
        bytes[at..at + 4].copy_from_slice(&repeated.to_le_bytes());
    };
    if leads.count_ones() > 12 {
        // Many characters that are not ASCII (a window of running text in most scripts but
        // Latin): the code point each byte would start as the lead of two or three bytes is
        // computed for all 64 at once (vector operations), and each character then only looks
        // its class up (decoded one at a time, a character had cost 35 instructions). With a
        // few (a word alone, as counting scans them), the 64 codes cost more than they save:
        // from five on, counting 14 MB in 46 languages ran 0.93x as fast.
        let codes = bmp_codes(block);
        while leads != 0 {
            let at = leads.trailing_zeros() as usize;
            leads &= leads - 1;
            let lead = block[at];
            if lead >= 0xF0 {
                let (code, _) = decode(block, at).expect("a whole character");
                write(at, table.get(code), 4);
            } else {
                write(at, table.get_bmp(codes[at]), 2 + usize::from(lead >= 0xE0));
            }
        }
    } else {
        while leads != 0 {
            let at = leads.trailing_zeros() as usize;
            leads &= leads - 1;
            let (code, len) = decode(block, at).expect("a whole character");
            // Two and three bytes (every code point below U+10000) take the flat table.
            let classes = if len < 4 {
                table.get_bmp(code as u16)
            } else {
                table.get(code)
            };
            write(at, classes, len);
        }
    }
    let window: &[u8; 64] = bytes[..64].try_into().expect("64 bytes");
    let bit = |class: u8| bits_of(window, class);
    let letter = bit(LETTER);
    let upper = bit(UPPER);
    let lower = bit(LOWER);
    classes.unknown &= !bit(SEEN);
    classes.letter |= letter;
    classes.digit |= bit(NUMBER);
    classes.space |= bit(SPACE);
    classes.upper |= letter & upper & !lower;
    classes.lower |= letter & lower & !upper;
    classes.both |= letter & upper & lower;
    classes.mark |= (upper | lower) & !letter;
}

/// `REPEATED_BYTES[n]`: a one in each of the low `n` bytes of a `u32` (a class times it is that
/// class in `n` bytes). Read from a table: a shift by a count known only at run time is three
/// operations on some CPUs.
const REPEATED_BYTES: [u32; 5] = [0, 0x01, 0x0101, 0x01_0101, 0x0101_0101];

/// The length of the UTF-8 character that `lead`, a byte from 0xC0 up, starts.
#[inline(always)]
fn utf8_len(lead: u8) -> usize {
    2 + usize::from(lead >= 0xE0) + usize::from(lead >= 0xF0)
}

/// For each byte of `block`, the code point of the character of two or three bytes it would
/// lead (by its own bits: a lead from 0xE0 up leads three bytes, any other two), whatever the
/// byte is; only those of leads below 0xF0 are meant to be read. Plain arithmetic over arrays,
/// which the compiler makes vector operations.
#[inline(always)]
fn bmp_codes(block: &[u8; 64]) -> [u16; 64] {
    let mut padded = [0u8; 66];
    padded[..64].copy_from_slice(block);
    let mut codes = [0u16; 64];
    for (at, code) in codes.iter_mut().enumerate() {
        let lead = u16::from(padded[at]);
        let second = u16::from(padded[at + 1] & 0x3F);
        let third = u16::from(padded[at + 2] & 0x3F);
        let two = ((lead & 0x1F) << 6) | second;
        let three = ((lead & 0x0F) << 12) | (second << 6) | third;
        *code = if lead >= 0xE0 { three } else { two };
    }
    codes
}

/// In [`add_unicode`]'s bytes: the byte belongs to a character whose classes were written.
const SEEN: u8 = 64;
const _: () = assert!(SEEN & (LETTER | NUMBER | SPACE | UPPER | LOWER | OTHER) == 0);

/// Bit k set where byte k of `window` has the bit `class` (a single bit).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
fn bits_of(window: &[u8; 64], class: u8) -> u64 {
    use std::arch::x86_64::_mm_cvtsi32_si128;
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_movemask_epi8, _mm_sll_epi16};
    let mut mask = 0u64;
    for (k, chunk) in window.chunks_exact(16).enumerate() {
        // SAFETY: SSE2 is there (the cfg above; every x86_64 CPU has it). `_mm_loadu_si128`
        // reads exactly the 16 bytes of `chunk` and needs no alignment; the others compute on
        // registers only. Shifting each 16-bit lane left moves the bit `class` of each byte to
        // its top bit (bits shifted out of the low byte land below the high byte's top bit, as
        // the shift is under 8), which movemask gathers.
        let top = unsafe {
            let v = _mm_loadu_si128(chunk.as_ptr().cast::<__m128i>());
            let shift = _mm_cvtsi32_si128(class.leading_zeros() as i32);
            _mm_movemask_epi8(_mm_sll_epi16(v, shift))
        };
        mask |= (top as u32 as u64 & 0xFFFF) << (16 * k);
    }
    mask
}

/// Bit k set where byte k of `window` has the bit `class`.
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
#[inline(always)]
fn bits_of(window: &[u8; 64], class: u8) -> u64 {
    let mut mask = 0u64;
    for (k, &byte) in window.iter().enumerate() {
        mask |= ((byte & class != 0) as u64) << k;
    }
    mask
}

/// The code point and UTF-8 length of the character whose first byte is `block[at]` (from 0xC0
/// up, in valid UTF-8), or None if the window's end cuts it.
#[inline(always)]
fn decode(block: &[u8; 64], at: usize) -> Option<(u32, usize)> {
    let lead = block[at] as u32;
    let len = if lead < 0xE0 {
        2
    } else if lead < 0xF0 {
        3
    } else {
        4
    };
    let bytes = block.get(at..at + len)?;
    let tail = |k: usize| bytes[k] as u32 & 0x3F;
    Some(match len {
        2 => (((lead & 0x1F) << 6) | tail(1), 2),
        3 => (((lead & 0x0F) << 12) | (tail(1) << 6) | tail(2), 3),
        _ => (
            ((lead & 0x07) << 18) | (tail(1) << 12) | (tail(2) << 6) | tail(3),
            4,
        ),
    })
}

/// Each bit of `ends` moved back to the first byte of its character (characters have at most
/// three continuation bytes, `cont`).
#[inline(always)]
fn char_start(ends: u64, cont: u64) -> u64 {
    let mut starts = ends & !cont;
    let mut inside = ends & cont;
    for _ in 0..3 {
        inside >>= 1;
        starts |= inside & !cont;
        inside &= cont;
    }
    starts
}

/// Each bit of `starts` (first bytes of characters) moved on to the first byte of the next
/// character (bits that would pass bit 63 are dropped).
#[inline(always)]
fn next_char(starts: u64, cont: u64) -> u64 {
    let mut next = starts << 1;
    for _ in 0..3 {
        next = (next & !cont) | ((next & cont) << 1);
    }
    next
}

/// Each bit of `starts` (first bytes of characters) spread over the bytes of its character.
#[inline(always)]
fn whole_char(starts: u64, cont: u64) -> u64 {
    starts | fill_up(cont, before(starts) & cont)
}

/// Bit k set where bit k-1 of `mask` is (the byte before has the class); bit 0 clear.
#[inline(always)]
fn before(mask: u64) -> u64 {
    mask << 1
}

/// Bit k set where bit k+1 of `mask` is (the byte after has the class); bit 63 clear.
#[inline(always)]
fn after(mask: u64) -> u64 {
    mask >> 1
}

/// The bits of the runs of `runs` from each bit of `from` (within `runs`) up to the run's end:
/// adding a bit clears the run from there up and carries past its end, and every further bit
/// of `from` in that run only sets itself back.
#[inline(always)]
fn fill_up(runs: u64, from: u64) -> u64 {
    (runs & !runs.wrapping_add(from)) | from
}

/// The bits of the runs of `runs` from their start up to their last bit of `to` (within `runs`).
#[inline(always)]
fn fill_down(runs: u64, to: u64) -> u64 {
    fill_up(runs.reverse_bits(), to.reverse_bits()).reverse_bits()
}

/// Bits 1 to `last` (none if `last` is 0).
#[inline(always)]
fn through(last: u32) -> u64 {
    (u64::MAX >> (63 - last.min(63))) & !1
}

/// The last bit that the known bytes allow to trust: the byte before the last known character
/// (the rules look at the character after a start), so never the window's last character (bit
/// 62 in a window of ASCII).
#[inline(always)]
fn known_limit(classes: &Classes, unicode: bool) -> u32 {
    if !unicode {
        return 62;
    }
    let first_unknown = classes.unknown.trailing_zeros();
    if first_unknown == 0 {
        return 0;
    }
    let last_known = char_start(1u64 << (first_unknown - 1), classes.cont);
    last_known.trailing_zeros().saturating_sub(1)
}

/// `\p{N}{1,3}` pieces of cl100k and o200k: each run of numbers starts a piece, and so does every
/// third character after a piece start within the run.
#[inline(always)]
fn digit_starts(digit: u64, cont: u64) -> u64 {
    if digit & cont != 0 {
        // Numbers that are not ASCII: count characters, not bytes.
        let mut group = digit & !before(digit);
        let mut starts = group;
        while group != 0 {
            for _ in 0..3 {
                group = next_char(group, cont) & digit;
            }
            starts |= group;
        }
        return starts;
    }
    let mut group = digit & !before(digit);
    let three = digit & before(digit) & before(before(digit));
    let mut starts = group;
    while group != 0 {
        group = (group << 3) & three;
        starts |= group;
    }
    starts
}

/// The starts of the pieces of runs of whitespace for cl100k and o200k (`\s*[\r\n]` up to the
/// run's last newline, then `\s+(?!\S)` and the last character on its own or leading the piece
/// after), where `runs` is the whitespace not taken by punctuation before it; and the last bit
/// that may be trusted: a run that reaches the first byte not ASCII, or the window's end, may
/// have a newline further on, so nothing inside it is certain but its start.
#[inline(always)]
fn whitespace_starts(classes: &Classes, runs: u64, unicode: bool) -> (u64, u32) {
    let newlines = classes.newline & runs;
    let through_newline = if newlines == 0 {
        0
    } else {
        fill_down(runs, newlines)
    };
    let tail = runs & !through_newline;
    let last = tail & !after(runs);
    let last = if unicode {
        char_start(last, classes.cont)
    } else {
        last
    };
    let starts = (runs & !before(runs)) | (tail & !before(tail)) | last;
    let unknown = match classes.unknown.trailing_zeros() {
        64 => 0,
        first if unicode => u64::MAX << first,
        _ => 0,
    };
    let open = (runs | unknown).leading_ones();
    let limit = if open == 0 { 63 } else { 64 - open };
    (starts, limit)
}

/// The trusted piece starts (bits 1 to 62) of GPT-2's pattern in a window that starts a piece
/// (`unicode`: whether the window has bytes that are not ASCII; without, the steps for them fold
/// away):
/// `'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`.
#[inline(always)]
pub(crate) fn gpt2(classes: &Classes, unicode: bool) -> u64 {
    let cont = if unicode { classes.cont } else { 0 };
    let letter = classes.letter;
    let digit = classes.digit;
    let other = classes.other();
    let space = classes.space;
    // A run of letters, digits or other characters starts a piece, unless a space leads it; a run
    // of whitespace does, and so does its last character: before a letter, digit or other
    // character it is a space leading them or a piece of its own, and `\s+(?!\S)` leaves it.
    let same = (letter & before(letter)) | (digit & before(digit)) | (other & before(other));
    let starts = ((letter | digit | other) & !same & !before(classes.blank))
        | (space & !before(space))
        | char_start(space & !after(space), cont);
    // An apostrophe starting a piece may start a contraction.
    let contraction = (classes.apostrophe & starts).trailing_zeros();
    starts & through(known_limit(classes, unicode).min(contraction))
}

/// The trusted piece starts of GPT-2's pattern after Hugging Face's `Digits` (see [`gpt2`]):
/// `\p{N}|'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?[^\s\p{L}\p{N}]+|\s+(?![^\s\p{N}])|\s+` (`RUNS`:
/// `\p{N}+` first).
#[inline(always)]
pub(crate) fn gpt2_digits<const RUNS: bool>(classes: &Classes, unicode: bool) -> u64 {
    let cont = if unicode { classes.cont } else { 0 };
    let letter = classes.letter;
    let digit = classes.digit;
    let other = classes.other();
    let space = classes.space;
    // Numbers start pieces whatever is before them (no space leads one): each number, or each
    // run of them. A run of whitespace starts a piece, and so does its last character unless a
    // number follows (the run before a number is one piece).
    let same = (letter & before(letter)) | (other & before(other));
    let numbers = if RUNS {
        digit & !before(digit)
    } else {
        digit & !cont // (a number's bits cover its bytes: each first byte starts one)
    };
    let starts = ((letter | other) & !same & !before(classes.blank))
        | numbers
        | (space & !before(space))
        | char_start(space & !after(space) & !after(digit), cont);
    let contraction = (classes.apostrophe & starts).trailing_zeros();
    starts & through(known_limit(classes, unicode).min(contraction))
}

/// The trusted piece starts of cl100k_base's pattern (see [`gpt2`]):
/// `'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+`
/// `|\s++$|\s*[\r\n]|\s+(?!\S)|\s`.
#[inline(always)]
pub(crate) fn cl100k(classes: &Classes, unicode: bool) -> u64 {
    cl100k_with::<3>(classes, unicode)
}

/// [`cl100k`] with pieces of up to `DIGITS` numbers (3, or 1: each number a piece).
#[inline(always)]
fn cl100k_with<const DIGITS: usize>(classes: &Classes, unicode: bool) -> u64 {
    let cont = if unicode { classes.cont } else { 0 };
    let letter = classes.letter;
    let other = classes.other();
    // The newlines right after punctuation end its piece (`[\r\n]*+`).
    let trailer = fill_up(classes.newline, classes.newline & before(other));
    let runs = classes.space & !trailer;
    let (space_starts, open) = whitespace_starts(classes, runs, unicode);
    // Punctuation starts a piece unless it continues punctuation or a space leads it; a letter
    // unless it continues letters or has a leader: any whitespace but a newline (the last of a
    // run, a piece start), or punctuation that starts a piece.
    let other_starts = other & !before(other) & !before(classes.blank);
    let leader = (classes.space & !classes.newline) | whole_char(other_starts, cont);
    let letter_starts = letter & !before(letter) & !before(leader);
    let digits = if DIGITS == 3 {
        digit_starts(classes.digit, cont)
    } else {
        classes.digit & !cont // (a number's bits cover its bytes: each first byte starts one)
    };
    let starts = space_starts | other_starts | letter_starts | digits;
    let contraction = (classes.apostrophe & other_starts).trailing_zeros();
    starts & through(known_limit(classes, unicode).min(contraction).min(open))
}

/// o200k's contractions `(?i:'s|'t|'re|'ve|'m|'ll|'d)` at the apostrophes `after_letter` of
/// `block` (each after a letter, which ends a word there): the bits of the contractions, the bits
/// just past them (each ends its word's piece: the next piece starts there), and the last bit
/// that may be trusted. Not trusted: the bit before a contraction that the window cuts, or
/// before an apostrophe right after a contraction (it is no contraction of a word, and may lead
/// the letters after it).
#[inline(always)]
fn o200k_contractions(block: &[u8; 64], mut after_letter: u64) -> (u64, u64, u32) {
    let (mut contractions, mut ends) = (0u64, 0u64);
    while after_letter != 0 {
        let at = after_letter.trailing_zeros();
        after_letter &= after_letter - 1;
        if ends & (1 << at) != 0 {
            return (contractions, ends, at - 1);
        }
        let Some(len) = contraction_length(block, at as usize) else {
            continue;
        };
        if at + len > 63 {
            return (contractions, ends, at - 1);
        }
        contractions |= ((1u64 << len) - 1) << at;
        ends |= 1 << (at + len);
    }
    (contractions, ends, 63)
}

/// The length of the contraction `(?i:'s|'t|'re|'ve|'m|'ll|'d)` at `block[at]` (an
/// apostrophe), if one is there: case-insensitive means Unicode simple case folding, under which
/// only U+017F (long s, 0xC5 0xBF) joins the ASCII letters (as `s`). A contraction that may go on
/// past the window counts as one (its end is then past bit 63).
#[inline(always)]
fn contraction_length(block: &[u8; 64], at: usize) -> Option<u32> {
    let byte = |k: usize| block.get(at + k).map_or(0, u8::to_ascii_lowercase);
    match byte(1) {
        b's' | b't' | b'm' | b'd' => Some(2),
        b'r' | b'v' if byte(2) == b'e' => Some(3),
        b'l' if byte(2) == b'l' => Some(3),
        0xC5 if block.get(at + 2) == Some(&0xBF) => Some(3),
        _ if at + 2 >= 64 => Some(3), // cut by the window's end: maybe one
        _ => None,
    }
}

/// The trusted piece starts of o200k_base's pattern (see [`gpt2`] and [`crate::O200K_PATTERN`]):
/// cl100k's, but for words, which split before a capital after a lowercase letter and may take
/// a contraction, and punctuation, which takes `[\r\n/]*` after it.
#[inline(always)]
pub(crate) fn o200k(block: &[u8; 64], classes: &Classes, unicode: bool) -> u64 {
    let cont = if unicode { classes.cont } else { 0 };
    let letter = classes.letter;
    let other = classes.other();
    let trailer = fill_up(
        classes.newline | classes.slash,
        classes.newline & before(other),
    );
    let runs = classes.space & !trailer;
    let (space_starts, open) = whitespace_starts(classes, runs, unicode);
    let punctuation = other & !trailer;
    let other_starts = punctuation & !before(punctuation) & !before(classes.blank);
    let leader = (classes.space & !classes.newline) | whole_char(other_starts, cont);
    // `\p{Lm}` and `\p{Lo}` (both cases) go on a word as a lowercase letter does, but for an
    // upper-only letter after them, which ends the word or not depending on what follows the
    // capitals (the regex backtracks to the last letter of both cases): not trusted, nor are
    // marks (`\p{M}`), in both cases but no letter.
    let lower = classes.lower | classes.both;
    let word_goes_on = (before(letter) & !(classes.upper & before(lower))) | before(leader);
    let letter_starts = letter & !word_goes_on;
    let starts = space_starts | other_starts | letter_starts | digit_starts(classes.digit, cont);
    // The word before an apostrophe takes a contraction that follows it.
    let (contractions, ends, contraction) =
        o200k_contractions(block, classes.apostrophe & before(letter));
    let starts = (starts & !contractions) | ends;
    let unsure = if unicode {
        ((classes.upper & before(classes.both)) | classes.mark)
            .trailing_zeros()
            .saturating_sub(1)
    } else {
        63
    };
    starts
        & through(
            known_limit(classes, unicode)
                .min(contraction)
                .min(open)
                .min(unsure),
        )
}

/// A pattern's rules, called as `R::starts` from the generic scanner so that they are always
/// inlined there (through a closure or a function pointer they were not, and then the steps for
/// characters that are not ASCII no longer folded away in windows of ASCII).
pub(crate) trait Rules {
    /// The trusted piece starts of the window `block` whose classes are `classes` (`unicode`:
    /// whether it has bytes that are not ASCII).
    fn starts(block: &[u8; 64], classes: &Classes, unicode: bool) -> u64;
}

/// GPT-2's rules ([`gpt2`]).
pub(crate) struct Gpt2;

/// cl100k_base's rules ([`cl100k`]).
pub(crate) struct Cl100k;

/// o200k_base's rules ([`o200k`]).
pub(crate) struct O200k;

/// The rules of GPT-2's pattern after `Digits` ([`gpt2_digits`]; `RUNS`: runs of numbers).
pub(crate) struct Gpt2Digits<const RUNS: bool>;

/// Qwen2's rules: cl100k_base's with each number a piece of its own (Llama-3's are cl100k_base's:
/// the two differ only at the end of the text, which a window never trusts).
pub(crate) struct Qwen2;

impl Rules for Gpt2 {
    #[inline(always)]
    fn starts(_block: &[u8; 64], classes: &Classes, unicode: bool) -> u64 {
        gpt2(classes, unicode)
    }
}

impl Rules for Cl100k {
    #[inline(always)]
    fn starts(_block: &[u8; 64], classes: &Classes, unicode: bool) -> u64 {
        cl100k(classes, unicode)
    }
}

impl<const RUNS: bool> Rules for Gpt2Digits<RUNS> {
    #[inline(always)]
    fn starts(_block: &[u8; 64], classes: &Classes, unicode: bool) -> u64 {
        gpt2_digits::<RUNS>(classes, unicode)
    }
}

impl Rules for Qwen2 {
    #[inline(always)]
    fn starts(_block: &[u8; 64], classes: &Classes, unicode: bool) -> u64 {
        cl100k_with::<1>(classes, unicode)
    }
}

impl Rules for O200k {
    #[inline(always)]
    fn starts(block: &[u8; 64], classes: &Classes, unicode: bool) -> u64 {
        o200k(block, classes, unicode)
    }
}
