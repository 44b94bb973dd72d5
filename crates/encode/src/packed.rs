//! A stored tokenizer's vocabulary and merges packed into one byte string, so that a store hands
//! them over in one read instead of one row per token.
//!
//! The store writes it ([`pack`], through the bindings' `pack_model`) beside the rows it copies;
//! [`Packed::parse`] reads it back, borrowing every token from the buffer.
//!
//! Layout, every integer a little-endian `u32`:
//!
//! ```text
//! MAGIC (8 bytes)  n_vocab  n_merges
//! n_vocab ids  n_vocab token lengths  n_merges (left length, right length)
//! the tokens' bytes, in order  the merges' bytes (left then right), in order
//! ```
//!
//! and nothing after. The data is checked only for being well formed: whether the tokens make a
//! usable vocabulary is for the encoder (and `BPEModel`) to say, as for any other source.

use crate::bpe::TokenId;

/// The first eight bytes of packed data (the last is the layout's version).
pub const MAGIC: &[u8; 8] = b"BPEPACK\x01";

/// A packed vocabulary and merges, borrowed from the bytes they were read from.
#[derive(Debug, PartialEq, Eq)]
pub struct Packed<'a> {
    /// `(id, token)` in the order they were packed.
    pub vocab: Vec<(TokenId, &'a [u8])>,
    /// `(left, right)` in rank order.
    pub merges: Vec<(&'a [u8], &'a [u8])>,
}

/// Reads little-endian `u32`s from the front of a byte string.
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize, what: &str) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(len)
            .filter(|&end| end <= self.data.len());
        let Some(end) = end else {
            return Err(format!(
                "it ends at byte {} inside {what} ({len} more bytes expected)",
                self.data.len()
            ));
        };
        let bytes = &self.data[self.at..end];
        self.at = end;
        Ok(bytes)
    }

    fn u32(&mut self, what: &str) -> Result<u32, String> {
        let bytes = self.take(4, what)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    /// `count` u32s, checking first that the data holds them (a damaged count must not make
    /// us allocate gigabytes).
    fn u32s(&mut self, count: u32, what: &str) -> Result<Vec<u32>, String> {
        let bytes = self.take((count as usize).saturating_mul(4), what)?;
        Ok(bytes
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    }
}

impl<'a> Packed<'a> {
    /// The vocabulary and merges in `data`; an error saying where it is not well formed.
    pub fn parse(data: &'a [u8]) -> Result<Packed<'a>, String> {
        let mut reader = Reader { data, at: 0 };
        let magic = reader
            .take(MAGIC.len(), "the header")
            .map_err(|_| "it is too short to be packed data".to_string())?;
        if magic != MAGIC {
            return Err("it does not start as packed data does".into());
        }
        let n_vocab = reader.u32("the header")?;
        let n_merges = reader.u32("the header")?;
        let ids = reader.u32s(n_vocab, "the ids")?;
        let lengths = reader.u32s(n_vocab, "the token lengths")?;
        let merge_lengths = reader.u32s(n_merges.saturating_mul(2), "the merge lengths")?;
        let mut vocab = Vec::with_capacity(ids.len());
        for (&id, &len) in ids.iter().zip(&lengths) {
            vocab.push((id, reader.take(len as usize, "the tokens")?));
        }
        let mut merges = Vec::with_capacity(n_merges as usize);
        for pair in merge_lengths.chunks_exact(2) {
            let left = reader.take(pair[0] as usize, "the merges")?;
            let right = reader.take(pair[1] as usize, "the merges")?;
            merges.push((left, right));
        }
        if reader.at != data.len() {
            return Err(format!("{} bytes follow its end", data.len() - reader.at));
        }
        Ok(Packed { vocab, merges })
    }
}

/// `vocab` and `merges` packed (the inverse of [`Packed::parse`], and the layout's one writer:
/// the store packs through the bindings' `pack_model`); an error if a count, an id or a length
/// does not fit the layout's `u32`s.
pub fn pack(vocab: &[(TokenId, &[u8])], merges: &[(&[u8], &[u8])]) -> Result<Vec<u8>, String> {
    let bytes: usize = vocab.iter().map(|(_, token)| token.len()).sum::<usize>()
        + merges
            .iter()
            .map(|(left, right)| left.len() + right.len())
            .sum::<usize>();
    let mut out = Vec::with_capacity(16 + 8 * (vocab.len() + merges.len()) + bytes);
    out.extend_from_slice(MAGIC);
    let put = |out: &mut Vec<u8>, n: usize, what: &str| -> Result<(), String> {
        let n = u32::try_from(n)
            .map_err(|_| format!("{what} {n} does not fit packed data's 32 bits"))?;
        out.extend_from_slice(&n.to_le_bytes());
        Ok(())
    };
    put(&mut out, vocab.len(), "a vocab of")?;
    put(&mut out, merges.len(), "a merge count of")?;
    for &(id, _) in vocab {
        out.extend_from_slice(&id.to_le_bytes());
    }
    for (_, token) in vocab {
        put(&mut out, token.len(), "a token of length")?;
    }
    for (left, right) in merges {
        put(&mut out, left.len(), "a merge part of length")?;
        put(&mut out, right.len(), "a merge part of length")?;
    }
    for (_, token) in vocab {
        out.extend_from_slice(token);
    }
    for (left, right) in merges {
        out.extend_from_slice(left);
        out.extend_from_slice(right);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Packed<'static> {
        let vocab = vec![
            (0, b"a".as_slice()),
            (7, b"b".as_slice()),
            (3, b"ab".as_slice()),
            (9, b"".as_slice()),
        ];
        let merges = vec![
            (b"a".as_slice(), b"b".as_slice()),
            (b"ab".as_slice(), b"".as_slice()),
        ];
        Packed { vocab, merges }
    }

    #[test]
    fn packing_then_parsing_gives_back_the_same_tokens_in_order() {
        let Packed { vocab, merges } = sample();
        let data = pack(&vocab, &merges).unwrap();
        assert_eq!(Packed::parse(&data), Ok(Packed { vocab, merges }));
        let empty = pack(&[], &[]).unwrap();
        assert_eq!(empty.len(), 16);
        assert_eq!(Packed::parse(&empty).map(|p| p.vocab.len()), Ok(0));
    }

    #[test]
    fn every_truncation_and_every_extra_byte_is_refused() {
        let Packed { vocab, merges } = sample();
        let data = pack(&vocab, &merges).unwrap();
        for end in 0..data.len() {
            assert!(Packed::parse(&data[..end]).is_err(), "cut at {end}");
        }
        let mut longer = data.clone();
        longer.push(0);
        assert_eq!(
            Packed::parse(&longer),
            Err("1 bytes follow its end".to_string())
        );
    }

    #[test]
    fn damaged_headers_are_refused_without_allocating_their_counts() {
        let Packed { vocab, merges } = sample();
        let mut data = pack(&vocab, &merges).unwrap();
        data[0] = b'X';
        assert!(Packed::parse(&data).unwrap_err().contains("does not start"));
        let mut data = pack(&vocab, &merges).unwrap();
        data[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(Packed::parse(&data).unwrap_err().contains("inside the ids"));
        let mut data = pack(&vocab, &merges).unwrap();
        data[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(Packed::parse(&data).is_err());
        // A token length that runs past the end.
        let mut data = pack(&vocab, &merges).unwrap();
        let first_length = 16 + 4 * vocab.len();
        data[first_length..first_length + 4].copy_from_slice(&1000u32.to_le_bytes());
        assert!(Packed::parse(&data)
            .unwrap_err()
            .contains("inside the tokens"));
    }
}
