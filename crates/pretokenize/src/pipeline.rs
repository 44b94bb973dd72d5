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
    gpt2: fancy_regex::Regex,
    /// GPT-2's hand-written scanner, for a `ByteLevel` stage on the text's own characters: the
    /// same pieces as the regex (differential-tested), without a backtracking engine's VM.
    gpt2_scanner: crate::Pretokenizer,
}

/// GPT-2's regex as `tokenizers`' `ByteLevel` has it.
const BYTE_LEVEL_REGEX: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

impl Pipeline {
    /// A pipeline of `stages`, run in order.
    pub fn new(stages: Vec<Stage>) -> Pipeline {
        Pipeline {
            stages,
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
        mut f: impl FnMut(usize, usize),
    ) -> Result<(), PretokenizeError> {
        let mut pieces = if text.is_empty() {
            Vec::new()
        } else {
            vec![(0, text.len())]
        };
        let mut bytes_as_alphabet = false;
        let mut next = Vec::new();
        // (one piece's matches and the pieces they make, reused from piece to piece)
        let (mut matches, mut kept) = (Vec::new(), Vec::new());
        for stage in &self.stages {
            next.clear();
            for &(start, end) in &pieces {
                matches.clear();
                match stage {
                    Stage::Split {
                        matcher, invert, ..
                    } => {
                        find(matcher, text, start, end, bytes_as_alphabet, &mut matches)?;
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
                        find(&regex, text, start, end, bytes_as_alphabet, &mut matches)?;
                    }
                    Stage::ByteLevel { use_regex: false } => matches.push(((start, end), false)),
                }
                let behavior = match stage {
                    Stage::Split { behavior, .. } => *behavior,
                    Stage::ByteLevel { .. } => Behavior::Isolated,
                };
                made(&matches, behavior, &mut next, &mut kept);
            }
            std::mem::swap(&mut pieces, &mut next);
            if matches!(stage, Stage::ByteLevel { .. }) {
                bytes_as_alphabet = true;
            }
        }
        for (start, end) in pieces {
            f(start, end);
        }
        Ok(())
    }
}

/// The matches of `matcher` in `text[start..end]` and the stretches between them, in order,
/// covering it: `((start, end), is_match)` with byte offsets in `text`.
fn find(
    matcher: &Matcher,
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
                for (offset, c) in text[start..end].char_indices() {
                    if picks(c) {
                        hit(start + offset, start + offset + c.len_utf8(), found);
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
        Behavior::Isolated => kept.extend(matches.iter().map(|&(span, _)| (span, false))),
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

/// Unicode punctuation (general categories Pc, Pd, Ps, Pe, Pi, Pf, Po), as `tokenizers`' `is_punc`.
fn is_unicode_punctuation(c: char) -> bool {
    static PUNCTUATION: std::sync::LazyLock<fancy_regex::Regex> =
        std::sync::LazyLock::new(|| fancy_regex::Regex::new(r"^\p{P}$").expect("a valid regex"));
    !c.is_ascii()
        && PUNCTUATION
            .is_match(c.encode_utf8(&mut [0; 4]))
            .unwrap_or(false)
}

/// GPT-2's byte alphabet: the character each byte is written as (printable Latin-1 as itself,
/// the other bytes from U+0100 on, in order).
/// Which of the alphabet's characters a predicate picks, by the byte each stands for.
fn alphabet_picks(picks: fn(char) -> bool) -> [bool; 256] {
    let mut picked = [false; 256];
    for (byte, &c) in ALPHABET.iter().enumerate() {
        picked[byte] = picks(c);
    }
    picked
}

static NUMERIC_IN_ALPHABET: std::sync::LazyLock<[bool; 256]> =
    std::sync::LazyLock::new(|| alphabet_picks(char::is_numeric));
static PUNCTUATION_IN_ALPHABET: std::sync::LazyLock<[bool; 256]> = std::sync::LazyLock::new(|| {
    alphabet_picks(|c| c.is_ascii_punctuation() || is_unicode_punctuation(c))
});
static WHITESPACE_IN_ALPHABET: std::sync::LazyLock<[bool; 256]> =
    std::sync::LazyLock::new(|| alphabet_picks(char::is_whitespace));

static ALPHABET: std::sync::LazyLock<[char; 256]> = std::sync::LazyLock::new(|| {
    let mut alphabet = ['\0'; 256];
    let mut next = 0u32;
    for byte in 0..=255u8 {
        let printable = matches!(byte, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        alphabet[byte as usize] = if printable {
            char::from(byte)
        } else {
            next += 1;
            char::from_u32(0x100 + next - 1).expect("a valid character")
        };
    }
    alphabet
});

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
