//! Character offsets of tokens, as Hugging Face's `tokenizers` reports them.
//!
//! A token's span is the characters its bytes touch: from the character that holds its first byte
//! to the one that holds its last byte, inclusive. A token that holds only part of a character's
//! UTF-8 bytes (byte-level BPE splits rare characters) therefore spans that whole character, and
//! the next token, which holds the rest, spans it too. This is what `tokenizers`' `Encoding.offsets`
//! gives for a byte-level BPE with `trim_offsets: false` (the leading space of `" word"` is part of
//! its span).

use crate::{AllowedSpecial, EncodeError, Encoder, TokenId};

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
        if self.rewrites_text() {
            // (Hugging Face maps them back through its alignments; bpestore does not keep them)
            return Err(EncodeError::Unsupported(
                "offsets are not available for a tokenizer that normalizes its text or writes a prefix into it"
                    .into(),
            ));
        }
        if let Some(byte) = self.dropped_byte_in(text) {
            // (the tokens' bytes no longer line up with the text's)
            return Err(EncodeError::Unsupported(format!(
                "offsets are not available for a text holding a byte the vocabulary lacks (0x{byte:02x}), which encoding leaves out"
            )));
        }
        let ids = self.encode(text, allowed)?;
        let offsets = self.char_offsets(text, &ids);
        Ok((ids, offsets))
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
}
