//! Pre-token counts in the forms a database takes and gives them in bulk, written and read here
//! only: the packed copy (one BLOB per corpus, the fast way to read counts back) and
//! PostgreSQL's binary `COPY` rows (the fast way in and out of a server). Both walk the counts in
//! byte order of the pre-tokens ([`SortedCounts`]), the canonical order.

use std::borrow::Cow;

use crate::PretokenCounts;

/// The first bytes of a packed copy: what it is, and the layout's version.
const PACKED_MAGIC: &[u8; 8] = b"BPECNT1\n";

/// The magic, the checksum, and the numbers of pre-tokens, of occurrences and of bytes.
const PACKED_HEADER_LEN: usize = 40;

/// The checksum of a packed copy's body: FxHash, a word at a time. Each step of it (rotate, xor
/// with the word, multiply by an odd constant) is a bijection of the state, so any change to one
/// 8-byte word of the body (a flipped bit, say) always changes the result.
pub fn checksum(body: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut hasher = rustc_hash::FxHasher::default();
    hasher.write(body);
    hasher.finish()
}

/// The header of a PostgreSQL binary `COPY`: the signature, then no flags and no extension.
const COPY_SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\0";
const COPY_HEADER_LEN: usize = COPY_SIGNATURE.len() + 8;

/// Counts seen in byte order of their pre-tokens, without copying them: the ids in that order.
pub struct SortedCounts<'a> {
    counts: &'a PretokenCounts,
    order: Cow<'a, [u32]>,
}

impl<'a> SortedCounts<'a> {
    /// `counts` in byte order (sorts their ids once).
    pub fn new(counts: &'a PretokenCounts) -> SortedCounts<'a> {
        SortedCounts {
            order: Cow::Owned(counts.sorted_ids()),
            counts,
        }
    }

    /// `counts` in the order `order` gives (ids, as [`PretokenCounts::sorted_ids`] returns them,
    /// kept from an earlier sort).
    pub fn with_order(counts: &'a PretokenCounts, order: &'a [u32]) -> SortedCounts<'a> {
        SortedCounts {
            counts,
            order: Cow::Borrowed(order),
        }
    }

    /// The number of distinct pre-tokens.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Rows `start..end` (in byte order) as (pre-token, count).
    pub fn rows(&self, start: usize, end: usize) -> impl Iterator<Item = (&'a [u8], u64)> + '_ {
        let counts = self.counts;
        self.order[start..end]
            .iter()
            .map(move |&id| (counts.pretoken(id), counts.count_of(id)))
    }

    /// Where to cut the rows into pieces of at most `max_rows` rows and about `max_bytes` bytes
    /// of pre-tokens (a piece holds at least one row): the end of each piece, the last being
    /// `len()`. Bounds what one batch of a write, or one part of a packed copy, holds.
    pub fn piece_ends(&self, max_rows: usize, max_bytes: usize) -> Vec<usize> {
        let mut ends = Vec::new();
        let (mut rows, mut bytes) = (0usize, 0usize);
        for (index, (pretoken, _)) in self.rows(0, self.len()).enumerate() {
            if rows > 0 && (rows >= max_rows || bytes + pretoken.len() > max_bytes) {
                ends.push(index);
                (rows, bytes) = (0, 0);
            }
            rows += 1;
            bytes += pretoken.len();
        }
        if rows > 0 {
            ends.push(self.len());
        }
        ends
    }

    /// A packed copy of rows `start..end`:
    ///
    /// ```text
    /// magic "BPECNT1\n" | checksum: u64 | distinct: u64 | total: u64 | bytes: u64
    /// | lengths: distinct x u32 | counts: distinct x u64 | pre-tokens end to end (bytes)
    /// ```
    ///
    /// integers little-endian, pre-tokens in byte order (so the same counts always pack to the
    /// same bytes); the checksum is [`checksum`] of everything after it, so that a damaged copy
    /// is refused rather than read as other counts. Big counts are packed in parts (consecutive
    /// ranges, see [`SortedCounts::piece_ends`]: a database value holds at most about 1 GB);
    /// [`unpack`] reads the parts back together.
    pub fn pack(&self, start: usize, end: usize) -> Vec<u8> {
        // One pass over the rows, gathering the three sections apart: each row is a lookup at
        // a random place of the counts (a cache miss), and one pass instead of four made
        // packing a 1 GB corpus's 1.35 M rows three times as fast.
        let distinct = end - start;
        let mut lengths = Vec::with_capacity(distinct * 4);
        let mut counts = Vec::with_capacity(distinct * 8);
        let mut pretokens = Vec::new();
        let mut total: u64 = 0;
        for (pretoken, count) in self.rows(start, end) {
            let length = u32::try_from(pretoken.len()).expect("a pre-token of 4 GiB or more");
            lengths.extend_from_slice(&length.to_le_bytes());
            counts.extend_from_slice(&count.to_le_bytes());
            pretokens.extend_from_slice(pretoken);
            total += count;
        }
        let mut out =
            Vec::with_capacity(PACKED_HEADER_LEN + lengths.len() + counts.len() + pretokens.len());
        out.extend_from_slice(PACKED_MAGIC);
        out.extend_from_slice(&[0; 8]); // the checksum, once the rest is known
        out.extend_from_slice(&(distinct as u64).to_le_bytes());
        out.extend_from_slice(&total.to_le_bytes());
        out.extend_from_slice(&(pretokens.len() as u64).to_le_bytes());
        out.extend_from_slice(&lengths);
        out.extend_from_slice(&counts);
        out.extend_from_slice(&pretokens);
        let sum = checksum(&out[16..]);
        out[8..16].copy_from_slice(&sum.to_le_bytes());
        out
    }

    /// Rows `start..end` in PostgreSQL's binary `COPY` format, each `(corpus_id, pretoken,
    /// count)` (int4, bytea, int8): the table `pretoken_counts`'s columns. The header comes
    /// with the first rows (`start == 0`), the trailer with the last (`end == len()`), so that
    /// the pieces of consecutive ranges, sent in order, make one `COPY ... FROM STDIN (FORMAT
    /// BINARY)`.
    pub fn copy_rows(&self, corpus_id: i32, start: usize, end: usize) -> Vec<u8> {
        let bytes: usize = self.rows(start, end).map(|(p, _)| p.len()).sum();
        let mut out = Vec::with_capacity(COPY_HEADER_LEN + 2 + (end - start) * 26 + bytes);
        if start == 0 {
            out.extend_from_slice(COPY_SIGNATURE);
            out.extend_from_slice(&0i32.to_be_bytes()); // flags: no OIDs
            out.extend_from_slice(&0i32.to_be_bytes()); // no header extension
        }
        for (pretoken, count) in self.rows(start, end) {
            out.extend_from_slice(&3i16.to_be_bytes());
            out.extend_from_slice(&4i32.to_be_bytes());
            out.extend_from_slice(&corpus_id.to_be_bytes());
            let length = i32::try_from(pretoken.len()).expect("a pre-token of 2 GiB or more");
            out.extend_from_slice(&length.to_be_bytes());
            out.extend_from_slice(pretoken);
            out.extend_from_slice(&8i32.to_be_bytes());
            // int8: counts above 2^63 - 1 do not fit the column; the caller checks the total.
            out.extend_from_slice(&(count as i64).to_be_bytes());
        }
        if end == self.len() {
            out.extend_from_slice(&(-1i16).to_be_bytes());
        }
        out
    }
}

/// Reads little-endian integers off the front of a byte slice, or says what is missing.
struct Reader<'a> {
    data: &'a [u8],
    position: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize, what: &str) -> Result<&'a [u8], String> {
        let end = self
            .position
            .checked_add(len)
            .filter(|&end| end <= self.data.len())
            .ok_or_else(|| {
                format!(
                    "it ends at byte {} in the middle of {what}",
                    self.data.len()
                )
            })?;
        let slice = &self.data[self.position..end];
        self.position = end;
        Ok(slice)
    }

    fn u64_le(&mut self, what: &str) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8, what)?.try_into().expect("8 bytes"),
        ))
    }

    fn i16_be(&mut self, what: &str) -> Result<i16, String> {
        Ok(i16::from_be_bytes(
            self.take(2, what)?.try_into().expect("2 bytes"),
        ))
    }

    fn i32_be(&mut self, what: &str) -> Result<i32, String> {
        Ok(i32::from_be_bytes(
            self.take(4, what)?.try_into().expect("4 bytes"),
        ))
    }
}

/// The header of one packed part, checked: (distinct, total, bytes), and a reader past it.
fn packed_header(data: &[u8]) -> Result<(usize, u64, usize, Reader<'_>), String> {
    let mut reader = Reader { data, position: 0 };
    if reader.take(8, "the header")? != PACKED_MAGIC {
        return Err("it does not start as packed counts do".to_string());
    }
    let stored_checksum = reader.u64_le("the header")?;
    if checksum(&data[16..]) != stored_checksum {
        return Err("its checksum does not match: the data is damaged".to_string());
    }
    let distinct = reader.u64_le("the header")?;
    let total = reader.u64_le("the header")?;
    let bytes = reader.u64_le("the header")?;
    let expected = distinct
        .checked_mul(12)
        .and_then(|n| n.checked_add(bytes))
        .and_then(|n| n.checked_add(PACKED_HEADER_LEN as u64));
    if expected != Some(data.len() as u64) {
        return Err(format!(
            "{} bytes where {distinct} pre-tokens of {bytes} bytes in all take {}",
            data.len(),
            expected.map_or_else(|| "more than 2^64".to_string(), |n| n.to_string())
        ));
    }
    Ok((distinct as usize, total, bytes as usize, reader))
}

/// Counts from their packed copy: the parts [`SortedCounts::pack`] made of consecutive ranges,
/// in order (one part for all but huge counts). Anything that is not exactly such a copy
/// (another layout, a truncated or damaged part: sizes that do not add up, a count of 0,
/// pre-tokens out of order or repeated, within a part or across two, a total that does not
/// match) is an error saying which part and what.
pub fn unpack(parts: &[&[u8]]) -> Result<PretokenCounts, String> {
    let mut headers = Vec::with_capacity(parts.len());
    for (index, data) in parts.iter().enumerate() {
        headers.push(packed_header(data).map_err(|reason| in_part(index, parts.len(), reason))?);
    }
    let distinct = headers.iter().map(|h| h.0).sum();
    let bytes = headers.iter().map(|h| h.2).sum();
    let mut result = PretokenCounts::with_capacity(distinct, bytes);
    let mut previous: Option<&[u8]> = None;
    for (index, (distinct, total, bytes, mut reader)) in headers.into_iter().enumerate() {
        let context = |reason: String| in_part(index, parts.len(), reason);
        let lengths = reader.take(distinct * 4, "the lengths").map_err(context)?;
        let counts = reader.take(distinct * 8, "the counts").map_err(context)?;
        let mut text = reader.take(bytes, "the pre-tokens").map_err(context)?;
        let mut sum = 0u64;
        for (row, (length, count)) in lengths
            .chunks_exact(4)
            .zip(counts.chunks_exact(8))
            .enumerate()
        {
            let length = u32::from_le_bytes(length.try_into().expect("4 bytes")) as usize;
            let count = u64::from_le_bytes(count.try_into().expect("8 bytes"));
            if length > text.len() {
                return Err(context(format!(
                    "pre-token {row} runs past the end of the data"
                )));
            }
            let (pretoken, rest) = text.split_at(length);
            text = rest;
            if count == 0 {
                return Err(context(format!("pre-token {row} has a count of 0")));
            }
            if previous.is_some_and(|previous| previous >= pretoken) {
                return Err(context(format!(
                    "pre-token {row} is not after the one before it in byte order (repeated or out of order)"
                )));
            }
            sum = sum
                .checked_add(count)
                .filter(|_| result.total().checked_add(count).is_some())
                .ok_or_else(|| context("the counts add up to 2^64 or more".to_string()))?;
            result.add(pretoken, count);
            previous = Some(pretoken);
        }
        if !text.is_empty() {
            return Err(context(format!(
                "{} bytes of pre-tokens are left over",
                text.len()
            )));
        }
        if sum != total {
            return Err(context(format!(
                "the counts add up to {sum}, but the header says {total}"
            )));
        }
    }
    Ok(result)
}

/// `reason`, saying which part when there are several.
fn in_part(index: usize, parts: usize, reason: String) -> String {
    if parts == 1 {
        reason
    } else {
        format!("part {index} of {parts}: {reason}")
    }
}

/// Counts from a PostgreSQL binary `COPY ... TO STDOUT (FORMAT BINARY)` of two columns,
/// `(pretoken bytea, count int8)`. A pre-token given twice gets the sum of its counts; a NULL, a
/// negative count, another number of columns or a damaged stream is an error saying which row.
pub fn from_copy_rows(data: &[u8]) -> Result<PretokenCounts, String> {
    let mut reader = Reader { data, position: 0 };
    if reader.take(COPY_SIGNATURE.len(), "the header")? != COPY_SIGNATURE {
        return Err("it does not start as a binary COPY does".to_string());
    }
    let _flags = reader.i32_be("the header")?;
    let extension = reader.i32_be("the header")?;
    reader.take(
        usize::try_from(extension).map_err(|_| "a negative header extension")?,
        "the header",
    )?;
    let mut result = PretokenCounts::new();
    let mut row = 0usize;
    loop {
        let fields = reader.i16_be("a row")?;
        if fields == -1 {
            break;
        }
        if fields != 2 {
            return Err(format!(
                "row {row} has {fields} columns, not 2 (pretoken, count)"
            ));
        }
        let length = reader.i32_be("a row")?;
        let length =
            usize::try_from(length).map_err(|_| format!("row {row}'s pre-token is NULL"))?;
        let pretoken = reader.take(length, "a pre-token")?;
        if reader.i32_be("a row")? != 8 {
            return Err(format!("row {row}'s count is NULL or not a 64-bit integer"));
        }
        let count = i64::from_be_bytes(reader.take(8, "a count")?.try_into().expect("8 bytes"));
        let count =
            u64::try_from(count).map_err(|_| format!("row {row}'s count is negative ({count})"))?;
        if result.total().checked_add(count).is_none() {
            return Err("the counts add up to 2^64 or more".to_string());
        }
        if count > 0 {
            result.add(pretoken, count);
        }
        row += 1;
    }
    if reader.position != data.len() {
        return Err(format!(
            "{} bytes follow the end of the rows",
            data.len() - reader.position
        ));
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn sample() -> PretokenCounts {
        [
            (&b" the"[..], 900),
            (&b"a"[..], 1),
            (&b""[..], 2),
            (&b"\xff\x00"[..], 9),
            (&b" cat"[..], u64::from(u32::MAX) * 3),
        ]
        .into_iter()
        .collect()
    }

    fn as_map(counts: &PretokenCounts) -> HashMap<Vec<u8>, u64> {
        counts.iter().map(|(k, v)| (k.to_vec(), v)).collect()
    }

    #[test]
    fn packing_round_trips_in_byte_order() {
        let counts = sample();
        let sorted = SortedCounts::new(&counts);
        let rows: Vec<_> = sorted.rows(0, sorted.len()).collect();
        let keys: Vec<&[u8]> = rows.iter().map(|&(k, _)| k).collect();
        assert_eq!(keys, vec![&b""[..], b" cat", b" the", b"a", b"\xff\x00"]);
        let packed = sorted.pack(0, sorted.len());
        assert_eq!(&packed[..8], PACKED_MAGIC);
        let back = unpack(&[&packed]).unwrap();
        assert_eq!(as_map(&back), as_map(&counts));
        assert_eq!(back.total(), counts.total());
        // The same counts made in another order pack to the same bytes.
        let other: PretokenCounts = counts
            .iter()
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        assert_eq!(SortedCounts::new(&other).pack(0, 5), packed);
        let empty = SortedCounts::new(&PretokenCounts::new()).pack(0, 0);
        assert_eq!(unpack(&[&empty]).unwrap().len(), 0);
        assert_eq!(unpack(&[]).unwrap().len(), 0);
        // In parts: every way of cutting gives the same counts back.
        for ends in [
            vec![1, 5],
            vec![2, 3, 5],
            vec![1, 2, 3, 4, 5],
            sorted.piece_ends(2, 100),
            sorted.piece_ends(10, 4),
        ] {
            let mut start = 0;
            let parts: Vec<Vec<u8>> = ends
                .iter()
                .map(|&end| {
                    let part = sorted.pack(start, end);
                    start = end;
                    part
                })
                .collect();
            let parts: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
            assert_eq!(
                as_map(&unpack(&parts).unwrap()),
                as_map(&counts),
                "{ends:?}"
            );
            // Parts out of order, or one repeated, are refused.
            if parts.len() > 1 {
                let mut swapped = parts.clone();
                swapped.swap(0, 1);
                assert!(
                    unpack(&swapped).unwrap_err().contains("part 1 of"),
                    "{ends:?}"
                );
                let mut repeated = parts.clone();
                repeated.push(parts[parts.len() - 1]);
                assert!(unpack(&repeated).is_err());
            }
        }
    }

    #[test]
    fn damaged_packed_counts_are_refused_never_misread() {
        let packed = SortedCounts::new(&sample()).pack(0, 5);
        let unpack = |data: &[u8]| unpack(&[data]);
        for cut in 0..packed.len() {
            assert!(unpack(&packed[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = packed.clone();
        longer.push(0);
        assert!(unpack(&longer).is_err());
        // Every single-bit flip is refused (the checksum), never read as other counts.
        for byte in 0..packed.len() {
            for bit in 0..8 {
                let mut damaged = packed.clone();
                damaged[byte] ^= 1 << bit;
                assert!(unpack(&damaged).is_err(), "flip at byte {byte} bit {bit}");
            }
        }
        // Well-formed but inconsistent copies (a valid checksum over a bad body) are refused too.
        let resealed = |mut body: Vec<u8>| {
            let sum = checksum(&body[16..]);
            body[8..16].copy_from_slice(&sum.to_le_bytes());
            body
        };
        let mut wrong_total = packed.clone();
        wrong_total[24] ^= 1;
        assert!(unpack(&resealed(wrong_total))
            .unwrap_err()
            .contains("add up"));
        let zero = PretokenCounts::from_iter([(&b"x"[..], 1), (&b"y"[..], 1)]);
        let mut zero_count = SortedCounts::new(&zero).pack(0, 2);
        zero_count[PACKED_HEADER_LEN + 8..PACKED_HEADER_LEN + 16]
            .copy_from_slice(&0u64.to_le_bytes());
        zero_count[24..32].copy_from_slice(&1u64.to_le_bytes());
        assert!(unpack(&resealed(zero_count))
            .unwrap_err()
            .contains("count of 0"));
        let mut repeated = SortedCounts::new(&zero).pack(0, 2);
        let last = repeated.len() - 1;
        repeated[last] = b'x';
        assert!(unpack(&resealed(repeated))
            .unwrap_err()
            .contains("byte order"));
    }

    #[test]
    fn pieces_are_bounded_by_rows_and_bytes() {
        let counts = sample(); // pre-tokens of 0, 4, 4, 1 and 2 bytes, in byte order
        let sorted = SortedCounts::new(&counts);
        assert_eq!(sorted.piece_ends(2, usize::MAX), vec![2, 4, 5]);
        assert_eq!(sorted.piece_ends(usize::MAX, 4), vec![2, 3, 5]);
        assert_eq!(sorted.piece_ends(usize::MAX, 0), vec![1, 2, 3, 4, 5]); // a row at least
        assert_eq!(
            SortedCounts::new(&PretokenCounts::new()).piece_ends(2, 2),
            Vec::<usize>::new()
        );
    }

    #[test]
    fn copy_rows_in_pieces_make_one_stream() {
        let counts = sample();
        let sorted = SortedCounts::new(&counts);
        let whole = sorted.copy_rows(7, 0, sorted.len());
        let pieces = [
            sorted.copy_rows(7, 0, 2),
            sorted.copy_rows(7, 2, 3),
            sorted.copy_rows(7, 3, 5),
        ]
        .concat();
        assert_eq!(pieces, whole);
        assert_eq!(&whole[..11], COPY_SIGNATURE);
        assert_eq!(&whole[whole.len() - 2..], &[0xff, 0xff]);
        // The first row: 3 fields, corpus id 7 (int4), the empty pre-token, its count 2 (int8).
        let row = &whole[COPY_HEADER_LEN..COPY_HEADER_LEN + 2 + 8 + 4 + 4 + 8];
        assert_eq!(
            row,
            [
                &3i16.to_be_bytes()[..],
                &4i32.to_be_bytes(),
                &7i32.to_be_bytes(),
                &0i32.to_be_bytes(),
                &8i32.to_be_bytes(),
                &2i64.to_be_bytes()
            ]
            .concat()
        );
    }

    /// A binary COPY of (pretoken, count) rows, as PostgreSQL writes one.
    fn copy_out(rows: &[(Option<&[u8]>, Option<i64>)]) -> Vec<u8> {
        let mut out = COPY_SIGNATURE.to_vec();
        out.extend_from_slice(&[0; 8]);
        for (pretoken, count) in rows {
            out.extend_from_slice(&2i16.to_be_bytes());
            match pretoken {
                Some(p) => {
                    out.extend_from_slice(&(p.len() as i32).to_be_bytes());
                    out.extend_from_slice(p);
                }
                None => out.extend_from_slice(&(-1i32).to_be_bytes()),
            }
            match count {
                Some(c) => {
                    out.extend_from_slice(&8i32.to_be_bytes());
                    out.extend_from_slice(&c.to_be_bytes());
                }
                None => out.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        out.extend_from_slice(&(-1i16).to_be_bytes());
        out
    }

    #[test]
    fn copy_out_rows_are_read_and_bad_ones_refused() {
        let counts = from_copy_rows(&copy_out(&[
            (Some(b" a"), Some(3)),
            (Some(b""), Some(1)),
            (Some(b" a"), Some(2)),
        ]))
        .unwrap();
        assert_eq!(
            as_map(&counts),
            HashMap::from([(b" a".to_vec(), 5), (Vec::new(), 1)])
        );
        assert!(from_copy_rows(&copy_out(&[(None, Some(1))]))
            .unwrap_err()
            .contains("row 0"));
        assert!(from_copy_rows(&copy_out(&[(Some(b"x"), None)]))
            .unwrap_err()
            .contains("NULL"));
        assert!(
            from_copy_rows(&copy_out(&[(Some(b"x"), Some(1)), (Some(b"y"), Some(-4))]))
                .unwrap_err()
                .contains("row 1")
        );
        let good = copy_out(&[(Some(b"x"), Some(1))]);
        for cut in 0..good.len() {
            assert!(from_copy_rows(&good[..cut]).is_err(), "cut at {cut}");
        }
        assert!(from_copy_rows(&[good.as_slice(), b"x"].concat()).is_err());
    }
}
