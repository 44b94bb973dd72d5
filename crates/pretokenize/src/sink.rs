//! Where the pre-tokenizer puts the pieces it finds: [`Pieces`] takes them as slices of the
//! text, [`Spans`] as byte offsets. Any closure is one (`FnMut(&str)`, `FnMut(usize, usize)`),
//! which is all most callers need.
//!
//! The scanners find most pieces 64 bytes at a time, as a bit mask of where they end (see
//! [`crate::block`]); `run` hands over such a mask whole. A closure gets its pieces one by one,
//! as before; a consumer that keeps them in a buffer takes the whole run in a loop of its own,
//! its count in a register: called once a piece, a closure's state is behind a pointer, and its
//! count went to memory and back for every piece.

/// What receives pre-tokens, left to right, as slices of the text.
pub trait Pieces<'t> {
    /// The next piece.
    fn piece(&mut self, piece: &'t str);

    /// The pieces of `text` from `start` to `base + k` for each set bit `k` of `ends`, lowest
    /// first, each starting where the one before ended; the last one's end (`start` if `ends` is
    /// 0).
    ///
    /// # Safety
    /// `start` and each such end are character boundaries of `text`, and each end is after the
    /// one before (the first after `start`).
    #[inline(always)]
    unsafe fn run(&mut self, text: &'t str, start: usize, base: usize, ends: u64) -> usize {
        each_end(start, base, ends, |i, end| {
            // SAFETY: `i < end` are character boundaries of `text` (this function's contract).
            self.piece(unsafe { text.get_unchecked(i..end) })
        })
    }
}

impl<'t, F: FnMut(&'t str)> Pieces<'t> for F {
    #[inline(always)]
    fn piece(&mut self, piece: &'t str) {
        self(piece)
    }
}

/// What receives pre-tokens, left to right, as byte spans `(start, end)` of the text.
pub trait Spans {
    /// The next piece, `text[start..end]`.
    fn span(&mut self, start: usize, end: usize);

    /// The pieces from `start` to `base + k` for each set bit `k` of `ends`, lowest first, each
    /// starting where the one before ended; the last one's end (`start` if `ends` is 0). See
    /// [`Pieces::run`], whose caller vouches for the ends.
    #[inline(always)]
    fn run(&mut self, start: usize, base: usize, ends: u64) -> usize {
        each_end(start, base, ends, |i, end| self.span(i, end))
    }
}

impl<F: FnMut(usize, usize)> Spans for F {
    #[inline(always)]
    fn span(&mut self, start: usize, end: usize) {
        self(start, end)
    }
}

/// Calls `f(start, end)` for each piece of a run: from `start` to `base + k` for each set bit
/// `k` of `ends`, lowest first, each starting where the one before ended; the last one's end
/// (`start` if `ends` is 0). The loop of every `run`.
#[inline(always)]
pub fn each_end(
    start: usize,
    base: usize,
    mut ends: u64,
    mut f: impl FnMut(usize, usize),
) -> usize {
    let mut i = start;
    while ends != 0 {
        let end = base + ends.trailing_zeros() as usize;
        f(i, end);
        i = end;
        ends &= ends - 1;
    }
    i
}

/// The [`Pieces`] of a part of a text given to `spans` as spans of the whole text, which starts
/// at the address `base`.
pub(crate) struct SpansOf<'s, S> {
    pub(crate) spans: &'s mut S,
    pub(crate) base: usize,
}

impl<'t, S: Spans> Pieces<'t> for SpansOf<'_, S> {
    #[inline(always)]
    fn piece(&mut self, piece: &'t str) {
        let start = piece.as_ptr() as usize - self.base;
        self.spans.span(start, start + piece.len());
    }

    #[inline(always)]
    unsafe fn run(&mut self, text: &'t str, start: usize, base: usize, ends: u64) -> usize {
        let offset = text.as_ptr() as usize - self.base;
        self.spans.run(offset + start, offset + base, ends) - offset
    }
}
