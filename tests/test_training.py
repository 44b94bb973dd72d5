"""Differential tests of ``bpestore.train_bpe`` against the naive reference in tests/reference.py.

The reference recounts everything after every merge, so any result bpestore's incremental merge
loop, its chunked parallel pre-tokenization or its pre-tokenizer shortcuts get wrong shows up as a
difference. Expectations always come from the reference or from the CS336 reference files.
"""

from __future__ import annotations

import random
import re
import warnings
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpestore
import bpestore.train.trainer
from bpestore import _engine
from bpestore.train.trainer import VocabSizeNotReachedWarning
from bpestore.pretokenize import GPT2_PATTERN
from conftest import shared_file
from gpt2_tiktoken import ENDOFTEXT, cs336_reference_training
from reference import reference_pretoken_counts, reference_train
from strategies import SPACED_SPECIAL, SPECIAL_TOKEN_SETS, random_text, texts
from tiers import examples


# UNICODE_NOTE: texts that train_bpe pre-tokenizes keep to code points assigned in Python's Unicode
# database (strategies.texts(assigned_only=True)): the reference's `regex` module has newer Unicode
# tables than the engine's pre-tokenizer (17 against 16), and each rightly classes the code points
# assigned in between differently (U+325A1 is a letter to one and not the other).


def write_corpus(path: Path, text: str) -> Path:
    # Bytes, not text mode: "\r" and "\r\n" must reach the trainer unchanged.
    path.write_bytes(text.encode("utf-8"))
    return path


def assert_trains_as_reference(path: Path, text: str, vocab_size: int, special_tokens: list[str]) -> None:
    """train_bpe gives the reference's result, or refuses a corpus that holds nothing to learn
    from (empty, or only special tokens: the reference would return the 256 bytes alone)."""
    if not reference_pretoken_counts(text, special_tokens):
        with pytest.raises(bpestore.EmptyCorpusError, match="nothing to train on"):
            bpestore.train_bpe(path, vocab_size, special_tokens)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VocabSizeNotReachedWarning)  # tested on its own below
        assert bpestore.train_bpe(path, vocab_size, special_tokens) == reference_train(text, vocab_size, special_tokens)


@st.composite
def training_cases(draw):
    """(text, vocab_size, special_tokens) with vocab sizes from "no merges at all" to "runs out"."""
    special_tokens = draw(st.sampled_from(SPECIAL_TOKEN_SETS))
    vocab_size = draw(st.sampled_from([256 + len(special_tokens), 260, 300, 400, 1000]))
    return draw(texts(assigned_only=True)), vocab_size, special_tokens


@settings(max_examples=examples(120), deadline=None)
@given(training_cases())
def test_train_bpe_matches_reference_on_generated_text(tmp_path_factory, case):
    # tmp_path_factory, being session-scoped, may serve hypothesis examples (tmp_path may not).
    text, vocab_size, special_tokens = case
    path = write_corpus(tmp_path_factory.mktemp("corpus") / "text.txt", text)
    assert_trains_as_reference(path, text, vocab_size, special_tokens)


EDGE_CASES = [
    ("", [ENDOFTEXT]),
    (ENDOFTEXT, [ENDOFTEXT]),
    (ENDOFTEXT * 3, [ENDOFTEXT, ENDOFTEXT * 2]),
    (ENDOFTEXT * 3, [ENDOFTEXT * 2, ENDOFTEXT]),  # longest first, whatever the order given
    (f"{ENDOFTEXT} a{ENDOFTEXT}\n{ENDOFTEXT}  \n\n{ENDOFTEXT}b{ENDOFTEXT}", [ENDOFTEXT]),
    (f" {ENDOFTEXT}{ENDOFTEXT} the{ENDOFTEXT}", []),  # not special: ordinary text
    ("<a><b><a> <b>\n<a>x<b>", ["<a>", "<b>"]),
    ("aaaa aaa aa a aaaaa baaab", []),
    ("a" * 500 + " " + "ab" * 300, []),
    ("don't we'll 's 'S I'M it''s ' s y'all", []),
    ("٣৩ 123 ²Ⅻ ٣٣٣ ৩৩ 1２3", []),
    ("  \n  \n\t \u3000\u3000 x\x1c\x1d y  \x1c  z \x85\xa0 \u2028\n", []),
    ("line one\r\nline two\r\n\r\n  line three \r\n", []),
    ("e\u0301 e\u0301e\u0301 \u0301\u0301 中文 中文中文 😀😀 👍🏽👍🏽 👨‍👩‍👧", []),
    (f"{SPACED_SPECIAL} x {SPACED_SPECIAL}{SPACED_SPECIAL}  <| sep", [SPACED_SPECIAL]),
]


@pytest.mark.parametrize("vocab_size_over_minimum", [0, 4, 40, 800])
@pytest.mark.parametrize(("text", "special_tokens"), EDGE_CASES)
def test_train_bpe_matches_reference_on_edge_cases(tmp_path, text, special_tokens, vocab_size_over_minimum):
    vocab_size = 256 + len(special_tokens) + vocab_size_over_minimum
    path = write_corpus(tmp_path / "text.txt", text)
    assert_trains_as_reference(path, text, vocab_size, special_tokens)


@pytest.mark.parametrize("workers", [1, 2])
def test_train_bpe_matches_cs336_reference(monkeypatch, workers):
    expected_vocab, expected_merges = cs336_reference_training()
    if workers > 1:
        calls = force_chunks(monkeypatch, 8192)
    vocab, merges = bpestore.train_bpe(shared_file("fixtures", "corpus.en"), 500, [ENDOFTEXT], workers=workers)
    if workers > 1:
        assert calls == [(workers, 8192)] and chunks(shared_file("fixtures", "corpus.en"), [ENDOFTEXT], 8192) > 5
    assert merges == expected_merges
    assert set(vocab) == set(expected_vocab)
    assert set(vocab.values()) == set(expected_vocab.values())


# -- parallel and chunked pre-tokenization --------------------------------------------------------


def force_chunks(monkeypatch, chunk_bytes: int) -> list[tuple[int | None, int]]:
    """Make ``train_bpe`` count its corpus in chunks of about ``chunk_bytes`` (the engine's default
    is 4 MiB, more than these corpora). Returns a list that records, for each count, ``(threads,
    chunk_bytes)``, to check that the settings really reached the engine."""
    calls: list[tuple[int | None, int]] = []
    count_file = _engine.count_file

    def counting(path, pattern, special_tokens, threads=None, progress=None, **kwargs):
        calls.append((threads, chunk_bytes))
        return count_file(path, pattern, special_tokens, threads, progress, chunk_bytes=chunk_bytes)

    monkeypatch.setattr(bpestore.train.trainer, "engine_count_file", counting)
    return calls


def count_file(path, special_tokens, threads: int, chunk_bytes: int) -> Counter[bytes]:
    """The engine's counts, after checking that the file really is cut into several chunks."""
    return Counter(_engine.count_file(path, GPT2_PATTERN, special_tokens, threads, chunk_bytes=chunk_bytes).to_dict())


def chunks(path, special_tokens, chunk_bytes: int) -> int:
    return len(_engine.file_chunk_boundaries(path, GPT2_PATTERN, special_tokens, chunk_bytes)) - 1


@pytest.fixture(scope="module")
def big_corpus(tmp_path_factory) -> tuple[Path, str]:
    """About 300 KB of awkward text, special tokens of all the sets included (code points assigned
    in Python's Unicode database only: see UNICODE_NOTE)."""
    text = random_text(random.Random(20240611), 300_000, assigned_only=True)
    return write_corpus(tmp_path_factory.mktemp("big") / "big.txt", text), text


@pytest.mark.parametrize("special_tokens", [[ENDOFTEXT], [SPACED_SPECIAL, ENDOFTEXT], []])
def test_pretoken_counts_same_in_chunks_and_threads(big_corpus, special_tokens):
    path, text = big_corpus
    assert chunks(path, special_tokens, 4096) > 50
    expected = reference_pretoken_counts(text, special_tokens)
    assert count_file(path, special_tokens, threads=2, chunk_bytes=4096) == expected


@pytest.mark.slow  # (over 2 s here: the full suite's)
def test_train_bpe_same_for_any_workers_and_chunking(big_corpus, monkeypatch):
    path, text = big_corpus
    special_tokens = [ENDOFTEXT, ENDOFTEXT * 2, "<a>"]
    expected = reference_train(text, 330, special_tokens)
    assert bpestore.train_bpe(path, 330, special_tokens, workers=1) == expected
    calls = force_chunks(monkeypatch, 8192)
    assert bpestore.train_bpe(path, 330, special_tokens, workers=2) == expected
    assert calls == [(2, 8192)] and chunks(path, special_tokens, 8192) > 20


@settings(max_examples=examples(50), deadline=None)
@given(text=texts(assigned_only=True), special_tokens=st.sampled_from(SPECIAL_TOKEN_SETS), chunk_bytes=st.integers(1, 48))
def test_pretoken_counts_same_for_tiny_chunks(tmp_path_factory, text, special_tokens, chunk_bytes):
    """Cutting a text almost everywhere the chunker allows must not change a single count."""
    path = write_corpus(tmp_path_factory.mktemp("corpus") / "text.txt", text)
    expected = reference_pretoken_counts(text, special_tokens)
    assert count_file(path, special_tokens, threads=1, chunk_bytes=chunk_bytes) == expected


@pytest.mark.parametrize(
    "special_tokens", [[ENDOFTEXT], ["<a>", "<b>"], [SPACED_SPECIAL, ENDOFTEXT]], ids=["endoftext", "a-b", "spaced"]
)
@pytest.mark.parametrize("whitespace", ["  ", "\n ", "\t ", " \u3000 ", "\n\n  "])
def test_pretoken_counts_whitespace_before_a_special_token(tmp_path, special_tokens, whitespace):
    """A run of whitespace right before a special token ends its piece of text, and so is one
    pre-token however it ends: a space in it is no place to cut, although a non-space follows."""
    text = "the cat sat" + "".join(f" on{whitespace}{special} the mat" for special in special_tokens)
    path = write_corpus(tmp_path / "text.txt", text)
    expected = reference_pretoken_counts(text, special_tokens)
    for chunk_bytes in range(1, len(text.encode("utf-8")) + 1):
        assert count_file(path, special_tokens, threads=1, chunk_bytes=chunk_bytes) == expected, chunk_bytes


def test_pretoken_counts_tiny_chunks_in_threads(tmp_path):
    text = random_text(random.Random(7), 3000, assigned_only=True)
    path = write_corpus(tmp_path / "text.txt", text)
    for special_tokens in SPECIAL_TOKEN_SETS:
        expected = reference_pretoken_counts(text, special_tokens)
        assert count_file(path, special_tokens, threads=2, chunk_bytes=5) == expected, special_tokens
        # Special tokens with a space leave only themselves as places to cut; the others allow many.
        if SPACED_SPECIAL not in special_tokens:
            assert chunks(path, special_tokens, 5) > 100, special_tokens


# -- the merge loop on known counts ----------------------------------------------------------------


@settings(max_examples=examples(50), deadline=None)
@given(text=texts(special_pieces=False), max_merges=st.sampled_from([1, 5, 40, 700]))
def test_learn_merges_matches_reference(text, max_merges):
    """The merges, and the VocabSizeNotReachedWarning exactly when a random text holds fewer
    merges than asked for."""
    counts = dict(reference_pretoken_counts(text, []))
    _, expected = reference_train(text, 256 + max_merges, [])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert bpestore.train.trainer.learn_merges(counts, max_merges) == expected
        # The pre-token order (which differs between runs with several threads) must not matter.
        reordered = dict(reversed(counts.items()))
        assert bpestore.train.trainer.learn_merges(reordered, max_merges) == expected
    short = [w for w in caught if issubclass(w.category, bpestore.train.trainer.VocabSizeNotReachedWarning)]
    assert len(short) == (2 if len(expected) < max_merges else 0), [str(w.message) for w in caught]


def test_learn_merges_matches_cs336_reference():
    text = shared_file("fixtures", "corpus.en").read_bytes().decode("utf-8")
    _, expected_merges = cs336_reference_training()
    counts = dict(reference_pretoken_counts(text, [ENDOFTEXT]))
    assert bpestore.train.trainer.learn_merges(counts, 243) == expected_merges


# -- bad input ------------------------------------------------------------------------------------


def test_missing_file(tmp_path):
    path = tmp_path / "no such file.txt"
    with pytest.raises(FileNotFoundError, match=re.escape(str(path))):
        bpestore.train_bpe(path, 300)


def test_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path))):
        bpestore.train_bpe(tmp_path, 300)


def assert_names_offset(error: bpestore.CorpusDecodeError, path: Path, offset: int) -> None:
    assert isinstance(error, ValueError)
    # The path itself may hold digits; the offset must appear in the rest of the message.
    message = str(error).replace(str(path), "")
    assert re.search(rf"(?<!\d){offset}(?!\d)", message), (offset, str(error))


def first_bad_offset(data: bytes) -> int:
    """Where Python's own decoder says the UTF-8 first goes wrong: an independent expectation."""
    with pytest.raises(UnicodeDecodeError) as error:
        data.decode("utf-8")
    return error.value.start


BAD_UTF8 = [
    b"\xff",  # never valid
    b"\x80",  # continuation byte without a start
    b"\xe4\xb8 next",  # truncated sequence, then a space where a chunk may be cut
    b"\xed\xa0\x80",  # an encoded surrogate
    b"\xc0\xaf",  # overlong
    b"\xf4\x90\x80\x80",  # above U+10FFFF
]


@pytest.mark.parametrize("bad", BAD_UTF8)
def test_invalid_utf8_names_the_offset(tmp_path, bad):
    prefix = "Grüße, 世界! ".encode() * 100
    path = tmp_path / "bad.txt"
    path.write_bytes(prefix + bad + b" and more text")
    assert first_bad_offset(path.read_bytes()) == len(prefix)
    with pytest.raises(bpestore.CorpusDecodeError) as error:
        bpestore.train_bpe(path, 300)
    assert_names_offset(error.value, path, len(prefix))


@pytest.mark.parametrize("bad", [BAD_UTF8[0], BAD_UTF8[2]])
def test_invalid_utf8_far_into_a_file_read_by_two_threads(tmp_path, monkeypatch, bad):
    rng = random.Random(3)
    head = random_text(rng, 200_000).encode("utf-8")
    path = tmp_path / "bad.txt"
    path.write_bytes(head + bad + random_text(rng, 100_000).encode("utf-8"))
    assert chunks(path, [ENDOFTEXT], 4096) > 20
    offset = first_bad_offset(path.read_bytes())
    assert offset == len(head)
    calls = force_chunks(monkeypatch, 4096)
    with pytest.raises(bpestore.CorpusDecodeError) as error:
        bpestore.train_bpe(path, 300, [ENDOFTEXT], workers=2)
    assert calls == [(2, 4096)]
    assert_names_offset(error.value, path, offset)


def test_invalid_utf8_first_offset_whichever_process_finds_it(tmp_path):
    """With bad bytes in two chunks, the error names the first, as documented, whatever the race
    between the threads (repeated: a wrong answer shows up in about a third of the runs)."""
    chunk_bytes = 4096
    data = bytearray(b"hello world " * chunk_bytes)
    data[chunk_bytes - 100] = 0xFF  # near the end of the first chunk
    data[chunk_bytes + 100] = 0xFE  # near the start of the second
    path = tmp_path / "bad.txt"
    path.write_bytes(data)
    boundaries = _engine.file_chunk_boundaries(path, GPT2_PATTERN, [], chunk_bytes)
    assert boundaries[1] in range(chunk_bytes - 99, chunk_bytes + 101)  # the two really are apart
    offsets = []
    for _ in range(20):
        with pytest.raises(bpestore.CorpusDecodeError) as error:
            _engine.count_file(path, GPT2_PATTERN, [], 2, chunk_bytes=chunk_bytes)
        offsets.append(error.value.offset)
    assert offsets == [chunk_bytes - 100] * 20


@pytest.mark.parametrize("special_tokens", [[], [ENDOFTEXT], ["<a>", "<b>"]])
def test_vocab_size_below_minimum(tmp_path, special_tokens):
    path = write_corpus(tmp_path / "text.txt", "some text")
    minimum = 256 + len(special_tokens)
    with pytest.raises(ValueError, match=rf"(?<!\d){minimum}(?!\d)"):
        bpestore.train_bpe(path, minimum - 1, special_tokens)
    vocab, merges = bpestore.train_bpe(path, minimum, special_tokens)  # the minimum itself is fine
    assert len(vocab) == minimum and merges == []


def test_duplicate_special_tokens(tmp_path):
    path = write_corpus(tmp_path / "text.txt", "some text")
    with pytest.raises(ValueError):
        bpestore.train_bpe(path, 300, [ENDOFTEXT, "<a>", ENDOFTEXT])


@pytest.mark.parametrize(("text", "special_tokens"), [("", []), ("", [ENDOFTEXT, "<a>"]), (ENDOFTEXT * 3 + "<a>", [ENDOFTEXT, "<a>"])])
def test_empty_corpus_is_refused(tmp_path, text, special_tokens):
    # Nothing to learn from: an error, not a tokenizer of the 256 bytes alone.
    path = write_corpus(tmp_path / "empty.txt", text)
    with pytest.raises(bpestore.EmptyCorpusError, match=rf"{re.escape(str(path))}: .*nothing to train on"):
        bpestore.train_bpe(path, 1000, special_tokens)
    with pytest.raises(ValueError):  # an EmptyCorpusError is a ValueError, as bad arguments are
        bpestore.train_bpe(path, 1000, special_tokens)


def test_warns_when_the_vocab_size_cannot_be_reached(tmp_path):
    text = "abab abab cd"
    path = write_corpus(tmp_path / "small.txt", text)
    possible = len(reference_train(text, 10_000, [])[1])  # every merge the corpus allows
    with pytest.warns(VocabSizeNotReachedWarning, match=rf"after {possible} of the {400 - 256} merges.* {400 - 256 - possible} tokens smaller"):
        vocab, merges = bpestore.train_bpe(path, 400, [])
    assert len(merges) == possible and len(vocab) == 256 + possible
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # reachable: no warning
        bpestore.train_bpe(path, 256 + possible, [])


def test_one_string_is_not_a_list_of_special_tokens(tmp_path):
    # "abc" is a sequence of three strings; taking it as ["a", "b", "c"] would be a surprise.
    path = write_corpus(tmp_path / "text.txt", "some text")
    for special_tokens in ["abc", "<|endoftext|>", b"<s>"]:
        with pytest.raises(TypeError, match="list of strings"):
            bpestore.train_bpe(path, 300, special_tokens)


@pytest.mark.parametrize("special_token", [" ", "a", "\n", "\x00"])
def test_single_byte_special_token_is_refused_before_training(tmp_path, monkeypatch, special_token):
    # The byte already has a token: the vocab would hold it twice. Refused before any counting.
    path = write_corpus(tmp_path / "text.txt", "some text")
    counted = []
    monkeypatch.setattr(bpestore.train.trainer, "engine_count_file", lambda *args, **kwargs: counted.append(args))
    with pytest.raises(ValueError, match="single byte"):
        bpestore.train_bpe(path, 300, [special_token])
    with pytest.raises(ValueError, match="single byte"):
        bpestore.train.trainer.train_from_counts({b"ab": 2}, 300, [ENDOFTEXT, special_token])
    assert counted == []


def test_multibyte_character_special_token_is_kept_apart(tmp_path):
    # "é" is two bytes: a token of its own, never merged, and no duplicate in the vocab.
    text = "café é cafés"
    path = write_corpus(tmp_path / "text.txt", text)
    # (260: the 256 bytes, "é" and the 3 merges this text holds, a size it reaches)
    vocab, merges = bpestore.train_bpe(path, 260, ["é"])
    assert (vocab, merges) == reference_train(text, 260, ["é"])
    assert len(set(vocab.values())) == len(vocab)


def test_empty_corpus_of_several_files_or_strings_is_refused(tmp_path):
    files = [write_corpus(tmp_path / "a.txt", ""), write_corpus(tmp_path / "b.txt", ENDOFTEXT)]
    with pytest.raises(bpestore.EmptyCorpusError, match="a.txt, .*b.txt: .*nothing to train on"):
        bpestore.train_bpe(files, 300, [ENDOFTEXT])
    with pytest.raises(bpestore.EmptyCorpusError, match="nothing to train on"):
        bpestore.train_bpe(iter(["", ENDOFTEXT + ENDOFTEXT]), 300, [ENDOFTEXT])


def test_cli_train_warns_in_one_line_when_the_vocab_size_cannot_be_reached(tmp_path):
    from click.testing import CliRunner

    from bpestore.cli import main

    corpus = write_corpus(tmp_path / "small.txt", "abab abab cd")
    try:
        runner = CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        runner = CliRunner()
    result = runner.invoke(main, ["--db", str(tmp_path / "s.db"), "train", str(corpus), "--name", "s", "--vocab-size", "400"])
    assert result.exit_code == 0, result.stderr
    warnings_printed = [line for line in result.stderr.splitlines() if "merges asked for" in line]
    assert len(warnings_printed) == 1 and warnings_printed[0].startswith("Warning: training stopped after")
    assert "trainer.py" not in result.stderr and "workflow.py" not in result.stderr
