//! Which exact method merges a piece seen for the first time fastest?
//!
//!     cargo run --release --manifest-path benchmarks/uncached_merge/Cargo.toml -- TEXT [MB]
//!
//! On a cold pass over diverse text most pieces are new, so the merge of one uncached piece
//! decides the speed. This compares, on the same vocabularies (cl100k_base and o200k_base, as
//! rust-gems' `bpe-openai` ships them: token id = tiktoken rank):
//!
//! * `bpestore`: the encoder's own merge (`Encoder::piece_ids`, the token rule: the lowest-ranked
//!   token that two adjacent parts form wins; a linear scan for short pieces, a heap for long);
//! * `backtrack`: rust-gems' `encode_via_backtracking` (the longest token from an Aho-Corasick
//!   automaton at each position, backtracking when the pair with the next token is not one BPE
//!   would have made);
//! * `bitfield`: rust-gems' `encode_via_bitfield` (a heap over candidate tokens, a bitfield of
//!   boundaries).
//!
//! The text is pre-tokenized with bpestore's scanner for the vocabulary's pattern, its distinct
//! pieces kept in the order first met, and grouped by script (of the piece's first letter or
//! digit) and by length. Every method's ids are checked against bpestore's for every piece before
//! anything is timed; a difference is printed and ends the run with exit status 1. Each method
//! then merges each group's pieces once per run, best of 7 runs (other work on the machine only
//! ever adds time), and the table gives nanoseconds per piece and bpestore's time over each
//! rust-gems method's (below 1: bpestore is faster).

use bpe_openai::Tokenizer as GemsTokenizer;
use bpestore_encode::{Encoder, MergeRule};
use bpestore_pretokenize::{Pretokenizer, CL100K_PATTERN, O200K_PATTERN};
use std::collections::{BTreeMap, HashSet};
use std::time::Instant;

/// The script a piece is filed under: that of its first letter or digit (a piece of only spaces
/// or punctuation is "other").
fn script(piece: &str) -> &'static str {
    let Some(c) = piece.chars().find(|c| c.is_alphanumeric()) else {
        return "punct/space";
    };
    match c as u32 {
        0..=0x7F => "ASCII",
        0x80..=0x24F | 0x1E00..=0x1EFF => "Latin",
        0x370..=0x3FF | 0x1F00..=0x1FFF => "Greek",
        0x400..=0x52F => "Cyrillic",
        0x530..=0x58F => "Armenian",
        0x590..=0x74F => "Hebrew/Arabic/Syriac",
        0x900..=0xDFF => "Indic",
        0xE00..=0xEFF | 0x1780..=0x17FF | 0xF00..=0xFFF => "Thai/Khmer/Tibetan",
        0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF => "CJK/kana",
        0xAC00..=0xD7AF | 0x1100..=0x11FF | 0x3130..=0x318F => "Hangul",
        _ => "other",
    }
}

/// The length band of a piece, in bytes.
fn band(piece: &str) -> &'static str {
    match piece.len() {
        0..=4 => "1-4",
        5..=8 => "5-8",
        9..=16 => "9-16",
        17..=32 => "17-32",
        _ => "33+",
    }
}

/// The best of `runs` timings of `merge` over every piece, in seconds.
fn best_of(runs: usize, pieces: &[&[u8]], mut merge: impl FnMut(&[u8]) -> usize) -> f64 {
    let mut sink = 0usize;
    let mut best = f64::INFINITY;
    for _ in 0..runs {
        let start = Instant::now();
        for piece in pieces {
            sink = sink.wrapping_add(merge(piece));
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    std::hint::black_box(sink);
    best
}

fn study(name: &str, gems: &GemsTokenizer, pattern: &str, text: &str) -> bool {
    let bpe = &gems.bpe;
    let vocab: Vec<(u32, Vec<u8>)> = (0..bpe.num_tokens() as u32)
        .map(|id| (id, bpe.token_bytes(id).to_vec()))
        .collect();
    // What each side costs to build from the tokens (bpe-openai ships its automaton prebuilt
    // and deserializes it; a vocabulary from a store or a tokenizer.json would be built so).
    let started = Instant::now();
    let rebuilt = bpe_openai::byte_pair_encoding::BytePairEncoding::from_dictionary(
        vocab.iter().map(|(_, bytes)| bytes.clone()),
        Some(17846336922010275747), // bpe-openai's hash factor for these vocabularies
    );
    let gems_build = started.elapsed();
    std::hint::black_box(rebuilt.num_tokens());
    let started = Instant::now();
    let encoder =
        Encoder::new(vocab, vec![], vec![], pattern, MergeRule::Token).expect("an encoder");
    let ours_build = started.elapsed();
    let mut seen = HashSet::new();
    let mut pieces: Vec<&str> = Vec::new();
    Pretokenizer::new(pattern)
        .expect("a known pattern")
        .for_each_piece(text, |piece| {
            if seen.insert(piece) {
                pieces.push(piece);
            }
        });

    // Exactness first: every method's ids for every piece.
    let mut differences = 0;
    for piece in &pieces {
        let ours = encoder.piece_ids(piece.as_bytes());
        for (method, ids) in [
            ("backtrack", bpe.encode_via_backtracking(piece.as_bytes())),
            ("bitfield", bpe.encode_via_bitfield(piece.as_bytes())),
        ] {
            if ids != ours {
                differences += 1;
                if differences <= 5 {
                    eprintln!("{name}: {method} gives {ids:?} for {piece:?}, bpestore {ours:?}");
                }
            }
        }
    }
    if differences > 0 {
        eprintln!("{name}: {differences} differences; nothing timed");
        return false;
    }

    let mut groups: BTreeMap<(&str, &str), Vec<&[u8]>> = BTreeMap::new();
    for piece in &pieces {
        groups
            .entry((script(piece), band(piece)))
            .or_default()
            .push(piece.as_bytes());
        groups
            .entry(("all", "all"))
            .or_default()
            .push(piece.as_bytes());
    }
    println!(
        "\n{name}: {} distinct pieces, ids identical for every one (3 methods)",
        pieces.len()
    );
    println!(
        "built from the tokens in: bpestore {:.0} ms, rust-gems (automaton and split table) {:.0} ms",
        ours_build.as_secs_f64() * 1e3,
        gems_build.as_secs_f64() * 1e3
    );
    println!(
        "| script | bytes | pieces | bpestore ns | backtrack ns | bitfield ns | bpestore / backtrack | bpestore / bitfield |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    // What taking the faster of bpestore and backtracking per group (script and length) would
    // save, in all: the most a hybrid could gain, before the cost of choosing and of building
    // the automaton.
    let (mut ours_total, mut hybrid_total) = (0.0, 0.0);
    for ((script, band), group) in &groups {
        if group.len() < 50 && *script != "all" {
            continue; // too few to time
        }
        let per_piece = |seconds: f64| seconds * 1e9 / group.len() as f64;
        let ours = best_of(7, group, |p| encoder.piece_ids(p).len());
        let backtrack = best_of(7, group, |p| bpe.encode_via_backtracking(p).len());
        let bitfield = best_of(7, group, |p| bpe.encode_via_bitfield(p).len());
        if *script != "all" {
            ours_total += ours;
            hybrid_total += ours.min(backtrack);
        }
        println!(
            "| {script} | {band} | {} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} |",
            group.len(),
            per_piece(ours),
            per_piece(backtrack),
            per_piece(bitfield),
            ours / backtrack,
            ours / bitfield
        );
    }
    println!(
        "bpestore on every group: {:.1} ms; the faster of bpestore and backtracking per group: {:.1} ms ({:.0}% less)",
        ours_total * 1e3,
        hybrid_total * 1e3,
        (1.0 - hybrid_total / ours_total) * 100.0
    );
    true
}

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: uncached-merge TEXT [MB]";
    let mut text = std::fs::read(args.next().expect(usage)).expect("the text");
    let megabytes: f64 = args.next().map_or(1e9, |mb| mb.parse().expect("MB"));
    text.truncate((megabytes * 1e6) as usize);
    while std::str::from_utf8(&text).is_err() {
        text.pop(); // cut at a character boundary
    }
    let text = String::from_utf8(text).expect("UTF-8");
    let mut exact = study(
        "cl100k_base",
        bpe_openai::cl100k_base(),
        CL100K_PATTERN,
        &text,
    );
    exact &= study("o200k_base", bpe_openai::o200k_base(), O200K_PATTERN, &text);
    if !exact {
        std::process::exit(1);
    }
}
