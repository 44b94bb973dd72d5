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
//! A start is trusted only where the rules can be sure of it: it must lie at least two bytes
//! before the first byte that is not ASCII (whose class, and so the run it belongs to, the masks
//! do not know), and before the last byte of the window (some rules look one byte ahead); it must
//! not lie past a piece that starts with an apostrophe (a contraction, which the masks do not
//! follow; o200k: an apostrophe after a letter, where a word may take a contraction), nor inside
//! a run of whitespace that reaches the end of what is known (cl100k and o200k split such a run
//! after its last newline, which may lie further on). Each start depends on bytes before it only
//! through the piece start at bit 0, which the window begins with: the patterns have no
//! look-behind, so the pieces from a start depend only on the text from there on.
//!
//! Where no start past bit 0 is trusted the scanner takes one piece the scalar way and tries
//! again after it; the differential tests compare both ways with the regex.

/// The classes of 64 bytes, one bit per byte (bit k for byte k).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Classes {
    /// Bytes 0x80 and up (a part of a character that is not ASCII).
    pub(crate) non_ascii: u64,
    /// `A`-`Z` and `a`-`z` (computed on its own: GPT-2 and cl100k need no case).
    pub(crate) letter: u64,
    /// `A`-`Z`.
    pub(crate) upper: u64,
    /// `a`-`z`.
    pub(crate) lower: u64,
    /// `0`-`9`.
    pub(crate) digit: u64,
    /// ASCII whitespace to `\s`: `\t`, `\n`, `\x0b`, `\x0c`, `\r`, space.
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
    /// ASCII bytes that are neither letters, digits nor whitespace (`[^\s\p{L}\p{N}]`).
    fn other(&self) -> u64 {
        !(self.non_ascii | self.letter | self.digit | self.space)
    }

    /// The classes of a byte at bit `bit`, one byte at a time (the reference for [`classify`]).
    #[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
    fn add_byte(&mut self, byte: u8, bit: usize) {
        let one = 1u64 << bit;
        let set = |mask: &mut u64, yes: bool| *mask |= if yes { one } else { 0 };
        set(&mut self.non_ascii, byte >= 0x80);
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
/// suffice for ASCII ranges: the bytes from 0x80 up compare as negative, below every ASCII byte.
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

/// The last bit that the known bytes allow to trust: two bytes before the first that is not
/// ASCII (the rules look at the byte after a start), and never the window's last bit.
#[inline(always)]
fn known_limit(classes: &Classes) -> u32 {
    classes.non_ascii.trailing_zeros().saturating_sub(2).min(62)
}

/// `\p{N}{1,3}` pieces of cl100k and o200k: each run of digits starts a piece, and so does every
/// third digit after a piece start within the run.
#[inline(always)]
fn digit_starts(digit: u64) -> u64 {
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
fn whitespace_starts(classes: &Classes, runs: u64) -> (u64, u32) {
    let newlines = classes.newline & runs;
    let through_newline = if newlines == 0 {
        0
    } else {
        fill_down(runs, newlines)
    };
    let tail = runs & !through_newline;
    let starts = (runs & !before(runs)) | (tail & !before(tail)) | (tail & !after(runs));
    let unknown = match classes.non_ascii.trailing_zeros() {
        64 => 0,
        first => u64::MAX << first,
    };
    let open = (runs | unknown).leading_ones();
    let limit = if open == 0 { 63 } else { 64 - open };
    (starts, limit)
}

/// The trusted piece starts (bits 1 to 62) of GPT-2's pattern in a window that starts a piece:
/// `'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`.
#[inline(always)]
pub(crate) fn gpt2(classes: &Classes) -> u64 {
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
        | (space & !after(space));
    // An apostrophe starting a piece may start a contraction.
    let contraction = (classes.apostrophe & starts).trailing_zeros();
    starts & through(known_limit(classes).min(contraction))
}

/// The trusted piece starts of cl100k_base's pattern (see [`gpt2`]):
/// `'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+`
/// `|\s++$|\s*[\r\n]|\s+(?!\S)|\s`.
#[inline(always)]
pub(crate) fn cl100k(classes: &Classes) -> u64 {
    let letter = classes.letter;
    let other = classes.other();
    // The newlines right after punctuation end its piece (`[\r\n]*+`).
    let trailer = fill_up(classes.newline, classes.newline & before(other));
    let runs = classes.space & !trailer;
    let (space_starts, open) = whitespace_starts(classes, runs);
    // Punctuation starts a piece unless it continues punctuation or a space leads it; a letter
    // unless it continues letters or has a leader: any whitespace but a newline (the last of a
    // run, a piece start), or punctuation that starts a piece.
    let other_starts = other & !before(other) & !before(classes.blank);
    let leader = (classes.space & !classes.newline) | other_starts;
    let letter_starts = letter & !before(letter) & !before(leader);
    let starts = space_starts | other_starts | letter_starts | digit_starts(classes.digit);
    let contraction = (classes.apostrophe & other_starts).trailing_zeros();
    starts & through(known_limit(classes).min(contraction).min(open))
}

/// The trusted piece starts of o200k_base's pattern (see [`gpt2`] and [`crate::O200K_PATTERN`]):
/// cl100k's, but for words, which split before a capital after a lowercase letter and may take
/// a contraction, and punctuation, which takes `[\r\n/]*` after it.
#[inline(always)]
pub(crate) fn o200k(classes: &Classes) -> u64 {
    let letter = classes.letter;
    let other = classes.other();
    let trailer = fill_up(
        classes.newline | classes.slash,
        classes.newline & before(other),
    );
    let runs = classes.space & !trailer;
    let (space_starts, open) = whitespace_starts(classes, runs);
    let punctuation = other & !trailer;
    let other_starts = punctuation & !before(punctuation) & !before(classes.blank);
    let leader = (classes.space & !classes.newline) | other_starts;
    let word_goes_on = (before(letter) & !(classes.upper & before(classes.lower))) | before(leader);
    let letter_starts = letter & !word_goes_on;
    let starts = space_starts | other_starts | letter_starts | digit_starts(classes.digit);
    // The word before an apostrophe may take it (not trusted: the bit before it, at most).
    let contraction = (classes.apostrophe & before(letter))
        .trailing_zeros()
        .saturating_sub(1);
    starts & through(known_limit(classes).min(contraction).min(open))
}
