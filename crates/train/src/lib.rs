//! Training byte-level BPE: counting the pre-tokens of a corpus, and the CS336 merge loop.
//!
//! [`count_file`] and [`count_text`] give [`PretokenCounts`], how often each pre-token occurs
//! (special tokens cut out); [`learn_merges`] turns counts into the ordered list of merges, and
//! [`ParityLoop`] the counts of several languages (parity-aware BPE).

mod count;
mod counts;
mod error;
mod memory;
mod merge;
mod pairs;
mod parity;
mod prune;
mod spill;
mod stored;
mod words;

pub use count::{
    count_file, count_file_in_chunks, count_file_spilling, count_text, file_chunk_boundaries,
    DEFAULT_CHUNK_BYTES,
};
pub use counts::PretokenCounts;
pub use error::CountError;
pub use memory::release_free_memory;
pub use merge::{learn_merges, Merge, MergeLoop, SplitWords, TieBreak};
pub use parity::{Balance, ParityLoop, ParityOptions, Variant};
pub use spill::{SpillOptions, DEFAULT_FAN_IN};
pub use stored::{checksum, from_copy_rows, unpack, SortedCounts};
