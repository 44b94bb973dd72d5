//! Pre-tokenizer throughput on a file: `cargo run --release --example throughput -- FILE [MB]`.
//! Prints MB/s (median of 5 runs) of the scanner, of the scanner without its 64-byte fast path
//! (runs taken in turn with the scanner's, and the median ratio of the pairs), and of the regex
//! engine for each known pattern,
//! by wall time and by CPU time (which stays meaningful while other processes load the machine).

use bpestore_pretokenize::{Pretokenizer, CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN};
use std::time::Instant;

/// Seconds this thread has run on a CPU (Linux), which other processes competing for the CPU
/// do not inflate the way they inflate wall time; None elsewhere.
fn thread_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanoseconds: f64 = stat.split_whitespace().next()?.parse().ok()?;
    Some(nanoseconds / 1e9)
}

/// Median MB/s over `runs` runs, by wall time and by this thread's CPU time, and the piece count.
fn median_mb_per_s(pretokenizer: &Pretokenizer, text: &str, runs: usize) -> (f64, f64, usize) {
    let mut wall = Vec::new();
    let mut cpu = Vec::new();
    let mut count = 0;
    for _ in 0..runs {
        let start = Instant::now();
        let cpu_start = thread_cpu_seconds().unwrap_or(f64::NAN);
        count = 0;
        pretokenizer.for_each_piece(text, |_| count += 1);
        cpu.push(thread_cpu_seconds().unwrap_or(f64::NAN) - cpu_start);
        wall.push(start.elapsed().as_secs_f64());
    }
    wall.sort_by(f64::total_cmp);
    cpu.sort_by(f64::total_cmp);
    let megabytes = text.len() as f64 / 1e6;
    (megabytes / wall[runs / 2], megabytes / cpu[runs / 2], count)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: throughput FILE [MB]");
    let megabytes: usize = args.next().map_or(20, |mb| mb.parse().expect("MB"));
    let bytes = std::fs::read(&path).expect("readable file");
    let mut end = bytes.len().min(megabytes << 20);
    while end < bytes.len() && (bytes[end] & 0xC0) == 0x80 {
        end -= 1;
    }
    let text = std::str::from_utf8(&bytes[..end]).expect("UTF-8");
    let start = Instant::now();
    let mut words = 0usize;
    let mut previous = false;
    for &byte in text.as_bytes() {
        let letter = byte.is_ascii_alphabetic();
        words += (letter && !previous) as usize;
        previous = letter;
    }
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "baseline: a byte loop at {:.0} MB/s ({words} words)",
        text.len() as f64 / 1e6 / seconds
    );
    for (name, pattern) in [
        ("gpt2", GPT2_PATTERN),
        ("cl100k", CL100K_PATTERN),
        ("o200k", O200K_PATTERN),
    ] {
        let scanner = Pretokenizer::new(pattern).unwrap();
        let scalar = Pretokenizer::with_scalar_scanner(pattern).unwrap();
        let regex = Pretokenizer::with_regex_engine(pattern).unwrap();
        // The scanner with and without its 64-byte fast path, in turn (paired on a busy machine).
        let (mut fast_runs, mut scalar_runs) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            fast_runs.push(median_mb_per_s(&scanner, text, 1));
            scalar_runs.push(median_mb_per_s(&scalar, text, 1));
        }
        let ratios: Vec<f64> = fast_runs
            .iter()
            .zip(&scalar_runs)
            .map(|(fast, scalar)| fast.1 / scalar.1)
            .collect();
        let median = |mut values: Vec<f64>| {
            values.sort_by(f64::total_cmp);
            values[values.len() / 2]
        };
        let fast = median(fast_runs.iter().map(|run| run.0).collect());
        let fast_cpu = median(fast_runs.iter().map(|run| run.1).collect());
        let scalar_cpu = median(scalar_runs.iter().map(|run| run.1).collect());
        let pieces = fast_runs[0].2;
        assert_eq!(pieces, scalar_runs[0].2, "the fast path's pieces differ");
        // BPESTORE_SCANNER_ONLY=1 skips the (slow) regex engine, e.g. for `perf stat`.
        let slow = if std::env::var_os("BPESTORE_SCANNER_ONLY").is_some() {
            f64::NAN
        } else {
            median_mb_per_s(&regex, text, 1).1
        };
        println!(
            "{name:7} scanner {fast:7.1} MB/s wall, {fast_cpu:7.1} MB/s CPU   \
             (one piece at a time {scalar_cpu:7.1} MB/s CPU, paired ratio {:.2}x)   \
             fancy_regex {slow:6.1} MB/s CPU   ({pieces} pieces)",
            median(ratios)
        );
    }
}
