//! The token table: id -> bytes (every id, special tokens included, for decoding and the token
//! rule's concatenations) and bytes -> id (ordinary tokens only).

use crate::huge::HugeSlice;
use crate::EncodeError;
use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry;

/// A token id. Ranks are `u32` too: a merge's position in the merges list (pair rule) or the
/// resulting token's id (token rule).
pub type TokenId = u32;

const ABSENT: (u32, u32) = (u32::MAX, 0);

/// Every token's bytes in one arena.
pub(crate) struct Vocab {
    arena: Vec<u8>,
    /// `(start, len)` in `arena` by id when the ids are dense enough, else empty.
    dense: Vec<(u32, u32)>,
    /// The same for sparse ids.
    sparse: FxHashMap<TokenId, (u32, u32)>,
    /// Ordinary tokens (not the special tokens the encoder added) by their bytes.
    ids: Ids,
    /// The id of each single byte.
    pub(crate) byte_ids: [TokenId; 256],
    pub(crate) max_id: TokenId,
    pub(crate) len: usize,
}

impl Vocab {
    /// The ordinary tokens `vocab` (all 256 single bytes among them, no token twice), the
    /// special tokens with their ids, and `extra` ids beside them: a special token's id is a
    /// new id, that of the ordinary token with its bytes, or an extra id with its bytes (Hugging
    /// Face's added token beside the model's token of the same bytes: GPT-NeoX's `"  "` at 50276
    /// beside `ĠĠ` at 245). An extra id is decoded, never merged to.
    pub(crate) fn new(
        vocab: &[(TokenId, &[u8])],
        specials: &[(String, TokenId)],
        extra: &[(TokenId, &[u8])],
    ) -> Result<Vocab, EncodeError> {
        let mut vocab = vocab.to_vec();
        vocab.sort_unstable_by_key(|&(id, _)| id);
        for &(id, token) in extra {
            if vocab.binary_search_by_key(&id, |&(i, _)| i).is_ok() {
                return Err(EncodeError::InvalidVocab(format!(
                    "id {id} is given both to a token of the vocab and, beside it, to {}",
                    py_bytes_repr(token)
                )));
            }
        }
        let is_extra =
            |id: TokenId, token: &[u8]| extra.iter().any(|&(i, t)| i == id && t == token);
        // The id -> bytes table is laid out first and the rules checked after (no id or token
        // twice, all 256 bytes: `check_tokens`, as `check_model` checks them). A special token
        // whose id is an ordinary token's has that token's bytes (or is refused below).
        let mut entries: Vec<(TokenId, &[u8])> = vocab.clone();
        entries.extend_from_slice(extra);
        for (special, id) in specials {
            if vocab.binary_search_by_key(id, |&(i, _)| i).is_err()
                && !extra.iter().any(|&(i, _)| i == *id)
            {
                entries.push((*id, special.as_bytes()));
            }
        }
        entries.sort_by_key(|&(id, _)| id); // (stable: an ordinary token before a special)
        entries.dedup_by_key(|&mut (id, _)| id); // a special token listed twice

        let max_id = entries.last().map_or(0, |&(id, _)| id);
        let total = check_arena_size(entries.iter().map(|&(_, token)| token))?;
        let mut arena = Vec::with_capacity(total);
        let dense_enough = (max_id as usize) < 2 * entries.len() + 65_536;
        let mut dense = Vec::new();
        let mut sparse = FxHashMap::default();
        if dense_enough {
            dense = vec![ABSENT; max_id as usize + 1];
        }
        for &(id, token) in &entries {
            let span = (arena.len() as u32, token.len() as u32);
            arena.extend_from_slice(token);
            if dense_enough {
                dense[id as usize] = span;
            } else {
                sparse.insert(id, span);
            }
        }
        // (short tokens are keyed by their bytes packed in two words: no allocation for them)
        let small = vocab
            .iter()
            .filter(|(_, token)| (1..=SMALL_TOKEN).contains(&token.len()))
            .count();
        let mut ids = Ids::with_capacity(small);
        let byte_ids = check_tokens(&mut vocab, |token, id| ids.insert(token, id))?;

        for (special, id) in specials {
            match ids.get(special.as_bytes()).as_ref() {
                Some(existing) if existing == id => {}
                Some(_) if is_extra(*id, special.as_bytes()) => {}
                Some(existing) => {
                    return Err(EncodeError::InvalidVocab(format!(
                        "special token {special:?} has id {id}, but the vocab gives its bytes the id {existing}"
                    )))
                }
                None if extra.iter().any(|&(i, _)| i == *id) && !is_extra(*id, special.as_bytes()) => {
                    return Err(EncodeError::InvalidVocab(format!(
                        "special token {special:?} has id {id}, which is given to other bytes beside the vocab"
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
            arena,
            dense,
            sparse,
            ids,
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
        self.ids.get(bytes)
    }

    /// [`Vocab::id`] of `bytes`, given `window`: the 16 bytes from their start, read as one
    /// little-endian word (whatever follows them). A short token's key is the window masked to
    /// its length: one load and a mask, where [`pack`] chooses between four ways by the length.
    #[inline(always)]
    pub(crate) fn id_in_window(&self, bytes: &[u8], window: u128) -> Option<TokenId> {
        let len = bytes.len();
        if !is_short(bytes) {
            return self.ids.long.get(bytes).copied();
        }
        let key = crate::mix::key_of_window(window, len);
        debug_assert_eq!(key, pack(bytes));
        self.ids.get_short(len, key)
    }
}

/// The bytes of `tokens` in all, if one arena with offsets of 32 bits can hold them.
pub(crate) fn check_arena_size<'a>(
    tokens: impl Iterator<Item = &'a [u8]>,
) -> Result<usize, EncodeError> {
    let total: usize = tokens.map(<[u8]>::len).sum();
    if total >= u32::MAX as usize {
        return Err(EncodeError::InvalidVocab(
            "the vocab's tokens hold more than 4 GB".into(),
        ));
    }
    Ok(total)
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

/// Tokens of at most this many bytes are keyed by their bytes packed in two words ([`Ids`]).
pub const SHORT_TOKEN: usize = 15;

#[inline]
fn is_short(bytes: &[u8]) -> bool {
    bytes.len() <= SHORT_TOKEN
}

/// At most [`SHORT_TOKEN`] bytes packed in a `u128`: the bytes in order from the low byte,
/// zeros, and the length in the top byte, so that byte strings that differ in length or content
/// differ as keys. Read as at most two overlapping words, not byte by byte: the token rule packs
/// every pair it meets.
#[inline]
pub fn pack(bytes: &[u8]) -> u128 {
    let len = bytes.len();
    debug_assert!(len <= SHORT_TOKEN);
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let half = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let (low, high) = if len > 8 {
        // bytes[8..] are the high bytes of the word that ends the slice
        (word(0), word(len - 8) >> (8 * (16 - len)))
    } else if len == 8 {
        (word(0), 0)
    } else if len >= 4 {
        let tail = u64::from(half(len - 4)) >> (8 * (8 - len));
        (u64::from(half(0)) | (tail << 32), 0)
    } else {
        let mut low = 0u64;
        for (i, &b) in bytes.iter().enumerate() {
            low |= u64::from(b) << (8 * i);
        }
        (low, 0)
    };
    u128::from(low) | (u128::from(high) << 64) | ((len as u128) << 120)
}

/// Tokens by their bytes: those of 1 to [`SMALL_TOKEN`] bytes in [`SmallIds`], the rest of those
/// of at most [`SHORT_TOKEN`] bytes packed ([`pack`], as two words) in a hash map whose buckets
/// hold the key, the others boxed.
struct Ids {
    small: SmallIds,
    short: FxHashMap<(u64, u64), TokenId>,
    long: FxHashMap<Box<[u8]>, TokenId>,
}

impl Ids {
    fn with_capacity(capacity: usize) -> Ids {
        Ids {
            small: SmallIds::with_capacity(capacity),
            short: FxHashMap::default(),
            long: FxHashMap::default(),
        }
    }

    fn insert(&mut self, token: &[u8], id: TokenId) -> Option<TokenId> {
        if (1..=SMALL_TOKEN).contains(&token.len()) {
            return self.small.insert(pack(token), id);
        }
        if is_short(token) {
            match self.short.entry(split(pack(token))) {
                Entry::Occupied(first) => Some(*first.get()),
                Entry::Vacant(slot) => {
                    slot.insert(id);
                    None
                }
            }
        } else {
            match self.long.entry(token.into()) {
                Entry::Occupied(first) => Some(*first.get()),
                Entry::Vacant(slot) => {
                    slot.insert(id);
                    None
                }
            }
        }
    }

    #[inline]
    fn get(&self, bytes: &[u8]) -> Option<TokenId> {
        if is_short(bytes) {
            self.get_short(bytes.len(), pack(bytes))
        } else {
            self.long.get(bytes).copied()
        }
    }

    /// The id of the token of `len` bytes (at most [`SHORT_TOKEN`]) whose [`pack`]ed key is
    /// `key`, from the table that holds tokens of that length.
    #[inline(always)]
    fn get_short(&self, len: usize, key: u128) -> Option<TokenId> {
        if (1..=SMALL_TOKEN).contains(&len) {
            self.small.get(key)
        } else {
            self.short.get(&split(key)).copied()
        }
    }
}

/// Tokens of at most this many bytes go to [`SmallIds`]: their packed key leaves four bytes free.
const SMALL_TOKEN: usize = 11;

/// The bits of a small token's slot that hold its id: bytes 11 to 14, zero in its packed key.
const ID_SHIFT: u32 = 88;

/// Tokens of 1 to [`SMALL_TOKEN`] bytes (most of any vocabulary, and almost every lookup of the
/// token rule) by their packed key, in one open-addressing table (linear probing, at most three
/// quarters full) whose slot is one word of 16 bytes: the key with the id in its free bytes, 0
/// where empty. A lookup that finds its token reads one slot, four to a cache line, where a hash map's
/// reads its control bytes and then a bucket of 24 bytes; one that finds none (most lookups of
/// the token rule: joins that make no token) mostly stops at `filter`, one bit per token or so
/// in a few hundred kilobytes that stay in the CPU's cache, before the slots (megabytes for a
/// vocabulary of 200,000). Three quarters full rather than half, the slots of cl100k_base take
/// 2 MB rather than 4, and those of o200k_base 4 rather than 8: more of them stay in the CPU's
/// cache through a first pass over text, which ran 1.03-1.08x faster (33 languages with
/// o200k_base; English with cl100k_base), for a probe or two more on a lookup, mostly in the
/// same cache line.
struct SmallIds {
    slots: HugeSlice<u128>,
    len: usize,
    /// A bit set at each token's hash (its top bits): a lookup whose bit is clear finds nothing.
    filter: HugeSlice<u64>,
    /// `64 - log2(filter bits)`.
    filter_shift: u32,
}

impl SmallIds {
    fn with_capacity(capacity: usize) -> SmallIds {
        let slots = (capacity + capacity / 3 + 1).next_power_of_two().max(64);
        // About eight bits per token: a lookup of bytes that are no token passes it one time in
        // eight or so. (At least 64 bits: one word.)
        let filter_bits = (8 * capacity).next_power_of_two().max(64);
        SmallIds {
            slots: HugeSlice::filled(slots, 0u128),
            len: 0,
            filter: HugeSlice::filled(filter_bits / 64, 0u64),
            filter_shift: 64 - filter_bits.trailing_zeros(),
        }
    }

    #[inline(always)]
    fn filter_bit(&self, hash: u64) -> (usize, u64) {
        let bit = hash >> self.filter_shift;
        ((bit >> 6) as usize, 1u64 << (bit & 63))
    }

    /// Adds `key` (a packed token of 1 to [`SMALL_TOKEN`] bytes) with `id`; the id it had
    /// already, if any (then nothing changes).
    fn insert(&mut self, key: u128, id: TokenId) -> Option<TokenId> {
        if let Some(first) = self.get(key) {
            return Some(first);
        }
        if 4 * (self.len + 1) > 3 * self.slots.len() {
            self.grow();
        }
        self.place(key, id);
        self.len += 1;
        None
    }

    fn place(&mut self, key: u128, id: TokenId) {
        let hash = crate::mix::mix(key);
        let (word, bit) = self.filter_bit(hash);
        self.filter[word] |= bit;
        let mask = self.slots.len() - 1;
        let mut at = hash as usize & mask;
        while self.slots[at] != 0 {
            at = (at + 1) & mask;
        }
        self.slots[at] = key | (u128::from(id) << ID_SHIFT);
    }

    fn grow(&mut self) {
        let old = std::mem::take(&mut self.slots);
        let mut bigger = SmallIds::with_capacity(old.len());
        for &slot in old.iter().filter(|&&slot| slot != 0) {
            let id = (slot >> ID_SHIFT) as TokenId;
            bigger.place(slot & !(u128::from(u32::MAX) << ID_SHIFT), id);
        }
        bigger.len = self.len;
        *self = bigger;
    }

    /// The id of the token whose packed key is `key` (1 to [`SMALL_TOKEN`] bytes).
    #[inline(always)]
    fn get(&self, key: u128) -> Option<TokenId> {
        let hash = crate::mix::mix(key);
        let (word, bit) = self.filter_bit(hash);
        let mask = self.slots.len() - 1;
        let mut at = hash as usize & mask;
        // The slot is asked for before the filter is read, so that a token's two loads wait for
        // memory together rather than one after the other (on a first pass, most lookups are
        // merges', and neither the filter nor the slots stay in the CPU's cache through the
        // text): a cold pass over 46 languages ran 1.02-1.05x faster with o200k_base, 1.03x
        // with cl100k_base. (The pair rule's filter is small enough to stay cached: there
        // the same change gained nothing.)
        crate::prefetch::prefetch_address(self.slots.as_ptr().wrapping_add(at).cast());
        if self.filter[word] & bit == 0 {
            return None;
        }
        loop {
            let slot = self.slots[at];
            if slot == 0 {
                return None;
            }
            if slot & !(u128::from(u32::MAX) << ID_SHIFT) == key {
                return Some((slot >> ID_SHIFT) as TokenId);
            }
            at = (at + 1) & mask;
        }
    }
}

#[inline]
fn split(key: u128) -> (u64, u64) {
    (key as u64, (key >> 64) as u64)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpe::tests::Rng;
    use std::collections::HashMap;

    /// The 256 single bytes, each its own id.
    const SINGLE_BYTES: [u8; 256] = {
        let mut bytes = [0u8; 256];
        let mut b = 0;
        while b < 256 {
            bytes[b] = b as u8;
            b += 1;
        }
        bytes
    };

    /// A vocab of the 256 single bytes, byte `b` with id `b`.
    fn single_bytes() -> Vec<(TokenId, &'static [u8])> {
        (0..256)
            .map(|b| (b as TokenId, &SINGLE_BYTES[b..=b]))
            .collect()
    }

    #[test]
    fn extra_ids_are_decoded_and_never_looked_up_by_their_bytes() {
        let mut vocab = single_bytes();
        vocab.push((256, b"  ")); // the model's token of two spaces (a twin)
        let specials = vec![("  ".to_string(), 300)]; // an added token of the same bytes
        let extra: Vec<(TokenId, &[u8])> = vec![(300, b"  "), (301, "\u{4e2d}".as_bytes())];
        let made = Vocab::new(&vocab, &specials, &extra).expect("a twin beside the vocab");
        assert_eq!(made.id(b"  "), Some(256));
        assert_eq!(made.get(300), Some(&b"  "[..]));
        assert_eq!(made.get(301), Some("\u{4e2d}".as_bytes()));
        assert_eq!(made.id("\u{4e2d}".as_bytes()), None);
        assert_eq!((made.max_id, made.len), (301, 259));
        // Without the extra id, the special token's bytes belong to another id: refused.
        assert!(Vocab::new(&vocab, &specials, &extra[1..]).is_err());
        // An extra id that is the vocab's, or a special token given other bytes' extra id.
        assert!(Vocab::new(&vocab, &[], &[(256, b"x")]).is_err());
        assert!(Vocab::new(&vocab, &[("<s>".to_string(), 301)], &extra).is_err());
    }

    #[test]
    fn packing_reads_words_as_copying_byte_by_byte_would() {
        let bytes: Vec<u8> = (0..40u8)
            .map(|b| b.wrapping_mul(151).wrapping_add(7))
            .collect();
        for start in 0..20 {
            for len in 0..=SHORT_TOKEN {
                let slice = &bytes[start..start + len];
                let mut expected = [0u8; 16];
                expected[..len].copy_from_slice(slice);
                expected[15] = len as u8;
                assert_eq!(pack(slice), u128::from_le_bytes(expected), "{slice:?}");
            }
        }
    }

    #[test]
    fn a_lookup_in_a_window_finds_what_a_lookup_of_the_bytes_finds() {
        // Tokens of every length to 20 (small, short and long keys), looked up with whatever
        // bytes follow them in the window: each token and each of its prefixes answer as `id`.
        let mut rng = Rng(11);
        let text: Vec<u8> = (0..400).map(|_| (rng.next() % 4) as u8 + b'a').collect();
        let mut vocab: Vec<(TokenId, &[u8])> = single_bytes();
        let mut seen = std::collections::HashSet::new();
        for start in (0..360).step_by(9) {
            let token = &text[start..start + 2 + start % 19];
            if seen.insert(token) {
                vocab.push((vocab.len() as TokenId, token));
            }
        }
        let made = Vocab::new(&vocab, &[], &[]).expect("a vocab");
        let mut found = 0;
        for start in 0..360 {
            let mut window = [0xffu8; 16];
            let visible = (text.len() - start).min(16);
            window[..visible].copy_from_slice(&text[start..start + visible]);
            let window = u128::from_le_bytes(window);
            for len in 1..=20 {
                let bytes = &text[start..start + len];
                let id = made.id(bytes);
                assert_eq!(made.id_in_window(bytes, window), id, "{bytes:?}");
                found += usize::from(id.is_some() && len > 1);
            }
        }
        assert!(found > 40, "the text holds the tokens: {found}");
    }

    #[test]
    fn small_ids_grow_and_answer_as_a_map() {
        // More tokens than the table was made for (it grows), of every small length, ids over
        // the whole u32 range; then lookups of tokens, of absent keys, and a token given twice.
        let mut rng = Rng(0x3C6E_F372_FE94_F82B);
        let mut table = SmallIds::with_capacity(4);
        let mut expected: HashMap<u128, TokenId> = HashMap::new();
        for _ in 0..5000 {
            let len = 1 + rng.below(SMALL_TOKEN);
            let token: Vec<u8> = (0..len).map(|_| [0, 1, 0xff][rng.below(3)]).collect();
            let id = rng.next() as TokenId;
            let first = expected.get(&pack(&token)).copied();
            assert_eq!(table.insert(pack(&token), id), first, "{token:?}");
            expected.entry(pack(&token)).or_insert(id);
        }
        assert!(4 * expected.len() <= 3 * table.slots.len());
        for (&key, &id) in &expected {
            assert_eq!(table.get(key), Some(id));
        }
        for _ in 0..5000 {
            let len = 1 + rng.below(SMALL_TOKEN);
            let token: Vec<u8> = (0..len).map(|_| [0, 2, 0xfe][rng.below(3)]).collect();
            let key = pack(&token);
            assert_eq!(table.get(key), expected.get(&key).copied(), "{token:?}");
        }
    }

    #[test]
    fn ids_by_bytes_are_a_maps() {
        // Short and long tokens, tokens that differ only in trailing zeros or in length, the
        // empty token; looked up with and without them.
        let mut rng = Rng(0x5851_F42D_4C95_7F2D);
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        tokens.push(Vec::new());
        tokens.extend([
            vec![0, 0],
            vec![1, 0],
            vec![1, 0, 0],
            vec![0; 15],
            vec![0; 16],
        ]);
        for _ in 0..3000 {
            let len = 2 + rng.below(30);
            tokens.push((0..len).map(|_| [0, 1, b'a', 0xe4][rng.below(4)]).collect());
        }
        tokens.sort();
        tokens.dedup();
        let slices: Vec<(TokenId, &[u8])> = tokens
            .iter()
            .enumerate()
            .map(|(id, token)| (id as TokenId, token.as_slice()))
            .collect();
        let vocab = Vocab::new(&slices, &[], &[]).expect("a valid vocabulary");
        let expected: HashMap<&[u8], TokenId> = slices.iter().map(|&(id, t)| (t, id)).collect();
        for &(id, token) in &slices {
            assert_eq!(vocab.id(token), Some(id), "{token:?}");
            for cut in 0..token.len() {
                assert_eq!(
                    vocab.id(&token[..cut]),
                    expected.get(&token[..cut]).copied()
                );
            }
            let longer = [token, &[0]].concat();
            assert_eq!(vocab.id(&longer), expected.get(longer.as_slice()).copied());
        }
    }
}
