"""Counting in bounded memory (issue 26.5): with a tiny ``count_memory`` the counting tables spill
sorted runs to disk and merge them k ways; the counts, and so the merges, are the in-memory ones,
``min_count`` included, and no spill file is left behind."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bpestore import Store
from bpestore.engine import count_file
from bpestore.pretokenize.patterns import CL100K_PATTERN, GPT2_PATTERN
from bpestore.train.trainer import count_corpus, train_bpe
from conftest import shared_file
from test_cli import ENDOFTEXT, assert_user_error, corpus_text, invoke, ok, write_text

TINY = 64 << 10  # 64 KiB: spills after every chunk of the corpora below


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """test_cli's corpus, with rare made-up words among its frequent ones: about 15,000 distinct
    pre-tokens, several times the tiny budget's worth."""
    rng = random.Random(5)
    words = corpus_text(seed=3, words=40_000).split(" ")
    for index in range(0, len(words), 3):
        words[index] = "".join(rng.choice("abcdefghijklmnoprstuvwyzéß") for _ in range(rng.randint(2, 7)))
    return write_text(tmp_path_factory.mktemp("spill") / "corpus.txt", " ".join(words))


def spill_dir(tmp_path: Path) -> Path:
    path = tmp_path / "spill"
    path.mkdir()
    return path


@pytest.mark.parametrize("pattern", [GPT2_PATTERN, CL100K_PATTERN, r"\w+|\s+|[^\w\s]+"])
def test_spilled_counts_equal_in_memory_counts(corpus, tmp_path, pattern):
    spills = spill_dir(tmp_path)
    expected = count_file(corpus, pattern, [ENDOFTEXT], 2, chunk_bytes=4096).to_dict()
    # 1 byte: every chunk's table is spilled; 4 KiB chunks: dozens of runs
    for budget, chunk in [(1, 4096), (TINY, 4096), (TINY, None)]:
        spilled = count_file(corpus, pattern, [ENDOFTEXT], 2, chunk_bytes=chunk, max_memory=budget, spill_dir=spills)
        assert spilled.to_dict() == expected
        assert spilled.total == sum(expected.values())
    assert list(spills.iterdir()) == []


def test_min_count_is_applied_to_the_totals(corpus, tmp_path):
    spills = spill_dir(tmp_path)
    full = count_corpus(corpus, [ENDOFTEXT])
    for min_count in [2, 7, 1000]:
        pruned = count_corpus(corpus, [ENDOFTEXT], count_memory=1, spill_dir=spills, min_count=min_count, workers=2)
        assert pruned.to_dict() == {k: v for k, v in full.items() if v >= min_count}
        # without spilling, the same
        assert count_corpus(corpus, [ENDOFTEXT], min_count=min_count).to_dict() == pruned.to_dict()
    assert list(spills.iterdir()) == []


def test_training_with_a_tiny_count_memory_gives_the_same_merges(corpus, tmp_path):
    spills = spill_dir(tmp_path)
    for min_count in [None, 3]:
        expected = train_bpe(corpus, 600, [ENDOFTEXT], min_count=min_count)
        assert train_bpe(corpus, 600, [ENDOFTEXT], min_count=min_count, count_memory=TINY, spill_dir=spills) == expected
    assert list(spills.iterdir()) == []


def test_the_store_counts_in_bounded_memory(corpus, tmp_path):
    spills = spill_dir(tmp_path)
    with Store(tmp_path / "s.db") as store:
        [ref] = store.train(corpus, "s", 400, [ENDOFTEXT], count_memory=1, spill_dir=spills, min_count=2)
        model = store.load_model(ref)
    assert model.merges == train_bpe(corpus, 400, [ENDOFTEXT], min_count=2)[1]
    assert list(spills.iterdir()) == []


def test_the_command_line_option(corpus, tmp_path):
    spills = spill_dir(tmp_path)
    db = tmp_path / "s.db"
    ref = ok(invoke(
        "train", corpus, "--name", "c", "--vocab-size", 400, "--special-token", ENDOFTEXT, "--count-memory", "64K",
        "--spill-dir", spills, "-q", "--db", db,
    )).strip()
    merges = ok(invoke("show", ref, "--db", db))
    assert ref == "c@1" and merges
    with Store(db) as store:
        assert store.load_model(ref).merges == train_bpe(corpus, 400, [ENDOFTEXT])[1]
    assert list(spills.iterdir()) == []
    assert_user_error(invoke("train", corpus, "--name", "c", "--vocab-size", 300, "--count-memory", "lots", "--db", db), "--count-memory")
    assert_user_error(invoke("train", corpus, "--name", "c", "--vocab-size", 300, "--spill-dir", spills, "--db", db), "--spill-dir")


def test_an_unwritable_spill_dir_is_one_oserror_naming_it(corpus, tmp_path):
    missing = tmp_path / "no" / "such"
    with pytest.raises(OSError, match="spilling pre-token counts failed") as raised:
        count_corpus(corpus, count_memory=TINY, spill_dir=missing)
    assert raised.value.filename == str(missing)
    assert "\n" not in str(raised.value)
    result = invoke("train", corpus, "--name", "c", "--vocab-size", 300, "--count-memory", "1", "--spill-dir", missing, "--db", tmp_path / "s.db")
    message = assert_user_error(result, str(missing))
    assert "spilling" in message


def test_a_spill_dir_that_is_a_file_is_an_oserror_naming_it(corpus, tmp_path):
    not_a_dir = write_text(tmp_path / "file", "x")
    with pytest.raises(NotADirectoryError, match="spilling pre-token counts failed") as raised:
        count_corpus(corpus, count_memory=TINY, spill_dir=not_a_dir)
    assert raised.value.filename == str(not_a_dir)


def test_count_memory_is_refused_where_it_cannot_bound_anything(corpus):
    with pytest.raises(ValueError, match="count_memory"):
        count_corpus(corpus, count_memory=0)
    with pytest.raises(ValueError, match="iterable of strings"):
        train_bpe(iter(["a b c"]), 300, count_memory=TINY)


def test_tinystories_spilled_equals_in_memory(tmp_path):
    path = shared_file("corpora", "tinystories_800K.txt")
    spills = spill_dir(tmp_path)
    expected = count_corpus(path, [ENDOFTEXT]).to_dict()
    spilled = count_corpus(path, [ENDOFTEXT], count_memory=TINY, spill_dir=spills)
    assert spilled.to_dict() == expected
    assert count_corpus(path, [ENDOFTEXT], count_memory=TINY, spill_dir=spills, min_count=5).to_dict() == {
        k: v for k, v in expected.items() if v >= 5
    }
    assert list(spills.iterdir()) == []
