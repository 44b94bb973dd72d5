//! Character offsets of tokens, as Hugging Face's `tokenizers` reports them.
//!
//! A token's span is the characters its bytes touch: from the character that holds its first byte
//! to the one that holds its last byte, inclusive. A token that holds only part of a character's
//! UTF-8 bytes (byte-level BPE splits rare characters) therefore spans that whole character, and
//! the next token, which holds the rest, spans it too. This is what `tokenizers`' `Encoding.offsets`
//! gives for a byte-level BPE with `trim_offsets: false` (the leading space of `" word"` is part of
//! its span).

use crate::aligned::{char_spans, Aligned};
use crate::{AllowedSpecial, EncodeError, Encoder, TokenId};
use bpestore_pretokenize::{Part, PretokenizeError};

/// The ids of a text and each one's `(start, end)` character span in it.
pub type IdsAndOffsets = (Vec<TokenId>, Vec<(usize, usize)>);

impl Encoder {
    /// The ids of `text` and, for each, the `(start, end)` character span it covers in `text`
    /// (see the module's documentation for tokens that split a character).
    ///
    /// # Errors
    /// As [`Encoder::encode`]'s.
    pub fn encode_with_offsets(
        &self,
        text: &str,
        allowed: AllowedSpecial<'_>,
    ) -> Result<IdsAndOffsets, EncodeError> {
        self.encode_with_trimmed_offsets(text, allowed, None)
    }

    /// [`Encoder::encode_with_offsets`], the spans then trimmed as a `ByteLevel` or `RobertaProcessing`
    /// post-processor with `trim_offsets` trims them when `trim` is `Some(add_prefix_space)` (its
    /// `add_prefix_space`): `tokenizers` does so whether or not special tokens are added.
    ///
    /// # Errors
    /// As [`Encoder::encode`]'s.
    pub fn encode_with_trimmed_offsets(
        &self,
        text: &str,
        allowed: AllowedSpecial<'_>,
        trim: Option<bool>,
    ) -> Result<IdsAndOffsets, EncodeError> {
        // (a byte the vocabulary lacks moves the spans after it within its piece, which only the
        // aligned path, that sees each piece, reproduces; the look is one pass over the text, and
        // only for an encoder that leaves bytes out)
        let (ids, mut spans) = if self.rewrites_text() || self.dropped_byte_in(text).is_some() {
            self.aligned_offsets(text, allowed)?
        } else {
            let ids = self.encode(text, allowed)?;
            let spans = self.char_offsets(text, &ids);
            (ids, spans)
        };
        if let Some(add_prefix_space) = trim {
            self.trim_spans(&ids, &mut spans, add_prefix_space);
        }
        Ok((ids, spans))
    }

    /// The ids and character spans of `text` for an encoder that rewrites it (a normalizer, a
    /// prefix): the text between special tokens is rewritten with each byte's alignment to the
    /// text given (`aligned.rs`, the same rewriting `tokenizers` does), the rewritten stretches
    /// are encoded as [`Encoder::encode`] encodes them, and each token's bytes are mapped back.
    fn aligned_offsets(
        &self,
        text: &str,
        allowed: AllowedSpecial<'_>,
    ) -> Result<IdsAndOffsets, EncodeError> {
        let mut ids: Vec<TokenId> = Vec::with_capacity(text.len() / 4 + 1);
        let mut spans: Vec<(usize, usize)> = Vec::with_capacity(text.len() / 4 + 1);
        let offset_in = |whole: &str, part: &str| part.as_ptr() as usize - whole.as_ptr() as usize;
        let result = self.caches.with(|cache| {
            // A rewritten stretch (aligned to its part, which starts at `at`) encoded and mapped.
            let mut stretch = |written: Aligned,
                               at: usize,
                               ids: &mut Vec<TokenId>,
                               spans: &mut Vec<(usize, usize)>|
             -> Result<(), PretokenizeError> {
                let first = ids.len();
                self.encode_ordinary_into(&written.text, cache, ids)?;
                if self.dropped_byte_in(&written.text).is_some() {
                    return self.spans_around_dropped_bytes(&written, &ids[first..], at, spans);
                }
                // (a byte-fallback token is one byte of its character, which all align to that
                // character: each spans all of it, as `tokenizers`' one-byte symbols do)
                let mut position = 0;
                for &id in &ids[first..] {
                    let length = self.token_bytes(id).expect("an id of this encoder").len();
                    let (start, end) = written.original_range(position..position + length);
                    spans.push((start + at, end + at));
                    position += length;
                }
                debug_assert_eq!(position, written.text.len());
                Ok(())
            };
            let prefixed = |stretch: Aligned, starts_text: bool| match &self.prefix {
                Some(prefix) => prefix.apply_aligned(stretch, starts_text),
                None => stretch,
            };
            let mut between = |part: &str,
                               ids: &mut Vec<TokenId>,
                               spans: &mut Vec<(usize, usize)>|
             -> Result<(), PretokenizeError> {
                let at = offset_in(text, part);
                let original = Aligned::original(part);
                let Some(normalization) = &self.normalization else {
                    return stretch(prefixed(original, at == 0), at, ids, spans);
                };
                let normalized = normalization.normalizer.normalize_aligned(original);
                if normalization.tokens.is_empty() {
                    return stretch(prefixed(normalized, at == 0), at, ids, spans);
                }
                for piece in normalization.tokens.split(&normalized.text) {
                    match piece {
                        Part::Text(piece) => {
                            let start = offset_in(&normalized.text, piece);
                            let sliced = normalized.slice(start..start + piece.len());
                            stretch(prefixed(sliced, at == 0 && start == 0), at, ids, spans)?;
                        }
                        Part::Special { index, text: token } => {
                            let start = offset_in(&normalized.text, token);
                            let (from, to) = normalized.original_range(start..start + token.len());
                            ids.push(normalization.ids[index]);
                            spans.push((from + at, to + at));
                        }
                    }
                }
                Ok(())
            };
            let special = |token: &str,
                           id: TokenId,
                           ids: &mut Vec<TokenId>,
                           spans: &mut Vec<(usize, usize)>| {
                let start = offset_in(text, token);
                ids.push(id);
                spans.push((start, start + token.len()));
            };
            match allowed {
                AllowedSpecial::All if !self.specials.is_empty() => {
                    for part in self.specials.split(text) {
                        match part {
                            Part::Text(part) => between(part, &mut ids, &mut spans)?,
                            Part::Special { index, text: token } => {
                                special(token, self.special_ids[index], &mut ids, &mut spans)
                            }
                        }
                    }
                    Ok(())
                }
                AllowedSpecial::All | AllowedSpecial::None => between(text, &mut ids, &mut spans),
                AllowedSpecial::Only(allowed) => {
                    let subset = self.specials.subset(|token, _| allowed.contains(&token));
                    if subset.is_empty() {
                        return between(text, &mut ids, &mut spans);
                    }
                    for part in subset.split(text) {
                        match part {
                            Part::Text(part) => between(part, &mut ids, &mut spans)?,
                            Part::Special { index, text: token } => {
                                let id = self.special_id(&subset.tokens()[index]);
                                special(token, id, &mut ids, &mut spans);
                            }
                        }
                    }
                    Ok(())
                }
            }
        });
        if result.is_err() {
            // (the error as encoding reports it, with its place in the text)
            self.encode(text, allowed)?;
        }
        char_spans(text, &mut spans);
        Ok((ids, spans))
    }

    /// The spans of `ids`, the encoding of `written` (the text of a stretch starting at byte `at`
    /// of the text given) that holds a byte the vocabulary lacks, as `tokenizers` gives them.
    ///
    /// Its BPE (`models/bpe/model.rs`, `merge_word`) leaves the character it lacks out of the
    /// piece's symbols, and places each symbol by summing the lengths of the symbols before it
    /// (`Word::get_offsets_iter`): the left-out character's length is not counted, so each token
    /// after it in its piece is placed that many bytes earlier. Those lengths are of the piece as
    /// `ByteLevel` wrote it (each byte a character of one UTF-8 byte, printable ASCII, or two),
    /// and the place is then mapped back through that piece's alignment, which still holds the
    /// left-out character: a token may so span the characters before its own, the left-out one
    /// among them. The pieces are found again here; each takes its tokens, in order, until they
    /// hold its kept bytes.
    fn spans_around_dropped_bytes(
        &self,
        written: &Aligned,
        ids: &[TokenId],
        at: usize,
        spans: &mut Vec<(usize, usize)>,
    ) -> Result<(), PretokenizeError> {
        let dropped = self
            .dropped_bytes
            .as_deref()
            .expect("an encoder that drops bytes");
        let bytes = written.text.as_bytes();
        let mut ids = ids.iter();
        self.pretokenizer
            .try_for_each_span(&written.text, |piece_start, piece_end| {
                let piece = &bytes[piece_start..piece_end];
                let mut kept = piece.iter().filter(|&&b| !dropped[b as usize]).count();
                // `place`: where the next token starts, counted as `tokenizers` counts it;
                // `cursor` finds the byte of `piece` whose written character holds a place.
                let mut place = 0;
                let mut cursor = WrittenCursor::new(piece);
                while kept > 0 {
                    let &id = ids.next().expect("the ids of the stretch's pieces");
                    let token = self.token_bytes(id).expect("an id of this encoder");
                    let width: usize = token.iter().map(|&b| written_len(b)).sum();
                    let first = cursor.byte_at(place);
                    let last = cursor.byte_at(place + width - 1);
                    let (start, end) =
                        written.original_range(piece_start + first..piece_start + last + 1);
                    spans.push((start + at, end + at));
                    place += width;
                    kept -= token.len();
                }
            })?;
        debug_assert!(ids.next().is_none(), "the ids encode more than the pieces");
        Ok(())
    }

    /// `tokenizers`' `process_offsets` (`pre_tokenizers/byte_level.rs`): a token's leading and
    /// trailing spaces leave its span, except the one space `add_prefix_space` put before the
    /// first token. The spaces are counted in the token's string as `tokenizers` writes it: for
    /// a byte-level token the bytes 0x20 (`Ġ`; no other byte's letter is whitespace), for a
    /// special token or a vocabulary of characters its whitespace characters.
    fn trim_spans(&self, ids: &[TokenId], spans: &mut [(usize, usize)], add_prefix_space: bool) {
        for (index, (&id, span)) in ids.iter().zip(spans.iter_mut()).enumerate() {
            let bytes = self.token_string(id);
            let (mut leading, trailing) = if self.chars_first || self.is_special_id(id) {
                let token = String::from_utf8_lossy(bytes);
                let space = |c: &char| *c == '\u{0120}' || c.is_whitespace();
                (
                    token.chars().take_while(space).count(),
                    token.chars().rev().take_while(space).count(),
                )
            } else {
                (
                    bytes.iter().take_while(|&&b| b == b' ').count(),
                    bytes.iter().rev().take_while(|&&b| b == b' ').count(),
                )
            };
            if leading > 0 {
                let is_first = index == 0 || span.0 == 0;
                if is_first && add_prefix_space && leading == 1 {
                    leading = 0;
                }
                span.0 = (span.0 + leading).min(span.1);
            }
            if trailing > 0 && span.1 >= trailing {
                span.1 = (span.1 - trailing).max(span.0);
            }
        }
    }

    /// The bytes of `id`'s token as `tokenizers` writes it: an added token found in normalized
    /// text written normalized (a Replace may have made `"  "` into `" _ "`).
    fn token_string(&self, id: TokenId) -> &[u8] {
        if let Some(normalization) = &self.normalization {
            if let Some(index) = normalization.ids.iter().position(|&n| n == id) {
                return normalization.tokens.tokens()[index].as_bytes();
            }
        }
        self.token_bytes(id).unwrap_or_default()
    }

    /// Whether `id` is a special token's or an added token's found in normalized text.
    fn is_special_id(&self, id: TokenId) -> bool {
        self.special_ids.contains(&id)
            || self
                .normalization
                .as_ref()
                .is_some_and(|normalization| normalization.ids.contains(&id))
    }

    /// The character span of each token of `ids`, the encoding of `text`.
    ///
    /// # Panics
    /// If an id has no token, or the tokens' bytes are not `text`'s bytes in length: `ids` must
    /// be what encoding `text` gave.
    pub fn char_offsets(&self, text: &str, ids: &[TokenId]) -> Vec<(usize, usize)> {
        let bytes = text.as_bytes();
        let mut offsets = Vec::with_capacity(ids.len());
        // `begun` counts the characters that begin in bytes[..scanned].
        let mut scanned = 0usize;
        let mut begun = 0usize;
        for &id in ids {
            let length = self
                .token_bytes(id)
                .expect("an id of this encoder's own encoding")
                .len();
            let end = scanned + length;
            assert!(end <= bytes.len(), "the ids encode more than the text");
            // A token whose first byte continues a character starts in the character begun
            // last before it.
            let inside = bytes.get(scanned).is_some_and(|&b| is_continuation(b));
            let start = begun - usize::from(inside);
            begun += count_starts(&bytes[scanned..end]);
            offsets.push((start, begun));
            scanned = end;
        }
        assert_eq!(scanned, bytes.len(), "the ids encode less than the text");
        offsets
    }
}

/// The length in UTF-8 of the character `ByteLevel` writes for `byte` (GPT-2's byte alphabet):
/// printable ASCII is itself, every other byte a character from U+00A1 to U+0143.
fn written_len(byte: u8) -> usize {
    if (0x21..=0x7e).contains(&byte) {
        1
    } else {
        2
    }
}

/// Walks a piece as `ByteLevel` writes it, forwards only: which of its bytes holds a given byte
/// of what was written.
struct WrittenCursor<'a> {
    piece: &'a [u8],
    /// A byte of `piece`, and where its written character starts.
    index: usize,
    written_start: usize,
}

impl<'a> WrittenCursor<'a> {
    fn new(piece: &'a [u8]) -> Self {
        WrittenCursor {
            piece,
            index: 0,
            written_start: 0,
        }
    }

    /// The byte of the piece whose written character holds written byte `place` (no earlier
    /// than the last one asked for, and inside the piece as written).
    fn byte_at(&mut self, place: usize) -> usize {
        while self.written_start + written_len(self.piece[self.index]) <= place {
            self.written_start += written_len(self.piece[self.index]);
            self.index += 1;
        }
        self.index
    }
}

fn is_continuation(byte: u8) -> bool {
    byte & 0xC0 == 0x80
}

fn count_starts(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| !is_continuation(b)).count()
}

#[cfg(test)]
mod tests {
    use crate::{AllowedSpecial, Encoder, MergeRule, TokenId};

    /// Single bytes plus a few tokens that cut characters: `" \xe6"` (a space and the first byte
    /// of 日), `"\x97\xa5"` (its other two bytes), and `"ab"`; `<s>` special.
    fn encoder() -> Encoder {
        let mut vocab: Vec<(TokenId, Vec<u8>)> = (0..=255u8).map(|b| (b.into(), vec![b])).collect();
        vocab.push((256, b" \xe6".to_vec()));
        vocab.push((257, b"\x97\xa5".to_vec()));
        vocab.push((258, b"ab".to_vec()));
        let merges = vec![
            (b" ".to_vec(), b"\xe6".to_vec()),
            (b"\x97".to_vec(), b"\xa5".to_vec()),
            (b"a".to_vec(), b"b".to_vec()),
        ];
        Encoder::new(
            vocab,
            merges,
            vec![("<s>".into(), 259)],
            bpestore_pretokenize::GPT2_PATTERN,
            MergeRule::Pair,
        )
        .unwrap()
    }

    /// The rule, spelled out per token from its byte span: the characters whose bytes it touches.
    fn spans_by_definition(text: &str, ids: &[TokenId], encoder: &Encoder) -> Vec<(usize, usize)> {
        let char_of_byte: Vec<usize> = text
            .char_indices()
            .enumerate()
            .flat_map(|(index, (_, c))| std::iter::repeat_n(index, c.len_utf8()))
            .collect();
        let mut at = 0;
        ids.iter()
            .map(|&id| {
                let length = encoder.token_bytes(id).unwrap().len();
                let span = (char_of_byte[at], char_of_byte[at + length - 1] + 1);
                at += length;
                span
            })
            .collect()
    }

    #[test]
    fn a_token_that_cuts_a_character_spans_all_of_it() {
        let encoder = encoder();
        let text = "ab 日<s>ab😀 x";
        let (ids, offsets) = encoder
            .encode_with_offsets(text, AllowedSpecial::All)
            .unwrap();
        assert_eq!(&ids[..3], &[258, 256, 257]);
        // "ab" = chars 0..2; " \xe6" = the space (2) and 日 (3); "\x97\xa5" = 日 again.
        assert_eq!(&offsets[..3], &[(0, 2), (2, 4), (3, 4)]);
        assert_eq!(offsets[3], (4, 7)); // <s>
        assert_eq!(offsets, spans_by_definition(text, &ids, &encoder));
        // 😀's four bytes are four tokens, each spanning the emoji.
        assert_eq!(
            &offsets[4..9],
            &[(7, 9), (9, 10), (9, 10), (9, 10), (9, 10)]
        );
    }

    #[test]
    fn spans_of_many_texts_follow_the_rule() {
        let encoder = encoder();
        let texts = [
            "",
            " ",
            "日日 日",
            "<s><s>",
            "é ab\u{10FFFF}\r\n<s> 日ab",
            "a\u{0301}b  \t x",
        ];
        for text in texts {
            let (ids, offsets) = encoder
                .encode_with_offsets(text, AllowedSpecial::All)
                .unwrap();
            assert_eq!(
                offsets,
                spans_by_definition(text, &ids, &encoder),
                "{text:?}"
            );
            let (_, none) = encoder
                .encode_with_offsets(text, AllowedSpecial::None)
                .unwrap();
            assert_eq!(none.last().map_or(0, |s| s.1), text.chars().count());
        }
    }

    /// `tokenizers` places the tokens after a left-out byte as if it were not in its piece, in
    /// the bytes `ByteLevel` writes (two for a control character or a byte of a non-ASCII
    /// character, one for printable ASCII), then maps those places back through the piece
    /// as written, the left-out byte still in it (checked against `tokenizers` 0.23.3 by hand;
    /// tests/test_hf_offsets.py compares many more).
    #[test]
    fn the_tokens_after_a_left_out_byte_are_placed_as_tokenizers_places_them() {
        let encoder = encoder().with_dropped_bytes(&[0x04]);
        let spans = |text: &str| {
            encoder
                .encode_with_offsets(text, AllowedSpecial::All)
                .unwrap()
        };
        // "..\x04.," is one piece, written ". . Ą . ," (Ą two bytes): its third and fourth
        // tokens fall on the two bytes of Ą, so both span it (character 3).
        let (ids, offsets) = spans("a..\x04.,b");
        assert_eq!(ids.len(), 6);
        assert_eq!(offsets, [(0, 1), (1, 2), (2, 3), (3, 4), (3, 4), (6, 7)]);
        // "«\x04»": four byte tokens, each two bytes written: placed on «'s two bytes, Ą, then
        // »'s first byte.
        let (ids, offsets) = spans("«\x04»");
        assert_eq!(ids.len(), 4);
        assert_eq!(offsets, [(0, 1), (0, 1), (1, 2), (2, 3)]);
        // (a piece of left-out bytes only has no token; a special token keeps its own span)
        let (ids, offsets) = spans("\x04\x04<s>\x04ab");
        assert_eq!(ids, [259, 258]);
        assert_eq!(offsets, [(2, 5), (6, 8)]);
    }
}
