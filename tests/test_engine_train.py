"""Differential tests of the Rust training engine (``bpestore._engine``'s train stage) against the
naive reference in tests/reference.py and Python's own UTF-8 decoder.

Counting a file must give exactly the reference's pre-token counts however the file is cut into
chunks (down to one byte, so that chunk edges land next to and inside special tokens) and however
many threads count; the merge loop must give exactly the reference's merges, for every vocab size.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpestore import _engine
from bpestore.errors import CorpusDecodeError
from conftest import shared_file
from gpt2_tiktoken import ENDOFTEXT, cs336_reference_training
from reference import GPT2_PATTERN, pretokenize, reference_pretoken_counts, reference_train, split_on_specials
from strategies import SPECIAL_TOKEN_SETS, random_text, texts
from tiers import examples

# Texts keep to code points assigned in Python's Unicode database (see strategies.texts): the
# `regex` module's tables are newer than the engine's (Unicode 17 against 16), and each rightly
# classes the code points assigned in between differently.
def assigned_texts(**kwargs):
    return texts(assigned_only=True, **kwargs)


def assigned_random_text(seed: int, size: int) -> str:
    return random_text(random.Random(seed), size, assigned_only=True)


# Not split-safe (a space before a letter is not a piece boundary): chunks can only be cut before
# special tokens.
WORDS_WITH_SPACES = r"[a-z ]+|[^a-z ]"


def write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))  # bytes: "\r\n" must reach the engine unchanged
    return path


def counts_with_pattern(text: str, special_tokens: list[str], pattern: str) -> Counter[bytes]:
    counts: Counter[bytes] = Counter()
    for piece in split_on_specials(text, special_tokens, keep=False):
        counts.update(pretokenize(piece, pattern))
    return counts


# -- counting ---------------------------------------------------------------------------------------


@settings(max_examples=examples(60), deadline=None)
@given(
    text=assigned_texts(),
    special_tokens=st.sampled_from(SPECIAL_TOKEN_SETS),
    chunk_bytes=st.one_of(st.integers(1, 48), st.just(4 << 20)),
    threads=st.sampled_from([1, 2]),
)
def test_count_file_matches_reference(tmp_path_factory, text, special_tokens, chunk_bytes, threads):
    path = write(tmp_path_factory.mktemp("corpus") / "text.txt", text)
    counts = _engine.count_file(path, GPT2_PATTERN, special_tokens, threads, chunk_bytes=chunk_bytes)
    expected = reference_pretoken_counts(text, special_tokens)
    assert Counter(counts.to_dict()) == expected
    assert counts.total == sum(expected.values())
    assert len(counts) == len(expected)


@settings(max_examples=examples(40), deadline=None)
@given(text=assigned_texts(), special_tokens=st.sampled_from(SPECIAL_TOKEN_SETS))
def test_count_file_at_every_chunk_size(tmp_path_factory, text, special_tokens):
    """Every chunk size from one byte up (each puts the cuts somewhere else), and the whole text."""
    path = write(tmp_path_factory.mktemp("corpus") / "text.txt", text)
    expected = reference_pretoken_counts(text, special_tokens)
    size = len(text.encode("utf-8"))
    for chunk_bytes in [*range(1, min(size, 64) + 1), size // 2 + 1, size + 1]:
        counts = _engine.count_file(path, GPT2_PATTERN, special_tokens, 1, chunk_bytes=chunk_bytes)
        assert Counter(counts.to_dict()) == expected, chunk_bytes


@settings(max_examples=examples(40), deadline=None)
@given(texts=st.lists(assigned_texts(), max_size=5), special_tokens=st.sampled_from(SPECIAL_TOKEN_SETS))
def test_count_texts_matches_reference(texts, special_tokens):
    counts = _engine.count_texts(iter(texts), GPT2_PATTERN, special_tokens)
    expected = sum((reference_pretoken_counts(text, special_tokens) for text in texts), Counter())
    assert Counter(counts.to_dict()) == expected


@pytest.mark.parametrize("special_tokens", [[], [ENDOFTEXT], ["<a>", "<b>"]])
def test_count_file_with_a_pattern_that_is_not_split_safe(tmp_path, special_tokens):
    text = assigned_random_text(5, 20_000)
    path = write(tmp_path / "text.txt", text)
    expected = counts_with_pattern(text, special_tokens, WORDS_WITH_SPACES)
    for chunk_bytes in [1, 100, 1 << 20]:
        counts = _engine.count_file(path, WORDS_WITH_SPACES, special_tokens, 2, chunk_bytes=chunk_bytes)
        assert Counter(counts.to_dict()) == expected, chunk_bytes


@pytest.fixture(scope="module")
def big_corpus(tmp_path_factory) -> tuple[Path, str]:
    """About 300 KB of awkward text, special tokens of all the sets included."""
    text = assigned_random_text(20240611, 300_000)
    return write(tmp_path_factory.mktemp("big") / "big.txt", text), text


@pytest.mark.parametrize("special_tokens", SPECIAL_TOKEN_SETS)
def test_count_file_same_for_any_threads_and_chunks(big_corpus, special_tokens):
    path, text = big_corpus
    expected = reference_pretoken_counts(text, special_tokens)
    for threads, chunk_bytes in [(1, 4 << 20), (2, 4 << 20), (2, 4096), (2, 7), (3, 100_000)]:
        counts = _engine.count_file(path, GPT2_PATTERN, special_tokens, threads, chunk_bytes=chunk_bytes)
        assert Counter(counts.to_dict()) == expected, (threads, chunk_bytes)


def test_count_file_reports_progress_in_bytes(big_corpus):
    path, _ = big_corpus
    reports: list[int] = []
    _engine.count_file(path, GPT2_PATTERN, [ENDOFTEXT], 2, reports.append, chunk_bytes=1000)
    assert sum(reports) == path.stat().st_size
    assert all(n > 0 for n in reports)


def test_count_file_stops_when_progress_raises(big_corpus):
    path, _ = big_corpus

    def fail(_):
        raise RuntimeError("stop here")

    # The first report comes after 0.1 s: small chunks and one thread make the work last longer.
    with pytest.raises(RuntimeError, match="stop here"):
        _engine.count_file(path, GPT2_PATTERN, [ENDOFTEXT], 1, fail, chunk_bytes=64)


# -- bad input --------------------------------------------------------------------------------------

BAD_UTF8 = [b"\xff", b"\x80", b"\xe4\xb8 next", b"\xe4\xb8<|endoftext|>", b"\xed\xa0\x80", b"\xc0\xaf", b"\xe4\xb8"]


@pytest.mark.parametrize("bad", BAD_UTF8)
@pytest.mark.parametrize("threads", [1, 2])
def test_decode_error_names_the_first_bad_byte(tmp_path, bad, threads):
    # Bad bytes near the end too: with small chunks, a later chunk may fail first.
    data = "Grüße, 世界! ".encode() * 300 + bad + b" and more " * 300 + b"\xff" + b" end"
    path = tmp_path / "bad.txt"
    path.write_bytes(data)
    with pytest.raises(UnicodeDecodeError) as python_error:
        data.decode("utf-8")
    for chunk_bytes in [1, 13, 4096, 4 << 20]:
        with pytest.raises(CorpusDecodeError) as error:
            _engine.count_file(path, GPT2_PATTERN, [ENDOFTEXT], threads, chunk_bytes=chunk_bytes)
        assert error.value.offset == python_error.value.start, chunk_bytes
        assert error.value.reason == python_error.value.reason, chunk_bytes
        assert error.value.path == str(path)


def test_missing_file_and_directory(tmp_path):
    missing = tmp_path / "no such file.txt"
    with pytest.raises(FileNotFoundError, match=re.escape(str(missing))):
        _engine.count_file(missing, GPT2_PATTERN, [])
    with pytest.raises(FileNotFoundError, match="Not a file"):
        _engine.count_file(tmp_path, GPT2_PATTERN, [])


def test_bad_arguments(tmp_path):
    path = write(tmp_path / "text.txt", "some text")
    with pytest.raises(ValueError):
        _engine.count_file(path, GPT2_PATTERN, [""])
    with pytest.raises(ValueError):
        _engine.count_file(path, "(unclosed", [])
    with pytest.raises(ValueError):
        _engine.count_file(path, GPT2_PATTERN, [], chunk_bytes=0)


# -- the counts object ------------------------------------------------------------------------------


def test_pretoken_counts_round_trip_and_merge():
    big = 3 << 40  # past 32 bits
    counts = _engine.PretokenCounts.from_dict({b" the": big, b"a": 2, b"": 1})
    assert counts.to_dict() == {b" the": big, b"a": 2, b"": 1}
    assert sorted(counts.items()) == sorted({b" the": big, b"a": 2, b"": 1}.items())
    assert (len(counts), counts.total, counts.get(b"a"), counts.get(b"zz"), counts.get(b"zz", 0)) == (3, big + 3, 2, None, 0)
    # a read-only mapping, like the dict it replaces
    assert counts[b" the"] == big and b"a" in counts and b"zz" not in counts and "a" not in counts
    with pytest.raises(KeyError):
        counts[b"zz"]
    assert sorted(counts) == sorted(counts.keys()) == [b"", b" the", b"a"]
    assert dict(zip(counts.keys(), counts.values())) == counts.to_dict()
    assert _engine.PretokenCounts.from_dict({b"x": 0}).to_dict() == {}  # a zero count is no count
    counts.merge(_engine.PretokenCounts.from_dict({b"a": 5, b"b": 1}))
    assert counts.to_dict() == {b" the": big, b"a": 7, b"": 1, b"b": 1}
    counts.clear()
    assert len(counts) == 0 and counts.total == 0
    with pytest.raises(ValueError):
        _engine.PretokenCounts.from_dict({"str": 1})
    with pytest.raises(ValueError):
        _engine.PretokenCounts.from_dict({b"x": -1})


# -- the merge loop ---------------------------------------------------------------------------------


@settings(max_examples=examples(80), deadline=None)
@given(text=assigned_texts(), special_tokens=st.sampled_from(SPECIAL_TOKEN_SETS))
def test_learn_merges_matches_reference_for_several_vocab_sizes(text, special_tokens):
    counts = _engine.count_texts([text], GPT2_PATTERN, special_tokens)
    longest = _engine.learn_merges(counts, 800)
    for merges in [1, 5, 40, 800]:
        _, expected = reference_train(text, 256 + len(special_tokens) + merges, special_tokens)
        assert _engine.learn_merges(counts, merges) == expected
        assert longest[:merges] == expected  # several vocab sizes from one run


def test_learn_merges_matches_cs336_reference():
    _, expected_merges = cs336_reference_training()
    counts = _engine.count_file(shared_file("fixtures", "corpus.en"), GPT2_PATTERN, [ENDOFTEXT])
    assert _engine.learn_merges(counts, 243) == expected_merges


@pytest.mark.slow  # (over 2 s here: the full suite's)
def test_learn_merges_same_for_any_thread_count(big_corpus):
    """Counts from one thread or two (whose tables are filled in other orders) merge the same."""
    path, _ = big_corpus
    special_tokens = [ENDOFTEXT, ENDOFTEXT * 2, "<a>"]
    one = _engine.learn_merges(_engine.count_file(path, GPT2_PATTERN, special_tokens, 1), 2000)
    two = _engine.learn_merges(_engine.count_file(path, GPT2_PATTERN, special_tokens, 2, chunk_bytes=999), 2000)
    assert len(one) == 2000 and one == two
    # and right, on a text small enough for the reference
    text = assigned_random_text(99, 20_000)
    small = write(path.parent / "small.txt", text)
    for threads in [1, 2]:
        counts = _engine.count_file(small, GPT2_PATTERN, special_tokens, threads, chunk_bytes=999)
        assert _engine.learn_merges(counts, 300) == reference_train(text, 256 + 3 + 300, special_tokens)[1]


def test_learn_merges_consume_and_progress(big_corpus):
    path, _ = big_corpus
    counts = _engine.count_file(path, GPT2_PATTERN, [ENDOFTEXT])
    kept = _engine.PretokenCounts.from_dict(counts.to_dict())
    reports: list[int] = []
    merges = _engine.learn_merges(counts, 300, reports.append, consume=True)
    assert len(counts) == 0  # consumed
    assert sum(reports) == len(merges) == 300
    assert _engine.learn_merges(kept, 300) == merges


def test_learn_merges_stops_when_no_pair_is_left():
    counts = _engine.PretokenCounts.from_dict({b"abc": 1, b"d": 5})
    assert _engine.learn_merges(counts, 100) == [(b"b", b"c"), (b"a", b"bc")]
