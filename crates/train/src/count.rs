//! Counting the pre-tokens of a text or of a corpus file (in parallel, in bounded memory).
//!
//! A file is cut into chunks of about `chunk_bytes` at safe cuts (see
//! [`bpestore_pretokenize::next_safe_cut`]), where a cut cannot change a pre-token or a special
//! token, so the counts are those of the whole text. The cuts are found first, reading a small
//! window of the file around each target offset; then each worker thread reads one chunk at a
//! time into its own buffer and counts into its own table, and the tables are added up at the
//! end. No thread holds more than one chunk of text.

use std::fs::File;
use std::io;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use bpestore_pretokenize::{
    check_utf8, cut_at, find_cut, Part, PretokenizeError, Pretokenizer, SpecialTokens,
};

use crate::counts::{hash_bytes, HotCache};
use crate::error::CountError;
use crate::spill::{SpillOptions, Spiller};
use crate::PretokenCounts;

/// How big chunks of a file are, by default: big enough that cutting costs nothing, small enough
/// that a thread's chunk is a few MB of memory and progress moves often.
pub const DEFAULT_CHUNK_BYTES: usize = 4 << 20;

/// Counts the pre-tokens of `text` into `into`: the text is cut at its special tokens (which are
/// not counted), and each part between them is pre-tokenized on its own. An arbitrary pattern
/// that fails on the text (its backtracking limit hit, or text no match covers) is an error
/// whose offset is a byte offset in `text`; `into` is then unchanged.
pub fn count_text(
    text: &str,
    pretokenizer: &Pretokenizer,
    specials: &SpecialTokens,
    into: &mut PretokenCounts,
) -> Result<(), PretokenizeError> {
    let mut counter = Counter::new(pretokenizer, specials);
    counter.add_text(text)?;
    into.merge(&counter.finish()?);
    Ok(())
}

/// `error` (from pre-tokenizing `part`, a slice of `whole`) with its offset and text made those
/// of `whole`, plus `shift` (the offset of `whole` in a file).
fn relocate(error: PretokenizeError, part: &str, whole: &str, shift: u64) -> PretokenizeError {
    if !matches!(
        error,
        PretokenizeError::MatchFailed {
            offset: Some(_),
            ..
        }
    ) {
        return error;
    }
    // `part` borrows from `whole`: the address difference is its offset there.
    let part_start = (part.as_ptr() as usize).saturating_sub(whole.as_ptr() as usize);
    let shift = usize::try_from(shift).unwrap_or(usize::MAX);
    error
        .shifted(shift.saturating_add(part_start))
        .named("the corpus".to_string())
}

/// A segment's bytes as the text they are. Segments are cut only at ASCII spaces (`add_part`)
/// out of `str`s, so they are valid UTF-8: checked again here (as they were), that check was
/// most of a tenth of counting text that is mostly not ASCII (77 MB of 33 languages).
#[inline]
fn segment_text(segment: &[u8]) -> &str {
    debug_assert!(
        std::str::from_utf8(segment).is_ok(),
        "segments are cut at spaces"
    );
    // SAFETY: see above: a segment is a slice of a `str` between two character boundaries.
    unsafe { std::str::from_utf8_unchecked(segment) }
}

/// Distinct segments held before they are pre-tokenized and forgotten, per thread: enough to
/// see most segments many times, few enough that the table stays in the CPU caches as far as it
/// can (a bigger one is slower, measured on 200 MB of big_train.py's corpus). (In
/// tests, 3: folding often must not change a count.)
const MAX_SEGMENTS: usize = if cfg!(test) { 3 } else { 1 << 17 };

/// Counts pre-tokens, running the pre-tokenizer on distinct *segments* only.
///
/// For the split-safe patterns (see [`Pretokenizer::is_split_safe`]) a space between two
/// characters that are not whitespace is always a piece boundary, and the pieces on either side
/// are those of each side alone; so is the place after a newline between such characters (not
/// before a `/`: bpestore_pretokenize's cut rule). Text is cut there into segments (mostly a
/// word with its leading space: " the", " cat.", "end.\n"), and segments are counted in a hash
/// table: a corpus has far fewer distinct segments than segments, so the pre-tokenizer sees each
/// distinct one once (per fold), and counting costs about one hash lookup per word. For other
/// patterns each part is pre-tokenized whole.
struct Counter<'p> {
    pretokenizer: &'p Pretokenizer,
    specials: &'p SpecialTokens,
    segments: PretokenCounts,
    /// Distinct segments held before they are folded ([`MAX_SEGMENTS`], or fewer to stay
    /// within a spilling count's budget).
    max_segments: usize,
    hot: HotCache,
    /// The pre-token counts, unless they are kept in parts (`parted`).
    pretokens: PretokenCounts,
    /// The pre-token counts split by hash, when counting a file without a memory budget.
    parted: Option<Parted>,
}

/// Parts of a split by hash ([`PARTS`]); a part of a file's pre-tokens fits in the CPU's
/// second-level cache, where one table of them all does not.
const PART_BITS: u32 = 7;
const PARTS: usize = 1 << PART_BITS;

/// The part of the pre-token of hash `hash`: bits that pick neither a slot in a part's table
/// (the low bits) nor the tag kept beside it (the top 7), so that a part's table uses them all.
#[inline]
fn part_of(hash: u64) -> usize {
    ((hash >> 40) as usize) & (PARTS - 1)
}

/// A big corpus has millions of distinct pre-tokens, and each fold adds a hundred thousand
/// segments' pre-tokens to their counts: looked up one after another in one big table, each
/// lookup waits for memory several times (a fold was half of counting 1 GB). So the counts are
/// kept in [`PARTS`] parts by hash: a fold first sorts its pre-tokens into the parts (`pending`,
/// written in order, which the memory system does well), then adds each part's in turn, while
/// that part's table stays in the cache. The parts are joined at the end (each thread's parts
/// first added up part by part).
struct Parted {
    parts: Vec<PretokenCounts>,
    pending: Vec<Vec<PendingPiece>>,
}

/// A pre-token of a fold, waiting for its part: its hash, its place in the segments' bytes, and
/// its count.
#[derive(Clone, Copy)]
struct PendingPiece {
    hash: u64,
    start: usize,
    len: usize,
    count: u64,
}

impl Parted {
    fn new() -> Parted {
        Parted {
            parts: (0..PARTS).map(|_| PretokenCounts::new()).collect(),
            pending: (0..PARTS).map(|_| Vec::new()).collect(),
        }
    }
}

impl<'p> Counter<'p> {
    fn new(pretokenizer: &'p Pretokenizer, specials: &'p SpecialTokens) -> Counter<'p> {
        Counter {
            pretokenizer,
            specials,
            segments: PretokenCounts::new(),
            max_segments: MAX_SEGMENTS,
            hot: HotCache::new(),
            pretokens: PretokenCounts::new(),
            parted: None,
        }
    }

    /// A counter that keeps its pre-token counts in parts (see [`Parted`]) when it counts by
    /// segments (a split-safe pattern; other patterns count straight into one table, where
    /// parts would not help): for [`Counter::finish_parts`].
    fn parted(pretokenizer: &'p Pretokenizer, specials: &'p SpecialTokens) -> Counter<'p> {
        let mut counter = Counter::new(pretokenizer, specials);
        if pretokenizer.is_split_safe() {
            counter.parted = Some(Parted::new());
        }
        counter
    }

    /// Counts a text that may hold special tokens; a failed match is an error whose
    /// offset is in `text` (the counts so far are then of no use).
    fn add_text(&mut self, text: &str) -> Result<(), PretokenizeError> {
        if self.specials.is_empty() {
            return self.add_part(text);
        }
        let specials = self.specials;
        for part in specials.split(text) {
            if let Part::Text(part) = part {
                self.add_part(part)
                    .map_err(|error| relocate(error, part, text, 0))?;
            }
        }
        Ok(())
    }

    /// Counts a text that holds no special token.
    fn add_part(&mut self, part: &str) -> Result<(), PretokenizeError> {
        if !self.pretokenizer.is_split_safe() {
            let pretokens = &mut self.pretokens;
            return self
                .pretokenizer
                .try_for_each_piece(part, |piece| pretokens.add(piece.as_bytes(), 1));
        }
        let bytes = part.as_bytes();
        let mut start = 0;
        for at in memchr::memchr2_iter(b' ', b'\n', bytes) {
            // The cut rule (bpestore_pretokenize's `cut`): before a space, or after a newline,
            // between characters that are not whitespace. Lines cut so: the last word of a line
            // and the first of the next (`end.\nThe`) would otherwise be one segment, nearly
            // every one of them distinct, a third of the distinct segments of text written a
            // paragraph per line.
            let Some(cut) = cut_at(bytes, at) else {
                continue;
            };
            if cut > start {
                self.hot.add_one(&mut self.segments, bytes, start, cut);
                start = cut;
            }
        }
        self.hot
            .add_one(&mut self.segments, bytes, start, bytes.len());
        if self.segments.len() >= self.max_segments {
            self.fold()?;
        }
        Ok(())
    }

    /// Pre-tokenizes the distinct segments into the pre-token counts, and forgets them. (A
    /// segment's place in the text is not kept: a failed match here names no offset. Only the
    /// known patterns are split-safe, and their scanners never fail.)
    fn fold(&mut self) -> Result<(), PretokenizeError> {
        self.hot.flush(&mut self.segments);
        if self.parted.is_some() {
            return self.fold_parted();
        }
        for (segment, count) in self.segments.iter() {
            let segment = segment_text(segment);
            let pretokens = &mut self.pretokens;
            self.pretokenizer
                .try_for_each_piece(segment, |piece| pretokens.add(piece.as_bytes(), count))
                .map_err(|mut error| {
                    if let PretokenizeError::MatchFailed { offset, .. } = &mut error {
                        *offset = None;
                    }
                    error
                })?;
        }
        // The table fills up again at once: keep its memory rather than grow it anew.
        self.segments.clear_keeping_memory();
        Ok(())
    }

    /// [`Counter::fold`] into the parts (see [`Parted`]).
    fn fold_parted(&mut self) -> Result<(), PretokenizeError> {
        let Parted { parts, pending } = self.parted.as_mut().expect("a parted counter");
        let arena = self.segments.arena();
        let base = arena.as_ptr() as usize;
        for (segment, count) in self.segments.iter() {
            let segment = segment_text(segment);
            let add = |piece: &str| {
                let bytes = piece.as_bytes();
                let hash = hash_bytes(bytes);
                // A piece is a slice of its segment (the scanners' pieces borrow the text),
                // hence of the segments' bytes: its address gives its place there.
                let start = (bytes.as_ptr() as usize).wrapping_sub(base);
                if start <= arena.len() && bytes.len() <= arena.len() - start {
                    pending[part_of(hash)].push(PendingPiece {
                        hash,
                        start,
                        len: bytes.len(),
                        count,
                    });
                } else {
                    // (Not a slice of the segments: counted at once.)
                    parts[part_of(hash)].add_hashed(bytes, hash, count);
                }
            };
            self.pretokenizer
                .try_for_each_piece(segment, add)
                .map_err(|mut error| {
                    if let PretokenizeError::MatchFailed { offset, .. } = &mut error {
                        *offset = None;
                    }
                    error
                })?;
        }
        for (part, pieces) in parts.iter_mut().zip(pending.iter_mut()) {
            for piece in pieces.drain(..) {
                part.add_hashed(
                    &arena[piece.start..piece.start + piece.len],
                    piece.hash,
                    piece.count,
                );
            }
        }
        self.segments.clear_keeping_memory();
        Ok(())
    }

    /// Spills the pre-token counts to a run and forgets them if they are above the spiller's
    /// share. (Segments not folded yet stay: their table is bounded by `max_segments`.)
    fn spill_if_over(&mut self, spiller: &Spiller) -> Result<(), CountError> {
        if spiller.over_budget(&self.pretokens) {
            spiller.spill(&self.pretokens)?;
            self.pretokens.clear_keeping_memory();
        }
        Ok(())
    }

    /// The pre-token counts of everything added.
    fn finish(self) -> Result<PretokenCounts, PretokenizeError> {
        let mut parts = self.finish_parts()?;
        Ok(if parts.len() == 1 {
            parts.pop().expect("one part")
        } else {
            PretokenCounts::concat_disjoint(parts)
        })
    }

    /// The pre-token counts of everything added, in [`PARTS`] parts split by hash (the same
    /// split in every parted counter) if the counter is parted, else in one.
    fn finish_parts(mut self) -> Result<Vec<PretokenCounts>, PretokenizeError> {
        self.fold()?;
        Ok(match self.parted {
            Some(mut parted) => {
                // (Texts of a pattern that is not split-safe are counted without segments,
                // straight into `pretokens`.)
                for (pretoken, count) in self.pretokens.iter() {
                    let hash = hash_bytes(pretoken);
                    parted.parts[part_of(hash)].add_hashed(pretoken, hash, count);
                }
                parted.parts
            }
            None => vec![self.pretokens],
        })
    }
}

/// Counts the pre-tokens of a UTF-8 file (see [`count_text`]), with `threads` threads (0: one per
/// CPU) over chunks of about [`DEFAULT_CHUNK_BYTES`]. `progress` is called with the number of
/// bytes of each chunk counted (from the worker threads).
pub fn count_file(
    path: &Path,
    pretokenizer: &Pretokenizer,
    specials: &SpecialTokens,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<PretokenCounts, CountError> {
    let progress = |bytes| {
        progress(bytes);
        ControlFlow::Continue(())
    };
    count_file_in_chunks(
        path,
        pretokenizer,
        specials,
        threads,
        DEFAULT_CHUNK_BYTES,
        &progress,
    )
}

/// [`count_file`] with chunks of about `chunk_bytes` (at least 1; the counts do not depend on
/// it), and a progress callback that can stop the counting: once it returns `Break`, the threads
/// take no further chunk and the result is [`CountError::Stopped`].
pub fn count_file_in_chunks(
    path: &Path,
    pretokenizer: &Pretokenizer,
    specials: &SpecialTokens,
    threads: usize,
    chunk_bytes: usize,
    progress: &(dyn Fn(u64) -> ControlFlow<()> + Sync),
) -> Result<PretokenCounts, CountError> {
    count_file_spilling(
        path,
        pretokenizer,
        specials,
        threads,
        chunk_bytes,
        progress,
        None,
    )
}

/// [`count_file_in_chunks`], in bounded memory if `spill` is given: when a thread's table of
/// counts grows above its share of `max_bytes`, it is written to disk sorted (a run, in a
/// directory made in `dir`) and emptied; at the end the runs and the tables left are merged k
/// ways (see [`crate::spill`]), and only the pre-tokens counted at least `min_count` times in all
/// are kept. The counts are those of [`count_file_in_chunks`], pruned to `min_count`, whatever
/// the budget. The runs are removed however the count ends; failing to write or read them is
/// [`CountError::Spill`].
pub fn count_file_spilling(
    path: &Path,
    pretokenizer: &Pretokenizer,
    specials: &SpecialTokens,
    threads: usize,
    chunk_bytes: usize,
    progress: &(dyn Fn(u64) -> ControlFlow<()> + Sync),
    spill: Option<&SpillOptions>,
) -> Result<PretokenCounts, CountError> {
    let file = File::open(path)?;
    let size = file.metadata()?.len();
    let threads = if threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        threads
    };
    // A spilling count's chunks are a quarter of a thread's share at most (the text a thread
    // holds is memory too), and at least 64 KiB (cutting costs little then).
    let chunk_bytes = match spill {
        Some(options) => chunk_bytes.min((options.max_bytes / threads / 4).max(64 << 10)),
        None => chunk_bytes,
    };
    let boundaries = chunk_boundaries(
        &file,
        size,
        pretokenizer,
        specials,
        chunk_bytes.max(1) as u64,
    )?;
    let chunks: Vec<(u64, u64)> = boundaries.windows(2).map(|w| (w[0], w[1])).collect();
    let threads = threads.min(chunks.len()).max(1);
    let spiller = spill
        .map(|options| Spiller::new(options, threads))
        .transpose()?;

    let next_chunk = AtomicUsize::new(0);
    // The lowest chunk in which bad UTF-8 was found: chunks after it need no counting, but all
    // before it do, since one of them may hold an earlier bad byte.
    let first_bad_chunk = AtomicUsize::new(usize::MAX);
    let failures: Mutex<Vec<(usize, CountError)>> = Mutex::new(Vec::new());
    // Each thread's counts: in parts split by hash without a budget, else in one.
    let work = || -> Vec<PretokenCounts> {
        let mut counter = match spiller {
            Some(_) => Counter::new(pretokenizer, specials),
            None => Counter::parted(pretokenizer, specials),
        };
        if let Some(spiller) = &spiller {
            // Half a thread's share for its segments (32 bytes is about a segment's entry).
            counter.max_segments = (spiller.table_share() / 32).clamp(1, MAX_SEGMENTS);
        }
        let mut buffer = Vec::new();
        loop {
            let index = next_chunk.fetch_add(1, Ordering::Relaxed);
            if index >= chunks.len() || index > first_bad_chunk.load(Ordering::Relaxed) {
                let finished = counter
                    .finish_parts()
                    .map_err(CountError::Pattern)
                    .and_then(|mut parts| match &spiller {
                        Some(spiller) => {
                            // (A spilling counter's counts are in one part.)
                            let table = parts.pop().unwrap_or_default();
                            if spiller.over_budget(&table) {
                                spiller.spill(&table).map(|()| Vec::new())
                            } else {
                                Ok(vec![table])
                            }
                        }
                        None => Ok(parts),
                    });
                return finished.unwrap_or_else(|error| {
                    failures
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((chunks.len(), error));
                    Vec::new()
                });
            }
            let (start, end) = chunks[index];
            let result = read_chunk(&file, start, end, &mut buffer).and_then(|()| {
                let text = check_utf8(&buffer).map_err(|error| CountError::Decode {
                    offset: start + error.offset as u64,
                    reason: error.reason,
                })?;
                counter
                    .add_text(text)
                    .map_err(|error| CountError::Pattern(relocate(error, text, text, start)))?;
                match &spiller {
                    Some(spiller) => counter.spill_if_over(spiller),
                    None => Ok(()),
                }
            });
            if let Err(error) = result {
                first_bad_chunk.fetch_min(index, Ordering::Relaxed);
                failures
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((index, error));
                return Vec::new();
            }
            if progress(end - start).is_break() {
                first_bad_chunk.fetch_min(index, Ordering::Relaxed);
                failures
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((index, CountError::Stopped));
                return Vec::new();
            }
        }
    };
    let partial: Vec<Vec<PretokenCounts>> = if threads == 1 {
        vec![work()]
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads).map(|_| scope.spawn(work)).collect();
            handles
                .into_iter()
                .map(|handle| {
                    handle
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect()
        })
    };
    let failures = failures.into_inner().unwrap_or_else(|e| e.into_inner());
    if let Some((_, error)) = failures.into_iter().min_by_key(|(index, _)| *index) {
        return Err(match error {
            CountError::Decode { offset, reason } => first_bad_byte(&file, size, offset, reason)?,
            other => other,
        });
    }
    let counts = match spiller {
        Some(spiller) if spiller.spilled() => spiller.finish(partial.concat()),
        Some(spiller) => {
            let counts = partial
                .concat()
                .into_iter()
                .reduce(PretokenCounts::merged)
                .unwrap_or_default();
            Ok(if spiller.min_count() > 1 {
                counts.pruned(spiller.min_count())
            } else {
                counts
            })
        }
        None => Ok(add_up_parts(partial)),
    };
    // The threads' tables, freed, are still resident in their arenas: hand them back before
    // the caller goes on (to the merge loop, which would not reuse them).
    crate::release_free_memory();
    counts
}

/// The sum of the threads' counts, each in the same [`PARTS`] parts: part `i` of every thread
/// added up (the parts on both CPUs, each part's tables in the cache), then the parts joined;
/// or, if they are each in one table, those added up.
fn add_up_parts(threads: Vec<Vec<PretokenCounts>>) -> PretokenCounts {
    use rayon::prelude::*;
    if threads.iter().any(|parts| parts.len() != PARTS) {
        // Not parted (the pattern is not split-safe): one table per thread.
        return threads
            .into_iter()
            .flatten()
            .reduce(PretokenCounts::merged)
            .unwrap_or_default();
    }
    let mut by_part: Vec<Vec<PretokenCounts>> = (0..PARTS).map(|_| Vec::new()).collect();
    for parts in threads {
        for (part, counts) in by_part.iter_mut().zip(parts) {
            part.push(counts);
        }
    }
    let parts: Vec<PretokenCounts> = by_part
        .into_par_iter()
        .map(|tables| {
            tables
                .into_iter()
                .reduce(PretokenCounts::merged)
                .unwrap_or_default()
        })
        .collect();
    PretokenCounts::concat_disjoint(parts)
}

/// The decode error of a file whose first bad byte is at `offset`, with the reason Python's
/// decoder gives when it reads on: a chunk ends at a cut, so a sequence cut short by the end of
/// its chunk may, in the whole file, be followed by a byte that makes it an invalid one instead.
fn first_bad_byte(
    file: &File,
    size: u64,
    offset: u64,
    reason_in_chunk: &'static str,
) -> Result<CountError, CountError> {
    let mut bytes = Vec::new();
    read_chunk(file, offset, (offset + 4).min(size), &mut bytes)?;
    let reason = check_utf8(&bytes)
        .err()
        .map_or(reason_in_chunk, |error| error.reason);
    Ok(CountError::Decode { offset, reason })
}

/// The offsets at which [`count_file_in_chunks`] cuts a file into chunks (see
/// `chunk_boundaries`): `[0, ..., size]`.
pub fn file_chunk_boundaries(
    path: &Path,
    pretokenizer: &Pretokenizer,
    specials: &SpecialTokens,
    chunk_bytes: usize,
) -> Result<Vec<u64>, CountError> {
    let file = File::open(path)?;
    let size = file.metadata()?.len();
    chunk_boundaries(
        &file,
        size,
        pretokenizer,
        specials,
        chunk_bytes.max(1) as u64,
    )
}

/// Offsets `0 = b0 < b1 < ... < bn = size` (just `[0, 0]` for an empty file), each a safe cut,
/// about `chunk_bytes` apart where the text allows: each one the first cut at or after the last
/// one + 1 and at or after the next multiple of `chunk_bytes` (the rule of Python's
/// `corpus.chunk_boundaries`).
fn chunk_boundaries(
    file: &File,
    size: u64,
    pretokenizer: &Pretokenizer,
    specials: &SpecialTokens,
    chunk_bytes: u64,
) -> Result<Vec<u64>, CountError> {
    let mut boundaries = vec![0];
    let mut target = chunk_bytes;
    let mut window = Vec::new();
    while target < size {
        let cut = find_cut(
            size,
            target,
            pretokenizer,
            specials,
            &mut window,
            |start, end, window| read_chunk(file, start, end, window),
        )?;
        if cut >= size {
            break;
        }
        boundaries.push(cut);
        target = (cut + 1).max(target + chunk_bytes);
    }
    boundaries.push(size);
    Ok(boundaries)
}

/// Reads bytes `start..end` of `file` into `buffer` (replacing what it held).
fn read_chunk(file: &File, start: u64, end: u64, buffer: &mut Vec<u8>) -> Result<(), CountError> {
    let len =
        usize::try_from(end - start).map_err(|_| io::Error::other("a chunk too big for memory"))?;
    buffer.clear();
    buffer.resize(len, 0);
    read_exact_at(file, buffer, start)?;
    Ok(())
}

#[cfg(unix)]
fn read_exact_at(file: &File, buffer: &mut [u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buffer, offset)
}

#[cfg(windows)]
fn read_exact_at(file: &File, mut buffer: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !buffer.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, buffer, offset) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buffer = &mut buffer[n..];
                offset += n as u64;
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bpestore_pretokenize::{MatchFailure, GPT2_PATTERN};
    use std::collections::HashMap;
    use std::io::Write;

    fn as_map(counts: &PretokenCounts) -> HashMap<Vec<u8>, u64> {
        counts.iter().map(|(k, v)| (k.to_vec(), v)).collect()
    }

    fn whole_text_counts(
        text: &str,
        pretokenizer: &Pretokenizer,
        specials: &SpecialTokens,
    ) -> HashMap<Vec<u8>, u64> {
        let mut counts = PretokenCounts::new();
        count_text(text, pretokenizer, specials, &mut counts).unwrap();
        as_map(&counts)
    }

    fn temp_file(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let path =
            std::env::temp_dir().join(format!("bpestore-train-{}-{name}", std::process::id()));
        File::create(&path).unwrap().write_all(bytes).unwrap();
        path
    }

    const TEXT: &str = "the cat sat  on\tthe mat<|endoftext|> the  dog<|endoftext|><|endoftext|>ran\n\n  \
                        away<a> x <b><a>y  don't 'll 中文 日本語 😀😀 1234 ٣৩ ...!! \r\n end<| sep |> q ";

    #[test]
    fn counting_by_segments_equals_pretokenizing_everything() {
        // Spaces next to every kind of whitespace, at the ends, doubled, and between other scripts.
        let texts = [
            TEXT,
            " a  b \n c\u{3000} d \u{3000}e\u{a0} f \u{85}g \x1c h\x1c i \t",
            "  lead",
            "trail  ",
            " ",
            "",
            "x y",
            "中 文 😀 ,a .b 'll 's",
            "a \u{2028} b \u{205f}c",
        ];
        for pattern in [
            GPT2_PATTERN,
            bpestore_pretokenize::CL100K_PATTERN,
            bpestore_pretokenize::O200K_PATTERN,
        ] {
            let pretokenizer = Pretokenizer::new(pattern).unwrap();
            let specials = SpecialTokens::new(&[]);
            for text in texts {
                let mut direct = HashMap::new();
                pretokenizer.for_each_piece(text, |piece| {
                    *direct.entry(piece.as_bytes().to_vec()).or_default() += 1
                });
                assert_eq!(
                    whole_text_counts(text, &pretokenizer, &specials),
                    direct,
                    "{text:?}"
                );
            }
        }
    }

    /// Counting cuts text into segments before spaces and after newlines (the cut rule); the
    /// counts must be those of the regex engine run over the whole text, for every known
    /// pattern, on random text made of the characters around which the rule decides: newlines
    /// before `/` (o200k's punctuation takes `[\r\n/]*`), `\r\n`, doubled newlines, punctuation
    /// that takes a newline (cl100k, o200k), contractions, digits, and whitespace that is not
    /// ASCII. A rule that cuts after any newline, or before `/`, fails this.
    #[test]
    fn counting_by_segments_equals_the_regex_engine_around_newlines() {
        let alphabet: Vec<&str> = vec![
            "\n", "\n", "\n", "\n", " ", " ", " ", "\r", "/", "/", ".", ",", "'", "'s", "a", "b",
            "Ab", "cD", "1", "23", "中", "é", "\u{3000}", "\u{a0}", "\u{85}", "\t", "-", "😀",
        ];
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let specials = SpecialTokens::new(&[]);
        for pattern in bpestore_pretokenize::KNOWN_PATTERNS {
            let pretokenizer = Pretokenizer::new(pattern).unwrap();
            let regex = Pretokenizer::with_regex_engine(pattern).unwrap();
            for _ in 0..300 {
                let length = 1 + next() as usize % 24;
                let text: String = (0..length)
                    .map(|_| alphabet[next() as usize % alphabet.len()])
                    .collect();
                let mut direct = HashMap::new();
                regex.for_each_piece(&text, |piece| {
                    *direct.entry(piece.as_bytes().to_vec()).or_default() += 1
                });
                assert_eq!(
                    whole_text_counts(&text, &pretokenizer, &specials),
                    direct,
                    "{pattern} {text:?}"
                );
            }
        }
    }

    /// Patterns that pass the probes at construction yet fail on some text, each with a text on
    /// which it fails at byte 1: catastrophic on runs of "ab" not followed by "c" (the probes are
    /// runs of one character), and one that covers no Braille pattern (the probes hold none).
    const FAILING: [(&str, &str, MatchFailure); 2] = [
        (
            r"(?:a(?=b)b|a(?=b)b)+c|[\s\S]",
            "zabababababababababababababababababababababd",
            MatchFailure::Backtracking,
        ),
        (
            r"[^\s\p{Braille}]+|\s",
            "z\u{2801}d",
            MatchFailure::Uncovered('\u{2801}'),
        ),
    ];

    /// The offset of `error`, a [`PretokenizeError::MatchFailed`] failing as `expected`.
    fn failed_at(error: &PretokenizeError, expected: MatchFailure) -> Option<usize> {
        match error {
            PretokenizeError::MatchFailed {
                failure, offset, ..
            } if *failure == expected => *offset,
            other => panic!("not a {expected:?} failure: {other}"),
        }
    }

    #[test]
    fn a_failed_match_is_an_error_with_its_offset() {
        for (pattern, bad_part, failure) in FAILING {
            let pretokenizer = Pretokenizer::with_backtrack_limit(pattern, 10_000).unwrap();
            let specials = SpecialTokens::new(&["<s>".to_string()]);
            let bad = format!("xy<s>{bad_part}");
            let mut counts = PretokenCounts::new();
            let error = count_text(&bad, &pretokenizer, &specials, &mut counts).unwrap_err();
            assert_eq!(failed_at(&error, failure), Some(6), "{error}");
            assert!(
                error.to_string().contains("at byte 6 of the corpus"),
                "{error}"
            );
            assert_eq!(counts.len(), 0);
            // the same text in a file, after 1000 bytes that are fine, over several chunks
            let good = "abc xyz ".repeat(125);
            let path = temp_file("failing", format!("{good}{bad}").as_bytes());
            for (threads, chunk) in [(1, 1 << 20), (2, 64)] {
                let never_stop = |_: u64| ControlFlow::Continue(());
                let result = count_file_in_chunks(
                    &path,
                    &pretokenizer,
                    &specials,
                    threads,
                    chunk,
                    &never_stop,
                );
                match result {
                    Err(CountError::Pattern(error)) => {
                        assert_eq!(failed_at(&error, failure), Some(1006), "{error}")
                    }
                    other => panic!("{:?}", other.map(|c| c.len())),
                }
            }
            std::fs::remove_file(path).unwrap();
        }
    }

    #[test]
    fn special_tokens_are_cut_out_and_not_counted() {
        let pretokenizer = Pretokenizer::new(GPT2_PATTERN).unwrap();
        let specials = SpecialTokens::new(&["<|endoftext|>".to_string()]);
        let counts = whole_text_counts("a b<|endoftext|> a<|endoftext|>", &pretokenizer, &specials);
        let expected: HashMap<Vec<u8>, u64> =
            [(b"a".to_vec(), 1), (b" b".to_vec(), 1), (b" a".to_vec(), 1)]
                .into_iter()
                .collect();
        assert_eq!(counts, expected);
    }

    #[test]
    fn file_counts_equal_text_counts_for_every_chunk_size_and_thread_count() {
        let pretokenizer = Pretokenizer::new(GPT2_PATTERN).unwrap();
        let path = temp_file("chunks", TEXT.as_bytes());
        let token_sets: [&[&str]; 4] = [
            &[],
            &["<|endoftext|>"],
            &["<a>", "<b>"],
            &["<| sep |>", "<|endoftext|>"],
        ];
        for tokens in token_sets {
            let specials =
                SpecialTokens::new(&tokens.iter().map(|t| t.to_string()).collect::<Vec<_>>());
            let expected = whole_text_counts(TEXT, &pretokenizer, &specials);
            for chunk_bytes in 1..=TEXT.len() + 1 {
                for threads in [1, 2, 3] {
                    let done = std::sync::atomic::AtomicU64::new(0);
                    let progress = |n: u64| {
                        done.fetch_add(n, Ordering::Relaxed);
                        ControlFlow::Continue(())
                    };
                    let counts = count_file_in_chunks(
                        &path,
                        &pretokenizer,
                        &specials,
                        threads,
                        chunk_bytes,
                        &progress,
                    )
                    .unwrap();
                    assert_eq!(
                        as_map(&counts),
                        expected,
                        "{tokens:?} {chunk_bytes} {threads}"
                    );
                    assert_eq!(done.into_inner(), TEXT.len() as u64);
                }
            }
        }
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn the_first_bad_byte_is_reported_whichever_chunk_fails_first() {
        let pretokenizer = Pretokenizer::new(GPT2_PATTERN).unwrap();
        let specials = SpecialTokens::new(&[]);
        let mut bytes = b"good words here ".repeat(50);
        let first_bad = bytes.len() as u64;
        bytes.extend_from_slice(b"\xe2\x82 more words ");
        bytes.extend_from_slice(&b"other words ".repeat(40));
        bytes.extend_from_slice(b"\xff later");
        let path = temp_file("bad", &bytes);
        for chunk_bytes in [1, 7, 16, 64, 1000, 1 << 20] {
            for threads in [1, 2] {
                let go_on = |_| ControlFlow::Continue(());
                let error = count_file_in_chunks(
                    &path,
                    &pretokenizer,
                    &specials,
                    threads,
                    chunk_bytes,
                    &go_on,
                )
                .unwrap_err();
                match error {
                    CountError::Decode { offset, reason } => {
                        assert_eq!(
                            (offset, reason),
                            (first_bad, "invalid continuation byte"),
                            "{chunk_bytes}"
                        );
                    }
                    other => panic!("{other}"),
                }
            }
        }
        // Cut short by the end of the file: Python's words for it.
        let path_end = temp_file("bad-end", b"abc \xe2\x82");
        match count_file(&path_end, &pretokenizer, &specials, 1, &|_| {}).unwrap_err() {
            CountError::Decode { offset, reason } => {
                assert_eq!((offset, reason), (4, "unexpected end of data"))
            }
            other => panic!("{other}"),
        }
        std::fs::remove_file(path).unwrap();
        std::fs::remove_file(path_end).unwrap();
    }

    #[test]
    fn progress_can_stop_the_counting() {
        let pretokenizer = Pretokenizer::new(GPT2_PATTERN).unwrap();
        let path = temp_file("stop", &b"some words ".repeat(1000));
        let calls = AtomicUsize::new(0);
        let stop_at_third = |_| {
            if calls.fetch_add(1, Ordering::Relaxed) == 2 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        };
        let error = count_file_in_chunks(
            &path,
            &pretokenizer,
            &SpecialTokens::new(&[]),
            2,
            100,
            &stop_at_third,
        )
        .unwrap_err();
        assert!(matches!(error, CountError::Stopped), "{error}");
        assert!(
            calls.into_inner() < 10,
            "the threads went on after the stop"
        );
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn a_missing_file_is_an_io_error() {
        let pretokenizer = Pretokenizer::new(GPT2_PATTERN).unwrap();
        let missing = std::env::temp_dir().join("bpestore-train-no-such-file");
        let error = count_file(
            &missing,
            &pretokenizer,
            &SpecialTokens::new(&[]),
            1,
            &|_| {},
        )
        .unwrap_err();
        assert!(
            matches!(error, CountError::Io(ref e) if e.kind() == io::ErrorKind::NotFound),
            "{error}"
        );
    }

    /// Text shaped like a language's: a few frequent words and many rare ones, over many lines.
    fn generated_text(words: usize, seed: u64) -> String {
        let mut state = seed;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut text = String::new();
        for i in 0..words {
            let r = next();
            let word = match r % 10 {
                0..=5 => ["the", "a", "cat", "sat", "on", "mat"][(r >> 8) as usize % 6].to_string(),
                6 | 7 => format!("w{}", (r >> 8) % 500),
                8 => format!("r{}x", (r >> 8) % 100_000),
                _ => ["中文", "😀", "don't", "1234", "...!!"][(r >> 8) as usize % 5].to_string(),
            };
            text.push_str(&word);
            text.push_str(match i % 17 {
                0 => "\n",
                5 => "  ",
                9 => "<|endoftext|>",
                _ => " ",
            });
        }
        text
    }

    #[test]
    fn spill_counts_equal_in_memory_counts_for_any_budget() {
        let specials = SpecialTokens::new(&["<|endoftext|>".to_string()]);
        let path = temp_file("spill", generated_text(20_000, 7).as_bytes());
        let go_on = |_: u64| ControlFlow::Continue(());
        for pattern in [GPT2_PATTERN, r"\p{L}+|\p{N}+|\s+|[^\s\p{L}\p{N}]+"] {
            let pretokenizer = Pretokenizer::new(pattern).unwrap();
            let expected =
                count_file_in_chunks(&path, &pretokenizer, &specials, 2, 4096, &go_on).unwrap();
            // 1 byte: a spill after every chunk; fan-in 2: merges of merges.
            for (budget, threads, fan_in) in [
                (1, 1, 64),
                (1, 2, 2),
                (1, 3, 3),
                (5000, 2, 64),
                (1 << 30, 2, 64),
            ] {
                for min_count in [1, 2, 5] {
                    let options = SpillOptions {
                        max_bytes: budget,
                        dir: std::env::temp_dir(),
                        min_count,
                        fan_in,
                    };
                    let counts = count_file_spilling(
                        &path,
                        &pretokenizer,
                        &specials,
                        threads,
                        4096,
                        &go_on,
                        Some(&options),
                    )
                    .unwrap();
                    let pruned = expected.pruned(min_count);
                    assert_eq!(
                        as_map(&counts),
                        as_map(&pruned),
                        "{pattern} {budget} {threads} {fan_in} {min_count}"
                    );
                    assert_eq!(counts.total(), pruned.total());
                }
            }
        }
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn spill_runs_are_removed_after_an_error() {
        let pretokenizer = Pretokenizer::new(GPT2_PATTERN).unwrap();
        let mut bytes = generated_text(5000, 3).into_bytes();
        bytes.extend_from_slice(b" \xff tail");
        let path = temp_file("spill-bad", &bytes);
        let parent =
            std::env::temp_dir().join(format!("bpestore-spill-test-{}", std::process::id()));
        std::fs::create_dir_all(&parent).unwrap();
        let options = SpillOptions::new(1, &parent);
        let go_on = |_: u64| ControlFlow::Continue(());
        let error = count_file_spilling(
            &path,
            &pretokenizer,
            &SpecialTokens::new(&[]),
            2,
            1000,
            &go_on,
            Some(&options),
        )
        .unwrap_err();
        assert!(matches!(error, CountError::Decode { .. }), "{error}");
        assert_eq!(std::fs::read_dir(&parent).unwrap().count(), 0);
        std::fs::remove_dir(&parent).unwrap();
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn spill_runs_are_removed_after_a_panic() {
        let pretokenizer = Pretokenizer::new(GPT2_PATTERN).unwrap();
        let path = temp_file("spill-panic", generated_text(5000, 4).as_bytes());
        let parent =
            std::env::temp_dir().join(format!("bpestore-spill-panic-{}", std::process::id()));
        std::fs::create_dir_all(&parent).unwrap();
        let options = SpillOptions::new(1, &parent);
        let calls = AtomicUsize::new(0);
        let panic_at_fifth = |_: u64| {
            assert!(calls.fetch_add(1, Ordering::Relaxed) < 4, "a planned panic");
            ControlFlow::Continue(())
        };
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            count_file_spilling(
                &path,
                &pretokenizer,
                &SpecialTokens::new(&[]),
                2,
                1000,
                &panic_at_fifth,
                Some(&options),
            )
        }));
        assert!(result.is_err());
        assert_eq!(std::fs::read_dir(&parent).unwrap().count(), 0);
        std::fs::remove_dir(&parent).unwrap();
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn an_empty_file_has_no_pretokens() {
        let pretokenizer = Pretokenizer::new(GPT2_PATTERN).unwrap();
        let path = temp_file("empty", b"");
        let counts =
            count_file(&path, &pretokenizer, &SpecialTokens::new(&[]), 2, &|_| {}).unwrap();
        assert!(counts.is_empty());
        std::fs::remove_file(path).unwrap();
    }
}
