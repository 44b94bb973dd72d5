//! Why counting a corpus failed: one error type for the counter and the spilled runs it writes
//! and merges (its own module, so that neither of them owns the other's error).

use std::fmt;
use std::io;
use std::path::PathBuf;

use bpestore_pretokenize::PretokenizeError;

/// Why a file's pre-tokens could not be counted.
#[derive(Debug)]
pub enum CountError {
    /// Reading the file failed.
    Io(io::Error),
    /// The progress callback asked to stop.
    Stopped,
    /// The pattern (an arbitrary one, run by the backtracking regex engine) failed on the text:
    /// it hit its backtracking limit, or no match covers some text
    /// ([`PretokenizeError::MatchFailed`], its offset a byte offset in the file or text).
    Pattern(PretokenizeError),
    /// The file is not UTF-8: the offset of its first bad byte, and Python's reason words
    /// (`"invalid start byte"`, `"invalid continuation byte"`, `"unexpected end of data"`).
    Decode {
        /// Offset of the first bad byte in the file.
        offset: u64,
        /// Python's words for what is wrong there.
        reason: &'static str,
    },
    /// Writing or reading the spilled counts failed (a full disk, an unwritable directory):
    /// the directory given for them, and the error.
    Spill {
        /// The directory given for the spilled counts.
        dir: PathBuf,
        /// What failed.
        error: io::Error,
    },
}

impl fmt::Display for CountError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CountError::Io(error) => error.fmt(f),
            CountError::Stopped => f.write_str("stopped"),
            CountError::Pattern(error) => error.fmt(f),
            CountError::Decode { offset, reason } => {
                write!(f, "invalid UTF-8 at byte offset {offset} ({reason})")
            }
            CountError::Spill { dir, error } => {
                write!(
                    f,
                    "spilling pre-token counts to {} failed: {error}",
                    dir.display()
                )
            }
        }
    }
}

impl std::error::Error for CountError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CountError::Io(error) | CountError::Spill { error, .. } => Some(error),
            CountError::Pattern(error) => Some(error),
            CountError::Decode { .. } | CountError::Stopped => None,
        }
    }
}

impl From<io::Error> for CountError {
    fn from(error: io::Error) -> CountError {
        CountError::Io(error)
    }
}
