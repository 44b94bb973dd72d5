//! [`PretokenCounts`]: how often each pre-token occurs, the input of the merge loop.

use hashbrown::HashTable;
use rustc_hash::FxHasher;
use std::hash::Hasher;

/// One distinct pre-token: its bytes are `arena[start..start + len]`.
#[derive(Clone, Copy)]
struct Entry {
    start: usize,
    len: usize,
    count: u64,
}

/// Pre-token bytes -> how often they occur (64-bit counts).
///
/// The bytes of all distinct pre-tokens live one after another in a single arena, and the hash
/// table holds only their place and count (24 bytes an entry): a corpus has millions of distinct
/// pre-tokens, and one heap allocation each would double the memory and the time of counting.
#[derive(Clone, Default)]
pub struct PretokenCounts {
    table: HashTable<Entry>,
    arena: Vec<u8>,
    total: u64,
}

fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut hasher = FxHasher::default();
    hasher.write(bytes);
    hasher.finish()
}

impl PretokenCounts {
    /// No pre-tokens.
    pub fn new() -> PretokenCounts {
        PretokenCounts::default()
    }

    /// The number of distinct pre-tokens.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether there is no pre-token at all.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The number of pre-token occurrences (the sum of all counts).
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Counts `pretoken` `count` more times.
    #[inline]
    pub fn add(&mut self, pretoken: &[u8], count: u64) {
        self.add_hashed(hash_bytes(pretoken), pretoken, count);
    }

    #[inline]
    fn add_hashed(&mut self, hash: u64, pretoken: &[u8], count: u64) {
        self.total += count;
        let arena = &self.arena;
        let found = self.table.find_mut(hash, |entry| {
            &arena[entry.start..entry.start + entry.len] == pretoken
        });
        if let Some(entry) = found {
            entry.count += count;
            return;
        }
        let entry = Entry {
            start: self.arena.len(),
            len: pretoken.len(),
            count,
        };
        self.arena.extend_from_slice(pretoken);
        let arena = &self.arena;
        self.table.insert_unique(hash, entry, |entry| {
            hash_bytes(&arena[entry.start..entry.start + entry.len])
        });
    }

    /// How often `pretoken` was counted (0 if never).
    pub fn get(&self, pretoken: &[u8]) -> u64 {
        let arena = &self.arena;
        self.table
            .find(hash_bytes(pretoken), |entry| {
                &arena[entry.start..entry.start + entry.len] == pretoken
            })
            .map_or(0, |entry| entry.count)
    }

    /// Adds every count of `other` to these.
    pub fn merge(&mut self, other: &PretokenCounts) {
        self.table
            .reserve(other.len().saturating_sub(self.len() / 2), |entry| {
                hash_bytes(&self.arena[entry.start..entry.start + entry.len])
            });
        for (pretoken, count) in other.iter() {
            self.add(pretoken, count);
        }
    }

    /// Adds `other`'s counts to these, or these to `other`'s, whichever is fewer additions, and
    /// returns the sum.
    pub fn merged(self, other: PretokenCounts) -> PretokenCounts {
        let (mut big, small) = if self.len() >= other.len() {
            (self, other)
        } else {
            (other, self)
        };
        big.merge(&small);
        big
    }

    /// Every distinct pre-token with its count, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        self.table.iter().map(|entry| {
            (
                &self.arena[entry.start..entry.start + entry.len],
                entry.count,
            )
        })
    }

    /// Forgets every count (and frees their memory).
    pub fn clear(&mut self) {
        *self = PretokenCounts::new();
    }
}

impl<'a> FromIterator<(&'a [u8], u64)> for PretokenCounts {
    fn from_iter<I: IntoIterator<Item = (&'a [u8], u64)>>(iter: I) -> PretokenCounts {
        let mut counts = PretokenCounts::new();
        for (pretoken, count) in iter {
            counts.add(pretoken, count);
        }
        counts
    }
}

impl std::fmt::Debug for PretokenCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PretokenCounts")
            .field("distinct", &self.len())
            .field("total", &self.total)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn counts_like_a_hash_map() {
        let words: Vec<Vec<u8>> = (0..5000u32)
            .map(|i| format!(" w{}", i % 1234).into_bytes())
            .collect();
        let mut counts = PretokenCounts::new();
        let mut expected: HashMap<Vec<u8>, u64> = HashMap::new();
        for (i, word) in words.iter().enumerate() {
            let n = (i % 3) as u64 + 1;
            counts.add(word, n);
            *expected.entry(word.clone()).or_default() += n;
        }
        counts.add(b"", 2); // the empty pre-token is a key like any other
        *expected.entry(Vec::new()).or_default() += 2;
        assert_eq!(counts.len(), expected.len());
        assert_eq!(counts.total(), expected.values().sum::<u64>());
        let got: HashMap<Vec<u8>, u64> = counts.iter().map(|(k, v)| (k.to_vec(), v)).collect();
        assert_eq!(got, expected);
        assert_eq!(counts.get(b" w7"), expected[&b" w7".to_vec()]);
        assert_eq!(counts.get(b"absent"), 0);
    }

    #[test]
    fn merging_adds_counts() {
        let a: PretokenCounts = [(&b"x"[..], 1), (&b"y"[..], 2)].into_iter().collect();
        let b: PretokenCounts = [(&b"y"[..], 5), (&b"z"[..], u64::from(u32::MAX) * 4)]
            .into_iter()
            .collect();
        let sum = a.clone().merged(b.clone());
        assert_eq!(sum.len(), 3);
        assert_eq!(sum.get(b"y"), 7);
        assert_eq!(sum.get(b"z"), u64::from(u32::MAX) * 4);
        assert_eq!(sum.total(), a.total() + b.total());
        let mut other = b;
        other.merge(&a);
        assert_eq!(
            other.iter().collect::<HashMap<_, _>>(),
            sum.iter().collect::<HashMap<_, _>>()
        );
    }
}
