"""The cut rule, once per representation: one property run over each of them.

Where a representation says a text may be cut, cutting it there and pre-tokenizing both sides on
their own gives exactly the pre-tokens (and special tokens) of the whole text, as the reference
pre-tokenizer of tests/reference.py finds them. The representations: text (``str``, for segments
and streams), bytes of a file window, and the compiled engine.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpestore import _engine
from bpestore.pretokenize.patterns import CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN
from reference import pretokenize, split_on_specials
from reference_cuts import SpecialSplitter, covered_by_other_special, find_safe_space, last_safe_cut, next_safe_space
from strategies import SPECIAL_TOKEN_SETS, texts
from tiers import examples

PATTERNS = [GPT2_PATTERN, CL100K_PATTERN, O200K_PATTERN]


def pieces(text: str, special_tokens: list[str], pattern: str) -> list[bytes]:
    """The reference's pieces: special tokens as pieces of their own, pre-tokens between them."""
    result: list[bytes] = []
    for index, part in enumerate(split_on_specials(text, special_tokens, keep=True)):
        result += [part.encode("utf-8")] if index % 2 else pretokenize(part, pattern)
    return result


def char_index(data: bytes, offset: int) -> int:
    return len(data[:offset].decode("utf-8"))


def str_next_safe_space(text: str, special_tokens: list[str], pattern: str) -> list[int]:
    # Segments are cut inside a text between special tokens: cuts of the first such text.
    first = split_on_specials(text, special_tokens, keep=False)[0]
    cuts, position = [], 1
    while (position := next_safe_space(first, position)) < len(first):
        cuts.append(position)
        position += 1
    return cuts


def str_last_safe_cut(text: str, special_tokens: list[str], pattern: str) -> list[int]:
    # A stream's prefixes: each cut must hold whatever follows, so it is checked on the whole text.
    splitter = SpecialSplitter(special_tokens)
    return [last_safe_cut(text[:end], splitter, True) for end in range(0, len(text) + 1, 7)]


def bytes_file_window(text: str, special_tokens: list[str], pattern: str) -> list[int]:
    data = text.encode("utf-8")
    specials = [token.encode("utf-8") for token in special_tokens]
    if any(b" " in token for token in specials):
        return []  # chunking takes no space cuts then (reference_cuts)
    cuts, begin = [], 0
    while (found := find_safe_space(data, begin, specials)) >= 0:
        cuts.append(char_index(data, found))
        begin = found + 1
    for token in specials:  # special-token starts that no other special token covers
        found = data.find(token)
        while found >= 0:
            if not covered_by_other_special(data, found, specials):
                cuts.append(char_index(data, found))
            found = data.find(token, found + 1)
    return cuts


def engine_last_safe_cut(text: str, special_tokens: list[str], pattern: str) -> list[int]:
    pretokenizer = _engine.Pretokenizer(pattern, special_tokens)
    return [pretokenizer.last_safe_cut(text[:end]) for end in range(0, len(text) + 1, 7)]


def engine_next_safe_cut(text: str, special_tokens: list[str], pattern: str) -> list[int]:
    pretokenizer = _engine.Pretokenizer(pattern, special_tokens)
    data = text.encode("utf-8")
    cuts, start = [], 0
    while (found := pretokenizer.next_safe_cut(data, start)) is not None:
        cuts.append(char_index(data, found))
        start = found + 1
    return cuts


def engine_find_cut(text: str, special_tokens: list[str], pattern: str) -> list[int]:
    # The cut a shard starting at each byte would start at (read through a callback, as a
    # stream or a remote file is), in characters.
    pretokenizer = _engine.Pretokenizer(pattern, special_tokens)
    data = text.encode("utf-8")
    cuts = []
    for target in range(len(data) + 1):
        cut = pretokenizer.find_cut(len(data), target, lambda start, end: data[start:end])
        assert target <= cut <= len(data) or (target > len(data) and cut == len(data))
        cuts.append(char_index(data, cut))
    return cuts


REPRESENTATIONS = [
    str_next_safe_space, str_last_safe_cut, bytes_file_window, engine_last_safe_cut, engine_next_safe_cut, engine_find_cut,
]


@pytest.mark.parametrize("cuts_of", REPRESENTATIONS, ids=lambda function: function.__name__)
@settings(max_examples=examples(150), deadline=None)
@given(text=texts(), special_tokens=st.sampled_from(SPECIAL_TOKEN_SETS), pattern=st.sampled_from(PATTERNS))
def test_a_cut_changes_no_piece(cuts_of, text, special_tokens, pattern):
    if cuts_of is str_next_safe_space:
        text = split_on_specials(text, special_tokens, keep=False)[0]  # a text between special tokens
    whole = pieces(text, special_tokens, pattern)
    for cut in sorted(set(cuts_of(text, special_tokens, pattern))):
        assert 0 <= cut <= len(text)
        assert pieces(text[:cut], special_tokens, pattern) + pieces(text[cut:], special_tokens, pattern) == whole, (
            cuts_of.__name__, cut, text[max(cut - 10, 0) : cut + 10],
        )


@settings(max_examples=examples(100), deadline=None)
@given(
    text=texts(), special_tokens=st.sampled_from(SPECIAL_TOKEN_SETS), pattern=st.sampled_from(PATTERNS),
    chunk_bytes=st.integers(1, 64),
)
def test_shards_of_a_stream_are_cut_where_the_engine_cuts_a_file(tmp_path_factory, text, special_tokens, pattern, chunk_bytes):
    """One rule for where a file is cut: the engine's chunks of a file it reads itself, and the
    cuts found through ``find_cut`` for a source read by Python (a shard of a stream or of a
    remote file: ``count_shard``), by the chunking rule (each cut the first at or after the
    previous one + 1 and the next multiple of ``chunk_bytes``)."""
    path = tmp_path_factory.mktemp("cuts") / "text.txt"
    data = text.encode("utf-8")
    path.write_bytes(data)
    pretokenizer = _engine.Pretokenizer(pattern, special_tokens)
    reads: list[tuple[int, int]] = []

    def read(start: int, end: int) -> bytes:
        reads.append((start, end))
        return data[start:end]

    boundaries, target = [0], chunk_bytes
    while target < len(data):
        cut = pretokenizer.find_cut(len(data), target, read)
        if cut >= len(data):
            break
        boundaries.append(cut)
        target = max(cut + 1, target + chunk_bytes)
    boundaries.append(len(data))
    assert boundaries == list(_engine.file_chunk_boundaries(str(path), pattern, special_tokens, chunk_bytes))
    assert all(0 <= start < end <= len(data) for start, end in reads)


def test_find_cut_refuses_a_short_read_and_passes_the_readers_errors_on():
    pretokenizer = _engine.Pretokenizer(GPT2_PATTERN, ["<|endoftext|>"])
    data = b"hello world, " * 10
    with pytest.raises(ValueError, match=r"read\(\d+, \d+\) returned 3 bytes, not \d+"):
        pretokenizer.find_cut(len(data), 20, lambda start, end: b"abc")

    def failing(start: int, end: int) -> bytes:
        raise OSError("the disk went away")

    with pytest.raises(OSError, match="the disk went away"):
        pretokenizer.find_cut(len(data), 20, failing)
    with pytest.raises(TypeError):
        pretokenizer.find_cut(len(data), 20, lambda start, end: "not bytes")
    # No read at all where the answer needs none: the start, and at or past the end.
    never = lambda start, end: pytest.fail("read")  # noqa: E731
    assert pretokenizer.find_cut(len(data), 0, never) == 0
    assert pretokenizer.find_cut(len(data), len(data), never) == len(data)
    assert pretokenizer.find_cut(len(data), len(data) + 5, never) == len(data)
