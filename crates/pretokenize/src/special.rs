//! Special tokens: found longest first, as the Python code's `re` alternation finds them.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};

/// With a special (or added) token longer than this, their automaton is an NFA, not a DFA.
const DFA_TOKEN_BYTES: usize = 1024;

/// The special tokens of a tokenizer, found longest-first: at the leftmost position where any
/// occurs, the longest one there wins, exactly as Python's
/// `re.compile("|".join(sorted(map(re.escape, tokens), key=len, reverse=True)))` finds them.
#[derive(Debug, Clone)]
pub struct SpecialTokens {
    tokens: Vec<String>,
    /// For each pattern of the automaton, its index in `tokens` (the first of equal tokens).
    indices: Vec<usize>,
    automaton: Option<AhoCorasick>,
    longest_len: usize,
    any_has_space: bool,
    any_has_newline: bool,
}

impl SpecialTokens {
    /// The special tokens `tokens`, in the order given (indices in [`Part::Special`] point into
    /// it). Empty strings are the caller's error: they are ignored (they could never be cut out).
    pub fn new(tokens: &[String]) -> SpecialTokens {
        let mut patterns: Vec<&str> = Vec::new();
        let mut indices = Vec::new();
        for (index, token) in tokens.iter().enumerate() {
            if !token.is_empty() && !patterns.contains(&token.as_str()) {
                patterns.push(token);
                indices.push(index);
            }
        }
        let automaton = if patterns.is_empty() {
            None
        } else {
            // A DFA matches fastest, but building one takes time quadratic in a token's length
            // on repetitive tokens (a 16 KB "abab..." took seconds); with a token longer than a
            // KB the contiguous NFA, built in linear time, serves instead. Real special tokens
            // are short (Llama-3's 256 are 7 KB in all, none over 40 bytes): they keep the DFA.
            let longest = patterns
                .iter()
                .map(|pattern| pattern.len())
                .max()
                .unwrap_or(0);
            let kind = (longest > DFA_TOKEN_BYTES).then_some(AhoCorasickKind::ContiguousNFA);
            Some(
                AhoCorasickBuilder::new()
                    .match_kind(MatchKind::LeftmostLongest)
                    .kind(kind)
                    .build(&patterns)
                    .expect("an automaton of the special tokens fits in memory"),
            )
        };
        SpecialTokens {
            tokens: tokens.to_vec(),
            indices,
            automaton,
            longest_len: tokens.iter().map(String::len).max().unwrap_or(0),
            any_has_space: tokens.iter().any(|token| token.contains(' ')),
            any_has_newline: tokens.iter().any(|token| token.contains('\n')),
        }
    }

    /// No special tokens at all.
    pub fn none() -> SpecialTokens {
        SpecialTokens::new(&[])
    }

    /// The tokens, in the order given to [`SpecialTokens::new`].
    pub fn tokens(&self) -> &[String] {
        &self.tokens
    }

    /// Whether there is no (non-empty) special token.
    pub fn is_empty(&self) -> bool {
        self.automaton.is_none()
    }

    /// The length of the longest special token, in bytes (0 if there is none).
    pub fn longest_len(&self) -> usize {
        self.longest_len
    }

    /// Whether some special token contains a space (then a space can be inside one).
    pub fn any_has_space(&self) -> bool {
        self.any_has_space
    }

    /// Whether some special token contains a newline (then a newline can be inside one).
    pub fn any_has_newline(&self) -> bool {
        self.any_has_newline
    }

    /// Whether some special token starts at byte `position` of `text`.
    pub fn starts_at(&self, text: &[u8], position: usize) -> bool {
        let rest = &text[position.min(text.len())..];
        self.tokens
            .iter()
            .any(|token| !token.is_empty() && rest.starts_with(token.as_bytes()))
    }

    /// The special tokens in `text` (any bytes), left to right, not overlapping: `(index into
    /// tokens(), start, end)` byte spans.
    pub fn find_iter<'a>(
        &'a self,
        text: &'a [u8],
    ) -> impl Iterator<Item = (usize, usize, usize)> + 'a {
        self.automaton.iter().flat_map(move |automaton| {
            automaton.find_iter(text).map(|found| {
                (
                    self.indices[found.pattern().as_usize()],
                    found.start(),
                    found.end(),
                )
            })
        })
    }

    /// `text` cut into ordinary text and special tokens, in order. Text parts are never empty
    /// (two adjacent special tokens have no text part between them).
    pub fn split<'s, 't>(&'s self, text: &'t str) -> Split<'s, 't> {
        Split {
            specials: self,
            text,
            position: 0,
            pending: None,
            matches: self
                .automaton
                .as_ref()
                .map(|automaton| automaton.find_iter(text)),
        }
    }
}

/// One part of a text cut at its special tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part<'t> {
    /// Ordinary text (never empty), to be pre-tokenized.
    Text(&'t str),
    /// A special token: its index in [`SpecialTokens::tokens`] and its text.
    Special {
        /// Index into [`SpecialTokens::tokens`].
        index: usize,
        /// The token's text.
        text: &'t str,
    },
}

/// The iterator of [`SpecialTokens::split`].
pub struct Split<'s, 't> {
    specials: &'s SpecialTokens,
    text: &'t str,
    position: usize,
    pending: Option<(usize, usize, usize)>,
    matches: Option<aho_corasick::FindIter<'s, 't>>,
}

impl<'t> Iterator for Split<'_, 't> {
    type Item = Part<'t>;

    fn next(&mut self) -> Option<Part<'t>> {
        if let Some((index, start, end)) = self.pending.take() {
            self.position = end;
            return Some(Part::Special {
                index,
                text: &self.text[start..end],
            });
        }
        let found = self.matches.as_mut().and_then(Iterator::next);
        match found {
            Some(found) => {
                let (start, end) = (found.start(), found.end());
                let index = self.specials.indices[found.pattern().as_usize()];
                if start > self.position {
                    let part = Part::Text(&self.text[self.position..start]);
                    self.pending = Some((index, start, end));
                    self.position = start;
                    Some(part)
                } else {
                    self.position = end;
                    Some(Part::Special {
                        index,
                        text: &self.text[start..end],
                    })
                }
            }
            None if self.position < self.text.len() => {
                let part = Part::Text(&self.text[self.position..]);
                self.position = self.text.len();
                Some(part)
            }
            None => None,
        }
    }
}
