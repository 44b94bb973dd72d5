//! The merge loop's words: each distinct pre-token (or part of one) as a run of token ids in one
//! shared table, with its count; and a pair of token ids as one key.

use crate::pairs::{PairKey, WordId};
use crate::PretokenCounts;

pub(crate) type TokenId = u32;

pub(crate) fn pair_key(left: TokenId, right: TokenId) -> PairKey {
    (u64::from(left) << 32) | u64::from(right)
}

pub(crate) fn split_key(key: PairKey) -> (TokenId, TokenId) {
    ((key >> 32) as TokenId, key as TokenId)
}

/// Where one word's tokens are, and how often the word occurs: one record, so that visiting a
/// word costs one cache miss here (and one for its tokens).
#[derive(Clone, Copy)]
pub(crate) struct WordHead {
    pub(crate) start: usize,
    pub(crate) count: u64,
    pub(crate) len: u32,
}

/// The words: word `w`'s tokens are `symbols[heads[w].start..][..heads[w].len]`.
pub(crate) struct Words {
    pub(crate) symbols: Vec<TokenId>,
    pub(crate) heads: Vec<WordHead>,
}

impl Words {
    /// Words of at least two bytes (shorter ones never hold a pair).
    pub(crate) fn from_counts(counts: &PretokenCounts) -> Words {
        let (mut distinct, mut symbols) = (0usize, 0usize);
        for (pretoken, _) in counts.iter() {
            if pretoken.len() >= 2 {
                distinct += 1;
                symbols += pretoken.len();
            }
        }
        let mut words = Words {
            symbols: Vec::with_capacity(symbols),
            heads: Vec::with_capacity(distinct),
        };
        for (pretoken, count) in counts.iter() {
            if pretoken.len() < 2 || count == 0 {
                continue;
            }
            let len = u32::try_from(pretoken.len()).expect("a pre-token of 4 GiB or more");
            words.heads.push(WordHead {
                start: words.symbols.len(),
                count,
                len,
            });
            words
                .symbols
                .extend(pretoken.iter().map(|&b| TokenId::from(b)));
        }
        assert!(
            words.heads.len() <= WordId::MAX as usize,
            "more than 2^32 distinct pre-tokens"
        );
        words
    }
}
