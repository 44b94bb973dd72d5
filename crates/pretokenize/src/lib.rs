//! Pre-tokenization for bpestore: special tokens, the pre-tokenizer pattern's pieces, safe cuts.
//!
//! Everything here reproduces, exactly, what the Python code did with Python's `regex` module
//! (`regex.findall(pattern, text)`) and `re` (special tokens, longest first). The cut rule that
//! lets text be split into independently pre-tokenized chunks lives here in one place
//! ([`last_safe_cut`] for streams, [`next_safe_cut`] for files).
//!
//! Unicode versions: both paths classify characters with regex-syntax 0.8's tables (Unicode 16.0,
//! as tiktoken's regex does); Python's `regex` module (2026.x) has Unicode 17.0. They differ on
//! code points first assigned in 17.0 (letters to `regex`, unassigned here) and on U+0295, which
//! 17.0 moved from Ll to Lo (it changes o200k's pieces: "\u{295}Ab" is one piece to `regex`,
//! two here). tests/test_engine_pretokenize.py checks that nothing else differs.

mod classes;
mod cut;
mod scan;
mod special;
mod utf8;

use std::fmt;
use std::sync::Arc;

pub use cut::{is_regex_whitespace, last_safe_cut, next_safe_cut};
pub use special::{Part, SpecialTokens, Split};
pub use utf8::{check_utf8, Utf8Error};

/// The GPT-2 pre-tokenizer pattern (CS336; r50k_base and p50k_base use the same), byte for byte
/// the string in `bpestore/pretokenize.py`.
pub const GPT2_PATTERN: &str =
    r#"'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"#;

/// tiktoken's cl100k_base pattern, byte for byte the string in `bpestore/pretokenize.py`.
pub const CL100K_PATTERN: &str = concat!(
    r#"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"#,
    r#"|\s++$|\s*[\r\n]|\s+(?!\S)|\s"#
);

/// tiktoken's o200k_base pattern, byte for byte the string in `bpestore/pretokenize.py`.
pub const O200K_PATTERN: &str = concat!(
    r#"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"#,
    "|",
    r#"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"#,
    "|",
    r#"\p{N}{1,3}"#,
    "|",
    r#" ?[^\s\p{L}\p{N}]+[\r\n/]*"#,
    "|",
    r#"\s*[\r\n]+"#,
    "|",
    r#"\s+(?!\S)"#,
    "|",
    r#"\s+"#
);

/// How far the backtracking engine may go on one match before giving up. The three known
/// patterns never come near it (their quantifiers are possessive or cannot backtrack far); it
/// only guards arbitrary imported patterns against catastrophic backtracking.
const BACKTRACK_LIMIT: usize = 100_000_000;

/// A pattern that cannot be used as a pre-tokenizer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PretokenizeError {
    /// The regex engine rejected the pattern.
    InvalidPattern {
        /// The pattern as given.
        pattern: String,
        /// The regex engine's explanation.
        message: String,
    },
}

impl fmt::Display for PretokenizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PretokenizeError::InvalidPattern { pattern, message } => {
                write!(f, "invalid pre-tokenizer pattern {pattern:?}: {message}")
            }
        }
    }
}

impl std::error::Error for PretokenizeError {}

/// Which of the known patterns a pre-tokenizer runs (each may get a hand-written scanner).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Known {
    Gpt2,
    Cl100k,
    O200k,
}

#[derive(Debug)]
struct Inner {
    pattern: String,
    known: Option<Known>,
    /// Whether the hand-written scanner for `known` runs (else the regex does).
    scanner: bool,
    regex: fancy_regex::Regex,
}

/// Splits text that holds no special token into pre-tokens: exactly the pieces that Python's
/// `regex.findall(pattern, text)` gives (for a pattern without capture groups; empty matches are
/// left out, as they make no pre-token). The three known patterns run on hand-written scanners
/// (no regex engine, an ASCII fast path, Unicode classes from a table built from the regex
/// engine's own data); any other pattern runs on fancy_regex.
///
/// Cheap to clone (the compiled pattern is shared), `Send` and `Sync`.
#[derive(Debug, Clone)]
pub struct Pretokenizer {
    inner: Arc<Inner>,
}

impl Pretokenizer {
    /// A pre-tokenizer for `pattern` (a regex in the syntax of Python's `regex` module, as far as
    /// fancy_regex shares it: possessive quantifiers, look-around, `\p{..}` classes).
    pub fn new(pattern: &str) -> Result<Pretokenizer, PretokenizeError> {
        Pretokenizer::build(pattern, true)
    }

    /// A pre-tokenizer for `pattern` that always runs the regex engine, even for the three
    /// known patterns (for differential tests and benchmarks of the scanners).
    pub fn with_regex_engine(pattern: &str) -> Result<Pretokenizer, PretokenizeError> {
        Pretokenizer::build(pattern, false)
    }

    fn build(pattern: &str, scanner: bool) -> Result<Pretokenizer, PretokenizeError> {
        let regex = fancy_regex::RegexBuilder::new(pattern)
            .backtrack_limit(BACKTRACK_LIMIT)
            .build()
            .map_err(|error| PretokenizeError::InvalidPattern {
                pattern: pattern.to_string(),
                message: error.to_string(),
            })?;
        let known = match pattern {
            GPT2_PATTERN => Some(Known::Gpt2),
            CL100K_PATTERN => Some(Known::Cl100k),
            O200K_PATTERN => Some(Known::O200k),
            _ => None,
        };
        Ok(Pretokenizer {
            inner: Arc::new(Inner {
                pattern: pattern.to_string(),
                known,
                scanner: scanner && known.is_some(),
                regex,
            }),
        })
    }

    /// Whether a hand-written scanner (not the regex engine) splits the text.
    pub fn uses_scanner(&self) -> bool {
        self.inner.scanner
    }

    /// The pattern this pre-tokenizer was made from.
    pub fn pattern(&self) -> &str {
        &self.inner.pattern
    }

    /// Whether a space between two characters that are not whitespace is always a piece
    /// boundary, with the pieces on either side those of the two sides pre-tokenized on their
    /// own (true for the three known patterns; see `bpestore/pretokenize.py`'s docstring). Only
    /// then may text be cut at such spaces.
    pub fn is_split_safe(&self) -> bool {
        self.inner.known.is_some()
    }

    /// Calls `f` on each pre-token of `text`, left to right (pieces borrow from `text`).
    ///
    /// # Panics
    /// If an arbitrary (not one of the three known) pattern backtracks catastrophically, past a
    /// limit of 10^8 steps for one match.
    pub fn for_each_piece<'t>(&self, text: &'t str, mut f: impl FnMut(&'t str)) {
        if self.inner.scanner {
            match self.inner.known {
                Some(Known::Gpt2) => return scan::gpt2(text, f),
                Some(Known::Cl100k) => return scan::cl100k(text, f),
                Some(Known::O200k) => return scan::o200k(text, f),
                None => {}
            }
        }
        for found in self.inner.regex.find_iter(text) {
            match found {
                Ok(piece) if !piece.as_str().is_empty() => f(piece.as_str()),
                Ok(_) => {}
                Err(error) => panic!(
                    "pre-tokenizer pattern {:?} failed on a text of {} bytes: {error}",
                    self.inner.pattern,
                    text.len()
                ),
            }
        }
    }

    /// The pre-tokens of `text`, left to right.
    pub fn pieces<'t>(&self, text: &'t str) -> Vec<&'t str> {
        let mut pieces = Vec::new();
        self.for_each_piece(text, |piece| pieces.push(piece));
        pieces
    }
}

#[cfg(test)]
mod tests;
