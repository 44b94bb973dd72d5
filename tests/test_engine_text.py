"""Python strings reach the engine as their UTF-8 (``crates/python/src/text.rs``).

A string that is not ASCII is converted by the engine (with simdutf), which leaves the UTF-8
beside the string as CPython's conversion does (a string with a surrogate is left to CPython,
which raises). These tests use a vocabulary of the 256 single
bytes and no merges, whose ids are the text's UTF-8 bytes, so each encode shows exactly what the
engine read; and they ask CPython for the string's UTF-8 afterwards, which must be the string's.
(The expected bytes come from an equal string of their own: CPython's ``str.encode`` reads the
UTF-8 kept beside a string, so the string the engine read would agree with a wrong conversion.)
"""

from __future__ import annotations

import ctypes
import gc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpestore import Tokenizer, _engine
from bpestore.pretokenize import GPT2_PATTERN
from strategies import texts
from tiers import examples

PROPERTY = settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])

_as_utf8 = ctypes.pythonapi.PyUnicode_AsUTF8AndSize
_as_utf8.argtypes = [ctypes.py_object, ctypes.POINTER(ctypes.c_ssize_t)]
_as_utf8.restype = ctypes.c_void_p


def pythons_utf8(text: str) -> bytes:
    """CPython's UTF-8 of ``text``: the copy kept beside the string (made now if there is none)."""
    size = ctypes.c_ssize_t()
    address = _as_utf8(text, ctypes.byref(size))
    return ctypes.string_at(address, size.value)


def fresh(text: str) -> str:
    """A new string equal to ``text``, with no UTF-8 beside it yet."""
    return (text + "\x00")[:-1]


@pytest.fixture(scope="module")
def bytes_only() -> Tokenizer:
    """A tokenizer whose ids are the text's UTF-8 bytes."""
    return Tokenizer({byte: bytes([byte]) for byte in range(256)}, [], [])


# Code points of each width CPython stores a string in: ASCII; Latin-1 (one byte each);
# the rest of the Basic Multilingual Plane (two), with no surrogate; past it (four).
WIDTHS = {
    "latin1": st.characters(min_codepoint=0, max_codepoint=0xFF),
    "bmp": st.characters(min_codepoint=0, max_codepoint=0xFFFF, exclude_categories=("Cs",)),
    "astral": st.characters(min_codepoint=0, exclude_categories=("Cs",)),
}


def mostly_ascii(chars: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Runs of ASCII of every length (transcoders take them in blocks) between characters of
    ``chars``."""
    run = st.text(st.characters(max_codepoint=0x7F), max_size=40)
    return st.lists(st.one_of(run, st.text(chars, max_size=3)), max_size=12).map("".join)


@PROPERTY
@given(st.one_of(*(mostly_ascii(chars) for chars in WIDTHS.values()), texts()))
def test_the_engine_reads_every_string_as_its_utf8(bytes_only: Tokenizer, text: str) -> None:
    expected = fresh(text).encode("utf-8")
    text = fresh(text)
    assert bytes(bytes_only.encode(text, allowed_special=set())) == expected
    # what the engine left beside the string is the string's UTF-8, for every later reader
    assert pythons_utf8(text) == expected
    assert bytes(bytes_only.encode(text, allowed_special=set())) == expected


@pytest.mark.parametrize("width", sorted(WIDTHS))
@pytest.mark.parametrize("length", [1, 15, 16, 17, 31, 32, 33, 1000])
def test_long_and_short_strings_of_each_width(bytes_only: Tokenizer, width: str, length: int) -> None:
    widest = {"latin1": "\xff", "bmp": "\uffff", "astral": "\U0010ffff"}[width]
    for text in (widest * length, "a" * length + widest, widest + "a" * length, ("a" * 15 + widest) * length):
        expected = fresh(text).encode("utf-8")
        text = fresh(text)
        assert bytes(bytes_only.encode(text, allowed_special=set())) == expected
        assert pythons_utf8(text) == expected


# (the fourth: two surrogates in a row, which UTF-16 would read as one character; the last two:
# surrogates in strings of four bytes a character)
@pytest.mark.parametrize("text", ["\ud800", "abc\udfff", "é" * 20 + "\ud83d", "жёлтый \ud83d\ude00", "a" * 40 + "\udc00" + "😀", "😀\ud800"])
def test_a_lone_surrogate_raises_pythons_own_error(text: str) -> None:
    # (CPython's conversion is the one that raises: the same error and message as ever)
    with pytest.raises(UnicodeEncodeError) as raised:
        fresh(text).encode("utf-8")
    encoder = _engine.Encoder({byte: bytes([byte]) for byte in range(256)}, [], {}, GPT2_PATTERN, "token")
    with pytest.raises(UnicodeEncodeError) as ours:
        encoder.encode(fresh(text))
    assert (ours.value.start, ours.value.end, ours.value.reason) == (raised.value.start, raised.value.end, raised.value.reason)


def test_strings_converted_by_python_or_ascii_are_read_as_they_are(bytes_only: Tokenizer) -> None:
    ascii_text = "plain ASCII " * 10
    assert bytes(bytes_only.encode(ascii_text)) == fresh(ascii_text).encode()
    converted = fresh("déjà vu " * 10)
    assert pythons_utf8(converted) == fresh(converted).encode()  # (CPython made it)
    assert bytes(bytes_only.encode(converted)) == fresh(converted).encode()


def test_strings_are_freed_with_their_utf8(bytes_only: Tokenizer) -> None:
    # Thousands of strings converted and dropped: CPython frees each one's UTF-8 with it
    # (a buffer of the wrong allocator, or freed twice, crashes the interpreter here).
    for round_ in range(3000):
        text = fresh(f"ünïcödé {round_} 😀 " * (1 + round_ % 7))
        bytes_only.encode(text)
        del text
    gc.collect()
    batch = [fresh(f"жёлтый {i} 中文") for i in range(500)]
    expected = [fresh(text).encode() for text in batch]
    assert [bytes(ids) for ids in bytes_only.encode_batch(batch, num_threads=2)] == expected


@pytest.mark.parametrize("width", sorted(WIDTHS))
def test_strings_of_megabytes_of_each_width(bytes_only: Tokenizer, width: str) -> None:
    # (past a few megabytes the engine asks for huge pages behind the UTF-8 it writes and the
    # ids: the bytes must not change for it)
    widest = {"latin1": "\xff", "bmp": "\uffff", "astral": "\U0010ffff"}[width]
    text = fresh(("a" * 15 + widest + " ") * 300_000)
    expected = fresh(text).encode("utf-8")
    assert len(expected) > 4 << 20
    ids = bytes_only.encode_to_array(text, allowed_special=set())
    assert ids.astype("uint8").tobytes() == expected
    assert pythons_utf8(text) == expected
