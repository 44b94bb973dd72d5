//! A warm cache: pre-tokens whose ids were worked out ahead of time, so that a fresh encoder does
//! not merge them again.
//!
//! An encoder starts with empty caches: the first pass over a text merges every distinct
//! pre-token once, which makes a cold pass about half as fast as a warm one. Yet a stored
//! tokenizer comes with what it will mostly see: its training corpus's pre-token counts (or a
//! corpus the user names). The store keeps the ids of the most frequent of them, worked out by
//! this encoder ([`Encoder::pack_warm`]), and a loaded encoder takes them in one read
//! ([`Encoder::load_warm`]) into a read-only table that every thread consults, without a lock,
//! before its own cache.
//!
//! The ids are never different from what merging gives: they are made by the encoder's own
//! merge, and the packed table carries the fingerprint of the model that made them
//! ([`Encoder::fingerprint`]: the tokens by id, the merges by rank, the rule, and the version of
//! the rule's code below); a table made for another model is refused. Loading also checks that
//! the table is well formed and that each piece's ids spell exactly its bytes, so a damaged
//! table is refused rather than trusted.
//!
//! Layout, every integer little-endian:
//!
//! ```text
//! MAGIC (8 bytes)  fingerprint (u64)  n (u32)
//! n piece lengths (u32)  n id counts (u32)  the pieces' bytes, in order  the ids (u32), in order
//! ```
//!
//! and nothing after.

use crate::bpe::TokenId;
use crate::cache::{short_key, PieceCache, MEDIUM_BYTES, SHORT_BYTES};
use crate::{Encoder, MergeRule};
use std::sync::Arc;

/// The longest piece a warm table holds (the caches take longer ones, up to
/// `cache::MAX_CACHED_PIECE`; a stored table keeps the limit it was made with).
const MAX_WARM_PIECE: usize = 64;

/// The first eight bytes of a packed warm table (the last is the layout's version).
pub const WARM_MAGIC: &[u8; 8] = b"BPEWARM\x01";

/// The version of the merge rules' code that a fingerprint covers: raised whenever a change to
/// the encoder could give a piece other ids, so that tables made before are refused.
const RULES_VERSION: u64 = 1;

/// A 64-bit hash of a byte stream (FNV-1a over 8-byte words, then a finalizer): stable across
/// builds and versions of any crate, unlike the hashers of hash maps, because it is stored.
pub(crate) struct Fingerprint(u64);

impl Fingerprint {
    pub(crate) fn new() -> Fingerprint {
        Fingerprint(0xcbf2_9ce4_8422_2325 ^ RULES_VERSION)
    }

    fn word(&mut self, word: u64) {
        self.0 = (self.0 ^ word).wrapping_mul(0x0000_0100_0000_01b3);
    }

    /// Adds `bytes` and their length (so that `ab`,`c` and `a`,`bc` differ).
    pub(crate) fn bytes(&mut self, bytes: &[u8]) {
        self.word(bytes.len() as u64);
        let mut words = bytes.chunks_exact(8);
        for chunk in words.by_ref() {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.word(u64::from_le_bytes(word));
        }
        let mut last = [0u8; 8];
        last[..words.remainder().len()].copy_from_slice(words.remainder());
        self.word(u64::from_le_bytes(last));
    }

    pub(crate) fn number(&mut self, number: u64) {
        self.word(number);
    }

    pub(crate) fn finish(&self) -> u64 {
        let h = (self.0 ^ (self.0 >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
        let h = (h ^ (h >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

/// The fingerprint of a model: the rule, the ordinary tokens by id, the merges by rank.
pub(crate) fn model_fingerprint(
    rule: MergeRule,
    vocab: &[(TokenId, &[u8])],
    merges: &[(&[u8], &[u8])],
) -> u64 {
    let mut hash = Fingerprint::new();
    hash.number(match rule {
        MergeRule::Pair => 1,
        MergeRule::Token => 2,
    });
    let mut by_id: Vec<(TokenId, &[u8])> = vocab.to_vec();
    by_id.sort_unstable_by_key(|&(id, _)| id);
    hash.number(by_id.len() as u64);
    for (id, token) in by_id {
        hash.number(u64::from(id));
        hash.bytes(token);
    }
    if rule == MergeRule::Pair {
        // (the token rule reads no merges: two models that differ only there encode alike)
        hash.number(merges.len() as u64);
        for (left, right) in merges {
            hash.bytes(left);
            hash.bytes(right);
        }
    }
    hash.finish()
}

/// The read-only table of pre-tokens and their ids: the stored table's, and the 256 pieces of
/// one byte (which the encoder looks up like the others, see `Encoder::emit_piece`).
pub(crate) struct WarmCache {
    /// (shared with the caches it seeds: see `CachePool::seed`)
    pub(crate) pieces: Arc<PieceCache>,
    /// How many pieces the stored table gave.
    stored: usize,
}

impl Encoder {
    /// This encoder's model fingerprint (see the module's documentation).
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// The packed warm table of `pieces` (pre-tokens, most useful first): each merged by this
    /// encoder, as when it is met in a text. Pieces of one byte (never merged) or longer than the
    /// caches keep, and pieces given before, are left out; so are those past `limit`. Returns
    /// the table and how many pieces it holds.
    pub fn pack_warm(&self, pieces: &[&[u8]], limit: usize) -> (Vec<u8>, usize) {
        let mut seen = PieceCache::new(usize::MAX);
        let mut kept: Vec<&[u8]> = Vec::new();
        for &piece in pieces {
            if kept.len() >= limit {
                break;
            }
            if piece.len() < 2 || piece.len() > MAX_WARM_PIECE {
                continue;
            }
            let key = short_key(piece);
            if seen.get(piece, key).is_none() {
                seen.insert(piece, key, &[]);
                kept.push(piece);
            }
        }
        // Merged on every core: a warm table is made once, when a tokenizer is stored.
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let part = kept.len().div_ceil(threads.max(1)).max(1);
        let merged: Vec<Vec<Vec<TokenId>>> = std::thread::scope(|scope| {
            let workers: Vec<_> = kept
                .chunks(part)
                .map(|chunk| {
                    scope.spawn(move || {
                        let mut out = Vec::with_capacity(chunk.len());
                        for piece in chunk {
                            let mut ids = Vec::new();
                            self.merge_piece(piece, &mut ids);
                            out.push(ids);
                        }
                        out
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|worker| worker.join().expect("merging a piece does not panic"))
                .collect()
        });
        let ids: Vec<&Vec<TokenId>> = merged.iter().flatten().collect();

        let mut data = Vec::new();
        data.extend_from_slice(WARM_MAGIC);
        data.extend_from_slice(&self.fingerprint.to_le_bytes());
        data.extend_from_slice(&(kept.len() as u32).to_le_bytes());
        for piece in &kept {
            data.extend_from_slice(&(piece.len() as u32).to_le_bytes());
        }
        for piece_ids in &ids {
            data.extend_from_slice(&(piece_ids.len() as u32).to_le_bytes());
        }
        for piece in &kept {
            data.extend_from_slice(piece);
        }
        for piece_ids in &ids {
            for id in piece_ids.iter() {
                data.extend_from_slice(&id.to_le_bytes());
            }
        }
        (data, kept.len())
    }

    /// Takes the packed warm table `data` (made by [`Encoder::pack_warm`] of an encoder of the
    /// same model): from then on, every thread finds its pieces' ids there. Returns how many
    /// pieces it holds. An encoder takes one table: a second is refused.
    ///
    /// Errors name what is wrong: not a warm table, made for another model, damaged (cut short,
    /// lengths out of bounds, a piece twice, an id unknown, or ids that do not spell their piece).
    pub fn load_warm(&self, data: &[u8]) -> Result<usize, String> {
        let warm = self.parse_warm(data)?;
        let len = warm.stored;
        let pieces = Arc::clone(&warm.pieces);
        self.warm
            .set(warm)
            .map_err(|_| "this encoder has a warm table already".to_string())?;
        self.caches.seed(pieces);
        Ok(len)
    }

    /// How many pieces the warm table holds (0 without one).
    pub fn warm_len(&self) -> usize {
        self.warm.get().map_or(0, |warm| warm.stored)
    }

    /// Whether `id` is a special token's id of its own (not also an ordinary token's).
    fn has_own_special_id(&self, id: TokenId) -> bool {
        self.special_ids.contains(&id)
            && self.vocab.get(id).and_then(|bytes| self.vocab.id(bytes)) != Some(id)
    }

    fn parse_warm(&self, data: &[u8]) -> Result<WarmCache, String> {
        let mut at = 0usize;
        let mut take = |len: usize, what: &str| -> Result<&[u8], String> {
            let end = at.checked_add(len).filter(|&end| end <= data.len());
            let Some(end) = end else {
                return Err(format!(
                    "it ends at byte {} inside {what} ({len} more bytes expected)",
                    data.len()
                ));
            };
            let bytes = &data[at..end];
            at = end;
            Ok(bytes)
        };
        if take(8, "its header")? != WARM_MAGIC {
            return Err("it is not a warm table (its first bytes are wrong)".into());
        }
        let fingerprint = u64::from_le_bytes(take(8, "its header")?.try_into().expect("8 bytes"));
        if fingerprint != self.fingerprint {
            return Err(format!(
                "it was made for another model or another version of the merge rule \
                 (fingerprint {fingerprint:016x}, this model's is {:016x})",
                self.fingerprint
            ));
        }
        let count = u32::from_le_bytes(take(4, "its header")?.try_into().expect("4 bytes"));
        let count = count as usize;
        let words = |bytes: &[u8]| -> Vec<u32> {
            bytes
                .chunks_exact(4)
                .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
                .collect()
        };
        // (each length is checked against the data before anything of that size is allocated)
        let lengths = words(take(count.saturating_mul(4), "the piece lengths")?);
        let id_counts = words(take(count.saturating_mul(4), "the id counts")?);
        let mut piece_bytes = 0usize;
        for (i, &len) in lengths.iter().enumerate() {
            if len < 2 || len as usize > MAX_WARM_PIECE {
                return Err(format!(
                    "piece {i} has {len} bytes (2 to {MAX_WARM_PIECE} expected)"
                ));
            }
            piece_bytes += len as usize;
        }
        let mut total_ids = 0usize;
        for (i, (&n, &len)) in id_counts.iter().zip(&lengths).enumerate() {
            if n == 0 || n > len {
                return Err(format!("piece {i} has {n} ids for {len} bytes"));
            }
            total_ids += n as usize;
        }
        let pieces = take(piece_bytes, "the pieces")?;
        let ids = words(take(total_ids.saturating_mul(4), "the ids")?);
        if at != data.len() {
            return Err(format!(
                "{} bytes follow its end at byte {at}",
                data.len() - at
            ));
        }
        let short = lengths
            .iter()
            .filter(|&&len| len as usize <= SHORT_BYTES)
            .count();
        let medium = lengths
            .iter()
            .filter(|&&len| len as usize <= MEDIUM_BYTES)
            .count()
            - short;
        let bytes = 256;
        let mut cache = PieceCache::with_room(
            count.saturating_add(bytes + 1),
            short.saturating_add(bytes),
            medium,
        );
        let (mut piece_at, mut id_at) = (0usize, 0usize);
        let mut spelt: Vec<u8> = Vec::with_capacity(MAX_WARM_PIECE);
        for i in 0..count {
            let piece = &pieces[piece_at..piece_at + lengths[i] as usize];
            let piece_ids = &ids[id_at..id_at + id_counts[i] as usize];
            piece_at += piece.len();
            id_at += piece_ids.len();
            spelt.clear();
            for &id in piece_ids {
                let token = self
                    .vocab
                    .get(id)
                    .filter(|_| !self.has_own_special_id(id))
                    .ok_or_else(|| format!("piece {i} has the id {id}, no ordinary token"))?;
                spelt.extend_from_slice(token);
                if spelt.len() > piece.len() {
                    break;
                }
            }
            if spelt != piece {
                return Err(format!("the ids of piece {i} do not spell its bytes"));
            }
            let key = short_key(piece);
            if cache.get(piece, key).is_some() {
                return Err(format!("piece {i} is given twice"));
            }
            cache.insert(piece, key, piece_ids);
        }
        for byte in 0..=u8::MAX {
            // (none is in the stored table: a piece of one byte is refused above)
            let piece = [byte];
            cache.insert(
                &piece,
                short_key(&piece),
                &[self.vocab.byte_ids[usize::from(byte)]],
            );
        }
        Ok(WarmCache {
            pieces: Arc::new(cache),
            stored: count,
        })
    }
}
