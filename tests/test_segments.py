"""The byte-level segmenting and the NumPy segment table that encoding is built on.

Encoding's exactness is tested end to end against tiktoken and the reference encoder; these tests
pin down the two pieces underneath on their own, where a mistake would otherwise only show as a
slowdown (a missed cut) or in rare texts (a key that compares equal to another).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import regex
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bpestore.encode.byte_segments import gather_text, joinable, segment_bounds
from bpestore.pretokenize import SPLIT_SAFE_PATTERNS
from bpestore.train.counting import SegmentCounter
from bpestore.encode.segment_table import KEY_PADDING, MAX_KEY_BYTES, SegmentTable, segment_keys
from strategies import REGEX_WHITESPACE, SPECIAL_TOKEN_SETS, texts


def special_spans(text: str, special_tokens: list[str]) -> list[tuple[int, int]]:
    """Leftmost, then longest, non-overlapping occurrences, found one character at a time."""
    spans, position = [], 0
    longest_first = sorted(special_tokens, key=len, reverse=True)
    while position < len(text):
        token = next((t for t in longest_first if text.startswith(t, position)), None)
        if token is None:
            position += 1
        else:
            spans.append((position, position + len(token)))
            position += len(token)
    return spans


def expected_bounds(text: str, special_tokens: list[str]) -> list[int]:
    """The split rule of bpestore.pretokenize.patterns, in characters, then in bytes."""
    spans = special_spans(text, special_tokens)
    inside = {i for start, end in spans for i in range(start + 1, end)}
    special_starts = {start for start, _ in spans}
    cuts = {0, len(text)} | special_starts | {end for _, end in spans}
    for i in range(1, len(text) - 1):
        if (
            text[i] == " "
            and text[i + 1] not in REGEX_WHITESPACE
            and text[i - 1] not in REGEX_WHITESPACE
            and i not in inside
            and i + 1 not in special_starts  # the space before a special token ends its piece
        ):
            cuts.add(i)
    return sorted(len(text[:i].encode("utf-8")) for i in cuts)


def padded(text: str) -> tuple[bytes, np.ndarray]:
    data = text.encode("utf-8")
    buffer = data + bytes(KEY_PADDING)
    return data, np.frombuffer(buffer, dtype=np.uint8)


@settings(max_examples=300, deadline=None)
@given(text=texts(), special_tokens=st.sampled_from(SPECIAL_TOKEN_SETS))
def test_segment_bounds_follow_the_split_rule(text, special_tokens):
    data, raw = padded(text)
    spans = [(len(text[:s].encode()), len(text[:e].encode())) for s, e in special_spans(text, special_tokens)]
    has_space = any(" " in token for token in special_tokens)
    bounds = segment_bounds(raw, len(data), True, spans, has_space).tolist()
    assert bounds == expected_bounds(text, special_tokens)


@settings(max_examples=200, deadline=None)
@given(text=texts(special_pieces=False))
def test_gather_text_and_safe_starts(text):
    data, raw = padded(text)
    bounds = segment_bounds(raw, len(data), True, [], False)
    starts, lengths = bounds[:-1], np.diff(bounds)
    order = np.arange(len(starts))[::-1].copy()  # any order, not just the text's
    joined, char_lengths = gather_text(raw, starts[order], lengths[order])
    segments = [data[s:e].decode("utf-8") for s, e in zip(bounds[:-1].tolist(), bounds[1:].tolist())][::-1]
    assert joined == "".join(segments)
    assert char_lengths.tolist() == list(map(len, segments))
    side_by_side = joinable(raw, starts, lengths).tolist()
    assert side_by_side == [
        s[:1] == " " and len(s) > 1 and s[1] not in REGEX_WHITESPACE and s[-1] not in REGEX_WHITESPACE for s in segments[::-1]
    ]


@settings(max_examples=300, deadline=None)
@example(text="\n  a")  # cl100k's \s++$: "\n " alone ends the text, in "\n  a" it does not
@example(text=" a\n  b")
@example(text="x\n\t a")
@given(text=texts(special_pieces=False))
def test_split_rule_holds_for_each_split_safe_pattern(text):
    """A cut before a space between two non-whitespace characters changes no pre-token."""
    cuts = [i for i in range(1, len(text) - 1)
            if text[i] == " " and text[i + 1] not in REGEX_WHITESPACE and text[i - 1] not in REGEX_WHITESPACE]
    for pattern in SPLIT_SAFE_PATTERNS:
        compiled = regex.compile(pattern)
        whole = compiled.findall(text)
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
        assert [t for piece in pieces for t in compiled.findall(piece)] == whole, pattern
        # and segments that end with non-whitespace can be joined in any order
        joined = [p for p in pieces if p[:1] == " " and len(p) > 1 and p[1] not in REGEX_WHITESPACE and p[-1] not in REGEX_WHITESPACE]
        joined.reverse()
        assert compiled.findall("".join(joined)) == [t for p in joined for t in compiled.findall(p)], pattern


@settings(max_examples=200, deadline=None)
@example(texts_=["\n  a", "x\n\t", " b c\n"])
@given(texts_=st.lists(texts(special_pieces=False), max_size=4))
def test_segment_counter_counts_like_the_regex(texts_):
    """Training's counter (str.split and irregular spans) against plain findall, each pattern."""
    for pattern in SPLIT_SAFE_PATTERNS:
        counter = SegmentCounter(pattern, max_segments=3)  # folds often
        for text in texts_:
            counter.add(text)
        expected = Counter(token for text in texts_ for token in regex.findall(pattern, text))
        assert +counter.pretoken_counts() == expected, pattern


keys_and_ids = st.lists(
    st.tuples(
        # zero bytes at the end and every length up to the limit: "a" and "a\0" must differ
        st.binary(min_size=1, max_size=MAX_KEY_BYTES) | st.sampled_from([b"a", b"a\0", b"\0", b"\0\0", b"a" * MAX_KEY_BYTES]),
        st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=MAX_KEY_BYTES),
    ),
    max_size=300,
    unique_by=lambda pair: pair[0],
)


def keys_of(segments: list[bytes]) -> np.ndarray:
    buffer = b"".join(segments) + bytes(KEY_PADDING)
    lengths = np.array(list(map(len, segments)), dtype=np.int64)
    return segment_keys(buffer, np.cumsum(lengths) - lengths, lengths)


def stored_ids(table: SegmentTable, keys: np.ndarray) -> list[list[int] | None]:
    starts, counts = table.lookup(keys)
    return [table.ids[s : s + c].tolist() if s >= 0 else None for s, c in zip(starts.tolist(), counts.tolist())]


@settings(max_examples=100, deadline=None)
@given(stored=keys_and_ids, absent=st.lists(st.binary(min_size=1, max_size=MAX_KEY_BYTES), max_size=50))
def test_segment_table_is_exact(stored, absent):
    table = SegmentTable()
    half = len(stored) // 2
    for batch in (stored[:half], stored[half:]):  # two inserts: the table grows in between
        if batch:
            ids = np.array([i for _, ids in batch for i in ids], dtype=np.uint32)
            table.insert(keys_of([k for k, _ in batch]), ids, np.array([len(ids) for _, ids in batch]))
    expected = dict(stored)
    queries = [k for k, _ in stored] + absent
    if queries:
        assert stored_ids(table, keys_of(queries)) == [expected.get(k) for k in queries]
    assert len(table) == len(stored)
    table.clear()
    if queries:
        assert stored_ids(table, keys_of(queries)) == [None] * len(queries)
