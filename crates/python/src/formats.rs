//! What the format readers (`bpestore/formats/`) ask of the engine, for a file's hundreds of
//! thousands of tokens and merges at once: a byte-level tokenizer's tokens and merges decoded from
//! GPT-2's alphabet (a character at a time in Python, that was most of reading Llama-3's
//! `tokenizer.json`), and whether its merges come in the order of their tokens' ids.
//!
//! The decoders return `None` at the first doubt (an item that is not a `str`, a character outside the
//! alphabet, a merge that is not two parts around one space): the reader then goes one item at
//! a time, in Python, to name the problem.

use bpestore_pretokenize::decode_byte_level;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use rustc_hash::FxHashMap;

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(byte_level_tokens, module)?)?;
    module.add_function(wrap_pyfunction!(byte_level_merges, module)?)?;
    module.add_function(wrap_pyfunction!(first_merge_out_of_id_order, module)?)?;
    Ok(())
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
