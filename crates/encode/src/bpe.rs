//! The two BPE merge rules on one pre-token, each exact for any vocabulary.
//!
//! * [`PairRanks`] -- GPT-2's `bpe()` (also CS336's and Hugging Face's): repeatedly take the
//!   adjacent pair whose *merge* has the lowest rank and merge all its occurrences, left to right.
//! * [`TokenRanks`] -- tiktoken's: the whole piece if it is a token; else repeatedly merge the
//!   leftmost adjacent pair whose *concatenation* is the lowest-ranked token (rank = id).
//!
//! Short pieces (almost every piece of natural text) are merged by rescanning a small vector, which
//! is quadratic in the piece but has tiny constants; longer ones go through a heap of candidate
//! merges over a linked list, O(n log n) whatever the vocabulary, so that a megabyte without
//! whitespace stays fast. Both paths give exactly the rule's result (the tests check each against
//! a brute-force version of the rule on generated vocabularies).

use crate::huge::HugeSlice;
use crate::vocab::Vocab;
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Pieces of more than this many bytes take the heap path.
pub(crate) const LONG_PIECE: usize = 48;

/// The token rule's short path goes on to this many bytes: its rescans stay cheaper than the
/// heap's pushes and pops well past [`LONG_PIECE`] (a word of 49 to 128 bytes, in scripts of
/// two or three bytes a character, took some 2x less time so; `examples/merge_pieces.rs`).
pub(crate) const TOKEN_LONG_PIECE: usize = 128;

pub(crate) const NONE: u32 = u32::MAX;

/// The lowest of `ranks[..len]` and the first position that holds it (`NONE` for the rank if
/// none is below `NONE`), where every rank from `len` on is `NONE`: the next merge of the short
/// paths, which keep their pairs' ranks in arrays of [`LONG_PIECE`] or [`TOKEN_LONG_PIECE`].
///
/// Each rank is keyed with its position below it, so that the lowest key is the leftmost of the
/// lowest rank, and the keys are taken in four chains that the CPU runs side by side. One chain
/// of compares, each waiting on the one before, took two to three cycles a rank. With four, the
/// distinct pieces of 10 MB of text in 46 languages merged 1.11x (cl100k_base) and 1.13x
/// (o200k_base) faster, and whole first passes over it ran 1.03-1.06x faster
/// (`examples/merge_pieces.rs`, medians of paired runs). Two chains and eight were slower than
/// one, as LLVM compiled them.
#[inline(always)]
fn leftmost_min<const N: usize>(ranks: &[u32; N], len: usize) -> (u32, usize) {
    debug_assert!(N.is_multiple_of(4) && len <= N);
    debug_assert!(ranks[len..].iter().all(|&rank| rank == NONE));
    let key = |i: usize| (u64::from(ranks[i]) << 32) | i as u64;
    let mut lowest = [u64::MAX; 4];
    let mut i = 0;
    while i < len {
        for (chain, lowest) in lowest.iter_mut().enumerate() {
            *lowest = (*lowest).min(key(i + chain));
        }
        i += 4;
    }
    let lowest = lowest[0].min(lowest[1]).min(lowest[2].min(lowest[3]));
    ((lowest >> 32) as u32, lowest as u32 as usize)
}

// (the scan of `leftmost_min` reads the arrays in fours)
const _: () = assert!(LONG_PIECE.is_multiple_of(4) && TOKEN_LONG_PIECE.is_multiple_of(4));

pub use crate::vocab::TokenId;

#[inline]
pub(crate) fn pair_key(left: TokenId, right: TokenId) -> u64 {
    (u64::from(left) << 32) | u64::from(right)
}

/// The token rule's joins of two single bytes: the id of the token of bytes `left, right` at
/// `(left << 8) | right` (`NONE` where there is none), in one 256 KB array. A piece's first
/// lookups, all of pairs of bytes (its tokens are its bytes until a merge), read it instead of
/// hashing. (The pair rule keeps its own, of ranks: [`PairRanks`].)
pub(crate) struct BytePairs(Box<[TokenId]>);

impl BytePairs {
    pub(crate) fn new(vocab: &Vocab) -> BytePairs {
        let mut pairs = Vec::with_capacity(1 << 16);
        for left in 0..=255u8 {
            for right in 0..=255u8 {
                pairs.push(vocab.id(&[left, right]).unwrap_or(NONE));
            }
        }
        BytePairs(pairs.into_boxed_slice())
    }

    /// No table, for an encoder of the pair rule.
    pub(crate) fn none() -> BytePairs {
        BytePairs(Box::new([]))
    }

    /// The id of the token of bytes `left, right`, `NONE` where there is none.
    #[inline]
    pub(crate) fn get(&self, left: u8, right: u8) -> TokenId {
        self.0[(usize::from(left) << 8) | usize::from(right)]
    }
}

/// The pair rule's merges by pair, `(left id, right id) -> rank`, for the lookups of a merge.
enum PairTable {
    /// Ids and ranks narrow enough to share a word: the fast table.
    Packed(PackedPairs),
    /// Ids or ranks too wide to share a word (ids in the billions, or billions of merges).
    Map(FxHashMap<u64, u32>),
}

/// Open addressing with linear probing, each slot one word: the pair's ids (`id_bits` each)
/// above its rank + 1 (`rank_bits`; a slot of 0 is empty). A lookup reads one word, most often in
/// one cache line, where a map of `u64 -> u32` reads a control group and a bucket of twice the
/// size; half full at most, a miss ends within a few slots.
struct PackedPairs {
    slots: HugeSlice<u64>,
    /// One bit per `FILTER_BITS`-bit hash (set where a pair in the table has it), read before
    /// the slots: most pairs no merge joins stop at this small array.
    filter: Box<[u64]>,
    id_bits: u32,
    rank_bits: u32,
    /// `64 - log2(slots.len())`: the hash's top bits are the home slot.
    shift: u32,
}

/// Fibonacci hashing: the product's top bits depend on every bit of the key.
const MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;

/// The filter's size: 2^19 bits, 64 KB.
const FILTER_BITS: u32 = 19;

impl PairTable {
    /// `pairs` (`(left, right, rank)`, each pair once) in a table.
    fn new(pairs: &[(TokenId, TokenId, u32)]) -> PairTable {
        match PackedPairs::new(pairs) {
            Some(packed) => PairTable::Packed(packed),
            None => PairTable::map(pairs),
        }
    }

    /// The fallback, a hash map.
    fn map(pairs: &[(TokenId, TokenId, u32)]) -> PairTable {
        let mut map = FxHashMap::with_capacity_and_hasher(pairs.len(), Default::default());
        for &(left, right, rank) in pairs {
            map.insert(pair_key(left, right), rank);
        }
        PairTable::Map(map)
    }

    #[inline(always)]
    fn rank(&self, left: TokenId, right: TokenId) -> Option<u32> {
        match self {
            PairTable::Packed(packed) => packed.rank(left, right),
            PairTable::Map(map) => map.get(&pair_key(left, right)).copied(),
        }
    }
}

impl PackedPairs {
    /// `pairs` packed, or None where two ids and a rank + 1 do not fit in a word.
    fn new(pairs: &[(TokenId, TokenId, u32)]) -> Option<PackedPairs> {
        let width = |max: u64| 64 - max.leading_zeros();
        let max_id = pairs
            .iter()
            .map(|&(left, right, _)| left.max(right))
            .max()
            .unwrap_or(0);
        let max_rank = pairs.iter().map(|&(_, _, rank)| rank).max().unwrap_or(0);
        let id_bits = width(u64::from(max_id)).max(1);
        let rank_bits = width(u64::from(max_rank) + 1);
        if 2 * id_bits + rank_bits > 64 {
            return None;
        }
        let size = (2 * pairs.len()).next_power_of_two().max(2);
        let mut packed = PackedPairs {
            slots: HugeSlice::filled(size, 0u64),
            filter: vec![0u64; 1 << (FILTER_BITS - 6)].into_boxed_slice(),
            id_bits,
            rank_bits,
            shift: 64 - size.trailing_zeros(),
        };
        let mask = size - 1;
        for &(left, right, rank) in pairs {
            let (key, hash, bit) = packed.key(left, right);
            packed.filter[(bit >> 6) as usize] |= 1 << (bit & 63);
            let mut at = (hash >> packed.shift) as usize;
            while packed.slots[at] != 0 {
                at = (at + 1) & mask;
            }
            packed.slots[at] = (key << rank_bits) | (u64::from(rank) + 1);
        }
        Some(packed)
    }

    /// The pair's key (both ids, `id_bits` each), its hash, and its bit in the filter.
    #[inline(always)]
    fn key(&self, left: TokenId, right: TokenId) -> (u64, u64, u32) {
        let key = (u64::from(left) << self.id_bits) | u64::from(right);
        let hash = key.wrapping_mul(MULTIPLIER);
        (key, hash, hash as u32 >> (32 - FILTER_BITS))
    }

    #[inline(always)]
    fn rank(&self, left: TokenId, right: TokenId) -> Option<u32> {
        if (left | right) >> self.id_bits != 0 {
            return None; // an id no merge names (id_bits < 32: the table packs two)
        }
        let (key, hash, bit) = self.key(left, right);
        if self.filter[(bit >> 6) as usize] & (1 << (bit & 63)) == 0 {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut at = (hash >> self.shift) as usize;
        loop {
            let slot = self.slots[at];
            if slot == 0 {
                return None;
            }
            if slot >> self.rank_bits == key {
                // (the rank + 1 fits `rank_bits`, so the rank fits a u32)
                return Some(((slot & ((1 << self.rank_bits) - 1)) - 1) as u32);
            }
            at = (at + 1) & mask;
        }
    }
}

/// The merges of the pair rule: `(left id, right id) -> (rank, merged id)`.
pub(crate) struct PairRanks {
    table: PairTable,
    /// `merged[rank]`: the id the merge of that rank makes.
    merged: Box<[TokenId]>,
    /// `Some(offset)` where every merge makes the id `rank + offset` (wrapping), as in models
    /// whose ids follow their merges (GPT-2's, bpestore's): then no array is read for it.
    offset: Option<u32>,
    /// The rank of each pair of single bytes' ids at `(left byte << 8) | right byte`, `NONE`
    /// where no merge joins them: a piece's first lookups (all of them pairs of bytes) read
    /// this 256 KB array, whose common pairs (letters) sit together, instead of the table.
    bytes: Box<[u32]>,
    /// Whether the merges are in the order BPE training makes them: each merge's two tokens are
    /// bytes or made by earlier merges, and no token is made twice. Then a merge only ever forms
    /// pairs of higher rank, so merging one pair at a time, the lowest-ranked and leftmost first,
    /// is GPT-2's rule (all occurrences of a rank at once); dropout relies on it (dropout.rs).
    pub(crate) well_ordered: bool,
}

impl PairRanks {
    /// `merges` as `(left, right, merged)` ids in rank order; where a pair is listed twice, its
    /// first rank counts (as in GPT-2's `dict(zip(merges, range(len(merges))))` read backwards,
    /// and bpestore's Python code). `byte_ids`: the id of each single byte.
    pub(crate) fn new(
        merges: impl ExactSizeIterator<Item = (TokenId, TokenId, TokenId)>,
        byte_ids: &[TokenId; 256],
    ) -> PairRanks {
        let merges: Vec<(TokenId, TokenId, TokenId)> = merges.collect();
        let mut first: FxHashMap<u64, u32> =
            FxHashMap::with_capacity_and_hasher(merges.len(), Default::default());
        let mut pairs = Vec::with_capacity(merges.len());
        for (rank, &(left, right, _)) in merges.iter().enumerate() {
            if let std::collections::hash_map::Entry::Vacant(entry) =
                first.entry(pair_key(left, right))
            {
                entry.insert(rank as u32);
                pairs.push((left, right, rank as u32));
            }
        }
        let mut bytes = vec![NONE; 1 << 16].into_boxed_slice();
        for left in 0..=255u8 {
            for right in 0..=255u8 {
                let key = pair_key(byte_ids[usize::from(left)], byte_ids[usize::from(right)]);
                if let Some(&rank) = first.get(&key) {
                    bytes[(usize::from(left) << 8) | usize::from(right)] = rank;
                }
            }
        }
        // The rank of the merge that makes each token (the first, if several do).
        let mut made_at: FxHashMap<TokenId, usize> =
            FxHashMap::with_capacity_and_hasher(merges.len(), Default::default());
        let mut made_twice = false;
        for (rank, &(_, _, merged)) in merges.iter().enumerate() {
            made_twice |= made_at.insert(merged, rank).is_some();
        }
        let well_ordered = !made_twice
            && merges.iter().enumerate().all(|(rank, &(left, right, _))| {
                [left, right]
                    .iter()
                    .all(|part| made_at.get(part).is_none_or(|&made| made < rank))
            });
        let merged: Box<[TokenId]> = merges.iter().map(|&(_, _, merged)| merged).collect();
        let offset = merged.first().copied();
        let offset = offset.filter(|&offset| {
            (0..merged.len() as u32).all(|rank| merged[rank as usize] == rank.wrapping_add(offset))
        });
        PairRanks {
            table: PairTable::new(&pairs),
            merged,
            offset,
            bytes,
            well_ordered,
        }
    }

    /// The rank of the merge of `left, right` and the id it makes.
    #[inline]
    pub(crate) fn get(&self, left: TokenId, right: TokenId) -> Option<(u32, TokenId)> {
        let rank = self.table.rank(left, right)?;
        Some((rank, self.merged(rank)))
    }

    /// The id the merge of rank `rank` makes.
    #[inline(always)]
    fn merged(&self, rank: u32) -> TokenId {
        match self.offset {
            Some(offset) => rank.wrapping_add(offset),
            None => self.merged[rank as usize],
        }
    }

    /// The rank of the merge of `left, right`, `NONE` where there is none.
    #[inline(always)]
    fn rank(&self, left: TokenId, right: TokenId) -> u32 {
        self.table.rank(left, right).unwrap_or(NONE)
    }

    /// Merges `tokens` (the byte ids of `piece`) in place by GPT-2's rule.
    pub(crate) fn merge(&self, piece: &[u8], tokens: &mut Vec<TokenId>) {
        if tokens.len() <= LONG_PIECE {
            self.merge_short(piece, tokens);
        } else {
            self.merge_long(tokens);
        }
    }

    /// [`PairRanks::merge`] on small arrays: one merge at a time, the tokens staying where their
    /// first byte is, linked to their live neighbours (no shifting), and only the two pairs
    /// beside a merge looked up again. All occurrences of a rank's pair are merged, left to
    /// right, before any pair they form is considered (a merge never forms a pair of its own
    /// rank: a rank names one pair, and the merged token is longer than either of its parts).
    pub(crate) fn merge_short(&self, piece: &[u8], tokens: &mut Vec<TokenId>) {
        let n = tokens.len();
        debug_assert_eq!(piece.len(), n, "the tokens are the piece's bytes");
        if n > LONG_PIECE {
            return self.merge_long(tokens);
        }
        if n < 2 {
            return;
        }
        const _: () = assert!(LONG_PIECE < u8::MAX as usize);
        const END: u8 = u8::MAX;
        // next[i], prev[i]: the live tokens around the live token at i (END: none). ranks[i]:
        // the rank of the pair (i, next[i]); NONE where no merge joins it or i is not live.
        let mut next = [END; LONG_PIECE];
        let mut prev = [END; LONG_PIECE];
        let mut ranks = [NONE; LONG_PIECE];
        for i in 0..n - 1 {
            next[i] = (i + 1) as u8;
            prev[i + 1] = i as u8;
            ranks[i] = self.bytes[(usize::from(piece[i]) << 8) | usize::from(piece[i + 1])];
        }
        loop {
            // The lowest rank present, at its leftmost pair.
            let (best, mut at) = leftmost_min(&ranks, n - 1);
            if best == NONE {
                break;
            }
            let merged = self.merged(best);
            loop {
                // The token at `at` becomes the merge; its right neighbour goes.
                let gone = usize::from(next[at]);
                tokens[at] = merged;
                ranks[gone] = NONE;
                let after = next[gone];
                next[at] = after;
                ranks[at] = NONE;
                if after != END {
                    prev[usize::from(after)] = at as u8;
                    ranks[at] = self.rank(merged, tokens[usize::from(after)]);
                }
                let before = prev[at];
                if before != END {
                    let before = usize::from(before);
                    ranks[before] = self.rank(tokens[before], merged);
                }
                // The next occurrence, right of this merge (ranks[at] is a new pair's, so
                // never `best`; those beyond are pairs this merge left alone).
                match ranks[at + 1..n - 1].iter().position(|&rank| rank == best) {
                    Some(offset) => at += 1 + offset,
                    None => break,
                }
            }
        }
        // The live tokens, in order (position 0 is always live: a merge removes the right token).
        let (mut write, mut read) = (0, 0);
        while read != usize::from(END) {
            tokens[write] = tokens[read];
            write += 1;
            read = usize::from(next[read]);
        }
        tokens.truncate(write);
    }

    /// Merges `tokens` in place as Hugging Face's `Word::merge_all` does: the lowest-ranked pair
    /// (leftmost on a tie) one occurrence at a time, the pairs it forms candidates at once. The
    /// same as GPT-2's rounds ([`PairRanks::merge_long`]) when no merge forms a pair ranked
    /// below its own; SentencePiece's merges, ranked by score, do (`▁▁ ▁▁▁▁▁▁▁▁` before
    /// `▁▁▁▁ ▁▁▁▁`, which makes `▁▁▁▁▁▁▁▁`).
    pub(crate) fn merge_one_at_a_time(&self, tokens: &mut Vec<TokenId>) {
        let list_rank = |left, right| self.table.rank(left, right);
        let mut list = Linked::new(tokens);
        let mut heap = pair_heap(tokens, list_rank);
        while let Some(Reverse(entry)) = heap.pop() {
            let rank = (entry >> 32) as u32;
            let i = entry as u32;
            let Some(j) = list.live_next(i) else { continue };
            match self.get(list.tokens[i as usize], list.tokens[j as usize]) {
                Some((current, merged)) if current == rank => {
                    list.merge(i, j, merged);
                    list.push_pairs_around(i, &mut heap, list_rank);
                }
                _ => {} // stale: a token of this pair was merged away meanwhile
            }
        }
        list.collect(tokens);
    }

    pub(crate) fn merge_long(&self, tokens: &mut Vec<TokenId>) {
        let list_rank = |left, right| self.table.rank(left, right);
        let mut list = Linked::new(tokens);
        let mut heap = pair_heap(tokens, list_rank);
        let mut merged_at: Vec<u32> = Vec::new();
        while let Some(&Reverse(top)) = heap.peek() {
            let rank = (top >> 32) as u32;
            // One round: every occurrence of this rank's pair, left to right (the heap yields
            // equal ranks by position), before any pair they form is considered -- a pair formed
            // by the first occurrence may rank lower, and GPT-2 still merges the others first.
            merged_at.clear();
            while let Some(&Reverse(entry)) = heap.peek() {
                if (entry >> 32) as u32 != rank {
                    break;
                }
                heap.pop();
                let i = entry as u32;
                let Some(j) = list.live_next(i) else { continue };
                match self.get(list.tokens[i as usize], list.tokens[j as usize]) {
                    Some((current, merged)) if current == rank => {
                        list.merge(i, j, merged);
                        merged_at.push(i);
                    }
                    _ => {} // stale: a token of this pair was merged away meanwhile
                }
            }
            // A merged token stays alive through its round (no pair of this rank contains it).
            for &i in &merged_at {
                list.push_pairs_around(i, &mut heap, list_rank);
            }
        }
        list.collect(tokens);
    }
}

/// The token rule over a vocabulary: whole-token lookup, and the rank of a pair is the id of its
/// concatenation, looked up by bytes (`bytes`: those of pairs of single bytes, in an array).
pub(crate) struct TokenRanks<'v> {
    pub(crate) vocab: &'v Vocab,
    pub(crate) bytes: &'v BytePairs,
}

impl TokenRanks<'_> {
    #[inline]
    pub(crate) fn rank(&self, left: TokenId, right: TokenId, scratch: &mut Vec<u8>) -> Option<u32> {
        scratch.clear();
        scratch.extend_from_slice(self.vocab.bytes(left));
        scratch.extend_from_slice(self.vocab.bytes(right));
        self.vocab.id(scratch)
    }

    /// Merges `tokens` (the piece's byte ids; `piece` its bytes) in place by tiktoken's rule.
    pub(crate) fn merge(&self, piece: &[u8], tokens: &mut Vec<TokenId>) {
        if tokens.len() > 1 {
            if let Some(whole) = self.vocab.id(piece) {
                tokens.clear();
                tokens.push(whole);
                return;
            }
        }
        self.merge_short(piece, tokens);
    }

    /// [`TokenRanks::merge`] (after the whole-piece lookup) by rescanning small arrays, up to
    /// [`TOKEN_LONG_PIECE`] bytes (arrays of [`LONG_PIECE`] for most pieces, whose setting up
    /// costs less), the heap beyond.
    pub(crate) fn merge_short(&self, piece: &[u8], tokens: &mut Vec<TokenId>) {
        let n = tokens.len();
        if n <= LONG_PIECE {
            self.merge_in::<LONG_PIECE>(piece, tokens);
        } else if n <= TOKEN_LONG_PIECE {
            self.merge_in::<TOKEN_LONG_PIECE>(piece, tokens);
        } else {
            self.merge_long(tokens);
        }
    }

    /// [`TokenRanks::merge_short`] with arrays of `N` (at least the piece's length, below 255).
    #[inline(always)]
    fn merge_in<const N: usize>(&self, piece: &[u8], tokens: &mut Vec<TokenId>) {
        let n = tokens.len();
        debug_assert_eq!(piece.len(), n, "the tokens are the piece's bytes");
        debug_assert!(n <= N);
        if n < 2 {
            return;
        }
        // As in [`PairRanks::merge_short`], each token stays where its first byte is, linked to
        // its live neighbours: token i is piece[i..next[i]], so the pair at i is a slice of the
        // piece, looked up in place (no token's bytes are fetched or copied), and a merge moves
        // nothing (shifting the arrays instead was three calls to `memmove` per merge, a tenth
        // of a cold pass over text in many languages). next[i]: the next live token (n: none);
        // prev[i]: the previous one (END: none); ranks[i]: the rank of the pair at i, NONE where
        // it makes no token or i is not live.
        const _: () = assert!(TOKEN_LONG_PIECE < u8::MAX as usize);
        const END: u8 = u8::MAX;
        let mut next = [0u8; N];
        let mut prev = [END; N];
        let mut ranks = [NONE; N];
        // The piece again, with room for a word of 16 bytes from any position: a join's key is
        // that word masked to its length ([`Vocab::id_in_window`]). The distinct pieces of 10 MB
        // in 46 languages merged 1.02-1.05x faster so (`examples/merge_pieces.rs`), whole first
        // passes about 1.01x.
        let mut padded = [0u8; TOKEN_LONG_PIECE + 16];
        padded[..n].copy_from_slice(piece);
        let window =
            |at: usize| u128::from_le_bytes(padded[at..at + 16].try_into().expect("16 bytes"));
        for i in 0..n - 1 {
            next[i] = (i + 1) as u8;
            prev[i + 1] = i as u8;
            ranks[i] = self.bytes.get(piece[i], piece[i + 1]);
        }
        next[n - 1] = n as u8;
        loop {
            // The leftmost pair of lowest rank (positions keep the tokens' order).
            let (best, at) = leftmost_min(&ranks, n - 1);
            if best == NONE {
                break;
            }
            // The token at `at` becomes the pair's token; its right neighbour goes.
            let gone = usize::from(next[at]);
            tokens[at] = best;
            ranks[gone] = NONE;
            let after = usize::from(next[gone]);
            next[at] = after as u8;
            ranks[at] = NONE;
            if after < n {
                prev[after] = at as u8;
                let end = usize::from(next[after]);
                ranks[at] = self
                    .vocab
                    .id_in_window(&piece[at..end], window(at))
                    .unwrap_or(NONE);
            }
            let before = prev[at];
            if before != END {
                let before = usize::from(before);
                ranks[before] = self
                    .vocab
                    .id_in_window(&piece[before..after], window(before))
                    .unwrap_or(NONE);
            }
        }
        // The live tokens, in order (position 0 is always live: a merge removes the right token).
        let (mut write, mut read) = (0, 0);
        while read < n {
            tokens[write] = tokens[read];
            write += 1;
            read = usize::from(next[read]);
        }
        tokens.truncate(write);
    }

    pub(crate) fn merge_long(&self, tokens: &mut Vec<TokenId>) {
        let mut scratch = Vec::with_capacity(64);
        let mut list = Linked::new(tokens);
        let mut heap = pair_heap(tokens, |left, right| self.rank(left, right, &mut scratch));
        // One merge at a time, always the lowest (rank, position): positions keep the order of
        // the tokens, so that is the leftmost pair of lowest rank.
        while let Some(Reverse(entry)) = heap.pop() {
            let (rank, i) = ((entry >> 32) as u32, entry as u32);
            let Some(j) = list.live_next(i) else { continue };
            // A rank is a token: the pair at i is current if it still makes that token.
            if self.rank(
                list.tokens[i as usize],
                list.tokens[j as usize],
                &mut scratch,
            ) != Some(rank)
            {
                continue;
            }
            list.merge(i, j, rank);
            list.push_pairs_around(i, &mut heap, |left, right| {
                self.rank(left, right, &mut scratch)
            });
        }
        list.collect(tokens);
    }
}

/// The candidate merges of a long piece: each adjacent pair of `tokens` that `rank` ranks, as
/// `(rank, position)` in a min-heap (the position breaks ties: leftmost first).
pub(crate) fn pair_heap(
    tokens: &[TokenId],
    mut rank: impl FnMut(TokenId, TokenId) -> Option<u32>,
) -> BinaryHeap<Reverse<u64>> {
    let mut heap = BinaryHeap::with_capacity(tokens.len());
    for (i, pair) in tokens.windows(2).enumerate() {
        if let Some(r) = rank(pair[0], pair[1]) {
            heap.push(Reverse(pair_key(r, i as u32)));
        }
    }
    heap
}

/// Tokens at their first byte's position, linked to their live neighbours.
pub(crate) struct Linked {
    pub(crate) tokens: Vec<TokenId>,
    pub(crate) next: Vec<u32>,
    pub(crate) prev: Vec<u32>,
    alive: Vec<bool>,
}

impl Linked {
    pub(crate) fn new(tokens: &[TokenId]) -> Linked {
        let n = tokens.len() as u32;
        Linked {
            tokens: tokens.to_vec(),
            next: (1..=n).map(|i| if i == n { NONE } else { i }).collect(),
            prev: (0..n).map(|i| if i == 0 { NONE } else { i - 1 }).collect(),
            alive: vec![true; n as usize],
        }
    }

    /// The token after the live token at `i`, if `i` is live and has one.
    #[inline]
    pub(crate) fn live_next(&self, i: u32) -> Option<u32> {
        if !self.alive[i as usize] {
            return None;
        }
        let j = self.next[i as usize];
        (j != NONE).then_some(j)
    }

    /// Pushes onto `heap` the pairs the live token at `i` forms with its neighbours, those that
    /// `rank` ranks (after a merge made it: [`pair_heap`]'s candidates).
    #[inline]
    pub(crate) fn push_pairs_around(
        &self,
        i: u32,
        heap: &mut BinaryHeap<Reverse<u64>>,
        mut rank: impl FnMut(TokenId, TokenId) -> Option<u32>,
    ) {
        let before = self.prev[i as usize];
        if before != NONE {
            if let Some(r) = rank(self.tokens[before as usize], self.tokens[i as usize]) {
                heap.push(Reverse(pair_key(r, before)));
            }
        }
        let after = self.next[i as usize];
        if after != NONE {
            if let Some(r) = rank(self.tokens[i as usize], self.tokens[after as usize]) {
                heap.push(Reverse(pair_key(r, i)));
            }
        }
    }

    /// Token `i` becomes `merged`; its neighbour `j` goes.
    #[inline]
    pub(crate) fn merge(&mut self, i: u32, j: u32, merged: TokenId) {
        self.tokens[i as usize] = merged;
        self.alive[j as usize] = false;
        let after = self.next[j as usize];
        self.next[i as usize] = after;
        if after != NONE {
            self.prev[after as usize] = i;
        }
    }

    pub(crate) fn collect(&self, out: &mut Vec<TokenId>) {
        out.clear();
        if self.tokens.is_empty() {
            return;
        }
        let mut i = 0;
        while i != NONE {
            out.push(self.tokens[i as usize]);
            i = self.next[i as usize];
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    //! Both paths of both rules against a brute-force transcription of each rule, on generated
    //! vocabularies: merges listed in any order (parts created after the merge that uses them,
    //! pairs listed twice), tokens no merge reaches, single bytes with high ids.
    use super::*;
    use std::collections::HashMap;

    /// xorshift64*: the tests need no dependency for randomness.
    pub(crate) struct Rng(pub(crate) u64);
    impl Rng {
        pub(crate) fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        pub(crate) fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    pub(crate) type Bytes = Vec<u8>;
    pub(crate) type Generated = (Vec<(u32, Bytes)>, Vec<(Bytes, Bytes)>);

    /// GPT-2's `bpe()` as written in tests/reference.py.
    pub(crate) fn brute_pair(piece: &[u8], rank: &HashMap<(Bytes, Bytes), usize>) -> Vec<Bytes> {
        let mut tokens: Vec<Bytes> = piece.iter().map(|&b| vec![b]).collect();
        loop {
            let best = tokens
                .windows(2)
                .filter_map(|w| {
                    rank.get(&(w[0].clone(), w[1].clone()))
                        .map(|&r| (r, w[0].clone(), w[1].clone()))
                })
                .min();
            let Some((_, left, right)) = best else {
                return tokens;
            };
            let mut merged = Vec::new();
            let mut i = 0;
            while i < tokens.len() {
                if i + 1 < tokens.len() && tokens[i] == left && tokens[i + 1] == right {
                    merged.push([left.clone(), right.clone()].concat());
                    i += 2;
                } else {
                    merged.push(tokens[i].clone());
                    i += 1;
                }
            }
            tokens = merged;
        }
    }

    /// tiktoken's rule, naively.
    pub(crate) fn brute_token(piece: &[u8], ids: &HashMap<Bytes, u32>) -> Vec<Bytes> {
        if ids.contains_key(piece) {
            return vec![piece.to_vec()];
        }
        let mut tokens: Vec<Bytes> = piece.iter().map(|&b| vec![b]).collect();
        loop {
            let mut best: Option<(u32, usize)> = None;
            for i in 0..tokens.len().saturating_sub(1) {
                if let Some(&r) = ids.get(&[tokens[i].clone(), tokens[i + 1].clone()].concat()) {
                    if !matches!(best, Some((b, _)) if b <= r) {
                        best = Some((r, i));
                    }
                }
            }
            let Some((_, i)) = best else { return tokens };
            let right = tokens.remove(i + 1);
            tokens[i].extend(right);
        }
    }

    /// A vocabulary over the bytes `alphabet` and merges: `n_merges` merges of random tokens
    /// (listed in random order, some twice), and `n_extra` random tokens that no merge makes.
    pub(crate) fn generate(
        rng: &mut Rng,
        alphabet: &[u8],
        n_merges: usize,
        n_extra: usize,
    ) -> Generated {
        let mut tokens: Vec<Bytes> = (0..=255u8).map(|b| vec![b]).collect();
        let mut known: std::collections::HashSet<Bytes> = tokens.iter().cloned().collect();
        let mut pool: Vec<Bytes> = alphabet.iter().map(|&b| vec![b]).collect();
        let mut merges = Vec::new();
        for _ in 0..n_merges {
            let left = pool[rng.below(pool.len())].clone();
            let right = pool[rng.below(pool.len())].clone();
            let joined = [left.clone(), right.clone()].concat();
            if joined.len() > 12 {
                continue;
            }
            if merges.contains(&(left.clone(), right.clone())) {
                continue; // each merge once, as a model must have them
            }
            if known.insert(joined.clone()) {
                tokens.push(joined.clone());
                pool.push(joined);
            }
            merges.push((left, right));
        }
        for _ in 0..n_extra {
            let len = 2 + rng.below(5);
            let token: Bytes = (0..len)
                .map(|_| alphabet[rng.below(alphabet.len())])
                .collect();
            if known.insert(token.clone()) {
                tokens.push(token);
            }
        }
        // Shuffle the merges (parts may now be made after their use) and the ids.
        for i in (1..merges.len()).rev() {
            merges.swap(i, rng.below(i + 1));
        }
        let mut ids: Vec<u32> = (0..tokens.len() as u32).collect();
        for i in (1..ids.len()).rev() {
            ids.swap(i, rng.below(i + 1));
        }
        (ids.into_iter().zip(tokens).collect(), merges)
    }

    pub(crate) fn vocab_of(tokens: &[(u32, Bytes)]) -> Vocab {
        let slices: Vec<(u32, &[u8])> = tokens.iter().map(|(id, t)| (*id, t.as_slice())).collect();
        Vocab::new(&slices, &[], &[]).expect("a valid generated vocabulary")
    }

    pub(crate) fn pair_ranks(vocab: &Vocab, merges: &[(Bytes, Bytes)]) -> PairRanks {
        let ids: Vec<_> = merges
            .iter()
            .map(|(l, r)| {
                (
                    vocab.id(l).unwrap(),
                    vocab.id(r).unwrap(),
                    vocab.id(&[l.clone(), r.clone()].concat()).unwrap(),
                )
            })
            .collect();
        PairRanks::new(ids.into_iter(), &vocab.byte_ids)
    }

    pub(crate) fn piece(rng: &mut Rng, alphabet: &[u8], max_len: usize) -> Bytes {
        let len = rng.below(max_len + 1);
        if rng.below(4) == 0 {
            // runs of one byte or two: overlapping pairs, the case "all occurrences" is about
            let unit: Bytes = (0..1 + rng.below(2))
                .map(|_| alphabet[rng.below(alphabet.len())])
                .collect();
            return unit.iter().copied().cycle().take(len).collect();
        }
        (0..len)
            .map(|_| alphabet[rng.below(alphabet.len())])
            .collect()
    }

    fn as_bytes(vocab: &Vocab, ids: &[TokenId]) -> Vec<Bytes> {
        ids.iter().map(|&id| vocab.bytes(id).to_vec()).collect()
    }

    #[test]
    fn both_rules_and_both_paths_match_brute_force() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let alphabets: [&[u8]; 3] = [b"ab", b"abc", b"abcd\xe4"];
        let mut differ = 0;
        let rounds = if cfg!(debug_assertions) { 15 } else { 400 };
        for round in 0..rounds {
            let alphabet = alphabets[round % alphabets.len()];
            let (n_merges, n_extra) = (5 + rng.below(40), rng.below(15));
            let (tokens, merges) = generate(&mut rng, alphabet, n_merges, n_extra);
            let vocab = vocab_of(&tokens);
            let pairs = pair_ranks(&vocab, &merges);
            let bytes = BytePairs::new(&vocab);
            let token_rule = TokenRanks {
                vocab: &vocab,
                bytes: &bytes,
            };
            let ids: HashMap<Bytes, u32> = tokens.iter().map(|(id, t)| (t.clone(), *id)).collect();
            let mut rank: HashMap<(Bytes, Bytes), usize> = HashMap::new();
            for (r, pair) in merges.iter().enumerate() {
                rank.entry(pair.clone()).or_insert(r); // a pair listed twice: its first rank
            }
            for _ in 0..30 {
                let piece = piece(&mut rng, alphabet, 120);
                let start: Vec<TokenId> =
                    piece.iter().map(|&b| vocab.byte_ids[b as usize]).collect();
                let expected_pair = brute_pair(&piece, &rank);
                let expected_token = brute_token(&piece, &ids);
                differ += usize::from(expected_pair != expected_token);

                let mut tokens = start.clone();
                pairs.merge_short(&piece, &mut tokens);
                assert_eq!(
                    as_bytes(&vocab, &tokens),
                    expected_pair,
                    "pair rule, short path, {piece:?}"
                );
                let mut tokens = start.clone();
                pairs.merge_long(&mut tokens);
                assert_eq!(
                    as_bytes(&vocab, &tokens),
                    expected_pair,
                    "pair rule, heap path, {piece:?}"
                );
                let mut tokens = start.clone();
                pairs.merge(&piece, &mut tokens);
                assert_eq!(
                    as_bytes(&vocab, &tokens),
                    expected_pair,
                    "pair rule, {piece:?}"
                );

                let mut tokens = start.clone();
                token_rule.merge(&piece, &mut tokens);
                assert_eq!(
                    as_bytes(&vocab, &tokens),
                    expected_token,
                    "token rule, {piece:?}"
                );
                if piece.len() > 1 && ids.contains_key(&piece) {
                    continue; // the whole-piece lookup answered; the paths below skip it
                }
                let mut tokens = start.clone();
                token_rule.merge_short(&piece, &mut tokens);
                assert_eq!(
                    as_bytes(&vocab, &tokens),
                    expected_token,
                    "token rule, short path, {piece:?}"
                );
                let mut tokens = start.clone();
                token_rule.merge_long(&mut tokens);
                assert_eq!(
                    as_bytes(&vocab, &tokens),
                    expected_token,
                    "token rule, heap path, {piece:?}"
                );
            }
        }
        // The generated vocabularies must exercise the cases where the rules disagree.
        assert!(
            differ > rounds,
            "only {differ} pieces where the rules differ"
        );
    }

    /// `generate`'s vocabulary renumbered as training numbers it: the bytes 0..256, then each
    /// merge's result in rank order (a merge of a token made already dropped), then the tokens
    /// no merge makes; so each merge makes the id `256 + rank` (the pair rule's fast path).
    fn in_training_order(generated: Generated) -> Generated {
        let (tokens, merges) = generated;
        let mut ids: HashMap<Bytes, u32> = (0..=255u8).map(|b| (vec![b], u32::from(b))).collect();
        let mut kept = Vec::new();
        for (left, right) in merges {
            let joined = [left.clone(), right.clone()].concat();
            if !ids.contains_key(&joined) {
                ids.insert(joined, ids.len() as u32);
                kept.push((left, right));
            }
        }
        for (_, token) in tokens {
            let next = ids.len() as u32;
            ids.entry(token).or_insert(next);
        }
        (ids.into_iter().map(|(t, id)| (id, t)).collect(), kept)
    }

    #[test]
    fn the_pair_rule_in_training_order_matches_brute_force() {
        // Ids that follow the merges (GPT-2's, bpestore's): the merged id is computed, not read;
        // pieces of every length around the short path's limit.
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        let alphabets: [&[u8]; 3] = [b"ab", b"abc", b"abcd\xe4"];
        let rounds = if cfg!(debug_assertions) { 10 } else { 200 };
        for round in 0..rounds {
            let alphabet = alphabets[round % alphabets.len()];
            let (n_merges, n_extra) = (5 + rng.below(40), rng.below(15));
            let (tokens, merges) =
                in_training_order(generate(&mut rng, alphabet, n_merges, n_extra));
            let vocab = vocab_of(&tokens);
            let pairs = pair_ranks(&vocab, &merges);
            assert_eq!(pairs.offset, Some(256), "merged ids follow the ranks");
            let mut rank: HashMap<(Bytes, Bytes), usize> = HashMap::new();
            for (r, pair) in merges.iter().enumerate() {
                rank.entry(pair.clone()).or_insert(r);
            }
            for len in (0..8).chain(LONG_PIECE - 3..LONG_PIECE + 4) {
                let mut piece = piece(&mut rng, alphabet, len);
                piece.resize(len, alphabet[0]); // exactly `len` bytes
                let start: Vec<TokenId> =
                    piece.iter().map(|&b| vocab.byte_ids[b as usize]).collect();
                let expected = brute_pair(&piece, &rank);
                for path in ["short", "heap", "either"] {
                    let mut tokens = start.clone();
                    match path {
                        "short" => pairs.merge_short(&piece, &mut tokens),
                        "heap" => pairs.merge_long(&mut tokens),
                        _ => pairs.merge(&piece, &mut tokens),
                    }
                    assert_eq!(as_bytes(&vocab, &tokens), expected, "{path}, {piece:?}");
                }
            }
        }
    }

    #[test]
    fn the_token_rule_matches_brute_force_around_each_path_limit() {
        // Pieces of every length around the limits of the two short paths' arrays and of the
        // heap's, on generated vocabularies, through `merge` and each path alone.
        let mut rng = Rng(0x6A09_E667_F3BC_C908);
        let alphabets: [&[u8]; 3] = [b"ab", b"abc", b"abcd\xe4"];
        let rounds = if cfg!(debug_assertions) { 6 } else { 60 };
        let lengths: Vec<usize> = (0..6)
            .chain(LONG_PIECE - 2..LONG_PIECE + 3)
            .chain(TOKEN_LONG_PIECE - 2..TOKEN_LONG_PIECE + 3)
            .collect();
        for round in 0..rounds {
            let alphabet = alphabets[round % alphabets.len()];
            let (n_merges, n_extra) = (5 + rng.below(40), rng.below(15));
            let (tokens, _) = generate(&mut rng, alphabet, n_merges, n_extra);
            let vocab = vocab_of(&tokens);
            let bytes = BytePairs::new(&vocab);
            let rule = TokenRanks {
                vocab: &vocab,
                bytes: &bytes,
            };
            let ids: HashMap<Bytes, u32> = tokens.iter().map(|(id, t)| (t.clone(), *id)).collect();
            for &len in &lengths {
                let mut piece = piece(&mut rng, alphabet, len);
                piece.resize(len, alphabet[0]); // exactly `len` bytes
                let start: Vec<TokenId> =
                    piece.iter().map(|&b| vocab.byte_ids[b as usize]).collect();
                let expected = brute_token(&piece, &ids);
                let mut tokens = start.clone();
                rule.merge(&piece, &mut tokens);
                assert_eq!(as_bytes(&vocab, &tokens), expected, "merge, {piece:?}");
                if piece.len() > 1 && ids.contains_key(&piece) {
                    continue; // (the whole-piece lookup answered; the paths below skip it)
                }
                for path in ["short", "heap"] {
                    let mut tokens = start.clone();
                    match path {
                        "short" => rule.merge_short(&piece, &mut tokens),
                        _ => rule.merge_long(&mut tokens),
                    }
                    assert_eq!(as_bytes(&vocab, &tokens), expected, "{path}, {piece:?}");
                }
            }
        }
    }

    #[test]
    fn the_pair_rule_is_not_the_token_rule() {
        // Trained in this order: b+c, a+b, ab+c. "abc" is a token, so the token rule takes the
        // piece whole; the pair rule joins b+c first and then has no merge for a+bc.
        let mut tokens: Vec<(u32, Bytes)> = (0..=255u8).map(|b| (u32::from(b), vec![b])).collect();
        for (id, token) in [
            (256, b"bc".to_vec()),
            (257, b"ab".to_vec()),
            (258, b"abc".to_vec()),
        ] {
            tokens.push((id, token));
        }
        let merges = vec![
            (b"b".to_vec(), b"c".to_vec()),
            (b"a".to_vec(), b"b".to_vec()),
            (b"ab".to_vec(), b"c".to_vec()),
        ];
        let vocab = vocab_of(&tokens);
        let pairs = pair_ranks(&vocab, &merges);
        assert!(pairs.well_ordered);
        let bytes = BytePairs::new(&vocab);
        let token_rule = TokenRanks {
            vocab: &vocab,
            bytes: &bytes,
        };
        for n in [1, LONG_PIECE / 3, LONG_PIECE / 3 + 1, 40] {
            // "abc" repeated: 3n bytes, through the short path and past it
            let piece = b"abc".repeat(n);
            let start: Vec<TokenId> = piece.iter().map(|&b| u32::from(b)).collect();
            let mut by_pair = start.clone();
            pairs.merge(&piece, &mut by_pair);
            assert_eq!(by_pair, [97, 256].repeat(n), "pair rule, {n}");
            let mut by_pair_heap = start.clone();
            pairs.merge_long(&mut by_pair_heap);
            assert_eq!(by_pair_heap, by_pair, "pair rule, heap path, {n}");
            let mut by_token = start.clone();
            token_rule.merge(&piece, &mut by_token);
            if n == 1 {
                assert_eq!(by_token, [258]);
            } else {
                assert_eq!(by_token, [258].repeat(n), "token rule, {n}");
            }
        }
    }

    #[test]
    fn the_packed_table_answers_as_a_map() {
        // Ids and ranks of every width: the packed table where they fit in a word, else the
        // map; lookups of pairs in the table, of absent pairs, and of ids wider than any pair's.
        let mut rng = Rng(0x1234_5678_9ABC_DEF1);
        for (id_range, n) in [
            (300u64, 200usize),
            (70_000, 5_000),
            (1 << 31, 3_000),
            (1 << 32, 100),
        ] {
            let mut seen = std::collections::HashSet::new();
            let mut pairs = Vec::new();
            for rank in 0..n as u32 {
                let left = (rng.next() % id_range) as TokenId;
                let right = (rng.next() % id_range) as TokenId;
                if left != NONE && right != NONE && seen.insert((left, right)) {
                    pairs.push((left, right, rank * 3)); // ranks with gaps (pairs listed twice)
                }
            }
            let table = PairTable::new(&pairs);
            let map = PairTable::map(&pairs);
            assert_eq!(
                matches!(table, PairTable::Packed(_)),
                id_range < 1 << 31,
                "{id_range}"
            );
            for &(left, right, rank) in &pairs {
                assert_eq!(table.rank(left, right), Some(rank));
                assert_eq!(table.rank(right, left), map.rank(right, left));
            }
            for _ in 0..10_000 {
                let left = (rng.next() % (2 * id_range)).min(u64::from(NONE - 1)) as TokenId;
                let right = (rng.next() % (2 * id_range)).min(u64::from(NONE - 1)) as TokenId;
                assert_eq!(table.rank(left, right), map.rank(left, right));
            }
        }
    }

    #[test]
    fn merges_in_training_order_are_told_apart() {
        const BYTES: [TokenId; 256] = {
            let mut ids = [0; 256];
            let mut b = 0;
            while b < 256 {
                ids[b] = b as TokenId;
                b += 1;
            }
            ids
        };
        // Ids: 0..256 the bytes, 256 "ab", 257 "abc", 258 "bc".
        let ordered = PairRanks::new([(97, 98, 256), (256, 99, 257)].into_iter(), &BYTES);
        assert!(ordered.well_ordered);
        // "abc" made from "ab" before "ab" is made.
        let part_made_later = PairRanks::new([(256, 99, 257), (97, 98, 256)].into_iter(), &BYTES);
        assert!(!part_made_later.well_ordered);
        // "abc" made twice: ab+c, then a+bc.
        let made_twice = PairRanks::new(
            [(97, 98, 256), (98, 99, 258), (256, 99, 257), (97, 258, 257)].into_iter(),
            &BYTES,
        );
        assert!(!made_twice.well_ordered);
    }

    #[test]
    fn the_leftmost_lowest_rank_is_found_in_four_chains() {
        // Against one scan, on ranks from a small range (ties everywhere, NONE among them) and
        // from the whole range, at every length of both arrays: the lowest rank, and the
        // first position that holds it.
        fn check<const N: usize>(rng: &mut Rng, spread: u64) {
            for len in 0..=N {
                let mut ranks = [NONE; N];
                for rank in &mut ranks[..len] {
                    let draw = rng.next() % spread;
                    *rank = if draw == 0 { NONE } else { draw as u32 };
                }
                let mut expected = (NONE, 0);
                for (i, &rank) in ranks[..len].iter().enumerate() {
                    if rank < expected.0 {
                        expected = (rank, i);
                    }
                }
                let found = leftmost_min(&ranks, len);
                assert_eq!(found.0, expected.0, "{:?}", &ranks[..len]);
                if expected.0 != NONE {
                    assert_eq!(found.1, expected.1, "{:?}", &ranks[..len]);
                }
            }
        }
        let mut rng = Rng(7);
        for _ in 0..200 {
            for spread in [2, 5, 40, 1 << 33] {
                check::<LONG_PIECE>(&mut rng, spread);
                check::<TOKEN_LONG_PIECE>(&mut rng, spread);
            }
        }
    }

    #[test]
    fn a_megabyte_of_one_byte_is_not_quadratic() {
        // "a" * 10**6 with merges a+a, aa+aa, ...: a quadratic merge would take minutes.
        let mut tokens: Vec<(u32, Bytes)> = (0..=255u8).map(|b| (b as u32, vec![b])).collect();
        let mut merges = Vec::new();
        let mut unit = b"a".to_vec();
        for _ in 0..10 {
            merges.push((unit.clone(), unit.clone()));
            unit = [unit.clone(), unit].concat();
            tokens.push((tokens.len() as u32, unit.clone()));
        }
        let vocab = vocab_of(&tokens);
        let pairs = pair_ranks(&vocab, &merges);
        let bytes = BytePairs::new(&vocab);
        // Both merge rules on n bytes.
        let merge_both = |n: usize| {
            let start = std::time::Instant::now();
            let mut ids = vec![vocab.byte_ids[b'a' as usize]; n];
            pairs.merge(&vec![b'a'; n], &mut ids);
            assert_eq!(ids.len(), n / 1024 + (n % 1024).count_ones() as usize);
            let mut ids = vec![vocab.byte_ids[b'a' as usize]; n];
            TokenRanks {
                vocab: &vocab,
                bytes: &bytes,
            }
            .merge(&vec![b'a'; n], &mut ids);
            assert_eq!(ids.len(), n / 1024 + (n % 1024).count_ones() as usize);
            start.elapsed()
        };
        // Relative to this machine and build, not a wall-clock threshold: 16 times the bytes
        // take about 16 times as long (n log n), where a quadratic merge takes 256 times; 64 is
        // between the two. The best of three runs of each, taken in turns, so that other work
        // on the machine slows both alike. (An unoptimised build is some 30 times slower: a
        // fifth of the size still shows n^2.)
        let n = if cfg!(debug_assertions) {
            200_000
        } else {
            1_000_000
        };
        let (mut small, mut big) = (std::time::Duration::MAX, std::time::Duration::MAX);
        for _ in 0..3 {
            small = small.min(merge_both(n / 16));
            big = big.min(merge_both(n));
        }
        assert!(
            big.as_secs_f64() < 64.0 * small.as_secs_f64() + 0.05,
            "{n} bytes took {big:?}, {} bytes {small:?}",
            n / 16
        );
    }
}
