//! The store's bindings: reading a tokenizer's packed vocabulary and merges
//! (`bpestore_encode::packed`) into the Python objects a `BPEModel` holds, in one call.

use bpestore_encode::packed::Packed;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use std::collections::HashMap;

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(unpack_model, module)?)?;
    Ok(())
}

/// `(vocab, merges)` from packed data: `{id: token}` and `[(left, right), ...]` in rank order.
/// ValueError, saying where, if the data is not well formed or gives an id twice (nothing else
/// is checked here).
#[pyfunction]
fn unpack_model<'py>(
    py: Python<'py>,
    data: &[u8],
) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyList>)> {
    let packed = Packed::parse(data)
        .map_err(|reason| PyValueError::new_err(format!("damaged packed data: {reason}")))?;
    let vocab = PyDict::new(py);
    // Each merge's parts are tokens of the vocab (always, with the pair rule): they share the
    // vocab's bytes objects, which halves the objects to make and the memory they take.
    let mut objects: HashMap<&[u8], Bound<'py, PyBytes>> =
        HashMap::with_capacity(packed.vocab.len());
    for &(id, token) in &packed.vocab {
        let object = PyBytes::new(py, token);
        vocab.set_item(id, &object)?;
        objects.insert(token, object);
    }
    let object = |bytes: &[u8]| match objects.get(bytes) {
        Some(object) => object.clone(),
        None => PyBytes::new(py, bytes),
    };
    if vocab.len() != packed.vocab.len() {
        return Err(PyValueError::new_err(
            "damaged packed data: an id is given to more than one token",
        ));
    }
    let merges = packed
        .merges
        .iter()
        .map(|(left, right)| PyTuple::new(py, [object(left), object(right)]))
        .collect::<PyResult<Vec<_>>>()?;
    Ok((vocab, PyList::new(py, merges)?))
}
