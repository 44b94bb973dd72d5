//! The store's bindings: a tokenizer's vocabulary and merges packed (`bpestore_encode::packed`)
//! from the Python objects a `BPEModel` holds, and read back into them, each in one call.

use crate::model::{ModelObjects, SharedBytes};
use bpestore_encode::packed::{pack, Packed};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(pack_model, module)?)?;
    module.add_function(wrap_pyfunction!(unpack_model, module)?)?;
    module.add_function(wrap_pyfunction!(unpack_vocab, module)?)?;
    Ok(())
}

/// `vocab` (`{id: token}`) and `merges` (`[(left, right), ...]`, in rank order) packed, the ids
/// in ascending order: what `unpack_model` reads. ValueError for an id or a length that does not
/// fit the layout; TypeError for a token that is not bytes or a merge that is not a pair of them.
#[pyfunction]
fn pack_model<'py>(
    py: Python<'py>,
    vocab: &Bound<'py, PyDict>,
    merges: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let model = ModelObjects::new(vocab, Some(merges))?;
    let mut vocab = model.vocab();
    vocab.sort_unstable_by_key(|&(id, _)| id);
    let merges = model.merges();
    let data = pack(&vocab, &merges).map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &data))
}

/// `(vocab, merges)` from packed data: `{id: token}` and `[(left, right), ...]` in rank order.
/// ValueError, saying where, if the data is not well formed or gives an id twice (nothing else
/// is checked here).
#[pyfunction]
fn unpack_model<'py>(
    py: Python<'py>,
    data: &[u8],
) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyList>)> {
    let packed = parse(data)?;
    // Each merge's parts are tokens of the vocab (always, with the pair rule): they share the
    // vocab's bytes objects.
    let mut objects = SharedBytes::with_capacity(py, packed.vocab.len());
    let vocab = vocab_dict(py, &packed, |token, object| objects.insert(token, object))?;
    let merges = objects.merge_list(packed.merges.iter().copied())?;
    Ok((vocab, merges))
}

/// The vocab alone from packed data, all of which is checked as [`unpack_model`] checks it: what
/// a token-rule model needs to encode (its merges are only read to be shown or exported, and
/// making their Python objects was a third of loading cl100k_base from a store).
#[pyfunction]
fn unpack_vocab<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyDict>> {
    vocab_dict(py, &parse(data)?, |_, _| {})
}

/// The vocabulary and merges packed in `data`; ValueError ("damaged packed data: ...", saying
/// where) if it is not well formed. For every binding that reads a packed copy.
pub(crate) fn parse(data: &[u8]) -> PyResult<Packed<'_>> {
    Packed::parse(data)
        .map_err(|reason| PyValueError::new_err(format!("damaged packed data: {reason}")))
}

/// `{id: token}` of `packed`, each token's object also handed to `made`; ValueError if an id is
/// given twice.
fn vocab_dict<'a, 'py>(
    py: Python<'py>,
    packed: &Packed<'a>,
    mut made: impl FnMut(&'a [u8], Bound<'py, PyBytes>),
) -> PyResult<Bound<'py, PyDict>> {
    let vocab = PyDict::new(py);
    for &(id, token) in &packed.vocab {
        let object = PyBytes::new(py, token);
        vocab.set_item(id, &object)?;
        made(token, object);
    }
    if vocab.len() != packed.vocab.len() {
        return Err(PyValueError::new_err(
            "damaged packed data: an id is given to more than one token",
        ));
    }
    Ok(vocab)
}
