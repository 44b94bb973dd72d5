//! What the format readers (`bpestore/formats/`) ask of the engine: a byte-level tokenizer's
//! tokens and merges decoded from GPT-2's alphabet, a file's hundreds of thousands at once (a
//! character at a time in Python, that was most of reading Llama-3's `tokenizer.json`).
//!
//! Each returns `None` at the first doubt (an item that is not a `str`, a character outside the
//! alphabet, a merge that is not two parts around one space): the reader then goes one item at
//! a time, in Python, to name the problem.

use bpestore_pretokenize::decode_byte_level;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(byte_level_tokens, module)?)?;
    module.add_function(wrap_pyfunction!(byte_level_merges, module)?)?;
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
        let Some(text) = text_of(&text) else {
            return Ok(None);
        };
        buffer.clear();
        if !decode_byte_level(&text, &mut buffer) {
            return Ok(None);
        }
        tokens.push(PyBytes::new(py, &buffer));
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
    let (mut left_bytes, mut right_bytes) = (Vec::new(), Vec::new());
    for line in lines.iter() {
        let Some(line) = text_of(&line) else {
            return Ok(None);
        };
        let Some((left, right)) = line.split_once(' ') else {
            return Ok(None);
        };
        left_bytes.clear();
        right_bytes.clear();
        if left.is_empty()
            || right.is_empty()
            || !decode_byte_level(left, &mut left_bytes)
            || !decode_byte_level(right, &mut right_bytes)
        {
            return Ok(None); // (a second space is outside the alphabet)
        }
        let pair = [
            PyBytes::new(py, &left_bytes),
            PyBytes::new(py, &right_bytes),
        ];
        merges.push(PyTuple::new(py, pair)?);
    }
    PyList::new(py, merges).map(Some)
}

/// The UTF-8 of a `str`, or `None` for another object or a string with a lone surrogate.
fn text_of<'a>(item: &'a Bound<'_, PyAny>) -> Option<std::borrow::Cow<'a, str>> {
    item.cast::<PyString>().ok()?.to_cow().ok()
}
