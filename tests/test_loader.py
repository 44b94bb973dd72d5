"""The one loader (issue 11 section 3): every way of reading a stored tokenizer — ``Tokenizer.from_db``,
``Store.load`` and ``Store.diff``, and the command line's ``encode``, ``decode``, ``show``, ``diff``
and ``export`` — goes through :func:`bpestore.store.loader.load_with_warm` (which
:func:`~bpestore.store.loader.load_model` is, without the warm table), takes its fast SQLite path,
and gives the same model as the SQLAlchemy path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bpestore import Store, Tokenizer
from bpestore.store import loader
from bpestore.store.database import ModelStore
from test_cli import invoke, ok

ENDOFTEXT = "<|endoftext|>"


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    """A store holding t@1 (vocab 300) and t@2 (vocab 310), trained on a small corpus."""
    directory = tmp_path_factory.mktemp("loader")
    corpus = directory / "corpus.txt"
    words = ["the cat sat", "naïve café", "日本語 😀", "don't stop", "1234 5678", "hello  world\r\n"]
    corpus.write_text(f" {ENDOFTEXT} ".join(words[i % len(words)] + f" {i % 17}" for i in range(3000)), encoding="utf-8")
    path = directory / "store.db"
    with Store(path) as store:
        store.train(corpus, "t", [300, 310], [ENDOFTEXT])
    return path


@pytest.fixture
def calls(monkeypatch) -> dict[str, list]:
    """Record every call of the loader (what it was given) and of its two fast readers."""
    seen: dict[str, list] = {"load_model": [], "fast": [], "new_connection": []}
    real_load, real_fast, real_new = loader.load_with_warm, loader._read_current_sqlite, loader.load_from_sqlite

    def load_with_warm(store, ref, *, warm=True):
        seen["load_model"].append((store, ref))
        return real_load(store, ref, warm=warm)

    def read_current(connection, location, ref, warm):
        model = real_fast(connection, location, ref, warm)
        seen["fast"].append(model is not None)
        return model

    def load_from_sqlite(path, ref, *, warm=False):
        seen["new_connection"].append(ref)
        return real_new(path, ref, warm=warm)

    monkeypatch.setattr(loader, "load_with_warm", load_with_warm)
    monkeypatch.setattr(loader, "_read_current_sqlite", read_current)
    monkeypatch.setattr(loader, "load_from_sqlite", load_from_sqlite)
    return seen


def sqlalchemy_model(db: Path, ref: str):
    """The model read by the SQLAlchemy path alone, to compare with."""
    with ModelStore(db, create=False) as store:
        return store.load_model(ref)


def same_model(a, b) -> None:
    assert (a.vocab, a.merges, a.special_tokens, a.pattern, a.merge_rule) == (b.vocab, b.merges, b.special_tokens, b.pattern, b.merge_rule)


def test_python_entry_points_go_through_the_one_loader(db, calls):
    expected = sqlalchemy_model(db, "t@2")
    same_model(Tokenizer.from_db(db, "t@2").model, expected)
    assert [ref for _, ref in calls["load_model"]] == ["t@2"] and calls["fast"] == [True]
    assert calls["new_connection"] == ["t@2"]

    for key in calls:
        calls[key].clear()
    with Store(db, create=False) as store:
        same_model(store.load("t@2").model, expected)
        # An open store is read on its own connection: the loader opens no other.
        assert calls["load_model"] == [(store, "t@2")] and calls["fast"] == [True]
        assert calls["new_connection"] == []
        diff = store.diff("t@1", "t")
        assert [ref for _, ref in calls["load_model"][1:]] == ["t@1", "t@2"]
        assert calls["fast"] == [True, True, True]
    assert diff.vocab_size_a == 300 and diff.vocab_size_b == 310
    assert diff.common_merge_prefix == 300 - 256 - 1 == diff.merges_a


def test_an_unknown_name_falls_back_to_the_store_and_its_message(db, calls):
    with Store(db, create=False) as store:
        with pytest.raises(LookupError, match="names: t"):
            store.load("nope")
    assert calls["fast"] == [False]


def test_command_line_entry_points_go_through_the_one_loader(db, calls, tmp_path):
    expected = sqlalchemy_model(db, "t@1")
    text = "the cat sat on a naïve café 日本語 😀 " + ENDOFTEXT
    ids = Tokenizer.from_model(expected).encode(text)

    out = ok(invoke("encode", "t@1", "--db", db, input=text.encode("utf-8")))
    assert [int(i) for i in out.split()] == ids
    assert ok(invoke("decode", "t@1", "--db", db, input=out.encode())) == text
    shown = json.loads(ok(invoke("show", "t@1", "--json", "--merges", 3, "--db", db)))
    assert [len(shown[key]) for key in ("first_merges", "longest_tokens")] == [3, 3]
    compared = json.loads(ok(invoke("diff", "t@1", "t@2", "--json", "--db", db)))
    assert compared["common_merge_prefix"] == len(expected.merges)
    output = tmp_path / "tokenizer.json"
    ok(invoke("export", "t@1", "--format", "hf", "--output", output, "--db", db))
    same_model(Tokenizer.from_format("hf", output).model, expected)

    refs = [ref for _, ref in calls["load_model"]]
    assert refs == ["t@1", "t@1", "t@1", "t@1", "t@2", "t@1"], refs  # encode, decode, show, diff (2), export
    assert calls["fast"] == [True] * len(refs)
