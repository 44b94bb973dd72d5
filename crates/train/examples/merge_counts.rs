use bpestore_train::{learn_merges, PretokenCounts};
use std::time::Instant;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let data = std::fs::read(&args[1]).unwrap();
    let n: usize = args[2].parse().unwrap();
    let mut counts = PretokenCounts::new();
    let mut i = 0;
    while i < data.len() {
        let len = u32::from_le_bytes(data[i..i + 4].try_into().unwrap()) as usize;
        let word = &data[i + 4..i + 4 + len];
        let count = u64::from_le_bytes(data[i + 4 + len..i + 12 + len].try_into().unwrap());
        counts.add(word, count);
        i += 12 + len;
    }
    let t = Instant::now();
    let merges = learn_merges(&counts, n, |_| {});
    eprintln!("{} merges in {:?}", merges.len(), t.elapsed());
    if args.len() > 3 {
        for (a, b) in &merges {
            println!("{:?} {:?}", a, b);
        }
    }
}
