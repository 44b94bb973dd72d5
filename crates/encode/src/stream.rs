//! Encoding a stream of text pieces in constant memory, with the same ids as the whole text.

use crate::{AllowedSpecial, Encoder, TokenId};
use bpestore_pretokenize::last_safe_cut;

/// Text is gathered until about this many bytes wait, then encoded up to the last safe cut.
pub const DEFAULT_STREAM_BLOCK: usize = 1 << 16;

/// The state of a stream being encoded, apart from its encoder (so that an owner of the encoder,
/// such as the Python bindings' `Arc`, can keep both).
pub struct StreamState {
    pending: String,
    block: usize,
    /// Look for a cut only once this many bytes wait: doubled after a search that found none, so
    /// a long stretch without a safe cut is searched O(log n) times, not once per piece.
    threshold: usize,
}

impl Default for StreamState {
    fn default() -> StreamState {
        StreamState::new()
    }
}

impl StreamState {
    /// An empty stream.
    pub fn new() -> StreamState {
        StreamState::with_block(DEFAULT_STREAM_BLOCK)
    }

    /// An empty stream that encodes once `block` bytes wait (small in tests, to cut often).
    pub fn with_block(block: usize) -> StreamState {
        let block = block.max(1);
        StreamState {
            pending: String::new(),
            block,
            threshold: block,
        }
    }

    /// Takes the next piece of text; returns the ids of the text up to the last place where what
    /// follows can no longer change them (often none yet).
    pub fn feed(&mut self, encoder: &Encoder, text: &str) -> Vec<TokenId> {
        self.pending.push_str(text);
        if self.pending.len() < self.threshold {
            return Vec::new();
        }
        let cut = last_safe_cut(&self.pending, &encoder.pretokenizer, &encoder.specials);
        if cut == 0 {
            self.threshold = 2 * self.pending.len();
            return Vec::new();
        }
        let ids = encoder.encode(&self.pending[..cut], AllowedSpecial::All);
        self.pending.drain(..cut);
        self.threshold = self.block.max(2 * self.pending.len());
        ids
    }

    /// The ids of the text still waiting: the end of the stream.
    pub fn finish(&mut self, encoder: &Encoder) -> Vec<TokenId> {
        let ids = encoder.encode(&self.pending, AllowedSpecial::All);
        self.pending = String::new();
        self.threshold = self.block;
        ids
    }

    /// How many bytes of text wait for a safe cut.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }
}

/// Encodes a stream fed piece by piece: the concatenation of everything [`feed`](Self::feed) and
/// [`finish`](Self::finish) return equals [`Encoder::encode`] of the whole text (all special tokens
/// allowed), however the text was cut. Memory holds the text since the last safe cut only.
pub struct StreamEncoder<'e> {
    encoder: &'e Encoder,
    state: StreamState,
}

impl<'e> StreamEncoder<'e> {
    pub(crate) fn new(encoder: &'e Encoder) -> StreamEncoder<'e> {
        StreamEncoder {
            encoder,
            state: StreamState::new(),
        }
    }

    /// See [`StreamState::feed`].
    pub fn feed(&mut self, text: &str) -> Vec<TokenId> {
        self.state.feed(self.encoder, text)
    }

    /// See [`StreamState::finish`].
    pub fn finish(mut self) -> Vec<TokenId> {
        self.state.finish(self.encoder)
    }
}
