//! Pre-tokenizer pipelines: Hugging Face `tokenizers`' pre-tokenizers (`Split`, `Digits`,
//! `Punctuation`, `Whitespace`, `WhitespaceSplit`, `ByteLevel`) run in a sequence, each on the
//! pieces the one before made, as `PreTokenizedString::split` runs them.
//!
//! A stage finds matches in a piece (a regex's, or the characters a predicate picks), which with
//! the stretches between them cover the piece; `invert` swaps which are matches; the behaviour
//! then makes the pieces (`normalizer.rs`' `NormalizedString::split`): `Removed` drops the
//! matches, `Isolated` keeps each stretch a piece, `Contiguous` joins neighbours of one kind,
//! `MergedWithPrevious` / `MergedWithNext` join a match to the stretch before / after it. Empty
//! pieces are dropped.
//!
//! After a `ByteLevel` stage the later stages see each byte as the character GPT-2's byte
//! alphabet writes it (a space is `Ġ`, the byte 0xB2 of `ò` is `²`, a numeric), as in
//! `tokenizers`; a piece is then a run of bytes, not always of whole characters. Pieces are byte
//! spans of the text.
//!
//! A stage works on each piece alone, so the pipeline runs depth first: a piece goes through
//! every later stage before the next piece is looked at (the same pieces, in the same order,
//! as stage by stage; a test compares the two). A stage that surely finds nothing in a piece
//! (no byte a match may start with) passes it on without its matcher.

use crate::byte_level::ALPHABET;
use crate::classes::is_unicode_punctuation;
use crate::split_regex::SplitRegex;
use crate::PretokenizeError;

/// A stretch of a piece, `(start, end)` in the text, and whether it is a match.
type Stretch = ((usize, usize), bool);

/// How a stage makes pieces of the matches and the stretches between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behavior {
    /// The matches are dropped.
    Removed,
    /// Every match and every stretch between is a piece.
    Isolated,
    /// A match joins the stretch before it.
    MergedWithPrevious,
    /// A match joins the stretch after it.
    MergedWithNext,
    /// Neighbouring matches make one piece, as do neighbouring stretches.
    Contiguous,
}

/// What a stage looks for.
#[derive(Debug, Clone)]
pub enum Matcher {
    /// A regex's matches (`tokenizers`' `Split` by a regex or a string).
    Regex(fancy_regex::Regex),
    /// Each numeric character (`char::is_numeric`: `Digits`).
    Numeric,
    /// Each punctuation character (ASCII punctuation, or a Unicode `P*` category: `Punctuation`).
    Punctuation,
    /// Each whitespace character (`char::is_whitespace`: `WhitespaceSplit`).
    Whitespace,
}

/// One pre-tokenizer of a pipeline.
#[derive(Debug, Clone)]
pub enum Stage {
    /// Pieces by a matcher and a behaviour (`invert`: the stretches between matches are the
    /// matches).
    Split {
        /// What is looked for.
        matcher: Matcher,
        /// How the pieces are made.
        behavior: Behavior,
        /// Whether matches and stretches swap.
        invert: bool,
    },
    /// `ByteLevel`: GPT-2's regex first if `use_regex` (each match a piece); the later stages
    /// then see the bytes as GPT-2's byte alphabet.
    ByteLevel {
        /// Whether GPT-2's regex splits the pieces.
        use_regex: bool,
    },
}

/// A sequence of stages.
#[derive(Debug, Clone)]
pub struct Pipeline {
    stages: Vec<Stage>,
    /// For each stage, what tells a piece its regex cannot match (None: no such test).
    prefilters: Vec<Option<Prefilter>>,
    /// For each stage, its regex on regex-automata, where that finds the same matches.
    fast: Vec<Option<SplitRegex>>,
    /// The hand-written pass that makes the stages' pieces in one go, where the stages are
    /// those of a tokenizer that has one.
    by_hand: Option<ByHand>,
    gpt2: fancy_regex::Regex,
    /// GPT-2's hand-written scanner, for a `ByteLevel` stage on the text's own characters: the
    /// same pieces as the regex (differential-tested), without a backtracking engine's VM.
    gpt2_scanner: crate::Pretokenizer,
}

/// The pipelines that run on a hand-written pass, each checked piece for piece against its
/// stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ByHand {
    /// DeepSeek-V3's three `Split`s and `ByteLevel` (`deepseek.rs`).
    DeepseekV3,
    /// Falcon's `Punctuation`, `ByteLevel`, `Digits` and `Split` (`falcon.rs`).
    Falcon,
}

/// GPT-2's regex as `tokenizers`' `ByteLevel` has it.
const BYTE_LEVEL_REGEX: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// One stage's working space, kept from piece to piece: a pipeline runs depth first, each piece
/// of a stage through the later stages before the next piece, so that what it works on stays in
/// the cache and its memory does not grow with the text.
#[derive(Debug, Default, Clone)]
struct Scratch {
    /// One piece's matches and the stretches between them.
    matches: Vec<Stretch>,
    /// The stretches a behaviour keeps.
    kept: Vec<Stretch>,
    /// The pieces made, for the next stage.
    pieces: Vec<(usize, usize)>,
}

impl Pipeline {
    /// A pipeline of `stages`, run in order.
    pub fn new(stages: Vec<Stage>) -> Pipeline {
        let (prefilters, fast) = stages
            .iter()
            .map(|stage| match stage {
                Stage::Split {
                    matcher: Matcher::Regex(regex),
                    ..
                } => (
                    Prefilter::of(&SplitRegex::rewritten(regex.as_str())),
                    SplitRegex::of(regex.as_str()),
                ),
                _ => (None, None),
            })
            .unzip();
        let by_hand = if is_deepseek_v3(&stages) {
            Some(ByHand::DeepseekV3)
        } else if is_falcon(&stages) {
            Some(ByHand::Falcon)
        } else {
            None
        };
        Pipeline {
            stages,
            prefilters,
            fast,
            by_hand,
            gpt2: fancy_regex::Regex::new(BYTE_LEVEL_REGEX).expect("GPT-2's regex compiles"),
            gpt2_scanner: crate::Pretokenizer::new(crate::GPT2_PATTERN)
                .expect("GPT-2's pattern has a scanner"),
        }
    }

    /// Calls `f(start, end)` with the byte span of each piece of `text`, left to right.
    ///
    /// # Errors
    /// A regex that gives up on a match (its backtracking limit), as a
    /// [`PretokenizeError::MatchFailed`] at the piece's start.
    pub fn try_for_each_span(
        &self,
        text: &str,
        f: impl FnMut(usize, usize),
    ) -> Result<(), PretokenizeError> {
        match self.by_hand {
            Some(ByHand::DeepseekV3) => crate::deepseek::pieces(text, f),
            Some(ByHand::Falcon) => crate::falcon::pieces(text, f),
            None => return self.stage_by_stage(text, f),
        }
        Ok(())
    }

    /// Whether the stages are DeepSeek-V3's, run by a scanner of their own.
    pub fn is_deepseek_v3(&self) -> bool {
        self.by_hand == Some(ByHand::DeepseekV3)
    }

    /// Whether the stages are Falcon's, run in one pass of their own.
    pub fn is_falcon(&self) -> bool {
        self.by_hand == Some(ByHand::Falcon)
    }

    /// [`Pipeline::try_for_each_span`] by the stages themselves, whatever they are.
    pub(crate) fn stage_by_stage(
        &self,
        text: &str,
        mut f: impl FnMut(usize, usize),
    ) -> Result<(), PretokenizeError> {
        if text.is_empty() {
            return Ok(());
        }
        let mut scratch = vec![Scratch::default(); self.stages.len()];
        self.run(0, text, (0, text.len()), false, &mut scratch, &mut f)
    }

    /// The piece `span` of `text` through the stages from `index` on, each of its pieces given to
    /// `f`; `bytes_as_alphabet`: whether a `ByteLevel` stage ran before `index`.
    fn run<F: FnMut(usize, usize)>(
        &self,
        index: usize,
        text: &str,
        (start, end): (usize, usize),
        bytes_as_alphabet: bool,
        scratch: &mut [Scratch],
        f: &mut F,
    ) -> Result<(), PretokenizeError> {
        let (Some(stage), Some((mine, later))) =
            (self.stages.get(index), scratch.split_first_mut())
        else {
            f(start, end);
            return Ok(());
        };
        let matches = &mut mine.matches;
        matches.clear();
        match stage {
            Stage::Split {
                matcher,
                invert,
                behavior,
            } => {
                let bytes = &text.as_bytes()[start..end];
                let unmatched = match &self.prefilters[index] {
                    Some(prefilter) => !prefilter.may_match(bytes, bytes_as_alphabet),
                    None => picks_none(matcher, bytes, bytes_as_alphabet),
                };
                if unmatched {
                    // (one stretch and no match: every behaviour keeps the piece as it is,
                    // but Removed when inverted, which makes the stretch the match)
                    if *invert && *behavior == Behavior::Removed {
                        return Ok(());
                    }
                    return self.run(index + 1, text, (start, end), bytes_as_alphabet, later, f);
                }
                let fast = self.fast[index].as_ref();
                find(matcher, fast, text, start, end, bytes_as_alphabet, matches)?;
                if *invert {
                    matches
                        .iter_mut()
                        .for_each(|(_, is_match)| *is_match = !*is_match);
                }
            }
            Stage::ByteLevel { use_regex: true } if !bytes_as_alphabet => {
                // (each piece of the regex a match; together they cover the stretch)
                let base = text.as_ptr() as usize;
                self.gpt2_scanner
                    .try_for_each_piece(&text[start..end], |piece| {
                        let from = piece.as_ptr() as usize - base;
                        matches.push(((from, from + piece.len()), true));
                    })?;
            }
            Stage::ByteLevel { use_regex: true } => {
                let regex = Matcher::Regex(self.gpt2.clone());
                find(&regex, None, text, start, end, bytes_as_alphabet, matches)?;
            }
            Stage::ByteLevel { use_regex: false } => {
                // (the piece as it is, its bytes written in the alphabet from here on)
                return self.run(index + 1, text, (start, end), true, later, f);
            }
        }
        let behavior = match stage {
            Stage::Split { behavior, .. } => *behavior,
            Stage::ByteLevel { .. } => Behavior::Isolated,
        };
        mine.pieces.clear();
        made(&mine.matches, behavior, &mut mine.pieces, &mut mine.kept);
        let alphabet_after = bytes_as_alphabet || matches!(stage, Stage::ByteLevel { .. });
        for &piece in &mine.pieces {
            self.run(index + 1, text, piece, alphabet_after, later, f)?;
        }
        Ok(())
    }
}

/// Whether `stages` are DeepSeek-V3's pre-tokenizer: its three `Split`s, `Isolated`, then
/// `ByteLevel` without its regex. (Its file writes a carriage return and a newline in the
/// regexes as the characters themselves, JSON's `\r` and `\n`; either spelling is taken.)
fn is_deepseek_v3(stages: &[Stage]) -> bool {
    let split = |stage: &Stage, pattern: &str| {
        matches!(stage, Stage::Split {
            matcher: Matcher::Regex(regex),
            behavior: Behavior::Isolated,
            invert: false,
        } if regex.as_str().replace('\r', r"\r").replace('\n', r"\n") == pattern)
    };
    matches!(stages, [numbers, cjk, words, Stage::ByteLevel { use_regex: false }]
        if split(numbers, crate::deepseek::NUMBERS)
            && split(cjk, crate::deepseek::CJK)
            && split(words, crate::deepseek::WORDS))
}

/// Whether `stages` are Falcon's pre-tokenizer: `Punctuation` (`Contiguous`), `ByteLevel` with
/// its regex, `Digits` (`Contiguous`: not each digit alone) and the `Split` of three digits
/// (`Isolated`).
fn is_falcon(stages: &[Stage]) -> bool {
    matches!(stages, [
        Stage::Split { matcher: Matcher::Punctuation, behavior: Behavior::Contiguous, invert: false },
        Stage::ByteLevel { use_regex: true },
        Stage::Split { matcher: Matcher::Numeric, behavior: Behavior::Contiguous, invert: false },
        Stage::Split { matcher: Matcher::Regex(regex), behavior: Behavior::Isolated, invert: false },
    ] if regex.as_str() == crate::falcon::THREE_DIGITS)
}

/// What a `Split` regex needs of a piece to match in it: a byte that a match may start with,
/// and enough bytes. Most pieces of a later stage lack it (Falcon's `[0-9][0-9][0-9]` after the
/// digits were split off), and the regex, set up for each piece, is the slow part of a stage.
#[derive(Debug, Clone)]
struct Prefilter {
    /// By the text's byte: whether a match may start with it.
    direct: [bool; 256],
    /// By the text's byte, after `ByteLevel` (the haystack is the alphabet's character for it):
    /// whether a match may start with that character.
    alphabet: [bool; 256],
    /// The fewest bytes a match spans (at least 1).
    min_len: usize,
}

impl Prefilter {
    /// The test for `pattern`, or None when it cannot be had: the pattern is beyond
    /// regex-syntax (fancy-regex's look-arounds, back-references) or may match nothing.
    fn of(pattern: &str) -> Option<Prefilter> {
        let hir = regex_syntax::parse(pattern).ok()?;
        let min_len = hir.properties().minimum_len()?;
        if min_len == 0 {
            return None;
        }
        let mut direct = [false; 256];
        if first_bytes(&hir, &mut direct) {
            return None; // (an empty match: a regex of only look-arounds)
        }
        let mut alphabet = [false; 256];
        for (byte, &c) in ALPHABET.iter().enumerate() {
            alphabet[byte] = direct[c.encode_utf8(&mut [0; 4]).as_bytes()[0] as usize];
        }
        Some(Prefilter {
            direct,
            alphabet,
            min_len,
        })
    }

    /// Whether the regex may match in `bytes`, a piece of the text (written in the alphabet, one
    /// or two bytes each, when `bytes_as_alphabet`).
    #[inline]
    fn may_match(&self, bytes: &[u8], bytes_as_alphabet: bool) -> bool {
        let (starts, longest) = if bytes_as_alphabet {
            (&self.alphabet, 2 * bytes.len())
        } else {
            (&self.direct, bytes.len())
        };
        longest >= self.min_len && bytes.iter().any(|&byte| starts[byte as usize])
    }
}

/// Marks in `starts` every byte a non-empty match of `hir` may start with; returns whether `hir`
/// may match the empty string (a zero-width assertion counts as empty: it only narrows).
fn first_bytes(hir: &regex_syntax::hir::Hir, starts: &mut [bool; 256]) -> bool {
    use regex_syntax::hir::{Class, HirKind};
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => true,
        HirKind::Literal(literal) => match literal.0.first() {
            Some(&byte) => {
                starts[byte as usize] = true;
                false
            }
            None => true,
        },
        HirKind::Class(Class::Unicode(class)) => {
            // (the lead bytes of a range's characters lie between those of its ends)
            for range in class.ranges() {
                let lead = |c: char| c.encode_utf8(&mut [0; 4]).as_bytes()[0] as usize;
                starts[lead(range.start())..=lead(range.end())].fill(true);
            }
            false
        }
        HirKind::Class(Class::Bytes(class)) => {
            for range in class.ranges() {
                starts[range.start() as usize..=range.end() as usize].fill(true);
            }
            false
        }
        HirKind::Repetition(repetition) => {
            first_bytes(&repetition.sub, starts) || repetition.min == 0
        }
        HirKind::Capture(capture) => first_bytes(&capture.sub, starts),
        HirKind::Concat(parts) => parts.iter().all(|part| first_bytes(part, starts)),
        HirKind::Alternation(options) => options
            .iter()
            .fold(false, |empty, option| first_bytes(option, starts) | empty),
    }
}

/// The matches of `matcher` in `text[start..end]` and the stretches between them, in order,
/// covering it: `((start, end), is_match)` with byte offsets in `text`. `fast`: the regex
/// matcher's own on regex-automata, if it has one.
fn find(
    matcher: &Matcher,
    fast: Option<&SplitRegex>,
    text: &str,
    start: usize,
    end: usize,
    bytes_as_alphabet: bool,
    found: &mut Vec<Stretch>,
) -> Result<(), PretokenizeError> {
    let mut covered = start;
    let mut hit = |from: usize, to: usize, found: &mut Vec<Stretch>| {
        if covered < from {
            found.push(((covered, from), false));
        }
        found.push(((from, to), true));
        covered = to;
    };
    match matcher {
        Matcher::Regex(regex) => {
            // (on the alphabet's characters, each one byte of the text, after ByteLevel)
            // (bytes from '!' to '~' are themselves in the alphabet: such a piece, most of an
            // English text's, is its own haystack)
            let rewritten = bytes_as_alphabet
                && !text.as_bytes()[start..end]
                    .iter()
                    .all(|byte| (b'!'..=b'~').contains(byte));
            let (haystack, offsets) = if rewritten {
                let mut written = String::with_capacity(2 * (end - start));
                let mut offsets = Vec::with_capacity(2 * (end - start) + 1);
                // (offsets[k]: the text's byte that the alphabet string's byte k stands for)
                for (index, &byte) in text.as_bytes()[start..end].iter().enumerate() {
                    let c = ALPHABET[byte as usize];
                    offsets.extend(std::iter::repeat_n(start + index, c.len_utf8()));
                    written.push(c);
                }
                offsets.push(end);
                (std::borrow::Cow::Owned(written), Some(offsets))
            } else {
                (std::borrow::Cow::Borrowed(&text[start..end]), None)
            };
            let at = |offset: usize| match &offsets {
                Some(offsets) => offsets[offset],
                None => start + offset,
            };
            if let Some(fast) = fast {
                fast.for_each_match(haystack.as_ref(), |from, to| {
                    hit(at(from), at(to), found);
                    true
                });
            } else {
                for matched in regex.find_iter(haystack.as_ref()) {
                    let matched = matched.map_err(|_| PretokenizeError::MatchFailed {
                        pattern: regex.as_str().to_string(),
                        failure: crate::MatchFailure::Backtracking,
                        text: format!("a text of {} bytes", text.len()),
                        offset: Some(start),
                    })?;
                    hit(at(matched.start()), at(matched.end()), found);
                }
            }
        }
        predicate => {
            let picks = |c: char| match predicate {
                Matcher::Numeric => c.is_numeric(),
                Matcher::Punctuation => c.is_ascii_punctuation() || is_unicode_punctuation(c),
                Matcher::Whitespace => c.is_whitespace(),
                Matcher::Regex(_) => unreachable!("handled above"),
            };
            if bytes_as_alphabet {
                // (the alphabet's 256 characters classified once, not one character at a time)
                let picked: &[bool; 256] = match predicate {
                    Matcher::Numeric => &NUMERIC_IN_ALPHABET,
                    Matcher::Punctuation => &PUNCTUATION_IN_ALPHABET,
                    Matcher::Whitespace => &WHITESPACE_IN_ALPHABET,
                    Matcher::Regex(_) => unreachable!("handled above"),
                };
                for (offset, &byte) in text.as_bytes()[start..end].iter().enumerate() {
                    if picked[byte as usize] {
                        hit(start + offset, start + offset + 1, found);
                    }
                }
            } else {
                // (ASCII, most of a text, by a table; other characters decoded and tested)
                let ascii: &[bool; 128] = match predicate {
                    Matcher::Numeric => &NUMERIC_ASCII,
                    Matcher::Punctuation => &PUNCTUATION_ASCII,
                    Matcher::Whitespace => &WHITESPACE_ASCII,
                    Matcher::Regex(_) => unreachable!("handled above"),
                };
                let bytes = text.as_bytes();
                let mut at = start;
                while at < end {
                    let byte = bytes[at];
                    if byte.is_ascii() {
                        if ascii[byte as usize] {
                            hit(at, at + 1, found);
                        }
                        at += 1;
                    } else {
                        let c = text[at..].chars().next().expect("a character starts here");
                        if picks(c) {
                            hit(at, at + c.len_utf8(), found);
                        }
                        at += c.len_utf8();
                    }
                }
            }
        }
    }
    if covered < end {
        found.push(((covered, end), false));
    }
    Ok(())
}

/// Whether a predicate `matcher` surely picks no character of `bytes`, a piece of the text
/// (false when it may, or for a regex): a piece of ASCII, or any piece after `ByteLevel`, tested
/// byte by byte.
fn picks_none(matcher: &Matcher, bytes: &[u8], bytes_as_alphabet: bool) -> bool {
    let (alphabet, ascii): (&[bool; 256], &[bool; 128]) = match matcher {
        Matcher::Numeric => (&NUMERIC_IN_ALPHABET, &NUMERIC_ASCII),
        Matcher::Punctuation => (&PUNCTUATION_IN_ALPHABET, &PUNCTUATION_ASCII),
        Matcher::Whitespace => (&WHITESPACE_IN_ALPHABET, &WHITESPACE_ASCII),
        Matcher::Regex(_) => return false,
    };
    if bytes_as_alphabet {
        !bytes.iter().any(|&byte| alphabet[byte as usize])
    } else {
        bytes
            .iter()
            .all(|&byte| byte.is_ascii() && !ascii[byte as usize])
    }
}

/// `NormalizedString::split`'s behaviours on the matches of one piece; the pieces kept are
/// appended to `out` (empty ones dropped).
fn made(
    matches: &[Stretch],
    behavior: Behavior,
    out: &mut Vec<(usize, usize)>,
    kept: &mut Vec<Stretch>,
) {
    kept.clear();
    match behavior {
        Behavior::Isolated => {
            // (every stretch a piece: nothing to join or drop)
            let kept = matches.iter().filter(|&&((start, end), _)| start < end);
            out.extend(kept.map(|&(span, _)| span));
            return;
        }
        Behavior::Removed => kept.extend_from_slice(matches),
        Behavior::Contiguous => {
            let mut previous = false;
            for &(span, is_match) in matches {
                match kept.last_mut() {
                    Some(((_, end), _)) if is_match == previous => *end = span.1,
                    _ => kept.push((span, false)),
                }
                previous = is_match;
            }
        }
        Behavior::MergedWithPrevious => {
            let mut previous = false;
            for &(span, is_match) in matches {
                match kept.last_mut() {
                    Some(((_, end), _)) if is_match && !previous => *end = span.1,
                    _ => kept.push((span, false)),
                }
                previous = is_match;
            }
        }
        Behavior::MergedWithNext => {
            let mut previous = false;
            for &(span, is_match) in matches.iter().rev() {
                match kept.last_mut() {
                    Some(((start, _), _)) if is_match && !previous => *start = span.0,
                    _ => kept.push((span, false)),
                }
                previous = is_match;
            }
            kept.reverse();
        }
    }
    out.extend(
        kept.iter()
            .filter(|&&((start, end), removed)| !removed && start < end)
            .map(|(span, _)| span),
    );
}

/// Which of the alphabet's characters a predicate picks, by the byte each stands for.
fn alphabet_picks(picks: fn(char) -> bool) -> [bool; 256] {
    let mut picked = [false; 256];
    for (byte, &c) in ALPHABET.iter().enumerate() {
        picked[byte] = picks(c);
    }
    picked
}

/// Which ASCII characters a predicate picks.
fn ascii_picks(picks: fn(char) -> bool) -> [bool; 128] {
    std::array::from_fn(|byte| picks(char::from(byte as u8)))
}

static NUMERIC_ASCII: std::sync::LazyLock<[bool; 128]> =
    std::sync::LazyLock::new(|| ascii_picks(char::is_numeric));
static PUNCTUATION_ASCII: std::sync::LazyLock<[bool; 128]> =
    std::sync::LazyLock::new(|| ascii_picks(|c| c.is_ascii_punctuation()));
static WHITESPACE_ASCII: std::sync::LazyLock<[bool; 128]> =
    std::sync::LazyLock::new(|| ascii_picks(char::is_whitespace));

static NUMERIC_IN_ALPHABET: std::sync::LazyLock<[bool; 256]> =
    std::sync::LazyLock::new(|| alphabet_picks(char::is_numeric));
static PUNCTUATION_IN_ALPHABET: std::sync::LazyLock<[bool; 256]> = std::sync::LazyLock::new(|| {
    alphabet_picks(|c| c.is_ascii_punctuation() || is_unicode_punctuation(c))
});
static WHITESPACE_IN_ALPHABET: std::sync::LazyLock<[bool; 256]> =
    std::sync::LazyLock::new(|| alphabet_picks(char::is_whitespace));

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(stages: Vec<Stage>, text: &str) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        Pipeline::new(stages)
            .try_for_each_span(text, |start, end| {
                out.push(text.as_bytes()[start..end].to_vec())
            })
            .unwrap();
        out
    }

    /// The pipeline as `tokenizers` runs it, breadth first (each stage over all the pieces of
    /// the one before) and without the shortcuts: every stage's `find` on every piece.
    fn pieces_stage_by_stage(pipeline: &Pipeline, text: &str) -> Vec<(usize, usize)> {
        let mut pieces = vec![(0, text.len())];
        let mut alphabet = false;
        for stage in &pipeline.stages {
            let mut next = Vec::new();
            for &(start, end) in &pieces {
                let mut matches = Vec::new();
                let behavior = match stage {
                    Stage::Split {
                        matcher,
                        behavior,
                        invert,
                    } => {
                        find(matcher, None, text, start, end, alphabet, &mut matches).unwrap();
                        if *invert {
                            matches.iter_mut().for_each(|(_, m)| *m = !*m);
                        }
                        *behavior
                    }
                    Stage::ByteLevel { use_regex: true } => {
                        let gpt2 = Matcher::Regex(pipeline.gpt2.clone());
                        find(&gpt2, None, text, start, end, alphabet, &mut matches).unwrap();
                        Behavior::Isolated
                    }
                    Stage::ByteLevel { use_regex: false } => {
                        matches.push(((start, end), false));
                        Behavior::Isolated
                    }
                };
                made(&matches, behavior, &mut next, &mut Vec::new());
            }
            pieces = next;
            alphabet |= matches!(stage, Stage::ByteLevel { .. });
        }
        pieces.retain(|&(start, end)| start < end);
        pieces
    }

    fn regex(pattern: &str) -> Matcher {
        Matcher::Regex(fancy_regex::Regex::new(pattern).unwrap())
    }

    #[test]
    fn depth_first_with_shortcuts_gives_the_pieces_of_stage_by_stage() {
        let split = |matcher, behavior, invert| Stage::Split {
            matcher,
            behavior,
            invert,
        };
        let falcon = vec![
            split(Matcher::Punctuation, Behavior::Contiguous, false),
            Stage::ByteLevel { use_regex: true },
            split(Matcher::Numeric, Behavior::Contiguous, false),
            split(regex("[0-9][0-9][0-9]"), Behavior::Isolated, false),
        ];
        let deepseek = vec![
            split(regex(r"\p{N}{1,3}"), Behavior::Isolated, false),
            split(regex("[一-龥぀-ゟ゠-ヿ]+"), Behavior::Isolated, false),
            split(
                regex(
                    r"[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
                ),
                Behavior::Isolated,
                false,
            ),
            Stage::ByteLevel { use_regex: false },
        ];
        let mut pipelines = vec![falcon, deepseek];
        let behaviors = [
            Behavior::Removed,
            Behavior::Isolated,
            Behavior::MergedWithPrevious,
            Behavior::MergedWithNext,
            Behavior::Contiguous,
        ];
        for (index, behavior) in behaviors.into_iter().enumerate() {
            for invert in [false, true] {
                pipelines.push(vec![
                    split(Matcher::Whitespace, behavior, invert),
                    split(Matcher::Punctuation, behaviors[(index + 1) % 5], !invert),
                    Stage::ByteLevel {
                        use_regex: index % 2 == 0,
                    },
                    split(Matcher::Numeric, behaviors[(index + 2) % 5], invert),
                    split(regex("'s|ll|[²³]"), behavior, invert),
                    split(Matcher::Whitespace, behaviors[(index + 3) % 5], invert),
                ]);
            }
        }
        let mut nasty = crate::tests::Nasty::new(11);
        for stages in &pipelines {
            let pipeline = Pipeline::new(stages.clone());
            for _ in 0..400 {
                let text = nasty.text(24) + "café 12345 x.y, ò²";
                let mut found = Vec::new();
                pipeline
                    .try_for_each_span(&text, |start, end| found.push((start, end)))
                    .unwrap();
                assert_eq!(found, pieces_stage_by_stage(&pipeline, &text), "{text:?}");
            }
        }
    }

    #[test]
    fn a_regex_stage_skips_only_pieces_it_cannot_match_in() {
        let patterns = [
            "[0-9][0-9][0-9]",
            r"\p{N}{1,3}",
            "[一-龥぀-ゟ゠-ヿ]+",
            "(?i:'s|'t|'re)",
            r" ?\p{L}+|\s+",
            r"\bé",
            "ò|²|Ġ",
            "(?:x|y?)z",
        ];
        let mut nasty = crate::tests::Nasty::new(5);
        for pattern in patterns {
            let regex = fancy_regex::Regex::new(pattern).unwrap();
            let prefilter = Prefilter::of(pattern).expect("a pattern regex-syntax reads");
            for _ in 0..3000 {
                let text = nasty.text(6);
                let alphabet: String = text.bytes().map(|byte| ALPHABET[byte as usize]).collect();
                if regex.is_match(&text).unwrap() {
                    assert!(
                        prefilter.may_match(text.as_bytes(), false),
                        "{pattern} {text:?}"
                    );
                }
                if regex.is_match(&alphabet).unwrap() {
                    assert!(
                        prefilter.may_match(text.as_bytes(), true),
                        "{pattern} {text:?}"
                    );
                }
            }
        }
        // (a regex that may match nothing, or that regex-syntax does not read, has no test)
        assert!(Prefilter::of("a*").is_none());
        assert!(Prefilter::of(r"\s+(?!\S)").is_none());
        assert!(Prefilter::of("(?=a)").is_none());
    }

    #[test]
    fn unicode_punctuation_is_the_regex_class() {
        let every: String = (0x80..=0x10FFFF).filter_map(char::from_u32).collect();
        let by_regex: Vec<char> = fancy_regex::Regex::new(r"\p{P}")
            .unwrap()
            .find_iter(&every)
            .map(|m| m.unwrap().as_str().chars().next().unwrap())
            .collect();
        let by_table: Vec<char> = every
            .chars()
            .filter(|&c| is_unicode_punctuation(c))
            .collect();
        assert!(by_table.len() > 700);
        assert_eq!(by_table, by_regex);
        assert!(!(0..0x80u8).any(|byte| is_unicode_punctuation(char::from(byte))));
    }

    #[test]
    fn the_alphabet_writes_a_space_as_g_with_a_dot() {
        assert_eq!(ALPHABET[b' ' as usize], '\u{120}');
        assert_eq!(ALPHABET[b'a' as usize], 'a');
        assert_eq!(ALPHABET[0xB2], '\u{b2}');
    }

    #[test]
    fn behaviours_make_pieces_as_tokenizers_does() {
        let split = |behavior| Stage::Split {
            matcher: Matcher::Regex(fancy_regex::Regex::new("-").unwrap()),
            behavior,
            invert: false,
        };
        let text = "a-b--c";
        let shown = |p: Vec<Vec<u8>>| {
            p.into_iter()
                .map(|p| String::from_utf8(p).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            shown(pieces(vec![split(Behavior::Removed)], text)),
            ["a", "b", "c"]
        );
        assert_eq!(
            shown(pieces(vec![split(Behavior::Isolated)], text)),
            ["a", "-", "b", "-", "-", "c"]
        );
        assert_eq!(
            shown(pieces(vec![split(Behavior::MergedWithPrevious)], text)),
            ["a-", "b-", "-", "c"]
        );
        assert_eq!(
            shown(pieces(vec![split(Behavior::MergedWithNext)], text)),
            ["a", "-b", "-", "-c"]
        );
        assert_eq!(
            shown(pieces(vec![split(Behavior::Contiguous)], text)),
            ["a", "-", "b", "--", "c"]
        );
    }

    #[test]
    fn after_byte_level_a_digit_stage_sees_the_alphabet() {
        // "ò" is C3 B2; the alphabet writes B2 as "²", a numeric: Digits cuts the character.
        let stages = vec![
            Stage::ByteLevel { use_regex: true },
            Stage::Split {
                matcher: Matcher::Numeric,
                behavior: Behavior::Isolated,
                invert: false,
            },
        ];
        assert_eq!(
            pieces(stages, "ò1"),
            [vec![0xC3], vec![0xB2], b"1".to_vec()]
        );
    }
}
