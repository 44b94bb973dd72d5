"""Issue 26.4, add-tokens: user-defined tokens (Hugging Face's non-special added tokens), always
encoded whole like special tokens but ordinary: no special-token policy refuses them or encodes
them as text. The model, the encoder, the store (a column since migration 0010), the formats, and
``Store.add_tokens`` / ``bpestore add-tokens`` with their id map."""

from __future__ import annotations

import json
import re
import sqlite3
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpestore import Store, Tokenizer, train_bpe
from bpestore.model import BPEModel
from bpestore.reshape import add_tokens, load_id_map
from bpestore.train.trainer import VocabSizeNotReachedWarning
from strategies import ENDOFTEXT, texts
from test_cli import assert_user_error, corpus_text, invoke, ok, write_text
from tiers import examples

PROPERTY = settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])

# "<tool" is a prefix of "<tool_call>": the longest is cut out first. " the" is a merged token of
# the trained vocab: it keeps its id.
ADDED = ["<tool_call>", "</tool_call>", "<tool", " myword", " the", "日本"]


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> BPEModel:
    path = write_text(tmp_path_factory.mktemp("corpus") / "corpus.txt", corpus_text(words=3000))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VocabSizeNotReachedWarning)
        vocab, merges = train_bpe(path, 400, [ENDOFTEXT])
    return BPEModel(vocab, merges, [ENDOFTEXT])


@pytest.fixture(scope="module")
def added(base) -> BPEModel:
    return add_tokens(base, ADDED)[0]


def reference(base: BPEModel, added: BPEModel, text: str, *, specials: bool) -> list[int]:
    """The ids of ``text``: cut at the added tokens (and the special tokens, if ``specials``),
    longest first, each whole string its id; the rest encoded by ``base`` as ordinary text."""
    whole = dict(added.added_ids) | (dict(added.special_ids) if specials else {})
    cut = re.compile("|".join(re.escape(token) for token in sorted(whole, key=len, reverse=True)))
    plain = Tokenizer.from_model(base)
    ids: list[int] = []
    start = 0
    for match in cut.finditer(text):
        ids += plain.encode_ordinary(text[start : match.start()]) + [whole[match.group()]]
        start = match.end()
    return ids + plain.encode_ordinary(text[start:])


def with_tokens(pieces: list[str]) -> st.SearchStrategy[str]:
    """Random texts with the added tokens (and near misses) among their pieces."""
    near = ["<tool_", "tool_call>", " mywor", "myword", "</tool", "日"]
    return st.lists(st.one_of(texts(max_pieces=6), st.sampled_from(pieces + near)), max_size=12).map("".join)


# -- the model -------------------------------------------------------------------------------------


def test_new_tokens_get_the_next_ids_in_order_and_a_known_token_keeps_its_id(base, added):
    top = max(base.vocab)
    the = next(token_id for token_id, token in base.vocab.items() if token == b" the")
    assert added.added_tokens == ADDED
    assert added.added_ids == {
        "<tool_call>": top + 1, "</tool_call>": top + 2, "<tool": top + 3, " myword": top + 4, " the": the, "日本": top + 5,
    }
    assert {token_id: added.vocab[token_id] for token_id in base.vocab} == base.vocab  # old ids unchanged
    assert added.special_ids == base.special_ids and added.vocab_size == base.vocab_size + 5


def test_the_id_map_is_the_identity_and_names_the_added_ids(base):
    model, id_map = add_tokens(base, ["<tool_call>", " the"])
    assert id_map.array.tolist() == list(range(max(base.vocab) + 1))
    assert id_map.added == model.added_ids and id_map.new_ids == [max(base.vocab) + 1]
    assert id_map.new_vocab_size == model.vocab_size and id_map.dropped == []


@pytest.mark.parametrize(
    ("tokens", "message"),
    [
        (["<a>", ""], "added tokens must be non-empty strings, got ''"),
        (["<a>", "<b>", "<a>"], "added token '<a>' is given twice"),
        ([ENDOFTEXT], f"added token '{ENDOFTEXT}' is a special token of the tokenizer"),
        ([], "give at least one token to add"),
    ],
)
def test_add_tokens_refuses(base, tokens, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        add_tokens(base, tokens)


def test_adding_only_added_tokens_again_is_refused_and_a_repeat_keeps_its_id(added):
    with pytest.raises(ValueError, match="nothing to add: '<tool_call>' is already an added token"):
        add_tokens(added, ["<tool_call>"])
    again, id_map = add_tokens(added, ["<tool_call>", "<new>"])
    assert again.added_ids["<tool_call>"] == added.added_ids["<tool_call>"] and id_map.new_ids == [max(added.vocab) + 1]


def test_a_model_refuses_an_added_token_that_is_special(base):
    with pytest.raises(ValueError, match="is a special token"):
        BPEModel(base.vocab, base.merges, [ENDOFTEXT], added_tokens=[ENDOFTEXT])
    with pytest.raises(TypeError, match="added_tokens must be a list of strings"):
        BPEModel(base.vocab, base.merges, added_tokens="<a>")  # type: ignore[arg-type]


# -- encoding ------------------------------------------------------------------------------------


@PROPERTY
@given(text=with_tokens(ADDED + [ENDOFTEXT]))
def test_added_tokens_are_encoded_whole_anywhere_whatever_the_policy(base, added, text):
    tokenizer = Tokenizer.from_model(added)
    everything = reference(base, added, text, specials=True)
    ordinary = reference(base, added, text, specials=False)
    assert tokenizer.encode(text) == everything
    assert tokenizer.encode_batch([text, text], num_threads=2) == [everything, everything]
    assert list(tokenizer.encode_iterable([text[: len(text) // 2], text[len(text) // 2 :]])) == everything
    assert tokenizer.encode_to_array(text).tolist() == everything
    assert tokenizer.encode_with_offsets(text)[0] == everything
    # Added tokens are ordinary: encode_ordinary, allowed_special=set() (which refuses only the
    # special tokens' strings) and a set of special tokens all still encode them whole.
    assert tokenizer.encode_ordinary(text) == ordinary
    assert tokenizer.encode_ordinary_batch([text]) == [ordinary]
    assert tokenizer.encode(text, allowed_special=set(), disallowed_special=()) == ordinary
    if ENDOFTEXT not in text:
        assert tokenizer.encode(text, allowed_special=set()) == ordinary
        assert tokenizer.encode(text, allowed_special={ENDOFTEXT}) == everything
    assert tokenizer.decode(everything) == text == tokenizer.decode(ordinary)


def test_an_added_token_is_its_own_id_in_plain_words(added):
    tokenizer = Tokenizer.from_model(added)
    ids = added.added_ids
    text = "call <tool_call>run</tool_call> and<tool myword myword2 the theory"
    encoded = tokenizer.encode(text, allowed_special=set())
    for token in ("<tool_call>", "</tool_call>", "<tool", " myword", " the"):
        assert ids[token] in encoded, token
    assert encoded.count(ids[" myword"]) == 2 and encoded.count(ids[" the"]) == 2  # " theory" too: cut out anywhere
    assert tokenizer.decode_single_token_bytes(ids["<tool_call>"]) == b"<tool_call>"
    assert not tokenizer.is_special_token(ids["<tool_call>"]) and tokenizer.special_tokens_set == {ENDOFTEXT}
    assert b"<tool_call>" in tokenizer.token_byte_values()  # an ordinary token


# -- the store -------------------------------------------------------------------------------------


def test_the_store_keeps_added_tokens(tmp_path, added):
    db = tmp_path / "s.db"
    with Store(db) as store:
        ref = store.save("t", added)
        assert store.info(ref).added_tokens == ADDED
        assert store.load_model(ref) == added
    loaded = Tokenizer.from_db(db, "t")  # the fast SQLite loader
    assert loaded.model == added and loaded.added_ids == added.added_ids
    connection = sqlite3.connect(db)
    try:
        assert json.loads(connection.execute("SELECT added_tokens FROM tokenizers").fetchone()[0]) == ADDED
        # Without its packed copy the rows are read: the same model.
        connection.execute("DELETE FROM packed_models")
        connection.commit()
    finally:
        connection.close()
    assert Tokenizer.from_db(db, "t").model == added


def test_store_add_tokens_keeps_its_lineage_and_writes_the_map(tmp_path, base):
    with Store(tmp_path / "s.db") as store:
        ref = store.save("t", base)
        new_ref, id_map = store.add_tokens(ref, ["<tool_call>", " the"], map_out=tmp_path / "m")
        assert (new_ref, id_map.source, id_map.target) == ("t@2", ref, new_ref)
        info = store.info(new_ref)
        assert info.reshaped_from == ref and info.source == f"tokens added to {ref}"
        assert info.training_params == {"reshaped_from": ref, "how": "add-tokens", "tokens": ["<tool_call>", " the"]}
        assert info.added_tokens == ["<tool_call>", " the"] and store.info(ref).added_tokens == []
        assert store.add_tokens(ref, ["<x>"], "other")[0] == "other@1"
    document = json.loads((tmp_path / "m.json").read_text())
    assert (document["from"], document["to"], document["dropped"]) == (ref, new_ref, [])
    the = next(token_id for token_id, token in base.vocab.items() if token == b" the")
    assert document["added"] == {"<tool_call>": max(base.vocab) + 1, " the": the}
    assert np.load(tmp_path / "m.npy").tolist() == list(range(max(base.vocab) + 1))
    assert load_id_map(tmp_path / "m.json").added == id_map.added


def test_reshaping_keeps_the_added_tokens(added):
    from bpestore.reshape import drop_unused, trim

    small, _ = trim(added, 300)
    assert small.added_tokens == ADDED and Tokenizer.from_model(small).encode("a<tool_call>b")[1] == small.added_ids["<tool_call>"]
    used, _ = drop_unused(added, ["the cat"])
    assert used.added_tokens == ADDED


# -- formats ---------------------------------------------------------------------------------------


def test_hf_export_marks_them_not_special_and_encodes_the_same(tmp_path, added):
    hf = pytest.importorskip("tokenizers")
    tokenizer = Tokenizer.from_model(added)
    path = tmp_path / "tokenizer.json"
    tokenizer.export("hf", path)
    listed = {token["content"]: token for token in json.loads(path.read_text(encoding="utf-8"))["added_tokens"]}
    assert {content: token["special"] for content, token in listed.items()} == {ENDOFTEXT: True} | {token: False for token in ADDED}
    loaded = hf.Tokenizer.from_file(str(path))
    text = "call <tool_call>run</tool_call> and<tool myword the theory 日本語" + ENDOFTEXT + " myword"
    assert loaded.encode(text).ids == tokenizer.encode(text)
    assert loaded.decode(tokenizer.encode(text), skip_special_tokens=False) == text
    back = Tokenizer.from_format("hf", path)
    assert (back.vocab, back.merges, back.special_ids, back.added_ids) == (added.vocab, added.merges, added.special_ids, added.added_ids)


@pytest.mark.parametrize("format", ["tiktoken", "gpt2"])
def test_formats_that_cannot_mark_added_tokens_say_so(tmp_path, added, format):
    notes = Tokenizer.from_model(added).export(format, tmp_path / "out")
    assert any("cannot mark added tokens" in note and "bpestore add-tokens" in note for note in notes)
    # Written as ordinary tokens at their ids: add-tokens after an import restores them exactly.
    if format == "gpt2":
        back = Tokenizer.from_format("gpt2", tmp_path / "out" / "vocab.json", tmp_path / "out" / "merges.txt", special_tokens=[ENDOFTEXT])
        assert add_tokens(back.model, ADDED)[0] == added
    else:
        back = Tokenizer.from_format("tiktoken", tmp_path / "out", added.pattern, special_tokens=added.special_ids)
        assert add_tokens(back.model, ADDED)[0].added_ids == added.added_ids


# -- the command line ------------------------------------------------------------------------------


def test_cli_add_tokens(tmp_path, monkeypatch, base):
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "s.db"
    with Store(db) as store:
        store.save("ts", base)
    result = invoke("add-tokens", "ts", "<tool_call>", " the", "--db", db)
    assert ok(result) == "ts@2\n"
    the = next(token_id for token_id, token in base.vocab.items() if token == b" the")
    assert f"{max(base.vocab) + 1}\t'<tool_call>'\tnew" in result.stderr
    assert f"{the}\t' the'\talready a token of the vocab" in result.stderr
    id_map = json.loads((tmp_path / "ts@1-to-ts@2.idmap.json").read_text())
    assert id_map["added"] == {"<tool_call>": max(base.vocab) + 1, " the": the}
    assert (tmp_path / "ts@1-to-ts@2.idmap.npy").exists()
    listed = {row["ref"]: row for row in json.loads(ok(invoke("list", "--json", "--db", db)))}
    assert listed["ts@2"]["reshaped_from"] == "ts@1" and listed["ts@2"]["added_tokens"] == ["<tool_call>", " the"]
    assert "tokens added to ts@1" in ok(invoke("list", "--wide", "--db", db))
    shown = ok(invoke("show", "ts@2", "--db", db))
    assert re.search(r"^added tokens +'<tool_call>', ' the'$", shown, re.MULTILINE)
    assert re.search(r"^reshaped from +ts@1 \(add-tokens; old ids kept", shown, re.MULTILINE)
    encoded = ok(invoke("encode", "ts", "--ordinary", "--db", db, input="x<tool_call>" + ENDOFTEXT))
    assert str(max(base.vocab) + 1) in encoded.split()
    ok(invoke("add-tokens", "ts@1", "<a>", "--name", "other", "--map-out", "m", "--db", db))
    assert json.loads((tmp_path / "m.json").read_text())["to"] == "other@1"


def test_cli_add_tokens_errors_are_one_line_and_store_nothing(tmp_path, monkeypatch, base):
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "s.db"
    with Store(db) as store:
        store.save("ts", BPEModel(base.vocab, base.merges, [ENDOFTEXT], added_tokens=["<a>"]))
    before = sorted(path.name for path in tmp_path.iterdir())
    assert_user_error(invoke("add-tokens", "ts", "<b>", "", "--db", db), "non-empty")
    assert_user_error(invoke("add-tokens", "ts", "<b>", "<b>", "--db", db), "'<b>' is given twice")
    assert_user_error(invoke("add-tokens", "ts", ENDOFTEXT, "--db", db), "is a special token")
    assert_user_error(invoke("add-tokens", "ts", "<a>", "--db", db), "nothing to add")
    assert_user_error(invoke("add-tokens", "ts@7", "<b>", "--db", db), "no version 7")
    assert_user_error(invoke("add-tokens", "ts", "<b>", "--map-out", "no/dir/m", "--db", db), "no directory")
    assert invoke("add-tokens", "ts", "--db", db).exit_code != 0  # no TOKEN
    assert sorted(path.name for path in tmp_path.iterdir()) == before
    assert [info.ref for info in Store(db).list()] == ["ts@1"]


def test_a_shard_fingerprint_tells_added_tokens_apart(base):
    from bpestore.encode.shards import fingerprint

    # " the" keeps its id: the vocab is the same, the ids of a text are not.
    plain, same_vocab = Tokenizer.from_model(base), Tokenizer.from_model(add_tokens(base, [" the"])[0])
    assert same_vocab.vocab == plain.vocab and same_vocab.encode(" ther") != plain.encode(" ther")
    assert fingerprint(same_vocab) != fingerprint(plain)


def test_continued_training_cuts_the_corpus_at_the_bases_added_tokens(tmp_path, base):
    # The base encodes "<tool>" whole: a continued training must learn no merge reaching into it,
    # exactly as if it were one more special token cutting the corpus.
    path = write_text(tmp_path / "more.txt", "call<tool>now and x<tool>y, then <tool><tool>done\n" * 200)
    with Store(tmp_path / "s.db") as store, warnings.catch_warnings():
        warnings.simplefilter("ignore", VocabSizeNotReachedWarning)
        store.save("b", base)
        [with_added] = store.add_tokens("b", ["<tool>"])[:1]
        [continued] = store.train(path, "c", 480, [ENDOFTEXT], base=with_added)
        [as_special] = store.train(path, "d", 480, [ENDOFTEXT, "<tool>"], base="b@1")
        new = store.load_model(continued).merges[len(base.merges):]
        assert new and new == store.load_model(as_special).merges[len(base.merges):]
        assert not any(b"tool>" in left + right or b"<too" in left + right for left, right in new)
        assert store.load_model(continued).added_tokens == ["<tool>"]
