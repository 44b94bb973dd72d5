//! The pretokenize stage's Python bindings: `Pretokenizer` (pieces and safe cuts, special tokens
//! included), the known patterns, and Python-style UTF-8 errors.

use crate::errors::pattern_error;
use bpestore_pretokenize::{
    check_utf8, find_cut, last_safe_cut, next_safe_cut, Part, PretokenizeError, Pretokenizer,
    SpecialTokens, CL100K_PATTERN, GPT2_DIGITS_PATTERN, GPT2_DIGIT_RUNS_PATTERN, GPT2_PATTERN,
    LLAMA3_PATTERN, O200K_PATTERN, QWEN2_PATTERN, SUPERBPE_PATTERN,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// A pre-tokenizer with its special tokens: `regex.findall(pattern, text)` on the text between
/// special tokens (found longest first), each special token a piece of its own.
#[pyclass(name = "Pretokenizer", module = "bpestore._engine", frozen)]
pub struct PyPretokenizer {
    pretokenizer: Pretokenizer,
    specials: SpecialTokens,
}

impl PyPretokenizer {
    /// The byte spans of the pieces of `text`, special tokens included; an error if the pattern
    /// fails on it (backtracks catastrophically, or leaves some of it uncovered).
    fn spans(&self, text: &str) -> Result<Vec<(usize, usize)>, PretokenizeError> {
        let mut spans = Vec::new();
        let base = text.as_ptr() as usize;
        let mut push = |piece: &str| {
            let start = piece.as_ptr() as usize - base;
            spans.push((start, start + piece.len()));
        };
        for part in self.specials.split(text) {
            match part {
                Part::Text(text) => self.pretokenizer.try_for_each_piece(text, &mut push)?,
                Part::Special { text, .. } => push(text),
            }
        }
        Ok(spans)
    }
}

#[pymethods]
impl PyPretokenizer {
    /// `regex_engine=True` runs the regex engine even for the three known patterns (for tests
    /// and benchmarks of the scanners).
    #[new]
    #[pyo3(signature = (pattern, special_tokens = Vec::new(), *, regex_engine = false))]
    fn new(pattern: &str, special_tokens: Vec<String>, regex_engine: bool) -> PyResult<Self> {
        if special_tokens.iter().any(String::is_empty) {
            return Err(PyValueError::new_err(
                "a special token cannot be the empty string",
            ));
        }
        let pretokenizer = if regex_engine {
            Pretokenizer::with_regex_engine(pattern)
        } else {
            Pretokenizer::new(pattern)
        }
        .map_err(value_error)?;
        Ok(PyPretokenizer {
            pretokenizer,
            specials: SpecialTokens::new(&special_tokens),
        })
    }

    /// The pre-tokenizer pattern.
    #[getter]
    fn pattern(&self) -> &str {
        self.pretokenizer.pattern()
    }

    /// The special tokens, as given.
    #[getter]
    fn special_tokens(&self) -> Vec<String> {
        self.specials.tokens().to_vec()
    }

    /// Whether a space between two characters that are not whitespace is a safe cut.
    #[getter]
    fn split_safe(&self) -> bool {
        self.pretokenizer.is_split_safe()
    }

    /// Whether a hand-written scanner (rather than the regex engine) splits the text.
    #[getter]
    fn uses_scanner(&self) -> bool {
        self.pretokenizer.uses_scanner()
    }

    /// How many pieces `pretokenize(text)` would give, without building them (for benchmarks).
    fn piece_count(&self, py: Python<'_>, text: &str) -> PyResult<usize> {
        py.detach(|| {
            let mut count = 0;
            for part in self.specials.split(text) {
                match part {
                    Part::Text(text) => {
                        self.pretokenizer.try_for_each_piece(text, |_| count += 1)?
                    }
                    Part::Special { .. } => count += 1,
                }
            }
            Ok(count)
        })
        .map_err(|error| failed(py, error))
    }

    /// The pre-tokens of `text`, special tokens as pieces of their own.
    fn pretokenize<'t>(&self, py: Python<'_>, text: &'t str) -> PyResult<Vec<&'t str>> {
        let spans = py
            .detach(|| self.spans(text))
            .map_err(|error| failed(py, error))?;
        Ok(spans
            .into_iter()
            .map(|(start, end)| &text[start..end])
            .collect())
    }

    /// The last index (in characters) at which `text`, the start of a longer stream, can be cut
    /// without changing its pre-tokens, whatever follows; 0 if none.
    fn last_safe_cut(&self, py: Python<'_>, text: &str) -> usize {
        let cut = py.detach(|| last_safe_cut(text, &self.pretokenizer, &self.specials));
        text[..cut].chars().count()
    }

    /// The first safe cut (a byte offset) at or after byte `start` of `window`, a piece of a
    /// UTF-8 file; None if the window has none.
    fn next_safe_cut(&self, py: Python<'_>, window: &[u8], start: usize) -> Option<usize> {
        py.detach(|| next_safe_cut(window, start, &self.pretokenizer, &self.specials))
    }

    /// The first safe cut at or after byte `target` of a UTF-8 text of `size` bytes that
    /// `read(start, end)` returns bytes `start..end` of (a window at a time, about 64 KiB, more
    /// only where the text has no cut): 0 for a target at or before the start, `size` where no
    /// cut follows it. The windows lie as for the engine's own chunks of a file (one rule: the
    /// engine's `find_cut`); for a source the engine cannot read itself (a stream, a remote file).
    fn find_cut(&self, size: u64, target: u64, read: &Bound<'_, PyAny>) -> PyResult<u64> {
        let mut window = Vec::new();
        find_cut(
            size,
            target,
            &self.pretokenizer,
            &self.specials,
            &mut window,
            |start, end, window| {
                let data = read.call1((start, end))?.cast_into::<PyBytes>()?;
                let data = data.as_bytes();
                if data.len() as u64 != end - start {
                    return Err(PyValueError::new_err(format!(
                        "read({start}, {end}) returned {} bytes, not {}",
                        data.len(),
                        end - start
                    )));
                }
                window.clear();
                window.extend_from_slice(data);
                Ok(())
            },
        )
    }
}

/// A pattern error as the ValueError Python code gets (bad patterns are bad arguments).
fn value_error(error: PretokenizeError) -> PyErr {
    PyValueError::new_err(error.to_string())
}

/// A pattern that failed on a text: `bpestore.errors.PatternError` (a ValueError) naming the
/// byte offset in it, as encoding raises.
fn failed(py: Python<'_>, error: PretokenizeError) -> PyErr {
    match error {
        PretokenizeError::MatchFailed { .. } => pattern_error(py, error.to_string()),
        other => value_error(other),
    }
}

/// `(offset, reason)` of the first invalid UTF-8 in `data`, as Python's decoder names it; None if
/// it is valid.
#[pyfunction]
fn utf8_error(py: Python<'_>, data: &[u8]) -> Option<(usize, &'static str)> {
    py.detach(|| {
        check_utf8(data)
            .err()
            .map(|error| (error.offset, error.reason))
    })
}

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<PyPretokenizer>()?;
    module.add_function(wrap_pyfunction!(utf8_error, module)?)?;
    module.add("GPT2_PATTERN", GPT2_PATTERN)?;
    module.add("CL100K_PATTERN", CL100K_PATTERN)?;
    module.add("O200K_PATTERN", O200K_PATTERN)?;
    module.add("LLAMA3_PATTERN", LLAMA3_PATTERN)?;
    module.add("QWEN2_PATTERN", QWEN2_PATTERN)?;
    module.add("GPT2_DIGITS_PATTERN", GPT2_DIGITS_PATTERN)?;
    module.add("GPT2_DIGIT_RUNS_PATTERN", GPT2_DIGIT_RUNS_PATTERN)?;
    module.add("SUPERBPE_PATTERN", SUPERBPE_PATTERN)?;
    Ok(())
}
