//! Rewritten text that remembers where each of its bytes came from, as Hugging Face's
//! `NormalizedString` does (`tokenizer/normalizer.rs`): `align[i]` is the byte range of the
//! original text that byte `i` of the rewritten text stands for. Only offsets need it, so it is
//! built only when they are asked for; encoding alone rewrites text without it.
//!
//! Each rewrite is `tokenizers`' own, alignment rule included, because its offsets are what
//! bpestore must give: a character that replaces another takes that one's range, an inserted
//! character takes the range of the byte before it (`(0, 0)` at the very start), and a removed
//! character leaves no trace. Hence some odd values that are `tokenizers`' and kept on purpose:
//! a string written by `Replace` spans only the last character of what it replaced, and the
//! characters one character expands into (NFKC's `ﬁ` to `fi`, a lowercase that is longer) all
//! span that one character.

use std::ops::Range;

/// A text and, for each of its bytes, the original byte range it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Aligned {
    pub text: String,
    pub align: Vec<(usize, usize)>,
}

impl Aligned {
    /// `text` as it is: each byte stands for its own character.
    pub fn original(text: &str) -> Aligned {
        let mut align = Vec::with_capacity(text.len());
        for (at, c) in text.char_indices() {
            let range = (at, at + c.len_utf8());
            align.extend(std::iter::repeat_n(range, c.len_utf8()));
        }
        Aligned {
            text: text.to_string(),
            align,
        }
    }

    /// `tokenizers`' `NormalizedString::transform` on the whole text: `dest` is the new text's
    /// characters, each with its change (0: replaces the next character of the old text; `n > 0`:
    /// inserted; `n < 0`: replaces the next one and removes the `-n` after it), after the first
    /// `initial_offset` characters of the old text are removed.
    pub fn transform(
        &self,
        dest: impl IntoIterator<Item = (char, isize)>,
        initial_offset: usize,
    ) -> Aligned {
        let mut old = self.text.chars();
        let mut offset: usize = old.by_ref().take(initial_offset).map(char::len_utf8).sum();
        let mut text = String::with_capacity(self.text.len());
        let mut align = Vec::with_capacity(self.align.len());
        for (c, change) in dest {
            let range = if change > 0 {
                if offset < 1 {
                    (0, 0)
                } else {
                    self.align[offset - 1]
                }
            } else {
                self.align[offset]
            };
            if change <= 0 {
                offset += old.next().map_or(0, char::len_utf8);
            }
            if change < 0 {
                offset += old
                    .by_ref()
                    .take(change.unsigned_abs())
                    .map(char::len_utf8)
                    .sum::<usize>();
            }
            text.push(c);
            align.extend(std::iter::repeat_n(range, c.len_utf8()));
        }
        Aligned { text, align }
    }

    /// The bytes `range` of the text (on character boundaries), with their alignment.
    pub fn slice(&self, range: Range<usize>) -> Aligned {
        Aligned {
            text: self.text[range.clone()].to_string(),
            align: self.align[range].to_vec(),
        }
    }

    /// The original range that the bytes `range` of the text stand for (`tokenizers`'
    /// `convert_offsets` of a normalized range: the first byte's start to the last one's end).
    pub fn original_range(&self, range: Range<usize>) -> (usize, usize) {
        if range.is_empty() {
            return (range.start, range.start);
        }
        (self.align[range.start].0, self.align[range.end - 1].1)
    }

    /// `prefix` before the text, if it is not empty (`NormalizedString::prepend`: the prefix's
    /// first character replaces the text's first, so all of it spans that character).
    pub fn prepend(&self, prefix: &str) -> Aligned {
        let Some(first) = self.text.chars().next() else {
            return self.clone();
        };
        let dest = prefix
            .chars()
            .enumerate()
            .map(|(i, c)| (c, isize::from(i != 0)))
            .chain(std::iter::once((first, 1)));
        let head = self.slice(0..first.len_utf8()).transform(dest, 0);
        let mut text = head.text;
        text.push_str(&self.text[first.len_utf8()..]);
        let mut align = head.align;
        align.extend_from_slice(&self.align[first.len_utf8()..]);
        Aligned { text, align }
    }

    /// Every occurrence of `pattern` (not empty), left to right without overlaps, replaced by
    /// `content` (`NormalizedString::replace`: each character of `content` is inserted after the
    /// match is removed, so it spans the match's last character).
    pub fn replace(&self, pattern: &str, content: &str) -> Aligned {
        let mut text = String::with_capacity(self.text.len());
        let mut align = Vec::with_capacity(self.align.len());
        let mut copied = 0;
        for (start, found) in self.text.match_indices(pattern) {
            let end = start + found.len();
            text.push_str(&self.text[copied..start]);
            align.extend_from_slice(&self.align[copied..start]);
            let range = self.align[end - 1];
            for c in content.chars() {
                text.push(c);
                align.extend(std::iter::repeat_n(range, c.len_utf8()));
            }
            copied = end;
        }
        text.push_str(&self.text[copied..]);
        align.extend_from_slice(&self.align[copied..]);
        Aligned { text, align }
    }

    /// Leading and/or trailing whitespace removed; what stays keeps its alignment.
    pub fn strip(&self, left: bool, right: bool) -> Aligned {
        let mut kept: &str = &self.text;
        if left {
            kept = kept.trim_start_matches(char::is_whitespace);
        }
        if right {
            kept = kept.trim_end_matches(char::is_whitespace);
        }
        let start = kept.as_ptr() as usize - self.text.as_ptr() as usize;
        self.slice(start..start + kept.len())
    }
}

/// Hugging Face's Python `Encoding.offsets`: byte offsets into `text` turned into character
/// offsets as its bindings turn them (`BytesToCharOffsetConverter`). A span whose start is the
/// end of the text has no character to map to and stays in bytes, as there.
pub(crate) fn char_spans(text: &str, spans: &mut [(usize, usize)]) {
    if text.is_ascii() {
        return;
    }
    // char_of[b]: the index of the character holding byte b
    let mut char_of = Vec::with_capacity(text.len());
    for (index, c) in text.chars().enumerate() {
        char_of.extend(std::iter::repeat_n(index, c.len_utf8()));
    }
    for span in spans {
        let (start, end) = *span;
        if let Some(&first) = char_of.get(start) {
            let last = match char_of.get(end) {
                Some(&last) => last,
                None => end
                    .checked_sub(1)
                    .and_then(|before| char_of.get(before))
                    // (`tokenizers`' fallback when even that byte is not in the text: start + 2)
                    .map_or(first + 2, |&before| before + 1),
            };
            *span = (first, last);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Aligned;

    #[test]
    fn prepend_and_replace_span_as_tokenizers_does() {
        let text = Aligned::original("a bé");
        let written = text.replace(" ", "\u{2581}").prepend("\u{2581}");
        assert_eq!(written.text, "\u{2581}a\u{2581}bé");
        // ▁ (3 bytes) spans "a"; a; ▁ spans the space; b; é (2 bytes)
        assert_eq!(
            written.align,
            vec![
                (0, 1),
                (0, 1),
                (0, 1),
                (0, 1),
                (1, 2),
                (1, 2),
                (1, 2),
                (2, 3),
                (3, 5),
                (3, 5)
            ]
        );
        let doubled = Aligned::original("xaab").replace("aa", "Z");
        assert_eq!(doubled.text, "xZb");
        assert_eq!(doubled.align, vec![(0, 1), (2, 3), (3, 4)]);
        let stripped = Aligned::original("  x ").strip(true, true);
        assert_eq!(
            (stripped.text.as_str(), stripped.align),
            ("x", vec![(2, 3)])
        );
    }
}
