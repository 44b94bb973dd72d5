//! The train stage's Python bindings: pre-token counts, counting a file or texts, and the merge
//! loop, with the GIL released around the work and progress reported back to a Python callable.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::errors::{corpus_decode_error, os_error, pattern_error, type_name};
use crate::text::Utf8Text;
use bpestore_encode::{pack_short, Encoder, MergeRule as EncodeRule, SHORT_TOKEN};
use bpestore_pretokenize::{Pretokenizer, SpecialTokens, GPT2_PATTERN};
use bpestore_train::{
    count_file_spilling, count_text, Balance, CountError, MergeLoop, ParityLoop, ParityOptions,
    SortedCounts, SpillOptions, SplitWords, TieBreak, Variant, DEFAULT_CHUNK_BYTES,
};
use pyo3::exceptions::{
    PyFileNotFoundError, PyKeyError, PyKeyboardInterrupt, PyOSError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyIterator, PyList, PyTuple};
use std::collections::hash_map::Entry;

/// How often, at most, progress reaches Python (each report takes the GIL).
const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// Texts handed to the engine at once by `count_texts`: enough to make releasing the GIL worth
/// it, few enough to keep memory small.
const TEXT_BATCH_BYTES: usize = 1 << 20;

/// How often each pre-token occurs (pre-token bytes -> count, 64-bit); special tokens are never
/// counted.
#[pyclass(module = "bpestore._engine", name = "PretokenCounts")]
#[derive(Default)]
pub struct PyPretokenCounts {
    pub inner: bpestore_train::PretokenCounts,
}

#[pymethods]
impl PyPretokenCounts {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// Counts from a mapping of pre-token bytes to counts (a dict, or anything with `items()`).
    #[staticmethod]
    fn from_dict(counts: &Bound<'_, PyAny>) -> PyResult<Self> {
        let mut inner = bpestore_train::PretokenCounts::new();
        for item in counts.call_method0("items")?.try_iter()? {
            let (pretoken, count): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item?.extract()?;
            let pretoken = pretoken.cast::<PyBytes>().map_err(|_| {
                PyValueError::new_err(format!(
                    "pre-tokens must be bytes, got {}",
                    pretoken
                        .repr()
                        .map_or_else(|_| "?".into(), |r| r.to_string())
                ))
            })?;
            let count: u64 = count.extract().map_err(|_| {
                PyValueError::new_err(format!(
                    "counts must be non-negative integers below 2**64, got {count}"
                ))
            })?;
            if count > 0 {
                inner.add(pretoken.as_bytes(), count);
            }
        }
        Ok(Self { inner })
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// Equal to other counts, or to any mapping (a dict, a Counter) that holds exactly the same
    /// pre-tokens with the same counts (pre-tokens counted 0 times are not in these).
    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        if let Ok(other) = other.cast::<PyPretokenCounts>() {
            let other = &other.borrow().inner;
            let equal = other.len() == self.inner.len()
                && other.total() == self.inner.total()
                && self
                    .inner
                    .iter()
                    .all(|(pretoken, count)| other.get(pretoken) == count);
            return Ok(equal.into_pyobject(py)?.to_owned().into_any().unbind());
        }
        let Ok(items) = other.call_method0("items") else {
            return Ok(py.NotImplemented());
        };
        let mut seen = 0usize;
        for item in items.try_iter()? {
            let (pretoken, count): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item?.extract()?;
            let (Ok(pretoken), Ok(count)) = (pretoken.cast::<PyBytes>(), count.extract::<u64>())
            else {
                return Ok(false.into_pyobject(py)?.to_owned().into_any().unbind());
            };
            if self.inner.get(pretoken.as_bytes()) != count || count == 0 {
                return Ok(false.into_pyobject(py)?.to_owned().into_any().unbind());
            }
            seen += 1;
        }
        Ok((seen == self.inner.len())
            .into_pyobject(py)?
            .to_owned()
            .into_any()
            .unbind())
    }

    fn __repr__(&self) -> String {
        format!(
            "<PretokenCounts: {} distinct, {} in all>",
            self.inner.len(),
            self.inner.total()
        )
    }

    /// The number of pre-token occurrences (the sum of the counts).
    #[getter]
    fn total(&self) -> u64 {
        self.inner.total()
    }

    /// The total length of the distinct pre-tokens, in bytes.
    #[getter]
    fn pretoken_bytes(&self) -> usize {
        self.inner.pretoken_bytes()
    }

    /// How often `pretoken` occurs (`default` if never).
    #[pyo3(signature = (pretoken, default=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        pretoken: &[u8],
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        match self.inner.get(pretoken) {
            0 => Ok(default.unwrap_or_else(|| py.None().into_bound(py))),
            count => Ok(count.into_pyobject(py)?.into_any()),
        }
    }

    fn __getitem__(&self, pretoken: &Bound<'_, PyAny>) -> PyResult<u64> {
        let count = pretoken
            .cast::<PyBytes>()
            .map_or(0, |bytes| self.inner.get(bytes.as_bytes()));
        if count == 0 {
            return Err(PyKeyError::new_err(pretoken.clone().unbind()));
        }
        Ok(count)
    }

    fn __contains__(&self, pretoken: &Bound<'_, PyAny>) -> bool {
        pretoken
            .cast::<PyBytes>()
            .is_ok_and(|bytes| self.inner.get(bytes.as_bytes()) > 0)
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyIterator>> {
        self.keys(py)?.as_any().try_iter()
    }

    /// Every pre-token, in no particular order.
    fn keys<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(
            py,
            self.inner
                .iter()
                .map(|(pretoken, _)| PyBytes::new(py, pretoken)),
        )
    }

    /// The `n` most frequent pre-tokens of `min_len` to `max_len` bytes counted `min_count`
    /// times or more, most frequent first (equal counts in byte order, so the result does not
    /// depend on how the counts were made).
    #[pyo3(signature = (n, min_len = 1, max_len = usize::MAX, min_count = 1))]
    fn most_common<'py>(
        &self,
        py: Python<'py>,
        n: usize,
        min_len: usize,
        max_len: usize,
        min_count: u64,
    ) -> PyResult<Bound<'py, PyList>> {
        if n == 0 {
            return Ok(PyList::empty(py)); // (no table asked for: nothing to gather)
        }
        let mut rows: Vec<(u64, &[u8])> = self
            .inner
            .iter()
            .filter(|(pretoken, count)| {
                *count >= min_count && (min_len..=max_len).contains(&pretoken.len())
            })
            .map(|(pretoken, count)| (count, pretoken))
            .collect();
        let order = |a: &(u64, &[u8]), b: &(u64, &[u8])| b.0.cmp(&a.0).then(a.1.cmp(b.1));
        if n < rows.len() {
            rows.select_nth_unstable_by(n, order);
            rows.truncate(n);
        }
        rows.sort_unstable_by(order);
        PyList::new(
            py,
            rows.iter().map(|&(_, pretoken)| PyBytes::new(py, pretoken)),
        )
    }

    /// Every count, in the order of `keys()`.
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.inner.iter().map(|(_, count)| count))
    }

    /// Every (pre-token, count), in no particular order.
    fn items<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self
            .inner
            .iter()
            .map(|(pretoken, count)| (PyBytes::new(py, pretoken), count).into_pyobject(py))
            .collect::<PyResult<Vec<Bound<'py, PyTuple>>>>()?;
        PyList::new(py, items)
    }

    /// The counts as a dict of pre-token bytes to count.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        for (pretoken, count) in self.inner.iter() {
            dict.set_item(PyBytes::new(py, pretoken), count)?;
        }
        Ok(dict)
    }

    /// Adds `other`'s counts to these.
    fn merge(&mut self, other: PyRef<'_, PyPretokenCounts>) {
        self.inner.merge(&other.inner);
    }

    /// Forgets every count, freeing their memory.
    fn clear(&mut self) {
        self.inner.clear();
    }

    /// The counts as three flat arrays, as bytes: the pre-tokens end to end, `len() + 1`
    /// offsets into them and the counts (both little-endian 64-bit integers): the compact form
    /// for Arrow, Parquet and pickling. `sorted=True`: pre-tokens in byte order (canonical).
    #[pyo3(signature = (sorted=false))]
    fn to_arrays<'py>(
        &self,
        py: Python<'py>,
        sorted: bool,
    ) -> (
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
    ) {
        let (data, offsets, counts) = py.detach(|| self.inner.to_arrays(sorted));
        (
            PyBytes::new(py, &data),
            PyBytes::new(py, &words_to_bytes(&offsets)),
            PyBytes::new(py, &words_to_bytes(&counts)),
        )
    }

    /// Counts from the arrays of `to_arrays` (bytes or bytearray; offsets and counts
    /// little-endian 64-bit); a pre-token given twice gets the sum of its counts. ValueError
    /// for arrays that do not fit together.
    #[staticmethod]
    fn from_arrays(
        py: Python<'_>,
        data: PyBackedBytes,
        offsets: PyBackedBytes,
        counts: PyBackedBytes,
    ) -> PyResult<Self> {
        let offsets = bytes_to_words(&offsets, "offsets")?;
        let counts = bytes_to_words(&counts, "counts")?;
        let inner = py
            .detach(|| bpestore_train::PretokenCounts::from_arrays(&data, &offsets, &counts))
            .map_err(PyValueError::new_err)?;
        Ok(Self { inner })
    }

    /// Counts from their packed copy: the parts `SortedRows.pack` made, in order (layout in
    /// crates/train/src/stored.rs); ValueError ("damaged packed counts: ...") for anything else.
    #[staticmethod]
    #[pyo3(signature = (*parts))]
    fn unpack(py: Python<'_>, parts: Vec<PyBackedBytes>) -> PyResult<Self> {
        let parts: Vec<&[u8]> = parts.iter().map(|part| &part[..]).collect();
        let inner = py
            .detach(|| bpestore_train::unpack(&parts))
            .map_err(|reason| PyValueError::new_err(format!("damaged packed counts: {reason}")))?;
        Ok(Self { inner })
    }

    /// Counts from a PostgreSQL `COPY (SELECT pretoken, count ...) TO STDOUT (FORMAT BINARY)`;
    /// ValueError naming the row for NULLs, negative counts or a damaged stream.
    #[staticmethod]
    fn from_copy(py: Python<'_>, data: PyBackedBytes) -> PyResult<Self> {
        let inner = py
            .detach(|| bpestore_train::from_copy_rows(&data))
            .map_err(|reason| {
                PyValueError::new_err(format!("unreadable COPY of pre-token counts: {reason}"))
            })?;
        Ok(Self { inner })
    }

    /// Counts from rows `(pre-token bytes, count)` (a database cursor, say), read here without a
    /// Python object per row beyond the row itself; a pre-token given twice gets the sum.
    /// ValueError for a row that is not bytes and a non-negative integer.
    #[staticmethod]
    fn from_rows(rows: &Bound<'_, PyAny>) -> PyResult<Self> {
        let mut inner = bpestore_train::PretokenCounts::new();
        for (index, row) in rows.try_iter()?.enumerate() {
            let row = row?;
            let (pretoken, count): (Bound<'_, PyAny>, Bound<'_, PyAny>) = row.extract()?;
            let pretoken = pretoken.cast::<PyBytes>().map_err(|_| {
                PyValueError::new_err(format!(
                    "row {index}: a pre-token must be bytes, got {}",
                    type_name(&pretoken)
                ))
            })?;
            let count: u64 = count.extract().map_err(|_| {
                PyValueError::new_err(format!(
                    "row {index}: a count must be an integer from 0 to 2**64-1, got {count}"
                ))
            })?;
            if inner.total().checked_add(count).is_none() {
                return Err(PyValueError::new_err("the counts add up to 2**64 or more"));
            }
            if count > 0 {
                inner.add(pretoken.as_bytes(), count);
            }
        }
        Ok(Self { inner })
    }

    /// These counts' rows in byte order of the pre-tokens (`order="bytes"`, the canonical one,
    /// that of packed copies and SQLite's key), or in order of their SHA-256 (`order="sha256"`,
    /// that of PostgreSQL's key on pre-tokens), to be written in batches ([`SortedRows`]); they
    /// must not change meanwhile.
    #[pyo3(signature = (order="bytes"))]
    fn sorted_rows(slf: Bound<'_, Self>, order: &str) -> PyResult<SortedRows> {
        let py = slf.py();
        let by_sha256 = match order {
            "bytes" => false,
            "sha256" => true,
            other => {
                return Err(PyValueError::new_err(format!(
                    "order must be 'bytes' or 'sha256', not {other:?}"
                )))
            }
        };
        let (order, len, total) = {
            let counts = slf.borrow();
            let inner = &counts.inner;
            let order = py.detach(|| {
                if by_sha256 {
                    inner.sha256_sorted_ids()
                } else {
                    inner.sorted_ids()
                }
            });
            (order, inner.len(), inner.total())
        };
        Ok(SortedRows {
            counts: slf.unbind(),
            order,
            len,
            total,
        })
    }

    /// A copy of these counts (the table copied as it is, not rebuilt).
    fn copy(&self, py: Python<'_>) -> Self {
        Self {
            inner: py.detach(|| self.inner.clone()),
        }
    }

    /// New counts without the pre-tokens counted fewer than `min_count` times.
    fn pruned(&self, py: Python<'_>, min_count: u64) -> Self {
        Self {
            inner: py.detach(|| self.inner.pruned(min_count)),
        }
    }

    /// These counts split into `parts` disjoint counts by a hash of each pre-token (the same
    /// pre-token always lands in the same part, whatever counts it is in).
    fn split(&self, py: Python<'_>, parts: usize) -> Vec<Self> {
        py.detach(|| self.inner.split(parts))
            .into_iter()
            .map(|inner| Self { inner })
            .collect()
    }
}

/// Pre-token counts' rows in byte order of the pre-tokens, for writing them into a database in
/// batches: `rows(start, end)` for an `executemany`, `copy_rows(corpus_id, start, end)` for a
/// PostgreSQL binary `COPY` (the pieces of consecutive ranges make one stream). Holds the counts
/// and their order (4 bytes a row), not a copy of them.
#[pyclass(module = "bpestore._engine", name = "SortedRows", frozen)]
pub struct SortedRows {
    counts: Py<PyPretokenCounts>,
    order: Vec<u32>,
    len: usize,
    total: u64,
}

impl SortedRows {
    /// `f` of the counts in their sorted order, rows `start..end` checked first (see `check`);
    /// with the GIL released while `f` runs.
    fn with_sorted<T: Send>(
        &self,
        py: Python<'_>,
        start: usize,
        end: usize,
        f: impl FnOnce(SortedCounts<'_>) -> T + Send,
    ) -> PyResult<T> {
        let counts = self.check(py, start, end)?;
        let inner = &counts.inner;
        let order = &self.order;
        Ok(py.detach(|| f(SortedCounts::with_order(inner, order))))
    }

    /// The counts, borrowed, and `start..end` checked; ValueError if the counts changed since
    /// the order was taken or the range is not within the rows.
    fn check<'py>(
        &self,
        py: Python<'py>,
        start: usize,
        end: usize,
    ) -> PyResult<PyRef<'py, PyPretokenCounts>> {
        let counts = self.counts.bind(py).borrow();
        if counts.inner.len() != self.len || counts.inner.total() != self.total {
            return Err(PyValueError::new_err(
                "the pre-token counts changed after their rows were sorted",
            ));
        }
        if start > end || end > self.len {
            return Err(PyValueError::new_err(format!(
                "rows {start}..{end} are not within the {} rows",
                self.len
            )));
        }
        Ok(counts)
    }
}

#[pymethods]
impl SortedRows {
    fn __len__(&self) -> usize {
        self.len
    }

    /// Rows `start..end` as one flat list of their values, row after row: a pre-token, then its
    /// count, ... The pre-tokens are `bytearray`s: Python's sqlite3 binds those as BLOBs
    /// directly, where it first looks for an adapter for each `bytes` (a third of the time of
    /// inserting a row). For a multi-row `INSERT ... VALUES (?, ?), (?, ?), ...`.
    fn flat_rows<'py>(
        &self,
        py: Python<'py>,
        start: usize,
        end: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        let counts = self.check(py, start, end)?;
        let sorted = SortedCounts::with_order(&counts.inner, &self.order);
        let list = PyList::empty(py);
        for (pretoken, count) in sorted.rows(start, end) {
            list.append(PyByteArray::new(py, pretoken))?;
            list.append(count)?;
        }
        Ok(list)
    }

    /// Where to cut the rows into pieces of at most `max_rows` rows and about `max_bytes` bytes
    /// of pre-tokens (at least a row each): the end of each piece, the last being `len()`.
    fn piece_ends(
        &self,
        py: Python<'_>,
        max_rows: usize,
        max_bytes: usize,
    ) -> PyResult<Vec<usize>> {
        self.with_sorted(py, 0, self.len, |sorted| {
            sorted.piece_ends(max_rows.max(1), max_bytes)
        })
    }

    /// Rows `start..end` packed (one part of a packed copy, with a checksum; read back by
    /// `PretokenCounts.unpack`).
    fn pack<'py>(
        &self,
        py: Python<'py>,
        start: usize,
        end: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let data = self.with_sorted(py, start, end, |sorted| sorted.pack(start, end))?;
        Ok(PyBytes::new(py, &data))
    }

    /// Rows `start..end` as PostgreSQL binary `COPY` data of `(corpus_id, pretoken, count)`
    /// (int4, bytea, int8), the header with the first rows and the trailer with the last.
    fn copy_rows<'py>(
        &self,
        py: Python<'py>,
        corpus_id: i32,
        start: usize,
        end: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let data = self.with_sorted(py, start, end, |sorted| {
            sorted.copy_rows(corpus_id, start, end)
        })?;
        Ok(PyBytes::new(py, &data))
    }
}

/// 64-bit words as little-endian bytes.
fn words_to_bytes(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|word| word.to_le_bytes()).collect()
}

/// Little-endian bytes as 64-bit words; ValueError naming `what` if the length is not a
/// multiple of 8.
fn bytes_to_words(bytes: &[u8], what: &str) -> PyResult<Vec<u64>> {
    if !bytes.len().is_multiple_of(8) {
        return Err(PyValueError::new_err(format!(
            "{what} must be 64-bit integers: {} bytes is not a multiple of 8",
            bytes.len()
        )));
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|chunk| u64::from_le_bytes(chunk.try_into().expect("8 bytes")))
        .collect())
}

/// A pre-tokenizer and special tokens from Python's arguments, or ValueError.
fn pretokenizer_and_specials(
    pattern: &str,
    special_tokens: Vec<String>,
) -> PyResult<(Pretokenizer, SpecialTokens)> {
    let pretokenizer =
        Pretokenizer::new(pattern).map_err(|error| PyValueError::new_err(error.to_string()))?;
    if let Some(token) = special_tokens.iter().find(|token| token.is_empty()) {
        return Err(PyValueError::new_err(format!(
            "special tokens must be non-empty strings, got {token:?}"
        )));
    }
    Ok((pretokenizer, SpecialTokens::new(&special_tokens)))
}

/// FileNotFoundError for a missing corpus or a directory, with the words of Python's
/// `bpestore.corpus.check_corpus_path`.
fn check_corpus_path(py: Python<'_>, path: &std::path::Path) -> PyResult<()> {
    let errno = py.import("errno")?;
    let shown = path.display().to_string();
    if !path.exists() {
        let code: i32 = errno.getattr("ENOENT")?.extract()?;
        return Err(PyFileNotFoundError::new_err((
            code,
            "No such corpus file",
            shown,
        )));
    }
    if !path.is_file() {
        let code: i32 = errno.getattr("EISDIR")?.extract()?;
        return Err(PyFileNotFoundError::new_err((
            code,
            "Not a file (a directory?), cannot read a corpus",
            shown,
        )));
    }
    Ok(())
}

/// Reports progress to a Python callable from any thread, at most every [`PROGRESS_INTERVAL`],
/// with the amount done since the last report; it also lets Python's signal handlers run (so
/// that Ctrl-C stops the work), and remembers the first exception, which stops the work.
struct Reporter {
    callback: Option<Py<PyAny>>,
    pending: AtomicU64,
    last: Mutex<Instant>,
    error: Mutex<Option<PyErr>>,
}

impl Reporter {
    fn new(callback: Option<Py<PyAny>>) -> Reporter {
        Reporter {
            callback,
            pending: AtomicU64::new(0),
            last: Mutex::new(Instant::now()),
            error: Mutex::new(None),
        }
    }

    /// Notes `amount` more done; reports it if it is time. Break once Python raised.
    fn add(&self, amount: u64) -> ControlFlow<()> {
        self.pending.fetch_add(amount, Ordering::Relaxed);
        let due = {
            let Ok(mut last) = self.last.try_lock() else {
                return ControlFlow::Continue(()); // another thread is reporting
            };
            let now = Instant::now();
            if now.duration_since(*last) < PROGRESS_INTERVAL {
                false
            } else {
                *last = now;
                true
            }
        };
        if due {
            self.report()
        } else if self.failed() {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }

    fn failed(&self) -> bool {
        self.error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Hands Python what is pending now (needs the GIL: taken here).
    fn report(&self) -> ControlFlow<()> {
        if self.failed() {
            return ControlFlow::Break(());
        }
        let result = Python::attach(|py| -> PyResult<()> {
            py.check_signals()?;
            let amount = self.pending.swap(0, Ordering::Relaxed);
            if let (Some(callback), true) = (&self.callback, amount > 0) {
                callback.call1(py, (amount,))?;
            }
            Ok(())
        });
        match result {
            Ok(()) => ControlFlow::Continue(()),
            Err(error) => {
                self.error
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get_or_insert(error);
                ControlFlow::Break(())
            }
        }
    }

    /// The exception Python raised during the work, if any; else reports what is left.
    fn finish(self) -> PyResult<()> {
        if let ControlFlow::Break(()) = self.report() {
            let error = self.error.into_inner().unwrap_or_else(|e| e.into_inner());
            return Err(error.unwrap_or_else(|| PyKeyboardInterrupt::new_err(())));
        }
        Ok(())
    }
}

/// The pre-token counts of a UTF-8 corpus file (special tokens cut out, never counted), counted
/// in parallel by `threads` threads (None: one per CPU) over chunks of about `chunk_bytes`.
/// `progress(n)` is called with the number of bytes counted since its last call. With
/// `max_memory`, the counting tables hold at most about that many bytes, spilling sorted runs to
/// a directory made in `spill_dir` (None: the system's temporary directory) and merging them at
/// the end (`spill_dir` is ignored without `max_memory`); `min_count` (spilling only) keeps the
/// pre-tokens counted at least that often.
#[pyfunction]
#[pyo3(signature = (
    path, pattern, special_tokens, threads=None, progress=None, *, chunk_bytes=None,
    max_memory=None, spill_dir=None, min_count=None
))]
#[allow(clippy::too_many_arguments)] // (Python's keyword arguments)
fn count_file(
    py: Python<'_>,
    path: PathBuf,
    pattern: &str,
    special_tokens: Vec<String>,
    threads: Option<usize>,
    progress: Option<Py<PyAny>>,
    chunk_bytes: Option<usize>,
    max_memory: Option<usize>,
    spill_dir: Option<PathBuf>,
    min_count: Option<u64>,
) -> PyResult<PyPretokenCounts> {
    check_corpus_path(py, &path)?;
    let (pretokenizer, specials) = pretokenizer_and_specials(pattern, special_tokens)?;
    let chunk_bytes = chunk_bytes.unwrap_or(DEFAULT_CHUNK_BYTES);
    if chunk_bytes == 0 {
        return Err(PyValueError::new_err("chunk_bytes must be at least 1"));
    }
    let spill = match (max_memory, spill_dir, min_count) {
        (Some(max_bytes), dir, min_count) => {
            let dir = dir.unwrap_or_else(std::env::temp_dir);
            let mut options = SpillOptions::new(max_bytes, dir);
            options.min_count = min_count.unwrap_or(1);
            Some(options)
        }
        (None, _, None) => None,
        (None, _, Some(_)) => {
            return Err(PyValueError::new_err(
                "min_count is applied as spilled counts are merged: give max_memory too",
            ))
        }
    };
    let reporter = Reporter::new(progress);
    let result = py.detach(|| {
        let progress = |bytes| reporter.add(bytes);
        count_file_spilling(
            &path,
            &pretokenizer,
            &specials,
            threads.unwrap_or(0),
            chunk_bytes,
            &progress,
            spill.as_ref(),
        )
    });
    let stopped = matches!(result, Err(CountError::Stopped));
    let finished = reporter.finish();
    if stopped {
        finished?;
        return Err(PyKeyboardInterrupt::new_err(()));
    }
    match result {
        Ok(inner) => {
            finished?;
            Ok(PyPretokenCounts { inner })
        }
        Err(CountError::Decode { offset, reason }) => Err(corpus_decode_error(
            py,
            path.display().to_string(),
            offset,
            reason.to_string(),
        )),
        Err(CountError::Pattern(error)) => {
            Err(pattern_error(py, format!("{}: {error}", path.display())))
        }
        Err(CountError::Io(error)) => Err(os_error(error)),
        Err(CountError::Spill { dir, error }) => Err(spill_error(&dir, error)),
        Err(CountError::Stopped) => unreachable!("handled above"),
    }
}

/// A failure to spill counts to `dir`, as `OSError(errno, "spilling pre-token counts failed:
/// ...", dir)`: one line, "[Errno 28] spilling pre-token counts failed: No space left on device:
/// '/tmp'".
fn spill_error(dir: &std::path::Path, error: std::io::Error) -> PyErr {
    let words = error.to_string();
    match error.raw_os_error() {
        Some(code) => {
            let suffix = format!(" (os error {code})");
            let strerror = words.strip_suffix(&suffix).unwrap_or(&words);
            PyOSError::new_err((
                code,
                format!("spilling pre-token counts failed: {strerror}"),
                dir.display().to_string(),
            ))
        }
        None => PyOSError::new_err(format!(
            "spilling pre-token counts to {} failed: {words}",
            dir.display()
        )),
    }
}

/// The offsets at which `count_file` cuts a file into chunks of about `chunk_bytes`: `[0, ...,
/// size]` (for tests: chunk edges are where counting could go wrong).
#[pyfunction]
fn file_chunk_boundaries(
    py: Python<'_>,
    path: PathBuf,
    pattern: &str,
    special_tokens: Vec<String>,
    chunk_bytes: usize,
) -> PyResult<Vec<u64>> {
    check_corpus_path(py, &path)?;
    let (pretokenizer, specials) = pretokenizer_and_specials(pattern, special_tokens)?;
    py.detach(|| {
        bpestore_train::file_chunk_boundaries(&path, &pretokenizer, &specials, chunk_bytes)
    })
    .map_err(|error| match error {
        CountError::Io(error) => os_error(error),
        other => PyValueError::new_err(other.to_string()),
    })
}

/// The pre-token counts of some texts (each cut at its special tokens, which are not counted).
#[pyfunction]
fn count_texts(
    py: Python<'_>,
    texts: &Bound<'_, PyAny>,
    pattern: &str,
    special_tokens: Vec<String>,
) -> PyResult<PyPretokenCounts> {
    let (pretokenizer, specials) = pretokenizer_and_specials(pattern, special_tokens)?;
    let mut counts = bpestore_train::PretokenCounts::new();
    let mut batch: Vec<Utf8Text> = Vec::new();
    let mut batch_bytes = 0;
    // The index of the text (counted from 0) where the pattern gave up, and why.
    let mut texts_before = 0usize;
    let mut count_batch =
        |batch: &mut Vec<Utf8Text>, counts: &mut bpestore_train::PretokenCounts| -> PyResult<()> {
            let result = py.detach(|| {
                for (index, text) in batch.iter().enumerate() {
                    count_text(text, &pretokenizer, &specials, counts)
                        .map_err(|error| (texts_before + index, error))?;
                }
                Ok(())
            });
            texts_before += batch.len();
            batch.clear();
            result.map_err(|(index, error)| pattern_error(py, format!("text {index}: {error}")))
        };
    for text in texts.try_iter()? {
        let text: Utf8Text = text?.extract()?;
        batch_bytes += text.len();
        batch.push(text);
        if batch_bytes >= TEXT_BATCH_BYTES {
            count_batch(&mut batch, &mut counts)?;
            batch_bytes = 0;
        }
    }
    count_batch(&mut batch, &mut counts)?;
    Ok(PyPretokenCounts { inner: counts })
}

/// An encoder of a base's merges (pair rule) that splits every word exactly as replaying the
/// merges in order does, or None when that is not sure. It is sure when each merge joins tokens
/// that exist before it (bytes, or tokens of earlier merges) and makes bytes no token has yet:
/// then a merge's token is an operand only of later merges, so no pair ranked below the last one
/// applied ever appears again, and GPT-2's rule (the lowest-ranked pair present first) applies
/// the merges present in rank order, as the replay does.
fn base_encoder(base: &[(Vec<u8>, Vec<u8>)]) -> Option<Encoder> {
    let mut known: std::collections::HashSet<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let mut vocab: Vec<(u32, Vec<u8>)> = (0..=255u8).map(|b| (u32::from(b), vec![b])).collect();
    for (left, right) in base {
        if !known.contains(left) || !known.contains(right) {
            return None;
        }
        let token = [left.as_slice(), right.as_slice()].concat();
        if !known.insert(token.clone()) {
            return None;
        }
        vocab.push((u32::try_from(vocab.len()).ok()?, token));
    }
    Encoder::new(
        vocab,
        base.to_vec(),
        Vec::new(),
        GPT2_PATTERN,
        EncodeRule::Pair,
    )
    .ok()
}

/// The ids of each word's tokens under `encoder` (of `base`'s merges: a byte is its value, the
/// token of merge `i` is `256 + i`), for the words the merge loop splits (two bytes or more,
/// counted), in the counts' order; on the threads of rayon's pool. A word is first cut between
/// two bytes that no token of the base holds side by side (no token can span them, so each part
/// merges on its own, exactly): the parts repeat (a SuperBPE word is a run of ordinary words),
/// and each distinct part is encoded once per thread.
fn split_by_encoder(
    counts: &bpestore_train::PretokenCounts,
    encoder: &Encoder,
    base: &[(Vec<u8>, Vec<u8>)],
) -> SplitWords {
    use rayon::prelude::*;
    let mut joined = vec![false; 256 * 256];
    for (left, right) in base {
        // The merge's new adjacency: the last byte of its left with the first of its right.
        if let (Some(&a), Some(&b)) = (left.last(), right.first()) {
            joined[usize::from(a) * 256 + usize::from(b)] = true;
        }
    }
    let words: Vec<&[u8]> = counts
        .iter()
        .filter(|(word, count)| word.len() >= 2 && *count > 0)
        .map(|(word, _)| word)
        .collect();
    // Each share of the words on a thread of its own (one share per thread: a cache per rayon
    // task encoded each part over again in each task), then one after the other.
    let share = words
        .len()
        .div_ceil(rayon::current_num_threads().max(1))
        .max(1);
    let shares: Vec<SplitWords> = words
        .par_chunks(share)
        .map(|chunk| {
            let mut parts = PartIds::new();
            let mut split = SplitWords {
                ids: Vec::with_capacity(chunk.iter().map(|word| word.len()).sum::<usize>() / 3),
                lengths: Vec::with_capacity(chunk.len()),
            };
            for word in chunk {
                let before = split.ids.len();
                for part in parts_between(word, &joined) {
                    split.ids.extend_from_slice(parts.of(part, encoder));
                }
                split.lengths.push((split.ids.len() - before) as u32);
            }
            split
        })
        .collect();
    let mut shares = shares.into_iter();
    let mut split = shares.next().unwrap_or_default();
    for share in shares {
        split.ids.extend_from_slice(&share.ids);
        split.lengths.extend_from_slice(&share.lengths);
    }
    split
}

/// The ids of the parts of words under an encoder (see [`split_by_encoder`]), each distinct part
/// encoded once. Looking a part up is most of the split's time, and it waits on memory: a part
/// of up to 15 bytes (most are) is keyed by its bytes packed in one integer with its length
/// (the vocabulary's [`pack_short`]),
/// hashed and compared at once, and the key leads straight to its ids; and the last such part met
/// at each place of a small table (a hash of its bytes), with its ids if they are few, is found
/// there first: the common parts (" the", " of") in a table that stays in the processor's cache.
struct PartIds<'w> {
    /// Where each part's ids are in `ids`: start and end.
    short: rustc_hash::FxHashMap<u128, (usize, usize)>,
    long: rustc_hash::FxHashMap<&'w [u8], (usize, usize)>,
    ids: Vec<u32>,
    recent: Vec<RecentPart>,
}

/// A part of [`PartIds::recent`]: its packed bytes (0: none yet) and up to three ids.
#[derive(Clone, Copy, Default)]
struct RecentPart {
    key: u128,
    ids: [u32; 3],
    len: u32,
}

/// [`PartIds::recent`] has 2^this places (4,096 of 32 bytes: 128 KB).
const RECENT_PART_BITS: u32 = 12;

impl<'w> PartIds<'w> {
    fn new() -> PartIds<'w> {
        PartIds {
            short: rustc_hash::FxHashMap::default(),
            long: rustc_hash::FxHashMap::default(),
            ids: Vec::new(),
            recent: vec![RecentPart::default(); 1 << RECENT_PART_BITS],
        }
    }

    /// The ids of `part` under `encoder` (encoded now if it is new).
    fn of(&mut self, part: &'w [u8], encoder: &Encoder) -> &[u32] {
        if part.len() > SHORT_TOKEN {
            let (start, end) = match self.long.entry(part) {
                Entry::Occupied(known) => *known.get(),
                Entry::Vacant(new) => *new.insert(encode(&mut self.ids, part, encoder)),
            };
            return &self.ids[start..end];
        }
        let key = pack_short(part); // (never 0: its top byte is the length; 0 is an empty place)
        let place = ((key as u64 ^ (key >> 64) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            >> (64 - RECENT_PART_BITS)) as usize;
        if self.recent[place].key == key {
            let recent = &self.recent[place];
            return &recent.ids[..recent.len as usize];
        }
        let (start, end) = match self.short.entry(key) {
            Entry::Occupied(known) => *known.get(),
            Entry::Vacant(new) => *new.insert(encode(&mut self.ids, part, encoder)),
        };
        if end - start <= 3 {
            let mut ids = [0u32; 3];
            ids[..end - start].copy_from_slice(&self.ids[start..end]);
            self.recent[place] = RecentPart {
                key,
                ids,
                len: (end - start) as u32,
            };
        }
        &self.ids[start..end]
    }
}

/// Encodes `part` at the end of `ids`; returns where its ids are there.
fn encode(ids: &mut Vec<u32>, part: &[u8], encoder: &Encoder) -> (usize, usize) {
    let start = ids.len();
    ids.extend(encoder.piece_ids(part));
    (start, ids.len())
}

/// The parts of `word` cut between two bytes that `joined` (indexed by `first << 8 | second`)
/// does not hold side by side.
fn parts_between<'w>(word: &'w [u8], joined: &'w [bool]) -> impl Iterator<Item = &'w [u8]> + 'w {
    let mut start = 0;
    (1..=word.len()).filter_map(move |end| {
        let whole =
            end == word.len() || !joined[usize::from(word[end - 1]) * 256 + usize::from(word[end])];
        whole.then(|| {
            let part = &word[start..end];
            start = end;
            part
        })
    })
}

/// Up to `max_merges` merges learned from pre-token counts, best first, as (left bytes, right
/// bytes): CS336's merge loop (most frequent pair; ties to the greatest pair of bytes). Stops
/// early when no pair is left. `progress(n)` is called with the number of merges done since its
/// last call. `consume=True` empties `counts` once read, to free their memory for the merges.
#[pyfunction]
/// `base`: a base tokenizer's merges, applied first to split the words (see
/// `MergeLoop::with_base`); only the new merges are returned. `base_ranks`: instead, a
/// token-rule base's vocabulary as (id, bytes), ids being ranks: each word is first split as
/// tiktoken encodes it (see `MergeLoop::with_split_words`).
/// `tie_break`: `"cs336"` (the default) or `"huggingface"` (Hugging Face `BpeTrainer`'s order
/// of equal counts; with a pair-rule base too, its tokens numbered in the order of its merges, as
/// a Hugging Face training that continues it numbers them; not with `base_ranks`).
/// `max_words`: no new token holds more than this many words (runs of bytes other than the space).
#[pyo3(signature = (counts, max_merges, progress=None, *, consume=false, base=None, base_ranks=None, tie_break="cs336", max_words=None))]
#[allow(clippy::too_many_arguments)]
fn learn_merges<'py>(
    py: Python<'py>,
    counts: Bound<'py, PyPretokenCounts>,
    max_merges: usize,
    progress: Option<Py<PyAny>>,
    consume: bool,
    base: Option<Vec<(Vec<u8>, Vec<u8>)>>,
    base_ranks: Option<Vec<(u32, Vec<u8>)>>,
    tie_break: &str,
    max_words: Option<usize>,
) -> PyResult<Bound<'py, PyList>> {
    let tie = match tie_break {
        "cs336" => TieBreak::Cs336,
        "huggingface" => TieBreak::HuggingFace,
        other => {
            return Err(PyValueError::new_err(format!(
                "tie_break is 'cs336' or 'huggingface', not {other:?}"
            )))
        }
    };
    if tie != TieBreak::Cs336 && base_ranks.is_some() {
        return Err(PyValueError::new_err(
            "Hugging Face's tie-break continues a base of merges, not one of ranks",
        ));
    }
    if base.is_some() && base_ranks.is_some() {
        return Err(PyValueError::new_err(
            "give a base's merges (pair rule) or its ranks (token rule), not both",
        ));
    }
    // The token rule's splitter: an encoder of the base's ranks (pattern and special tokens are
    // unused: it only merges single words).
    let splitter = base_ranks
        .map(|ranks| {
            Encoder::new(
                ranks,
                Vec::new(),
                Vec::new(),
                GPT2_PATTERN,
                EncodeRule::Token,
            )
            .map_err(|error| PyValueError::new_err(error.to_string()))
        })
        .transpose()?;
    let reporter = Reporter::new(progress);
    let limited = |merge_loop: MergeLoop| match max_words {
        Some(most) => merge_loop.with_max_words(most),
        None => merge_loop,
    };
    let run = |counts: &bpestore_train::PretokenCounts| {
        limited(match (&base, &splitter) {
            (Some(base), _) => base_encoder(base)
                .and_then(|encoder| {
                    let split = split_by_encoder(counts, &encoder, base);
                    MergeLoop::with_base_ids(counts, base, Some(max_merges), split)
                })
                .unwrap_or_else(|| MergeLoop::with_base(counts, base))
                .with_tie_break(tie),
            (None, Some(splitter)) => MergeLoop::with_split_words(counts, |word| {
                splitter
                    .piece_ids(word)
                    .into_iter()
                    .map(|id| splitter.token_bytes(id).map_or(0, <[u8]>::len))
                    .collect()
            }),
            (None, None) => MergeLoop::new(counts).with_tie_break(tie),
        })
    };
    let take = |merge_loop: MergeLoop| {
        let mut merges = Vec::new();
        for merge in merge_loop.take(max_merges) {
            merges.push(merge);
            if reporter.add(1).is_break() {
                break;
            }
        }
        merges
    };
    // The counts are read (shared: other threads may read them meanwhile, the store writing
    // them) only while the loop is built; it holds words of its own, so from then on nobody
    // borrows them, and even the progress callback may empty them.
    let merge_loop = {
        let counts = counts.borrow();
        let inner = &counts.inner;
        py.detach(|| run(inner))
    };
    if consume {
        // Emptied once read, to free their memory for the merges (unless someone reads them).
        if let Ok(mut counts) = counts.try_borrow_mut() {
            counts.inner.clear();
        }
    }
    // The counts (when emptied) and the loop's scratch tables, freed, back to the system.
    py.detach(bpestore_train::release_free_memory);
    let merges = py.detach(|| take(merge_loop));
    reporter.finish()?;
    let merges = merges
        .iter()
        .map(|(left, right)| (PyBytes::new(py, left), PyBytes::new(py, right)).into_pyobject(py))
        .collect::<PyResult<Vec<Bound<'py, PyTuple>>>>()?;
    PyList::new(py, merges)
}

/// Up to `max_merges` merges of parity-aware BPE (Foroutan et al., 2025) learned from one
/// pre-token count table per language (`train`), best first, as (left bytes, right bytes); and
/// for each merge the index of the language it was chosen for (None: a global merge). Stops
/// early when every language is spent (see `bpestore_train::ParityLoop`).
///
/// The language of each merge is the one whose part of the parallel development set `dev` (a
/// count table per language) takes the most tokens; with `ratio` instead (a float per language),
/// the one least compressed for its ratio; with neither, the one whose training text takes the
/// most tokens. `variant`: `"base"` or `"window"` (with `window_size` and `alpha`).
/// `global_merges`: the first merges are plain BPE's on all languages together. `tie_break`:
/// `"cs336"` (the greatest pair of bytes) or `"huggingface"` (`ParityBpeTrainer`'s: the
/// greatest pair of byte-level strings). `progress(n)` as for `learn_merges`.
#[pyfunction]
#[pyo3(signature = (train, max_merges, progress=None, *, dev=None, ratio=None, variant="base", window_size=100, alpha=2.0, global_merges=0, tie_break="cs336"))]
#[allow(clippy::too_many_arguments)]
fn learn_parity_merges<'py>(
    py: Python<'py>,
    train: Vec<Bound<'py, PyPretokenCounts>>,
    max_merges: usize,
    progress: Option<Py<PyAny>>,
    dev: Option<Vec<Bound<'py, PyPretokenCounts>>>,
    ratio: Option<Vec<f64>>,
    variant: &str,
    window_size: usize,
    alpha: f64,
    global_merges: usize,
    tie_break: &str,
) -> PyResult<(Bound<'py, PyList>, Vec<Option<usize>>)> {
    let tie = match tie_break {
        "cs336" => TieBreak::Cs336,
        "huggingface" => TieBreak::ByteLevelString,
        other => {
            return Err(PyValueError::new_err(format!(
                "tie_break is 'cs336' or 'huggingface', not {other:?}"
            )))
        }
    };
    let variant = match variant {
        "base" => Variant::Base,
        "window" if window_size == 0 => {
            return Err(PyValueError::new_err("window_size must be at least 1"))
        }
        "window" if !(alpha.is_finite() && alpha > 0.0) => {
            return Err(PyValueError::new_err(format!(
                "alpha must be a finite number above 0, not {alpha}"
            )))
        }
        "window" => Variant::Window {
            size: window_size,
            alpha,
        },
        other => {
            return Err(PyValueError::new_err(format!(
                "variant is 'base' or 'window', not {other:?}"
            )))
        }
    };
    if train.is_empty() {
        return Err(PyValueError::new_err(
            "give one count table per language, at least one",
        ));
    }
    if dev.is_some() && ratio.is_some() {
        return Err(PyValueError::new_err(
            "give a development set or ratios, not both",
        ));
    }
    if dev.as_ref().is_some_and(|dev| dev.len() != train.len())
        || ratio
            .as_ref()
            .is_some_and(|ratio| ratio.len() != train.len())
    {
        return Err(PyValueError::new_err(format!(
            "give one development count table (or ratio) per language: {} languages",
            train.len()
        )));
    }
    if let Some(bad) = ratio
        .iter()
        .flatten()
        .find(|r| !(r.is_finite() && **r > 0.0))
    {
        return Err(PyValueError::new_err(format!(
            "a ratio is a finite number above 0, not {bad}"
        )));
    }
    let options = ParityOptions {
        variant,
        global_merges,
        tie,
    };
    let merge_loop = {
        let train_borrowed: Vec<_> = train.iter().map(|counts| counts.borrow()).collect();
        let dev_borrowed: Option<Vec<_>> = dev
            .as_ref()
            .map(|dev| dev.iter().map(|counts| counts.borrow()).collect());
        let train_refs: Vec<&bpestore_train::PretokenCounts> =
            train_borrowed.iter().map(|counts| &counts.inner).collect();
        let dev_refs: Option<Vec<&bpestore_train::PretokenCounts>> = dev_borrowed
            .as_ref()
            .map(|dev| dev.iter().map(|counts| &counts.inner).collect());
        py.detach(|| {
            let balance = match (&dev_refs, &ratio) {
                (Some(dev), _) => Balance::Dev(dev),
                (None, Some(ratio)) => Balance::Ratio(ratio),
                (None, None) => Balance::Training,
            };
            ParityLoop::new(&train_refs, balance, options)
        })
    };
    let reporter = Reporter::new(progress);
    let (merges, languages) = py.detach(|| {
        let mut merge_loop = merge_loop;
        let (mut merges, mut languages) = (Vec::new(), Vec::new());
        while merges.len() < max_merges {
            let Some(merge) = merge_loop.next() else {
                break;
            };
            merges.push(merge);
            languages.push(merge_loop.last_language());
            if reporter.add(1).is_break() {
                break;
            }
        }
        (merges, languages)
    });
    reporter.finish()?;
    let merges = merges
        .iter()
        .map(|(left, right)| (PyBytes::new(py, left), PyBytes::new(py, right)).into_pyobject(py))
        .collect::<PyResult<Vec<Bound<'py, PyTuple>>>>()?;
    Ok((PyList::new(py, merges)?, languages))
}

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<PyPretokenCounts>()?;
    module.add_class::<SortedRows>()?;
    module.add_function(wrap_pyfunction!(count_file, module)?)?;
    module.add_function(wrap_pyfunction!(count_texts, module)?)?;
    module.add_function(wrap_pyfunction!(file_chunk_boundaries, module)?)?;
    module.add_function(wrap_pyfunction!(learn_merges, module)?)?;
    module.add_function(wrap_pyfunction!(learn_parity_merges, module)?)?;
    Ok(())
}
