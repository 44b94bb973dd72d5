//! Special tokens: found longest first, as the Python code's `re` alternation finds them.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
use std::sync::LazyLock;

/// How a token found in the text takes its surroundings, as Hugging Face's added tokens do
/// (`added_vocabulary.rs`): RoBERTa's `<mask>` takes the whitespace before it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenOptions {
    /// The whitespace right before the token (back to the text's start or the token found
    /// before) is part of it.
    pub lstrip: bool,
    /// The whitespace right after the token is part of it.
    pub rstrip: bool,
    /// The token counts only where it is not next to a word character (`\w`) on either side;
    /// elsewhere it is ordinary text.
    pub single_word: bool,
}

impl TokenOptions {
    /// Whether any option is on.
    pub fn any(&self) -> bool {
        self.lstrip || self.rstrip || self.single_word
    }
}

/// `\w` as Hugging Face's `regex` crate reads it (Unicode word characters).
static WORD: LazyLock<fancy_regex::Regex> =
    LazyLock::new(|| fancy_regex::Regex::new(r"^\w").expect("a valid regex"));

fn starts_with_word(text: &str) -> bool {
    WORD.is_match(text).unwrap_or(false)
}

fn ends_with_word(text: &str) -> bool {
    text.chars()
        .next_back()
        .is_some_and(|c| starts_with_word(c.encode_utf8(&mut [0; 4])))
}

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
    /// `options[i]` is how `tokens[i]` takes its surroundings (all off unless given).
    options: Vec<TokenOptions>,
    /// The tokens' first two bytes, when every token has two and there are few such pairs: a
    /// text holding none of them holds no token, which a search for each pair (memchr's SIMD
    /// memmem) tells much faster than the automaton, whose own prefilter knows only the first
    /// bytes (GPT-NeoX's added tokens are runs of spaces: it would stop at every space).
    openings: Option<Vec<memchr::memmem::Finder<'static>>>,
}

/// How many distinct openings (see `SpecialTokens::openings`) are looked for before the automaton.
const MAX_OPENINGS: usize = 4;

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
            options: vec![TokenOptions::default(); tokens.len()],
            openings: openings(&patterns),
        }
    }

    /// [`SpecialTokens::new`], each token taking its surroundings by `options` (one for each
    /// token, in the same order).
    ///
    /// # Panics
    /// If `options` is not as long as `tokens`.
    pub fn with_options(tokens: &[String], options: &[TokenOptions]) -> SpecialTokens {
        assert_eq!(tokens.len(), options.len(), "one option set per token");
        let mut made = SpecialTokens::new(tokens);
        made.options = options.to_vec();
        made
    }

    /// How each token takes its surroundings (see [`TokenOptions`]), in the order of [`SpecialTokens::tokens`].
    pub fn options(&self) -> &[TokenOptions] {
        &self.options
    }

    /// Whether any token has an option on.
    pub fn any_options(&self) -> bool {
        self.options.iter().any(TokenOptions::any)
    }

    /// The tokens for which `keep(token)` holds, with their options.
    pub fn subset(&self, keep: impl Fn(&str, &TokenOptions) -> bool) -> SpecialTokens {
        let (tokens, options): (Vec<String>, Vec<TokenOptions>) = self
            .tokens
            .iter()
            .zip(&self.options)
            .filter(|(token, options)| keep(token, options))
            .map(|(token, options)| (token.clone(), *options))
            .unzip();
        SpecialTokens::with_options(&tokens, &options)
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
        let none_opens = self.openings.as_ref().is_some_and(|openings| {
            openings
                .iter()
                .all(|opening| opening.find(text.as_bytes()).is_none())
        });
        Split {
            specials: self,
            text,
            position: 0,
            pending: None,
            matches: self
                .automaton
                .as_ref()
                .filter(|_| !none_opens)
                .map(|automaton| automaton.find_iter(text)),
        }
    }
}

/// The distinct first two bytes of `patterns`, each with its finder, if every pattern has two
/// bytes and there are at most [`MAX_OPENINGS`] such pairs (else None: the automaton alone).
fn openings(patterns: &[&str]) -> Option<Vec<memchr::memmem::Finder<'static>>> {
    let mut pairs: Vec<&[u8]> = Vec::new();
    for pattern in patterns {
        let pair = pattern.as_bytes().get(..2)?;
        if !pairs.contains(&pair) {
            pairs.push(pair);
        }
    }
    (!pairs.is_empty() && pairs.len() <= MAX_OPENINGS).then(|| {
        pairs
            .into_iter()
            .map(|pair| memchr::memmem::Finder::new(pair).into_owned())
            .collect()
    })
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
        loop {
            let found = self.matches.as_mut().and_then(Iterator::next);
            let Some(found) = found else {
                if self.position < self.text.len() {
                    let part = Part::Text(&self.text[self.position..]);
                    self.position = self.text.len();
                    return Some(part);
                }
                return None;
            };
            let (mut start, mut end) = (found.start(), found.end());
            let index = self.specials.indices[found.pattern().as_usize()];
            let options = self.specials.options[index];
            if options.any() {
                if start < self.position {
                    continue; // (inside the whitespace the token before took: text)
                }
                if options.single_word
                    && (ends_with_word(&self.text[..start]) || starts_with_word(&self.text[end..]))
                {
                    continue; // next to a word character: ordinary text
                }
                if options.lstrip {
                    let before =
                        self.text[self.position..start].trim_end_matches(char::is_whitespace);
                    start = self.position + before.len();
                }
                if options.rstrip {
                    let after = self.text[end..].trim_start_matches(char::is_whitespace);
                    end = self.text.len() - after.len();
                }
            }
            if start > self.position {
                let part = Part::Text(&self.text[self.position..start]);
                self.pending = Some((index, start, end));
                self.position = start;
                return Some(part);
            }
            self.position = end;
            return Some(Part::Special {
                index,
                text: &self.text[start..end],
            });
        }
    }
}
