//! A model's vocabulary and merges as the Python objects that hold them (a `BPEModel`'s dict of
//! bytes and its list of pairs), kept and borrowed as slices: the one reading of them for every
//! binding that takes a model (building an encoder, checking a model, packing one).

use crate::errors::repr;
use bpestore_encode::TokenId;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use std::collections::HashMap;

/// The bytes objects of a vocabulary (`(id, token)`, in the dict's order) and of merges (in
/// order), each kept with one reference and read without a copy.
pub struct ModelObjects<'py> {
    tokens: Vec<(TokenId, Bound<'py, PyBytes>)>,
    pairs: Vec<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>,
}

impl<'py> ModelObjects<'py> {
    /// `vocab` (`{id: token}`) and, if given, `merges` (pairs of bytes: tuples or any pair-like
    /// rows). ValueError for an id that is not a u32; TypeError for a token that is not bytes or
    /// a merge that is not a pair of bytes.
    pub fn new(vocab: &Bound<'py, PyDict>, merges: Option<&Bound<'py, PyAny>>) -> PyResult<Self> {
        let mut tokens = Vec::with_capacity(vocab.len());
        for (id, token) in vocab.iter() {
            let id: TokenId = id.extract().map_err(|_| {
                PyValueError::new_err(format!(
                    "token ids must be integers from 0 to 2**32-1: token id {} does not fit",
                    repr(&id)
                ))
            })?;
            let token = token.cast_into::<PyBytes>().map_err(|error| {
                PyTypeError::new_err(format!(
                    "the token of id {id} must be bytes, got {}",
                    repr(error.into_inner().as_any())
                ))
            })?;
            tokens.push((id, token));
        }
        let mut pairs = Vec::new();
        for merge in merges
            .map(|merges| merges.try_iter())
            .transpose()?
            .into_iter()
            .flatten()
        {
            let merge = merge?;
            let bad = || {
                PyTypeError::new_err(format!(
                    "each merge must be a pair of bytes, got {}",
                    repr(&merge)
                ))
            };
            // A tuple, or any pair-like row (a database row, a list).
            let (left, right) = match merge.cast::<PyTuple>() {
                Ok(pair) if pair.len() == 2 => (pair.get_item(0)?, pair.get_item(1)?),
                Ok(_) => return Err(bad()),
                Err(_) => {
                    let parts: Vec<Bound<'py, PyAny>> = merge
                        .try_iter()
                        .map_err(|_| bad())?
                        .collect::<PyResult<_>>()?;
                    let [left, right]: [Bound<'py, PyAny>; 2] =
                        parts.try_into().map_err(|_| bad())?;
                    (left, right)
                }
            };
            let left = left.cast_into::<PyBytes>().map_err(|_| bad())?;
            let right = right.cast_into::<PyBytes>().map_err(|_| bad())?;
            pairs.push((left, right));
        }
        Ok(ModelObjects { tokens, pairs })
    }

    /// The vocabulary's `(id, token)`, in the dict's order, borrowed.
    pub fn vocab(&self) -> Vec<(TokenId, &[u8])> {
        self.tokens
            .iter()
            .map(|(id, token)| (*id, token.as_bytes()))
            .collect()
    }

    /// The merges' `(left, right)`, in order, borrowed (none if none were given).
    pub fn merges(&self) -> Vec<(&[u8], &[u8])> {
        self.pairs
            .iter()
            .map(|(left, right)| (left.as_bytes(), right.as_bytes()))
            .collect()
    }
}

/// Bytes objects by their bytes, for building merges whose parts are tokens: each part that is
/// a known token is that token's own object (with the pair rule, all of them are), which halves
/// the objects to make and the memory they take.
pub struct SharedBytes<'a, 'py> {
    py: Python<'py>,
    objects: HashMap<&'a [u8], Bound<'py, PyBytes>>,
}

impl<'a, 'py> SharedBytes<'a, 'py> {
    pub fn with_capacity(py: Python<'py>, capacity: usize) -> Self {
        SharedBytes {
            py,
            objects: HashMap::with_capacity(capacity),
        }
    }

    /// Makes `bytes` a known token, held by `object`.
    pub fn insert(&mut self, bytes: &'a [u8], object: Bound<'py, PyBytes>) {
        self.objects.insert(bytes, object);
    }

    /// The list of `(left, right)` tuples of `merges`, in order.
    pub fn merge_list<'m>(
        &self,
        merges: impl IntoIterator<Item = (&'m [u8], &'m [u8])>,
    ) -> PyResult<Bound<'py, PyList>> {
        let object = |bytes: &[u8]| match self.objects.get(bytes) {
            Some(object) => object.clone(),
            None => PyBytes::new(self.py, bytes),
        };
        let tuples = merges
            .into_iter()
            .map(|(left, right)| PyTuple::new(self.py, [object(left), object(right)]))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(self.py, tuples)
    }
}
