//! Parity-aware BPE (Foroutan et al., 2025): one corpus per language, and at each merge the most
//! frequent pair of the language whose text is worst compressed, merged in every language.
//!
//! The semantics are those of Hugging Face `tokenizers`' `ParityBpeTrainer` (which follows the
//! paper's own code):
//!
//! * the language is chosen by its *score*: the tokens its part of a parallel development set
//!   takes now ([`Balance::Dev`]); or its training text's compression (first tokens over tokens
//!   now) over a target ratio, the least compressed first ([`Balance::Ratio`]); or the tokens its
//!   training text takes ([`Balance::Training`]);
//! * [`Variant::Base`] takes the highest score (the first language among equals);
//!   [`Variant::Window`] passes over a language that took more than `alpha / languages` of the
//!   last `size` choices, as HF's `select_language_window` does;
//! * a chosen language with no pair left is marked spent and passed over from then on (the
//!   window variant has already counted the choice); training stops when every language is spent;
//! * the first `global_merges` merges are plain BPE's on all languages' counts together.
//!
//! Each language is a merge loop of its own ([`Trainer`], the one of plain training): its words,
//! its pair counts and its heap. A merge chosen in one is applied in all that hold the pair, one
//! after another (each merge of many words on two threads, as in plain training), and in the
//! development set's loops, which only tell how many tokens each merge saved. The tokens are
//! numbered here, once for all the loops (so a pair's ids mean the same in every one); each loop
//! keeps the bytes of its own tokens; they share the tables a merge notes its changes in (each
//! as big as the vocabulary: one set per loop would be most of the memory of many languages).
//!
//! Where HF's window variant loops forever (every language with pairs left is over its share,
//! and so is the first language, the default of its search, while a spent language is not yet
//! passed over), this one takes the highest score among the languages with pairs left.

use std::collections::VecDeque;

use crate::merge::{Changes, Merge, TieBreak, Tokens, Trainer};
use crate::words::split_key;
use crate::PretokenCounts;

/// How the language of each merge is chosen among those with the highest score.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Variant {
    /// The highest score.
    Base,
    /// The highest score among the languages that took at most `alpha / languages` of the last
    /// `size` choices.
    Window { size: usize, alpha: f64 },
}

/// What a language's score is.
pub enum Balance<'a> {
    /// The tokens of each language's part of a parallel development set (one count table per
    /// language, in the training corpora's order).
    Dev(&'a [&'a PretokenCounts]),
    /// The compression of each language's training text (its first tokens over its tokens now)
    /// over its target ratio: the lower, the higher the score.
    Ratio(&'a [f64]),
    /// The tokens of each language's training text.
    Training,
}

/// Everything but the corpora that decides a parity-aware training's merges.
#[derive(Clone, Copy, Debug)]
pub struct ParityOptions {
    pub variant: Variant,
    /// The first merges that are plain BPE's on all languages' counts together.
    pub global_merges: usize,
    /// The order of pairs of equal counts within a language.
    pub tie: TieBreak,
}

impl Default for ParityOptions {
    fn default() -> ParityOptions {
        ParityOptions {
            variant: Variant::Base,
            global_merges: 0,
            tie: TieBreak::Cs336,
        }
    }
}

/// A language's score, compared as HF compares them: exact token counts, or the floats of the
/// ratio's computation (negated: the least compressed scores highest). `Spent` is below all.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
enum Score {
    Spent,
    Tokens(u64),
    Ratio(f64),
}

/// The tokens a corpus of these counts takes as single bytes.
fn byte_tokens(counts: &PretokenCounts) -> u64 {
    counts
        .iter()
        .map(|(word, count)| word.len() as u64 * count)
        .sum()
}

/// The parity-aware merge loop: an iterator of the merges in order (see the module's doc).
///
/// Like [`crate::MergeLoop`], it keeps no reference to the counts it was made from.
pub struct ParityLoop {
    /// Every token made, numbered for all the loops.
    made: Tokens,
    /// The tables each loop's merge notes its changes in, lent to one loop at a time.
    scratch: [Changes; 2],
    languages: Vec<Trainer>,
    dev: Vec<Trainer>,
    /// All languages' counts together, for the first `global_merges` merges (then dropped).
    global: Option<Trainer>,
    /// Each language's tokens now: its development text's ([`Balance::Dev`]), else its training text's.
    tokens: Vec<u64>,
    /// [`Balance::Ratio`]: each language's first training tokens, and its ratio.
    ratio: Option<(Vec<u64>, Vec<f64>)>,
    options: ParityOptions,
    /// The languages of the last choices, oldest first (the window variant's).
    window: VecDeque<usize>,
    spent: Vec<bool>,
    merges_done: usize,
    /// The language the last merge was chosen for (None: a global merge, or none yet).
    last_language: Option<usize>,
}

impl ParityLoop {
    /// Prepares the loop on each language's pre-token counts (`train`, at least one language).
    /// Panics if `balance` has not one entry per language.
    pub fn new(
        train: &[&PretokenCounts],
        balance: Balance<'_>,
        options: ParityOptions,
    ) -> ParityLoop {
        assert!(!train.is_empty(), "parity-aware training needs a language");
        let mut languages: Vec<Trainer> = train.iter().map(|counts| Trainer::new(counts)).collect();
        for language in &mut languages {
            language.set_tie_break(options.tie);
        }
        let global = (options.global_merges > 0).then(|| {
            let mut all = PretokenCounts::default();
            for counts in train {
                all.merge(counts);
            }
            let mut trainer = Trainer::new(&all);
            trainer.set_tie_break(options.tie);
            trainer
        });
        let (dev, tokens, ratio) = match balance {
            Balance::Dev(dev) => {
                assert_eq!(dev.len(), train.len(), "a development set per language");
                let tokens = dev.iter().map(|counts| byte_tokens(counts)).collect();
                (
                    dev.iter()
                        .map(|counts| Trainer::new(counts).unranked())
                        .collect(),
                    tokens,
                    None,
                )
            }
            Balance::Ratio(ratio) => {
                assert_eq!(ratio.len(), train.len(), "a ratio per language");
                let tokens: Vec<u64> = train.iter().map(|counts| byte_tokens(counts)).collect();
                (Vec::new(), tokens.clone(), Some((tokens, ratio.to_vec())))
            }
            Balance::Training => (
                Vec::new(),
                train.iter().map(|counts| byte_tokens(counts)).collect(),
                None,
            ),
        };
        ParityLoop {
            made: Tokens::new(),
            scratch: Default::default(),
            spent: vec![false; languages.len()],
            languages,
            dev,
            global,
            tokens,
            ratio,
            options,
            window: VecDeque::new(),
            merges_done: 0,
            last_language: None,
        }
    }

    /// The language the last merge was chosen for; None for a merge of the global phase (or
    /// before the first merge).
    pub fn last_language(&self) -> Option<usize> {
        self.last_language
    }

    /// Each language's tokens now: of its development text with [`Balance::Dev`], else of its
    /// training text.
    pub fn tokens(&self) -> &[u64] {
        &self.tokens
    }

    fn scores(&self) -> Vec<Score> {
        (0..self.languages.len())
            .map(|language| {
                if self.spent[language] {
                    Score::Spent
                } else if let Some((first, ratio)) = &self.ratio {
                    // HF's floats, in its order: (initial / current) / ratio, negated.
                    let rate = first[language] as f64 / self.tokens[language] as f64;
                    Score::Ratio(-(rate / ratio[language]))
                } else {
                    Score::Tokens(self.tokens[language])
                }
            })
            .collect()
    }

    /// The first language of the highest score above `Spent` among `included` (HF's search: the
    /// first language if none is).
    fn highest(scores: &[Score], included: &[bool]) -> usize {
        let mut best = 0;
        let mut best_score = Score::Spent;
        for (language, &score) in scores.iter().enumerate() {
            if included[language] && score > best_score {
                best = language;
                best_score = score;
            }
        }
        best
    }

    /// The language of the next merge (see the module's doc).
    fn choose(&mut self) -> usize {
        let scores = self.scores();
        let all = vec![true; scores.len()];
        let Variant::Window { size, alpha } = self.options.variant else {
            return Self::highest(&scores, &all);
        };
        let threshold = alpha / scores.len() as f64;
        let mut included = all.clone();
        let chosen = loop {
            let best = Self::highest(&scores, &included);
            let share = self
                .window
                .iter()
                .filter(|&&language| language == best)
                .count() as f64
                / size as f64;
            if share <= threshold {
                break best;
            }
            let already_excluded = !included[best];
            included[best] = false;
            if included.iter().all(|&kept| !kept) {
                break best;
            }
            if already_excluded {
                // (where HF's search loops forever)
                break Self::highest(&scores, &all);
            }
        };
        self.window.push_back(chosen);
        if self.window.len() > size {
            self.window.pop_front();
        }
        chosen
    }

    /// Applies the merge of `pair` in every loop, and counts the tokens it saved.
    fn apply(&mut self, pair: u64) {
        let (a, b) = split_key(pair);
        let new = self.made.join(a, b);
        let bytes = self.made.bytes[new as usize].clone();
        let scratch = &mut self.scratch;
        let mut apply = |trainer: &mut Trainer| {
            trainer.swap_scratch(scratch);
            let saved = trainer.apply_as(pair, new, &bytes);
            trainer.swap_scratch(scratch);
            saved
        };
        let saved: Vec<u64> = self.languages.iter_mut().map(&mut apply).collect();
        if self.dev.is_empty() {
            for (tokens, saved) in self.tokens.iter_mut().zip(saved) {
                *tokens -= saved;
            }
        }
        for (tokens, trainer) in self.tokens.iter_mut().zip(&mut self.dev) {
            *tokens -= apply(trainer);
        }
        if let Some(global) = &mut self.global {
            apply(global);
        }
        self.merges_done += 1;
        if self.merges_done >= self.options.global_merges {
            self.global = None; // its part is done: its memory back
        }
    }
}

impl Iterator for ParityLoop {
    type Item = Merge;

    /// The next merge, or None when every language is spent (or, in the global phase, no pair
    /// is left).
    fn next(&mut self) -> Option<Merge> {
        let (pair, language) = loop {
            if self.spent.iter().all(|&spent| spent) {
                return None;
            }
            if let Some(global) = &mut self.global {
                break (global.best_pair()?, None);
            }
            let language = self.choose();
            match self.languages[language].best_pair() {
                Some(pair) => break (pair, Some(language)),
                None => self.spent[language] = true,
            }
        };
        let (a, b) = split_key(pair);
        let merge = (
            self.made.bytes[a as usize].clone(),
            self.made.bytes[b as usize].clone(),
        );
        self.apply(pair);
        self.last_language = language;
        Some(merge)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MergeLoop;

    fn table(words: &[(&str, u64)]) -> PretokenCounts {
        words
            .iter()
            .map(|(word, count)| (word.as_bytes(), *count))
            .collect()
    }

    fn merges(
        train: &[&PretokenCounts],
        balance: Balance<'_>,
        options: ParityOptions,
        n: usize,
    ) -> Vec<(String, String)> {
        ParityLoop::new(train, balance, options)
            .take(n)
            .map(|(left, right)| {
                (
                    String::from_utf8(left).unwrap(),
                    String::from_utf8(right).unwrap(),
                )
            })
            .collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(l, r)| (l.to_string(), r.to_string()))
            .collect()
    }

    #[test]
    fn one_language_is_plain_bpe() {
        let counts = table(&[
            ("hello", 3),
            ("yellow", 2),
            ("low", 7),
            ("lower", 1),
            ("aaaa", 2),
        ]);
        for tie in [TieBreak::Cs336, TieBreak::HuggingFace] {
            let options = ParityOptions {
                tie,
                ..ParityOptions::default()
            };
            let plain: Vec<Merge> = MergeLoop::new(&counts).with_tie_break(tie).collect();
            let parity: Vec<Merge> =
                ParityLoop::new(&[&counts], Balance::Training, options).collect();
            assert_eq!(parity, plain);
        }
    }

    #[test]
    fn languages_take_turns_when_tied() {
        // HF's own test: equal lengths, the first language first; within each, the greatest pair.
        let (first, second) = (table(&[("aabb", 10)]), table(&[("ccdd", 10)]));
        let options = ParityOptions {
            tie: TieBreak::ByteLevelString,
            ..ParityOptions::default()
        };
        assert_eq!(
            merges(&[&first, &second], Balance::Training, options, 6),
            pairs(&[
                ("b", "b"),
                ("d", "d"),
                ("a", "bb"),
                ("c", "dd"),
                ("a", "abb"),
                ("c", "cdd")
            ])
        );
    }

    #[test]
    fn the_development_set_decides() {
        // The first language has more training text, the second more development text.
        let (train0, train1) = (table(&[("ab", 10)]), table(&[("cd", 5)]));
        let (dev0, dev1) = (table(&[("ab", 1)]), table(&[("cd", 10)]));
        let options = ParityOptions::default();
        assert_eq!(
            merges(
                &[&train0, &train1],
                Balance::Dev(&[&dev0, &dev1]),
                options,
                2
            ),
            pairs(&[("c", "d"), ("a", "b")])
        );
        assert_eq!(
            merges(&[&train0, &train1], Balance::Training, options, 1),
            pairs(&[("a", "b")])
        );
    }

    #[test]
    fn a_spent_language_is_passed_over_and_all_spent_ends_training() {
        let (first, second) = (table(&[("ab", 100)]), table(&[("xyz", 1)]));
        let all = merges(
            &[&first, &second],
            Balance::Training,
            ParityOptions::default(),
            10,
        );
        assert_eq!(all, pairs(&[("a", "b"), ("y", "z"), ("x", "yz")]));
    }

    #[test]
    fn the_window_passes_over_a_language_over_its_share() {
        // Without the window the first language, far longer, takes every merge.
        let (first, second) = (table(&[("abcdefgh", 100)]), table(&[("stuvwxyz", 1)]));
        let base = merges(
            &[&first, &second],
            Balance::Training,
            ParityOptions::default(),
            4,
        );
        assert!(base.iter().all(|(left, _)| left.as_bytes()[0] < b's'));
        let window = ParityOptions {
            variant: Variant::Window {
                size: 2,
                alpha: 1.0,
            },
            ..ParityOptions::default()
        };
        let merged = merges(&[&first, &second], Balance::Training, window, 4);
        // At most alpha / languages = 0.5 of a window of 2: the first language twice (a share
        // of 0 then 1/2), then, at 2/2, the second; then the first again (1/2).
        assert_eq!(
            merged,
            pairs(&[("g", "h"), ("f", "gh"), ("y", "z"), ("e", "fgh")])
        );
    }

    #[test]
    fn global_merges_are_plain_bpe_on_all_languages() {
        let (first, second) = (table(&[("ab", 3), ("cd", 1)]), table(&[("cd", 3)]));
        let options = ParityOptions {
            global_merges: 1,
            ..ParityOptions::default()
        };
        // Together (c, d) is the most frequent; then the first language, longer, gets (a, b).
        assert_eq!(
            merges(&[&first, &second], Balance::Training, options, 2),
            pairs(&[("c", "d"), ("a", "b")])
        );
        let none = ParityOptions::default();
        assert_eq!(
            merges(&[&first, &second], Balance::Training, none, 1),
            pairs(&[("a", "b")])
        );
    }

    #[test]
    fn the_ratio_favours_the_language_least_compressed_for_it() {
        let (first, second) = (
            table(&[("ab", 5), ("abab", 1)]),
            table(&[("cd", 5), ("cdcd", 1)]),
        );
        // Equal compression: the first language; a higher ratio for the second: the second.
        let options = ParityOptions::default();
        assert_eq!(
            merges(&[&first, &second], Balance::Ratio(&[1.0, 1.0]), options, 1),
            pairs(&[("a", "b")])
        );
        assert_eq!(
            merges(&[&first, &second], Balance::Ratio(&[1.0, 2.0]), options, 1),
            pairs(&[("c", "d")])
        );
    }
}
