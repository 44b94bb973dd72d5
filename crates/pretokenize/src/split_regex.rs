//! A `Split` regex of an imported pipeline, matched without a backtracking engine where that
//! gives the same matches.
//!
//! fancy_regex hands a regex without look-around to regex-automata whole, but a regex with one
//! look-around runs on its own backtracking VM, several times slower. The look-around most
//! published pre-tokenizers have is the one cl100k made common, at the end of the pattern:
//! `...|\s+(?!\S)|\s+` (Llama-3, Qwen2, DeepSeek and their kin). Its effect is simple: at a
//! position where no earlier alternative matches, it takes the whole run of whitespace, but
//! leaves the run's last character to the next match when a non-whitespace character follows
//! and the run has more than one character. So the regex runs as the earlier alternatives and a
//! last pattern `\s+`, and a match of that last pattern is shortened by that rule.
//!
//! Only regexes that cannot match the empty string are taken (an empty match has its own rules
//! of where the search goes on); the others, and any other look-around or back-reference, stay
//! on fancy_regex.

use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::meta::Regex;
use regex_automata::{Anchored, Input};

/// The most memory a regex's DFA may take: past it (a regex of many large Unicode classes),
/// only the lazy one runs.
const DFA_BYTES: usize = 8 << 20;

/// The ending whose look-around is rewritten (as `onig_regex` and the importer write it).
const WHITESPACE_ENDING: &str = r"|\s+(?!\S)|\s+";

/// A regex matched on regex-automata.
#[derive(Debug, Clone)]
pub(crate) struct SplitRegex {
    /// The pattern's alternatives before the ending, then (when `ends_in_whitespace`) `\s+`.
    regex: Regex,
    /// The same patterns as a DFA built whole, for the search of a match where the last one
    /// ended: a pre-tokenizer's matches mostly follow one another, and a loop over the DFA's
    /// table finds one with less setting up than a search of the lazy DFA (None: the regex has
    /// a Unicode word boundary, which a whole DFA cannot match, or it would be too big).
    dfa: Option<dense::DFA<Vec<u32>>>,
    /// Whether the pattern ended in [`WHITESPACE_ENDING`]: pattern 1 of `regex` is its `\s+`.
    ends_in_whitespace: bool,
}

impl SplitRegex {
    /// The regex for `pattern` (a fancy_regex pattern), or None where it must stay on
    /// fancy_regex: another look-around or back-reference, or a regex that may match nothing.
    pub(crate) fn of(pattern: &str) -> Option<SplitRegex> {
        let (before, ends_in_whitespace) = match pattern.strip_suffix(WHITESPACE_ENDING) {
            Some(before) => (before, true),
            None => (pattern, false),
        };
        let mut patterns = vec![before];
        if ends_in_whitespace {
            patterns.push(r"\s+");
        }
        // (regex-syntax reads the same syntax fancy_regex passes to it; the rewritten pattern
        // must parse whole, its first part as a group of alternatives of its own)
        let hir = regex_syntax::parse(&patterns.join("|")).ok()?;
        if hir.properties().minimum_len().unwrap_or(0) == 0 || regex_syntax::parse(before).is_err()
        {
            return None;
        }
        let regex = Regex::new_many(&patterns).ok()?;
        let dfa = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .start_kind(StartKind::Anchored)
                    .dfa_size_limit(Some(DFA_BYTES))
                    .determinize_size_limit(Some(DFA_BYTES)),
            )
            .build_many(&patterns)
            .ok();
        Some(SplitRegex {
            regex,
            dfa,
            ends_in_whitespace,
        })
    }

    /// The pattern as regex-syntax reads it, for the stage's prefilter: the same bytes begin a
    /// match, and a match is as long at least (the ending's `\s+(?!\S)` is `\s+` shortened, but
    /// never below one character).
    pub(crate) fn rewritten(pattern: &str) -> String {
        match pattern.strip_suffix(WHITESPACE_ENDING) {
            Some(before) => format!(r"{before}|\s+"),
            None => pattern.to_string(),
        }
    }

    /// Calls `hit(start, end)` on each match in `haystack`, left to right, as fancy_regex's
    /// `find_iter` of the original pattern finds them, until `hit` returns false.
    pub(crate) fn for_each_match(&self, haystack: &str, mut hit: impl FnMut(usize, usize) -> bool) {
        let mut at = 0;
        while at < haystack.len() {
            // (a match where the last one ended, most often: a search anchored there needs no
            // reverse pass to find where the match starts)
            let input = Input::new(haystack).span(at..haystack.len());
            let anchored = match &self.dfa {
                Some(dfa) => anchored_match(dfa, haystack, at),
                None => self
                    .regex
                    .search(&input.clone().anchored(Anchored::Yes))
                    .map(|found| (found.pattern().as_usize(), found.end())),
            };
            let found = anchored
                .map(|(pattern, end)| (pattern, at, end))
                .or_else(|| {
                    self.regex
                        .search(&input)
                        .map(|found| (found.pattern().as_usize(), found.start(), found.end()))
                });
            let Some((pattern, start, mut end)) = found else {
                break;
            };
            if self.ends_in_whitespace && pattern == 1 && end < haystack.len() {
                // (`\s+(?!\S)` gives the run but its last character, if that leaves any)
                let last = haystack[..end]
                    .chars()
                    .next_back()
                    .map_or(0, char::len_utf8);
                if end - last > start {
                    end -= last;
                }
            }
            if !hit(start, end) {
                return;
            }
            at = end;
        }
    }
}

/// The leftmost-first match of `dfa` that starts at `at` in `haystack`: its pattern and end.
/// (A DFA reports a match one byte late: the state after byte `i` says whether a match ends
/// before it.)
fn anchored_match(dfa: &dense::DFA<Vec<u32>>, haystack: &str, at: usize) -> Option<(usize, usize)> {
    let bytes = haystack.as_bytes();
    let input = Input::new(bytes)
        .span(at..bytes.len())
        .anchored(Anchored::Yes);
    // (the same start everywhere unless the regex looks behind, as `\b` or `(?m)^` do)
    let mut state = match dfa.universal_start_state(Anchored::Yes) {
        Some(state) => state,
        None => dfa.start_state_forward(&input).ok()?,
    };
    let mut last = None;
    for (i, &byte) in bytes.iter().enumerate().skip(at) {
        state = dfa.next_state(state, byte);
        if dfa.is_special_state(state) {
            if dfa.is_match_state(state) {
                last = Some((dfa.match_pattern(state, 0).as_usize(), i));
            } else if dfa.is_dead_state(state) || dfa.is_quit_state(state) {
                // (no quit bytes are configured; a quit would only end the search early)
                return last;
            }
        }
    }
    let state = dfa.next_eoi_state(state);
    if dfa.is_match_state(state) {
        last = Some((dfa.match_pattern(state, 0).as_usize(), bytes.len()));
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEEPSEEK: &str = r"[!\x22#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

    fn by_fancy_regex(regex: &fancy_regex::Regex, text: &str) -> Vec<(usize, usize)> {
        regex
            .find_iter(text)
            .map(|found| found.unwrap())
            .map(|found| (found.start(), found.end()))
            .collect()
    }

    fn by_split_regex(regex: &SplitRegex, text: &str) -> Vec<(usize, usize)> {
        let mut found = Vec::new();
        regex.for_each_match(text, |start, end| {
            found.push((start, end));
            true
        });
        found
    }

    #[test]
    fn the_matches_are_fancy_regexs() {
        let patterns = [
            DEEPSEEK,
            crate::LLAMA3_PATTERN,
            crate::QWEN2_PATTERN,
            crate::O200K_PATTERN,
            "[0-9][0-9][0-9]",
            r"\p{N}{1,3}",
            "[一-龥぀-ゟ゠-ヿ]+",
            // (a Unicode word boundary: no whole DFA, the lazy one alone)
            r"\b\w+|\s+(?!\S)|\s+",
            r"(?m)^\s*x|[^x]|\s+(?!\S)|\s+",
            r"'s|\s+(?!\S)|\s+",
        ];
        let mut nasty = crate::tests::Nasty::new(17);
        for pattern in patterns {
            let regex = SplitRegex::of(pattern).expect("a regex regex-automata runs");
            let fancy = fancy_regex::Regex::new(pattern).unwrap();
            for _ in 0..1500 {
                let text = nasty.text(16) + " \t x\n\n  y  ";
                let cut = nasty.below(text.len() + 1);
                let text = &text[..(0..=cut)
                    .rev()
                    .find(|&at| text.is_char_boundary(at))
                    .unwrap()];
                assert_eq!(
                    by_split_regex(&regex, text),
                    by_fancy_regex(&fancy, text),
                    "{pattern} on {text:?}"
                );
            }
        }
        assert!(SplitRegex::of(DEEPSEEK).unwrap().dfa.is_some());
        assert!(SplitRegex::of(r"\b\w+").unwrap().dfa.is_none());
    }

    #[test]
    fn other_look_arounds_and_empty_matches_stay_on_fancy_regex() {
        // (tiktoken's cl100k_base pattern has possessive quantifiers)
        for pattern in [
            crate::CL100K_PATTERN,
            r"\s+(?!\S)",
            r"a(?=b)|\s+(?!\S)|\s+",
            "a*",
            r"(a)\1",
            r"x\|\s+(?!\S)|\s+",
        ] {
            assert!(SplitRegex::of(pattern).is_none(), "{pattern}");
        }
    }
}
