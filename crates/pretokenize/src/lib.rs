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

/// The backtracking budget of one match on a probe text (see [`probe_backtracking`]): far above
/// what a polynomial pattern needs on [`PROBE_RUN`] characters (a cubic one takes ~3 * 10^4 steps),
/// far below what an exponential one does (2^32 steps, or 2 * 10^6 for a Fibonacci-like one such as
/// `(?:a|aa)+`); a probe that hits it costs ~0.1 s.
const PROBE_BACKTRACK_LIMIT: usize = 1_000_000;

/// How many times a probe text repeats its character.
const PROBE_RUN: usize = 32;

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
    /// The pattern has capture groups. Tools disagree on what a match of such a pattern is
    /// (tiktoken, Hugging Face and `re.finditer` take the whole match; `regex.findall` takes the
    /// groups and drops the rest of the text), so it is refused rather than guessed at.
    CaptureGroups {
        /// The pattern as given.
        pattern: String,
        /// How many capture groups it has.
        groups: usize,
    },
    /// The pattern backtracks catastrophically (exponentially in the text's length): found by
    /// [`probe_backtracking`] on a short probe text, or when encoding hit the backtracking limit.
    Backtracking {
        /// The pattern as given.
        pattern: String,
        /// The text (probe) it failed on, or a description of it.
        text: String,
        /// Where the match that gave up started: a byte offset in the text pre-tokenized (None
        /// for a probe at construction).
        offset: Option<usize>,
    },
}

impl fmt::Display for PretokenizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PretokenizeError::InvalidPattern { pattern, message } => {
                write!(f, "invalid pre-tokenizer pattern {pattern:?}: {message}")
            }
            PretokenizeError::CaptureGroups { pattern, groups } => write!(
                f,
                "pre-tokenizer pattern {pattern:?} has {groups} capture group{}; write each \
                 group as a non-capturing (?:...) group (a pre-token is the whole match)",
                if *groups == 1 { "" } else { "s" }
            ),
            PretokenizeError::Backtracking {
                pattern,
                text,
                offset,
            } => {
                write!(
                    f,
                    "pre-tokenizer pattern {pattern:?} backtracks catastrophically (it gave up on "
                )?;
                if let Some(offset) = offset {
                    write!(f, "the match at byte {offset} of ")?;
                }
                write!(
                    f,
                    "{text}); rewrite it without nested or overlapping repetitions"
                )
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
        Pretokenizer::build(pattern, true, BACKTRACK_LIMIT)
    }

    /// A pre-tokenizer for `pattern` that always runs the regex engine, even for the three
    /// known patterns (for differential tests and benchmarks of the scanners).
    pub fn with_regex_engine(pattern: &str) -> Result<Pretokenizer, PretokenizeError> {
        Pretokenizer::build(pattern, false, BACKTRACK_LIMIT)
    }

    /// A pre-tokenizer whose matches give up after `limit` backtracking steps instead of 10^8
    /// (tests of the callers' error paths reach the limit without spending 10^8 steps).
    pub fn with_backtrack_limit(
        pattern: &str,
        limit: usize,
    ) -> Result<Pretokenizer, PretokenizeError> {
        Pretokenizer::build(pattern, true, limit)
    }

    fn build(pattern: &str, scanner: bool, limit: usize) -> Result<Pretokenizer, PretokenizeError> {
        let compile = |limit: usize| {
            fancy_regex::RegexBuilder::new(pattern)
                .backtrack_limit(limit)
                .build()
                .map_err(|error| PretokenizeError::InvalidPattern {
                    pattern: pattern.to_string(),
                    message: error.to_string(),
                })
        };
        let regex = compile(limit)?;
        // captures_len counts the whole match as group 0.
        let groups = regex.captures_len().saturating_sub(1);
        if groups > 0 {
            return Err(PretokenizeError::CaptureGroups {
                pattern: pattern.to_string(),
                groups,
            });
        }
        let known = match pattern {
            GPT2_PATTERN => Some(Known::Gpt2),
            CL100K_PATTERN => Some(Known::Cl100k),
            O200K_PATTERN => Some(Known::O200k),
            _ => None,
        };
        if known.is_none() {
            probe_backtracking(pattern, &compile(PROBE_BACKTRACK_LIMIT)?)?;
        }
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
    /// limit of 10^8 steps for one match, on a text that the probes at construction did not
    /// foresee. [`Pretokenizer::try_for_each_piece`] returns that as an error instead.
    pub fn for_each_piece<'t>(&self, text: &'t str, f: impl FnMut(&'t str)) {
        if let Err(error) = self.try_for_each_piece(text, f) {
            panic!("{error}");
        }
    }

    /// [`Pretokenizer::for_each_piece`], with catastrophic backtracking as an error
    /// ([`PretokenizeError::Backtracking`]) rather than a panic; the pieces before the failing
    /// match have been given to `f` by then.
    pub fn try_for_each_piece<'t>(
        &self,
        text: &'t str,
        mut f: impl FnMut(&'t str),
    ) -> Result<(), PretokenizeError> {
        if self.inner.scanner {
            match self.inner.known {
                Some(Known::Gpt2) => scan::gpt2(text, f),
                Some(Known::Cl100k) => scan::cl100k(text, f),
                Some(Known::O200k) => scan::o200k(text, f),
                None => unreachable!("a scanner runs only for a known pattern"),
            }
            return Ok(());
        }
        // Where the next match is searched from: the offset reported if it gives up.
        let mut searched_from = 0;
        for found in self.inner.regex.find_iter(text) {
            match found {
                Ok(piece) => {
                    searched_from = piece.end();
                    if !piece.as_str().is_empty() {
                        f(piece.as_str());
                    }
                }
                Err(_) => {
                    return Err(PretokenizeError::Backtracking {
                        pattern: self.inner.pattern.clone(),
                        text: format!("a text of {} bytes", text.len()),
                        offset: Some(searched_from),
                    })
                }
            }
        }
        Ok(())
    }

    /// The pre-tokens of `text`, left to right.
    pub fn pieces<'t>(&self, text: &'t str) -> Vec<&'t str> {
        let mut pieces = Vec::new();
        self.for_each_piece(text, |piece| pieces.push(piece));
        pieces
    }
}

/// Runs `regex` (compiled with a small backtracking limit) over short probe texts and refuses
/// the pattern if any match gives up: a cheap screen, at construction, for patterns whose
/// backtracking grows exponentially with the text (`(?:a|a)+(?=$)`), which would otherwise make
/// encoding take minutes per match and then fail.
///
/// The probes are runs of one character (letters, digits, whitespace, punctuation, and each
/// character the pattern itself names), each followed by a different character: catastrophic
/// patterns backtrack over such runs when the end of the run does not let them finish. A screen,
/// not a proof: [`Pretokenizer::try_for_each_piece`] still reports a limit hit while encoding.
/// Patterns without look-around or possessive parts run on a linear-time engine and pass.
fn probe_backtracking(pattern: &str, regex: &fancy_regex::Regex) -> Result<(), PretokenizeError> {
    const CHARACTERS: &str = "aA0 \n\t'.,-_é中";
    const ENDINGS: [&str; 7] = ["", "!", " ", "\n", "a", "0", "\u{1}"];
    let mut characters: Vec<char> = CHARACTERS.chars().collect();
    for c in pattern.chars() {
        if !characters.contains(&c) && characters.len() < 96 {
            characters.push(c);
        }
    }
    let mut probe = String::new();
    for &c in &characters {
        for ending in ENDINGS {
            probe.clear();
            probe.extend(std::iter::repeat_n(c, PROBE_RUN));
            probe.push_str(ending);
            if regex.find_iter(&probe).any(|found| found.is_err()) {
                return Err(PretokenizeError::Backtracking {
                    pattern: pattern.to_string(),
                    text: format!("{probe:?}"),
                    offset: None,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
