//! Training byte-level BPE: counting the pre-tokens of a corpus, and the CS336 merge loop.
//!
//! [`PretokenCounts`] holds how often each pre-token occurs; [`learn_merges`] turns counts into
//! the ordered list of merges.

mod counts;
mod merge;

pub use counts::PretokenCounts;
pub use merge::{learn_merges, Merge};
