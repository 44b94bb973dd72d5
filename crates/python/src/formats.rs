//! What the format readers (`bpestore/formats/`) ask of the engine, for a file's hundreds of
//! thousands of tokens and merges at once: a byte-level tokenizer's tokens and merges decoded from
//! GPT-2's alphabet (a character at a time in Python, that was most of reading Llama-3's
//! `tokenizer.json`), GPT-2's whole `vocab.json` read and decoded in one pass, and whether a
//! tokenizer's merges come in the order of their tokens' ids.
//!
//! The decoders return `None` at the first doubt (an item that is not a `str`, a character outside the
//! alphabet, a merge that is not two parts around one space): the reader then goes one item at
//! a time, in Python, to name the problem.

use bpestore_pretokenize::decode_byte_level;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use rustc_hash::{FxHashMap, FxHashSet};

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(byte_level_tokens, module)?)?;
    module.add_function(wrap_pyfunction!(byte_level_merges, module)?)?;
    module.add_function(wrap_pyfunction!(first_merge_out_of_id_order, module)?)?;
    module.add_function(wrap_pyfunction!(byte_level_vocab_json, module)?)?;
    Ok(())
}

/// A whole `vocab.json` (a JSON object `{token in GPT-2's alphabet: id}`, as bytes) as `{id:
/// bytes}` in the file's order, or `None` unless it is exactly such an object: valid JSON, at
/// least one token, each id an integer from 0 to `max_id` given once, each token byte-level and
/// given once. Python's `json` made 50,000 `str` keys of GPT-2's file only for them to be
/// decoded and dropped (two fifths of `Tokenizer.from_files`).
#[pyfunction]
fn byte_level_vocab_json<'py>(
    py: Python<'py>,
    data: &[u8],
    max_id: u64,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let Ok(ByteLevelVocab(Some(vocab))) = serde_json::from_slice::<ByteLevelVocab>(data) else {
        return Ok(None);
    };
    if vocab.entries.is_empty() {
        return Ok(None);
    }
    let mut ids = FxHashSet::default();
    ids.reserve(vocab.entries.len());
    let mut tokens = FxHashSet::default();
    tokens.reserve(vocab.entries.len());
    for &(token, id) in &vocab.entries {
        if id > max_id || !ids.insert(id) || !tokens.insert(vocab.token(token)) {
            return Ok(None);
        }
    }
    let dict = PyDict::new(py);
    for &(token, id) in &vocab.entries {
        dict.set_item(id, PyBytes::new(py, vocab.token(token)))?;
    }
    Ok(Some(dict))
}

/// The entries of a JSON object of byte-level tokens and unsigned ids, in order, the tokens
/// decoded into one buffer; `None` inside at the first token that is not byte-level (the reader
/// then gives way whatever follows). Anything else is a deserialization error.
struct ByteLevelVocab(Option<DecodedVocab>);

struct DecodedVocab {
    /// The tokens' bytes, one after another.
    bytes: Vec<u8>,
    /// Each entry's token (where it starts and ends in `bytes`) and id.
    entries: Vec<((usize, usize), u64)>,
}

impl DecodedVocab {
    fn token(&self, (start, end): (usize, usize)) -> &[u8] {
        &self.bytes[start..end]
    }
}

impl<'de> serde::Deserialize<'de> for ByteLevelVocab {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ByteLevelVocab(None))
    }
}

impl<'de> serde::de::Visitor<'de> for ByteLevelVocab {
    type Value = ByteLevelVocab;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("an object of tokens and ids")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut vocab = DecodedVocab {
            bytes: Vec::with_capacity(8 * map.size_hint().unwrap_or(0)),
            entries: Vec::with_capacity(map.size_hint().unwrap_or(0)),
        };
        loop {
            let start = vocab.bytes.len();
            let Some(byte_level) = map.next_key_seed(DecodedKey(&mut vocab.bytes))? else {
                return Ok(ByteLevelVocab(Some(vocab)));
            };
            if !byte_level {
                return Ok(ByteLevelVocab(None));
            }
            let id = map.next_value::<u64>()?;
            vocab.entries.push(((start, vocab.bytes.len()), id));
        }
    }
}

/// A key decoded from GPT-2's alphabet straight into the vocab's buffer (no `String` per key):
/// whether it was byte-level.
struct DecodedKey<'a>(&'a mut Vec<u8>);

impl<'de> serde::de::DeserializeSeed<'de> for DecodedKey<'_> {
    type Value = bool;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> serde::de::Visitor<'de> for DecodedKey<'_> {
    type Value = bool;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("a token")
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<bool, E> {
        Ok(decode_byte_level(text, self.0))
    }
}

/// The bytes of each string of `texts` (tokens written in GPT-2's alphabet), or `None`.
#[pyfunction]
fn byte_level_tokens<'py>(
    py: Python<'py>,
    texts: &Bound<'py, PyList>,
) -> PyResult<Option<Bound<'py, PyList>>> {
    let mut tokens = Vec::with_capacity(texts.len());
    let mut buffer = Vec::new();
    for text in texts.iter() {
        let Some(token) = text_of(&text).and_then(|text| decoded(py, &text, &mut buffer)) else {
            return Ok(None);
        };
        tokens.push(token);
    }
    PyList::new(py, tokens).map(Some)
}

/// Each of `lines` (a merge written `"left right"` in GPT-2's alphabet, both parts non-empty) as
/// a pair of bytes, or `None`.
#[pyfunction]
fn byte_level_merges<'py>(
    py: Python<'py>,
    lines: &Bound<'py, PyList>,
) -> PyResult<Option<Bound<'py, PyList>>> {
    let mut merges = Vec::with_capacity(lines.len());
    let mut buffer = Vec::new();
    for line in lines.iter() {
        let Some(line) = text_of(&line) else {
            return Ok(None);
        };
        // (a second space is outside the alphabet, so the right part refuses it)
        let parts = line
            .split_once(' ')
            .filter(|(left, right)| !left.is_empty() && !right.is_empty());
        let Some((left, right)) = parts else {
            return Ok(None);
        };
        let (Some(left), Some(right)) = (
            decoded(py, left, &mut buffer),
            decoded(py, right, &mut buffer),
        ) else {
            return Ok(None);
        };
        merges.push(PyTuple::new(py, [left, right])?);
    }
    PyList::new(py, merges).map(Some)
}

/// `text`'s bytes (written in GPT-2's alphabet) as a bytes object, or `None`; `buffer`: scratch.
fn decoded<'py>(py: Python<'py>, text: &str, buffer: &mut Vec<u8>) -> Option<Bound<'py, PyBytes>> {
    buffer.clear();
    decode_byte_level(text, buffer).then(|| PyBytes::new(py, buffer))
}

/// The rank of the first merge whose joined token is not in `vocab` (`{id: bytes}`) or has an id
/// below the previous merge's, or `None`: whether a file's merges come in the order of the ids of
/// the tokens they make, as Llama-3's do (`ignore_merges`: bpestore then encodes by the token rule).
/// Llama-3 has 280,000 merges; joined and looked up in Python, they were a fifth of its load.
#[pyfunction]
fn first_merge_out_of_id_order(
    vocab: &Bound<'_, PyDict>,
    merges: &Bound<'_, PyList>,
) -> PyResult<Option<usize>> {
    let entries: Vec<(Bound<'_, PyAny>, Bound<'_, PyAny>)> = vocab.iter().collect();
    let mut ids: FxHashMap<&[u8], i64> = FxHashMap::default();
    ids.reserve(entries.len());
    for (id, token) in &entries {
        ids.insert(token.cast::<PyBytes>()?.as_bytes(), id.extract()?);
    }
    let (mut previous, mut joined) = (-1i64, Vec::new());
    for (rank, merge) in merges.iter().enumerate() {
        let merge = merge.cast::<PyTuple>()?;
        let (left, right) = (merge.get_borrowed_item(0)?, merge.get_borrowed_item(1)?);
        joined.clear();
        joined.extend_from_slice(left.cast::<PyBytes>()?.as_bytes());
        joined.extend_from_slice(right.cast::<PyBytes>()?.as_bytes());
        match ids.get(joined.as_slice()) {
            Some(&id) if id >= previous => previous = id,
            _ => return Ok(Some(rank)),
        }
    }
    Ok(None)
}

/// The UTF-8 of a `str`, or `None` for another object or a string with a lone surrogate.
fn text_of<'a>(item: &'a Bound<'_, PyAny>) -> Option<std::borrow::Cow<'a, str>> {
    item.cast::<PyString>().ok()?.to_cow().ok()
}
