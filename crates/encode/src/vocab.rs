//! The token table: id -> bytes (every id, special tokens included, for decoding and the token
//! rule's concatenations) and bytes -> id (ordinary tokens only).

use crate::bpe::TokenId;
use crate::EncodeError;
use rustc_hash::FxHashMap;

const ABSENT: (u32, u32) = (u32::MAX, 0);

/// Every token's bytes in one arena.
pub(crate) struct Vocab {
    /// Ordinary tokens (not the special tokens the encoder added) by their bytes, which are
    /// slices of `arena` (declared first: dropped before it).
    id_of: FxHashMap<&'static [u8], TokenId>,
    /// Never changed once made: `id_of`'s keys point into it (see [`Vocab::new`]).
    arena: Box<[u8]>,
    /// `(start, len)` in `arena` by id when the ids are dense enough, else empty.
    dense: Vec<(u32, u32)>,
    /// The same for sparse ids.
    sparse: FxHashMap<TokenId, (u32, u32)>,
    /// The id of each single byte.
    pub(crate) byte_ids: [TokenId; 256],
    pub(crate) max_id: TokenId,
    pub(crate) len: usize,
}

impl Vocab {
    /// The ordinary tokens `vocab` (all 256 single bytes among them, no token twice) and the
    /// special tokens with their ids: a special token's id is either a new id or that of the
    /// ordinary token with its bytes.
    pub(crate) fn new(
        vocab: &[(TokenId, &[u8])],
        specials: &[(String, TokenId)],
    ) -> Result<Vocab, EncodeError> {
        let mut vocab = vocab.to_vec();
        vocab.sort_unstable_by_key(|&(id, _)| id);
        check_ids(&vocab)?;
        // The table is laid out first and the rules checked on it after: the bytes -> id map,
        // which finds a token given twice, is keyed by the table's own bytes (one map, and no
        // copy of each token: a 200k vocab's allocations took half of building its table).
        // (id, bytes, whether it is an ordinary token); a special token whose id is an ordinary
        // token's has that token's bytes (or is refused below).
        let mut entries: Vec<(TokenId, &[u8], bool)> =
            vocab.iter().map(|&(id, token)| (id, token, true)).collect();
        for (special, id) in specials {
            if vocab.binary_search_by_key(id, |&(i, _)| i).is_err() {
                entries.push((*id, special.as_bytes(), false));
            }
        }
        entries.sort_by_key(|&(id, _, _)| id); // (stable: an ordinary token before a special)
        entries.dedup_by_key(|&mut (id, _, _)| id); // a special token listed twice

        let max_id = entries.last().map_or(0, |&(id, _, _)| id);
        let total: usize = entries.iter().map(|(_, t, _)| t.len()).sum();
        if total >= u32::MAX as usize {
            return Err(EncodeError::InvalidVocab(
                "the vocab's tokens hold more than 4 GB".into(),
            ));
        }
        let mut arena = Vec::with_capacity(total);
        let dense_enough = (max_id as usize) < 2 * entries.len() + 65_536;
        let mut dense = Vec::new();
        let mut sparse = FxHashMap::default();
        if dense_enough {
            dense = vec![ABSENT; max_id as usize + 1];
        }
        let mut ordinary: Vec<(usize, usize, TokenId)> = Vec::with_capacity(vocab.len());
        for &(id, token, is_ordinary) in &entries {
            let span = (arena.len() as u32, token.len() as u32);
            if is_ordinary {
                ordinary.push((arena.len(), arena.len() + token.len(), id));
            }
            arena.extend_from_slice(token);
            if dense_enough {
                dense[id as usize] = span;
            } else {
                sparse.insert(id, span);
            }
        }
        let arena = arena.into_boxed_slice();
        // The ordinary tokens as slices of the arena.
        let mut tokens: Vec<(TokenId, &'static [u8])> = Vec::with_capacity(vocab.len());
        for (start, end, id) in ordinary {
            let bytes: *const [u8] = &arena[start..end];
            // SAFETY: the slice is in the heap buffer of `arena`, which the returned Vocab owns
            // and never changes, moves out of or frees before `id_of` (declared before it, so
            // dropped first; on an error both are dropped here); moving the Vocab moves the Box,
            // not the buffer. The keys are only ever compared with (`id` hands out ids, never a
            // key), so no reference outlives the buffer.
            tokens.push((id, unsafe { &*bytes }));
        }
        let mut id_of: FxHashMap<&'static [u8], TokenId> =
            FxHashMap::with_capacity_and_hasher(tokens.len(), Default::default());
        let byte_ids = check_tokens(&mut tokens, |token, id| id_of.insert(token, id))?;

        for (special, id) in specials {
            match id_of.get(special.as_bytes()) {
                Some(existing) if existing == id => {}
                Some(existing) => {
                    return Err(EncodeError::InvalidVocab(format!(
                        "special token {special:?} has id {id}, but the vocab gives its bytes the id {existing}"
                    )))
                }
                None => {
                    if let Ok(at) = vocab.binary_search_by_key(id, |&(i, _)| i) {
                        return Err(EncodeError::InvalidVocab(format!(
                            "special token {special:?} has id {id}, which the vocab gives to {}",
                            py_bytes_repr(vocab[at].1)
                        )));
                    }
                }
            }
        }
        Ok(Vocab {
            id_of,
            arena,
            dense,
            sparse,
            byte_ids,
            max_id,
            len: entries.len(),
        })
    }

    /// The bytes of a token of the vocabulary (special tokens included), if there is one.
    #[inline]
    pub(crate) fn get(&self, id: TokenId) -> Option<&[u8]> {
        let (start, len) = if self.dense.is_empty() {
            *self.sparse.get(&id)?
        } else {
            *self.dense.get(id as usize)?
        };
        if start == u32::MAX {
            return None;
        }
        Some(&self.arena[start as usize..(start + len) as usize])
    }

    /// The bytes of a token known to exist.
    #[inline]
    pub(crate) fn bytes(&self, id: TokenId) -> &[u8] {
        self.get(id).expect("a token id from the vocabulary")
    }

    /// The id of an ordinary token.
    #[inline]
    pub(crate) fn id(&self, bytes: &[u8]) -> Option<TokenId> {
        self.id_of.get(bytes).copied()
    }
}

/// The rules of a vocabulary of ordinary tokens, for [`Vocab::new`] and `check_model`: no id
/// twice, no token twice, all 256 single bytes. Sorts `vocab` by id; `insert(token, id)` records
/// a token and returns the id it had already, if any (the caller's map, borrowed or owned).
/// Returns the id of each single byte.
pub(crate) fn check_tokens<'a>(
    vocab: &mut [(TokenId, &'a [u8])],
    mut insert: impl FnMut(&'a [u8], TokenId) -> Option<TokenId>,
) -> Result<[TokenId; 256], EncodeError> {
    vocab.sort_unstable_by_key(|&(id, _)| id);
    check_ids(vocab)?;
    let mut byte_ids = [0; 256];
    let mut found = [false; 256];
    for &(id, token) in vocab.iter() {
        if let Some(first) = insert(token, id) {
            return Err(EncodeError::InvalidVocab(format!(
                "ids {first} and {id} both stand for the token {}",
                py_bytes_repr(token)
            )));
        }
        if let &[byte] = token {
            byte_ids[byte as usize] = id;
            found[byte as usize] = true;
        }
    }
    all_single_bytes(&found)?;
    Ok(byte_ids)
}

/// The rule that a byte-level vocabulary holds all 256 single bytes, for `tokens` whose other
/// rules are known to hold (a `.tiktoken` file's, checked as it is read): [`check_tokens`]
/// without a map of the tokens.
pub fn check_single_bytes<'a>(
    tokens: impl IntoIterator<Item = &'a [u8]>,
) -> Result<(), EncodeError> {
    let mut found = [false; 256];
    for token in tokens {
        if let &[byte] = token {
            found[byte as usize] = true;
        }
    }
    all_single_bytes(&found)
}

/// The error naming the single bytes not `found`, if any.
fn all_single_bytes(found: &[bool; 256]) -> Result<(), EncodeError> {
    let missing: Vec<u8> = (0..=255u8).filter(|&b| !found[b as usize]).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let shown: Vec<String> = missing
        .iter()
        .take(8)
        .map(|b| format!("0x{b:02x}"))
        .collect();
    let more = if missing.len() > 8 { " ..." } else { "" };
    Err(EncodeError::InvalidVocab(format!(
        "the vocab lacks {} single-byte tokens ({}{more}); byte-level BPE needs all 256",
        missing.len(),
        shown.join(", ")
    )))
}

/// No id twice in `vocab`, sorted by id.
fn check_ids(vocab: &[(TokenId, &[u8])]) -> Result<(), EncodeError> {
    match vocab.windows(2).find(|window| window[0].0 == window[1].0) {
        Some(window) => Err(EncodeError::InvalidVocab(format!(
            "id {} is given twice",
            window[0].0
        ))),
        None => Ok(()),
    }
}

/// Python's `repr()` of a bytes object, for messages that must read as the Python code's did.
pub fn py_bytes_repr(bytes: &[u8]) -> String {
    let quote = if bytes.contains(&b'\'') && !bytes.contains(&b'"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(bytes.len() + 3);
    out.push('b');
    out.push(quote);
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            _ if b == quote as u8 => {
                out.push('\\');
                out.push(quote);
            }
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push(quote);
    out
}
