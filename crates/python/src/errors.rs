//! The project's own exception classes, handed to the engine once by `bpestore.engine` (the one
//! Python module that imports this extension) through `register_errors`: the bindings raise them
//! without importing any module of the project, so the seam is crossed one way only.

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

/// The classes, in the order `register_errors` takes them.
struct Classes {
    pattern: Py<PyType>,
    corpus_decode: Py<PyType>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

/// Hands the engine the project's exception classes: `PatternError(message)` and
/// `CorpusDecodeError(path, offset, reason)`. The first registration holds; later ones are
/// ignored (a module imported twice, say). Without one, the engine raises `ValueError`s with
/// the same messages (both classes are `ValueError`s).
#[pyfunction]
fn register_errors(
    py: Python<'_>,
    pattern_error: Bound<'_, PyType>,
    corpus_decode_error: Bound<'_, PyType>,
) {
    let _ = CLASSES.set(
        py,
        Classes {
            pattern: pattern_error.unbind(),
            corpus_decode: corpus_decode_error.unbind(),
        },
    );
}

/// The project's `PatternError(message)`: a pattern that failed on a text (the backtracking
/// limit hit, or text that no match covers).
pub fn pattern_error(py: Python<'_>, message: String) -> PyErr {
    match CLASSES.get(py) {
        Some(classes) => raised(classes.pattern.bind(py).call1((message,))),
        None => PyValueError::new_err(message),
    }
}

/// The project's `CorpusDecodeError(path, offset, reason)`: invalid UTF-8 at byte `offset`.
pub fn corpus_decode_error(py: Python<'_>, path: String, offset: u64, reason: String) -> PyErr {
    match CLASSES.get(py) {
        Some(classes) => raised(classes.corpus_decode.bind(py).call1((path, offset, reason))),
        None => PyValueError::new_err(format!(
            "{path}: invalid UTF-8 at byte offset {offset} ({reason})"
        )),
    }
}

/// An I/O error as Python's `OSError(errno, strerror)` (so Python code gets `errno`, and the
/// subclass Python picks for it, as from its own calls); one without an OS code keeps its words.
pub fn os_error(error: std::io::Error) -> PyErr {
    match error.raw_os_error() {
        Some(code) => {
            let words = error.to_string();
            let suffix = format!(" (os error {code})");
            let strerror = words.strip_suffix(&suffix).unwrap_or(&words).to_string();
            PyOSError::new_err((code, strerror))
        }
        None => PyOSError::new_err(error.to_string()),
    }
}

/// The exception a class call made, or the error making it raised.
fn raised(made: PyResult<Bound<'_, PyAny>>) -> PyErr {
    match made {
        Ok(error) => PyErr::from_value(error),
        Err(error) => error,
    }
}

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(register_errors, module)?)
}

/// A Python object's type name, for messages.
pub fn type_name(object: &Bound<'_, PyAny>) -> String {
    object
        .get_type()
        .name()
        .map_or_else(|_| "?".to_string(), |name| name.to_string())
}

/// A Python object's `repr()`, for messages (never failing: an object whose `__repr__` raises
/// is `<unprintable>`).
pub fn repr(object: &Bound<'_, PyAny>) -> String {
    object
        .repr()
        .map_or_else(|_| "<unprintable>".to_string(), |r| r.to_string())
}
