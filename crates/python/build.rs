//! The Python the module is built for, as cfgs (`Py_3_14`, `Py_LIMITED_API`, `PyPy`, ...): the
//! text module reads CPython's string layout only where pyo3 describes it (src/text.rs).

fn main() {
    pyo3_build_config::use_pyo3_cfgs();
}
