//! A Python `str` as UTF-8, for the engine: what pyo3's `&str` gives, made faster.
//!
//! A `str` that is not ASCII has no UTF-8 of its own. Asked for it (`PyUnicode_AsUTF8AndSize`,
//! what pyo3's `&str` and `PyBackedStr` call), CPython encodes it a character at a time into
//! one buffer, copies that into another of the exact size, and keeps the copy beside the string
//! for the string's life, where later calls find it. Here the same copy is written by simdutf
//! (vectors of characters, whatever their width) and kept as CPython keeps it: 10 MB of text in
//! 46 languages, stored two bytes a character, in 4 ms where CPython took 13 to 25 ms (a tenth
//! of a first pass over it with o200k_base), 10 MB of English with a few accented letters in
//! 3 ms. Later calls, here or anywhere, find the UTF-8 as before. A string holding a surrogate
//! (which UTF-8 cannot hold) is left to CPython, which raises its error. Where the layout of
//! this Python's strings is not pyo3's to describe (the limited API, PyPy, GraalPy, 3.14 on, a
//! free-threaded build), CPython's own conversion is used.

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
    use bpestore_encode::advise_huge_pages;
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
    /// CPython's buffer has (null if that fails or if there is a surrogate); and its length.
    ///
    /// The UTF-8's length is counted first (simdutf, a pass over the characters that writes
    /// nothing), then the buffer is allocated at that size, with huge pages asked for behind
    /// it, and the text converted into it. Converted into a scratch buffer of the most room it
    /// may take and copied, as CPython's own conversion does, a first pass over 10 MB of English
    /// in a fresh process wrote 20 MB on 4 KB pages, 5,000 page faults (a tenth of the pass).
    /// (That scratch buffer, freed, also raised glibc's threshold for mapping big blocks, which
    /// the next big allocations, the ids, then took from its heap: the engine now raises it at
    /// import, see `bpestore_encode::let_the_heap_serve_big_blocks`.)
    fn written(data: PyStringData<'_>) -> (*mut u8, usize) {
        // A surrogate is a character of its own in a Python string, which UTF-8 cannot hold
        // (CPython raises), even two in a row, which simdutf's UTF-16 would read as one
        // character: each chunk is looked through for one, while it is in the CPU's cache for
        // its count. (simdutf's counts and the conversions below are for valid text only.)
        let len = match data {
            PyStringData::Ucs1(units) => Some(simdutf::utf8_length_from_latin1(units)),
            PyStringData::Ucs2(units) => counted(
                units,
                |unit| u16::from(unit & 0xF800 == 0xD800),
                simdutf::utf8_length_from_utf16,
            ),
            PyStringData::Ucs4(units) => counted(
                units,
                |unit| u32::from(unit & !0x7FF == 0xD800),
                simdutf::utf8_length_from_utf32,
            ),
        };
        let Some(len) = len else {
            return (std::ptr::null_mut(), 0);
        };
        // SAFETY: the GIL is held (`fill_utf8`'s caller holds a `Bound`).
        let buffer = unsafe { ffi::PyObject_Malloc(len + 1).cast::<u8>() };
        if buffer.is_null() {
            return (buffer, 0);
        }
        // SAFETY: the buffer is this function's, `len + 1` bytes, not yet written.
        advise_huge_pages(unsafe {
            std::slice::from_raw_parts_mut(buffer.cast::<std::mem::MaybeUninit<u8>>(), len + 1)
        });
        // SAFETY: each conversion reads its units and writes at most `len` bytes from
        // `buffer` (their exact UTF-8 length, counted above).
        let written = unsafe {
            match data {
                PyStringData::Ucs1(units) => {
                    simdutf::convert_latin1_to_utf8(units.as_ptr(), units.len(), buffer)
                }
                PyStringData::Ucs2(units) => {
                    simdutf::convert_valid_utf16_to_utf8(units.as_ptr(), units.len(), buffer)
                }
                PyStringData::Ucs4(units) => {
                    simdutf::convert_valid_utf32_to_utf8(units.as_ptr(), units.len(), buffer)
                }
            }
        };
        if written != len {
            // (never, for text counted above; CPython's own conversion is then used)
            // SAFETY: the buffer came from `PyObject_Malloc` above; the GIL is held.
            unsafe { ffi::PyObject_Free(buffer.cast()) };
            return (std::ptr::null_mut(), 0);
        }
        // SAFETY: the buffer has room for the text and its NUL.
        unsafe { *buffer.add(len) = 0 };
        (buffer, len)
    }
    // SAFETY: a `str` is immutable; `string` keeps its characters alive while they are read.
    let Ok(data) = (unsafe { string.data() }) else {
        return;
    };
    let (buffer, len) = written(data);
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

/// The UTF-8 length of `units` (two or four bytes a character), counted by `length` a chunk at
/// a time, each chunk first looked through for a surrogate (`surrogate`: 1 for one, else 0);
/// None if there is one.
#[cfg(not(any(Py_LIMITED_API, PyPy, GraalPy, Py_3_14, Py_GIL_DISABLED)))]
#[inline(always)]
fn counted<U: Copy + Default + PartialEq + std::ops::BitOr<Output = U>>(
    units: &[U],
    surrogate: impl Fn(U) -> U,
    length: impl Fn(&[U]) -> usize,
) -> Option<usize> {
    let mut len = 0;
    for chunk in units.chunks(SURROGATE_CHUNK) {
        // (flags or-ed over the whole chunk, in units of its width, with no early exit: a loop
        // the compiler vectorizes; a flag of one byte took a quarter more instructions)
        let surrogates = chunk
            .iter()
            .fold(U::default(), |any, &unit| any | surrogate(unit));
        if surrogates != U::default() {
            return None;
        }
        len += length(chunk);
    }
    Some(len)
}

/// Units of a string looked through for a surrogate and then counted together: 32 or 64 KB.
#[cfg(not(any(Py_LIMITED_API, PyPy, GraalPy, Py_3_14, Py_GIL_DISABLED)))]
const SURROGATE_CHUNK: usize = 1 << 14;

#[cfg(any(Py_LIMITED_API, PyPy, GraalPy, Py_3_14, Py_GIL_DISABLED))]
fn fill_utf8(_string: &Bound<'_, PyString>) {}
