//! A Python `str` as UTF-8, for the engine: what pyo3's `&str` gives, made faster.
//!
//! A `str` that is not ASCII has no UTF-8 of its own. Asked for it (`PyUnicode_AsUTF8AndSize`,
//! what pyo3's `&str` and `PyBackedStr` call), CPython encodes it a character at a time into
//! one buffer, copies that into another, and keeps the copy beside the string for the string's
//! life, where later calls find it. On 10 MB of English whose few accented letters make CPython
//! keep it two bytes a character, that took 8-15 ms, a sixth of a first pass over it. Here the
//! same copy is written by [`bpestore_pretokenize::wide_to_utf8`] (runs of ASCII sixteen
//! characters at a time) straight into the buffer CPython would have kept, and kept as CPython
//! keeps it: 3-5 ms there; on 10 MB of 33 languages, whose characters are mostly not ASCII,
//! about CPython's time (11-15 ms). Later calls, here or anywhere, find it as before.
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
    use bpestore_pretokenize::{utf8_room, wide_to_utf8, WideUnit};
    use pyo3::ffi;
    use pyo3::types::string::PyStringData;
    use pyo3::types::PyStringMethods;
    use std::mem::MaybeUninit;

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
    /// The text in a buffer of CPython's allocator (null if it fails or there is a surrogate),
    /// sized to it, with the terminating NUL CPython's buffer has; and its length.
    fn written<U: WideUnit>(units: &[U]) -> (*mut u8, usize) {
        let room = utf8_room::<U>(units.len()) + 1;
        // SAFETY: the GIL is held (`fill_utf8`'s caller holds a `Bound`); a buffer of `room`
        // bytes is written only within `room`, and freed or handed on whatever happens.
        unsafe {
            let buffer = ffi::PyObject_Malloc(room).cast::<u8>();
            if buffer.is_null() {
                return (std::ptr::null_mut(), 0);
            }
            let out = std::slice::from_raw_parts_mut(buffer.cast::<MaybeUninit<u8>>(), room);
            let Ok(len) = wide_to_utf8(units, out) else {
                ffi::PyObject_Free(buffer.cast());
                return (std::ptr::null_mut(), 0);
            };
            *buffer.add(len) = 0;
            // (a smaller block from the system allocator: the room past the text is given back)
            let sized = ffi::PyObject_Realloc(buffer.cast(), len + 1).cast::<u8>();
            (if sized.is_null() { buffer } else { sized }, len)
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
