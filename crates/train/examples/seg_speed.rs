use bpestore_train::PretokenCounts;
use std::time::Instant;
fn main() {
    let data = std::fs::read(std::env::args().nth(1).unwrap()).unwrap();
    let t = Instant::now();
    let mut counts = PretokenCounts::new();
    let mut start = 0;
    for i in memchr::memchr_iter(b' ', &data) {
        counts.add(&data[start..i], 1);
        start = i;
    }
    let el = t.elapsed();
    eprintln!(
        "{} distinct segments, {:?}, {:.0} MB/s",
        counts.len(),
        el,
        data.len() as f64 / el.as_secs_f64() / 1e6
    );
}
