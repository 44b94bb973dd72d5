"""The reference implementation (tests/reference.py) checked against independent results.

The differential tests of bpestore are only as good as the reference, so it is checked here against
the CS336 reference training result and against tiktoken's GPT-2 encoder, on fixtures and on
generated text.
"""

from __future__ import annotations

import pytest
import regex
from hypothesis import given, settings

from conftest import shared_file
from gpt2_tiktoken import ENDOFTEXT, cs336_reference_training, gpt2_encoding, gpt2_vocab_and_merges
from reference import reference_decode, reference_encode, reference_train
from strategies import NOT_REGEX_WHITESPACE, REGEX_WHITESPACE, texts
from tiers import examples


def read_text(path) -> str:
    # newline="": the tests see exactly the bytes in the file, as the trainer does.
    with open(path, encoding="utf-8", newline="") as file:
        return file.read()


def test_whitespace_lists_match_the_regex_module():
    """The generators' notion of whitespace is the one the pre-tokenizer actually uses."""
    regex_whitespace = "".join(regex.findall(r"\s", "".join(map(chr, range(0x110000)))))
    assert regex_whitespace == REGEX_WHITESPACE
    assert all(c.isspace() and not regex.match(r"\s", c) for c in NOT_REGEX_WHITESPACE)


@pytest.mark.slow  # (the Python reference trains corpus.en: ~10 s)
def test_reference_train_matches_cs336_reference():
    text = read_text(shared_file("fixtures", "corpus.en"))
    expected_vocab, expected_merges = cs336_reference_training()
    vocab, merges = reference_train(text, 500, [ENDOFTEXT])
    assert merges == expected_merges
    assert set(vocab) == set(expected_vocab)
    assert set(vocab.values()) == set(expected_vocab.values())


def test_reference_train_id_layout():
    """Specials first in the order given, then byte b at k + b, then one id per merge in order."""
    specials = ["<b>", "<a>"]
    vocab, merges = reference_train("low lower lowest <a> newest widest<b>", 270, specials)
    assert [vocab[0], vocab[1]] == [b"<b>", b"<a>"]
    assert all(vocab[2 + b] == bytes([b]) for b in range(256))
    assert [vocab[258 + i] for i in range(len(merges))] == [a + b for a, b in merges]
    assert len(vocab) == 258 + len(merges) and 0 < len(merges) <= 12


def test_reference_train_ties_and_overlaps():
    # (a, a) occurs twice in "aaa"; at count 2 it ties with (b, b) and (" ", b) from " bb" x 2, and
    # the greatest pair, (b, b), wins. Then (a, a) beats (" ", bb), also at 2, as b"a" > b" ".
    _, merges = reference_train("aaa bb bb", 258, [])
    assert merges == [(b"b", b"b"), (b"a", b"a")]
    # Merging goes left to right: "aaa" becomes (aa, a), never (a, aa).
    _, merges = reference_train("aaa aaa", 258, [])
    assert merges == [(b"a", b"a"), (b"aa", b"a")]


def test_reference_train_stops_when_no_pair_is_left():
    vocab, merges = reference_train("ab ab", 1000, ["<|endoftext|>"])
    assert merges == [(b"a", b"b"), (b" ", b"ab")]
    assert len(vocab) == 257 + 2


@settings(max_examples=examples(40), deadline=None)
@given(texts(assigned_only=True))
def test_reference_encode_matches_tiktoken_on_generated_text(text):
    vocab, merges = gpt2_vocab_and_merges()
    encoding = gpt2_encoding()
    assert reference_encode(text, vocab, merges, [ENDOFTEXT]) == encoding.encode(text, allowed_special="all")
    assert reference_encode(text, vocab, merges, None) == encoding.encode(text, disallowed_special=())


@pytest.mark.parametrize("name", ["address.txt", "german.txt", "tinystories_sample.txt"])
def test_reference_encode_matches_tiktoken_on_fixtures(name):
    vocab, merges = gpt2_vocab_and_merges()
    text = read_text(shared_file("fixtures", name))
    ids = reference_encode(text, vocab, merges, [ENDOFTEXT])
    assert ids == gpt2_encoding().encode(text, allowed_special="all")
    assert reference_decode(ids, vocab) == text
    assert reference_encode(text, vocab, merges, None) == gpt2_encoding().encode(text, disallowed_special=())


def test_reference_encode_new_special_tokens_get_the_next_ids():
    vocab, merges = reference_train("low lower lowest", 260, [])
    ids = reference_encode("<x>low<y><x>", vocab, merges, ["<x>", "<y>"])
    assert ids[0] == ids[-1] == 260 and ids[-2] == 261
