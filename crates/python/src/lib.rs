//! `bpestore._engine`: the Rust engine as a Python extension module.
//!
//! One file per pipeline stage registers that stage's functions and classes; the typed Python
//! face of every one of them is `bpestore/_engine.pyi`.

use pyo3::prelude::*;

mod encode;
mod errors;
mod formats;
mod model;
mod pretokenize;
mod store;
mod text;
mod train;

#[pymodule]
fn _engine(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // (the ids of a long text, and its UTF-8, are blocks of megabytes: see the function's doc)
    bpestore_encode::let_the_heap_serve_big_blocks();
    errors::register(module)?;
    pretokenize::register(module)?;
    train::register(module)?;
    encode::register(module)?;
    store::register(module)?;
    formats::register(module)?;
    Ok(())
}
