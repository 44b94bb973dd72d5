//! Encoding a stream of text pieces in constant memory, with the same ids as the whole text.

use crate::cache::PieceCache;
use crate::{AllowedSpecial, Dropout, EncodeError, Encoder, TokenId};
use bpestore_pretokenize::{last_safe_cut, SpecialTokens};

/// Text is gathered until about this many bytes wait, then encoded up to the last safe cut.
/// (Small: CS336's check encodes a 5 MB file line by line within 1 MB more address space, ids as
/// Python ints included.)
pub const DEFAULT_STREAM_BLOCK: usize = 1 << 13;
/// A stream has a cache of its own, this small, to keep its memory constant: at most 8K slots of
/// 32 bytes (short pieces) or 64 (16 to 31 bytes), so under 1 MB while a table doubles; CS336's
/// bound of 1 MB more address space holds even for text of distinct 16-31 byte words
/// (tests/test_api.py). Twice the old 2048 entries: fewer misses on big natural texts (one noisy
/// run over reuters_17M's lines: 2.44 s -> 1.93 s).
const STREAM_CACHE_ENTRIES: usize = 4096;

/// The state of a stream being encoded, apart from its encoder (so that an owner of the encoder,
/// such as the Python bindings' `Arc`, can keep both).
pub struct StreamState {
    pending: String,
    /// Bytes of the stream encoded before `pending` (the offset of an error is the stream's).
    encoded: u64,
    block: usize,
    /// Look for a cut only once this many bytes wait: doubled after a search that found none, so
    /// a long stretch without a safe cut is searched O(log n) times, not once per piece.
    threshold: usize,
    /// Made on first use.
    cache: Option<PieceCache>,
    /// When only some of the encoder's special tokens are recognised (none, if empty): those,
    /// and the matcher the cuts must respect. None: all of them.
    only: Option<(Vec<String>, SpecialTokens)>,
    /// Whether `only`'s tokens were narrowed to those text may be cut at (see `feed`).
    only_cuts_checked: bool,
    /// BPE-dropout, if asked for: each piece's draws are seeded by its offset in the stream, so
    /// the ids equal [`Encoder::encode_with_dropout`]'s of the whole text.
    dropout: Option<Dropout>,
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
            encoded: 0,
            block,
            threshold: block,
            cache: None,
            only: None,
            only_cuts_checked: false,
            dropout: None,
        }
    }

    /// This stream, encoded with BPE-dropout (a probability of 0: without).
    #[must_use]
    pub fn with_dropout(mut self, dropout: Dropout) -> StreamState {
        self.dropout = (dropout.probability > 0.0).then_some(dropout);
        self
    }

    /// An empty stream that recognises only the special tokens `allowed` (each one of the
    /// encoder's; none if empty): the others are ordinary text, as for
    /// [`AllowedSpecial::Only`].
    pub fn with_allowed(block: usize, allowed: &[String]) -> StreamState {
        let mut state = StreamState::with_block(block);
        state.only = Some((allowed.to_vec(), SpecialTokens::new(allowed)));
        state
    }

    /// Takes the next piece of text; returns the ids of the text up to the last place where what
    /// follows can no longer change them (often none yet).
    ///
    /// # Errors
    /// [`EncodeError::MatchFailed`] if the pattern fails on the text: its offset is in the
    /// stream as a whole (everything fed since it began). The stream is then of no further use.
    pub fn feed(&mut self, encoder: &Encoder, text: &str) -> Result<Vec<TokenId>, EncodeError> {
        self.pending.push_str(text);
        if self.pending.len() < self.threshold {
            return Ok(Vec::new());
        }
        if let Some((_, specials)) = &mut self.only {
            if encoder.specials.any_options() && !self.only_cuts_checked {
                // (a token that takes what is around it is no place to cut)
                let options = encoder.specials.options();
                let tokens = encoder.specials.tokens();
                *specials = specials.subset(|token, _| {
                    tokens
                        .iter()
                        .zip(options)
                        .any(|(named, options)| named == token && !options.any())
                });
                self.only_cuts_checked = true;
            }
        }
        let specials = match &self.only {
            Some((_, specials)) => specials,
            None => &encoder.cut_specials,
        };
        let cut = last_safe_cut(&self.pending, &encoder.pretokenizer, specials);
        if cut == 0 {
            self.threshold = 2 * self.pending.len();
            return Ok(Vec::new());
        }
        let ids = self.encode(encoder, cut)?;
        self.pending.drain(..cut);
        self.encoded += cut as u64;
        self.threshold = self.block.max(2 * self.pending.len());
        Ok(ids)
    }

    /// The ids of the text still waiting: the end of the stream (the state can then start a new
    /// one).
    ///
    /// # Errors
    /// As for [`StreamState::feed`].
    pub fn finish(&mut self, encoder: &Encoder) -> Result<Vec<TokenId>, EncodeError> {
        let ids = self.encode(encoder, self.pending.len())?;
        self.pending = String::new();
        self.encoded = 0;
        self.threshold = self.block;
        Ok(ids)
    }

    /// The ids of the first `end` bytes waiting.
    fn encode(&mut self, encoder: &Encoder, end: usize) -> Result<Vec<TokenId>, EncodeError> {
        let cache = self
            .cache
            .get_or_insert_with(|| PieceCache::new(STREAM_CACHE_ENTRIES));
        let mut ids = Vec::with_capacity(end / 4 + 1);
        let text = &self.pending[..end];
        let (dropout, start) = (self.dropout, self.encoded);
        let mut encode = |allowed: AllowedSpecial<'_>| match dropout {
            None => encoder.encode_into(text, allowed, cache, &mut ids),
            Some(dropout) => {
                encoder.dropout_into(text, allowed, dropout, (0, start), cache, &mut ids)
            }
        };
        let result = match &self.only {
            None => encode(AllowedSpecial::All),
            Some((allowed, _)) if allowed.is_empty() => encode(AllowedSpecial::None),
            Some((allowed, _)) => {
                let allowed: Vec<&str> = allowed.iter().map(String::as_str).collect();
                encode(AllowedSpecial::Only(&allowed))
            }
        };
        let encoded = usize::try_from(self.encoded).unwrap_or(usize::MAX);
        result.map_err(|error| {
            EncodeError::MatchFailed(error.shifted(encoded).named("the stream".into()))
        })?;
        Ok(ids)
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
    ///
    /// # Errors
    /// As there.
    pub fn feed(&mut self, text: &str) -> Result<Vec<TokenId>, EncodeError> {
        self.state.feed(self.encoder, text)
    }

    /// See [`StreamState::finish`].
    ///
    /// # Errors
    /// As there.
    pub fn finish(mut self) -> Result<Vec<TokenId>, EncodeError> {
        self.state.finish(self.encoder)
    }
}
