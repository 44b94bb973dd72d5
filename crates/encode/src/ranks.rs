//! tiktoken vocabularies: a `.tiktoken` file read ([`parse_tiktoken`]), and a merges list
//! reconstructed from token ranks, for the pair rule ([`pair_merges_from_ranks`]).
//!
//! For each multi-byte token, in rank order, tiktoken's rule is applied to its bytes with only
//! the tokens ranked below it (the lowest-ranked adjacent pair joined first, the leftmost of
//! equals); if that ends in exactly two parts, they are the merge that makes the token, else no
//! pair merge reaches it. Every part is a piece of the token itself, so a pair's join is looked
//! up as a slice of it: nothing is allocated per step.

use crate::bpe::TokenId;
use crate::vocab::py_bytes_repr;
use rustc_hash::FxHashMap;
use std::fmt;

/// The largest rank a `.tiktoken` file may give (ids are 32-bit signed integers for NumPy and
/// most consumers; bpestore's `MAX_TOKEN_ID`).
pub const MAX_RANK: u64 = (1 << 31) - 1;

/// The tokens of a `.tiktoken` file: every token's bytes in one arena, and `(start, end, rank)`
/// of each, in the file's order.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TiktokenRanks {
    pub arena: Vec<u8>,
    pub tokens: Vec<(usize, usize, TokenId)>,
}

impl TiktokenRanks {
    /// `(bytes, rank)` of each token, in the file's order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], TokenId)> + '_ {
        self.tokens
            .iter()
            .map(|&(start, end, rank)| (&self.arena[start..end], rank))
    }
}

/// Why a `.tiktoken` file was refused: the first line (1-based, as `bytes.splitlines` counts
/// them) that breaks a rule, and the rule; or no token at all. Its `Display` is the message
/// without the file's name (`"line 3: negative rank -1"`).
#[derive(Debug, PartialEq, Eq)]
pub enum TiktokenError {
    /// Not two fields, a first field that is not base64, or a second that is not ASCII digits
    /// (the line's first 80 bytes are kept, to show).
    Malformed { line: usize, text: Vec<u8> },
    /// `-DIGITS` (the value, for the message).
    NegativeRank { line: usize, digits: String },
    /// A rank past [`MAX_RANK`] (its digits, leading zeros dropped).
    RankTooLarge { line: usize, digits: String },
    /// Base64 of no bytes.
    EmptyToken { line: usize },
    /// A token given on an earlier line too.
    TokenTwice { line: usize, token: Vec<u8> },
    /// A rank given on line `first` too.
    RankTwice {
        line: usize,
        rank: TokenId,
        first: usize,
    },
    /// No line holds a token.
    NoTokens,
}

impl fmt::Display for TiktokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TiktokenError::Malformed { line, text } => write!(
                f,
                "line {line}: expected 'base64-token rank', got {}",
                py_bytes_repr(text)
            ),
            TiktokenError::NegativeRank { line, digits } => {
                // (As Python's int() reads it: "-0" is 0.)
                let sign = if digits == "0" { "" } else { "-" };
                write!(f, "line {line}: negative rank {sign}{digits}")
            }
            TiktokenError::RankTooLarge { line, digits } => write!(
                f,
                "line {line}: rank {digits} is too large; ranks must be integers from 0 to {MAX_RANK} (2**31-1)"
            ),
            TiktokenError::EmptyToken { line } => write!(f, "line {line}: an empty token"),
            TiktokenError::TokenTwice { line, token } => write!(
                f,
                "line {line}: token {} appears twice",
                py_bytes_repr(token)
            ),
            TiktokenError::RankTwice { line, rank, first } => {
                write!(f, "line {line}: rank {rank} also given on line {first}")
            }
            TiktokenError::NoTokens => write!(f, "no tokens found"),
        }
    }
}

/// Python's `bytes.isspace()` characters: what `bytes.split()` and `bytes.strip()` take away.
fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// The lines of `data` as Python's `bytes.splitlines()` cuts them: at `\n`, `\r` and `\r\n`.
fn lines(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = data;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = rest
            .iter()
            .position(|&b| b == b'\n' || b == b'\r')
            .unwrap_or(rest.len());
        let line = &rest[..end];
        let skip = match rest.get(end..end + 2) {
            Some(b"\r\n") => 2,
            _ => (end < rest.len()) as usize,
        };
        rest = &rest[end + skip..];
        Some(line)
    })
}

/// The value of a base64 digit, or 64 for any other byte.
const BASE64_VALUES: [u8; 256] = {
    let mut table = [64u8; 256];
    let digits = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut i = 0;
    while i < 64 {
        table[digits[i] as usize] = i as u8;
        i += 1;
    }
    table
};

/// `field` decoded onto `out` as Python 3.11's `base64.b64decode(field, validate=True)` reads
/// it (`binascii.a2b_base64` in strict mode, whose rules these are step for step); false, with
/// `out` as it was, if Python refuses it.
fn decode_base64(field: &[u8], out: &mut Vec<u8>) -> bool {
    let start = out.len();
    let refuse = |out: &mut Vec<u8>| {
        out.truncate(start);
        false
    };
    if field.first() == Some(&b'=') {
        return refuse(out); // leading padding
    }
    let (mut quad, mut pads, mut padding, mut left) = (0u32, 0u32, false, 0u8);
    for (i, &byte) in field.iter().enumerate() {
        if byte == b'=' {
            padding = true;
            if quad >= 2 {
                pads += 1;
                if quad + pads >= 4 {
                    // The padding ends the data: anything after it is refused.
                    return i + 1 == field.len() || refuse(out);
                }
            }
            continue;
        }
        let value = BASE64_VALUES[byte as usize];
        if value >= 64 || padding {
            return refuse(out); // not base64, or data after padding began
        }
        pads = 0;
        match quad {
            0 => left = value,
            1 => {
                out.push((left << 2) | (value >> 4));
                left = value & 0x0f;
            }
            2 => {
                out.push((left << 4) | (value >> 2));
                left = value & 0x03;
            }
            _ => out.push((left << 6) | value),
        }
        quad = (quad + 1) % 4;
    }
    quad == 0 || refuse(out)
}

/// A `.tiktoken` file's tokens: one `base64(token) rank` per line, blank lines skipped, ranks
/// in ASCII digits from 0 to [`MAX_RANK`], no token and no rank twice, at least one token.
/// Exactly what bpestore's Python reader accepted, with the same message for the first line
/// that breaks a rule (`tests/test_formats_fuzz.py` holds that reader and checks it).
pub fn parse_tiktoken(data: &[u8]) -> Result<TiktokenRanks, TiktokenError> {
    // Tokens take at most 3/4 of their base64; one arena, no allocation per token.
    let mut ranks = TiktokenRanks {
        arena: Vec::with_capacity(data.len() / 4 * 3 + 3),
        tokens: Vec::with_capacity(data.len() / 8),
    };
    // The line of each token, for the duplicate checks (after the syntax: see below).
    let mut line_numbers: Vec<usize> = Vec::with_capacity(data.len() / 8);
    let mut syntax_error = None;
    for (index, line) in lines(data).enumerate() {
        let number = index + 1;
        let mut fields = line.split(|&b| is_space(b)).filter(|f| !f.is_empty());
        let (token, rank) = match (fields.next(), fields.next(), fields.next()) {
            (None, _, _) => continue, // a blank line
            (Some(token), Some(rank), None) => (token, rank),
            _ => {
                syntax_error = Some(malformed(number, line));
                break;
            }
        };
        let start = ranks.arena.len();
        if !decode_base64(token, &mut ranks.arena) {
            syntax_error = Some(malformed(number, line));
            break;
        }
        let value = match rank_value(rank, number, line) {
            Ok(value) => value,
            Err(error) => {
                syntax_error = Some(error);
                break;
            }
        };
        if ranks.arena.len() == start {
            syntax_error = Some(TiktokenError::EmptyToken { line: number });
            break;
        }
        ranks.tokens.push((start, ranks.arena.len(), value));
        line_numbers.push(number);
    }
    // A token or rank given twice before the first line that breaks a rule of its own is the
    // first problem; every line read above comes before that one.
    let mut token_line: FxHashMap<&[u8], usize> =
        FxHashMap::with_capacity_and_hasher(ranks.tokens.len(), Default::default());
    // Ranks are dense in every real file: a table by rank, else a map.
    let max_rank = ranks.tokens.iter().map(|&(_, _, rank)| rank as usize).max();
    let mut dense: Vec<u32> = match max_rank {
        Some(max) if max < 4 * ranks.tokens.len() + 65_536 => vec![0; max + 1],
        _ => Vec::new(),
    };
    let mut sparse: FxHashMap<TokenId, usize> = FxHashMap::default();
    let mut first_line_of = |rank: TokenId, number: usize| match dense.get_mut(rank as usize) {
        // (Line numbers fit: a line has at least 3 bytes, and the table is only kept for
        // fewer than 2**32 tokens.)
        Some(seen) if *seen != 0 => Some(*seen as usize),
        Some(seen) => {
            *seen = number as u32;
            None
        }
        None => match sparse.entry(rank) {
            std::collections::hash_map::Entry::Occupied(first) => Some(*first.get()),
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(number);
                None
            }
        },
    };
    for (&(start, end, rank), &number) in ranks.tokens.iter().zip(&line_numbers) {
        let token = &ranks.arena[start..end];
        if token_line.insert(token, number).is_some() {
            return Err(TiktokenError::TokenTwice {
                line: number,
                token: token.to_vec(),
            });
        }
        if let Some(first) = first_line_of(rank, number) {
            return Err(TiktokenError::RankTwice {
                line: number,
                rank,
                first,
            });
        }
    }
    match syntax_error {
        Some(error) => Err(error),
        None if ranks.tokens.is_empty() => Err(TiktokenError::NoTokens),
        None => Ok(ranks),
    }
}

/// A rank's value, or what is wrong with it on line `line` (whose text is `text`): `-DIGITS`
/// is a negative rank, anything else not ASCII digits is malformed, past [`MAX_RANK`] too large.
fn rank_value(field: &[u8], line: usize, text: &[u8]) -> Result<TokenId, TiktokenError> {
    let all_digits = |digits: &[u8]| !digits.is_empty() && digits.iter().all(u8::is_ascii_digit);
    if field[0] == b'-' && all_digits(&field[1..]) {
        let digits = without_leading_zeros(&field[1..]);
        return Err(TiktokenError::NegativeRank { line, digits });
    }
    if !all_digits(field) {
        return Err(malformed(line, text));
    }
    let mut value: u64 = 0;
    for &digit in field {
        value = value * 10 + u64::from(digit - b'0');
        if value > MAX_RANK {
            let digits = without_leading_zeros(field);
            return Err(TiktokenError::RankTooLarge { line, digits });
        }
    }
    Ok(value as TokenId)
}

fn malformed(line: usize, text: &[u8]) -> TiktokenError {
    TiktokenError::Malformed {
        line,
        text: text[..text.len().min(80)].to_vec(),
    }
}

/// ASCII digits as Python's `int()` prints them back: leading zeros dropped ("0" for zeros).
fn without_leading_zeros(digits: &[u8]) -> String {
    let first = digits
        .iter()
        .position(|&b| b != b'0')
        .unwrap_or(digits.len().saturating_sub(1));
    String::from_utf8_lossy(&digits[first..]).into_owned()
}

/// What [`pair_merges_from_ranks`] finds: the merges `(token index, split)` in rank order, the
/// token being `token[..split] + token[split..]`, and the indices of the tokens no pair merge
/// reaches (both indices into the slice given).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reconstructed {
    pub merges: Vec<(usize, usize)>,
    pub unreachable: Vec<usize>,
}

/// The merges of `tokens` (`(bytes, rank)`, ranks distinct), in rank order; see the module.
/// `on_tokens(n)` is told of every `n` more tokens done (for a progress bar).
pub fn pair_merges_from_ranks(
    tokens: &[(&[u8], TokenId)],
    on_tokens: &mut dyn FnMut(usize),
) -> Reconstructed {
    let rank_of: FxHashMap<&[u8], TokenId> =
        tokens.iter().map(|&(token, rank)| (token, rank)).collect();
    let mut order: Vec<usize> = (0..tokens.len()).collect();
    order.sort_unstable_by_key(|&index| tokens[index].1);
    let mut found = Reconstructed::default();
    // Part i of the token being split is token[start(i)..ends[i]], start(0) = 0 and
    // start(i) = ends[i - 1]; joins[i] is the rank of parts i and i + 1 joined, if that is a
    // token ranked below the one being split. A join changes only its two neighbours' entries.
    let mut ends: Vec<usize> = Vec::new();
    let mut joins: Vec<Option<TokenId>> = Vec::new();
    let mut done = 0;
    for &index in &order {
        let (token, rank) = tokens[index];
        done += 1;
        if done % 4096 == 0 {
            on_tokens(4096);
        }
        if token.len() < 2 {
            continue;
        }
        let below = |from: usize, to: usize| {
            rank_of
                .get(&token[from..to])
                .copied()
                .filter(|&joined| joined < rank)
        };
        ends.clear();
        ends.extend(1..=token.len());
        joins.clear();
        joins.extend((0..token.len() - 1).map(|i| below(i, i + 2)));
        while ends.len() > 2 {
            // The lowest rank, the leftmost of equals.
            let mut best: Option<(TokenId, usize)> = None;
            for (i, join) in joins.iter().enumerate() {
                if let Some(joined) = *join {
                    if best.is_none_or(|(best_rank, _)| joined < best_rank) {
                        best = Some((joined, i));
                    }
                }
            }
            let Some((_, at)) = best else {
                break;
            };
            ends.remove(at); // parts at and at + 1 become one
            joins.remove(at);
            let start = |i: usize| if i == 0 { 0 } else { ends[i - 1] };
            if at > 0 {
                joins[at - 1] = below(start(at - 1), ends[at]);
            }
            if at + 1 < ends.len() {
                joins[at] = below(start(at), ends[at + 1]);
            }
        }
        if ends.len() == 2 {
            found.merges.push((index, ends[0]));
        } else {
            found.unreachable.push(index);
        }
    }
    on_tokens(done % 4096);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

    fn reconstruct(tokens: &[(&[u8], TokenId)]) -> (Pairs, Vec<Vec<u8>>) {
        let found = pair_merges_from_ranks(tokens, &mut |_| {});
        let merges = found
            .merges
            .iter()
            .map(|&(index, split)| {
                (
                    tokens[index].0[..split].to_vec(),
                    tokens[index].0[split..].to_vec(),
                )
            })
            .collect();
        let unreachable = found
            .unreachable
            .iter()
            .map(|&index| tokens[index].0.to_vec())
            .collect();
        (merges, unreachable)
    }

    #[test]
    fn merges_come_from_the_lower_ranks_in_rank_order() {
        let mut tokens: Vec<(&[u8], TokenId)> = vec![(b"a", 0), (b"b", 1), (b"c", 2)];
        // "abc" (rank 5) splits as "ab" + "c": "ab" (3) is below "bc" (4).
        tokens.extend([
            (b"ab".as_slice(), 3),
            (b"bc".as_slice(), 4),
            (b"abc".as_slice(), 5),
        ]);
        // "cab" (rank 6): "ab" joins first, leaving "c" + "ab".
        tokens.push((b"cab", 6));
        // "bca" (rank 7): "bc" first, then "bc" + "a".
        tokens.push((b"bca", 7));
        // "aaa" (rank 8): no "aa" below it: three parts, no pair merge.
        tokens.push((b"aaa", 8));
        let (merges, unreachable) = reconstruct(&tokens);
        let pairs: Vec<(&[u8], &[u8])> = merges
            .iter()
            .map(|(l, r)| (l.as_slice(), r.as_slice()))
            .collect();
        assert_eq!(
            pairs,
            vec![
                (b"a".as_slice(), b"b".as_slice()),
                (b"b", b"c"),
                (b"ab", b"c"),
                (b"c", b"ab"),
                (b"bc", b"a"),
            ]
        );
        assert_eq!(unreachable, vec![b"aaa".to_vec()]);
    }

    #[test]
    fn a_pair_ranked_above_the_token_is_not_used_and_the_leftmost_of_equals_joins_first() {
        // "abab" (rank 3) with "ab" (rank 2): the leftmost "ab" joins, then the second, then
        // "ab" + "ab". "ba" (rank 9) is above it and never used.
        let tokens: Vec<(&[u8], TokenId)> =
            vec![(b"a", 0), (b"b", 1), (b"ab", 2), (b"abab", 3), (b"ba", 9)];
        let (merges, unreachable) = reconstruct(&tokens);
        assert_eq!(merges[1], (b"ab".to_vec(), b"ab".to_vec()));
        assert!(unreachable.is_empty());
    }

    fn parsed(data: &[u8]) -> Result<Vec<(Vec<u8>, TokenId)>, String> {
        parse_tiktoken(data)
            .map(|ranks| ranks.iter().map(|(t, r)| (t.to_vec(), r)).collect())
            .map_err(|error| error.to_string())
    }

    #[test]
    fn a_tiktoken_file_is_read_in_order_with_blank_lines_and_any_line_break() {
        assert_eq!(
            parsed(b"YQ== 7\r\n\n  \nYWI= 3\rYWJj\t0"),
            Ok(vec![
                (b"a".to_vec(), 7),
                (b"ab".to_vec(), 3),
                (b"abc".to_vec(), 0)
            ])
        );
    }

    #[test]
    fn the_first_line_that_breaks_a_rule_is_named() {
        let cases: [(&[u8], &str); 10] = [
            (b"YQ== 0\nYQ 1\n", "line 2: expected 'base64-token rank', got b'YQ 1'"),
            (b"YQ== 0 1\n", "line 1: expected 'base64-token rank', got b'YQ== 0 1'"),
            (b"YQ== -007\n", "line 1: negative rank -7"),
            (b"YQ== -0\n", "line 1: negative rank 0"),
            (b"YQ== +5\n", "line 1: expected 'base64-token rank', got b'YQ== +5'"),
            (
                b"YQ== 02147483648\n",
                "line 1: rank 2147483648 is too large; ranks must be integers from 0 to 2147483647 (2**31-1)",
            ),
            (b"YQ== 0\nYQ== 1\n", "line 2: token b'a' appears twice"),
            (b"YQ== 5\n\nYg== 5\n", "line 3: rank 5 also given on line 1"),
            // A duplicate before a malformed line is the first problem, and after one it is not.
            (b"YQ== 0\nYQ== 1\n! 2\n", "line 2: token b'a' appears twice"),
            (b" \n\n", "no tokens found"),
        ];
        for (data, message) in cases {
            assert_eq!(parsed(data), Err(message.to_string()), "{data:?}");
        }
        assert_eq!(
            parsed(b"YQ== 0\n! 1\nYQ== 2\n"),
            Err("line 2: expected 'base64-token rank', got b'! 1'".to_string())
        );
    }

    #[test]
    fn base64_is_read_as_pythons_strict_decoder_reads_it() {
        let decoded = |field: &[u8]| {
            let mut out = Vec::new();
            decode_base64(field, &mut out).then_some(out)
        };
        assert_eq!(decoded(b"YWJj"), Some(b"abc".to_vec()));
        assert_eq!(decoded(b"YR=="), Some(b"a".to_vec())); // (bits past the data are ignored)
        assert_eq!(decoded(b"YWJj="), Some(b"abc".to_vec())); // (padding after a whole group)
        for refused in [
            &b"YQ"[..],
            b"YQ=",
            b"=YQ=",
            b"YQ=a",
            b"YQ===",
            b"Y",
            b"YQ==YQ==",
            b"Y-==",
            b"YQ!=",
        ] {
            assert_eq!(decoded(refused), None, "{refused:?}");
        }
    }
}
