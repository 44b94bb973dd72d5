"""Encoding on several threads gives the ids of encoding on one: ``encode_batch`` and
``encode_file_to_npy`` on 1, 2 and 3 threads against the reference (``tests/reference.py``).

Threads that encode one job together share a lock-free table of short pieces (kept by the encoder
between jobs, replaced by a bigger or an empty one when full); tiny cache capacities make the
threads replace it again and again in the middle of a job, and a second job starts with what the
first left.
"""

from __future__ import annotations

import random

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reference import reference_encode
from strategies import SPECIAL_TOKEN_SETS, random_text, texts
from test_engine_encode import VOCAB_SIZES, engine, trained
from tiers import examples

PROPERTY = settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
CAPACITIES = [1, 5, 64, 524_288]


@PROPERTY
@given(
    docs=st.lists(texts(max_pieces=10), max_size=10),
    specials=st.sampled_from(SPECIAL_TOKEN_SETS),
    cache_entries=st.sampled_from(CAPACITIES),
)
def test_a_batch_has_the_reference_ids_on_1_2_and_3_threads(docs, specials, cache_entries):
    vocab, merges = trained(VOCAB_SIZES[1])
    expected = [reference_encode(doc, vocab, merges, specials) for doc in docs]
    encoder = engine(vocab, merges, specials, cache_entries=cache_entries)
    for threads in (1, 2, 3, 2):  # (the last one with the table the others filled)
        assert encoder.encode_batch(docs, num_threads=threads) == expected, threads
    fresh = [engine(vocab, merges, specials, cache_entries=cache_entries) for _ in range(3)]
    for threads, encoder in zip((1, 2, 3), fresh):
        assert encoder.encode_batch(docs, num_threads=threads) == expected, threads


def lines_of_random_text(seed: int, size: int) -> list[str]:
    return random_text(random.Random(seed), size).splitlines(keepends=True)


def test_threads_that_keep_replacing_the_shared_table_give_the_same_ids():
    """Thousands of distinct pieces, a capacity of a few: every thread finds the table full
    again and again while the others still read the one it replaces."""
    vocab, merges = trained(VOCAB_SIZES[2])
    specials = ["<|endoftext|>"]
    docs = lines_of_random_text(3, 120_000)
    expected = engine(vocab, merges, specials).encode_batch(docs, num_threads=1)
    assert expected[:50] == [reference_encode(doc, vocab, merges, specials) for doc in docs[:50]]
    for cache_entries in (3, 100, 5000):
        encoder = engine(vocab, merges, specials, cache_entries=cache_entries)
        for threads in (2, 3, 2):
            assert encoder.encode_batch(docs, num_threads=threads) == expected


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(text=texts(max_pieces=40), cache_entries=st.sampled_from(CAPACITIES), chunk_bytes=st.sampled_from([1, 16, 200]))
def test_a_file_has_the_reference_ids_on_1_2_and_3_threads(tmp_path, text, cache_entries, chunk_bytes):
    vocab, merges = trained(VOCAB_SIZES[0])
    specials = ["<|endoftext|>", "<| sep |>"]
    expected = reference_encode(text, vocab, merges, specials)
    source = tmp_path / "text.txt"
    source.write_bytes(text.encode("utf-8"))
    encoder = engine(vocab, merges, specials, cache_entries=cache_entries)
    for threads in (1, 2, 3):
        output = tmp_path / f"ids-{threads}.npy"
        count = encoder.encode_file_to_npy(str(source), str(output), threads=threads, chunk_bytes=chunk_bytes)
        assert np.load(output).tolist() == expected and count == len(expected), threads
