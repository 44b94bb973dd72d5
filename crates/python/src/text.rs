//! A Python `str` as UTF-8, for the engine: what pyo3's `&str` gives, made faster.
//!
//! A `str` that is not ASCII has no UTF-8 of its own. Asked for it (`PyUnicode_AsUTF8AndSize`,
//! what pyo3's `&str` and `PyBackedStr` call), CPython encodes it a character at a time into
//! one buffer, copies that into another of the exact size, and keeps the copy beside the string
//! for the string's life, where later calls find it. On 10 MB of English whose few accented
//! letters make CPython keep it two bytes a character, that took 9-13 ms, a tenth of a first
//! pass over it. Here, for text mostly in runs of ASCII
//! ([`bpestore_pretokenize::mostly_ascii`]), the same copy is written by
//! [`bpestore_pretokenize::wide_to_utf8`] (sixteen ASCII characters at a time) and kept as
//! CPython keeps it: 2-5 ms there. Text mostly in other scripts is left to CPython, whose
//! conversion is as fast there. Later calls, here or anywhere, find the UTF-8 as before.
//! Where the layout of this Python's strings is not pyo3's to describe (the limited API, PyPy,
//! GraalPy, 3.14 on, a free-threaded build), CPython's own conversion is used.

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::PyString;
use std::ops::Deref;

/// The UTF-8 of a Python `str`, borrowed from the string (see the module's doc). Extracting one
/// raises what extracting a `&str` raises: `TypeError` for what is not a `str`,
/// `UnicodeEncodeError` for a lone surrogate.
pub(crate) struct Utf8Text(PyBackedStr);

impl Deref for Utf8Text {
    type Target = str;

    #[inline]
    fn deref(&self) -> &str {
        &self.0
    }
}

impl FromPyObject<'_, '_> for Utf8Text {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, '_, PyAny>) -> PyResult<Self> {
        let string = obj.cast::<PyString>()?.to_owned();
        fill_utf8(&string);
        // (the UTF-8 filled in above, or CPython's; its error for a surrogate, which the
        // filling leaves to it)
        Ok(Utf8Text(string.try_into()?))
    }
}

/// Gives `string` the UTF-8 CPython keeps beside a string it has converted, if it has none and
/// holds no surrogate (see the module's doc).
#[cfg(not(any(Py_LIMITED_API, PyPy, GraalPy, Py_3_14, Py_GIL_DISABLED)))]
fn fill_utf8(string: &Bound<'_, PyString>) {
    use bpestore_pretokenize::{mostly_ascii, utf8_room, wide_to_utf8, WideUnit};
    use pyo3::ffi;
    use pyo3::types::string::PyStringData;
    use pyo3::types::PyStringMethods;

    let ptr = string.as_ptr();
    // SAFETY: `ptr` is a live `str` (`string` holds a reference), and a compact string (every
    // string but the legacy ones of 3.11's deprecated C API) is ready from its making.
    unsafe {
        if ffi::PyUnicode_IS_COMPACT(ptr) == 0
            || ffi::PyUnicode_IS_ASCII(ptr) != 0
            || !(*ptr.cast::<ffi::PyCompactUnicodeObject>()).utf8.is_null()
        {
            return; // (no conversion needed, or a legacy string: CPython's way)
        }
    }
    /// The text in a buffer of CPython's allocator of its exact size, with the terminating NUL
    /// CPython's buffer has (null if that fails, if there is a surrogate, or if the text is not
    /// mostly ASCII); and its length.
    ///
    /// It is written into a scratch buffer of the most room it may take and then copied, as
    /// CPython's own conversion does. Written straight into a buffer of that room and shrunk,
    /// nothing big was freed: glibc then kept mapping fresh memory for the next big
    /// allocations (the next pass's ids), and a second pass over 10 MB of 46 languages ran
    /// 1.2x slower for the page faults.
    fn written<U: WideUnit>(units: &[U]) -> (*mut u8, usize) {
        if !mostly_ascii(units) {
            return (std::ptr::null_mut(), 0); // (CPython's conversion is as fast there)
        }
        let mut scratch: Vec<u8> = Vec::with_capacity(utf8_room::<U>(units.len()));
        let Ok(len) = wide_to_utf8(units, scratch.spare_capacity_mut()) else {
            return (std::ptr::null_mut(), 0);
        };
        // SAFETY: wide_to_utf8 wrote the first `len` bytes.
        unsafe { scratch.set_len(len) };
        // SAFETY: the GIL is held (`fill_utf8`'s caller holds a `Bound`); the buffer has room
        // for the text and its NUL.
        unsafe {
            let buffer = ffi::PyObject_Malloc(len + 1).cast::<u8>();
            if !buffer.is_null() {
                std::ptr::copy_nonoverlapping(scratch.as_ptr(), buffer, len);
                *buffer.add(len) = 0;
            }
            (buffer, len)
        }
    }
    // SAFETY: a `str` is immutable; `string` keeps its characters alive while they are read.
    let Ok(data) = (unsafe { string.data() }) else {
        return;
    };
    let (buffer, len) = match data {
        PyStringData::Ucs1(units) => written(units),
        PyStringData::Ucs2(units) => written(units),
        PyStringData::Ucs4(units) => written(units),
    };
    if buffer.is_null() {
        return;
    }
    // SAFETY: the GIL is held, the string is compact and has no UTF-8 (checked above, and
    // nothing since has released the GIL): these are the two fields CPython's own conversion
    // sets (`unicode_fill_utf8`), to a buffer of its allocator, which frees it with the string.
    unsafe {
        let compact = ptr.cast::<ffi::PyCompactUnicodeObject>();
        (*compact).utf8_length = len as ffi::Py_ssize_t;
        (*compact).utf8 = buffer.cast();
    }
}

#[cfg(any(Py_LIMITED_API, PyPy, GraalPy, Py_3_14, Py_GIL_DISABLED))]
fn fill_utf8(_string: &Bound<'_, PyString>) {}
