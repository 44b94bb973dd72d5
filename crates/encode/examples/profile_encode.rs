// Scratch timing (not committed).
use bpestore_encode::*;
use std::time::Instant;
fn main() {
    let text = std::fs::read_to_string("/tmp/wiki20.txt").unwrap();
    let vocab: Vec<(u32, Vec<u8>)> = std::fs::read_to_string("/tmp/gpt2_vocab.txt")
        .unwrap()
        .lines()
        .map(|l| {
            let (i, h) = l.split_once(' ').unwrap();
            (
                i.parse().unwrap(),
                (0..h.len() / 2)
                    .map(|k| u8::from_str_radix(&h[2 * k..2 * k + 2], 16).unwrap())
                    .collect(),
            )
        })
        .collect();
    let merges: Vec<(Vec<u8>, Vec<u8>)> = std::fs::read_to_string("/tmp/gpt2_merges_hex.txt")
        .unwrap()
        .lines()
        .map(|l| {
            let (a, b) = l.split_once(' ').unwrap();
            let d = |h: &str| {
                (0..h.len() / 2)
                    .map(|k| u8::from_str_radix(&h[2 * k..2 * k + 2], 16).unwrap())
                    .collect()
            };
            (d(a), d(b))
        })
        .collect();
    let t = Instant::now();
    let enc = Encoder::new(
        vocab,
        merges,
        vec![("<|endoftext|>".into(), 50256)],
        bpestore_pretokenize::GPT2_PATTERN,
        MergeRule::Pair,
    )
    .unwrap();
    println!("new {:?}", t.elapsed());
    let t = Instant::now();
    let mut n = 0;
    enc.pretokenizer().for_each_piece(&text, |_| n += 1);
    println!("pretokenize {:?} {n}", t.elapsed());
    let t = Instant::now();
    let ids = enc.encode(&text, AllowedSpecial::All);
    println!("encode {:?} {}", t.elapsed(), ids.len());
    let t = Instant::now();
    let ids = enc.encode(&text, AllowedSpecial::All);
    println!("encode warm {:?} {}", t.elapsed(), ids.len());
    let texts: Vec<&str> = text.split_inclusive('\n').collect();
    for th in [1, 2] {
        let enc = Encoder::new(
            std::fs::read_to_string("/tmp/gpt2_vocab.txt")
                .unwrap()
                .lines()
                .map(|l| {
                    let (i, h) = l.split_once(' ').unwrap();
                    (
                        i.parse().unwrap(),
                        (0..h.len() / 2)
                            .map(|k| u8::from_str_radix(&h[2 * k..2 * k + 2], 16).unwrap())
                            .collect(),
                    )
                })
                .collect(),
            std::fs::read_to_string("/tmp/gpt2_merges_hex.txt")
                .unwrap()
                .lines()
                .map(|l| {
                    let (a, b) = l.split_once(' ').unwrap();
                    let d = |h: &str| {
                        (0..h.len() / 2)
                            .map(|k| u8::from_str_radix(&h[2 * k..2 * k + 2], 16).unwrap())
                            .collect()
                    };
                    (d(a), d(b))
                })
                .collect(),
            vec![("<|endoftext|>".into(), 50256)],
            bpestore_pretokenize::GPT2_PATTERN,
            MergeRule::Pair,
        )
        .unwrap();
        let t = Instant::now();
        let out = enc.encode_batch(&texts, th);
        println!("batch {th} threads {:?} {}", t.elapsed(), out.len());
    }
}
