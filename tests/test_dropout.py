"""BPE-dropout (issue 26.3): ``encode(text, dropout=p, seed=s)`` and ``encode_batch``.

Differential against ``reference_encode_dropout`` in tests/reference.py (the same rule and the same
SplitMix64 draws, written plainly) for both merge rules, on generated text; then what must hold
whatever the rule: p = 0 is plain encoding, every output decodes to the text, the same seed gives
the same ids on every thread count, and bad arguments are one clear error.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpestore
from bpestore import BPEModel, Tokenizer
from conftest import shared_file
from reference import reference_encode_dropout
from strategies import ENDOFTEXT, texts
from tiers import examples


@pytest.fixture(scope="module")
def trained() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    return bpestore.train_bpe(shared_file("fixtures", "corpus.en"), 600, [ENDOFTEXT])


@pytest.fixture(scope="module", params=["pair", "token"])
def rule_and_tokenizer(request, trained):
    vocab, merges = trained
    # The token rule (tiktoken's: a pair's rank is the id of the token it makes) on the same
    # vocabulary: the ids of a BPE-trained vocabulary are in merge order, as tiktoken's ranks are.
    return request.param, Tokenizer.from_model(BPEModel(vocab, merges, [ENDOFTEXT], merge_rule=request.param))


# Words long enough for the engine's heap path (over 48 bytes) besides natural text.
LONG_WORDS = st.sampled_from(["a" * 60, "ab" * 40, "thethethe" * 9, "x" * 49])


@settings(max_examples=examples(150), deadline=None)
@given(
    text=st.one_of(texts(), st.builds(" ".join, st.lists(LONG_WORDS, min_size=1, max_size=3))),
    probability=st.sampled_from([0.05, 0.1, 0.3, 0.5, 0.9]),
    seed=st.integers(0, 2**64 - 1),
)
def test_dropout_matches_the_reference(rule_and_tokenizer, trained, text, probability, seed):
    rule, tokenizer = rule_and_tokenizer
    vocab, merges = trained
    ids = tokenizer.encode(text, dropout=probability, seed=seed)
    assert ids == reference_encode_dropout(text, vocab, merges, [ENDOFTEXT], probability, seed, rule=rule)
    assert tokenizer.decode(ids) == text


@settings(max_examples=examples(60), deadline=None)
@given(text=texts(), seed=st.integers(0, 2**64 - 1))
def test_zero_dropout_is_plain_encoding(rule_and_tokenizer, text, seed):
    _, tokenizer = rule_and_tokenizer
    assert tokenizer.encode(text, dropout=0.0, seed=seed) == tokenizer.encode(text)


def test_dropout_segments_differently_and_more_finely_as_p_grows(trained):
    vocab, merges = trained
    tokenizer = Tokenizer(vocab, merges, [ENDOFTEXT])
    text = shared_file("fixtures", "corpus.en").read_text(encoding="utf-8")[:20_000]
    plain = len(tokenizer.encode(text))
    lengths = [len(tokenizer.encode(text, dropout=p, seed=7)) for p in (0.1, 0.3, 0.6, 0.9)]
    assert plain < lengths[0] < lengths[1] < lengths[2] < lengths[3] <= len(text.encode("utf-8"))
    assert tokenizer.encode(text, dropout=0.1, seed=1) != tokenizer.encode(text, dropout=0.1, seed=2)
    assert tokenizer.encode(text, dropout=0.1, seed=1) == tokenizer.encode(text, dropout=0.1, seed=1)
    # Special tokens are never dropped.
    ids = tokenizer.encode(f"a{ENDOFTEXT}b", dropout=0.9, seed=3)
    assert tokenizer.special_ids[ENDOFTEXT] in ids


def test_batches_are_seeded_per_text_whatever_the_threads(trained):
    vocab, merges = trained
    tokenizer = Tokenizer(vocab, merges, [ENDOFTEXT])
    texts_ = [f"text number {i}: the lowest, newest and widest{ENDOFTEXT} of them all " * (1 + i % 5) for i in range(200)]
    one = tokenizer.encode_batch(texts_, num_threads=1, dropout=0.2, seed=11)
    assert tokenizer.encode_batch(texts_, num_threads=2, dropout=0.2, seed=11) == one
    assert tokenizer.encode_batch(texts_, num_threads=7, dropout=0.2, seed=11) == one
    assert one[0] == tokenizer.encode(texts_[0], dropout=0.2, seed=11)
    assert [tokenizer.decode(ids) for ids in one] == texts_
    assert tokenizer.encode_batch(texts_, dropout=0.0, seed=11) == tokenizer.encode_batch(texts_)


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"dropout": 1.0}, ValueError, "dropout must be a probability in [0, 1), got 1"),
        ({"dropout": -0.1}, ValueError, "dropout must be a probability in [0, 1), got -0.1"),
        ({"dropout": math.nan}, ValueError, "dropout must be a probability in [0, 1), got NaN"),
        ({"dropout": 0.1, "seed": -1}, ValueError, "seed must be an int in [0, 2**64), got -1"),
        ({"dropout": 0.1, "seed": 2**64}, ValueError, "seed must be an int in [0, 2**64)"),
        ({"dropout": 0.1, "seed": "1"}, TypeError, "seed must be an int, not str ('1')"),
        ({"dropout": 0.1, "seed": True}, TypeError, "seed must be an int, not bool"),
    ],
)
def test_bad_dropout_arguments_are_one_clear_error(trained, options, error, message):
    vocab, merges = trained
    tokenizer = Tokenizer(vocab, merges, [ENDOFTEXT])
    with pytest.raises(error) as raised:
        tokenizer.encode("some text", **options)
    assert message in str(raised.value)
    with pytest.raises(error):
        tokenizer.encode_batch(["some text"], **options)


# -- streams and files: each pre-token seeded by its offset, so any cutting gives the whole text's ids --


@settings(max_examples=examples(60), deadline=None)
@given(
    text=texts(),
    cuts=st.lists(st.integers(0, 400), max_size=6),
    block=st.sampled_from([1, 7, 64, 8192]),
    seed=st.integers(0, 2**64 - 1),
)
def test_streams_with_dropout_give_the_whole_texts_ids(rule_and_tokenizer, text, cuts, block, seed):
    _, tokenizer = rule_and_tokenizer
    bounds = sorted({0, len(text), *(cut for cut in cuts if cut < len(text))})
    pieces = [text[start:end] for start, end in zip(bounds, bounds[1:])]
    whole = tokenizer.encode(text, dropout=0.3, seed=seed)
    assert list(tokenizer.encode_iterable(iter(pieces), dropout=0.3, seed=seed)) == whole
    blocks = tokenizer.encode_blocks(iter(pieces), block, dropout=0.3, seed=seed)
    assert [int(i) for block_ids in blocks for i in block_ids] == whole


@pytest.mark.parametrize("workers", [1, 2])
def test_a_file_to_npy_with_dropout_gives_the_whole_texts_ids(tmp_path, trained, workers):
    import numpy as np

    from bpestore.encode.files import encode_file_to_npy

    vocab, merges = trained
    tokenizer = Tokenizer(vocab, merges, [ENDOFTEXT])
    text = shared_file("fixtures", "corpus.en").read_text(encoding="utf-8")[:60_000] + ENDOFTEXT + " the end\n"
    path = tmp_path / "text.txt"
    path.write_bytes(text.encode("utf-8"))
    output = tmp_path / f"ids-{workers}.npy"
    count = encode_file_to_npy(tokenizer, path, output, workers=workers, chunk_bytes=2_000, dropout=0.2, seed=5)
    ids = np.load(output).tolist()
    assert count == len(ids)
    assert ids == tokenizer.encode(text, dropout=0.2, seed=5)
    assert ids != tokenizer.encode(text)


def test_the_command_line_encodes_with_dropout(tmp_path, trained):
    import numpy as np

    from test_cli import invoke, ok

    vocab, merges = trained
    db = tmp_path / "s.db"
    with bpestore.Store(db) as store:
        store.save("t", Tokenizer(vocab, merges, [ENDOFTEXT]))
        tokenizer = store.load("t")
    text = "the lowest, newest and widest words in a test of dropout\n" * 50
    path = tmp_path / "in.txt"
    path.write_text(text, encoding="utf-8")
    expected = tokenizer.encode(text, dropout=0.25, seed=9)
    printed = ok(invoke("encode", "t", path, "--dropout", "0.25", "--seed", "9", "--db", db))
    assert [int(word) for word in printed.split()] == expected
    piped = ok(invoke("encode", "t", "--dropout", "0.25", "--seed", "9", "--db", db, input=text))
    assert [int(word) for word in piped.split()] == expected
    output = tmp_path / "ids.npy"
    ok(invoke("encode", "t", path, "--output", output, "--dropout", "0.25", "--seed", "9", "--workers", "2", "-q", "--db", db))
    assert np.load(output).tolist() == expected


@settings(max_examples=examples(60), deadline=None)
@given(text=texts(), probability=st.sampled_from([0.1, 0.5]), seed=st.integers(0, 2**64 - 1), moved=st.integers(20, 300))
def test_dropout_with_merges_out_of_training_order_matches_the_reference(trained, text, probability, seed, moved):
    # A merge listed before the merges that make its parts: one pair at a time is then no
    # longer GPT-2's rule, so the engine may not take a piece's plain ids from its cache.
    vocab, merges = trained
    reordered = [merges[moved], *merges[:moved], *merges[moved + 1 :]]
    tokenizer = Tokenizer(vocab, reordered, [ENDOFTEXT])
    ids = tokenizer.encode(text, dropout=probability, seed=seed)
    assert ids == reference_encode_dropout(text, vocab, reordered, [ENDOFTEXT], probability, seed)


def test_a_merge_that_forms_a_lower_ranked_pair_is_walked_not_taken_from_the_cache():
    # (ab, a) ranks before (a, b), which makes ab: GPT-2's rule merges both a+b of "abab" first
    # ([ab, ab]); dropout's walk, one pair at a time, makes aba as soon as ab is there
    # ([aba, b]). Plain encoding's cached ids would be wrong here even when no draw drops.
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"aba"}
    merges = [(b"ab", b"a"), (b"a", b"b")]
    tokenizer = Tokenizer(vocab, merges)
    assert tokenizer.encode("abab") == [256, 256]
    walked = 0
    for seed in range(20):
        expected = reference_encode_dropout("abab abab", vocab, merges, [], 0.01, seed)
        assert tokenizer.encode("abab abab", dropout=0.01, seed=seed) == expected
        walked += expected[:2] == [257, ord("b")]
    assert walked >= 15  # (at p = 0.01 a draw rarely drops: most seeds walk to aba)
