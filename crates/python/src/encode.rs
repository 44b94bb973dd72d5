//! The encode stage's Python bindings: `Encoder` and its `StreamEncoder`.
//!
//! Long work runs with the GIL released; errors become bpestore's exception types
//! (`ValueError`, `bpestore.errors.CorpusDecodeError`, `OSError`) with the Python code's messages,
//! and a custom pattern that fails on the text (it gives up on a match at the regex engine's
//! backtracking limit, or no match covers some of the text) is one
//! `bpestore.errors.PatternError` naming the byte offset (in the text, the stream or the file).

use crate::errors::{corpus_decode_error, os_error, pattern_error, repr, type_name};
use crate::model::{ModelObjects, SharedBytes};
use crate::store;
use crate::text::Utf8Text;
use bpestore_encode::ranks::TiktokenError;
use bpestore_encode::{
    AllowedSpecial, BatchError, Dropout, EncodeError, Encoder, FileError, MergeRule, Normalizer,
    NormalizerStep, NpyWriter, OverlappedError, Prefix, PrefixWhen, StreamState, TokenId,
    DEFAULT_CACHE_ENTRIES, DEFAULT_CHUNK_BYTES, DEFAULT_STREAM_BLOCK, PARTIAL_HEADER_START,
};
use bpestore_pretokenize::{Behavior, Matcher, Pipeline, Stage, TokenOptions, GPT2_PATTERN};
use pyo3::exceptions::{PyKeyboardInterrupt, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBool, PyBytes, PyDict, PyInt, PyIterator, PyList, PyMemoryView, PyString};
use std::cell::UnsafeCell;
use std::sync::{Arc, OnceLock};

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<PyEncoder>()?;
    module.add_class::<PyStreamEncoder>()?;
    module.add_class::<PyNpyWriter>()?;
    module.add_class::<IdBuffer>()?;
    module.add_function(wrap_pyfunction!(check_model, module)?)?;
    module.add_function(wrap_pyfunction!(token_ids, module)?)?;
    module.add_function(wrap_pyfunction!(pair_merges_from_ranks, module)?)?;
    module.add_function(wrap_pyfunction!(read_tiktoken, module)?)?;
    // The first bytes of a `.npy` still being written (or left by a writer that was stopped).
    module.add(
        "PARTIAL_NPY_MARK",
        pyo3::types::PyBytes::new(module.py(), PARTIAL_HEADER_START),
    )?;
    module.add_class::<PyIdIterator>()?;
    module.add_function(wrap_pyfunction!(normalize, module)?)?;
    module.add_function(wrap_pyfunction!(pipeline_spans, module)?)?;
    // The distinct pre-tokens each encoding thread's cache remembers by default.
    module.add("DEFAULT_CACHE_ENTRIES", DEFAULT_CACHE_ENTRIES)?;
    Ok(())
}

/// A normalizer from its steps as Python gives them: `(kind, a, b)` with kind one of "NFC",
/// "NFD", "NFKC", "NFKD", "Lowercase" (a, b unused), "Replace" (a by b), "Prepend" (a) and
/// "Strip" (a, b: "1" to strip on the left, on the right).
fn normalizer_steps(steps: Vec<(String, String, String)>) -> PyResult<Normalizer> {
    let mut made = Vec::with_capacity(steps.len());
    for (kind, a, b) in steps {
        made.push(match kind.as_str() {
            "NFC" => NormalizerStep::Nfc,
            "NFD" => NormalizerStep::Nfd,
            "NFKC" => NormalizerStep::Nfkc,
            "NFKD" => NormalizerStep::Nfkd,
            "Lowercase" => NormalizerStep::Lowercase,
            "Replace" if !a.is_empty() => NormalizerStep::Replace {
                pattern: a,
                content: b,
            },
            "Replace" => return Err(PyValueError::new_err("Replace needs a non-empty string")),
            "Prepend" => NormalizerStep::Prepend(a),
            "Strip" => NormalizerStep::Strip {
                left: a == "1",
                right: b == "1",
            },
            other => {
                return Err(PyValueError::new_err(format!(
                    "no normalizer step {other:?} (NFC, NFD, NFKC, NFKD, Lowercase, Replace, Prepend, Strip)"
                )))
            }
        });
    }
    Ok(Normalizer::new(made))
}

/// A pre-tokenizer pipeline from its stages as Python gives them: `(kind, regex, behavior,
/// invert)` with kind "Split" (by `regex`), "Numeric", "Punctuation", "Whitespace" (by the
/// characters they name), each with its behavior ("Removed", "Isolated", "MergedWithPrevious",
/// "MergedWithNext", "Contiguous") and invert, or "ByteLevel" (regex "gpt2": GPT-2's regex first).
fn pipeline_of(
    stages: Vec<(String, String, String, bool)>,
) -> PyResult<(Option<Prefix>, Pipeline)> {
    let mut stages = stages.into_iter().peekable();
    // A first stage ("Prefix", text, when, replaces spaces) is what the encoder writes into each
    // stretch before the others make its pieces (`Metaspace`, `ByteLevel` with a prefix space).
    let prefix = match stages.next_if(|(kind, ..)| kind == "Prefix") {
        None => None,
        Some((_, text, when, replaces_spaces)) => Some(Prefix {
            text,
            when: match when.as_str() {
                "always" => PrefixWhen::Always,
                "first" => PrefixWhen::First,
                "never" => PrefixWhen::Never,
                other => {
                    return Err(PyValueError::new_err(format!(
                        "no prefix scheme {other:?} (always, first, never)"
                    )))
                }
            },
            replaces_spaces,
        }),
    };
    let mut made = Vec::new();
    for (kind, regex, behavior, invert) in stages {
        if kind == "ByteLevel" {
            made.push(Stage::ByteLevel {
                use_regex: regex == "gpt2",
            });
            continue;
        }
        let matcher = match kind.as_str() {
            "Split" => Matcher::Regex(
                fancy_regex::RegexBuilder::new(&regex)
                    .backtrack_limit(100_000_000)
                    .build()
                    .map_err(|error| PyValueError::new_err(format!("Split regex {regex:?}: {error}")))?,
            ),
            "Numeric" => Matcher::Numeric,
            "Punctuation" => Matcher::Punctuation,
            "Whitespace" => Matcher::Whitespace,
            other => {
                return Err(PyValueError::new_err(format!(
                    "no pre-tokenizer stage {other:?} (Split, Numeric, Punctuation, Whitespace, ByteLevel; Prefix first)"
                )))
            }
        };
        let behavior = match behavior.as_str() {
            "Removed" => Behavior::Removed,
            "Isolated" => Behavior::Isolated,
            "MergedWithPrevious" => Behavior::MergedWithPrevious,
            "MergedWithNext" => Behavior::MergedWithNext,
            "Contiguous" => Behavior::Contiguous,
            other => {
                return Err(PyValueError::new_err(format!(
                    "no split behavior {other:?}"
                )))
            }
        };
        made.push(Stage::Split {
            matcher,
            behavior,
            invert,
        });
    }
    Ok((prefix, Pipeline::new(made)))
}

/// Whether the pipeline's stages (after a prefix) are `ByteLevel` with GPT-2's regex alone: the
/// pieces GPT-2's pattern makes, which its scanner finds far faster than the pipeline's regex.
fn is_byte_level_alone(stages: &[(String, String, String, bool)]) -> bool {
    let rest: Vec<_> = stages
        .iter()
        .filter(|(kind, ..)| kind != "Prefix")
        .collect();
    matches!(rest.as_slice(), [(kind, regex, ..)] if kind == "ByteLevel" && regex == "gpt2")
}

/// The text as the pipeline of `stages` (see `pipeline_of`) writes it (its prefix, as for a text
/// that starts the input), and the byte spans of the pieces it makes of that.
#[pyfunction]
fn pipeline_spans(
    py: Python<'_>,
    stages: Vec<(String, String, String, bool)>,
    text: Utf8Text,
) -> PyResult<(String, Vec<(usize, usize)>)> {
    let (prefix, pipeline) = pipeline_of(stages)?;
    let written = match &prefix {
        Some(prefix) => prefix.apply(&text, true).into_owned(),
        None => text.to_string(),
    };
    let mut spans = Vec::new();
    py.detach(|| pipeline.try_for_each_span(&written, |start, end| spans.push((start, end))))
        .map_err(|error| PyValueError::new_err(error.to_string()))?;
    Ok((written, spans))
}

/// `text` normalized by the normalizer of `steps` (see `Encoder`'s `normalizer`), as an encoder
/// normalizes the text between special tokens.
#[pyfunction]
fn normalize(
    py: Python<'_>,
    steps: Vec<(String, String, String)>,
    text: Utf8Text,
) -> PyResult<String> {
    let normalizer = normalizer_steps(steps)?;
    Ok(py.detach(|| normalizer.normalize(&text).into_owned()))
}

fn value_error(error: EncodeError) -> PyErr {
    PyValueError::new_err(error.to_string())
}

/// An error from encoding: `PatternError` for a pattern that failed on the text, its message
/// after `prefix` (which names the text of a batch); `ValueError` otherwise.
fn encode_error(py: Python<'_>, prefix: &str, error: EncodeError) -> PyErr {
    match error {
        EncodeError::MatchFailed(_) => pattern_error(py, format!("{prefix}{error}")),
        other => value_error(other),
    }
}

fn batch_error(py: Python<'_>, error: BatchError) -> PyErr {
    encode_error(py, &format!("text {}: ", error.index), error.error)
}

/// ValueError, naming the first problem, unless `vocab` (`{id: token}`) and, with
/// `check_merges`, `merges` (in rank order) make a byte-level BPE model: the rules an `Encoder`
/// is built by (`bpestore_encode::check_model`), for `BPEModel` to check a model it is given.
#[pyfunction]
#[pyo3(signature = (vocab, merges, check_merges = true))]
fn check_model(
    vocab: &Bound<'_, PyDict>,
    merges: &Bound<'_, PyAny>,
    check_merges: bool,
) -> PyResult<()> {
    let model = ModelObjects::new(vocab, check_merges.then_some(merges))?;
    let (vocab, merges) = (model.vocab(), model.merges());
    bpestore_encode::check_model(&vocab, &merges, check_merges).map_err(value_error)
}

/// `{token: id}` for each of `tokens` (bytes) that `vocab` (`{id: token}`) holds, with the id of
/// its first entry in the dict's order: how `BPEModel` finds its special and added tokens' ids.
/// One pass over the vocab, a token's bytes compared only where its length is one of theirs:
/// a search in Python, one pass per token, cost 13 ms of loading cl100k_base.
#[pyfunction]
fn token_ids<'py>(
    py: Python<'py>,
    vocab: &Bound<'py, PyDict>,
    tokens: Vec<PyBackedBytes>,
) -> PyResult<Bound<'py, PyDict>> {
    let found = PyDict::new(py);
    let mut wanted: rustc_hash::FxHashMap<&[u8], usize> = tokens
        .iter()
        .enumerate()
        .map(|(i, token)| (token.as_ref(), i))
        .collect();
    let mut lengths = [false; 256]; // (lengths of 256 or more: looked up whatever their length)
    for token in &tokens {
        lengths[token.len().min(255)] = true;
    }
    for (id, token) in vocab.iter() {
        if wanted.is_empty() {
            break;
        }
        let Ok(token) = token.cast::<PyBytes>() else {
            continue; // (not bytes: equal to none of them)
        };
        let bytes = token.as_bytes();
        if !lengths[bytes.len().min(255)] {
            continue;
        }
        if let Some(i) = wanted.remove(bytes) {
            found.set_item(PyBytes::new(py, &tokens[i]), id)?;
        }
    }
    Ok(found)
}

/// A merges list from token ranks (a tiktoken vocabulary: `{token: rank}`): for each multi-byte
/// token, in rank order, tiktoken's rule on its bytes with only the tokens ranked below it; two
/// parts at the end are its merge. Returns `(merges, unreachable)`: the merges in rank order
/// (each part a bytes object) and the tokens no pair merge reaches. `on_tokens(n)`: told of each
/// `n` more tokens done. ValueError for a rank that is not a u32.
#[pyfunction]
#[pyo3(signature = (ranks, on_tokens = None))]
fn pair_merges_from_ranks<'py>(
    py: Python<'py>,
    ranks: &Bound<'py, PyDict>,
    on_tokens: Option<&Bound<'py, PyAny>>,
) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>)> {
    let mut objects: Vec<(Bound<'py, PyBytes>, TokenId)> = Vec::with_capacity(ranks.len());
    for (token, rank) in ranks.iter() {
        let rank: TokenId = rank.extract().map_err(|_| {
            PyValueError::new_err(format!(
                "ranks must be integers from 0 to 2**32-1, got {}",
                repr(&rank)
            ))
        })?;
        objects.push((token.cast_into::<PyBytes>()?, rank));
    }
    let tokens: Vec<(&[u8], TokenId)> = objects
        .iter()
        .map(|(token, rank)| (token.as_bytes(), *rank))
        .collect();
    let mut failed: Option<PyErr> = None;
    let found = bpestore_encode::ranks::pair_merges_from_ranks(&tokens, &mut |count| {
        if let (Some(callback), None) = (on_tokens, &failed) {
            if let Err(error) = callback.call1((count,)) {
                failed = Some(error);
            }
        }
    });
    if let Some(error) = failed {
        return Err(error);
    }
    // The parts that are tokens themselves share the vocabulary's bytes objects.
    let mut shared = SharedBytes::with_capacity(py, objects.len());
    for (object, _) in &objects {
        shared.insert(object.as_bytes(), object.clone());
    }
    let merges = shared.merge_list(found.merges.iter().map(|&(index, split)| {
        let token = tokens[index].0;
        (&token[..split], &token[split..])
    }))?;
    let unreachable: Vec<Bound<'py, PyBytes>> = found
        .unreachable
        .iter()
        .map(|&index| objects[index].0.clone())
        .collect();
    Ok((merges, PyList::new(py, unreachable)?))
}

/// `{rank: token}` from a `.tiktoken` file's contents (`data`, not gzip'd), in the file's order
/// (`bpestore_encode::ranks::parse_tiktoken`'s rules), a vocabulary `check_model` accepts (all
/// 256 single bytes). ValueError for the first line that breaks a rule, its message naming
/// `source` and the line (`"SOURCE, line 3: negative rank -1"`), or for a vocabulary that
/// breaks one (`"SOURCE: the vocab lacks ..."`).
#[pyfunction]
fn read_tiktoken<'py>(py: Python<'py>, data: &[u8], source: &str) -> PyResult<Bound<'py, PyDict>> {
    let ranks = bpestore_encode::ranks::parse_tiktoken(data).map_err(|error| {
        let separator = if matches!(error, TiktokenError::NoTokens) {
            ":"
        } else {
            ","
        };
        PyValueError::new_err(format!("{source}{separator} {error}"))
    })?;
    // (No id and no token twice: the file's rules. The last of check_model's is this one.)
    bpestore_encode::check_single_bytes(ranks.iter().map(|(token, _)| token))
        .map_err(|error| PyValueError::new_err(format!("{source}: {error}")))?;
    let vocab = PyDict::new(py);
    for (token, rank) in ranks.iter() {
        vocab.set_item(rank, PyBytes::new(py, token))?;
    }
    Ok(vocab)
}

/// The engine's rule for dropout's arguments: a probability in [0, 1) (1 would merge nothing, and
/// a text of bytes is no regularisation) and a seed that is an int in [0, 2**64).
fn checked_dropout(probability: f64, seed: Option<&Bound<'_, PyAny>>) -> PyResult<Dropout> {
    if !(0.0..1.0).contains(&probability) {
        return Err(PyValueError::new_err(format!(
            "dropout must be a probability in [0, 1), got {probability}"
        )));
    }
    let Some(seed) = seed else {
        return Ok(Dropout {
            probability,
            seed: 0,
        });
    };
    if seed.is_instance_of::<PyBool>() || !seed.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!(
            "seed must be an int, not {} ({})",
            type_name(seed),
            repr(seed)
        )));
    }
    let seed: u64 = seed.extract().map_err(|_| {
        PyValueError::new_err(format!(
            "seed must be an int in [0, 2**64), got {}",
            repr(seed)
        ))
    })?;
    Ok(Dropout { probability, seed })
}

/// A batch's texts (kept as Python's strings, borrowed) and its thread count (default: the
/// CPUs; ValueError for 0).
fn batch_of(
    texts: &Bound<'_, PyAny>,
    num_threads: Option<usize>,
) -> PyResult<(Vec<Utf8Text>, usize)> {
    let texts: Vec<Utf8Text> = texts
        .try_iter()?
        .map(|t| t?.extract())
        .collect::<PyResult<_>>()?;
    let threads = num_threads.unwrap_or_else(default_threads);
    if threads == 0 {
        return Err(PyValueError::new_err("num_threads must be at least 1"));
    }
    Ok((texts, threads))
}

/// `dropout` and `seed` given as keywords that may be left out: None without a probability (the
/// seed then defaults to 0), else [`checked_dropout`]'s.
fn optional_dropout(
    dropout: Option<f64>,
    seed: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<Dropout>> {
    dropout
        .map(|probability| checked_dropout(probability, seed))
        .transpose()
}

fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Which special tokens to recognise: `None` or `"all"` (all of them), or a collection of them
/// (empty: none).
enum Allowed {
    All,
    Only(Vec<String>),
}

impl Allowed {
    fn from_py(allowed: Option<&Bound<'_, PyAny>>) -> PyResult<Allowed> {
        let Some(allowed) = allowed else {
            return Ok(Allowed::All);
        };
        if allowed.is_none() {
            return Ok(Allowed::All);
        }
        if let Ok(text) = allowed.cast::<PyString>() {
            if text.to_str()? == "all" {
                return Ok(Allowed::All);
            }
            return Err(PyValueError::new_err(format!(
                "allowed_special must be 'all' or a collection of special tokens, not {}",
                allowed.repr()?
            )));
        }
        let mut tokens = Vec::new();
        for token in allowed.try_iter()? {
            tokens.push(token?.extract::<String>()?);
        }
        Ok(Allowed::Only(tokens))
    }

    fn with<R>(&self, f: impl FnOnce(AllowedSpecial<'_>) -> R) -> R {
        match self {
            Allowed::All => f(AllowedSpecial::All),
            Allowed::Only(tokens) if tokens.is_empty() => f(AllowedSpecial::None),
            Allowed::Only(tokens) => {
                let refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
                f(AllowedSpecial::Only(&refs))
            }
        }
    }
}

/// A byte-level BPE encoder (Rust): ids from text and bytes from ids.
///
/// Thread-safe: encoding releases the GIL, and `encode_batch` / `encode_file_to_npy` use threads.
#[pyclass(frozen, module = "bpestore._engine", name = "Encoder")]
pub struct PyEncoder {
    inner: Arc<Encoder>,
    ints: Arc<IdInts>,
}

#[pymethods]
impl PyEncoder {
    /// `vocab`: id -> bytes (all 256 single bytes, no token twice; without the special tokens
    /// that have ids of their own); `merges` in rank order; `special_tokens`: token -> id;
    /// `merge_rule`: "pair" or "token". `normalizer`: steps `(kind, a, b)` run on the text
    /// between special tokens (see `normalize`); `normalized_tokens`: token -> id, tokens found in
    /// the normalized text (not among `special_tokens`); `token_options`: (token, "lstrip,rstrip,single_word"
    /// or some of them), how those tokens take their surroundings. `extra_ids`: id -> bytes, ids
    /// beside the vocab, decoded and never merged to (a special or normalized token's own id
    /// when the vocab gives its bytes another id, as Hugging Face's files may).
    #[new]
    #[pyo3(signature = (vocab, merges, special_tokens, pattern, merge_rule = "pair", cache_entries = DEFAULT_CACHE_ENTRIES, normalizer = None, normalized_tokens = None, token_options = None, pre_tokenizer = None, dropped_bytes = None, chars_first = false, extra_ids = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        vocab: &Bound<'_, PyDict>,
        merges: &Bound<'_, PyAny>,
        special_tokens: &Bound<'_, PyDict>,
        pattern: &str,
        merge_rule: &str,
        cache_entries: usize,
        normalizer: Option<Vec<(String, String, String)>>,
        normalized_tokens: Option<&Bound<'_, PyDict>>,
        token_options: Option<Vec<(String, String)>>,
        pre_tokenizer: Option<Vec<(String, String, String, bool)>>,
        dropped_bytes: Option<Vec<u8>>,
        chars_first: bool,
        extra_ids: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyEncoder> {
        let rule = match merge_rule {
            "pair" => MergeRule::Pair,
            "token" => MergeRule::Token,
            other => {
                return Err(PyValueError::new_err(format!(
                    "merge_rule must be 'pair' or 'token', not {}",
                    PyString::new(py, other).repr()?
                )))
            }
        };
        // `merges` may be a store's packed copy of the model (bytes): its merges are read there,
        // borrowed, with no Python object made for each (a stored tokenizer's model makes its
        // list only when asked for it); the vocab is still the dict's, which the model holds.
        let packed = match merges.cast::<PyBytes>() {
            Ok(data) => Some(store::parse(data.as_bytes())?),
            Err(_) => None,
        };
        // The bytes objects are kept (one reference each) and borrowed, not copied.
        let model = ModelObjects::new(vocab, packed.is_none().then_some(merges))?;
        let mut specials = Vec::with_capacity(special_tokens.len());
        for (token, id) in special_tokens.iter() {
            specials.push((token.extract::<String>()?, id.extract::<TokenId>()?));
        }
        let extra = extra_ids
            .map(|extra| ModelObjects::new(extra, None))
            .transpose()?;
        let extra = extra.as_ref().map(ModelObjects::vocab).unwrap_or_default();
        let vocab = model.vocab();
        let merges = match packed {
            Some(packed) => packed.merges,
            None => model.merges(),
        };
        // (With the GIL held: the slices borrow Python objects. It takes milliseconds.)
        let mut encoder = Encoder::from_parts(
            &vocab,
            &merges,
            &specials,
            &extra,
            pattern,
            rule,
            cache_entries,
        )
        .map_err(value_error)?;
        if normalizer.is_some() || normalized_tokens.is_some() {
            let steps = normalizer_steps(normalizer.unwrap_or_default())?;
            let mut tokens = Vec::new();
            for (token, id) in normalized_tokens.iter().flat_map(|tokens| tokens.iter()) {
                tokens.push((token.extract::<String>()?, id.extract::<TokenId>()?));
            }
            encoder = encoder
                .with_normalizer(steps, &tokens)
                .map_err(value_error)?;
        }
        if let Some(stages) = pre_tokenizer {
            let gpt2_pieces = is_byte_level_alone(&stages) && pattern == GPT2_PATTERN;
            let (prefix, pipeline) = pipeline_of(stages)?;
            if !gpt2_pieces {
                encoder = encoder.with_pipeline(pipeline);
            }
            if let Some(prefix) = prefix {
                encoder = encoder.with_prefix(prefix);
            }
        }
        if let Some(dropped) = dropped_bytes {
            encoder = encoder.with_dropped_bytes(&dropped);
        }
        if chars_first {
            encoder = encoder.with_chars_first();
        }
        if let Some(token_options) = token_options {
            let mut options = Vec::with_capacity(token_options.len());
            for (token, named) in token_options {
                let mut made = TokenOptions::default();
                for option in named.split(',').filter(|option| !option.is_empty()) {
                    match option {
                        "lstrip" => made.lstrip = true,
                        "rstrip" => made.rstrip = true,
                        "single_word" => made.single_word = true,
                        other => {
                            return Err(PyValueError::new_err(format!(
                                "no token option {other:?} (lstrip, rstrip, single_word)"
                            )))
                        }
                    }
                }
                options.push((token, made));
            }
            encoder = encoder.with_token_options(&options);
        }
        Ok(PyEncoder {
            ints: Arc::new(IdInts::new(encoder.max_id())),
            inner: Arc::new(encoder),
        })
    }

    /// The ids of `text`. `allowed_special`: None or "all" (every special token is recognised),
    /// or a collection of special tokens (the others are encoded as ordinary text).
    #[pyo3(signature = (text, allowed_special = None))]
    fn encode<'py>(
        &self,
        py: Python<'py>,
        text: Utf8Text,
        allowed_special: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let ids = self.ids(py, text, allowed_special)?;
        self.ints.list(py, &ids)
    }

    /// Like `encode`, the ids as a `memoryview` of an `IdBuffer`: the engine's own vector of
    /// them, which `numpy.frombuffer(view, dtype=numpy.uint32)` makes a writable array of
    /// without a copy.
    #[pyo3(signature = (text, allowed_special = None))]
    fn encode_to_buffer<'py>(
        &self,
        py: Python<'py>,
        text: Utf8Text,
        allowed_special: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyMemoryView>> {
        let ids = self.ids(py, text, allowed_special)?;
        let buffer = Bound::new(
            py,
            IdBuffer {
                ids: UnsafeCell::new(ids),
            },
        )?;
        PyMemoryView::from(buffer.as_any())
    }

    /// The ids of each text, encoded on `num_threads` threads (default: the CPUs), in order;
    /// `allowed_special` as for `encode`.
    #[pyo3(signature = (texts, num_threads = None, allowed_special = None))]
    fn encode_batch<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        num_threads: Option<usize>,
        allowed_special: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let allowed = Allowed::from_py(allowed_special)?;
        let (texts, threads) = batch_of(texts, num_threads)?;
        let encoder = Arc::clone(&self.inner);
        // (about four bytes of text per id)
        self.ints
            .prepare(py, texts.iter().map(|t| t.len()).sum::<usize>() / 4);
        if threads == 1 || texts.len() < 2 {
            let batches = py
                .detach(move || {
                    let refs: Vec<&str> = texts.iter().map(|t| &**t).collect();
                    allowed.with(|allowed| encoder.encode_batch_allowed(&refs, threads, allowed))
                })
                .map_err(|error| batch_error(py, error))?;
            return self.lists(py, batches);
        }
        // The lists are made here, under the GIL, while the threads encode the rest: making
        // them takes a fifth of the one-thread time, which would otherwise follow the threads.
        let refs: Vec<&str> = texts.iter().map(|t| &**t).collect();
        let mut lists: Vec<Option<Bound<'py, PyList>>> = vec![None; refs.len()];
        // The collector is paused meanwhile, but the first allocation after it resumes collects
        // the young generation, which then holds every list made: a pass over every id (0.08 s
        // for 20 MB of text), on this thread alone once the threads are done. Collecting the
        // young generation every so many ids instead does the same pass in pieces, while the
        // threads still encode, and the last few lists at the end (each list is visited once
        // either way, and is then in the middle generation, as after that one collection; the
        // middle generation's next collection, which visits them again, comes as it would have).
        // (None of this if the caller has paused the collector.)
        let gc = py.import("gc")?;
        let collecting = gc.call_method0("isenabled")?.is_truthy()?;
        let mut young_ids = 0usize;
        let collect_young = |young_ids: &mut usize| -> PyResult<()> {
            if collecting {
                gc.call_method1("collect", (0,))?;
            }
            *young_ids = 0;
            Ok(())
        };
        without_gc(py, || {
            let encoded = allowed.with(|allowed| {
                encoder.encode_batch_overlapped(
                    &refs,
                    threads,
                    allowed,
                    |next| py.detach(next),
                    |block| {
                        let texts: Vec<&[TokenId]> = block.texts().collect();
                        young_ids += texts.iter().map(|ids| ids.len()).sum::<usize>();
                        let made = self.ints.lists(py, &texts)?;
                        for (slot, list) in lists[block.first..].iter_mut().zip(made) {
                            *slot = Some(list);
                        }
                        if young_ids >= IDS_PER_YOUNG_COLLECTION {
                            collect_young(&mut young_ids)?;
                        }
                        Ok::<(), PyErr>(())
                    },
                )
            });
            match encoded {
                Ok(()) => {}
                Err(OverlappedError::Take(error)) => return Err(error),
                Err(OverlappedError::Encode(error)) => return Err(batch_error(py, error)),
            }
            collect_young(&mut young_ids)
        })?;
        let lists = lists
            .into_iter()
            .map(|list| list.expect("every block was encoded"));
        PyList::new(py, lists)
    }

    /// The ids of `text` with BPE-dropout: each merge considered is skipped with probability
    /// `dropout` (in [0, 1); 0 is `encode` exactly), the draws seeded by `seed` (an int in
    /// [0, 2**64)) and `text_index` (a text's index in its batch).
    #[pyo3(signature = (text, dropout, seed, allowed_special = None, text_index = 0))]
    fn encode_dropout<'py>(
        &self,
        py: Python<'py>,
        text: Utf8Text,
        dropout: f64,
        seed: &Bound<'py, PyAny>,
        allowed_special: Option<&Bound<'py, PyAny>>,
        text_index: u64,
    ) -> PyResult<Bound<'py, PyList>> {
        let dropout = checked_dropout(dropout, Some(seed))?;
        let allowed = Allowed::from_py(allowed_special)?;
        let encoder = Arc::clone(&self.inner);
        let ids = py
            .detach(move || {
                allowed.with(|allowed| {
                    encoder.encode_with_dropout(&text, allowed, dropout, text_index)
                })
            })
            .map_err(|error| encode_error(py, "", error))?;
        self.ints.list(py, &ids)
    }

    /// `encode_dropout` of each text (its index in the batch seeding its draws), on `num_threads`
    /// threads (default: the CPUs): the ids do not depend on the number of threads.
    #[pyo3(signature = (texts, dropout, seed, num_threads = None, allowed_special = None))]
    fn encode_batch_dropout<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        dropout: f64,
        seed: &Bound<'py, PyAny>,
        num_threads: Option<usize>,
        allowed_special: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let dropout = checked_dropout(dropout, Some(seed))?;
        let allowed = Allowed::from_py(allowed_special)?;
        let (texts, threads) = batch_of(texts, num_threads)?;
        let encoder = Arc::clone(&self.inner);
        let batches = py
            .detach(move || {
                let refs: Vec<&str> = texts.iter().map(|t| &**t).collect();
                allowed.with(|allowed| {
                    encoder.encode_batch_with_dropout(&refs, threads, allowed, dropout)
                })
            })
            .map_err(|error| batch_error(py, error))?;
        self.lists(py, batches)
    }

    /// The ids of `text` (`allowed_special` as for `encode`) and each one's `(start, end)`
    /// character span in `text`, as Hugging Face's `tokenizers` gives them: a token that holds
    /// part of a character's bytes spans that whole character. `trim_offsets`: None, or the
    /// `add_prefix_space` of a post-processor that trims offsets (`ByteLevel`, `RobertaProcessing`).
    #[pyo3(signature = (text, allowed_special = None, trim_offsets = None))]
    fn encode_with_offsets<'py>(
        &self,
        py: Python<'py>,
        text: Utf8Text,
        allowed_special: Option<&Bound<'py, PyAny>>,
        trim_offsets: Option<bool>,
    ) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>)> {
        let allowed = Allowed::from_py(allowed_special)?;
        let encoder = Arc::clone(&self.inner);
        let (ids, offsets) = py
            .detach(move || {
                allowed.with(|allowed| {
                    encoder.encode_with_trimmed_offsets(&text, allowed, trim_offsets)
                })
            })
            .map_err(|error| encode_error(py, "", error))?;
        Ok((self.ints.list(py, &ids)?, PyList::new(py, offsets)?))
    }

    /// The packed warm table (see `bpestore.encode.warm`) of `pieces`, pre-tokens most useful
    /// first, each merged by this encoder: the first `limit` of them that are 2 to 64 bytes long
    /// (each once). Returns the table and how many pieces it holds.
    fn pack_warm<'py>(
        &self,
        py: Python<'py>,
        pieces: Vec<PyBackedBytes>,
        limit: usize,
    ) -> (Bound<'py, PyBytes>, usize) {
        let encoder = Arc::clone(&self.inner);
        let (data, held) = py.detach(move || {
            let slices: Vec<&[u8]> = pieces.iter().map(|piece| piece.as_ref()).collect();
            encoder.pack_warm(&slices, limit)
        });
        (PyBytes::new(py, &data), held)
    }

    /// Takes a packed warm table made by `pack_warm` of the same model: its pieces' ids are found
    /// there from then on, by every thread. Returns how many pieces it holds. ValueError saying
    /// what is wrong when it is not one, was made for another model, is damaged, or this encoder
    /// has one already.
    fn load_warm(&self, py: Python<'_>, data: PyBackedBytes) -> PyResult<usize> {
        let encoder = Arc::clone(&self.inner);
        py.detach(move || encoder.load_warm(&data))
            .map_err(PyValueError::new_err)
    }

    /// How many pieces the warm table holds (0 without one).
    #[getter]
    fn warm_len(&self) -> usize {
        self.inner.warm_len()
    }

    /// The model's fingerprint that a warm table must carry, as 16 hex digits.
    #[getter]
    fn fingerprint(&self) -> String {
        format!("{:016x}", self.inner.fingerprint())
    }

    /// The bytes of `ids` joined; ValueError naming the first id that is not in the vocabulary.
    fn decode_bytes<'py>(
        &self,
        py: Python<'py>,
        ids: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let mut out = Vec::new();
        for item in ids.try_iter()? {
            let item = item?;
            if item.is_instance_of::<PyBool>() {
                // (an int to Python, but True is no token id: decode_single_token_bytes refuses it too)
                return Err(PyTypeError::new_err(format!(
                    "token ids must be integers, got {}",
                    repr(&item)
                )));
            }
            let bytes = item
                .extract::<TokenId>()
                .ok()
                .and_then(|id| self.inner.token_bytes(id));
            match bytes {
                Some(bytes) => out.extend_from_slice(bytes),
                // Not an integer at all (a str, a float): the caller's mistake of type.
                None if !item.hasattr("__index__")? => {
                    return Err(PyTypeError::new_err(format!(
                        "token ids must be integers, got {}",
                        repr(&item)
                    )))
                }
                None => {
                    return Err(PyValueError::new_err(format!(
                        "id {} is not in the vocabulary (ids go up to {})",
                        repr(&item),
                        self.inner.max_id()
                    )))
                }
            }
        }
        Ok(PyBytes::new(py, &out))
    }

    /// A stream encoder: `feed(text)` returns the ids up to the last safe cut, `finish()` the
    /// rest; together they give the ids of the whole text, however it was cut. Text is encoded
    /// once about `block_bytes` wait (tests make it small, to cut often).
    /// `allowed_special` as for `encode`; `dropout` and `seed` as for `encode_dropout` (each
    /// piece seeded by its offset in the stream: the ids are the whole text's).
    #[pyo3(signature = (block_bytes = DEFAULT_STREAM_BLOCK, allowed_special = None, dropout = None, seed = None))]
    fn stream(
        &self,
        block_bytes: usize,
        allowed_special: Option<&Bound<'_, PyAny>>,
        dropout: Option<f64>,
        seed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyStreamEncoder> {
        Ok(PyStreamEncoder {
            encoder: Arc::clone(&self.inner),
            state: self.stream_state(block_bytes, allowed_special, dropout, seed)?,
        })
    }

    /// The ids of the text pieces `iterable` yields (a file object, lines), one at a time as
    /// `encode` of their concatenation would give them, in constant memory: pieces are gathered
    /// until about `block_bytes` wait, then encoded up to the last safe cut.
    /// `allowed_special` as for `encode`; `dropout` and `seed` as for `stream`.
    #[pyo3(signature = (iterable, block_bytes = DEFAULT_STREAM_BLOCK, allowed_special = None, dropout = None, seed = None))]
    fn iter_ids(
        &self,
        iterable: &Bound<'_, PyAny>,
        block_bytes: usize,
        allowed_special: Option<&Bound<'_, PyAny>>,
        dropout: Option<f64>,
        seed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyIdIterator> {
        Ok(PyIdIterator {
            encoder: Arc::clone(&self.inner),
            state: self.stream_state(block_bytes, allowed_special, dropout, seed)?,
            source: Some(iterable.try_iter()?.unbind()),
            ids: Vec::new(),
            next: 0,
        })
    }

    /// A new `.npy` file at `path` (an error if one exists) for this vocabulary's ids (uint16
    /// when every id fits, else uint32), written a block at a time (`NpyWriter`).
    fn npy_writer(&self, path: std::path::PathBuf) -> PyResult<PyNpyWriter> {
        let writer = NpyWriter::create(&path, self.inner.npy_dtype()).map_err(os_error)?;
        Ok(PyNpyWriter {
            writer: Some(writer),
            max_id: self.inner.max_id(),
        })
    }

    /// Encodes the UTF-8 file `path` into the `.npy` file `output` (uint16 if every id fits,
    /// else uint32) on `threads` threads (default: the CPUs); returns the number of ids.
    /// `progress(n)` is called with the number of input bytes done. Invalid UTF-8 raises
    /// `bpestore.errors.CorpusDecodeError`, a pattern that gives up on a match
    /// `bpestore.errors.PatternError` (naming `path` and the byte offset in it); nothing is
    /// left at `output` on failure. `dropout` and `seed` as for `stream` (each piece seeded by
    /// its offset in the file: the ids do not depend on threads or chunks).
    #[pyo3(signature = (path, output, threads = None, progress = None, chunk_bytes = DEFAULT_CHUNK_BYTES, dropout = None, seed = None))]
    #[allow(clippy::too_many_arguments)] // (Python's keyword arguments, each optional)
    fn encode_file_to_npy(
        &self,
        py: Python<'_>,
        path: std::path::PathBuf,
        output: std::path::PathBuf,
        threads: Option<usize>,
        progress: Option<Py<PyAny>>,
        chunk_bytes: usize,
        dropout: Option<f64>,
        seed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<u64> {
        let dropout = optional_dropout(dropout, seed)?;
        let threads = threads.unwrap_or_else(default_threads);
        if threads == 0 {
            return Err(PyValueError::new_err("threads must be at least 1"));
        }
        let encoder = Arc::clone(&self.inner);
        let input = path.clone();
        let (result, stopped) = py.detach(move || {
            let mut stopped: Option<PyErr> = None;
            // After each chunk: report progress, and stop on Ctrl-C or an error in the callback.
            let mut on_chunk = |done: u64| {
                Python::attach(|py| {
                    let outcome = match &progress {
                        Some(progress) => progress.call1(py, (done,)).map(|_| ()),
                        None => Ok(()),
                    };
                    match outcome.and_then(|()| py.check_signals()) {
                        Ok(()) => true,
                        Err(error) => {
                            stopped = Some(error);
                            false
                        }
                    }
                })
            };
            let result = encoder.encode_file_with_dropout(
                &input,
                &output,
                threads,
                &mut on_chunk,
                chunk_bytes,
                dropout,
            );
            (result, stopped)
        });
        match result {
            Ok(count) => Ok(count),
            Err(FileError::Cancelled) => {
                Err(stopped
                    .unwrap_or_else(|| PyKeyboardInterrupt::new_err("encoding was cancelled")))
            }
            Err(FileError::Decode { offset, reason }) => Err(corpus_decode_error(
                py,
                path.display().to_string(),
                offset,
                reason.to_string(),
            )),
            Err(FileError::Pattern(error)) => {
                Err(pattern_error(py, format!("{}: {error}", path.display())))
            }
            Err(FileError::Io(error)) => Err(os_error(error)),
        }
    }

    /// The highest id, special tokens included.
    #[getter]
    fn max_id(&self) -> TokenId {
        self.inner.max_id()
    }

    /// The `.npy` element type of `encode_file_to_npy`: "uint16" or "uint32".
    #[getter]
    fn npy_dtype(&self) -> &'static str {
        match self.inner.npy_dtype() {
            bpestore_encode::NpyDtype::U16 => "uint16",
            bpestore_encode::NpyDtype::U32 => "uint32",
        }
    }
}

impl PyEncoder {
    /// A batch's ids as a list of lists of ints (the collector paused meanwhile).
    fn lists<'py>(
        &self,
        py: Python<'py>,
        batches: Vec<Vec<TokenId>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let texts: Vec<&[TokenId]> = batches.iter().map(Vec::as_slice).collect();
        let lists = without_gc(py, || self.ints.lists(py, &texts))?;
        PyList::new(py, lists)
    }

    /// A stream's state recognising the special tokens `allowed_special` (as for `encode`).
    fn stream_state(
        &self,
        block_bytes: usize,
        allowed_special: Option<&Bound<'_, PyAny>>,
        dropout: Option<f64>,
        seed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<StreamState> {
        let dropout = optional_dropout(dropout, seed)?;
        let state = match Allowed::from_py(allowed_special)? {
            Allowed::All => StreamState::with_block(block_bytes),
            Allowed::Only(tokens) => {
                // Only the encoder's own special tokens: another string is ordinary text, and
                // must not become a place to cut.
                let known = self.inner.special_tokens().tokens();
                let tokens: Vec<String> =
                    tokens.into_iter().filter(|t| known.contains(t)).collect();
                StreamState::with_allowed(block_bytes, &tokens)
            }
        };
        Ok(match dropout {
            Some(dropout) => state.with_dropout(dropout),
            None => state,
        })
    }

    fn ids(
        &self,
        py: Python<'_>,
        text: Utf8Text,
        allowed_special: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<TokenId>> {
        let allowed = Allowed::from_py(allowed_special)?;
        let encoder = Arc::clone(&self.inner);
        // Releasing the GIL costs about a microsecond: not worth it for a few words.
        let ids = if text.len() < 4096 {
            allowed.with(|allowed| encoder.encode(&text, allowed))
        } else {
            py.detach(move || allowed.with(|allowed| encoder.encode(&text, allowed)))
        };
        ids.map_err(|error| encode_error(py, "", error))
    }
}

/// Feeds a stream of text to an encoder in constant memory (see `Encoder.stream`).
/// A `.npy` array of ids being written (`Encoder.npy_writer`): `write(ids)` appends ids (the
/// bytes of little-endian uint32s), `finish()` writes the header and returns the number of ids;
/// until then the file is no `.npy` (`numpy.load` refuses it). Errors are `OSError(errno, ...)`.
#[pyclass(module = "bpestore._engine", name = "NpyWriter")]
pub struct PyNpyWriter {
    /// None once finished.
    writer: Option<NpyWriter>,
    max_id: TokenId,
}

#[pymethods]
impl PyNpyWriter {
    /// Appends the ids in `ids`, the bytes of little-endian uint32s (`array.tobytes()`).
    fn write(&mut self, py: Python<'_>, ids: &[u8]) -> PyResult<()> {
        let words = ids.chunks_exact(4);
        if !words.remainder().is_empty() {
            return Err(PyValueError::new_err(format!(
                "{} bytes are not a whole number of uint32 ids",
                ids.len()
            )));
        }
        let ids: Vec<TokenId> = words
            .map(|b| TokenId::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        if let Some(&id) = ids.iter().find(|&&id| id > self.max_id) {
            return Err(PyValueError::new_err(format!(
                "id {id} is past the vocabulary's last id, {}",
                self.max_id
            )));
        }
        let writer = self
            .writer
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("the array is finished"))?;
        py.detach(|| writer.write_ids(&ids)).map_err(os_error)
    }

    /// Writes the header and puts the file on disk; returns the number of ids.
    fn finish(&mut self, py: Python<'_>) -> PyResult<u64> {
        let writer = self
            .writer
            .take()
            .ok_or_else(|| PyValueError::new_err("the array is finished"))?;
        py.detach(|| writer.finish()).map_err(os_error)
    }
}

#[pyclass(module = "bpestore._engine", name = "StreamEncoder")]
pub struct PyStreamEncoder {
    encoder: Arc<Encoder>,
    state: StreamState,
}

#[pymethods]
impl PyStreamEncoder {
    /// The ids of the text fed so far, up to the last place that what follows cannot change.
    fn feed<'py>(&mut self, py: Python<'py>, text: Utf8Text) -> PyResult<Bound<'py, PyList>> {
        let encoder = Arc::clone(&self.encoder);
        let state = &mut self.state;
        let ids = py
            .detach(move || state.feed(&encoder, &text))
            .map_err(|error| encode_error(py, "", error))?;
        // (plain ints: the shared ones would cost a stream more memory than it may use)
        PyList::new(py, ids)
    }

    /// The ids of the rest of the text: the end of the stream (the encoder can then start anew).
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let encoder = Arc::clone(&self.encoder);
        let state = &mut self.state;
        let ids = py
            .detach(move || state.finish(&encoder))
            .map_err(|error| encode_error(py, "", error))?;
        // (plain ints: the shared ones would cost a stream more memory than it may use)
        PyList::new(py, ids)
    }
}

/// How many ids `encode_batch` puts in lists between two collections of Python's young
/// generation (see there): enough that each collection's fixed cost is nothing beside its pass.
const IDS_PER_YOUNG_COLLECTION: usize = 1 << 18;

/// Runs `f` with Python's cyclic garbage collector paused. Making a list of ids per text (a
/// batch of 200,000 lines: as many lists, millions of references) otherwise starts a collection
/// every 700 lists, and the older generations' passes walk every list made so far: a quarter of
/// `encode_batch`'s time, all of it under the GIL. Lists of ints hold no cycles.
fn without_gc<R>(py: Python<'_>, f: impl FnOnce() -> PyResult<R>) -> PyResult<R> {
    let gc = py.import("gc")?;
    let was_enabled = gc.call_method0("isenabled")?.is_truthy()?;
    if was_enabled {
        gc.call_method0("disable")?;
    }
    let result = f();
    if was_enabled {
        gc.call_method0("enable")?;
    }
    result
}

/// The ids of a stream of text pieces, one by one (see `Encoder.iter_ids`): the pieces are
/// pulled from the source only when the ids encoded so far are used up, so no Python generator or
/// list stands between the engine and the caller.
#[pyclass(module = "bpestore._engine", name = "IdIterator")]
pub struct PyIdIterator {
    encoder: Arc<Encoder>,
    state: StreamState,
    /// None once the source is exhausted and the rest of the text encoded.
    source: Option<Py<PyIterator>>,
    ids: Vec<TokenId>,
    next: usize,
}

#[pymethods]
impl PyIdIterator {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<TokenId>> {
        while self.next == self.ids.len() {
            let Some(source) = &self.source else {
                return Ok(None);
            };
            self.ids.clear();
            self.next = 0;
            // Feed pieces until some ids come out (the stream holds text back until it has a
            // block of it and a safe cut) or the source ends.
            let source = source.bind(py).clone();
            match source.into_iter().next() {
                Some(piece) => {
                    let piece = piece?;
                    let text = piece.cast::<PyString>().map_err(|_| {
                        PyTypeError::new_err(format!(
                            "encode_iterable() takes an iterable of str, got {} ({})",
                            type_name(&piece),
                            repr(&piece)
                        ))
                    })?;
                    let fed = self.state.feed(&self.encoder, text.to_str()?);
                    self.ids = self.finished_on_error(py, fed)?;
                }
                None => {
                    self.source = None;
                    let rest = self.state.finish(&self.encoder);
                    self.ids = self.finished_on_error(py, rest)?;
                }
            }
        }
        let id = self.ids[self.next];
        self.next += 1;
        Ok(Some(id))
    }
}

impl PyIdIterator {
    /// `ids`, or, for an error, the Python exception, with the iterator then at its end (a
    /// generator that raised is finished too; the stream is of no further use).
    fn finished_on_error(
        &mut self,
        py: Python<'_>,
        ids: Result<Vec<TokenId>, EncodeError>,
    ) -> PyResult<Vec<TokenId>> {
        ids.map_err(|error| {
            self.source = None;
            encode_error(py, "", error)
        })
    }
}

/// Ids as the engine made them, lent to Python through the buffer protocol: the bytes of
/// native-endian uint32s, writable (`numpy.frombuffer` makes an array of them that owns a
/// reference to this object, with no copy: the copy into a `bytearray` it replaces, 4 bytes per
/// id, was about 3% of a warm encode's time).
#[pyclass(module = "bpestore._engine", name = "IdBuffer", frozen)]
pub struct IdBuffer {
    /// Never resized or read by Rust once made: Python may write to the ids through the buffer
    /// (an array of them is writable), so they sit in an `UnsafeCell`, and Rust only takes raw
    /// pointers to them.
    ids: UnsafeCell<Vec<TokenId>>,
}

// SAFETY: the vector is moved in when the object is made and never resized afterwards; Rust
// reads only its length and address (through `UnsafeCell::get`, never a reference to the ids),
// so threads sharing the object see no data race on Rust's side. Writes through the buffer are
// Python's, made under the GIL like any write to a buffer it exports.
unsafe impl Sync for IdBuffer {}

#[pymethods]
impl IdBuffer {
    /// The number of ids.
    fn __len__(&self) -> usize {
        // SAFETY: reads the vector's length only; the vector is never resized (see the type).
        unsafe { (*self.ids.get()).len() }
    }

    /// Fills `view` with the ids' bytes (format "B": unsigned bytes, as a `bytearray` exports).
    ///
    /// # Safety
    /// Called by CPython as the type's `bf_getbuffer`, with `view` a valid `Py_buffer` to fill.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut pyo3::ffi::Py_buffer,
        flags: std::os::raw::c_int,
    ) -> PyResult<()> {
        let ids = slf.get().ids.get();
        // SAFETY: `ids` points to the vector, alive as long as `slf` is; PyBuffer_FillInfo takes a
        // reference to `slf` into `view.obj`, so the object (and its vector, never resized or
        // freed before the object) outlives every export. The pointer is derived from the
        // UnsafeCell, not from a shared reference, so Python's writes through it are allowed; the
        // length in bytes fits an isize (a Vec never holds more than isize::MAX bytes).
        let filled = unsafe {
            let bytes = (*ids).len() * std::mem::size_of::<TokenId>();
            pyo3::ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                (*ids).as_mut_ptr().cast(),
                bytes as pyo3::ffi::Py_ssize_t,
                0, // writable
                flags,
            )
        };
        if filled == -1 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    /// Nothing to release: `view.obj`'s reference, which CPython drops, kept the ids alive.
    ///
    /// # Safety
    /// Called by CPython as the type's `bf_releasebuffer`.
    unsafe fn __releasebuffer__(&self, _view: *mut pyo3::ffi::Py_buffer) {}
}

/// One Python int per id, made on first use and shared by every list of ids: a list of ids then
/// costs a reference count per id instead of an allocation (most ids are above CPython's cache of
/// small ints). Only for vocabularies of up to `MAX_SHARED_INTS` ids.
pub struct IdInts {
    max_id: TokenId,
    ints: OnceLock<Vec<Py<PyAny>>>,
}

const MAX_SHARED_INTS: TokenId = 1 << 21;

impl IdInts {
    fn new(max_id: TokenId) -> IdInts {
        IdInts {
            max_id,
            ints: OnceLock::new(),
        }
    }

    /// `ids` as a Python list of ints.
    fn list<'py>(&self, py: Python<'py>, ids: &[TokenId]) -> PyResult<Bound<'py, PyList>> {
        let mut lists = self.lists(py, &[ids])?;
        Ok(lists.pop().expect("one list for one text"))
    }

    /// Each of `texts` (ids) as a Python list of ints, in order.
    ///
    /// (Under the stable ABI, where a reference and a list's slot each cost a call, the ids were
    /// counted first and each int's references taken together; with both inline, one pass that
    /// takes each reference as it fills the slot is as fast, on 20 MB of English and of eleven
    /// scripts, GPT-2 and o200k_base, within 3% either way.)
    fn lists<'py>(
        &self,
        py: Python<'py>,
        texts: &[&[TokenId]],
    ) -> PyResult<Vec<Bound<'py, PyList>>> {
        let total: usize = texts.iter().map(|ids| ids.len()).sum();
        // (a short list makes its own ints rather than all of them, unless they are made)
        let ints = match self.ints.get() {
            _ if self.max_id >= MAX_SHARED_INTS => None,
            None if total < 64 => None,
            _ => Some(self.shared(py)),
        };
        let Some(ints) = ints else {
            return texts.iter().map(|ids| PyList::new(py, *ids)).collect();
        };
        texts
            .iter()
            .map(|ids| {
                let list = empty_list(py, ids.len())?;
                fill_list(&list, ints, ids);
                Ok(list)
            })
            .collect()
    }

    /// The shared ints, made on first use.
    fn shared(&self, py: Python<'_>) -> &[Py<PyAny>] {
        self.ints.get_or_init(|| {
            (0..=self.max_id)
                .map(|id| {
                    let int = id.into_pyobject(py).unwrap_or_else(|never| match never {});
                    int.into_any().unbind()
                })
                .collect()
        })
    }

    /// Makes the shared ints now if lists of `ids` ids in all are about to be made and it is worth
    /// it, so that short lists use them too (a batch of short lines otherwise makes an int per id).
    fn prepare(&self, py: Python<'_>, ids: usize) {
        if self.max_id < MAX_SHARED_INTS && ids as u64 >= u64::from(self.max_id) / 4 {
            self.shared(py);
        }
    }
}

/// A new list of `len` empty slots, for `fill_list`.
fn empty_list(py: Python<'_>, len: usize) -> PyResult<Bound<'_, PyList>> {
    let len = pyo3::ffi::Py_ssize_t::try_from(len)
        .map_err(|_| PyValueError::new_err("too many ids for a list"))?;
    // SAFETY: the GIL is held (`py`); PyList_New returns a new reference or NULL with an
    // exception set, which `from_owned_ptr_or_err` turns into the error.
    let list = unsafe { Bound::from_owned_ptr_or_err(py, pyo3::ffi::PyList_New(len))? };
    Ok(list.cast_into::<PyList>()?)
}

/// Puts `ints[id]` for each of `ids`, with a reference taken to it, in the slots of `list`, a
/// new list from `empty_list` of as many slots.
///
/// The slots are written in place, as CPython's own `PyList_SET_ITEM` does (a build for one
/// Python version sees the list's layout, and its `Py_INCREF` is inline): a store and an
/// addition per id, where the stable ABI's `PyList_SetItem` and `Py_IncRef` are two calls.
fn fill_list(list: &Bound<'_, PyList>, ints: &[Py<PyAny>], ids: &[TokenId]) {
    if ids.is_empty() {
        return; // (an empty list may have no item array at all)
    }
    // SAFETY: `list` is a list (its type says so) made by `empty_list` with `ids.len()` slots,
    // all still NULL, that nothing else has seen yet: its `ob_item` points to that many
    // pointers, which no one else reads or writes while the GIL is held (`list` is bound to it).
    let slots = unsafe {
        let object = list.as_ptr().cast::<pyo3::ffi::PyListObject>();
        std::slice::from_raw_parts_mut((*object).ob_item, ids.len())
    };
    for (slot, &id) in slots.iter_mut().zip(ids) {
        let int = ints[id as usize].as_ptr();
        // SAFETY: the GIL is held and `int` is alive (the table holds a reference to it).
        unsafe { pyo3::ffi::Py_INCREF(int) };
        // The list owns that reference now, as PyList_SET_ITEM's caller gives it one; the slot
        // was empty, so nothing is dropped.
        *slot = int;
    }
}
