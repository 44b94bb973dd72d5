use bpestore_pretokenize::{Pretokenizer, SpecialTokens, GPT2_PATTERN};
use bpestore_train::count_file;
use std::time::Instant;
fn main() {
    let path = std::env::args().nth(1).unwrap();
    let threads: usize = std::env::args().nth(2).unwrap().parse().unwrap();
    let p = Pretokenizer::new(GPT2_PATTERN).unwrap();
    let s = SpecialTokens::new(&["<|endoftext|>".to_string()]);
    let t = Instant::now();
    let c = count_file(std::path::Path::new(&path), &p, &s, threads, &|_| {}).unwrap();
    let el = t.elapsed();
    let size = std::fs::metadata(&path).unwrap().len();
    eprintln!(
        "{:?} {:?} {:.1} MB/s",
        c,
        el,
        size as f64 / el.as_secs_f64() / 1e6
    );
}
