"""Issue 26.4: reshaping a stored tokenizer into a new version (trim, drop-unused), with an id map
(old id -> new id) and ``remap`` to carry an encoded dataset over."""

from __future__ import annotations

import json
import random
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
import tiktoken
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from bpestore import Tokenizer, train_bpe
from bpestore.model import BPEModel
from bpestore.reshape import IdMap, drop_unused, load_id_map, remap, trim, write_id_map
from bpestore.train.trainer import VocabSizeNotReachedWarning
from reference import reference_pretoken_counts
from strategies import ENDOFTEXT, SPECIAL_TOKEN_SETS, random_text, texts
from tiers import examples

PROPERTY = settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def trained(text: str, size: int, specials: list[str], at: str = "start") -> BPEModel:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "corpus.txt"
        path.write_text(text, encoding="utf-8", newline="")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", VocabSizeNotReachedWarning)
            vocab, merges = train_bpe(path, size, specials, special_tokens_at=at)  # type: ignore[arg-type]
    return BPEModel(vocab, merges, specials)


# -- trim ------------------------------------------------------------------------------------------


@PROPERTY
@given(
    text=texts(max_pieces=40),
    specials=st.sampled_from(SPECIAL_TOKEN_SETS),
    at=st.sampled_from(["start", "end"]),
    extra=st.integers(0, 300),
    fraction=st.floats(0, 1),
)
def test_trimming_a_training_is_the_smaller_training(text, specials, at, extra, fraction):
    assume(reference_pretoken_counts(text, specials))  # nothing to train on is refused
    big = trained(text, 256 + len(specials) + extra, specials, at)
    size = 256 + len(specials) + round(fraction * (big.vocab_size - 256 - len(specials)))
    small, id_map = trim(big, size)
    expected = trained(text, size, specials, at)
    assert (small.vocab, small.merges, small.special_tokens) == (expected.vocab, expected.merges, expected.special_tokens)
    # The kept tokens keep their order: each new id is its token's old id, compacted.
    for old, new in enumerate(id_map.array.tolist()):
        assert new == -1 or big.vocab[old] == small.vocab[new]
    assert sorted(id_map.dropped) == sorted(set(big.vocab) - {old for old, new in enumerate(id_map.array) if new >= 0})
    assert id_map.new_vocab_size == small.vocab_size
    if at == "start":  # CS336's layout: the kept ids do not change
        assert all(new in (-1, old) for old, new in enumerate(id_map.array.tolist()))


def test_trim_refuses_sizes_below_the_bytes_and_special_tokens_and_above_the_tokenizer():
    model = trained("low lower lowest " * 20, 300, [ENDOFTEXT, "<pad>"])
    with pytest.raises(ValueError, match=r"^cannot trim to 257 tokens: a trim keeps the 256 bytes and the 2 special tokens, 258 tokens$"):
        trim(model, 257)
    with pytest.raises(ValueError, match="only"):
        trim(model, model.vocab_size + 1)
    with pytest.raises(TypeError):
        trim(model, "300")  # type: ignore[arg-type]
    smallest, id_map = trim(model, 258)
    assert smallest.merges == [] and smallest.vocab_size == 258 and len(id_map.dropped) == model.vocab_size - 258


def test_trim_drops_tokens_that_no_merge_makes():
    model = trained("aaa bbb " * 10, 262, [])
    imported = BPEModel(model.vocab | {9999: b"zzz"}, model.merges)
    small, id_map = trim(imported, 262)
    assert small.vocab == model.vocab and 9999 in id_map.dropped


def token_rule(model: BPEModel) -> BPEModel:
    """A trained model (special tokens last) as tiktoken has it: ranks are ids, the token rule."""
    return BPEModel(model.vocab, model.merges, model.special_tokens, model.pattern, "token")


@PROPERTY
@given(text=texts(max_pieces=30, assigned_only=True, special_pieces=False), cut=st.floats(0, 1), sample=texts(assigned_only=True, special_pieces=False))
def test_trimming_a_token_rule_model_is_tiktoken_with_the_first_ranks(text, cut, sample):
    assume(reference_pretoken_counts(text, []))
    big = token_rule(trained(text, 400, [], "end"))
    size = 256 + round(cut * (big.vocab_size - 256))
    small, id_map = trim(big, size)
    ranks = {token: rank for rank, token in big.vocab.items() if rank < size}
    encoding = tiktoken.Encoding(name="cut", pat_str=big.pattern, mergeable_ranks=ranks, special_tokens={})
    assert small.vocab == {rank: token for token, rank in ranks.items()}
    assert Tokenizer.from_model(small).encode(sample) == encoding.encode(sample)
    assert id_map.array[:size].tolist() == list(range(size))


# -- drop unused -----------------------------------------------------------------------------------


@PROPERTY
@given(
    text=texts(max_pieces=40),
    specials=st.sampled_from(SPECIAL_TOKEN_SETS),
    seed=st.integers(0, 2**32),
    rule=st.sampled_from(["pair", "token"]),
)
def test_dropping_unused_tokens_keeps_the_corpus_encoding_and_every_text_encodable(text, specials, seed, rule):
    assume(reference_pretoken_counts(text, specials))
    model = trained(text, 500, specials, "end")
    if rule == "token":
        model = token_rule(model)
    rng = random.Random(seed)
    corpus = [text[: rng.randint(0, len(text))], random_text(rng, 40)]
    smaller, id_map = drop_unused(model, corpus)
    old, new = Tokenizer.from_model(model), Tokenizer.from_model(smaller)
    for document in corpus:
        assert new.encode(document) == remap(id_map, np.array(old.encode(document), dtype=np.int64)).tolist()
    used = {token_id for document in corpus for token_id in old.encode(document)}
    assert not used & set(id_map.dropped)
    assert smaller.special_tokens == model.special_tokens
    other = random_text(rng, 80)
    assert new.decode(new.encode(other)) == other


def test_drop_unused_reads_files_and_drops_what_a_corpus_never_uses(tmp_path):
    model = trained("the cat sat on the mat. " * 30 + "zebra xylophone quokka " * 30, 330, [ENDOFTEXT])
    corpus = tmp_path / "cats.txt"
    corpus.write_text("the cat sat on the mat.", encoding="utf-8")
    smaller, id_map = drop_unused(model, [corpus])
    assert smaller.vocab_size < model.vocab_size
    assert not any(b"zebra" in token for token in smaller.vocab.values())
    old, new = Tokenizer.from_model(model), Tokenizer.from_model(smaller)
    assert new.encode("the cat sat on the mat.") == id_map.apply(old.encode("the cat sat on the mat.")).tolist()


# -- maps ------------------------------------------------------------------------------------------


def test_remap_names_an_unknown_or_dropped_id_and_its_position():
    id_map = IdMap(np.array([0, -1, 1, 2], dtype=np.int64), "a@1", "a@2", (1,))
    assert remap(id_map, [0, 2, 3]).tolist() == [0, 1, 2]
    assert remap(id_map, [0, 2, 3]).dtype == np.uint16
    with pytest.raises(ValueError, match=r"^unknown token id 9 at position 2: the map has ids 0\.\.3$"):
        remap(id_map, [0, 2, 9])
    with pytest.raises(ValueError, match=r"^token id 1 at position 1 has no new id: the map from a@1 to a@2 dropped it$"):
        remap(id_map, [0, 1])
    with pytest.raises(ValueError, match="^unknown token id -1 at position 0"):
        remap(id_map, [-1])
    assert remap(IdMap(np.array([70000], dtype=np.int64)), [0]).dtype == np.uint32


def test_a_map_written_reads_back_from_either_file(tmp_path):
    id_map = IdMap(np.array([0, -1, 1, 2], dtype=np.int64), "a@1", "a@2", (1,))
    npy, json_path = write_id_map(id_map, tmp_path / "m")
    assert (npy.name, json_path.name) == ("m.npy", "m.json")
    assert json.loads(json_path.read_text()) == {"from": "a@1", "to": "a@2", "map": {"0": 0, "2": 1, "3": 2}, "dropped": [1]}
    assert np.load(npy).dtype == np.int64
    for path in (npy, json_path):
        loaded = load_id_map(path)
        assert loaded.array.tolist() == [0, -1, 1, 2] and loaded.dropped == [1]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["m.json", "m.npy"]
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="bad.json: not an id map"):
        load_id_map(tmp_path / "bad.json")
