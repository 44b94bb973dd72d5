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

mod block;
mod byte_level;
mod class_data;
mod classes;
mod cut;
mod deepseek;
mod falcon;
mod pipeline;
mod scan;
mod sink;
mod special;
mod split_regex;
mod utf8;

use std::fmt;
use std::sync::{Arc, OnceLock};

pub use byte_level::{decode_byte_level, ALPHABET as BYTE_LEVEL_ALPHABET};
pub use cut::{
    cut_at, find_cut, is_newline_cut, is_regex_whitespace, is_space_cut, last_safe_cut,
    next_safe_cut, CUT_WINDOW_BYTES,
};
pub use pipeline::{Behavior, Matcher, Pipeline, Stage};
pub use sink::{each_end, Pieces, Spans};
pub use special::{Part, SpecialTokens, Split, TokenOptions};
pub use utf8::{check_utf8, decode_at, Utf8Error};

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

/// Llama-3's pattern (OLMo-2's too), as Hugging Face's files write it: tiktoken's first cl100k_base
/// regex, which differs from [`CL100K_PATTERN`] only in whitespace that ends the text after a
/// newline (no `\s++$`: `"\n  "` at the end is two pieces, not one).
pub const LLAMA3_PATTERN: &str = concat!(
    r#"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"#,
    r#"|\s*[\r\n]+|\s+(?!\S)|\s+"#
);

/// Qwen2's pattern (Qwen2, Qwen2.5, Qwen3): [`LLAMA3_PATTERN`] with each number a piece of its own.
pub const QWEN2_PATTERN: &str = concat!(
    r#"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"#,
    r#"|\s*[\r\n]+|\s+(?!\S)|\s+"#
);

/// SuperBPE's stage-2 pre-tokenizer (Liu et al., 2025) as its repository trains it: its regex
/// `\p{N}{1,3}| ?[^\s\p{L}\p{N}]{2,}[\r\n/]*| +(?!\S)` splitting the text around its matches
/// (the stretches between them are pieces too), a line at a time, and cut after `": "`'s colon
/// (see `bpestore/pretokenize/patterns.py`). Not split-safe: its pieces run across spaces.
pub const SUPERBPE_PATTERN: &str = concat!(
    r#"\p{N}{1,3}| ?[^\s\p{L}\p{N}]{2,}[\r/]*\n?| +(?!\S)"#,
    r#"|(?:\p{L}|[^\S \n]| (?=\S)(?![^\s\p{L}\p{N}]{2})|(?!: )[^\s\p{L}\p{N}](?![^\s\p{L}\p{N}]))+(?::(?= )|\n)?"#,
    r#"|:(?= )|\n"#
);

/// SmolLM's and StarCoder's pieces as one regex: Hugging Face's `Digits(individual_digits=true)`
/// then `ByteLevel` with GPT-2's regex, which then runs on the stretches between numbers (its
/// `\s+(?!\S)` sees a number as the end of its stretch).
pub const GPT2_DIGITS_PATTERN: &str =
    r#"\p{N}|'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?[^\s\p{L}\p{N}]+|\s+(?![^\s\p{N}])|\s+"#;

/// [`GPT2_DIGITS_PATTERN`] with runs of numbers as pieces (`Digits(individual_digits=false)`).
pub const GPT2_DIGIT_RUNS_PATTERN: &str =
    r#"\p{N}+|'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?[^\s\p{L}\p{N}]+|\s+(?![^\s\p{N}])|\s+"#;

/// The patterns that run on hand-written scanners, byte for byte the strings in
/// `bpestore/pretokenize/patterns.py`.
pub const KNOWN_PATTERNS: [&str; 8] = [
    GPT2_PATTERN,
    CL100K_PATTERN,
    O200K_PATTERN,
    LLAMA3_PATTERN,
    QWEN2_PATTERN,
    GPT2_DIGITS_PATTERN,
    GPT2_DIGIT_RUNS_PATTERN,
    SUPERBPE_PATTERN,
];

/// How far the backtracking engine may go on one match before giving up. The three known
/// patterns never come near it (their quantifiers are possessive or cannot backtrack far); it
/// only guards arbitrary imported patterns against catastrophic backtracking.
const BACKTRACK_LIMIT: usize = 100_000_000;

/// The backtracking budget of one match on a probe text (see [`probe`]): far above
/// what a polynomial pattern needs on [`PROBE_RUN`] characters (a cubic one takes ~3 * 10^4 steps),
/// far below what an exponential one does (2^32 steps, or 2 * 10^6 for a Fibonacci-like one such as
/// `(?:a|aa)+`); a probe that hits it costs ~0.1 s.
const PROBE_BACKTRACK_LIMIT: usize = 1_000_000;

/// How many times a probe text repeats its character.
const PROBE_RUN: usize = 32;

/// The most memory the regex engine may give one compiled part of a pattern (its default): a
/// pattern over it is refused at once with [`PretokenizeError::TooBig`].
const SIZE_LIMIT: usize = 10 << 20;

/// Why a pattern's matching failed on some text (see [`PretokenizeError::MatchFailed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchFailure {
    /// The match gave up at the regex engine's backtracking limit: the pattern backtracks
    /// catastrophically (exponentially in the text's length). The offset is where the search for
    /// that match started.
    Backtracking,
    /// No match covers this character: the pattern's non-empty matches leave a gap there, and
    /// encoding would drop it (`decode(encode(text)) != text`). The offset is the character's.
    Uncovered(char),
}

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
    /// The compiled pattern would be bigger than the regex engine's size limit (a bounded
    /// repetition such as `a{99999999}` is compiled as that many copies).
    TooBig {
        /// The pattern as given.
        pattern: String,
        /// The limit, in bytes.
        limit: usize,
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
    /// Matching the pattern failed on a text (`failure` says how): found at construction on a
    /// probe text (see [`probe`]), or while pre-tokenizing.
    MatchFailed {
        /// The pattern as given.
        pattern: String,
        /// How it failed.
        failure: MatchFailure,
        /// The text (probe) it failed on, or a description of it ("a text of 12 bytes", "the
        /// file").
        text: String,
        /// Where it failed (see [`MatchFailure`]): a byte offset in the text pre-tokenized (None
        /// for a probe at construction).
        offset: Option<usize>,
    },
}

impl PretokenizeError {
    /// This error (a [`PretokenizeError::MatchFailed`] from pre-tokenizing a slice of some
    /// input) with its offset moved `by` bytes on, the slice's start in that input; any other
    /// error unchanged.
    pub fn shifted(mut self, by: usize) -> PretokenizeError {
        if let PretokenizeError::MatchFailed { offset, .. } = &mut self {
            *offset = offset.map(|offset| offset.saturating_add(by));
        }
        self
    }

    /// This error (a [`PretokenizeError::MatchFailed`] from pre-tokenizing a text derived from a
    /// slice of some input, such as the slice normalized) with its offset the slice's start (0),
    /// as the derived text's offsets are not the input's; any other error unchanged.
    pub fn shifted_to_start(mut self) -> PretokenizeError {
        if let PretokenizeError::MatchFailed { offset, .. } = &mut self {
            *offset = offset.map(|_| 0);
        }
        self
    }

    /// This error (a [`PretokenizeError::MatchFailed`], its offset already one in `input`)
    /// naming `input` as the text it failed on; any other error unchanged.
    pub fn named(mut self, input: String) -> PretokenizeError {
        if let PretokenizeError::MatchFailed { text, .. } = &mut self {
            *text = input;
        }
        self
    }
}

impl fmt::Display for PretokenizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PretokenizeError::InvalidPattern { pattern, message } => {
                write!(f, "invalid pre-tokenizer pattern {pattern:?}: {message}")
            }
            PretokenizeError::TooBig { pattern, limit } => write!(
                f,
                "pre-tokenizer pattern {pattern:?} is too big to compile (over {} MB); \
                 use smaller bounded repetitions",
                limit >> 20
            ),
            PretokenizeError::CaptureGroups { pattern, groups } => write!(
                f,
                "pre-tokenizer pattern {pattern:?} has {groups} capture group{}; write each \
                 group as a non-capturing (?:...) group (a pre-token is the whole match)",
                if *groups == 1 { "" } else { "s" }
            ),
            PretokenizeError::MatchFailed {
                pattern,
                failure: MatchFailure::Backtracking,
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
            PretokenizeError::MatchFailed {
                pattern,
                failure: MatchFailure::Uncovered(c),
                text,
                offset,
            } => {
                write!(
                    f,
                    "pre-tokenizer pattern {pattern:?} does not cover all of the text (no match \
                     covers {c:?} (U+{:04X}) ",
                    u32::from(*c)
                )?;
                match offset {
                    Some(offset) => write!(f, "at byte {offset} of {text}")?,
                    None => write!(f, "in {text}")?,
                }
                write!(
                    f,
                    "); its matches must cover every character of any text, or encoding would \
                     drop the rest (a last alternative |(?s:.) takes any character the others \
                     leave)"
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
    Llama3,
    Qwen2,
    Gpt2Digits,
    Gpt2DigitRuns,
    Superbpe,
}

impl Known {
    /// Whether `text` is, for sure, one piece of this pattern: at most [`ONE_WORD_BYTES`] bytes,
    /// an optional space and then letters (`\p{L}`), which every pattern with a scanner but
    /// SuperBPE's takes as one piece (` ?\p{L}+`, `[^\r\n\p{L}\p{N}]?\p{L}+`); o200k only
    /// where its cased words take them all (see [`o200k_one_word`]). Counting calls the scanner
    /// on each distinct segment of text cut at spaces, mostly such words, whose characters take
    /// less time to check than the scanner takes to set up its 64-byte window.
    #[inline]
    fn one_word(self, text: &str) -> bool {
        if text.is_empty() || text.len() > ONE_WORD_BYTES || self == Known::Superbpe {
            return false;
        }
        let word = text.strip_prefix(' ').unwrap_or(text);
        if word.is_ascii() {
            // (most words: no table, no decoding; in ASCII a letter is in one case class)
            let bytes = word.as_bytes();
            return bytes.iter().all(u8::is_ascii_alphabetic)
                && (self != Known::O200k
                    || !bytes
                        .windows(2)
                        .any(|pair| pair[0].is_ascii_lowercase() && pair[1].is_ascii_uppercase()));
        }
        let table = classes::table();
        let mut letters = [0u8; ONE_WORD_BYTES];
        let mut n = 0;
        for c in word.chars() {
            let class = table.get(c as u32);
            if class & classes::LETTER == 0 {
                return false;
            }
            letters[n] = class;
            n += 1;
        }
        self != Known::O200k || o200k_one_word(&letters[..n])
    }

    /// Where `text` splits, for sure, into a word and the punctuation after it, found without
    /// the scanner: an optional space, letters that [`Known::one_word`] takes as one piece, a run
    /// of ASCII punctuation, and at most one newline at the end (" end.", " see),\n": most of
    /// the distinct segments the newline cut leaves). Every scanned pattern but SuperBPE's ends
    /// the word at the first character that is not a letter (an apostrophe would start a
    /// contraction only before a letter, and none follows) and takes the punctuation as one
    /// piece (` ?[^\s\p{L}\p{N}]+`); the patterns that end that alternative with `[\r\n]*`
    /// (cl100k, o200k, Llama-3, Qwen2) take the newline into it, GPT-2's make it a piece of its
    /// own. `(punctuation, newline)`: the byte offsets where the punctuation and the newline
    /// start (`newline` is the text's length where there is none).
    #[inline]
    fn word_then_punctuation(self, text: &str) -> Option<(usize, usize)> {
        if text.len() > ONE_WORD_BYTES || self == Known::Superbpe {
            return None;
        }
        let bytes = text.as_bytes();
        let newline = bytes.len() - usize::from(bytes.last() == Some(&b'\n'));
        let punctuation = bytes[..newline]
            .iter()
            .rposition(|&byte| !byte.is_ascii_punctuation())
            .map_or(0, |last| last + 1);
        let word_starts = usize::from(bytes.first() == Some(&b' '));
        // (an ASCII byte is never part of a longer character, so `punctuation` is a boundary)
        (punctuation > word_starts && punctuation < newline && self.one_word(&text[..punctuation]))
            .then_some((punctuation, newline))
    }

    /// Whether the pattern's punctuation alternative takes the newlines after it (`[\r\n]*`).
    fn punctuation_takes_newlines(self) -> bool {
        matches!(
            self,
            Known::Cl100k | Known::O200k | Known::Llama3 | Known::Qwen2
        )
    }
}

/// Whether o200k takes a word of letters whose classes are `letters` (at least one) as one
/// piece. Its words are `[U]*[L]+` or else `[U]+[L]*` (U: `\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}`, L:
/// `\p{Ll}\p{Lm}\p{Lo}\p{M}`; `\p{Lm}` and `\p{Lo}` in both), matched leftmost-first: the
/// first alternative takes the longest run of U it can such that an L follows, then every L
/// after it, and wins if it matches at all, however short; the second is tried only when the
/// first fails. (A word of letters holds no mark: no leading character is taken before them.)
fn o200k_one_word(letters: &[u8]) -> bool {
    let upper = |class: u8| class & classes::UPPER != 0;
    let lower = |class: u8| class & classes::LOWER != 0;
    let n = letters.len();
    let run_of_u = letters.iter().take_while(|&&class| upper(class)).count();
    let lower_from = |at: usize| letters[at..].iter().all(|&class| lower(class));
    // The first alternative: U* backs off from its longest run to where an L follows.
    match (0..=run_of_u.min(n - 1))
        .rev()
        .find(|&at| lower(letters[at]))
    {
        Some(at) => lower_from(at),
        // The second: U+ (at least one), then L*.
        None => run_of_u > 0 && lower_from(run_of_u),
    }
}

/// The longest text [`Known::one_word`] looks at: past it, the scanner's setting up is no longer
/// most of its time.
const ONE_WORD_BYTES: usize = 24;

#[derive(Debug, Clone)]
struct Inner {
    pattern: String,
    known: Option<Known>,
    /// Whether the hand-written scanner for `known` runs (else the regex does).
    scanner: bool,
    /// Whether the scanner finds pieces 64 bytes at a time where it can (else one at a time).
    blocks: bool,
    /// Whether text may be cut at spaces and newlines (see [`Pretokenizer::is_split_safe`]).
    space_cuts: bool,
    /// A pipeline of pre-tokenizers that makes the pieces instead of the pattern (see
    /// [`Pretokenizer::with_pipeline`]).
    pipeline: Option<Pipeline>,
    /// The pattern on fancy_regex, compiled when first needed for a known pattern (its scanner
    /// runs instead: compiling cl100k_base's pattern was 4% of loading a tokenizer), at once for
    /// any other (so that a bad one is refused then).
    regex: OnceLock<fancy_regex::Regex>,
    /// The backtracking limit `regex` is compiled with.
    limit: usize,
    /// The pattern on regex-automata, for a pattern with no scanner that it runs (no look-around
    /// but the usual `\s+(?!\S)|\s+` ending; see `split_regex.rs`): the same pieces as `regex`
    /// without its backtracking VM.
    automaton: Option<split_regex::SplitRegex>,
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

    /// A pre-tokenizer for `pattern` whose scanner (for the three known patterns) finds each
    /// piece on its own, without the fast path that finds the pieces of 64 bytes of ASCII at a
    /// time (for differential tests and benchmarks of that fast path). Same pieces.
    pub fn with_scalar_scanner(pattern: &str) -> Result<Pretokenizer, PretokenizeError> {
        let pretokenizer = Pretokenizer::new(pattern)?;
        let mut inner = Arc::try_unwrap(pretokenizer.inner).expect("not shared yet");
        inner.blocks = false;
        Ok(Pretokenizer {
            inner: Arc::new(inner),
        })
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
        let known = match pattern {
            GPT2_PATTERN => Some(Known::Gpt2),
            CL100K_PATTERN => Some(Known::Cl100k),
            O200K_PATTERN => Some(Known::O200k),
            LLAMA3_PATTERN => Some(Known::Llama3),
            QWEN2_PATTERN => Some(Known::Qwen2),
            GPT2_DIGITS_PATTERN => Some(Known::Gpt2Digits),
            GPT2_DIGIT_RUNS_PATTERN => Some(Known::Gpt2DigitRuns),
            SUPERBPE_PATTERN => Some(Known::Superbpe),
            _ => None,
        };
        let regex = OnceLock::new();
        if known.is_none() || !scanner {
            let compiled = compile(pattern, limit)?;
            // captures_len counts the whole match as group 0 (the known patterns have none).
            let groups = compiled.captures_len().saturating_sub(1);
            if groups > 0 {
                return Err(PretokenizeError::CaptureGroups {
                    pattern: pattern.to_string(),
                    groups,
                });
            }
            regex.set(compiled).expect("a new cell");
        }
        if known.is_none() {
            probe(pattern, &compile(pattern, PROBE_BACKTRACK_LIMIT)?)?;
        }
        Ok(Pretokenizer {
            inner: Arc::new(Inner {
                pattern: pattern.to_string(),
                known,
                scanner: scanner && known.is_some(),
                blocks: true,
                // (SuperBPE's pieces run across spaces: its text is never cut at them)
                space_cuts: known.is_some_and(|known| known != Known::Superbpe),
                pipeline: None,
                regex,
                limit,
                // (with a lower backtracking limit than the default, the regex engine is what
                // is being tested: the automaton never gives up)
                automaton: if scanner && known.is_none() && limit == BACKTRACK_LIMIT {
                    split_regex::SplitRegex::of(pattern)
                } else {
                    None
                },
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
        self.inner.space_cuts
    }

    /// The pattern on fancy_regex (compiled here the first time for a known pattern, which
    /// compiles: its scanner is tested against it).
    fn regex(&self) -> &fancy_regex::Regex {
        self.inner.regex.get_or_init(|| {
            compile(&self.inner.pattern, self.inner.limit).expect("a known pattern compiles")
        })
    }

    /// A pre-tokenizer whose pieces `pipeline` makes (Hugging Face's pre-tokenizers in a
    /// sequence), its pattern unused. Its pieces are byte spans ([`Pretokenizer::try_for_each_span`]),
    /// not always of whole characters; text is never cut at spaces or newlines.
    pub fn with_pipeline(&self, pipeline: Pipeline) -> Pretokenizer {
        let mut inner = (*self.inner).clone();
        inner.pipeline = Some(pipeline);
        inner.scanner = false;
        inner.space_cuts = false;
        Pretokenizer {
            inner: Arc::new(inner),
        }
    }

    /// Calls `f(start, end)` with the byte span of each pre-token of `text`, left to right: the
    /// pieces of [`Pretokenizer::try_for_each_piece`], or of the pipeline.
    ///
    /// # Errors
    /// As [`Pretokenizer::try_for_each_piece`]'s.
    pub fn try_for_each_span(
        &self,
        text: &str,
        f: impl FnMut(usize, usize),
    ) -> Result<(), PretokenizeError> {
        self.try_spans_into(text, f)
    }

    /// [`Pretokenizer::try_for_each_span`] into any [`Spans`] (one that takes the pieces a
    /// scanner finds in a window at once, say).
    ///
    /// # Errors
    /// As [`Pretokenizer::try_for_each_piece`]'s.
    pub fn try_spans_into(&self, text: &str, mut f: impl Spans) -> Result<(), PretokenizeError> {
        if let Some(pipeline) = &self.inner.pipeline {
            return pipeline.try_for_each_span(text, |start, end| f.span(start, end));
        }
        let base = text.as_ptr() as usize;
        self.try_pieces_into(
            text,
            sink::SpansOf {
                spans: &mut f,
                base,
            },
        )
    }

    /// This pre-tokenizer, the same pieces, but text is no longer cut at spaces or newlines (for
    /// an encoder that normalizes the text with steps that would see such a cut).
    pub fn without_space_cuts(&self) -> Pretokenizer {
        let mut inner = (*self.inner).clone();
        inner.space_cuts = false;
        Pretokenizer {
            inner: Arc::new(inner),
        }
    }

    /// Calls `f` on each pre-token of `text`, left to right (pieces borrow from `text`).
    ///
    /// # Panics
    /// If an arbitrary (not one of the three known) pattern fails on `text` in a way the probes
    /// at construction did not foresee: it backtracks catastrophically, past a limit of 10^8
    /// steps for one match, or its matches do not cover all of `text`.
    /// [`Pretokenizer::try_for_each_piece`] returns that as an error instead.
    pub fn for_each_piece<'t>(&self, text: &'t str, f: impl FnMut(&'t str)) {
        if let Err(error) = self.try_for_each_piece(text, f) {
            panic!("{error}");
        }
    }

    /// Gives `f` the pieces of `text` and returns true where they are known without the
    /// scanner: one word and the space before it (`Known::one_word`), or such a word and the
    /// punctuation after it (`Known::word_then_punctuation`): most of the distinct segments a
    /// counter pre-tokenizes. False: nothing was given (and nothing is said of `text`).
    #[inline]
    fn split_by_shortcut<'t>(&self, text: &'t str, f: &mut impl Pieces<'t>) -> bool {
        let Some(known) = self.inner.known.filter(|_| self.inner.scanner) else {
            return false;
        };
        // (the last byte tells which shortcut may apply, so that a text is looked at once)
        if !text
            .as_bytes()
            .last()
            .is_some_and(|&last| last == b'\n' || last.is_ascii_punctuation())
        {
            if known.one_word(text) {
                f.piece(text);
                return true;
            }
            return false;
        }
        let Some((punctuation, newline)) = known.word_then_punctuation(text) else {
            return false;
        };
        f.piece(&text[..punctuation]);
        if known.punctuation_takes_newlines() || newline == text.len() {
            f.piece(&text[punctuation..]);
        } else {
            f.piece(&text[punctuation..newline]);
            f.piece(&text[newline..]);
        }
        true
    }

    /// [`Pretokenizer::for_each_piece`], with a failed match as an error
    /// ([`PretokenizeError::MatchFailed`], its offset in `text`) rather than a panic: the
    /// backtracking limit hit, or text that no match covers (the pieces would not tile `text`,
    /// and encoding them would drop that text). The pieces before the failure have been given to
    /// `f` by then.
    pub fn try_for_each_piece<'t>(
        &self,
        text: &'t str,
        f: impl FnMut(&'t str),
    ) -> Result<(), PretokenizeError> {
        self.try_pieces_into(text, f)
    }

    /// [`Pretokenizer::try_for_each_piece`] into any [`Pieces`].
    fn try_pieces_into<'t>(
        &self,
        text: &'t str,
        mut f: impl Pieces<'t>,
    ) -> Result<(), PretokenizeError> {
        if self.split_by_shortcut(text, &mut f) {
            return Ok(());
        }
        if self.inner.scanner {
            // The scanners tile the text by construction, and never backtrack.
            match self.inner.known {
                Some(Known::Gpt2) => scan::gpt2(text, f, self.inner.blocks),
                Some(Known::Cl100k) => scan::cl100k(text, f, self.inner.blocks),
                Some(Known::O200k) => scan::o200k(text, f, self.inner.blocks),
                Some(Known::Llama3) => scan::llama3(text, f, self.inner.blocks),
                Some(Known::Qwen2) => scan::qwen2(text, f, self.inner.blocks),
                Some(Known::Gpt2Digits) => scan::gpt2_digits::<false>(text, f, self.inner.blocks),
                Some(Known::Gpt2DigitRuns) => scan::gpt2_digits::<true>(text, f, self.inner.blocks),
                Some(Known::Superbpe) => scan::superbpe(text, f),
                None => unreachable!("a scanner runs only for a known pattern"),
            }
            return Ok(());
        }
        let tiled = match &self.inner.automaton {
            Some(automaton) => tile_automaton(automaton, text, f),
            None => tile(self.regex(), text, f),
        };
        tiled.map_err(|(failure, offset)| PretokenizeError::MatchFailed {
            pattern: self.inner.pattern.clone(),
            failure,
            text: format!("a text of {} bytes", text.len()),
            offset: Some(offset),
        })
    }

    /// The pre-tokens of `text`, left to right.
    pub fn pieces<'t>(&self, text: &'t str) -> Vec<&'t str> {
        let mut pieces = Vec::new();
        self.for_each_piece(text, |piece| pieces.push(piece));
        pieces
    }
}

/// Calls `f` on each non-empty match of `regex` in `text`, left to right, checking that they tile
/// `text` (each starts where the one before ended, the first at 0, the last ends at the end).
/// The error is the first failure and its byte offset: the backtracking limit hit (where the
/// search for that match started), or the first byte that no match covers.
fn tile<'t>(
    regex: &fancy_regex::Regex,
    text: &'t str,
    mut f: impl Pieces<'t>,
) -> Result<(), (MatchFailure, usize)> {
    let uncovered = |at: usize| uncovered(text, at);
    // Where the next match is searched from, and where the text covered so far ends.
    let mut searched_from = 0;
    let mut covered = 0;
    for found in regex.find_iter(text) {
        let Ok(piece) = found else {
            return Err((MatchFailure::Backtracking, searched_from));
        };
        searched_from = piece.end();
        if piece.start() == piece.end() {
            continue; // an empty match makes no pre-token
        }
        if piece.start() != covered {
            return Err(uncovered(covered));
        }
        covered = piece.end();
        f.piece(piece.as_str());
    }
    if covered != text.len() {
        return Err(uncovered(covered));
    }
    Ok(())
}

/// [`tile`] on the pattern's automaton (which never gives up, nor matches the empty string).
fn tile_automaton<'t>(
    automaton: &split_regex::SplitRegex,
    text: &'t str,
    mut f: impl Pieces<'t>,
) -> Result<(), (MatchFailure, usize)> {
    let mut covered = 0;
    automaton.for_each_match(text, |start, end| {
        if start != covered {
            return false; // (a gap: named below)
        }
        covered = end;
        f.piece(&text[start..end]);
        true
    });
    if covered != text.len() {
        return Err(uncovered(text, covered));
    }
    Ok(())
}

/// The failure of a tiling that leaves `text[at..]`'s first character to no match.
fn uncovered(text: &str, at: usize) -> (MatchFailure, usize) {
    let c = text[at..].chars().next().expect("a gap holds a character");
    (MatchFailure::Uncovered(c), at)
}

/// `error` from compiling `pattern`: [`PretokenizeError::TooBig`] if it went over the size limit.
/// `pattern` on fancy_regex, its matches giving up after `limit` backtracking steps.
fn compile(pattern: &str, limit: usize) -> Result<fancy_regex::Regex, PretokenizeError> {
    fancy_regex::RegexBuilder::new(pattern)
        .backtrack_limit(limit)
        .delegate_size_limit(SIZE_LIMIT)
        .build()
        .map_err(|error| compile_error(pattern, error))
}

fn compile_error(pattern: &str, error: fancy_regex::Error) -> PretokenizeError {
    if let fancy_regex::Error::CompileError(ref compile) = error {
        if let fancy_regex::CompileError::InnerError(ref inner) = **compile {
            if let Some(limit) = inner.size_limit() {
                return PretokenizeError::TooBig {
                    pattern: pattern.to_string(),
                    limit,
                };
            }
        }
    }
    PretokenizeError::InvalidPattern {
        pattern: pattern.to_string(),
        message: error.to_string(),
    }
}

/// Probe texts for [`probe`]: every kind of character, alone and among others, at the start, in
/// the middle and at the end of a text. Each short, so that an error can quote the one it names.
const PROBES: &[&str] = &[
    "Hello, World! It's 2024: (x+y)*3 = 42; done.",
    "it's I'LL we've 'quoted' ‘curly’ don’t \"say\"",
    "naïve café — “quoted” «guillemets» ¿qué? ¡sí! straße ǅ",
    "Здравствуй, мир! Ελληνικά. Հայ ქარ",
    "עברית ש\u{5b8}לו\u{5b9}ם، العربية؟ فارسی ۱۲۳",
    "ह\u{93f}न\u{94d}द\u{940} ব\u{9be}\u{982}ল\u{9be} தம\u{bbf}ழ\u{bcd} ไทย བ\u{f7c}ད་ ខ\u{17d2}ម\u{17c2}រ",
    "中文，日本語のテキスト。カタ 한국어 ㄅㄆ ꀀ",
    "0123456789 ٠١٢ ०१ ½ ² Ⅻ ① 𝟙 1,000.50 -7e3",
    "👍 👍\u{1f3fd} 👨\u{200d}👩\u{200d}👧\u{200d}👦 🏳\u{fe0f}\u{200d}🌈 😀🇫🇷 ❤\u{fe0f} #\u{fe0f}\u{20e3} 🧑\u{1f3ff}\u{200d}💻",
    "$€£¥₹ +-*/=<>^|~`@#%&_\\{}[]() ©®™ ∑∞≠√ ☃★♥ →⌘♪ ─█",
    "\u{301}\u{302}x e\u{301} a\u{308}\u{323} \u{20dd} \u{302}",
    "a b\tc\r\nd\ne\rf\u{b}g\u{c}h\u{85}i\u{a0}j\u{2003}k\u{2028}l\u{2029}m\u{3000}n",
    "  \t \n\n \r\n\r\n",
    " ",
    "\n",
    "\u{0}\u{1}\u{7}\u{8}\u{1b}\u{1f}\u{7f}\u{80}\u{9f} \u{200b}\u{200c}\u{200d}\u{200e}\u{feff}\u{ad}\u{61c}\u{2060}",
    "\u{fffd}\u{fffc} \u{e000}\u{f8ff} \u{f0000}\u{10fffd} \u{fdd0}\u{fffe}\u{ffff} \u{378}\u{e0001}\u{e0041} \u{10ffff}",
    "𝔘𝔫𝔦 𐍈𐌰 𓀀 𠀀 𞤀",
    "https://x.y/z?q=1&r=2#f\tfn(a,b){return a<=b;}",
    "a1!B2?c_3-d.e\u{3000}F",
];

/// How many characters [`probe`] makes runs of, at most (a fixed set, then those the pattern
/// names).
const MAX_RUNS: usize = 96;

/// The characters that `pattern` names: those of its `\x..`, `\x{..}`, `\u....`, `\u{..}` and
/// `\U........` escapes (the ends of `[\u{2600}-\u{26ff}]` too), then its literal characters.
fn named_characters(pattern: &str) -> Vec<char> {
    let mut named = Vec::new();
    let bytes = pattern.as_bytes();
    let hex = |from: usize, digits: usize| -> Option<char> {
        let digits = pattern.get(from..from + digits)?;
        let code = u32::from_str_radix(digits, 16).ok()?;
        char::from_u32(code)
    };
    for (at, _) in pattern.match_indices('\\') {
        let escaped = match bytes.get(at + 1) {
            Some(b'x' | b'u' | b'U') if bytes.get(at + 2) == Some(&b'{') => {
                let end = pattern[at..].find('}').map(|end| at + end);
                end.and_then(|end| hex(at + 3, end - at - 3))
            }
            Some(b'x') => hex(at + 2, 2),
            Some(b'u') => hex(at + 2, 4),
            Some(b'U') => hex(at + 2, 8),
            _ => None,
        };
        named.extend(escaped);
    }
    named.extend(pattern.chars());
    named
}

/// Runs `regex` (compiled with a small backtracking limit) over probe texts at construction and
/// refuses the pattern if any match gives up, or if its matches leave any character of a probe
/// uncovered. Cheap screens, not proofs: [`Pretokenizer::try_for_each_piece`] still checks
/// both while pre-tokenizing.
///
/// Backtracking: patterns whose backtracking grows exponentially with the text
/// (`(?:a|a)+(?=$)`) would make encoding take minutes per match and then fail. Catastrophic
/// patterns backtrack over runs of one character when the end of the run does not let them
/// finish, so the probes include runs of one character (letters, digits, whitespace,
/// punctuation, and each character the pattern itself names), each followed by a different
/// character. Patterns without look-around or possessive parts run on a linear-time engine and
/// pass.
///
/// Tiling: a pattern whose matches do not cover every character (`\w+`, `[a-z]+|\s+`, `(?=a)`,
/// the empty pattern) makes encoding drop the characters they leave. The probes are short texts
/// holding every kind of character ([`PROBES`]: letters of many scripts, digits, whitespace and
/// line breaks, punctuation, symbols, emoji sequences, combining marks, controls and format
/// characters, U+FFFD, private use, noncharacters, unassigned code points) plus the runs above.
/// A failure of the first kind is reported first: the second is found on the way.
fn probe(pattern: &str, regex: &fancy_regex::Regex) -> Result<(), PretokenizeError> {
    const CHARACTERS: &str = "aA0 \n\t'.,-_é中";
    const ENDINGS: [&str; 7] = ["", "!", " ", "\n", "a", "0", "\u{1}"];
    let mut characters: Vec<char> = CHARACTERS.chars().collect();
    for c in named_characters(pattern) {
        if !characters.contains(&c) && characters.len() < MAX_RUNS {
            characters.push(c);
        }
    }
    let runs = characters.iter().flat_map(|&c| {
        ENDINGS.iter().map(move |ending| {
            let mut run: String = std::iter::repeat_n(c, PROBE_RUN).collect();
            run.push_str(ending);
            run
        })
    });
    let mut uncovered = None;
    for probe in PROBES.iter().map(|probe| probe.to_string()).chain(runs) {
        let failed = |failure| PretokenizeError::MatchFailed {
            pattern: pattern.to_string(),
            failure,
            text: format!("{probe:?}"),
            offset: None,
        };
        match tile(regex, &probe, |_| {}) {
            Ok(()) => {}
            Err((MatchFailure::Backtracking, _)) => return Err(failed(MatchFailure::Backtracking)),
            Err((failure, _)) => {
                uncovered.get_or_insert_with(|| failed(failure));
            }
        }
    }
    uncovered.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests;
