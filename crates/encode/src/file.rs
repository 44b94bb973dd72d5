//! A UTF-8 file encoded on several threads into a 1-D `.npy` array, in bounded memory.
//!
//! This thread reads the file in chunks cut at safe places (`next_safe_cut`: the ids of a chunk
//! do not depend on its neighbours), checks each chunk's UTF-8 in file order (so the error names
//! the file's first bad byte), and hands chunks to the workers; it writes their ids in order as
//! they come, at most `2 * threads` chunks ahead of the one being written. The array goes to a
//! hidden temporary file beside `OUTPUT` ([`partial_path`]), which is not a valid `.npy` until
//! its header is written last, and is renamed to `OUTPUT` once complete.
//!
//! A chunk the pattern gives up on ([`FileError::Pattern`]) stops the job like any other error:
//! the chunks before it are still encoded (an earlier one may fail too, and the first failure
//! in the file is the one reported), those after it are not.

use crate::{AllowedSpecial, Dropout, Encoder, TokenId};
use bpestore_pretokenize::{check_utf8, next_safe_cut, PretokenizeError};
use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};

/// Chunks hold about this many bytes of text.
pub const DEFAULT_CHUNK_BYTES: usize = 1 << 20;
/// The `.npy` header's fixed size (rewritten with the length at the end).
const NPY_HEADER_BYTES: usize = 128;

/// The element type of the `.npy` array: the smallest that holds every id, as bpestore writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NpyDtype {
    /// `<u2`: every id is below 65,536.
    U16,
    /// `<u4`.
    U32,
}

impl NpyDtype {
    fn descr(self) -> &'static str {
        match self {
            NpyDtype::U16 => "<u2",
            NpyDtype::U32 => "<u4",
        }
    }

    /// Bytes per id in the array.
    fn width(self) -> usize {
        match self {
            NpyDtype::U16 => 2,
            NpyDtype::U32 => 4,
        }
    }

    /// `ids` laid out as the array holds them (little-endian), in a buffer of just that size.
    fn laid_out(self, ids: &[TokenId]) -> Vec<u8> {
        let mut data = Vec::with_capacity(ids.len() * self.width());
        match self {
            NpyDtype::U16 => data.extend(ids.iter().flat_map(|&id| (id as u16).to_le_bytes())),
            NpyDtype::U32 => data.extend(ids.iter().flat_map(|&id| id.to_le_bytes())),
        }
        data
    }
}

/// What can stop a file from being encoded.
#[derive(Debug)]
pub enum FileError {
    /// Reading the input or writing the output failed.
    Io(io::Error),
    /// The input is not valid UTF-8: the first bad byte's offset in the file, and Python's words
    /// for what is wrong ("invalid start byte", ...).
    Decode {
        /// Offset of the first bad byte.
        offset: u64,
        /// Why it is bad.
        reason: &'static str,
    },
    /// The pre-tokenizer pattern failed on the text (a [`PretokenizeError::MatchFailed`] whose
    /// offset is in the file: where the match that gave up started, or the first byte no match
    /// covers).
    Pattern(PretokenizeError),
    /// The progress callback asked to stop.
    Cancelled,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileError::Io(error) => write!(f, "{error}"),
            FileError::Decode { offset, reason } => {
                write!(f, "invalid UTF-8 at byte offset {offset} ({reason})")
            }
            FileError::Pattern(error) => write!(f, "{error}"),
            FileError::Cancelled => f.write_str("cancelled"),
        }
    }
}

impl std::error::Error for FileError {}

impl From<io::Error> for FileError {
    fn from(error: io::Error) -> FileError {
        FileError::Io(error)
    }
}

/// One chunk's ids, already as the array's bytes, and the number of text bytes it covered.
struct Encoded {
    index: usize,
    text_bytes: usize,
    ids: usize,
    data: Vec<u8>,
}

impl Encoder {
    /// The `.npy` element type for this vocabulary's ids.
    pub fn npy_dtype(&self) -> NpyDtype {
        if self.max_id() < 1 << 16 {
            NpyDtype::U16
        } else {
            NpyDtype::U32
        }
    }

    /// Encodes the UTF-8 file `path` (all special tokens allowed) on `threads` threads into the
    /// `.npy` file `output`; returns the number of ids. `progress` is called on this thread with
    /// the number of input bytes done, after each chunk written; if it returns false, encoding
    /// stops with [`FileError::Cancelled`]. On error (the pattern giving up on a match included:
    /// [`FileError::Pattern`]) no file is left at `output`, nor the temporary one
    /// ([`partial_path`]).
    pub fn encode_file_to_npy(
        &self,
        path: &Path,
        output: &Path,
        threads: usize,
        progress: &mut dyn FnMut(u64) -> bool,
    ) -> Result<u64, FileError> {
        self.encode_file_in_chunks(path, output, threads, progress, DEFAULT_CHUNK_BYTES)
    }

    /// [`Encoder::encode_file_to_npy`] with chunks of about `chunk_bytes` (1 MB there).
    pub fn encode_file_in_chunks(
        &self,
        path: &Path,
        output: &Path,
        threads: usize,
        progress: &mut dyn FnMut(u64) -> bool,
        chunk_bytes: usize,
    ) -> Result<u64, FileError> {
        self.encode_file_with_dropout(path, output, threads, progress, chunk_bytes, None)
    }

    /// [`Encoder::encode_file_in_chunks`] with BPE-dropout if `dropout` is given: each piece's
    /// draws are seeded by its offset in the file, so the ids equal
    /// [`Encoder::encode_with_dropout`]'s of the whole file's text, whatever the threads and
    /// chunks.
    pub fn encode_file_with_dropout(
        &self,
        path: &Path,
        output: &Path,
        threads: usize,
        progress: &mut dyn FnMut(u64) -> bool,
        chunk_bytes: usize,
        dropout: Option<Dropout>,
    ) -> Result<u64, FileError> {
        let dropout = dropout.filter(|dropout| dropout.probability > 0.0);
        let partial = partial_path(output);
        let result = self.write_npy(
            path,
            &partial,
            threads.max(1),
            progress,
            chunk_bytes.max(1),
            dropout,
        );
        match result {
            Ok(count) => match std::fs::rename(&partial, output) {
                Ok(()) => Ok(count),
                Err(error) => {
                    let _ = std::fs::remove_file(&partial);
                    Err(error.into())
                }
            },
            Err(error) => {
                let _ = std::fs::remove_file(&partial);
                Err(error)
            }
        }
    }

    fn write_npy(
        &self,
        path: &Path,
        partial: &Path,
        threads: usize,
        progress: &mut dyn FnMut(u64) -> bool,
        chunk_bytes: usize,
        dropout: Option<Dropout>,
    ) -> Result<u64, FileError> {
        let mut input = File::open(path)?;
        let file_bytes = input.metadata()?.len();
        let dtype = self.npy_dtype();
        let mut out = NpyWriter::create(partial, dtype)?;
        let syncing = out.try_clone_file()?;
        let job_slots = threads;
        // A job: the chunk's index, its offset in the file, its text.
        let (job_tx, job_rx) = mpsc::sync_channel::<(usize, u64, String)>(job_slots);
        let job_rx = Mutex::new(job_rx);
        let (done_tx, done_rx) = mpsc::channel::<Result<Encoded, (usize, FileError)>>();
        let shared = &self.caches.new_shared();
        // Chunks after this one are not encoded (they are taken from the queue and dropped): the
        // lowest index of a chunk that failed, or 0 once this thread has stopped. Chunks are
        // taken in order, so every chunk before a failed one is encoded, and the first failure
        // in the file reaches the writer.
        let skip_after = &AtomicUsize::new(usize::MAX);
        std::thread::scope(|scope| -> Result<(), FileError> {
            let _stop = SkipAllOnExit(skip_after);
            // The array's bytes go to disk while the rest is encoded: the final `sync_data`
            // then waits only for the last few megabytes (for a whole 20 MB text, it waited
            // 25-40 ms, alone, after the threads). Its errors are left to that final call.
            let (sync_tx, sync_rx) = mpsc::channel::<()>();
            scope.spawn(move || {
                while sync_rx.recv().is_ok() {
                    while sync_rx.try_recv().is_ok() {} // one sync for every request so far
                    let _ = syncing.sync_data();
                }
            });
            for _ in 0..threads {
                let done_tx = done_tx.clone();
                let job_rx = &job_rx;
                scope.spawn(move || {
                    // One buffer of ids for all this thread's chunks: a new one for each chunk,
                    // sized for a quarter as many ids as the text's bytes, was grown by copying
                    // whenever a chunk had more (GPT-2 on the 1 GB corpus: one id per two bytes),
                    // and its pages were faulted in afresh.
                    let mut ids = Vec::new();
                    self.caches
                        .with_shared(self.table.table(), shared, |cache| loop {
                            let job = job_rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
                            let Ok((index, offset, text)) = job else {
                                break;
                            };
                            if index > skip_after.load(Ordering::Relaxed) {
                                continue;
                            }
                            ids.clear();
                            let result = match dropout {
                                None => {
                                    self.encode_into(&text, AllowedSpecial::All, cache, &mut ids)
                                }
                                Some(dropout) => self.dropout_into(
                                    &text,
                                    AllowedSpecial::All,
                                    dropout,
                                    (0, offset),
                                    cache,
                                    &mut ids,
                                ),
                            };
                            let encoded = match result {
                                Ok(()) => Ok(Encoded {
                                    index,
                                    text_bytes: text.len(),
                                    ids: ids.len(),
                                    data: dtype.laid_out(&ids),
                                }),
                                Err(error) => {
                                    skip_after.fetch_min(index, Ordering::Relaxed);
                                    let offset = usize::try_from(offset).unwrap_or(usize::MAX);
                                    let error = error.shifted(offset).named("the file".into());
                                    Err((index, FileError::Pattern(error)))
                                }
                            };
                            if done_tx.send(encoded).is_err() {
                                break;
                            }
                        })
                });
            }
            drop(done_tx);
            let mut writer = OrderedWriter {
                out: &mut out,
                waiting: BTreeMap::new(),
                failed: false,
                next: 0,
                progress,
                unsynced: 0,
                sync: sync_tx,
            };
            let mut sent = 0;
            let mut chunks = Chunks::new(&mut input, self, chunk_bytes);
            chunks.shrink_towards_the_end(file_bytes, threads);
            let outcome = loop {
                if writer.failed {
                    break Ok(()); // (the chunks before the failed one are awaited below)
                }
                let (offset, chunk) = match chunks.next_chunk() {
                    Ok(Some(chunk)) => chunk,
                    Ok(None) => break Ok(()),
                    Err(error) => break Err(error),
                };
                // Bounded look-ahead: wait for the writing to catch up before reading on.
                while sent - writer.next >= 2 * threads {
                    match done_rx.recv() {
                        Ok(encoded) => writer.add(encoded)?,
                        Err(_) => return Err(io::Error::other("an encoding thread stopped").into()),
                    }
                }
                if job_tx.send((sent, offset, chunk)).is_err() {
                    return Err(io::Error::other("the encoding threads stopped").into());
                }
                sent += 1;
                while let Ok(encoded) = done_rx.try_recv() {
                    writer.add(encoded)?;
                }
            };
            drop(job_tx); // the workers end once the queue is empty
            outcome?;
            while writer.next < sent {
                match done_rx.recv() {
                    Ok(encoded) => writer.add(encoded)?,
                    Err(_) => return Err(io::Error::other("an encoding thread stopped").into()),
                }
            }
            Ok(())
        })?;
        Ok(out.finish()?)
    }
}

/// Bytes of the array written between two requests to the syncing thread to put them on disk.
const SYNC_EVERY_BYTES: usize = 1 << 20;

/// Sets the index after which workers skip their chunks to 0 when dropped: once the thread that
/// hands out chunks is done, with or without an error, no chunk still queued is wanted.
struct SkipAllOnExit<'a>(&'a AtomicUsize);

impl Drop for SkipAllOnExit<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Relaxed);
    }
}

/// Writes chunks' ids in chunk order, whatever order they arrive in; a chunk that failed is
/// the error once its turn comes.
struct OrderedWriter<'a> {
    out: &'a mut NpyWriter,
    waiting: BTreeMap<usize, Result<Encoded, FileError>>,
    /// Whether a chunk that failed has arrived (its turn may not have come yet).
    failed: bool,
    next: usize,
    progress: &'a mut dyn FnMut(u64) -> bool,
    /// Bytes written since the last request to `sync`.
    unsynced: usize,
    sync: mpsc::Sender<()>,
}

impl OrderedWriter<'_> {
    fn add(&mut self, encoded: Result<Encoded, (usize, FileError)>) -> Result<(), FileError> {
        match encoded {
            Ok(encoded) => self.waiting.insert(encoded.index, Ok(encoded)),
            Err((index, error)) => {
                self.failed = true;
                self.waiting.insert(index, Err(error))
            }
        };
        while let Some(encoded) = self.waiting.remove(&self.next) {
            let encoded = encoded?;
            self.out.write_laid_out(&encoded.data, encoded.ids)?;
            self.unsynced += encoded.data.len();
            if self.unsynced >= SYNC_EVERY_BYTES {
                self.out.flush()?; // (to the file, where the syncing thread sees it)
                let _ = self.sync.send(());
                self.unsynced = 0;
            }
            self.next += 1;
            if !(self.progress)(encoded.text_bytes as u64) {
                return Err(FileError::Cancelled);
            }
        }
        Ok(())
    }
}

/// The file's text in chunks cut at safe places, checked for UTF-8 in file order.
struct Chunks<'a, R: Read> {
    input: &'a mut R,
    encoder: &'a Encoder,
    /// Bytes read but not yet handed out, starting at file offset `offset`.
    buffer: Vec<u8>,
    offset: u64,
    end_of_file: bool,
    chunk_bytes: usize,
    /// See [`Chunks::shrink_towards_the_end`]: the file's size and the number of threads.
    tail: Option<(u64, usize)>,
    /// Chunks handed out so far.
    made: u32,
}

/// Chunks near the end of a file are never made smaller than this.
pub(crate) const MIN_TAIL_CHUNK_BYTES: usize = 1 << 16;

impl<'a, R: Read> Chunks<'a, R> {
    fn new(input: &'a mut R, encoder: &'a Encoder, chunk_bytes: usize) -> Chunks<'a, R> {
        Chunks {
            input,
            encoder,
            buffer: Vec::new(),
            offset: 0,
            end_of_file: false,
            chunk_bytes,
            tail: None,
            made: 0,
        }
    }

    /// Makes chunks smaller as the end of the file (of `file_bytes`) nears, so that the
    /// `threads` workers finish together: with whole chunks to the end, one thread encodes the
    /// last chunk while the others wait (a tenth of a 20 MB file's time on two threads, with
    /// 1 MB chunks). Where the file is cut does not change its ids.
    fn shrink_towards_the_end(&mut self, file_bytes: u64, threads: usize) {
        self.tail = Some((file_bytes, threads));
    }

    /// The size of the next chunk. The first ones are small too, growing twice as big each time,
    /// so that the workers start at once: a whole chunk has to be read and checked before the
    /// first of them has anything to do (5 ms of a 0.13 s job, for 1 MB chunks).
    fn next_chunk_bytes(&self) -> usize {
        let head = MIN_TAIL_CHUNK_BYTES
            .checked_shl(self.made)
            .unwrap_or(usize::MAX);
        match self.tail {
            Some((file_bytes, threads)) => {
                let left = file_bytes.saturating_sub(self.offset);
                let share = usize::try_from(left / (2 * threads as u64)).unwrap_or(usize::MAX);
                self.chunk_bytes
                    .min(head)
                    .min(share.max(MIN_TAIL_CHUNK_BYTES))
            }
            None => self.chunk_bytes,
        }
    }

    /// Reads until `want` bytes wait or the file ends.
    fn fill(&mut self, want: usize) -> io::Result<()> {
        if !self.end_of_file && self.buffer.len() < want {
            // (`read_to_end` reads into the spare room without zeroing it first, and retries
            // when interrupted)
            let missing = (want - self.buffer.len()) as u64;
            // Room for all of it at once: `read_to_end` would otherwise grow the buffer by
            // doubling from what the last cut left (a sixteenth of a chunk), copying it each time.
            self.buffer.reserve_exact(want - self.buffer.len());
            let read = (&mut *self.input)
                .take(missing)
                .read_to_end(&mut self.buffer)?;
            self.end_of_file = (read as u64) < missing;
        }
        Ok(())
    }

    /// The next chunk's offset in the file and its text; None at the end of the file.
    fn next_chunk(&mut self) -> Result<Option<(u64, String)>, FileError> {
        // Room past the chunk's end, so that the cut can see what follows it.
        let chunk_bytes = self.next_chunk_bytes();
        let mut want = chunk_bytes + (chunk_bytes >> 4) + 64;
        let cut = loop {
            self.fill(want)?;
            if self.buffer.is_empty() {
                return Ok(None);
            }
            if self.end_of_file && self.buffer.len() <= chunk_bytes {
                break self.buffer.len();
            }
            let from = chunk_bytes.min(self.buffer.len());
            match next_safe_cut(
                &self.buffer,
                from,
                &self.encoder.pretokenizer,
                &self.encoder.cut_specials,
            ) {
                Some(cut) if cut > 0 => break cut,
                _ if self.end_of_file => break self.buffer.len(),
                _ => want = 2 * self.buffer.len().max(want / 2), // no cut in sight: read more
            }
        };
        self.made = self.made.saturating_add(1);
        let rest = self.buffer.split_off(cut);
        let chunk = std::mem::replace(&mut self.buffer, rest);
        // One pass over the bytes (this thread's time is taken from the workers'), 64 bytes at a
        // time whatever the script (check_utf8's first look); only a chunk that fails is looked
        // at again, to name its first bad byte as Python would.
        if check_utf8(&chunk).is_ok() {
            // SAFETY: the bytes were just found to be UTF-8.
            let text = unsafe { String::from_utf8_unchecked(chunk) };
            let offset = self.offset;
            self.offset += cut as u64;
            return Ok(Some((offset, text)));
        }
        // The bytes after the cut too, so that a sequence cut short by it is judged as the whole
        // file's decoder judges it.
        let mut context = chunk;
        context.extend_from_slice(&self.buffer[..4.min(self.buffer.len())]);
        match check_utf8(&context) {
            Err(error) if error.offset < cut => Err(FileError::Decode {
                offset: self.offset + error.offset as u64,
                reason: error.reason,
            }),
            // (cuts are made between characters, so the chunk is bad before its end)
            _ => Err(io::Error::other("a chunk was cut inside a character").into()),
        }
    }
}

/// Where the array is written until it is complete: a hidden name beside `output` (the same file
/// system, so the final rename is atomic), marked with this process's id and a random part, so
/// that two writers never share it and a stale one can be told from one being written; the
/// same form as the command line's other temporary files (`.NAME.PID-HEX.partial`).
pub fn partial_path(output: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let random = nanos
        ^ COUNTER
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9);
    let name = output.file_name().unwrap_or_default().to_string_lossy();
    output.with_file_name(format!(
        ".{name}.{}-{random:08x}.partial",
        std::process::id()
    ))
}

/// A 1-D `.npy` array of ids written a block at a time to a file it creates (never one that
/// exists): first bytes that are not a `.npy` header, so that `numpy.load` refuses the file of a
/// writer that was stopped, then the ids, then the real header over the first bytes
/// ([`NpyWriter::finish`]). The layout's one writer: the file encoder below, and streams
/// through the bindings (Python's `write_npy_stream`).
pub struct NpyWriter {
    out: BufWriter<File>,
    dtype: NpyDtype,
    ids: u64,
}

impl NpyWriter {
    /// A new file at `path` (an error if one exists), of ids of type `dtype`.
    pub fn create(path: &Path, dtype: NpyDtype) -> io::Result<NpyWriter> {
        let mut file = File::options().write(true).create_new(true).open(path)?;
        file.write_all(&partial_header())?; // at once: never an empty file that looks like nothing
        Ok(NpyWriter {
            out: BufWriter::with_capacity(1 << 20, file),
            dtype,
            ids: 0,
        })
    }

    /// The element type of the array.
    pub fn dtype(&self) -> NpyDtype {
        self.dtype
    }

    /// Another handle on the file (to put it on disk from another thread while this one writes).
    pub fn try_clone_file(&self) -> io::Result<File> {
        self.out.get_ref().try_clone()
    }

    /// Appends `ids` (each must fit the element type).
    pub fn write_ids(&mut self, ids: &[TokenId]) -> io::Result<()> {
        self.write_laid_out(&self.dtype.laid_out(ids), ids.len())
    }

    /// Appends `count` ids already laid out as the array holds them ([`NpyDtype`]'s bytes).
    fn write_laid_out(&mut self, data: &[u8], count: usize) -> io::Result<()> {
        self.out.write_all(data)?;
        self.ids += count as u64;
        Ok(())
    }

    /// Hands what is buffered to the file.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Writes the real header (with the number of ids) over the first bytes and puts the file
    /// on disk; returns the number of ids.
    pub fn finish(self) -> io::Result<u64> {
        let mut out = self.out;
        out.seek(SeekFrom::Start(0))?;
        out.write_all(&npy_header(self.dtype, self.ids))?;
        out.into_inner()
            .map_err(|error| error.into_error())?
            .sync_data()?;
        Ok(self.ids)
    }
}

/// The first bytes of an array being written: not a `.npy` header (that has to start with
/// `\x93NUMPY`), so that `numpy.load` refuses a file left by a killed writer instead of reading
/// it as an array; the real header replaces it once every id is written. The same length as
/// the real header.
pub const PARTIAL_HEADER_START: &[u8] = b"bpestore: an unfinished .npy";

fn partial_header() -> Vec<u8> {
    let mut header = PARTIAL_HEADER_START.to_vec();
    header.extend_from_slice(b" (its writer was stopped, or is still writing)");
    header.resize(NPY_HEADER_BYTES - 1, b' ');
    header.push(b'\n');
    header
}

/// A fixed-size `.npy` (version 1.0) header for a 1-D array of `length` elements, as NumPy and
/// bpestore's Python writer lay it out.
fn npy_header(dtype: NpyDtype, length: u64) -> Vec<u8> {
    let magic = b"\x93NUMPY\x01\x00";
    let body = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': ({length},)}}",
        dtype.descr()
    );
    let padding = NPY_HEADER_BYTES - magic.len() - 2 - body.len() - 1;
    let mut header = Vec::with_capacity(NPY_HEADER_BYTES);
    header.extend_from_slice(magic);
    header.extend_from_slice(&((body.len() + padding + 1) as u16).to_le_bytes());
    header.extend_from_slice(body.as_bytes());
    header.resize(header.len() + padding, b' ');
    header.push(b'\n');
    header
}
