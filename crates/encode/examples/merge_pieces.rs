//! The merge of pieces seen for the first time, by length:
//! `cargo run --release -p bpestore-encode --example merge_pieces -- FILE.tiktoken PATTERN TEXT [MB]`
//! (`PATTERN`: `cl100k_base` or `o200k_base`).
//!
//! The text is pre-tokenized, its distinct pieces kept in the order first met, and each merged
//! once by the encoder's rule (`Encoder::piece_ids`, no cache): what a cold pass over diverse
//! text does for every new word. Prints, per length class, the pieces, their bytes, and the
//! nanoseconds per piece and per byte (the best of 5 runs: other work on a shared machine only
//! ever adds time). For instruction counts, run it under `valgrind --tool=callgrind`.
//!
//! With `PAIR=1`, the same vocabulary is merged by the pair rule over the merges that
//! `ranks::pair_merges_from_ranks` finds (for a vocabulary whose every token is reachable, as
//! cl100k_base's and o200k_base's are, the same ids: a token only ever forms from the two parts
//! its own bytes' merge ends with), to compare the two methods; the time that finding the merges
//! takes is printed. With `ENCODE=1`, one cold pass over the whole text and `WARM_PASSES` (1)
//! warm ones instead, in MB/s, for a profiler (`perf record`).

use bpestore_encode::ranks::parse_tiktoken;
use bpestore_encode::{AllowedSpecial, Encoder, MergeRule};
use bpestore_pretokenize::{Pretokenizer, CL100K_PATTERN, O200K_PATTERN};

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: merge_pieces FILE.tiktoken cl100k_base|o200k_base TEXT [MB]";
    let ranks = std::fs::read(args.next().expect(usage)).expect("the .tiktoken file");
    let pattern = match args.next().expect(usage).as_str() {
        "cl100k_base" => CL100K_PATTERN,
        "o200k_base" => O200K_PATTERN,
        other => panic!("unknown pattern {other}"),
    };
    let mut text = std::fs::read(args.next().expect(usage)).expect("the text");
    let megabytes: f64 = args.next().map_or(1e9, |mb| mb.parse().expect("MB"));
    text.truncate((megabytes * 1e6) as usize);
    while std::str::from_utf8(&text).is_err() {
        text.pop(); // (cut at a character boundary)
    }
    let text = String::from_utf8(text).expect("UTF-8");
    let ranks = parse_tiktoken(&ranks).expect("a .tiktoken file");
    let vocab: Vec<(u32, Vec<u8>)> = ranks.iter().map(|(t, r)| (r, t.to_vec())).collect();
    let started = std::time::Instant::now();
    let encoder = if std::env::var_os("PAIR").is_some() {
        let tokens: Vec<(&[u8], u32)> = ranks.iter().collect();
        let found = bpestore_encode::ranks::pair_merges_from_ranks(&tokens, &mut |_| {});
        eprintln!("reconstructed in {:?}", started.elapsed());
        let merges = found
            .merges
            .iter()
            .map(|&(i, k)| (tokens[i].0[..k].to_vec(), tokens[i].0[k..].to_vec()))
            .collect();
        Encoder::new(vocab, merges, vec![], pattern, MergeRule::Pair).expect("an encoder")
    } else {
        Encoder::new(vocab, vec![], vec![], pattern, MergeRule::Token).expect("an encoder")
    };
    eprintln!("encoder built in {:?}", started.elapsed());

    if std::env::var_os("ENCODE").is_some() {
        // A whole pass, cold (this fresh encoder) then warm, for a profiler.
        let warm_passes: usize =
            std::env::var("WARM_PASSES").map_or(1, |n| n.parse().expect("a count"));
        for pass in std::iter::once("cold").chain(std::iter::repeat_n("warm", warm_passes)) {
            let start = std::time::Instant::now();
            let ids = encoder.encode(&text, AllowedSpecial::None).expect("ids");
            let seconds = start.elapsed().as_secs_f64();
            println!(
                "{pass}: {:.1} MB/s, {} ids",
                text.len() as f64 / 1e6 / seconds,
                ids.len()
            );
        }
        return;
    }
    let mut seen = std::collections::HashSet::new();
    let mut pieces: Vec<&str> = Vec::new();
    Pretokenizer::new(pattern)
        .expect("a known pattern")
        .for_each_piece(&text, |piece| {
            if seen.insert(piece) {
                pieces.push(piece);
            }
        });
    let classes: [(usize, usize); 6] = [(1, 4), (5, 8), (9, 16), (17, 32), (33, 64), (65, 1 << 30)];
    let mut checksum = 0u64;
    println!("class      pieces    bytes   ns/piece  ns/byte");
    let mut total = 0.0;
    for (low, high) in classes {
        let class: Vec<&[u8]> = pieces
            .iter()
            .map(|p| p.as_bytes())
            .filter(|p| (low..=high).contains(&p.len()))
            .collect();
        if class.is_empty() {
            continue;
        }
        let bytes: usize = class.iter().map(|p| p.len()).sum();
        let mut times = Vec::new();
        for _ in 0..5 {
            let start = std::time::Instant::now();
            for piece in &class {
                let ids = encoder.piece_ids(piece);
                checksum = checksum.wrapping_mul(31).wrapping_add(ids.len() as u64);
            }
            times.push(start.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        let time = times[0];
        total += time;
        println!(
            "{low:>4}-{high:<5} {:>8} {:>8} {:>10.1} {:>8.2}",
            class.len(),
            bytes,
            time * 1e9 / class.len() as f64,
            time * 1e9 / bytes as f64
        );
    }
    println!(
        "all: {} distinct pieces, {:.1} ms (checksum {checksum})",
        pieces.len(),
        total * 1e3
    );
}
