//! Normalization: what Hugging Face `tokenizers`' normalizers do to text before it is split into
//! pre-tokens (`normalizers/unicode.rs`, `utils.rs`, `strip.rs`, `replace.rs`, `prepend.rs`).
//!
//! Each step is that library's, on the same tables: the Unicode forms come from the crate it uses
//! (`unicode-normalization-alignments`, Unicode 9.0 data), so that a character added to Unicode
//! since then is left as `tokenizers` leaves it; `Lowercase` and `Strip` use Rust's own `char`
//! methods, as it does. The text is normalized one stretch at a time, between special tokens,
//! as `tokenizers`' added vocabulary does: a `Prepend` step prepends to each such stretch.

use crate::aligned::Aligned;
use crate::quick_check::{first_unsure, Form};
use std::borrow::Cow;
use unicode_normalization_alignments::UnicodeNormalization;

/// One normalizer of `tokenizers`, as bpestore runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NormalizerStep {
    /// Canonical composition (`NFC`).
    Nfc,
    /// Canonical decomposition (`NFD`).
    Nfd,
    /// Compatibility composition (`NFKC`).
    Nfkc,
    /// Compatibility decomposition (`NFKD`).
    Nfkd,
    /// Each character by its lowercase mapping (`char::to_lowercase`, one to three characters).
    Lowercase,
    /// Every occurrence of a literal string, left to right without overlaps, by another.
    Replace {
        /// The string replaced (not empty).
        pattern: String,
        /// What replaces it.
        content: String,
    },
    /// A string before the text, when the text is not empty.
    Prepend(String),
    /// Leading and/or trailing whitespace (`char::is_whitespace`) removed.
    Strip {
        /// Whether leading whitespace goes.
        left: bool,
        /// Whether trailing whitespace goes.
        right: bool,
    },
}

impl NormalizerStep {
    /// The step applied to `text`, borrowed when nothing changes.
    fn apply<'t>(&self, text: Cow<'t, str>) -> Cow<'t, str> {
        let unicode = |text: Cow<'t, str>, form: fn(&str) -> String, quick: Form| {
            if text.is_ascii() {
                text // (every Unicode form leaves ASCII as it is)
            } else {
                by_stretches(text, form, quick)
            }
        };
        match self {
            NormalizerStep::Nfc => unicode(text, |t| t.nfc().map(|(c, _)| c).collect(), Form::Nfc),
            NormalizerStep::Nfd => unicode(text, |t| t.nfd().map(|(c, _)| c).collect(), Form::Nfd),
            NormalizerStep::Nfkc => {
                unicode(text, |t| t.nfkc().map(|(c, _)| c).collect(), Form::Nfkc)
            }
            NormalizerStep::Nfkd => {
                unicode(text, |t| t.nfkd().map(|(c, _)| c).collect(), Form::Nfkd)
            }
            NormalizerStep::Lowercase => {
                if text.is_ascii() && !text.bytes().any(|b| b.is_ascii_uppercase()) {
                    text
                } else {
                    Cow::Owned(text.chars().flat_map(char::to_lowercase).collect())
                }
            }
            NormalizerStep::Replace { pattern, content } => {
                if text.contains(pattern.as_str()) {
                    Cow::Owned(text.replace(pattern.as_str(), content))
                } else {
                    text
                }
            }
            NormalizerStep::Prepend(prefix) => {
                if text.is_empty() {
                    text
                } else {
                    Cow::Owned(format!("{prefix}{text}"))
                }
            }
            NormalizerStep::Strip { left, right } => {
                let mut stripped: &str = &text;
                if *left {
                    stripped = stripped.trim_start_matches(char::is_whitespace);
                }
                if *right {
                    stripped = stripped.trim_end_matches(char::is_whitespace);
                }
                if stripped.len() == text.len() {
                    text
                } else {
                    Cow::Owned(stripped.to_string())
                }
            }
        }
    }

    /// The step applied to `text` as `tokenizers` applies it to a `NormalizedString`, alignment
    /// and all (`normalizer.rs`: `nfc` and the others through `transform`, `lowercase`,
    /// `replace`, `prepend`, `lrstrip`). The text is the one [`NormalizerStep::apply`] gives.
    fn apply_aligned(&self, text: &Aligned) -> Aligned {
        match self {
            NormalizerStep::Nfc => text.transform(text.text.nfc(), 0),
            NormalizerStep::Nfd => text.transform(text.text.nfd(), 0),
            NormalizerStep::Nfkc => text.transform(text.text.nfkc(), 0),
            NormalizerStep::Nfkd => text.transform(text.text.nfkd(), 0),
            NormalizerStep::Lowercase => {
                // (each character after the first of a longer lowercase is inserted: it spans
                // the character it comes from)
                let dest: Vec<(char, isize)> = text
                    .text
                    .chars()
                    .flat_map(|c| {
                        c.to_lowercase()
                            .enumerate()
                            .map(|(i, c)| (c, isize::from(i > 0)))
                    })
                    .collect();
                text.transform(dest, 0)
            }
            NormalizerStep::Replace { pattern, content } => text.replace(pattern, content),
            NormalizerStep::Prepend(prefix) => text.prepend(prefix),
            NormalizerStep::Strip { left, right } => text.strip(*left, *right),
        }
    }

    /// Whether normalizing two stretches of text apart and joining them gives what normalizing
    /// them joined gives, when the second starts with a space or follows a newline (where a
    /// known pattern's text may be cut to be encoded in parallel). The Unicode forms: a space
    /// and a newline neither compose with nor reorder around their neighbours. Lowercasing is
    /// per character. The others look at the ends of the text or at several characters.
    fn keeps_space_cuts(&self) -> bool {
        matches!(
            self,
            NormalizerStep::Nfc
                | NormalizerStep::Nfd
                | NormalizerStep::Nfkc
                | NormalizerStep::Nfkd
                | NormalizerStep::Lowercase
        )
    }
}

/// `text` through a Unicode normalization form (`form`), run only on the stretches that hold
/// non-ASCII characters, each with the ASCII character before it, and that the form's quick
/// check (`quick`) is not sure of; the rest is copied. The same text as the form run on the
/// whole: an ASCII character is a starter that no form changes, reorders around or composes with
/// the character after it (no canonical composition has an ASCII second character), so the
/// form's work never crosses from one side of it to the other, except that the character before
/// a stretch may compose with the stretch's first (`e` and U+0301 make U+00E9), which is why it
/// goes with the stretch.
///
/// The quick check (on `unicode-normalization`'s data, newer than the form's) is sure only of
/// text without a character that the form decomposes or that may compose with the one before,
/// with combining marks in order: the form leaves such text as it is. Unicode's stability policy
/// keeps those properties of every character the older data knows, and a character it does not
/// know is one that the form leaves as it is and that blocks nothing. The check runs over the
/// text, not stretch by stretch: ASCII resets it, so it stops in the first stretch that fails.
fn by_stretches<'t>(text: Cow<'t, str>, form: fn(&str) -> String, quick: Form) -> Cow<'t, str> {
    let bytes = text.as_bytes();
    // (None while every stretch so far was normalized already: the text is then borrowed as it is)
    let mut out: Option<String> = None;
    let mut copied = 0; // text[..copied] is in `out`
    let mut at = 0; // the text before `at` is done, and `at` is 0 or ends a stretch
    while let Some(found) = first_unsure(quick, &text[at..]) {
        let unsure = at + found;
        // (the stretch holding it: its run of non-ASCII, with the ASCII character before it)
        let start = bytes[at..unsure]
            .iter()
            .rposition(u8::is_ascii)
            .map_or(at, |offset| at + offset + 1);
        let from = if start > at { start - 1 } else { start };
        let end = bytes[unsure..]
            .iter()
            .position(u8::is_ascii)
            .map_or(bytes.len(), |offset| unsure + offset);
        let out = out.get_or_insert_with(|| String::with_capacity(text.len() + text.len() / 8));
        out.push_str(&text[copied..from]);
        out.push_str(&form(&text[from..end]));
        copied = end;
        at = end;
    }
    match out {
        None => text,
        Some(mut out) => {
            out.push_str(&text[copied..]);
            Cow::Owned(out)
        }
    }
}

/// A sequence of normalizer steps, applied in order (an empty one changes nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Normalizer {
    steps: Vec<NormalizerStep>,
}

impl Normalizer {
    /// The steps, in order.
    pub fn new(steps: Vec<NormalizerStep>) -> Normalizer {
        Normalizer { steps }
    }

    /// Whether there is no step.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// `text` normalized (borrowed when no step changes it).
    pub fn normalize<'t>(&self, text: &'t str) -> Cow<'t, str> {
        self.steps
            .iter()
            .fold(Cow::Borrowed(text), |text, step| step.apply(text))
    }

    /// `text` normalized with each byte's alignment to the text given, as `tokenizers` aligns
    /// it (see `aligned.rs`); only for offsets.
    pub(crate) fn normalize_aligned(&self, text: Aligned) -> Aligned {
        self.steps
            .iter()
            .fold(text, |text, step| step.apply_aligned(&text))
    }

    /// Whether text may still be cut before a space or after a newline to be encoded in parts
    /// (see `NormalizerStep::keeps_space_cuts`).
    pub fn keeps_space_cuts(&self) -> bool {
        self.steps.iter().all(NormalizerStep::keeps_space_cuts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normalized(steps: Vec<NormalizerStep>, text: &str) -> String {
        Normalizer::new(steps).normalize(text).into_owned()
    }

    #[test]
    fn the_unicode_forms_compose_and_decompose() {
        assert_eq!(normalized(vec![NormalizerStep::Nfc], "e\u{301}"), "\u{e9}");
        assert_eq!(normalized(vec![NormalizerStep::Nfd], "\u{e9}"), "e\u{301}");
        assert_eq!(normalized(vec![NormalizerStep::Nfkc], "\u{fb01}"), "fi");
        assert_eq!(normalized(vec![NormalizerStep::Nfkd], "\u{2460}"), "1");
        assert_eq!(normalized(vec![NormalizerStep::Nfc], "plain"), "plain");
    }

    #[test]
    fn the_string_steps_do_what_tokenizers_does() {
        let replace = NormalizerStep::Replace {
            pattern: " ".into(),
            content: "\u{2581}".into(),
        };
        let prepend = NormalizerStep::Prepend("\u{2581}".into());
        assert_eq!(
            normalized(vec![prepend.clone(), replace], "a b"),
            "\u{2581}a\u{2581}b"
        );
        assert_eq!(normalized(vec![prepend], ""), "");
        let strip = NormalizerStep::Strip {
            left: true,
            right: false,
        };
        assert_eq!(normalized(vec![strip], " \u{3000}a b "), "a b ");
        assert_eq!(
            normalized(vec![NormalizerStep::Lowercase], "ÀB\u{130}"),
            "àbi\u{307}"
        );
    }

    #[test]
    fn the_forms_by_stretches_are_the_forms_on_the_whole() {
        let forms: [fn(&str) -> String; 4] = [
            |t| t.nfc().map(|(c, _)| c).collect(),
            |t| t.nfd().map(|(c, _)| c).collect(),
            |t| t.nfkc().map(|(c, _)| c).collect(),
            |t| t.nfkd().map(|(c, _)| c).collect(),
        ];
        let texts = [
            "e\u{301} cafe\u{301}s A\u{30a}\u{301}x \u{1100}\u{1161}\u{11a8}b",
            "\u{fb01}ne \u{2460}\u{3392} \u{ff21}BC e\u{323}\u{302} \u{1e9b}\u{323}.",
            "\u{301}leading mark, \u{b47}\u{b3e} and \u{ac00}\u{11a8} trailing e\u{301}",
            "plain ascii only",
            "caf\u{e9} na\u{ef}ve, already composed \u{ac00} (a stretch the quick check passes) then e\u{301}",
            "\u{e9}",
            "abcdefgh\u{e9}ijklmnop\u{301}",
        ];
        let quick = [Form::Nfc, Form::Nfd, Form::Nfkc, Form::Nfkd];
        for (form, quick) in forms.into_iter().zip(quick) {
            for text in texts {
                assert_eq!(
                    by_stretches(Cow::Borrowed(text), form, quick),
                    form(text),
                    "{text:?}"
                );
            }
        }
    }

    #[test]
    fn ascii_text_that_no_step_changes_is_not_copied() {
        let normalizer = Normalizer::new(vec![NormalizerStep::Nfc, NormalizerStep::Lowercase]);
        assert!(matches!(normalizer.normalize("abc def"), Cow::Borrowed(_)));
        // (nor is text whose stretches that are not ASCII are in the form already)
        let nfc = Normalizer::new(vec![NormalizerStep::Nfc]);
        assert!(matches!(
            nfc.normalize("caf\u{e9} and na\u{ef}ve"),
            Cow::Borrowed(_)
        ));
        assert_eq!(normalizer.normalize("Abc Déf"), "abc déf");
    }
}
