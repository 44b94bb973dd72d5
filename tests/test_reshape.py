"""Issue 26.4: reshaping a stored tokenizer into a new version (trim, drop-unused), with an id map
(old id -> new id) and ``remap`` to carry an encoded dataset over."""

from __future__ import annotations

import json
import random
import re
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
import tiktoken
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from bpestore import Store, Tokenizer, train_bpe
from bpestore.model import BPEModel
from bpestore.reshape import IdMap, drop_unused, load_id_map, remap, trim, write_id_map
from bpestore.train.trainer import VocabSizeNotReachedWarning
from reference import reference_pretoken_counts
from strategies import ENDOFTEXT, SPECIAL_TOKEN_SETS, random_text, texts
from test_cli import assert_user_error, corpus_text, invoke, ok, write_text
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
    same, identity = trim(big, big.vocab_size)
    assert same == big and identity.array.tolist() == list(range(big.vocab_size)) and not identity.dropped


@PROPERTY
@given(
    text=texts(max_pieces=40),
    sample=texts(max_pieces=20),
    specials=st.sampled_from(SPECIAL_TOKEN_SETS),
    at=st.sampled_from(["start", "end"]),
    extra=st.integers(0, 300),
    fraction=st.floats(0, 1),
)
def test_a_dataset_remapped_through_a_trim_is_what_the_trimmed_tokenizer_encodes(text, sample, specials, at, extra, fraction):
    assume(reference_pretoken_counts(text, specials))
    big = trained(text, 256 + len(specials) + extra, specials, at)
    size = 256 + len(specials) + round(fraction * (big.vocab_size - 256 - len(specials)))
    small, id_map = trim(big, size)
    for encoded in (text, sample):  # the training text, and any other
        old_ids = Tokenizer.from_model(big).encode(encoded)
        assert remap(id_map, old_ids).tolist() == Tokenizer.from_model(small).encode(encoded)
    # The .json carries the expansions (the .npy, an array, cannot).
    with tempfile.TemporaryDirectory() as directory:
        _, json_path = write_id_map(id_map, Path(directory) / "m")
        again = load_id_map(json_path)
        assert again.expansions == id_map.expansions and again.array.tolist() == id_map.array.tolist()


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
    layout=st.sampled_from([("pair", "start"), ("pair", "end"), ("token", "end")]),
)
def test_dropping_unused_tokens_keeps_the_corpus_encoding_and_every_text_encodable(text, specials, seed, layout):
    assume(reference_pretoken_counts(text, specials))
    rule, at = layout
    model = trained(text, 500, specials, at)
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
    written = json.loads(json_path.read_text())
    checksums = {"npy_sha256": written.pop("npy_sha256"), "sha256": written.pop("sha256")}
    assert written == {"from": "a@1", "to": "a@2", "map": {"0": 0, "2": 1, "3": 2}, "dropped": [1]}
    assert all(len(value) == 64 for value in checksums.values())  # sha256, hex: an edited map is refused
    assert np.load(npy).dtype == np.int64
    for path in (npy, json_path):
        loaded = load_id_map(path)
        assert loaded.array.tolist() == [0, -1, 1, 2] and loaded.dropped == [1]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["m.json", "m.npy"]
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="bad.json: not an id map"):
        load_id_map(tmp_path / "bad.json")


# -- the store -------------------------------------------------------------------------------------


@pytest.mark.parametrize("at", ["start", "end"])
def test_store_trim_is_the_smaller_training_and_keeps_its_lineage(tmp_path, at):
    corpus = write_text(tmp_path / "corpus.txt", corpus_text(words=3000))
    with Store(tmp_path / "s.db") as store:
        small_ref, big_ref = store.train(corpus, "ts", [300, 350], [ENDOFTEXT, "<pad>"], special_tokens_at=at)
        new_ref, id_map = store.trim(big_ref, 300)
        assert new_ref == "ts@3" and (id_map.source, id_map.target) == (big_ref, new_ref)
        assert store.load_model(new_ref) == store.load_model(small_ref)
        info = store.info(new_ref)
        assert info.reshaped_from == big_ref and info.source == f"trimmed from {big_ref}"
        assert info.training_params == {"reshaped_from": big_ref, "how": "trim", "vocab_size": 300}
        assert store.trim(big_ref, 300, "other")[0] == "other@1"


def test_store_drop_unused_writes_the_map_with_the_tokenizer(tmp_path):
    corpus = write_text(tmp_path / "corpus.txt", corpus_text(words=3000))
    sample = write_text(tmp_path / "sample.txt", "the cat sat on the mat")
    with Store(tmp_path / "s.db") as store:
        (ref,) = store.train(corpus, "ts", 350, [ENDOFTEXT])
        new_ref, id_map = store.drop_unused(ref, sample, map_out=tmp_path / "m")
        assert json.loads((tmp_path / "m.json").read_text())["to"] == new_ref == "ts@2"
        assert np.load(tmp_path / "m.npy").tolist() == id_map.array.tolist()
        old, new = store.load(ref), store.load(new_ref)
        assert new.encode("the cat sat on the mat") == id_map.apply(old.encode("the cat sat on the mat")).tolist()
        assert store.info(new_ref).training_params["how"] == "drop-unused"
        # A map that cannot be written: nothing is stored, no file is left.
        with pytest.raises(FileNotFoundError, match="no directory"):
            store.drop_unused(ref, sample, map_out=tmp_path / "missing" / "m")
        with pytest.raises(ValueError, match="a trim keeps the 256 bytes and the 1 special token, 257 tokens"):
            store.trim(ref, 256, map_out=tmp_path / "n")
        assert [info.ref for info in store.list()] == ["ts@1", "ts@2"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["corpus.txt", "m.json", "m.npy", "s.db", "sample.txt"]


# -- the command line ------------------------------------------------------------------------------


def test_cli_trim_then_remap(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_text(tmp_path / "corpus.txt", corpus_text(words=3000))
    db = tmp_path / "s.db"
    ok(invoke("train", "corpus.txt", "--name", "ts", "--vocab-size", 350, "--special-token", ENDOFTEXT, "--special-tokens-at", "end", "-q", "--db", db))
    assert ok(invoke("trim", "ts", "--vocab-size", 320, "--db", db)) == "ts@2\n"
    id_map = json.loads((tmp_path / "ts@1-to-ts@2.idmap.json").read_text())
    assert (id_map["from"], id_map["to"]) == ("ts@1", "ts@2")
    assert id_map["map"]["349"] == 319  # <|endoftext|>, last, moves down
    listed = {row["ref"]: row for row in json.loads(ok(invoke("list", "--json", "--db", db)))}
    assert listed["ts@2"]["reshaped_from"] == "ts@1" and listed["ts@1"]["reshaped_from"] is None
    assert "trimmed from ts@1" in ok(invoke("list", "--wide", "--db", db))
    assert re.search(r"^reshaped from +ts@1 \(trim;", ok(invoke("show", "ts@2", "--db", db)), re.MULTILINE)

    # An encoded dataset follows a tokenizer whose unused tokens were dropped.
    text = "the cat sat on the mat. 日本語 😀" + ENDOFTEXT + "naïve"
    write_text(tmp_path / "sample.txt", text)
    ok(invoke("trim", "ts@1", "--drop-unused", "sample.txt", "--name", "small", "--map-out", "small-map", "--db", db))
    old, new = Store(db).load("ts@1"), Store(db).load("small")
    assert new.vocab_size < old.vocab_size
    np.save(tmp_path / "ids.npy", np.array(old.encode(text), dtype=np.uint16))
    for map_file in ("small-map.json", "small-map.npy"):
        ok(invoke("remap", map_file, "ids.npy", "-o", "out.npy"))
        out = np.load(tmp_path / "out.npy")
        assert out.dtype == np.uint16 and out.tolist() == new.encode(text)


def test_cli_trim_and_remap_errors_are_one_line_and_leave_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_text(tmp_path / "corpus.txt", corpus_text(words=2000))
    db = tmp_path / "s.db"
    ok(invoke("train", "corpus.txt", "--name", "ts", "--vocab-size", 350, "--special-token", ENDOFTEXT, "-q", "--db", db))
    before = sorted(path.name for path in tmp_path.iterdir())
    assert_user_error(invoke("trim", "ts@1", "--vocab-size", 200, "--db", db), "a trim keeps the 256 bytes and the 1 special token")
    assert_user_error(invoke("trim", "ts@1", "--vocab-size", 900, "--db", db), "only 350")
    assert_user_error(invoke("trim", "ts@9", "--vocab-size", 300, "--db", db), "no version 9")
    assert_user_error(invoke("trim", "ts@1", "--drop-unused", "nope.txt", "--db", db), "nope.txt")
    assert_user_error(invoke("trim", "ts@1", "--vocab-size", 300, "--map-out", "no/dir/m", "--db", db), "no directory")
    assert invoke("trim", "ts@1", "--db", db).exit_code != 0
    assert sorted(path.name for path in tmp_path.iterdir()) == before
    assert [info.ref for info in Store(db).list()] == ["ts@1"]

    ok(invoke("trim", "ts@1", "--vocab-size", 300, "--map-out", "m", "--db", db))
    np.save(tmp_path / "ids.npy", np.array([5, 340, 260], dtype=np.uint16))  # 340 was dropped
    # The .json expands a dropped token into its parts; the .npy (an array alone) cannot.
    assert_user_error(invoke("remap", "m.npy", "ids.npy", "-o", "out.npy"), "token id 340 at position 1", "dropped")
    ok(invoke("remap", "m.json", "ids.npy", "-o", "out.npy"))
    small = Store(db).load("ts@2")
    assert small.decode(np.load(tmp_path / "out.npy").tolist()) == Store(db).load("ts@1").decode([5, 340, 260])
    (tmp_path / "out.npy").unlink()
    np.save(tmp_path / "ids.npy", np.array([5, 7, 4000], dtype=np.uint16))
    assert_user_error(invoke("remap", "m.npy", "ids.npy", "-o", "out.npy"), "unknown token id 4000 at position 2")
    (tmp_path / "bad.json").write_text("[]")
    assert_user_error(invoke("remap", "bad.json", "ids.npy", "-o", "out.npy"), "bad.json: not an id map")
    assert not (tmp_path / "out.npy").exists()
    assert not [path for path in tmp_path.iterdir() if path.name.endswith(".partial")]


# -- a map file is input: fuzzed, it loads or is refused in one line naming it -----------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 2**40) | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4) | st.integers(0, 2**40).map(str), inner, max_size=4),
    max_leaves=12,
)


@st.composite
def spoiled_maps(draw):
    """A valid trim map's JSON with a few keys replaced by random JSON (or dropped)."""
    data = {"from": "a@1", "to": "a@2", "map": {"0": 0, "2": 1, "3": 2}, "dropped": [1], "expansions": {"1": [0, 1]}}
    for key in draw(st.lists(st.sampled_from(["from", "to", "map", "dropped", "expansions", "added"]), max_size=3)):
        if draw(st.booleans()):
            data.pop(key, None)
        else:
            data[key] = draw(JSON_VALUES)
    return data


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=spoiled_maps() | JSON_VALUES)
def test_a_spoiled_map_file_loads_or_is_one_line_naming_it(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("map") / "m.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    try:
        id_map = load_id_map(path)
    except ValueError as error:
        assert str(error).startswith(f"{path}: not an id map") and "\n" not in str(error)
        return
    # Loaded: every id it maps to is a new id, and remapping through it never fails otherwise.
    kept = id_map.array[id_map.array >= 0]
    assert (kept >= 0).all()
    for parts in id_map.expansions.values():
        assert set(parts) <= set(kept.tolist())
    old = np.arange(len(id_map.array))
    mappable = (id_map.array >= 0) | np.isin(old, list(id_map.expansions))
    remap(id_map, old[mappable])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"map": {"0": 0}, "dropped": [2**40]}, "id 1099511627776 is above the largest token id"),
        ({"map": {"0": 0, str(2**31 - 1): 1}}, "ids up to 2147483647 for only 2 entries"),
        ({"map": {"0": 2**33}}, "id 8589934592 is above the largest token id"),
    ],
)
def test_a_map_with_huge_ids_is_refused_before_anything_is_allocated(tmp_path, data, message):
    path = tmp_path / "m.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(f"{path}: not an id map ({message}")):
        load_id_map(path)
