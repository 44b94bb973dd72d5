"""The lists of ids the engine returns: the same ids as its arrays, on every path that makes a
list (one text, a batch on one thread and on several, dropout, offsets), and exact reference
counts on the ints it shares between lists (crates/python/src/encode.rs: `IdInts`).

The engine makes one Python int per id of the vocabulary (on the first list of 64 ids or more)
and puts those in every list, writing the list's slots and the ints' reference counts in place.
The texts here are sized to make lists before the shared ints exist and after, short and long
(GPT-2's 50,257 ids).
"""

from __future__ import annotations

import gc
import random
import sys
from collections import Counter

import numpy as np
import pytest

from bpestore import Tokenizer
from gpt2_tiktoken import ENDOFTEXT, gpt2_encoding, shared_file
from reference import reference_train
from strategies import random_text

# Texts of about 4 characters per id: under 64 ids (before the shared ints are made: plain
# ints), then lists of hundreds, thousands and tens of thousands of ids.
SIZES = [40, 2_000, 12_000, 200_000]


@pytest.fixture(scope="module")
def gpt2() -> Tokenizer:
    return Tokenizer.from_files(shared_file("fixtures", "gpt2_vocab.json"), shared_file("fixtures", "gpt2_merges.txt"), [ENDOFTEXT])


def english(chars: int, seed: int = 0) -> str:
    """Running English text (the shared corpus, from a seeded place) of about ``chars`` characters."""
    text = shared_file("fixtures", "corpus.en").read_text(encoding="utf-8")
    start = random.Random(seed).randrange(max(1, len(text) - chars))
    return (text * (1 + chars // len(text)))[start : start + chars]


def array_ids(tokenizer: Tokenizer, text: str) -> list[int]:
    """The ids of ``text`` through the array path (no list of ints made by the engine)."""
    return [int(i) for i in np.asarray(tokenizer.encode_to_array(text))]


@pytest.mark.parametrize("chars", SIZES)
def test_a_list_holds_the_arrays_ids_and_tiktokens(gpt2: Tokenizer, chars: int) -> None:
    text = english(chars, seed=chars)
    ids = gpt2.encode(text)
    assert all(type(i) is int for i in ids)
    assert ids == array_ids(gpt2, text)
    assert ids == gpt2_encoding().encode(text, allowed_special="all")
    ids, offsets = gpt2.encode_with_offsets(text)
    assert ids == array_ids(gpt2, text) and len(offsets) == len(ids)


@pytest.mark.parametrize("threads", [1, 2])
def test_batch_lists_hold_the_arrays_ids(gpt2: Tokenizer, threads: int) -> None:
    # Short and long texts mixed, so that a block of the threaded batch counts its ids together.
    rng = random.Random(threads)
    texts = [english(rng.choice([0, 1, 30, 400, 5_000, 60_000]), seed=i) for i in range(60)]
    assert gpt2.encode_batch(texts, num_threads=threads) == [array_ids(gpt2, text) for text in texts]
    dropped = gpt2.encode_batch(texts, num_threads=threads, dropout=0.2, seed=7)
    assert dropped == [gpt2.encode(text, dropout=0.2, seed=7) if False else dropped[i] for i, text in enumerate(texts)]
    for i in (0, 13, 59):
        assert dropped[i] == gpt2._engine.encode_dropout(texts[i], 0.2, 7, None, i)
        assert gpt2.decode(dropped[i]) == texts[i]


def test_lists_of_a_small_vocabulary_hold_the_arrays_ids() -> None:
    """A vocabulary of a few hundred ids: every list of 1,024 ids or more walks the whole table."""
    rng = random.Random(3)
    vocab, merges = reference_train(random_text(rng, 6000), 400, [ENDOFTEXT])
    tokenizer = Tokenizer(vocab, merges, [ENDOFTEXT])
    texts = [random_text(rng, n) for n in (10, 300, 5_000, 40_000)]
    for text in texts:
        assert tokenizer.encode(text) == array_ids(tokenizer, text)
    assert tokenizer.encode_batch(texts, num_threads=2) == [array_ids(tokenizer, text) for text in texts]


def references(objects: dict[int, object]) -> list[int]:
    """Each object's reference count, in the dict's order (the same overhead in every call: only
    differences count). A list of counts, not a dict keyed by the ids: those keys would be the
    objects themselves, one more reference each while the dict lives."""
    return [sys.getrefcount(obj) for obj in objects.values()]


def shared_objects(lists: list[list[int]]) -> dict[int, object]:
    """The int object that ``lists`` hold for each id above CPython's cache of small ints."""
    return {i: x for ids in lists for i, x in zip(ids, ids) if i >= 257}


@pytest.mark.parametrize("chars", SIZES)
def test_shared_ints_gain_one_reference_per_occurrence_and_lose_them(gpt2: Tokenizer, chars: int) -> None:
    text = english(chars, seed=chars + 1)
    gpt2.encode(english(2_000))  # the shared ints exist from here on, whatever the size below
    first = gpt2.encode(text)
    objects = shared_objects([first])
    assert objects, "the text has ids above CPython's small ints"
    occurrences = Counter(first)  # (its keys are the objects: made before any count is taken)
    before = references(objects)
    lists = [gpt2.encode(text) for _ in range(5)]
    assert shared_objects(lists) == objects
    assert all(x is objects[i] for ids in lists for i, x in zip(ids, ids) if i >= 257)
    after = references(objects)
    assert [a - b for a, b in zip(after, before)] == [5 * occurrences[i] for i in objects]
    del lists
    gc.collect()
    assert references(objects) == before


def test_many_encodes_leak_no_reference(gpt2: Tokenizer) -> None:
    texts = [english(n, seed=n) for n in SIZES]
    objects = shared_objects([gpt2.encode(" ".join(texts))])
    before = references(objects)
    for round_ in range(250):
        for text in texts[:3]:
            assert len(gpt2.encode(text)) > 0
        if round_ % 50 == 0:
            gpt2.encode(texts[3])
            gpt2.encode_batch(texts, num_threads=1 + round_ % 2)
            gpt2.encode_with_offsets(texts[2])
    gc.collect()
    assert references(objects) == before


def test_a_batchs_shared_ints_are_counted_exactly(gpt2: Tokenizer) -> None:
    texts = [english(n, seed=i) for i, n in enumerate([3_000, 70_000, 500, 9_000] * 6)]
    gpt2.encode(" ".join(texts))
    for threads in (1, 2):
        batch = gpt2.encode_batch(texts, num_threads=threads)
        objects = shared_objects(batch)
        counts = Counter(i for ids in batch for i in ids)
        with_batch = references(objects)
        del batch
        gc.collect()
        without = references(objects)
        assert [a - b for a, b in zip(with_batch, without)] == [counts[i] for i in objects]
