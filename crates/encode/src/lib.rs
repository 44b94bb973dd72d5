//! Encoding text to token ids with a byte-level BPE vocabulary, and back.
//!
//! [`Encoder`] cuts text at special tokens, pre-tokenizes the rest (`bpestore_pretokenize`) and
//! merges each pre-token by one of two rules ([`MergeRule`]), remembering the ids of the pre-tokens
//! it has seen. It is `Send + Sync`: [`Encoder::encode_batch`] and [`Encoder::encode_file_to_npy`]
//! encode on several threads, and a [`StreamEncoder`] encodes a stream piece by piece in constant
//! memory with the same ids as the whole text.
//!
//! Encoding fails only when a pattern other than the three known ones (which run on hand-written
//! scanners that cannot fail) fails on the text: it gives up on a match at the regex engine's
//! backtracking limit, or its matches leave some text uncovered (which encoding would otherwise
//! drop). That is [`EncodeError::MatchFailed`], whose offset is a byte offset in what the caller
//! gave (the text, the stream, the file): never a panic, never text silently lost.

mod aligned;
mod bpe;
mod cache;
mod dropout;
mod file;
mod huge;
mod mix;
mod normalize;
mod offsets;
pub mod packed;
mod prefetch;
mod quick_check;
pub mod ranks;
mod shared;
mod slots;
mod stream;
mod vocab;
mod warm;

pub use bpe::TokenId;
use bpe::{BytePairs, PairRanks};
use bpestore_pretokenize::{
    each_end, Part, Pipeline, PretokenizeError, Pretokenizer, Spans, SpecialTokens, TokenOptions,
};
pub use cache::DEFAULT_CACHE_ENTRIES;
use cache::{CachePool, PieceCache, MAX_CACHED_PIECE, NOT_SHORT};
pub use dropout::Dropout;
pub use file::DEFAULT_CHUNK_BYTES;
pub use file::{partial_path, FileError, NpyDtype, NpyWriter, PARTIAL_HEADER_START};
pub use huge::{advise_huge_pages, let_the_heap_serve_big_blocks};
pub use normalize::{Normalizer, NormalizerStep};
pub use offsets::IdsAndOffsets;
use rustc_hash::FxHashMap;
use shared::SharedCache;
use slots::SlotsAt;
use std::fmt;
use std::sync::OnceLock;
pub use stream::{StreamEncoder, StreamState, DEFAULT_STREAM_BLOCK};
use vocab::Vocab;
pub use vocab::{check_single_bytes, pack as pack_short, py_bytes_repr, SHORT_TOKEN};
use warm::WarmCache;
pub use warm::WARM_MAGIC;

/// Which of two published rules merges a pre-token's bytes into tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MergeRule {
    /// GPT-2's `bpe()` (also CS336's and Hugging Face's): the adjacent pair whose *merge* has the
    /// lowest rank first, all its occurrences at once, left to right.
    Pair,
    /// tiktoken's: the whole pre-token if it is a token; else the leftmost adjacent pair whose
    /// *concatenation* is the lowest-ranked token (rank = id), one at a time. Merges are unused.
    Token,
}

/// Which special tokens found in the text are encoded as such; the others are ordinary text.
#[derive(Clone, Copy, Debug)]
pub enum AllowedSpecial<'a> {
    /// Every special token the encoder was built with (CS336's behaviour; the default).
    All,
    /// None: the whole text is ordinary text.
    None,
    /// Only these (each must be one of the encoder's special tokens; others are ignored).
    Only(&'a [&'a str]),
}

/// What can go wrong building an encoder, encoding or decoding.
#[derive(Debug)]
pub enum EncodeError {
    /// The vocabulary or merges cannot be used (the message says why, as bpestore's Python did).
    InvalidVocab(String),
    /// The pre-tokenizer pattern does not compile (or is refused at construction).
    Pattern(PretokenizeError),
    /// While encoding, the pre-tokenizer pattern failed on the text: it gave up on a match at the
    /// regex engine's backtracking limit, or no match covers some text (a
    /// [`PretokenizeError::MatchFailed`] whose offset is a byte offset in the text as a whole,
    /// special tokens included: see [`bpestore_pretokenize::MatchFailure`]).
    MatchFailed(PretokenizeError),
    /// An id to decode that no token has.
    UnknownId {
        /// The id.
        id: u64,
        /// The highest id of the vocabulary.
        max_id: TokenId,
    },
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::InvalidVocab(message) => f.write_str(message),
            EncodeError::Pattern(error) | EncodeError::MatchFailed(error) => write!(f, "{error}"),
            EncodeError::UnknownId { id, max_id } => {
                write!(
                    f,
                    "id {id} is not in the vocabulary (ids go up to {max_id})"
                )
            }
        }
    }
}

impl std::error::Error for EncodeError {}

/// A text of a batch that could not be encoded: the first in the batch's order.
#[derive(Debug)]
pub struct BatchError {
    /// The text's index in the batch.
    pub index: usize,
    /// Why (an [`EncodeError::MatchFailed`], its offset in that text).
    pub error: EncodeError,
}

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "text {}: {}", self.index, self.error)
    }
}

impl std::error::Error for BatchError {}

/// Why [`Encoder::encode_batch_overlapped`] stopped: a text that could not be encoded, or the
/// caller's `take` failing.
#[derive(Debug)]
pub enum OverlappedError<E> {
    /// The first text of the batch, in order, that could not be encoded.
    Encode(BatchError),
    /// The error `take` returned.
    Take(E),
}

/// A byte-level BPE encoder and decoder. Cheap to share between threads (`&Encoder`).
pub struct Encoder {
    vocab: Vocab,
    rule: MergeRule,
    pairs: PairRanks,
    /// The token rule's joins of two single bytes (empty for the pair rule).
    byte_joins: BytePairs,
    pretokenizer: Pretokenizer,
    specials: SpecialTokens,
    /// `special_ids[i]` is the id of `specials.tokens()[i]`.
    special_ids: Vec<TokenId>,
    caches: CachePool,
    /// The table of short pieces that threads encoding one job together share (see
    /// `shared.rs`); kept between jobs.
    table: SharedCache,
    /// Pieces whose ids were worked out ahead (see `warm.rs`), read before the caches.
    warm: OnceLock<WarmCache>,
    /// What the ids of a piece depend on, hashed (see `warm.rs`).
    fingerprint: u64,
    /// What normalizes the text between special tokens, and the tokens then found in it.
    normalization: Option<Normalization>,
    /// The special tokens text may be cut at to be encoded in parts: those that take nothing
    /// around them (see [`Encoder::with_token_options`]).
    pub(crate) cut_specials: SpecialTokens,
    /// The bytes left out of every piece (see [`Encoder::with_dropped_bytes`]).
    dropped_bytes: Option<Box<[bool; 256]>>,
    /// Whether pieces are merged from their characters (see [`Encoder::with_chars_first`]).
    chars_first: bool,
    /// What a pre-tokenizer writes into each stretch of text before its pieces are made (see
    /// [`Encoder::with_prefix`]).
    prefix: Option<Prefix>,
}

/// When a [`Prefix`] is put before a stretch of text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefixWhen {
    /// Before every stretch (between special tokens) that does not start with it.
    Always,
    /// Only before the stretch that starts the text, if it does not start with it.
    First,
    /// Never (spaces are still replaced).
    Never,
}

/// What Hugging Face's `Metaspace` pre-tokenizer (spaces written as `▁`, one put before the
/// text) and `ByteLevel` with `add_prefix_space` (a space put before the text) do to each stretch
/// of text they get, before any piece is made of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prefix {
    /// What is put before a stretch (`▁`, or a space).
    pub text: String,
    /// When.
    pub when: PrefixWhen,
    /// Whether each space is first replaced by `text` (`Metaspace`).
    pub replaces_spaces: bool,
}

impl Prefix {
    /// `stretch` as the pre-tokenizer writes it (`starts_text`: whether the stretch starts the
    /// text, as `tokenizers`' `offsets_original().0 == 0`); borrowed when nothing changes.
    pub fn apply<'t>(&self, stretch: &'t str, starts_text: bool) -> std::borrow::Cow<'t, str> {
        let mut written = std::borrow::Cow::Borrowed(stretch);
        if self.replaces_spaces && stretch.contains(' ') {
            written = std::borrow::Cow::Owned(stretch.replace(' ', &self.text));
        }
        // (nothing goes before an empty stretch: `tokenizers` prepends to a character)
        let put = !stretch.is_empty()
            && match self.when {
                PrefixWhen::Always => true,
                PrefixWhen::First => starts_text,
                PrefixWhen::Never => false,
            };
        if put && !written.starts_with(self.text.as_str()) {
            written = std::borrow::Cow::Owned(format!("{}{written}", self.text));
        }
        written
    }
}

impl Prefix {
    /// [`Prefix::apply`] with each byte's alignment, as `tokenizers`' `Metaspace` (`replace`,
    /// then `prepend`) and `ByteLevel` (`prepend`) write it (see `aligned.rs`); only for offsets.
    pub(crate) fn apply_aligned(
        &self,
        stretch: aligned::Aligned,
        starts_text: bool,
    ) -> aligned::Aligned {
        let mut written = stretch;
        if self.replaces_spaces && written.text.contains(' ') {
            written = written.replace(" ", &self.text);
        }
        let put = !written.text.is_empty()
            && match self.when {
                PrefixWhen::Always => true,
                PrefixWhen::First => starts_text,
                PrefixWhen::Never => false,
            };
        if put && !written.text.starts_with(self.text.as_str()) {
            written = written.prepend(&self.text);
        }
        written
    }
}

/// A normalizer, and the added tokens that are found in the text once it is normalized
/// (`tokenizers`' added tokens with `"normalized": true`), each written normalized.
struct Normalization {
    normalizer: Normalizer,
    tokens: SpecialTokens,
    /// The tokens as given, before normalizing, in the order of `tokens.tokens()`.
    given: Vec<String>,
    /// `ids[i]` is the id of `tokens.tokens()[i]`.
    ids: Vec<TokenId>,
}

impl Encoder {
    /// An encoder for `vocab` (id, bytes; every single byte among them, no token twice) and
    /// `merges` in rank order (unused by [`MergeRule::Token`]), with `special_tokens` and their
    /// ids (a special token missing from the vocabulary has an id of its own; one that is also an
    /// ordinary token has that token's id), pre-tokenizing with the regex `pattern`.
    pub fn new(
        vocab: Vec<(TokenId, Vec<u8>)>,
        merges: Vec<(Vec<u8>, Vec<u8>)>,
        special_tokens: Vec<(String, TokenId)>,
        pattern: &str,
        rule: MergeRule,
    ) -> Result<Encoder, EncodeError> {
        Encoder::with_cache_entries(
            vocab,
            merges,
            special_tokens,
            pattern,
            rule,
            DEFAULT_CACHE_ENTRIES,
        )
    }

    /// [`Encoder::new`] with caches of at most `cache_entries` distinct pre-tokens each.
    pub fn with_cache_entries(
        vocab: Vec<(TokenId, Vec<u8>)>,
        merges: Vec<(Vec<u8>, Vec<u8>)>,
        special_tokens: Vec<(String, TokenId)>,
        pattern: &str,
        rule: MergeRule,
        cache_entries: usize,
    ) -> Result<Encoder, EncodeError> {
        let vocab: Vec<(TokenId, &[u8])> = vocab
            .iter()
            .map(|(id, token)| (*id, token.as_slice()))
            .collect();
        let merges: Vec<(&[u8], &[u8])> = merges
            .iter()
            .map(|(l, r)| (l.as_slice(), r.as_slice()))
            .collect();
        Encoder::from_slices(
            &vocab,
            &merges,
            &special_tokens,
            pattern,
            rule,
            cache_entries,
        )
    }

    /// [`Encoder::with_cache_entries`] from borrowed tokens (no copy of each token first: the
    /// Python bindings build an encoder from the `bytes` objects themselves).
    pub fn from_slices(
        vocab: &[(TokenId, &[u8])],
        merges: &[(&[u8], &[u8])],
        special_tokens: &[(String, TokenId)],
        pattern: &str,
        rule: MergeRule,
        cache_entries: usize,
    ) -> Result<Encoder, EncodeError> {
        Encoder::from_parts(
            vocab,
            merges,
            special_tokens,
            &[],
            pattern,
            rule,
            cache_entries,
        )
    }

    /// [`Encoder::from_slices`] with `extra` ids beside the vocab: ids decoding gives the bytes
    /// of and BPE never gives (see `Vocab::new`): a special token's own id beside the vocab's
    /// token of the same bytes, or an id a Hugging Face file keeps only to be decoded.
    pub fn from_parts(
        vocab: &[(TokenId, &[u8])],
        merges: &[(&[u8], &[u8])],
        special_tokens: &[(String, TokenId)],
        extra: &[(TokenId, &[u8])],
        pattern: &str,
        rule: MergeRule,
        cache_entries: usize,
    ) -> Result<Encoder, EncodeError> {
        for (token, _) in special_tokens {
            if token.is_empty() {
                return Err(EncodeError::InvalidVocab(
                    "special tokens must be non-empty strings, got ''".into(),
                ));
            }
        }
        let fingerprint = warm::model_fingerprint(rule, vocab, merges);
        let vocab = Vocab::new(vocab, special_tokens, extra)?;
        let pairs = match rule {
            MergeRule::Pair => pair_ranks(&vocab, merges)?,
            MergeRule::Token => PairRanks::new(std::iter::empty(), &vocab.byte_ids),
        };
        let byte_joins = match rule {
            MergeRule::Pair => BytePairs::none(),
            MergeRule::Token => BytePairs::new(&vocab),
        };
        let pretokenizer = Pretokenizer::new(pattern).map_err(EncodeError::Pattern)?;
        // Each special token once, in the order given.
        let mut unique: Vec<(String, TokenId)> = Vec::with_capacity(special_tokens.len());
        for (token, id) in special_tokens {
            if !unique.iter().any(|(seen, _)| seen == token) {
                unique.push((token.clone(), *id));
            }
        }
        let names: Vec<String> = unique.iter().map(|(token, _)| token.clone()).collect();
        let specials = SpecialTokens::new(&names);
        let cut_specials = specials.clone();
        let special_ids = specials
            .tokens()
            .iter()
            .map(|token| {
                unique
                    .iter()
                    .find(|(t, _)| t == token)
                    .map(|&(_, id)| id)
                    .expect("a given token")
            })
            .collect();
        let table = SharedCache::new(cache_entries.max(1), vocab.max_id);
        Ok(Encoder {
            vocab,
            rule,
            pairs,
            byte_joins,
            pretokenizer,
            specials,
            special_ids,
            caches: CachePool::new(cache_entries.max(1)),
            table,
            warm: OnceLock::new(),
            fingerprint,
            normalization: None,
            cut_specials,
            dropped_bytes: None,
            chars_first: false,
            prefix: None,
        })
    }

    /// This encoder with `normalizer` run on the text between special tokens before it is
    /// pre-tokenized, and `tokens` (with their ids; not among the special tokens given at
    /// construction) found in the normalized text and encoded whole, as `tokenizers` does with
    /// its normalizer and its added tokens marked `"normalized": true`. A token is looked for as
    /// the normalizer writes it.
    ///
    /// Where a known pattern's text may be cut (before a space, after a newline) to be encoded
    /// in parts, it no longer is when the normalizer or the tokens would see the cut (see
    /// [`Normalizer::keeps_space_cuts`]): such text is cut only at special tokens.
    ///
    /// # Errors
    /// [`EncodeError::InvalidVocab`] for a token whose id is not in the vocabulary. (A token
    /// that is empty once normalized is never found, as in `tokenizers`.)
    pub fn with_normalizer(
        mut self,
        normalizer: Normalizer,
        tokens: &[(String, TokenId)],
    ) -> Result<Encoder, EncodeError> {
        let mut written: Vec<String> = Vec::with_capacity(tokens.len());
        let mut given: Vec<String> = Vec::with_capacity(tokens.len());
        let mut ids = Vec::with_capacity(tokens.len());
        for (token, id) in tokens {
            let normalized = normalizer.normalize(token).into_owned();
            if self.vocab.get(*id).is_none() {
                return Err(EncodeError::InvalidVocab(format!(
                    "the added token {token:?} has id {id}, which is not in the vocabulary"
                )));
            }
            // (one that normalizes to nothing is never found, as in `tokenizers`)
            if !normalized.is_empty() && !written.contains(&normalized) {
                written.push(normalized);
                given.push(token.clone());
                ids.push(*id);
            }
        }
        let tokens = SpecialTokens::new(&written); // (in the order given: `ids`, `given`)
        let cuts_seen =
            !normalizer.keeps_space_cuts() || tokens.any_has_space() || tokens.any_has_newline();
        if cuts_seen {
            self.pretokenizer = self.pretokenizer.without_space_cuts();
        }
        self.normalization =
            (!normalizer.is_empty() || !tokens.is_empty()).then_some(Normalization {
                normalizer,
                tokens,
                given,
                ids,
            });
        Ok(self)
    }

    /// This encoder with its special tokens (those given at construction, and those found in
    /// normalized text: see [`Encoder::with_normalizer`], called first) taking their
    /// surroundings as `options` says, token by token (see [`TokenOptions`]; a token not named
    /// takes none). Text is then no longer cut at spaces, nor at such a token, to be encoded in
    /// parts: what the token takes lies on either side of it.
    pub fn with_token_options(mut self, options: &[(String, TokenOptions)]) -> Encoder {
        // (each token's options, by the name it was given under; none for a token not named)
        let options_of = |given: &[String]| -> Vec<TokenOptions> {
            given
                .iter()
                .map(|token| {
                    options
                        .iter()
                        .find(|(named, _)| named == token)
                        .map_or_else(TokenOptions::default, |(_, options)| *options)
                })
                .collect()
        };
        let tokens = self.specials.tokens().to_vec();
        self.specials = SpecialTokens::with_options(&tokens, &options_of(&tokens));
        if let Some(normalization) = &mut self.normalization {
            let written = normalization.tokens.tokens().to_vec();
            normalization.tokens =
                SpecialTokens::with_options(&written, &options_of(&normalization.given));
            if normalization.tokens.any_options() {
                self.pretokenizer = self.pretokenizer.without_space_cuts();
            }
        }
        if self.specials.any_options() {
            self.pretokenizer = self.pretokenizer.without_space_cuts();
            self.cut_specials = self.specials.subset(|_, options| !options.any());
        }
        self
    }

    /// This encoder with the bytes `dropped` left out of every piece before it is merged, as
    /// Hugging Face's BPE leaves out a character its vocabulary lacks (with no unknown token):
    /// the bytes either side of one become neighbours and may merge. (Each must be a token of
    /// the vocabulary all the same, an id no encoding gives. A piece that holds one is merged
    /// afresh, without BPE-dropout.)
    pub fn with_dropped_bytes(mut self, dropped: &[u8]) -> Encoder {
        if !dropped.is_empty() {
            let mut table = [false; 256];
            for &byte in dropped {
                table[byte as usize] = true;
            }
            self.dropped_bytes = Some(Box::new(table));
        }
        self
    }

    /// The first byte of `text` that is left out of pieces (see [`Encoder::with_dropped_bytes`]).
    pub(crate) fn dropped_byte_in(&self, text: &str) -> Option<u8> {
        let dropped = self.dropped_bytes.as_deref()?;
        text.bytes().find(|&byte| dropped[byte as usize])
    }

    /// The ids of `piece` without its dropped bytes (see [`Encoder::with_dropped_bytes`]).
    fn without_dropped_bytes(&self, piece: &[u8], dropped: &[bool; 256]) -> Vec<TokenId> {
        let kept: Vec<u8> = piece
            .iter()
            .copied()
            .filter(|&byte| !dropped[byte as usize])
            .collect();
        self.piece_ids(&kept)
    }

    /// This encoder with `prefix` applied to each stretch of text it pre-tokenizes: the text
    /// between special tokens, or, for an encoder that normalizes, each stretch of the normalized
    /// text between the tokens found in it, as `tokenizers` runs its pre-tokenizer on each split
    /// its added vocabulary leaves. Text is then cut only at special tokens to be encoded in parts.
    pub fn with_prefix(mut self, prefix: Prefix) -> Encoder {
        self.pretokenizer = self.pretokenizer.without_space_cuts();
        self.prefix = Some(prefix);
        self
    }

    /// Whether the text the pieces are made of is not the text given (a normalizer or a
    /// [`Prefix`] writes it): offsets into the given text are then not the tokens'.
    pub fn rewrites_text(&self) -> bool {
        self.normalization.is_some() || self.prefix.is_some()
    }

    /// This encoder merging from characters rather than bytes, as a SentencePiece-style BPE
    /// does (Llama-2, Mistral): a piece starts as its characters, each the vocabulary's token
    /// for it, or its bytes if the vocabulary has none (byte fallback), and the merges (the
    /// pair rule) go on from there. The vocabulary's single bytes are then the fallback tokens.
    pub fn with_chars_first(mut self) -> Encoder {
        self.chars_first = true;
        self
    }

    /// This encoder with its pieces made by `pipeline` (Hugging Face's pre-tokenizers in a
    /// sequence) instead of its pattern.
    pub fn with_pipeline(mut self, pipeline: Pipeline) -> Encoder {
        self.pretokenizer = self.pretokenizer.with_pipeline(pipeline);
        self
    }

    /// Whether text is normalized before it is pre-tokenized (see [`Encoder::with_normalizer`]).
    pub fn normalizes(&self) -> bool {
        self.normalization.is_some()
    }

    /// The merge rule.
    pub fn rule(&self) -> MergeRule {
        self.rule
    }

    /// The pre-tokenizer.
    pub fn pretokenizer(&self) -> &Pretokenizer {
        &self.pretokenizer
    }

    /// The special tokens.
    pub fn special_tokens(&self) -> &SpecialTokens {
        &self.specials
    }

    /// The highest id of any token, special tokens included.
    pub fn max_id(&self) -> TokenId {
        self.vocab.max_id
    }

    /// How many tokens there are, special tokens included.
    pub fn vocab_len(&self) -> usize {
        self.vocab.len
    }

    /// The ids of `text`; the special tokens `allowed` become their own ids.
    ///
    /// # Errors
    /// [`EncodeError::MatchFailed`] if the pattern fails on the text (see the crate's docs).
    pub fn encode(
        &self,
        text: &str,
        allowed: AllowedSpecial<'_>,
    ) -> Result<Vec<TokenId>, EncodeError> {
        let mut out = Vec::with_capacity(text.len() / 4 + 1);
        advise_huge_pages(out.spare_capacity_mut());
        self.caches
            .with(|cache| self.encode_into(text, allowed, cache, &mut out))
            .map_err(|error| EncodeError::MatchFailed(in_text(error, text)))?;
        Ok(out)
    }

    /// The ids of each text, encoded on `threads` threads (at least one), in order.
    ///
    /// # Errors
    /// The first text, in the batch's order, that cannot be encoded (as for [`Encoder::encode`]).
    pub fn encode_batch(
        &self,
        texts: &[&str],
        threads: usize,
    ) -> Result<Vec<Vec<TokenId>>, BatchError> {
        self.encode_batch_allowed(texts, threads, AllowedSpecial::All)
    }

    /// [`Encoder::encode_batch`], recognising only the special tokens `allowed`.
    pub fn encode_batch_allowed(
        &self,
        texts: &[&str],
        threads: usize,
        allowed: AllowedSpecial<'_>,
    ) -> Result<Vec<Vec<TokenId>>, BatchError> {
        let failed = |index: usize, error: PretokenizeError| BatchError {
            index,
            error: EncodeError::MatchFailed(in_text(error, texts[index])),
        };
        let threads = threads.clamp(1, texts.len().max(1));
        if threads == 1 {
            return self.caches.with(|cache| {
                // (room for the batch's pieces at once: its texts may each be short)
                cache.reserve_for_text(texts.iter().map(|text| text.len()).sum());
                texts
                    .iter()
                    .enumerate()
                    .map(|(i, text)| {
                        let mut out = Vec::with_capacity(text.len() / 4 + 1);
                        self.encode_into(text, allowed, cache, &mut out)
                            .map_err(|error| failed(i, error))?;
                        Ok(out)
                    })
                    .collect()
            });
        }
        // The threads' work is encode_batch_overlapped's (one skeleton of workers, shared cache,
        // stop flag and first failure in the batch's order); here the blocks are taken apart
        // into one list of ids per text.
        let mut results: Vec<Vec<TokenId>> = vec![Vec::new(); texts.len()];
        let outcome = self.encode_batch_overlapped(
            texts,
            threads,
            allowed,
            |next| next(),
            |block| {
                for (slot, ids) in results[block.first..].iter_mut().zip(block.texts()) {
                    *slot = ids.to_vec();
                }
                Ok::<(), std::convert::Infallible>(())
            },
        );
        match outcome {
            Ok(()) => Ok(results),
            Err(OverlappedError::Encode(failure)) => Err(failure),
            Err(OverlappedError::Take(never)) => match never {},
        }
    }

    /// [`Encoder::encode_batch_allowed`] for callers that turn ids into objects of their own on the
    /// calling thread (the Python bindings make lists): `threads` workers encode blocks of
    /// consecutive texts while this thread hands each finished block, in whatever order they
    /// finish, to `take(the block)`, so that the making overlaps the encoding instead of
    /// following it. Each wait for the next block goes through
    /// `wait(next)`, which must call `next` (the bindings release the GIL around it). If `take`
    /// fails, the workers stop after their current block and the error is returned
    /// ([`OverlappedError::Take`]).
    ///
    /// # Errors
    /// Besides `take`'s: the first text, in the batch's order, that cannot be encoded
    /// ([`OverlappedError::Encode`], as for [`Encoder::encode_batch`]); the blocks before it may
    /// have been taken by then.
    pub fn encode_batch_overlapped<E>(
        &self,
        texts: &[&str],
        threads: usize,
        allowed: AllowedSpecial<'_>,
        mut wait: impl FnMut(&(dyn Fn() -> Option<EncodedBlock> + Sync)) -> Option<EncodedBlock>,
        mut take: impl FnMut(IdsBlock) -> Result<(), E>,
    ) -> Result<(), OverlappedError<E>> {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        let threads = threads.max(1);
        let blocks = batch_blocks(texts, threads);
        let next = AtomicUsize::new(0);
        // Set on any error: the workers take no new block. Blocks are taken in order, so every
        // block before a failed one has been taken by then and is finished: the first failure
        // in the batch's order is among those that arrive.
        let stop = AtomicBool::new(false);
        let shared = self.caches.new_shared();
        let (sender, receiver) = std::sync::mpsc::channel::<EncodedBlock>();
        let receiver = std::sync::Mutex::new(receiver);
        std::thread::scope(|scope| {
            for _ in 0..threads {
                let sender = sender.clone();
                let (blocks, next, stop, shared) = (&blocks, &next, &stop, &shared);
                scope.spawn(move || {
                    self.caches
                        .with_shared(self.table.table(), shared, |cache| {
                            while !stop.load(Ordering::Relaxed) {
                                let Some(range) = blocks.get(next.fetch_add(1, Ordering::Relaxed))
                                else {
                                    break;
                                };
                                // One buffer for the block's ids (not one per text: allocated
                                // here and freed by the taker's thread, they cost as much as
                                // the short texts they hold).
                                let texts = &texts[range.clone()];
                                let bytes: usize = texts.iter().map(|text| text.len()).sum();
                                let mut block = IdsBlock {
                                    first: range.start,
                                    ids: Vec::with_capacity(bytes / 4 + 16),
                                    ends: Vec::with_capacity(texts.len()),
                                };
                                let mut failure = None;
                                for (i, text) in texts.iter().enumerate() {
                                    if let Err(error) =
                                        self.encode_into(text, allowed, cache, &mut block.ids)
                                    {
                                        stop.store(true, Ordering::Relaxed);
                                        failure = Some(BatchError {
                                            index: range.start + i,
                                            error: EncodeError::MatchFailed(in_text(error, text)),
                                        });
                                        break;
                                    }
                                    block.ends.push(block.ids.len());
                                }
                                let encoded = EncodedBlock(match failure {
                                    None => Ok(block),
                                    Some(failure) => Err(failure),
                                });
                                if sender.send(encoded).is_err() {
                                    break;
                                }
                            }
                        })
                });
            }
            drop(sender); // the channel ends when the last worker does
            let next_block = || {
                receiver
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .recv()
                    .ok()
            };
            let mut first_failure: Option<BatchError> = None;
            while let Some(EncodedBlock(block)) = wait(&next_block) {
                match block {
                    // (after a failure, the blocks still to come are only waited for)
                    Ok(block) if first_failure.is_none() => {
                        if let Err(error) = take(block) {
                            stop.store(true, Ordering::Relaxed);
                            return Err(OverlappedError::Take(error));
                        }
                    }
                    Ok(_) => {}
                    Err(failure) => {
                        if first_failure
                            .as_ref()
                            .is_none_or(|first| failure.index < first.index)
                        {
                            first_failure = Some(failure);
                        }
                    }
                }
            }
            match first_failure {
                Some(failure) => Err(OverlappedError::Encode(failure)),
                None => Ok(()),
            }
        })
    }

    /// An encoder for a stream of text pieces (see [`StreamEncoder`]).
    pub fn stream(&self) -> StreamEncoder<'_> {
        StreamEncoder::new(self)
    }

    /// The bytes of the tokens `ids`, joined; the first id that no token has is the error.
    pub fn decode_bytes(&self, ids: &[TokenId]) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            match self.vocab.get(id) {
                Some(bytes) => out.extend_from_slice(bytes),
                None => {
                    return Err(EncodeError::UnknownId {
                        id: id.into(),
                        max_id: self.vocab.max_id,
                    })
                }
            }
        }
        Ok(out)
    }

    /// The bytes of one token, if there is one with that id.
    pub fn token_bytes(&self, id: TokenId) -> Option<&[u8]> {
        self.vocab.get(id)
    }

    /// The ids of one pre-token's bytes, merged by the encoder's rule: no pre-tokenizing, no
    /// special tokens, no cache (continued training splits each distinct word once with this).
    pub fn piece_ids(&self, piece: &[u8]) -> Vec<TokenId> {
        let mut ids = Vec::with_capacity(piece.len());
        if !piece.is_empty() {
            self.merge_piece(piece, &mut ids);
        }
        ids
    }

    /// Appends the ids of `text` to `out`, using `cache`. If the pattern gives up on a match, the
    /// error's offset is that match's in `text` (the ids before it have been appended).
    fn encode_into(
        &self,
        text: &str,
        allowed: AllowedSpecial<'_>,
        cache: &mut PieceCache,
        out: &mut Vec<TokenId>,
    ) -> Result<(), PretokenizeError> {
        cache.reserve_for_text(text.len());
        self.split_specials_into(text, allowed, out, |part, _, out| {
            self.encode_ordinary_into(part, cache, out)
        })
    }

    /// The ids of `text` with BPE-dropout (see [`Dropout`]; `text_index`: the text's index in
    /// its batch, which seeds its draws with the seed): a pre-token's ids differ from one
    /// occurrence to the next, and only one whose draws drop none of its merges takes them from
    /// the cache (see `dropout_into`). A probability of 0 is [`Encoder::encode`] exactly.
    ///
    /// # Errors
    /// [`EncodeError::MatchFailed`] if the pattern fails on the text (see the crate's docs).
    pub fn encode_with_dropout(
        &self,
        text: &str,
        allowed: AllowedSpecial<'_>,
        dropout: Dropout,
        text_index: u64,
    ) -> Result<Vec<TokenId>, EncodeError> {
        if dropout.probability <= 0.0 {
            return self.encode(text, allowed);
        }
        let mut out = Vec::with_capacity(text.len() / 2 + 1);
        self.caches
            .with(|cache| {
                self.dropout_into(text, allowed, dropout, (text_index, 0), cache, &mut out)
            })
            .map_err(|error| EncodeError::MatchFailed(in_text(error, text)))?;
        Ok(out)
    }

    /// Appends the ids of `text` with BPE-dropout to `out`; `(text_index, start)`: the text's
    /// index in its batch and its offset in the stream or file it was cut from (each piece's
    /// draws are seeded by its offset there, so the ids of a text cut at safe places equal the
    /// whole text's). If the pattern gives up on a match, the error's offset is in `text`.
    ///
    /// A piece whose draws drop none of the merges its plain encoding makes is that encoding
    /// (one draw per merge, each keeping the merge the rule prefers: for the token rule and for
    /// merges in training order, the plain rule itself; see `PairRanks::well_ordered`), so it
    /// is taken from `cache` as plain encoding takes it; only the others are merged afresh.
    pub(crate) fn dropout_into(
        &self,
        text: &str,
        allowed: AllowedSpecial<'_>,
        dropout: Dropout,
        (text_index, start): (u64, u64),
        cache: &mut PieceCache,
        out: &mut Vec<TokenId>,
    ) -> Result<(), PretokenizeError> {
        let mut tokens: Vec<TokenId> = Vec::with_capacity(64);
        let mut scratch: Vec<TokenId> = Vec::with_capacity(64);
        let by_token = dropout::ByToken::new(self.token_ranks());
        let plain_is_the_walk = match self.rule {
            MergeRule::Pair => self.pairs.well_ordered,
            MergeRule::Token => true,
        };
        // (a cache that started as the warm table holds its pieces: no need to look there)
        let warm = self.warm.get().filter(|_| cache.seed.is_none());
        self.split_specials_into(text, allowed, out, |part, part_at, out| {
            let whole = part.as_bytes();
            self.pretokenizer.try_for_each_span(part, |at, end| {
                let bytes = &whole[at..end];
                if self.chars_first {
                    // (BPE-dropout walks bytes: refused for such encoders before it gets here)
                    out.extend(self.piece_ids(bytes));
                    return;
                }
                if let Some(dropped) = self.dropped_bytes.as_deref() {
                    if bytes.iter().any(|&byte| dropped[byte as usize]) {
                        // (its ids without dropout: see `with_dropped_bytes`)
                        out.extend(self.without_dropped_bytes(bytes, dropped));
                        return;
                    }
                }
                if let [byte] = bytes {
                    out.push(self.vocab.byte_ids[*byte as usize]);
                    return;
                }
                // (`at`: the piece's offset in `part`, the normalized text for an encoder that
                // normalizes)
                let offset = start + (part_at + at) as u64;
                let mut draws = dropout::Draws::new(dropout, text_index, offset);
                if plain_is_the_walk {
                    let before = out.len();
                    let key = cache::short_key_in(whole, at, bytes.len());
                    self.encode_piece(bytes, key, false, warm, cache, &mut scratch, out);
                    let made = out.len() - before;
                    // The draws of the walk that drops nothing: one per merge (the token rule
                    // takes a whole-token piece in one).
                    let merges = match self.rule {
                        MergeRule::Token if made == 1 => 1,
                        _ => bytes.len() - made,
                    };
                    if !draws.any_drop_in(merges) {
                        return;
                    }
                    out.truncate(before);
                }
                tokens.clear();
                tokens.extend(bytes.iter().map(|&b| self.vocab.byte_ids[b as usize]));
                match self.rule {
                    MergeRule::Pair => dropout::merge_pairs(&self.pairs, &mut tokens, &mut draws),
                    MergeRule::Token => {
                        dropout::merge_tokens(&by_token, bytes, &mut tokens, &mut draws)
                    }
                }
                out.extend_from_slice(&tokens);
            })
        })
    }

    /// [`Encoder::encode_with_dropout`] of each text (its index in `texts` seeding its draws),
    /// on `threads` threads (at least one), in order: the ids do not depend on `threads`.
    ///
    /// # Errors
    /// The first text, in the batch's order, that cannot be encoded.
    pub fn encode_batch_with_dropout(
        &self,
        texts: &[&str],
        threads: usize,
        allowed: AllowedSpecial<'_>,
        dropout: Dropout,
    ) -> Result<Vec<Vec<TokenId>>, BatchError> {
        let encode_one = |index: usize| {
            self.encode_with_dropout(texts[index], allowed, dropout, index as u64)
                .map_err(|error| BatchError { index, error })
        };
        let threads = threads.clamp(1, texts.len().max(1));
        if threads == 1 {
            return (0..texts.len()).map(encode_one).collect();
        }
        // Blocks of consecutive texts, about as many bytes each, one thread each; the first
        // failure in the batch's order.
        let total: usize = texts.iter().map(|text| text.len()).sum();
        let share = total / threads + 1;
        let mut blocks = Vec::with_capacity(threads);
        let (mut start, mut bytes) = (0, 0);
        for (i, text) in texts.iter().enumerate() {
            bytes += text.len();
            if bytes >= share && blocks.len() + 1 < threads {
                blocks.push(start..i + 1);
                (start, bytes) = (i + 1, 0);
            }
        }
        blocks.push(start..texts.len());
        let mut results: Vec<Result<Vec<Vec<TokenId>>, BatchError>> = Vec::new();
        std::thread::scope(|scope| {
            let handles: Vec<_> = blocks
                .into_iter()
                .map(|block| scope.spawn(move || block.map(encode_one).collect()))
                .collect();
            results = handles
                .into_iter()
                .map(|handle| {
                    handle
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect();
        });
        let mut all = Vec::with_capacity(texts.len());
        for block in results {
            all.extend(block?);
        }
        Ok(all)
    }

    /// Appends the ids of `text` to `out`: the special tokens `allowed` as their ids, the text
    /// between them by `ordinary(part, at, out)` (`at`: where the part starts in `text`), each
    /// such stretch normalized first by an encoder that normalizes (see
    /// [`Encoder::with_normalizer`]; `part` is then a stretch of the normalized text, and `at`
    /// where the stretch it came from starts). If the pattern gives up on a match, the error's
    /// offset is that match's in `text` (for an encoder that normalizes, where its stretch starts).
    fn split_specials_into(
        &self,
        text: &str,
        allowed: AllowedSpecial<'_>,
        out: &mut Vec<TokenId>,
        mut ordinary: impl FnMut(&str, usize, &mut Vec<TokenId>) -> Result<(), PretokenizeError>,
    ) -> Result<(), PretokenizeError> {
        // The text between special tokens borrows from `text`: the address difference is its
        // offset there.
        let mut between = |part: &str, out: &mut Vec<TokenId>| {
            let at = part.as_ptr() as usize - text.as_ptr() as usize;
            let result = match (&self.normalization, &self.prefix) {
                (None, None) => ordinary(part, at, out),
                (None, Some(prefix)) => ordinary(&prefix.apply(part, at == 0), at, out),
                (Some(normalization), _) => {
                    self.normalized_into(normalization, part, at, out, &mut ordinary)
                }
            };
            result.map_err(|error| error.shifted(at))
        };
        match allowed {
            AllowedSpecial::All if !self.specials.is_empty() => {
                for part in self.specials.split(text) {
                    match part {
                        Part::Text(part) => between(part, out)?,
                        Part::Special { index, .. } => out.push(self.special_ids[index]),
                    }
                }
                Ok(())
            }
            AllowedSpecial::All | AllowedSpecial::None => between(text, out),
            AllowedSpecial::Only(allowed) => {
                let subset = self.specials.subset(|token, _| allowed.contains(&token));
                if subset.is_empty() {
                    return between(text, out);
                }
                for part in subset.split(text) {
                    match part {
                        Part::Text(part) => between(part, out)?,
                        // (the part's text may hold the whitespace the token takes: by index)
                        Part::Special { index, .. } => {
                            out.push(self.special_id(&subset.tokens()[index]))
                        }
                    }
                }
                Ok(())
            }
        }
    }

    /// Appends the ids of `part` (text between special tokens, starting at `at` in the text) to
    /// `out`: normalized, the tokens found in the normalized text as their ids, the rest by
    /// `ordinary`. A failed match's offset is then `part`'s start (0), not a place in the
    /// normalized text, which is not the caller's.
    fn normalized_into(
        &self,
        normalization: &Normalization,
        part: &str,
        at: usize,
        out: &mut Vec<TokenId>,
        ordinary: &mut impl FnMut(&str, usize, &mut Vec<TokenId>) -> Result<(), PretokenizeError>,
    ) -> Result<(), PretokenizeError> {
        let normalized = normalization.normalizer.normalize(part);
        // (each stretch of the normalized text through the prefix, if any: "first" is the one
        // that starts the normalized text of the stretch that starts the text)
        let mut stretch = |piece: &str, out: &mut Vec<TokenId>| match &self.prefix {
            None => ordinary(piece, at, out),
            Some(prefix) => {
                let starts_text = at == 0 && piece.as_ptr() == normalized.as_ptr();
                ordinary(&prefix.apply(piece, starts_text), at, out)
            }
        };
        let result = if normalization.tokens.is_empty() {
            stretch(&normalized, out)
        } else {
            normalization
                .tokens
                .split(&normalized)
                .try_for_each(|piece| match piece {
                    Part::Text(piece) => stretch(piece, out),
                    Part::Special { index, .. } => {
                        out.push(normalization.ids[index]);
                        Ok(())
                    }
                })
        };
        result.map_err(|error| error.shifted_to_start())
    }

    fn special_id(&self, token: &str) -> TokenId {
        let index = self
            .specials
            .tokens()
            .iter()
            .position(|t| t == token)
            .expect("one of the special tokens");
        self.special_ids[index]
    }

    /// Appends the ids of `text`, which holds no special token, to `out` (see
    /// [`Encoder::encode_into`]; the known patterns' scanners never fail).
    fn encode_ordinary_into(
        &self,
        text: &str,
        cache: &mut PieceCache,
        out: &mut Vec<TokenId>,
    ) -> Result<(), PretokenizeError> {
        // (one look at the whole text first: the dropped bytes are rare, control characters or
        // bytes UTF-8 never holds, and most texts have none, so their pieces need no look, and
        // the scanner's loop no test for them: 3 instructions a piece of a warm pass)
        let bytes = text.as_bytes();
        match self
            .dropped_bytes
            .as_deref()
            .filter(|dropped| bytes.iter().any(|&byte| dropped[byte as usize]))
        {
            Some(dropped) => self.scan_into::<true>(text, dropped, cache, out),
            None => self.scan_into::<false>(text, &[false; 256], cache, out),
        }
    }

    /// [`Encoder::encode_ordinary_into`], for a text whose pieces may hold bytes of `dropped`
    /// (`DROPS`) or that holds none.
    #[inline(always)]
    fn scan_into<const DROPS: bool>(
        &self,
        text: &str,
        dropped: &[bool; 256],
        cache: &mut PieceCache,
        out: &mut Vec<TokenId>,
    ) -> Result<(), PretokenizeError> {
        // (a cache that started as the warm table holds its pieces: no need to look there)
        let warm = self.warm.get().filter(|_| cache.seed.is_none());
        // The scanner only collects pieces, a batch at a time; each batch is then looked up in
        // a loop of its own: all its cache slots are prefetched first, so that the waits for
        // memory overlap instead of following each other (they would otherwise be most of a
        // warm encode's time).
        let mut batch = cache.batch.take().unwrap_or_default();
        let mut batcher = Batcher::<DROPS> {
            encoder: self,
            text: text.as_bytes(),
            dropped,
            batch: &mut batch,
            batched: 0,
            warm,
            // (a cache keeps its shared table, or its lack of one, for the whole call)
            emit_batch: Encoder::batch_loop(warm.is_some(), cache.table.is_some()),
            cache,
            out,
        };
        let scanned = self.pretokenizer.try_spans_into(text, &mut batcher);
        // The pieces still batched (also after a failed match: those before it are encoded).
        batcher.emit();
        cache.batch = Some(batch);
        scanned
    }

    /// For a text holding dropped bytes: if the piece `text[start..end]` holds one, appends the
    /// ids of the `batched` pieces of `batch` before it, then the piece's own without those bytes,
    /// and says so (the batch is then empty); else does nothing. Out of the scanner's loop.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)] // (the encoding call's state, passed as it is)
    fn emit_dropped(
        &self,
        text: &[u8],
        (start, end): (usize, usize),
        dropped: &[bool; 256],
        batch: &mut Batch,
        batched: usize,
        warm: Option<&WarmCache>,
        cache: &mut PieceCache,
        out: &mut Vec<TokenId>,
    ) -> bool {
        let piece = &text[start..end];
        if !piece.iter().any(|&byte| dropped[byte as usize]) {
            return false;
        }
        // (in order: the pieces batched before it first)
        let emit_batch = Encoder::batch_loop(warm.is_some(), cache.table.is_some());
        emit_batch(self, text, batch, batched, warm, cache, out);
        out.extend(self.without_dropped_bytes(piece, dropped));
        true
    }

    /// The loop over a batch of pieces for a text encoded with a warm table or not (`warm`) and
    /// with a shared table or not (`shared`): see [`Encoder::emit_batch_with`].
    fn batch_loop(warm: bool, shared: bool) -> BatchLoop {
        match (warm, shared) {
            (false, false) => Encoder::emit_batch_with::<false, false>,
            (false, true) => Encoder::emit_batch_with::<false, true>,
            (true, false) => Encoder::emit_batch_with::<true, false>,
            (true, true) => Encoder::emit_batch_with::<true, true>,
        }
    }

    /// Appends the ids of the first `count` pieces of `batch` (spans of `text`) to `out`:
    /// their keys and hashes first, prefetching each piece's slots, then each piece's ids (see
    /// [`Encoder::emit_piece`]). `WARM` says whether there is a warm table (`warm` is then
    /// Some) and `SHARED` whether the cache has a shared table (`cache.table`): a loop made for
    /// each case leaves out the others' tests (3% of a warm pass's instructions, and 1.06x its
    /// time); the text's loop is chosen once, by [`Encoder::batch_loop`].
    #[inline(never)]
    fn emit_batch_with<const WARM: bool, const SHARED: bool>(
        &self,
        text: &[u8],
        batch: &mut Batch,
        count: usize,
        warm: Option<&WarmCache>,
        cache: &mut PieceCache,
        out: &mut Vec<TokenId>,
    ) {
        let warm = if WARM { warm } else { None };
        let spans = &batch.spans[..count];
        // (where each table's lookups start, read once for the batch: no table changes before
        // the lookups below)
        let warm_short = warm.map(|warm| warm.pieces.short_slots_at());
        let warm_medium = warm.map(|warm| warm.pieces.medium_slots_at());
        let short = match cache.table.as_deref() {
            Some(table) if SHARED => table.slots_at(),
            _ => cache.short_slots_at(),
        };
        let medium = cache.medium_slots_at();
        // (a piece starting before this has 16 bytes of text from its start, read as one load)
        let windows_end = text.len().saturating_sub(15);
        // The pieces that start before it: a batch's spans are in the text's order, so they
        // are the batch's first ones, all of them but near the text's end (tested once for the
        // batch, not for each piece).
        let windowed = match spans.last() {
            Some(&(last, _)) if last < windows_end => count,
            _ => spans.partition_point(|&(start, _)| start < windows_end),
        };
        let keyed = batch.words.iter_mut().zip(batch.hashes.iter_mut());
        for (index, ((words, hash), &(start, len))) in keyed.zip(spans).enumerate() {
            // (the hash is computed once, for the prefetch and for the lookup)
            if len.wrapping_sub(1) < cache::SHORT_BYTES && index < windowed {
                // Most pieces: short, with 16 bytes of text from their start (the others are
                // keyed out of the loop; inlined there, they made no difference).
                // SAFETY: the piece is one of the first `windowed`, which start before
                // `text.len() - 15`, so `start + 16 <= text.len()`.
                let window =
                    unsafe { text.as_ptr().add(start).cast::<[u8; 16]>().read_unaligned() };
                let key = mix::key_of_window(u128::from_le_bytes(window), len);
                words[0] = key;
                *hash = mix::mix(key);
                if let Some(warm_short) = warm_short {
                    warm_short.prefetch(*hash);
                }
                short.prefetch(*hash);
            } else {
                (*words, *hash) = Encoder::other_key(
                    text,
                    (start, len),
                    (warm_short, warm_medium),
                    (short, medium),
                );
            }
        }
        // (read once, and again only after a piece that may have changed the cache)
        let warm_pieces = warm.map(|warm| warm.pieces.short_slots());
        let (mut own, mut shared) = short_lookups::<SHARED>(cache);
        let mut index = 0;
        while index < count {
            if !WARM && !SHARED {
                // The run of short pieces from `index` found in this thread's cache (most of a
                // warm pass's pieces), in a loop of their own.
                index = own.emit_run(
                    &batch.words[..count],
                    &batch.spans[..count],
                    &batch.hashes[..count],
                    index,
                    out,
                );
                if index == count {
                    break;
                }
            }
            let (start, len) = spans[index];
            let (words, hash) = (batch.words[index], batch.hashes[index]);
            index += 1;
            if (1..=cache::SHORT_BYTES).contains(&len) && (WARM || SHARED) {
                // A short piece found in the warm table, or in the table the threads share or
                // this thread's cache.
                let found = warm_pieces
                    .as_ref()
                    .is_some_and(|warm| warm.emit(words[0], hash, out))
                    || match &shared {
                        Some(shared) if SHARED => shared.get_hashed(words[0], hash, out),
                        _ => own.emit(words[0], hash, out),
                    };
                if found {
                    continue;
                }
            }
            self.emit_piece(
                text,
                (start, len),
                words,
                warm,
                cache,
                &mut batch.merged,
                out,
            );
            (own, shared) = short_lookups::<SHARED>(cache);
        }
    }

    /// The key words and hash of a piece the batch's loop does not key itself (a short piece
    /// within 15 bytes of the text's end, a medium piece, or a longer one), its slots prefetched
    /// (the warm table's, if there is one, and the cache's). The hash is where
    /// [`cache::ShortSlots::emit_run`] reads a short slot, so a piece that is not short is given
    /// 0, a slot that all of them read and that stays in the CPU's cache, and a first word that
    /// no short slot holds: [`NOT_SHORT`] for a longer piece, its medium key's (see
    /// [`cache::medium_key`]) for a medium one, whose lookup hashes its words again
    /// ([`Encoder::emit_piece`]).
    #[inline(never)]
    fn other_key(
        text: &[u8],
        (start, len): (usize, usize),
        (warm_short, warm_medium): (Option<SlotsAt>, Option<SlotsAt>),
        (own_short, own_medium): (SlotsAt, SlotsAt),
    ) -> ([u128; 2], u64) {
        if let Some(key) = cache::short_key_in(text, start, len) {
            let hash = mix::mix(key);
            if let Some(warm_short) = warm_short {
                warm_short.prefetch(hash);
            }
            own_short.prefetch(hash);
            return ([key, 0], hash);
        }
        if let Some(words) = cache::medium_key_in(text, start, len) {
            let hash = cache::medium_hash(words);
            if let Some(warm_medium) = warm_medium {
                warm_medium.prefetch(hash);
            }
            own_medium.prefetch(hash);
            return (words, 0);
        }
        ([NOT_SHORT, NOT_SHORT], 0)
    }

    /// Appends the ids of one pre-token, `text[start..start + len]`, that the batch's loop did
    /// not find, to `out`, given its key words as that loop made them: a short piece's key is
    /// `words[0]`, a medium piece's both (see [`cache::short_key`], [`cache::medium_key`]); a
    /// longer piece has none. The loop has looked a short piece up already (in the warm table,
    /// and in the shared table or this thread's cache); a medium piece is looked up here. The
    /// rest go to [`Encoder::encode_piece`].
    ///
    /// A piece of one byte is looked up like the others (after its first time, it is in the
    /// cache, and a warm table holds all 256). Its id is the byte's, but the branches that took
    /// it apart (where the batch was prefetched and where each piece was emitted), on a length
    /// that text makes random (one piece in seven of English), were mispredicted about twice
    /// per such piece in cachegrind's simulation of a warm pass. Looked up, the pass's
    /// mispredictions fell by a third, for 6% more instructions, and it ran 1.08-1.12x faster:
    /// the slots of 256 pieces stay in the CPU's cache.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)] // (the encoder's state for one piece, passed as it is)
    fn emit_piece(
        &self,
        text: &[u8],
        (start, len): (usize, usize),
        words: [u128; 2],
        warm: Option<&WarmCache>,
        cache: &mut PieceCache,
        scratch: &mut Vec<TokenId>,
        out: &mut Vec<TokenId>,
    ) {
        let key = (1..=cache::SHORT_BYTES).contains(&len).then_some(words[0]);
        let medium = (cache::SHORT_BYTES < len && len <= cache::MEDIUM_BYTES).then_some(words);
        if let Some(medium) = medium {
            // (pieces of 16 to 31 bytes: most words of text that is not English, or not Latin;
            // the batch's hash of such a piece is not its medium key's, see `other_key`)
            let hash = cache::medium_hash(medium);
            if warm.is_some_and(|warm| warm.pieces.emit_medium(medium, hash, out))
                || cache.emit_medium(medium, hash, out)
            {
                return;
            }
        }
        // (the piece's bytes, only now: a piece found above needs none, nor their bounds check)
        let bytes = &text[start..start + len];
        self.encode_piece(bytes, key, true, warm, cache, scratch, out);
    }

    /// Appends the ids of one pre-token to `out`: from the warm table (`warm`: this encoder's,
    /// read once per text by the caller), from the cache, or merged and cached (a piece of
    /// one byte too: its merge is its byte's id). `looked_up`: the batch's loop has looked the
    /// piece up in this thread's cache if it is short or medium (see [`Encoder::emit_piece`]),
    /// and it was not there: it is not looked up there again (a third of the lookups of a cold
    /// pass, each a probe of a table mostly out of the CPU's caches).
    #[inline(never)] // (kept out of the scanner's loop, which the hot cases above stay in)
    #[allow(clippy::too_many_arguments)] // (the encoder's state for one piece, passed as it is)
    fn encode_piece(
        &self,
        bytes: &[u8],
        key: Option<u128>,
        looked_up: bool,
        warm: Option<&WarmCache>,
        cache: &mut PieceCache,
        scratch: &mut Vec<TokenId>,
        out: &mut Vec<TokenId>,
    ) {
        if let Some(warm) = warm {
            if let Some(ids) = warm.pieces.get(bytes, key) {
                append(out, ids);
                return;
            }
        }
        if let (Some(table), Some(short)) = (cache.table.as_deref(), key) {
            // Threads at work together: short pieces are shared without locks (and the
            // others, or those with more ids than a shared slot holds, are kept as below).
            if table.get(short, out) {
                return;
            }
            if let Some(ids) = cache.get(bytes, key) {
                append(out, ids);
                return;
            }
            self.merge_piece(bytes, scratch);
            if !cache.insert_shared(&self.table, short, scratch) {
                cache.insert(bytes, key, scratch);
            }
            append(out, scratch);
            return;
        }
        // (here a short piece is one the loop looked up in this thread's cache, as it has no
        // shared table, and a medium one was looked up there by `emit_piece`)
        let missing = looked_up && bytes.len() <= cache::MEDIUM_BYTES;
        if !missing {
            if let Some(ids) = cache.get(bytes, key) {
                append(out, ids);
                return;
            }
        }
        let cacheable = bytes.len() <= MAX_CACHED_PIECE;
        let from_shared = match &cache.shared {
            Some(shared) if cacheable => {
                let shared = shared.lock().unwrap_or_else(|e| e.into_inner());
                shared.get(bytes, key).map(|ids| {
                    scratch.clear();
                    scratch.extend_from_slice(ids);
                })
            }
            _ => None,
        };
        if from_shared.is_none() {
            self.merge_piece(bytes, scratch);
            if let Some(shared) = cache.shared.as_ref().filter(|_| cacheable) {
                shared
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(bytes, key, scratch);
            }
        }
        if cacheable {
            cache.insert(bytes, key, scratch);
        }
        append(out, scratch);
    }

    /// The token rule over this encoder's vocabulary.
    fn token_ranks(&self) -> bpe::TokenRanks<'_> {
        bpe::TokenRanks {
            vocab: &self.vocab,
            bytes: &self.byte_joins,
        }
    }

    /// The ids of one pre-token, by the encoder's rule, into `tokens`.
    fn merge_piece(&self, piece: &[u8], tokens: &mut Vec<TokenId>) {
        tokens.clear();
        if self.chars_first && self.rule == MergeRule::Pair {
            if let Ok(text) = std::str::from_utf8(piece) {
                // Each character a token of its own if the vocabulary has it, else its bytes
                // (SentencePiece's byte fallback); then the merges, by rank.
                let mut buffer = [0u8; 4];
                for c in text.chars() {
                    let bytes = c.encode_utf8(&mut buffer).as_bytes();
                    match self.vocab.id(bytes) {
                        Some(id) => tokens.push(id),
                        None => {
                            tokens.extend(bytes.iter().map(|&b| self.vocab.byte_ids[b as usize]))
                        }
                    }
                }
                self.pairs.merge_one_at_a_time(tokens);
                return;
            }
        }
        tokens.extend(piece.iter().map(|&b| self.vocab.byte_ids[b as usize]));
        match self.rule {
            MergeRule::Pair => self.pairs.merge(piece, tokens),
            MergeRule::Token => self.token_ranks().merge(piece, tokens),
        }
    }
}

/// Appends a piece's ids to `out`. Most pieces have one to four ids: copied one by one, they
/// cost less than the call to `memcpy` that `extend_from_slice` makes for a slice whose length
/// is not known.
#[inline(always)]
fn append(out: &mut Vec<TokenId>, ids: &[TokenId]) {
    if ids.len() <= 4 {
        for &id in ids {
            out.push(id);
        }
    } else {
        out.extend_from_slice(ids);
    }
}

/// The tables a batch's loop looks short pieces up in, borrowed from `cache`: its own (see
/// [`cache::ShortSlots`]) and, if `SHARED`, the table the threads share. Borrowed again after
/// anything that may change the cache.
#[inline(always)]
fn short_lookups<const SHARED: bool>(
    cache: &PieceCache,
) -> (cache::ShortSlots<'_>, Option<shared::SharedSlots<'_>>) {
    let shared = cache.table.as_deref().filter(|_| SHARED);
    (cache.short_slots(), shared.map(|table| table.lookups()))
}

/// [`Encoder::emit_batch_with`] for one case of tables (see [`Encoder::batch_loop`]).
type BatchLoop =
    fn(&Encoder, &[u8], &mut Batch, usize, Option<&WarmCache>, &mut PieceCache, &mut Vec<TokenId>);

/// How many pieces the encoder takes from the scanner, at least, before it looks them up (and so
/// about how many pieces ahead of its lookup a piece's cache slots are prefetched: up to 63 more
/// where the last window's pieces came at once, see [`Batcher`]). 96 rather than 64:
/// warm English 1.04-1.055x (GPT-2, o200k_base), text in eleven scripts 1.01-1.03x, cold 1.01x
/// (`benchmarks/ab_engine.py`, both orders, on an AMD EPYC); 128 had cost text in eleven scripts
/// 2% on another VM, 32 cost everything 6%.
const BATCH: usize = 96;

/// A batch of pieces of one text (see [`Encoder::emit_batch_with`]): their spans in the text,
/// their keys and hashes (made once, for the prefetch and for the lookup), and room for a
/// piece's ids while it is merged. Kept by the cache lent to an encoding call and used again by
/// its next text: made anew for every text, its 3.5 KB (at 64 pieces) were zeroed for each (4%
/// of a warm pass's instructions over wiki_en_57M's documents, more for a batch of short lines).
pub(crate) struct Batch {
    spans: [(usize, usize); BATCH_ROOM],
    words: [[u128; 2]; BATCH_ROOM],
    hashes: [u64; BATCH_ROOM],
    merged: Vec<TokenId>,
}

/// The most pieces a batch holds: [`BATCH`], less one, then the 64 pieces at most of one window
/// of the scanner's (see [`Batcher`]).
const BATCH_ROOM: usize = BATCH + 64;

/// How many spans [`Batcher`]'s `run` writes at a time (a divisor of 64; see there).
const SPANS_AT_ONCE: usize = 4;
const _: () = assert!(64 % SPANS_AT_ONCE == 0);

impl Default for Batch {
    fn default() -> Batch {
        Batch {
            spans: [(0, 0); BATCH_ROOM],
            words: [[0; 2]; BATCH_ROOM],
            hashes: [0; BATCH_ROOM],
            merged: Vec::with_capacity(64),
        }
    }
}

/// What the scanner gives the pieces of one text to (see [`Encoder::scan_into`]): it collects
/// their spans in `batch` and, once it holds [`BATCH`] or more, has them looked up and their ids
/// appended to `out`. `DROPS`: the text may hold bytes of `dropped`, which no piece keeps.
struct Batcher<'e, 'c, const DROPS: bool> {
    encoder: &'e Encoder,
    text: &'e [u8],
    dropped: &'e [bool; 256],
    batch: &'c mut Batch,
    /// How many pieces `batch` holds (fewer than [`BATCH`] between two calls).
    batched: usize,
    warm: Option<&'e WarmCache>,
    emit_batch: BatchLoop,
    cache: &'c mut PieceCache,
    out: &'c mut Vec<TokenId>,
}

impl<const DROPS: bool> Batcher<'_, '_, DROPS> {
    /// Appends the ids of the pieces batched, which are then none.
    #[inline(never)]
    fn emit(&mut self) {
        let batched = std::mem::take(&mut self.batched);
        (self.emit_batch)(
            self.encoder,
            self.text,
            self.batch,
            batched,
            self.warm,
            self.cache,
            self.out,
        );
    }
}

impl<const DROPS: bool> Spans for &mut Batcher<'_, '_, DROPS> {
    /// A piece given on its own: by the scanner's piece-at-a-time way, or by a pre-tokenizer
    /// without a scanner. Inlined into the scanner's loop (a call per piece, saving and
    /// restoring six registers, had cost 30 instructions a piece, a fifth of a warm pass's);
    /// what it seldom does is out of line.
    #[inline(always)]
    fn span(&mut self, start: usize, end: usize) {
        if DROPS
            && self.encoder.emit_dropped(
                self.text,
                (start, end),
                self.dropped,
                self.batch,
                self.batched,
                self.warm,
                self.cache,
                self.out,
            )
        {
            self.batched = 0;
            return;
        }
        // SAFETY: `batched < BATCH` between calls, and BATCH < BATCH_ROOM.
        unsafe { *self.batch.spans.get_unchecked_mut(self.batched) = (start, end - start) };
        self.batched += 1;
        if self.batched == BATCH {
            self.emit();
        }
    }

    /// The pieces of a window of 64 bytes (most of them), in a loop whose count stays in a
    /// register; looked up once the batch holds [`BATCH`] or more.
    #[inline(always)]
    fn run(&mut self, start: usize, base: usize, ends: u64) -> usize {
        if DROPS {
            return each_end(start, base, ends, |i, end| self.span(i, end));
        }
        // The spans are written SPANS_AT_ONCE at a time, whether there are that many or not,
        // until all are: the loop tests for its end once per four pieces, not for each, and
        // the spans past the last (ending at `base + 64`, as `trailing_zeros` of 0 is 64) lie
        // in the batch's room past its count, written over by the next run. One at a time,
        // the loop took 12 instructions a piece and its exit, after a number of pieces the CPU
        // could not foresee, was mispredicted in most windows. (Warm, 4 MB, against one at a
        // time: State of the Union with GPT-2 1.070x, 46 languages 1.032x with cl100k_base;
        // eight at a time gave 0.95x of four, sixteen 0.98x of eight, two 0.98x of four.)
        let batched = self.batched;
        let pieces = ends.count_ones() as usize;
        let spans = &mut self.batch.spans;
        let (mut at, mut i, mut rest) = (batched, start, ends);
        loop {
            for _ in 0..SPANS_AT_ONCE {
                // (`trailing_zeros` of 0 is 64)
                let end = base + rest.trailing_zeros() as usize;
                // SAFETY: `batched < BATCH`, and `at` stays below `batched` plus the least
                // positive multiple of SPANS_AT_ONCE at or above `pieces` (at most 64, itself
                // a multiple), so below BATCH + 64 = BATCH_ROOM.
                unsafe { *spans.get_unchecked_mut(at) = (i, end.wrapping_sub(i)) };
                i = end;
                rest &= rest.wrapping_sub(1);
                at += 1;
            }
            if at >= batched + pieces {
                break;
            }
        }
        self.batched = batched + pieces;
        if self.batched >= BATCH {
            self.emit();
        }
        // (where the run's last piece ends)
        match ends {
            0 => start,
            _ => base + 63 - ends.leading_zeros() as usize,
        }
    }
}

/// A block of consecutive texts encoded by [`Encoder::encode_batch_overlapped`]'s workers, or
/// the text among them that could not be encoded (opaque: what `wait`'s `next` returns, for
/// `wait` to return in turn).
pub struct EncodedBlock(Result<IdsBlock, BatchError>);

/// The ids of a block of consecutive texts (see [`Encoder::encode_batch_overlapped`]).
pub struct IdsBlock {
    /// The index of the block's first text.
    pub first: usize,
    /// Every text's ids, one after the other.
    ids: Vec<TokenId>,
    /// Where each text's ids end in `ids`.
    ends: Vec<usize>,
}

impl IdsBlock {
    /// Each text's ids, in order.
    pub fn texts(&self) -> impl Iterator<Item = &[TokenId]> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .map(|(start, &end)| &self.ids[start..end])
    }
}

/// `error`, from [`Encoder::encode_into`] on `text`, naming that text by its length (as the
/// pre-tokenizer names a text).
fn in_text(error: PretokenizeError, text: &str) -> PretokenizeError {
    error.named(format!("a text of {} bytes", text.len()))
}

/// Consecutive texts grouped into blocks of about `BLOCK_BYTES` of text (never fewer than 8 per
/// thread when there are enough texts): few enough that handing blocks over costs nothing, small
/// enough that the threads end together.
fn batch_blocks(texts: &[&str], threads: usize) -> Vec<std::ops::Range<usize>> {
    const BLOCK_BYTES: usize = 1 << 16;
    let total: usize = texts.iter().map(|text| text.len()).sum();
    let target = BLOCK_BYTES.min(total / (8 * threads)).max(1);
    let mut blocks = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, text) in texts.iter().enumerate() {
        bytes += text.len();
        if bytes >= target {
            blocks.push(start..i + 1);
            (start, bytes) = (i + 1, 0);
        }
    }
    if start < texts.len() {
        blocks.push(start..texts.len());
    }
    blocks
}

/// The pair rule's table from merges given as bytes, with bpestore's messages for a merge that
/// names a token the vocabulary lacks.
fn pair_ranks(vocab: &Vocab, merges: &[(&[u8], &[u8])]) -> Result<PairRanks, EncodeError> {
    let ids = merge_ids(|token| vocab.id(token), merges)?;
    Ok(PairRanks::new(ids.into_iter(), &vocab.byte_ids))
}

/// Each merge's left, right and joined ids (`id_of` gives a token's), in rank order; an error
/// for the first merge that names a token the vocabulary lacks, or repeats an earlier merge.
fn merge_ids(
    id_of: impl Fn(&[u8]) -> Option<TokenId>,
    merges: &[(&[u8], &[u8])],
) -> Result<Vec<(TokenId, TokenId, TokenId)>, EncodeError> {
    let mut ids = Vec::with_capacity(merges.len());
    let mut joined = Vec::with_capacity(64);
    for (rank, (left, right)) in merges.iter().enumerate() {
        joined.clear();
        joined.extend_from_slice(left);
        joined.extend_from_slice(right);
        match (id_of(left), id_of(right), id_of(&joined)) {
            (Some(l), Some(r), Some(m)) => ids.push((l, r, m)),
            (l, r, _) => {
                let missing = if l.is_none() {
                    left
                } else if r.is_none() {
                    right
                } else {
                    joined.as_slice()
                };
                return Err(EncodeError::InvalidVocab(format!(
                    "merge {rank} ({}, {}): {} is not in the vocab",
                    py_bytes_repr(left),
                    py_bytes_repr(right),
                    py_bytes_repr(missing)
                )));
            }
        }
    }
    // Each merge once (after every merge's tokens are known to be in the vocab, as the model
    // checks them): a repeated one could never apply at its second rank.
    let mut first_rank: FxHashMap<(TokenId, TokenId), usize> =
        FxHashMap::with_capacity_and_hasher(ids.len(), Default::default());
    for (rank, &(l, r, _)) in ids.iter().enumerate() {
        if let Some(&first) = first_rank.get(&(l, r)) {
            let (left, right) = merges[rank];
            return Err(EncodeError::InvalidVocab(format!(
                "merge {rank} ({}, {}) repeats merge {first}; each merge may be listed once",
                py_bytes_repr(left),
                py_bytes_repr(right)
            )));
        }
        first_rank.insert((l, r), rank);
    }
    Ok(ids)
}

/// Checks that `vocab` (ids and tokens, any order) and, with `check_merges`, `merges` (in rank
/// order; the pair rule's) make a byte-level BPE model: no token under two ids, no id twice,
/// all 256 single bytes; every merge's two tokens and their concatenation in the vocab, and no
/// merge twice. The rules an [`Encoder`] is built by, for a model that is not encoded yet
/// (Python's `BPEModel`); the error names the first problem, as building the encoder would.
pub fn check_model(
    vocab: &[(TokenId, &[u8])],
    merges: &[(&[u8], &[u8])],
    check_merges: bool,
) -> Result<(), EncodeError> {
    // The rules alone, on borrowed bytes: none of an encoder's tables is built (for the token
    // rule a tenth of the time for a 200k vocab; for GPT-2's merges, 15 ms rather than 18).
    if check_merges {
        vocab::check_arena_size(vocab.iter().map(|&(_, token)| token))?;
    }
    let mut vocab = vocab.to_vec();
    let mut seen: FxHashMap<&[u8], TokenId> =
        FxHashMap::with_capacity_and_hasher(vocab.len(), Default::default());
    vocab::check_tokens(&mut vocab, |token, id| seen.insert(token, id))?;
    if check_merges {
        merge_ids(|token| seen.get(token).copied(), merges)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
