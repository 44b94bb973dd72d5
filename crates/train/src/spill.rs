//! Counting in bounded memory: sorted runs of partial counts spilled to disk, then merged k ways.
//!
//! A spilling count ([`crate::count_file_spilling`]) counts as the in-memory one does (chunks on
//! threads), but when a thread's table of pre-token counts takes more than its share of the
//! budget ([`PretokenCounts::entry_bytes`], checked after each chunk), the thread writes the
//! table to a *run* file, its entries sorted by their bytes, and empties it. At the end the runs
//! and the tables left in memory are merged k ways (a heap over one reader per run), equal
//! pre-tokens summed, in byte order; a minimum count is applied to those sums, so pruning is
//! exact. The result is the in-memory counter's, pre-token for pre-token.
//!
//! Runs live in a directory of their own, made in the directory the caller gives and removed
//! when the count ends, however it ends (an error, a panic: [`SpillDir`] is a guard). Records are
//! the pre-token's length, its bytes and its count, the numbers as LEB128 varints.

use std::cmp::Ordering as CmpOrdering;
use std::collections::binary_heap::PeekMut;
use std::collections::BinaryHeap;
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::error::CountError;
use crate::PretokenCounts;

/// The most runs merged at once, by default: more are first merged into fewer, bigger runs (so
/// that a count never holds more than this many files open).
pub const DEFAULT_FAN_IN: usize = 64;

/// How a spilling count bounds its memory.
#[derive(Clone, Debug)]
pub struct SpillOptions {
    /// The most bytes the threads' tables hold together (by [`PretokenCounts::entry_bytes`]),
    /// half for the pre-token counts (spilled to disk beyond) and half for the segments waiting
    /// to be pre-tokenized (folded sooner); the threads' chunks of text are at most a quarter of
    /// a thread's share (and at least 64 KiB). The result, and the growth of tables by doubling,
    /// come on top.
    pub max_bytes: usize,
    /// The directory in which the runs' own directory is made.
    pub dir: PathBuf,
    /// Keep only the pre-tokens counted at least this many times in all (0 or 1: keep all).
    pub min_count: u64,
    /// The most runs merged at once (at least 2).
    pub fan_in: usize,
}

impl SpillOptions {
    /// At most `max_bytes` of counts, runs in `dir`, every pre-token kept.
    pub fn new(max_bytes: usize, dir: impl Into<PathBuf>) -> SpillOptions {
        SpillOptions {
            max_bytes,
            dir: dir.into(),
            min_count: 1,
            fan_in: DEFAULT_FAN_IN,
        }
    }
}

/// A directory of run files, removed with everything in it when dropped.
struct SpillDir {
    path: PathBuf,
}

impl SpillDir {
    /// A new directory in `parent`, named after this process (and a number, unique in it).
    fn create(parent: &Path) -> io::Result<SpillDir> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        loop {
            let number = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = parent.join(format!("bpestore-spill-{}-{number}", std::process::id()));
            match fs::create_dir(&path) {
                Ok(()) => return Ok(SpillDir { path }),
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(error) => return Err(error),
            }
        }
    }
}

impl Drop for SpillDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// The spilling side of one count: the budget, the runs written so far and their directory.
pub(crate) struct Spiller {
    dir: SpillDir,
    /// The directory the caller gave, which errors name.
    parent: PathBuf,
    /// One thread's share of the budget.
    share: usize,
    min_count: u64,
    fan_in: usize,
    /// The buffer of each run reader and writer.
    buffer_bytes: usize,
    runs: Mutex<Vec<PathBuf>>,
    next_run: AtomicUsize,
}

impl Spiller {
    /// Makes the runs' directory (an error names `options.dir`).
    pub(crate) fn new(options: &SpillOptions, threads: usize) -> Result<Spiller, CountError> {
        let fan_in = options.fan_in.max(2);
        let dir = SpillDir::create(&options.dir).map_err(|error| CountError::Spill {
            dir: options.dir.clone(),
            error,
        })?;
        Ok(Spiller {
            dir,
            parent: options.dir.clone(),
            share: (options.max_bytes / threads.max(1)).max(1),
            min_count: options.min_count.max(1),
            fan_in,
            buffer_bytes: (options.max_bytes / (2 * fan_in)).clamp(16 << 10, 1 << 20),
            runs: Mutex::new(Vec::new()),
            next_run: AtomicUsize::new(0),
        })
    }

    fn error(&self, error: io::Error) -> CountError {
        CountError::Spill {
            dir: self.parent.clone(),
            error,
        }
    }

    /// The part of a thread's share for each of its two tables: the pre-token counts, and the
    /// segments not yet pre-tokenized (see `crate::count`).
    pub(crate) fn table_share(&self) -> usize {
        (self.share / 2).max(1)
    }

    /// Whether a thread holding `counts` is above its share for them and must spill them.
    pub(crate) fn over_budget(&self, counts: &PretokenCounts) -> bool {
        counts.entry_bytes() > self.table_share()
    }

    /// Writes `counts` as a run (the caller then empties them).
    pub(crate) fn spill(&self, counts: &PretokenCounts) -> Result<(), CountError> {
        let path = self.new_run_path();
        (|| -> io::Result<()> {
            let mut out = BufWriter::with_capacity(self.buffer_bytes, File::create(&path)?);
            for id in counts.sorted_ids() {
                write_record(&mut out, counts.pretoken(id), counts.count_of(id))?;
            }
            out.flush()
        })()
        .map_err(|error| self.error(error))?;
        self.runs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(path);
        Ok(())
    }

    /// Whether any run was written.
    pub(crate) fn spilled(&self) -> bool {
        !self
            .runs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// The minimum count to keep a pre-token.
    pub(crate) fn min_count(&self) -> u64 {
        self.min_count
    }

    fn new_run_path(&self) -> PathBuf {
        let number = self.next_run.fetch_add(1, Ordering::Relaxed);
        self.dir.path.join(format!("run-{number}"))
    }

    /// The sum of the runs and of `tables` (the threads' counts left in memory), without the
    /// pre-tokens counted fewer than the minimum count in all. The runs are gone afterwards.
    pub(crate) fn finish(self, tables: Vec<PretokenCounts>) -> Result<PretokenCounts, CountError> {
        let mut runs = std::mem::take(&mut *self.runs.lock().unwrap_or_else(|e| e.into_inner()));
        // Too many runs to open at once: merge the oldest into bigger ones first.
        while runs.len() > self.fan_in {
            let group: Vec<PathBuf> = runs.drain(..self.fan_in).collect();
            let path = self.new_run_path();
            (|| -> io::Result<()> {
                let sources = group
                    .iter()
                    .map(|run| RunReader::open(run, self.buffer_bytes).map(Source::File))
                    .collect::<io::Result<Vec<_>>>()?;
                let mut out = BufWriter::with_capacity(self.buffer_bytes, File::create(&path)?);
                merge_sources(sources, |pretoken, count| {
                    write_record(&mut out, pretoken, count)
                })?;
                out.flush()?;
                for run in &group {
                    fs::remove_file(run)?;
                }
                Ok(())
            })()
            .map_err(|error| self.error(error))?;
            runs.push(path);
        }
        let mut sources = runs
            .iter()
            .map(|run| RunReader::open(run, self.buffer_bytes).map(Source::File))
            .collect::<io::Result<Vec<_>>>()
            .map_err(|error| self.error(error))?;
        sources.extend(
            tables
                .into_iter()
                .filter(|table| !table.is_empty())
                .map(Source::memory),
        );
        let mut result = PretokenCounts::new();
        let min_count = self.min_count;
        merge_sources(sources, |pretoken, count| {
            if count >= min_count {
                result.add(pretoken, count);
            }
            Ok(())
        })
        .map_err(|error| self.error(error))?;
        Ok(result)
        // (`self.dir` is dropped here: the runs are removed.)
    }
}

fn write_varint(out: &mut impl Write, mut value: u64) -> io::Result<()> {
    let mut bytes = [0u8; 10];
    let mut len = 0;
    loop {
        let low = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            bytes[len] = low;
            len += 1;
            break;
        }
        bytes[len] = low | 0x80;
        len += 1;
    }
    out.write_all(&bytes[..len])
}

/// One record of a run: the pre-token's length, its bytes, its count.
fn write_record(out: &mut impl Write, pretoken: &[u8], count: u64) -> io::Result<()> {
    write_varint(out, pretoken.len() as u64)?;
    out.write_all(pretoken)?;
    write_varint(out, count)
}

/// Reads a run's records in order.
struct RunReader {
    input: BufReader<File>,
}

impl RunReader {
    fn open(path: &Path, buffer_bytes: usize) -> io::Result<RunReader> {
        Ok(RunReader {
            input: BufReader::with_capacity(buffer_bytes, File::open(path)?),
        })
    }

    /// The next byte, or None at the end of the run.
    #[inline]
    fn byte(&mut self) -> io::Result<Option<u8>> {
        let Some(&byte) = self.input.fill_buf()?.first() else {
            return Ok(None);
        };
        self.input.consume(1);
        Ok(Some(byte))
    }

    /// A varint, or None at the end of the run (before its first byte).
    fn varint(&mut self) -> io::Result<Option<u64>> {
        let mut value = 0u64;
        let mut shift = 0;
        loop {
            let Some(byte) = self.byte()? else {
                return if shift == 0 { Ok(None) } else { Err(damaged()) };
            };
            if shift > 63 {
                return Err(damaged());
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(Some(value));
            }
            shift += 7;
        }
    }

    /// The next record's pre-token (into `key`) and count, or None at the end of the run.
    fn next_into(&mut self, key: &mut Vec<u8>) -> io::Result<Option<u64>> {
        let Some(len) = self.varint()? else {
            return Ok(None);
        };
        let len = usize::try_from(len).map_err(|_| damaged())?;
        key.clear();
        key.resize(len, 0);
        self.input.read_exact(key)?;
        self.varint()?.ok_or_else(damaged).map(Some)
    }
}

fn damaged() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "a damaged run file")
}

/// What the k-way merge reads: a run on disk, or a table still in memory (in byte order).
enum Source {
    File(RunReader),
    Memory {
        counts: PretokenCounts,
        order: std::vec::IntoIter<u32>,
    },
}

impl Source {
    fn memory(counts: PretokenCounts) -> Source {
        let order = counts.sorted_ids().into_iter();
        Source::Memory { counts, order }
    }

    fn next_into(&mut self, key: &mut Vec<u8>) -> io::Result<Option<u64>> {
        match self {
            Source::File(reader) => reader.next_into(key),
            Source::Memory { counts, order } => Ok(order.next().map(|id| {
                key.clear();
                key.extend_from_slice(counts.pretoken(id));
                counts.count_of(id)
            })),
        }
    }
}

/// The current record of one source, in the heap: the smallest pre-token on top.
struct Head {
    key: Vec<u8>,
    count: u64,
    source: usize,
}

impl Ord for Head {
    fn cmp(&self, other: &Head) -> CmpOrdering {
        // Reversed: `BinaryHeap` keeps the greatest on top.
        other
            .key
            .cmp(&self.key)
            .then_with(|| other.source.cmp(&self.source))
    }
}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Head) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Head {
    fn eq(&self, other: &Head) -> bool {
        self.cmp(other) == CmpOrdering::Equal
    }
}

impl Eq for Head {}

/// Merges sources each in byte order of their pre-tokens (each pre-token once in a source):
/// `emit` gets every pre-token once, in byte order, with the sum of its counts.
fn merge_sources(
    mut sources: Vec<Source>,
    mut emit: impl FnMut(&[u8], u64) -> io::Result<()>,
) -> io::Result<()> {
    let mut heap = BinaryHeap::with_capacity(sources.len());
    for (index, source) in sources.iter_mut().enumerate() {
        let mut key = Vec::new();
        if let Some(count) = source.next_into(&mut key)? {
            heap.push(Head {
                key,
                count,
                source: index,
            });
        }
    }
    let mut current = Vec::new();
    let mut sum: Option<u64> = None;
    while let Some(mut top) = heap.peek_mut() {
        match sum {
            Some(total) if top.key == current => sum = Some(total + top.count),
            _ => {
                if let Some(total) = sum {
                    emit(&current, total)?;
                }
                current.clear();
                current.extend_from_slice(&top.key);
                sum = Some(top.count);
            }
        }
        let head = &mut *top;
        match sources[head.source].next_into(&mut head.key)? {
            // The top changed: dropping `top` moves it down to its place.
            Some(count) => head.count = count,
            None => {
                PeekMut::pop(top);
            }
        }
    }
    if let Some(total) = sum {
        emit(&current, total)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_round_trip_and_merge_in_byte_order() {
        let parent = std::env::temp_dir();
        let options = SpillOptions::new(1, &parent);
        let spiller = Spiller::new(&options, 1).unwrap();
        let dir = spiller.dir.path.clone();
        let a: PretokenCounts = [(&b"b"[..], 2), (&b""[..], 1), (&b"\xff"[..], u64::MAX / 4)]
            .into_iter()
            .collect();
        let b: PretokenCounts = [(&b"a"[..], 5), (&b"b"[..], 3), (&b"\xff"[..], 1)]
            .into_iter()
            .collect();
        spiller.spill(&a).unwrap();
        spiller.spill(&b).unwrap();
        assert!(spiller.spilled());
        let memory: PretokenCounts = [(&b"a"[..], 1), (&b"c"[..], 1)].into_iter().collect();
        let result = spiller.finish(vec![memory, PretokenCounts::new()]).unwrap();
        let mut got: Vec<(Vec<u8>, u64)> = result.iter().map(|(k, v)| (k.to_vec(), v)).collect();
        got.sort();
        assert_eq!(
            got,
            vec![
                (b"".to_vec(), 1),
                (b"a".to_vec(), 6),
                (b"b".to_vec(), 5),
                (b"c".to_vec(), 1),
                (b"\xff".to_vec(), u64::MAX / 4 + 1),
            ]
        );
        assert!(!dir.exists(), "the runs' directory is left behind");
    }

    #[test]
    fn an_unwritable_dir_is_a_spill_error_naming_it() {
        let missing = std::env::temp_dir().join("bpestore-spill-no-such-dir/deeper");
        match Spiller::new(&SpillOptions::new(1, &missing), 1) {
            Err(CountError::Spill { dir, error }) => {
                assert_eq!(dir, missing);
                assert_eq!(error.kind(), io::ErrorKind::NotFound);
            }
            _ => panic!("not a spill error"),
        }
    }
}
