"""Ids beside the vocab (``BPEModel.aliases``): what a Hugging Face file holds that a vocab of one
id per token cannot, kept as Hugging Face keeps it.

- a vocab entry with the bytes of an added token of another id (GPT-NeoX lists its runs of spaces
  both as ``ĠĠ`` and as added tokens): the added token's id where the text holds the token, the
  vocab's where the model makes those bytes (a normalizer wrote them), and both decode;
- a vocab entry that is not byte-level (``中``, ``a b`` with a plain space): no text encodes to it,
  and it decodes to its UTF-8.

The oracle is Hugging Face ``tokenizers``, on files built here (so the tests run anywhere) and on
GPT-NeoX's shared file.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from click.testing import CliRunner

from bpestore import BPEModel, Store, Tokenizer, formats
from bpestore.cli import main
from bpestore.errors import DamagedStoreError
from bpestore.formats.gpt2 import token_to_text
from bpestore.reshape import trim
from conftest import shared_dir
from strategies import texts
from tiers import examples

tokenizers = pytest.importorskip("tokenizers", reason="Hugging Face tokenizers is the oracle for tokenizer.json files")
from tokenizers import decoders, models, pre_tokenizers, trainers  # noqa: E402

TRAINING_TEXT = [
    "Hello world, hello World!  Two  spaces,   three   spaces;\tand a tab. 中文 text, 日本語.",
    "The quick brown fox jumps over the lazy dog.    Four spaces and 12345 numbers.",
] * 30
NOT_BYTE_LEVEL = ["中", "a b", "hello world", "\n", "Ω mega"]  # (a plain space, not "Ġ")
TEXTS = ["", " ", "  ", "a  b", "x", "axxb", "中", "a b", "hello world", "中文 a b\n", "  x  x", "x x", "> >", "Ω mega"]


def trained(ignore_merges: bool = False) -> tokenizers.Tokenizer:
    """A small byte-level BPE trained by Hugging Face (every byte in its vocab)."""
    tokenizer = tokenizers.Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(TRAINING_TEXT, trainer)
    return tokenizer


def saved(tokenizer: tokenizers.Tokenizer, path: Path, edit=None) -> Path:
    tokenizer.save(str(path))
    if edit is not None:
        document = json.loads(path.read_text(encoding="utf-8"))
        edit(document)
        path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return path


def with_entries_not_byte_level(document: dict) -> None:
    vocab = document["model"]["vocab"]
    top = max(vocab.values())
    # (one at the top, so that new ids after it must skip it, and the rest below it)
    for offset, text in enumerate(NOT_BYTE_LEVEL):
        vocab[text] = top + 1 + offset


def with_twins(document: dict) -> None:
    """Added tokens of runs of spaces under ids of their own, found in normalized text, as GPT-NeoX's
    (whose vocab holds them too, as ``ĠĠ``...)."""
    vocab = document["model"]["vocab"]
    top = max(vocab.values())
    runs = [" " * width for width in (2, 3, 4) if token_to_text(b" " * width) in vocab]
    assert runs, "the training text makes runs of spaces tokens"
    document["added_tokens"] += [
        {"id": top + 1 + index, "content": run, "single_word": False, "lstrip": False, "rstrip": False, "normalized": True, "special": False}
        for index, run in enumerate(runs)
    ]


def pair(path: Path, normalizer: dict | None = None) -> tuple[Tokenizer, tokenizers.Tokenizer]:
    """bpestore's and Hugging Face's tokenizers of the file, given ``normalizer`` (its JSON) first."""
    if normalizer is not None:
        document = json.loads(path.read_text(encoding="utf-8"))
        document["normalizer"] = normalizer
        path = path.with_name(f"normalized-{path.name}")
        path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    reference = tokenizers.Tokenizer.from_file(str(path))
    return Tokenizer.from_model(formats.read("hf", path).model), reference


def assert_same(ours: Tokenizer, reference: tokenizers.Tokenizer, text: str) -> None:
    assert ours.encode(text) == reference.encode(text, add_special_tokens=False).ids, text


def every_id(reference: tokenizers.Tokenizer) -> list[int]:
    return sorted(reference.get_vocab(with_added_tokens=True).values())


# -- entries that are not byte-level ----------------------------------------------------------------


@pytest.mark.parametrize("ignore_merges", [False, True])
def test_entries_not_byte_level_encode_and_decode_as_hugging_face(tmp_path, ignore_merges):
    path = saved(trained(ignore_merges), tmp_path / "tokenizer.json", with_entries_not_byte_level)
    imported = formats.read("hf", path)
    assert sorted(imported.model.aliases.values()) == sorted(text.encode() for text in NOT_BYTE_LEVEL)
    assert any("5 vocab entries are not byte-level" in note for note in imported.notes)
    ours, reference = Tokenizer.from_model(imported.model), tokenizers.Tokenizer.from_file(str(path))
    for text in [*TEXTS, *NOT_BYTE_LEVEL, "".join(NOT_BYTE_LEVEL)]:
        assert_same(ours, reference, text)
    ids = every_id(reference)
    assert ours.decode(ids) == reference.decode(ids, skip_special_tokens=False)
    for token_id in ids:
        assert ours.decode([token_id]) == reference.decode([token_id], skip_special_tokens=False), token_id


def test_entries_not_byte_level_round_trip_through_the_store_and_an_export(tmp_path):
    path = saved(trained(), tmp_path / "tokenizer.json", with_entries_not_byte_level)
    model = formats.read("hf", path).model
    with Store(tmp_path / "store.db") as store:
        ref = store.save("odd", model)
        loaded = store.load_model(ref)
    assert loaded.aliases == model.aliases and loaded.vocab == model.vocab
    shown = CliRunner().invoke(main, ["--db", str(tmp_path / "store.db"), "show", ref])
    assert shown.exit_code == 0 and "ids beside the vocab  5 (" in shown.output
    exported = tmp_path / "exported.json"
    Tokenizer.from_model(loaded).export("hf", exported)
    again, reference = tokenizers.Tokenizer.from_file(str(exported)), tokenizers.Tokenizer.from_file(str(path))
    for text, token_id in reference.get_vocab().items():
        assert again.token_to_id(text) == token_id, text
    ids = every_id(reference)
    assert again.decode(ids, skip_special_tokens=False) == reference.decode(ids, skip_special_tokens=False)
    for text in TEXTS:
        assert again.encode(text, add_special_tokens=False).ids == reference.encode(text, add_special_tokens=False).ids


def test_a_new_id_skips_the_ids_beside_the_vocab(tmp_path):
    """An id beside the vocab is taken: a special token added later gets the next free id after it."""
    path = saved(trained(), tmp_path / "tokenizer.json", with_entries_not_byte_level)
    model = formats.read("hf", path).model
    top = max(model.aliases)
    assert top > max(model.vocab)
    grown = BPEModel(model.vocab, model.merges, ["<|new|>"], **model.pipeline)
    assert grown.special_ids["<|new|>"] == top + 1


# -- twins: a vocab entry with an added token's bytes under another id -----------------------------


NORMALIZERS = {
    "none": None,
    "Prepend": {"type": "Prepend", "prepend": "> "},
    "Replace": {"type": "Replace", "pattern": {"String": "x"}, "content": "  "},
    "NFC+Replace": {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Replace", "pattern": {"String": "x"}, "content": "   "}]},
}


@pytest.fixture(scope="module", params=sorted(NORMALIZERS))
def twins(request, tmp_path_factory):
    path = saved(trained(), tmp_path_factory.mktemp("twins") / "tokenizer.json", with_twins)
    return pair(path, NORMALIZERS[request.param])


def test_twins_are_kept_beside_the_vocab(twins):
    ours, reference = twins
    twin_ids = ours.model.twin_ids
    assert twin_ids, "the file has twins"
    for twin, token_id in twin_ids.items():
        assert reference.id_to_token(twin) == token_to_text(ours.model.vocab[token_id])
        assert reference.get_added_tokens_decoder()[token_id].content == ours.model.vocab[token_id].decode()


def test_twins_encode_and_decode_as_hugging_face(twins):
    ours, reference = twins
    for text in TEXTS:
        assert_same(ours, reference, text)
    ids = every_id(reference)
    assert ours.decode(ids) == reference.decode(ids, skip_special_tokens=False)


@given(text=texts(max_pieces=12), more=st.lists(st.sampled_from([" ", "  ", "x", "xx", "> ", "\t", "\n"]), max_size=8))
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_twins_encode_any_text_as_hugging_face(twins, text, more):
    ours, reference = twins
    assert_same(ours, reference, "".join(itertools.chain(*zip(more, text.split(" ")))) + text)


@given(ids=st.lists(st.integers(0, 420), max_size=12))
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_ids_decode_as_hugging_face_decodes_them(twins, ids):
    ours, reference = twins
    known = set(every_id(reference))
    ids = [token_id for token_id in ids if token_id in known]
    assert ours.decode(ids) == reference.decode(ids, skip_special_tokens=False)


def test_twins_round_trip_through_an_export(twins, tmp_path):
    ours, reference = twins
    exported = tmp_path / "exported.json"
    ours.export("hf", exported)
    again = tokenizers.Tokenizer.from_file(str(exported))
    for twin, token_id in ours.model.twin_ids.items():
        assert (again.id_to_token(twin), again.id_to_token(token_id)) == (reference.id_to_token(twin), reference.id_to_token(token_id))
    for text in TEXTS:
        assert again.encode(text, add_special_tokens=False).ids == reference.encode(text, add_special_tokens=False).ids, text


def test_gpt_neox_twins_decode_and_encode_after_a_normalizer_as_hugging_face(tmp_path):
    path = shared_dir() / "tokenizers" / "gpt-neox-20b" / "tokenizer.json"
    if not path.is_file():
        pytest.skip(f"{path} not found (set BPESTORE_SHARED to the directory holding tokenizers/)")
    ours, reference = pair(path)
    assert len(ours.model.twin_ids) == 23
    ids = sorted(ours.model.twin_ids) + sorted(ours.model.twin_ids.values())
    assert ours.decode(ids) == reference.decode(ids, skip_special_tokens=False)
    copy = tmp_path / "neox.json"
    copy.write_bytes(path.read_bytes())
    ours, reference = pair(copy, {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Prepend", "prepend": "> "}]})
    lines = [" ", "  ", "a  b", "    def f(x):\n        return x  # two", *TEXTS]
    for text in lines:
        assert_same(ours, reference, text)


# -- the model's rules, the store, a trim ------------------------------------------------------------


def small_model(**options) -> BPEModel:
    vocab = {byte: bytes([byte]) for byte in range(256)} | {256: b"  "}
    return BPEModel(vocab, [(b" ", b" ")], **options)


@pytest.mark.parametrize(
    ("aliases", "error", "message"),
    [
        ({256: b"x"}, ValueError, r"alias id 256 is also the vocab's token b'  '"),
        ({-1: b"x"}, ValueError, r"alias id -1 is not an id"),
        ({True: b"x"}, ValueError, r"alias id True is not an id"),
        ({300: b""}, TypeError, r"alias 300 must be non-empty bytes"),
        ({300: "x"}, TypeError, r"alias 300 must be non-empty bytes, not 'x'"),
    ],
)
def test_aliases_are_checked(aliases, error, message):
    with pytest.raises(error, match=message):
        small_model(aliases=aliases)


def test_a_store_with_damaged_aliases_names_them(tmp_path):
    db = tmp_path / "store.db"
    with Store(db) as store:
        store.save("twins", small_model(aliases={300: "中".encode()}, added_tokens=["  "]))
    import sqlite3

    with sqlite3.connect(db) as connection:
        (pipeline,) = connection.execute("SELECT pipeline FROM tokenizers").fetchone()
        assert json.loads(pipeline)["aliases"] == {"300": "e4b8ad"}
        for damaged in ({"300": "zz"}, {"x": "00"}, ["300"], {"256": "00"}):
            document = {**json.loads(pipeline), "aliases": damaged}
            connection.execute("UPDATE tokenizers SET pipeline = ?", (json.dumps(document),))
            connection.commit()
            with Store(db) as store, pytest.raises(DamagedStoreError) as caught:
                store.load_model("twins")
            assert "twins" in str(caught.value) and "\n" not in str(caught.value)


def test_a_trim_keeps_the_ids_beside_the_vocab_and_the_post_processors_ids():
    """A trim renumbers the ids it keeps: the aliases and the ids a post-processor adds follow
    their tokens (Llama-3's <|begin_of_text|> sits at the top of its vocab)."""
    from bpestore.post_processor import PostProcessor

    vocab = {byte: bytes([byte]) for byte in range(256)} | {256: b"ab", 257: b"abc", 258: b"<s>"}
    template = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [258], "tokens": ["<s>"]}},
    }
    model = BPEModel(
        vocab, [(b"a", b"b"), (b"ab", b"c")], ["<s>"], post_processor=PostProcessor.from_hf(template), aliases={259: b"\xe4\xb8\xad"},
    )
    small, id_map = trim(model, vocab_size=258)
    assert small.special_ids == {"<s>": 257} and small.post_processor.prefix == (257,)
    assert small.aliases == {258: b"\xe4\xb8\xad"} and id_map.apply([259, 258, 256]).tolist() == [258, 257, 256]
    tokenizer = Tokenizer.from_model(small)
    assert tokenizer.encode("ab", add_special_tokens=True) == [257, 256]
    assert tokenizer.decode([258, 257]) == "中<s>"
