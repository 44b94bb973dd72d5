//! Writes the table of character classes the scanners look code points up in (see
//! `src/class_data.rs`, compiled here and in the library) into `OUT_DIR`, for the library to
//! include: made here once, not in every process that scans.

#[allow(dead_code)] // (the library uses more of it than the build script)
#[path = "src/class_data.rs"]
mod class_data;

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=src/class_data.rs");
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let (bmp, index, blocks) = class_data::two_levels();
    let index: Vec<u8> = index
        .iter()
        .flat_map(|number| number.to_le_bytes())
        .collect();
    for (name, bytes) in [
        ("class_bmp.bin", &bmp),
        ("class_index.bin", &index),
        ("class_blocks.bin", &blocks),
    ] {
        std::fs::write(out.join(name), bytes).expect("OUT_DIR is writable");
    }
}
