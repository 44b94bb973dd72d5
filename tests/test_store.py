"""Tests of ``bpestore.Store``: schema and readable views, versions and references, training
into the store (one transaction, reuse of pre-token counts), loading, diff, concurrency, and URLs.

Expected values are computed here, independently of the code under test: pre-token counts with the
naive ``tests/reference.py``, tokenizers with ``bpestore.train_bpe`` (which ``test_training.py``
checks against the reference), view and query results from the tokenizers' own vocab and merges.
The database is read with the plain ``sqlite3`` module, as a person at the ``sqlite3`` prompt would.

Every test that takes the ``db`` fixture runs twice: on a SQLite file, and on a database of its own
on a PostgreSQL server (tests/postgres.py; read there with plain psycopg, as at the ``psql``
prompt), which skips, saying why, where there is no server. Tests about SQLite files (paths, URLs,
WAL files) run on SQLite only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import pytest
import sqlalchemy
from hypothesis import HealthCheck, given, settings
from sqlalchemy import text as sql
from sqlalchemy.engine import Connection

import bpestore
import bpestore.workflow
import bpestore.train.trainer
from bpestore import _engine
from bpestore import Tokenizer, train_bpe
from bpestore.errors import InvalidReferenceError, TokenizerNotFoundError
from bpestore.workflow import Store
from bpestore.store.database import readable_text
from conftest import REPO_ROOT, shared_file
from postgres import PostgresDatabase, fresh_database, sqlite_or_postgresql_db  # noqa: F401 (the db fixture)
from reference import reference_pretoken_counts
from strategies import texts
from tiers import examples

ENDOFTEXT = "<|endoftext|>"
SPECIALS = [ENDOFTEXT]
TABLES = ["corpora", "pretoken_counts", "tokenizers", "vocab", "merges"]


# -- helpers ------------------------------------------------------------------------------------


def read_text(path: Path) -> str:
    """A file's text exactly as stored (no newline translation)."""
    return path.read_bytes().decode("utf-8")


def write_corpus(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))
    return path


def corpus_a_text() -> str:
    """English text with special tokens in it (corpus.en, then the TinyStories sample)."""
    return read_text(shared_file("fixtures", "corpus.en")) + read_text(shared_file("fixtures", "tinystories_sample.txt"))


def corpus_b_text() -> str:
    """Other text (German, an address, stories), so that merges differ from corpus A's."""
    fixtures = [read_text(shared_file("fixtures", name)) for name in ("german.txt", "address.txt", "tinystories_sample.txt")]
    return (fixtures[0] * 20) + (fixtures[1] * 20) + (fixtures[2] * 3)


def query(db: Path | PostgresDatabase, statement: str, params: tuple | dict = ()) -> list[tuple]:
    """Rows of ``statement`` run with the plain sqlite3 module, or psycopg on PostgreSQL."""
    if isinstance(db, PostgresDatabase):
        return db.query(statement, params)
    connection = sqlite3.connect(db)
    try:
        return connection.execute(statement, params).fetchall()
    finally:
        connection.close()


def table_rows(db: Path) -> dict[str, list[tuple]]:
    """Every row of bpestore's tables, sorted: a snapshot to compare before and after."""
    return {table: sorted(query(db, f"SELECT * FROM {table}"), key=repr) for table in TABLES}


def tokenizer_id(db: Path, name: str, version: int) -> int:
    (row,) = query(db, "SELECT id FROM tokenizers WHERE name = ? AND version = ?", (name, version))
    return row[0]


def version_of(ref: str) -> int:
    return int(ref.rpartition("@")[2])


def expected_kinds(tokenizer: Tokenizer) -> dict[int, str]:
    """id -> kind: special tokens, single bytes, results of a merge, and other tokens."""
    specials = set(tokenizer.special_ids.values())
    merged = {left + right for left, right in tokenizer.merges}
    return {
        token_id: "special" if token_id in specials else "byte" if len(token) == 1 else "merge" if token in merged else "other"
        for token_id, token in tokenizer.vocab.items()
    }


def byte_tokenizer(merges=(), special_tokens=(), **kwargs) -> Tokenizer:
    """The 256 bytes, then one token per merge, in order."""
    vocab = {b: bytes([b]) for b in range(256)}
    for left, right in merges:
        vocab[len(vocab)] = left + right
    return Tokenizer(vocab, list(merges), list(special_tokens), **kwargs)


def small_tokenizer() -> Tokenizer:
    """A hand-made tokenizer with every kind of token, tokens that are not valid UTF-8 (halves
    of '中' = e4 b8 ad), a token no merge produces, and a special token not in the vocab."""
    vocab = {b: bytes([b]) for b in range(256)}
    merges = [(b"h", b"e"), (b"l", b"l"), (b"he", b"ll"), (b"\xe4", b"\xb8"), (b"\xe4\xb8", b"\xad"), (b" ", b"w")]
    for left, right in merges:
        vocab[len(vocab)] = left + right
    vocab[len(vocab)] = b"\xff\xfeother"
    return Tokenizer(vocab, merges, ["<|sep|>"])


@pytest.fixture
def corpus_a(tmp_path) -> Path:
    return write_corpus(tmp_path / "corpus_a.txt", corpus_a_text())


@pytest.fixture
def corpus_b(tmp_path) -> Path:
    return write_corpus(tmp_path / "corpus_b.txt", corpus_b_text())


def readable(token: bytes, db: Path | PostgresDatabase) -> str:
    """``vocab.text`` of ``token``: UTF-8 with errors replaced, and NUL too on PostgreSQL."""
    return readable_text(token, postgresql=isinstance(db, PostgresDatabase))


@pytest.fixture
def store(db):
    with Store(db) as store:
        yield store


def assert_same_tokenizer(loaded: Tokenizer, original: Tokenizer) -> None:
    assert loaded.vocab == original.vocab
    assert loaded.merges == original.merges
    assert loaded.special_tokens == original.special_tokens
    assert loaded.special_ids == original.special_ids
    assert loaded.pattern == original.pattern
    assert loaded.merge_rule == original.merge_rule


# -- 1. schema, constraints, readable views, the SQL page's queries ----------------------------------------


def test_store_is_exported_from_the_package():
    assert getattr(bpestore, "Store", None) is Store, "bpestore.Store should be the store class (bpestore.workflow.Store)"


def test_new_store_has_the_tables_with_their_columns(db):
    Store(db).close()
    engine = sqlalchemy.create_engine(db if isinstance(db, PostgresDatabase) else f"sqlite:///{db}")
    inspector = sqlalchemy.inspect(engine)
    assert set(TABLES) <= set(inspector.get_table_names())
    expected_columns = {
        "corpora": {"id", "sha256", "pattern", "special_tokens", "path", "size_bytes", "distinct_pretokens", "total_pretokens", "created_at"},
        "pretoken_counts": {"corpus_id", "pretoken", "count"},
        "tokenizers": {
            "id", "name", "version", "created_at", "vocab_size", "pattern", "special_tokens", "merge_rule",
            "corpus_id", "training_params", "training_seconds", "source",
        },
        "vocab": {"tokenizer_id", "token_id", "token", "kind", "text"},
        "merges": {"tokenizer_id", "rank", "left", "right", "result_id"},
    }
    for table, columns in expected_columns.items():
        assert {column["name"] for column in inspector.get_columns(table)} >= columns, table
    assert {"vocab_readable", "merges_readable"} <= set(inspector.get_view_names())
    engine.dispose()


def test_training_writes_corpus_counts_tokenizer_vocab_and_merges(store, db, corpus_a):
    (ref,) = store.train(corpus_a, "ts", 400, SPECIALS, workers=1)
    text = read_text(corpus_a)
    counts = reference_pretoken_counts(text, SPECIALS)
    vocab, merges = train_bpe(corpus_a, 400, SPECIALS, workers=1)

    (corpus_row,) = query(
        db, "SELECT id, sha256, pattern, special_tokens, path, size_bytes, distinct_pretokens, total_pretokens FROM corpora"
    )
    corpus_id, sha256, pattern, specials_json, path, size, distinct, total = corpus_row
    assert sha256 == hashlib.sha256(corpus_a.read_bytes()).hexdigest()
    assert pattern == byte_tokenizer().pattern
    assert json.loads(specials_json) == SPECIALS
    assert Path(path) == corpus_a.resolve()
    assert size == corpus_a.stat().st_size
    assert distinct == len(counts)
    assert total == sum(counts.values())
    assert dict(query(db, "SELECT pretoken, count FROM pretoken_counts WHERE corpus_id = ?", (corpus_id,))) == counts

    (row,) = query(db, "SELECT id, name, version, vocab_size, special_tokens, merge_rule, corpus_id, source FROM tokenizers")
    tok_id, name, version, vocab_size, specials_json, merge_rule, tok_corpus, source = row
    assert (name, version, f"{name}@{version}") == ("ts", 1, ref)
    assert vocab_size == len(vocab) == 400
    assert json.loads(specials_json) == SPECIALS
    assert merge_rule == "pair"
    assert tok_corpus == corpus_id
    assert source == "trained"
    assert dict(query(db, "SELECT token_id, token FROM vocab WHERE tokenizer_id = ?", (tok_id,))) == vocab
    stored_merges = query(db, 'SELECT rank, "left", "right", result_id FROM merges WHERE tokenizer_id = ? ORDER BY rank', (tok_id,))
    id_of = {token: token_id for token_id, token in vocab.items()}
    assert stored_merges == [(rank, left, right, id_of[left + right]) for rank, (left, right) in enumerate(merges)]


def test_foreign_keys_and_unique_constraints_are_enforced(store, db):
    ref = store.save("t", small_tokenizer())
    tid = tokenizer_id(db, "t", version_of(ref))
    if store.is_sqlite:
        with store.engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1

    def fails(statement: str, **params) -> None:
        # (bytes as parameters: SQLite's x'61' is a bit string to PostgreSQL)
        with pytest.raises(sqlalchemy.exc.IntegrityError):
            with store.engine.begin() as connection:
                connection.execute(sql(statement), {"zero": b"\x00", "a": b"a", "b": b"b", **params})

    # a vocab row / merge / tokenizer pointing nowhere
    fails("INSERT INTO vocab (tokenizer_id, token_id, token, kind, text) VALUES (999999, 0, :zero, 'byte', 'a')")
    fails("""INSERT INTO merges (tokenizer_id, rank, "left", "right", result_id) VALUES (999999, 0, :a, :b, 0)""")
    fails("""INSERT INTO merges (tokenizer_id, rank, "left", "right", result_id) VALUES (:t, 1000, :a, :b, 999999)""", t=tid)
    fails(
        "INSERT INTO tokenizers (name, version, created_at, vocab_size, pattern, special_tokens, merge_rule, corpus_id, source)"
        " VALUES ('x', 1, '2020-01-01 00:00:00', 256, 'p', '[]', 'pair', 999999, 's')"
    )
    fails("INSERT INTO pretoken_counts (corpus_id, pretoken, count) VALUES (999999, :a, 1)")
    # unique (name, version)
    fails(
        "INSERT INTO tokenizers (name, version, created_at, vocab_size, pattern, special_tokens, merge_rule, source)"
        " VALUES ('t', :v, '2020-01-01 00:00:00', 256, 'p', '[]', 'pair', 's')",
        v=version_of(ref),
    )
    # unique (tokenizer, token bytes): the byte 'a' again under a new id
    fails("INSERT INTO vocab (tokenizer_id, token_id, token, kind, text) VALUES (:t, 999999, :a, 'other', 'a')", t=tid)
    # the same statements with valid values do work (so the failures above are the constraints)
    with store.engine.begin() as connection:
        connection.execute(
            sql("INSERT INTO vocab (tokenizer_id, token_id, token, kind, text) VALUES (:t, 999999, :token, 'other', 'abcdef')"),
            {"t": tid, "token": b"abcdef"},
        )
    assert query(db, "SELECT token FROM vocab WHERE tokenizer_id = ? AND token_id = 999999", (tid,)) == [(b"abcdef",)]


def test_a_corpus_in_use_cannot_be_deleted(store, db, corpus_a):
    store.train(corpus_a, "ts", 300, SPECIALS, workers=1)
    with pytest.raises(sqlalchemy.exc.IntegrityError):
        with store.engine.begin() as connection:
            connection.execute(sql("DELETE FROM corpora"))
    assert len(query(db, "SELECT id FROM corpora")) == 1


def expected_vocab_readable(name: str, version: int, tokenizer: Tokenizer, db: Path | PostgresDatabase) -> list[tuple]:
    kinds = expected_kinds(tokenizer)
    return sorted(
        (name, version, token_id, kinds[token_id], readable(token, db), token.hex().upper())
        for token_id, token in tokenizer.vocab.items()
    )


def expected_merges_readable(name: str, version: int, tokenizer: Tokenizer, db: Path | PostgresDatabase) -> list[tuple]:
    def text(token: bytes) -> str:
        return readable(token, db)

    return [(name, version, rank, text(left), text(right), text(left + right)) for rank, (left, right) in enumerate(tokenizer.merges)]


def test_readable_views_of_a_hand_made_tokenizer(store, db):
    tokenizer = small_tokenizer()
    store.save("other", byte_tokenizer([(b"a", b"b")]))  # rows that must not show up
    ref = store.save("small", tokenizer)
    version = version_of(ref)
    rows = query(db, "SELECT name, version, id, kind, token, token_hex FROM vocab_readable WHERE name = 'small' ORDER BY id")
    assert rows == expected_vocab_readable("small", version, tokenizer, db)
    kinds = Counter(row[3] for row in rows)
    assert kinds == {"special": 1, "byte": 256, "merge": 6, "other": 1}
    assert "\ufffd" in dict((row[2], row[4]) for row in rows)[256 + 3]  # b"\xe4\xb8" is half a character
    merges = query(db, 'SELECT name, version, rank, "left", "right", result FROM merges_readable WHERE name = ? ORDER BY rank', ("small",))
    assert merges == expected_merges_readable("small", version, tokenizer, db)


def test_readable_views_of_a_trained_tokenizer(store, db, corpus_b):
    (ref,) = store.train(corpus_b, "de", 500, SPECIALS, workers=1)
    tokenizer = store.load(ref)
    rows = query(db, "SELECT name, version, id, kind, token, token_hex FROM vocab_readable WHERE name = 'de' ORDER BY id")
    assert rows == expected_vocab_readable("de", version_of(ref), tokenizer, db)
    merges = query(db, 'SELECT name, version, rank, "left", "right", result FROM merges_readable ORDER BY rank')
    assert merges == expected_merges_readable("de", version_of(ref), tokenizer, db)


def sql_page_queries() -> list[str]:
    """The SQL statements of docs/howto/sql.md ("The store, in SQL"), verbatim."""
    page = (REPO_ROOT / "docs" / "howto" / "sql.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sql\n(.*?)```", page, flags=re.S)
    assert blocks, "docs/howto/sql.md has no ```sql block"
    statements = [statement.strip() for block in blocks for statement in block.split(";") if statement.strip()]
    return ["\n".join(line for line in statement.splitlines() if not line.lstrip().startswith("--")) for statement in statements]


def test_sql_page_queries(store, db, corpus_a, corpus_b):
    """The three queries of docs/howto/sql.md, run verbatim on a store holding stdlib@1 and stdlib@2 (the
    names they use), trained on different corpora."""
    longest_sql, not_shared_sql, top_pretokens_sql = sql_page_queries()
    assert store.train(corpus_a, "stdlib", 420, SPECIALS, workers=1) == ["stdlib@1"]
    assert store.train(corpus_b, "stdlib", 400, SPECIALS, workers=1) == ["stdlib@2"]
    store.train(corpus_b, "other", 450, [], workers=1)  # rows the queries must leave out
    vocab_1, merges_1 = train_bpe(corpus_a, 420, SPECIALS, workers=1)
    vocab_2, merges_2 = train_bpe(corpus_b, 400, SPECIALS, workers=1)

    # the 10 longest tokens of stdlib@2
    expected = sorted(vocab_2.items(), key=lambda item: (-len(item[1]), item[0]))[:10]
    assert query(db, longest_sql) == [(i, readable(t, db), len(t)) for i, t in expected]

    # the merges of stdlib@2 that stdlib@1 does not have, at any rank
    in_1 = set(merges_1)
    expected = [
        (rank, readable(left, db), readable(right, db))
        for rank, (left, right) in enumerate(merges_2)
        if (left, right) not in in_1
    ]
    assert expected and len(expected) < len(merges_2)  # the check means something
    assert query(db, not_shared_sql) == expected

    # the 20 most frequent pre-tokens of the corpus of stdlib@1 (ties in any order)
    counts = reference_pretoken_counts(read_text(corpus_a), SPECIALS)
    rows = query(db, top_pretokens_sql)
    assert [count for _, count in rows] == sorted(counts.values(), reverse=True)[:20]
    for pretoken, count in rows:
        assert counts[pretoken] == count, pretoken


# -- 4. versions, references, list / info / delete ------------------------------------------------


def test_versions_count_up_and_name_means_latest(store):
    tokenizers = [byte_tokenizer(merges) for merges in ([], [(b"a", b"b")], [(b"a", b"b"), (b"c", b"d")])]
    refs = [store.save("t", tok) for tok in tokenizers]
    assert refs == ["t@1", "t@2", "t@3"]
    store.save("u", tokenizers[0])
    assert [info.ref for info in store.list()] == ["t@1", "t@2", "t@3", "u@1"]
    assert [info.ref for info in store.list("t")] == ["t@1", "t@2", "t@3"]
    assert store.refs() == ["t@1", "t@2", "t@3", "u@1"]
    assert_same_tokenizer(store.load("t"), tokenizers[2])
    for i, tok in enumerate(tokenizers):
        assert_same_tokenizer(store.load(f"t@{i + 1}"), tok)
        info = store.info(f"t@{i + 1}")
        assert (info.name, info.version, info.vocab_size, info.num_merges) == ("t", i + 1, tok.vocab_size, len(tok.merges))
    assert store.info("t").ref == "t@3"
    json.dumps(store.info("t").to_dict())

    assert store.delete("t@2") == "t@2"
    assert store.refs() == ["t@1", "t@3", "u@1"]
    assert store.info("t").version == 3
    assert store.delete("t") == "t@3"  # the latest
    assert store.info("t").version == 1
    assert store.refs() == ["t@1", "u@1"]


def test_versions_are_not_reused_after_deleting_the_latest(store):
    tok = small_tokenizer()
    assert [store.save("t", tok) for _ in range(3)] == ["t@1", "t@2", "t@3"]
    store.delete("t@3")
    ref = store.save("t", tok)
    assert ref == "t@4", f"t@3 was deleted, yet the next save was stored as {ref}: 't@3' now names another tokenizer"


def test_versions_are_not_reused_after_deleting_every_version(store):
    tok = small_tokenizer()
    store.save("t", tok), store.save("t", tok)
    store.delete("t@1"), store.delete("t@2")
    ref = store.save("t", tok)
    assert version_of(ref) > 2, f"t@1 and t@2 were deleted, yet the next save was stored as {ref}"


def test_unknown_name_lists_the_names(store, db):
    for name in ["alpha", "beta", "gamma.v2"]:
        store.save(name, small_tokenizer())
    for call in (store.load, store.info, store.delete, lambda ref: store.diff("alpha", ref)):
        with pytest.raises(TokenizerNotFoundError) as error:
            call("delta")
        message = str(error.value)
        assert "delta" in message
        for name in ["alpha", "beta", "gamma.v2"]:
            assert name in message
    assert isinstance(error.value, LookupError)
    for where in (store.url, db):  # a URL goes through Store, a plain path through the fast loader first
        with pytest.raises(TokenizerNotFoundError, match="alpha"):
            Tokenizer.from_db(where, "delta")


def test_unknown_name_in_an_empty_store(store):
    with pytest.raises(TokenizerNotFoundError, match="nothing|empty|none"):
        store.load("x")


def test_unknown_version_lists_the_versions(store):
    tok = small_tokenizer()
    for _ in range(4):
        store.save("t", tok)
    store.delete("t@2")
    for ref in ["t@2", "t@7"]:
        with pytest.raises(TokenizerNotFoundError) as error:
            store.load(ref)
        message = str(error.value)
        listed = [int(n) for n in re.findall(r"\d+", message.rpartition("version")[2])]
        assert listed == [1, 3, 4], message


@pytest.mark.parametrize("ref", ["a@b", "a@0", "@3", "a b", "", "a@", "a@-1", "a@1@2", "a@1.0", " a", "a\n"])
def test_invalid_references_are_refused(store, db, ref):
    store.save("a", small_tokenizer())
    for call in (store.load, store.info, store.delete, lambda ref: Tokenizer.from_db(db, ref)):
        with pytest.raises(InvalidReferenceError):
            call(ref)
    assert store.refs() == ["a@1"]


@pytest.mark.parametrize("ref", ["a@\u00b2", "a@\u0661", "a@\uff11"], ids=["superscript-2", "arabic-indic-1", "fullwidth-1"])
def test_versions_must_be_ascii_digits(store, db, ref):
    """``str.isdigit`` accepts these; a version is an ASCII number."""
    store.save("a", small_tokenizer())
    with pytest.raises(InvalidReferenceError):
        store.load(ref)
    with pytest.raises(InvalidReferenceError):
        Tokenizer.from_db(db, ref)


@pytest.mark.parametrize("name", ["a b", "a@1", "", "x" * 201, "tab\tname"])
def test_invalid_names_are_refused_when_saving_and_training(store, corpus_b, name):
    with pytest.raises(InvalidReferenceError):
        store.save(name, small_tokenizer())
    with pytest.raises(InvalidReferenceError):
        store.train(corpus_b, name, 300, workers=1)
    assert store.refs() == []


def test_deleting_keeps_the_corpus_while_a_tokenizer_uses_it(store, db, corpus_a, tmp_path):
    refs = store.train(corpus_a, "a", [300, 320], SPECIALS, workers=1)
    copy = shutil.copy(corpus_a, tmp_path / "copy.txt")
    (other,) = store.train(copy, "b", 310, SPECIALS, workers=1)  # same content: same corpus row
    assert len(query(db, "SELECT id FROM corpora")) == 1
    n_counts = len(query(db, "SELECT * FROM pretoken_counts"))
    assert n_counts == len(reference_pretoken_counts(read_text(corpus_a), SPECIALS))
    for ref in [refs[0], other]:
        store.delete(ref)
        assert len(query(db, "SELECT id FROM corpora")) == 1
        assert len(query(db, "SELECT * FROM pretoken_counts")) == n_counts
        assert store.info(refs[1]).corpus_sha256 == hashlib.sha256(corpus_a.read_bytes()).hexdigest()
    # the vocab and merges of the deleted tokenizers are gone, the remaining one's are whole
    remaining = tokenizer_id(db, "a", version_of(refs[1]))
    assert {row[0] for row in query(db, "SELECT DISTINCT tokenizer_id FROM vocab")} == {remaining}
    assert {row[0] for row in query(db, "SELECT DISTINCT tokenizer_id FROM merges")} == {remaining}
    store.delete(refs[1])
    assert table_rows(db) == {table: [] for table in TABLES}


def test_deleting_a_tokenizer_keeps_other_corpora(store, db, corpus_a, corpus_b):
    (ref_a,) = store.train(corpus_a, "a", 300, SPECIALS, workers=1)
    (ref_b,) = store.train(corpus_b, "b", 300, SPECIALS, workers=1)
    store.delete(ref_a)
    ((sha,),) = query(db, "SELECT sha256 FROM corpora")
    assert sha == hashlib.sha256(corpus_b.read_bytes()).hexdigest()
    assert dict(query(db, "SELECT pretoken, count FROM pretoken_counts")) == reference_pretoken_counts(read_text(corpus_b), SPECIALS)


# -- 5. training into the store -------------------------------------------------------------------


def test_several_vocab_sizes_from_one_run(store, corpus_a):
    sizes = [400, 300, 350, 400]
    refs = store.train(corpus_a, "multi", sizes, SPECIALS, workers=1)
    assert refs == [f"multi@{v}" for v in range(1, len(sizes) + 1)]
    loaded = [store.load(ref) for ref in refs]
    for size, ref, tok in zip(sizes, refs, loaded):
        vocab, merges = train_bpe(corpus_a, size, SPECIALS, workers=1)
        assert tok.vocab == vocab
        assert tok.merges == merges
        assert tok.special_tokens == SPECIALS
        assert store.info(ref).vocab_size == size
        assert store.info(ref).training_params["vocab_size"] == size
    by_size = sorted(zip(sizes, loaded), key=lambda item: item[0])
    for (_, smaller), (_, larger) in zip(by_size, by_size[1:]):
        assert larger.merges[: len(smaller.merges)] == smaller.merges
    assert store.train(corpus_a, "single", 300, SPECIALS, workers=1) == ["single@1"]


def test_training_on_the_same_content_reuses_the_pretoken_counts(store, db, corpus_a, tmp_path, monkeypatch):
    expected = {specials: train_bpe(corpus_a, 330, list(specials), workers=1) for specials in [(ENDOFTEXT,), (ENDOFTEXT, "<pad>"), ()]}
    calls = []
    original = bpestore.train.trainer.count_corpus

    def counting(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(bpestore.train.trainer, "count_corpus", counting)
    store.train(corpus_a, "a", 300, SPECIALS, workers=1)
    assert len(calls) == 1  # the wrapper does intercept the store's pre-tokenization

    copy = Path(shutil.copy(corpus_a, tmp_path / "elsewhere.txt"))
    (ref,) = store.train(copy, "b", 330, SPECIALS, workers=1)
    assert len(calls) == 1, "the same content with the same special tokens was pre-tokenized again"
    assert (store.load(ref).vocab, store.load(ref).merges) == expected[(ENDOFTEXT,)]
    assert store.info(ref).training_params["reused_pretoken_counts"] is True
    assert len(query(db, "SELECT id FROM corpora")) == 1

    (ref,) = store.train(copy, "c", 330, [ENDOFTEXT, "<pad>"], workers=1)
    assert len(calls) == 2, "other special tokens cut the corpus differently: it must be pre-tokenized again"
    assert len(query(db, "SELECT id FROM corpora")) == 2
    assert (store.load(ref).vocab, store.load(ref).merges) == expected[(ENDOFTEXT, "<pad>")]
    assert store.info(ref).training_params["reused_pretoken_counts"] is False

    (ref,) = store.train(copy, "d", 330, [], workers=1)
    assert len(calls) == 3
    assert (store.load(ref).vocab, store.load(ref).merges) == expected[()]

    corpus_a.write_bytes(corpus_a.read_bytes() + b" one more line\n")  # other content, same path
    store.train(corpus_a, "e", 300, SPECIALS, workers=1)
    assert len(calls) == 4


class Boom(Exception):
    pass


CORPUS_TABLES = ("corpora", "pretoken_counts")


def assert_no_tokenizer_and_only_complete_counts(db, before, corpus) -> bool:
    """A failed training leaves no tokenizer nor part of one; it may leave the corpus's pre-token
    counts, saved before merging in a transaction of their own (issue 15: an interrupted training
    keeps them for the next run), but then complete. True if it left them."""
    after = table_rows(db)
    assert {t: rows for t, rows in after.items() if t not in CORPUS_TABLES} == {
        t: rows for t, rows in before.items() if t not in CORPUS_TABLES
    }
    assert set(before["corpora"]) <= set(after["corpora"])
    new = [row for row in after["corpora"] if row not in before["corpora"]]
    assert len(new) <= 1
    if not new:
        assert after["pretoken_counts"] == before["pretoken_counts"]
        return False
    corpus_id = new[0][0]
    kept = {pretoken: count for cid, pretoken, count in after["pretoken_counts"] if cid == corpus_id}
    assert kept == reference_pretoken_counts(read_text(corpus), SPECIALS)
    return True


def forget_new_corpora(db, before) -> None:
    """Deletes the corpora (and their counts) that ``before`` did not have."""
    old_ids = [row[0] for row in before["corpora"]]
    if isinstance(db, PostgresDatabase):
        db.execute("DELETE FROM corpora WHERE NOT (id = ANY(%s))", (old_ids,))
        return
    connection = sqlite3.connect(db)
    try:
        connection.execute("PRAGMA foreign_keys = ON")
        connection.execute(f"DELETE FROM corpora WHERE id NOT IN ({','.join('?' * len(old_ids))})", old_ids)
        connection.commit()
    finally:
        connection.close()


def assert_failed_training_left_nothing(store, db, before, corpus, raised):
    assert_no_tokenizer_and_only_complete_counts(db, before, corpus)
    # the store still works, through the same Store object and a new one
    refs = store.train(corpus, "new", [300, 310], SPECIALS, workers=1)
    assert refs == ["new@1", "new@2"]
    assert store.load("new@2").merges == train_bpe(corpus, 310, SPECIALS, workers=1)[1]
    with Store(db) as again:
        assert again.refs() == ["keep@1", "new@1", "new@2"]
    store.delete("new@1"), store.delete("new@2")
    assert table_rows(db) == before


@pytest.fixture
def store_with_data(store, db, corpus_b):
    store.train(corpus_b, "keep", 300, SPECIALS, workers=1)
    return store, db, table_rows(db)


@pytest.mark.parametrize("exception", [Boom, KeyboardInterrupt])
def test_failure_after_the_first_tokenizer_was_inserted(store_with_data, corpus_a, monkeypatch, exception):
    store, db, before = store_with_data
    original = Store._insert_tokenizer
    inserted = []

    def insert_then_fail(self, *args, **kwargs):
        if inserted:
            raise exception("injected")
        inserted.append(original(self, *args, **kwargs))
        return inserted[-1]

    monkeypatch.setattr(Store, "_insert_tokenizer", insert_then_fail)
    with pytest.raises(exception):
        store.train(corpus_a, "new", [300, 310], SPECIALS, workers=1)
    assert inserted == ["new@1"]  # the failure did come after a tokenizer was written
    monkeypatch.undo()
    assert_failed_training_left_nothing(store, db, before, corpus_a, exception)


@pytest.mark.slow  # (over 2 s here: the full suite's)
def test_failure_at_every_statement_of_the_write(store_with_data, corpus_a, monkeypatch):
    store, db, before = store_with_data
    original = Connection.execute
    statements: list[str] = []

    def recording(self, statement, *args, **kwargs):
        statements.append(str(statement).split()[0])
        return original(self, statement, *args, **kwargs)

    # A dry run on another database, to learn how many statements a training executes.
    with ExitStack() as stack:
        dry_db = stack.enter_context(fresh_database()) if isinstance(db, PostgresDatabase) else db.parent / "dry.db"
        dry = stack.enter_context(Store(dry_db))
        monkeypatch.setattr(Connection, "execute", recording)
        dry.train(corpus_a, "new", [300, 310], SPECIALS, workers=1)
        monkeypatch.undo()
    # corpus, its files, and per tokenizer: tokenizer, vocab, merges, packed copy (counts go by
    # the driver's own calls: COPY on PostgreSQL, staged then copied on SQLite, where
    # test_store_bulk's failure tests fail them; so do vocab and merges by COPY on PostgreSQL,
    # where test_failed_save_leaves_nothing fails them)
    assert statements.count("INSERT") >= (4 if store.is_postgresql else 6)

    for fail_at in range(1, len(statements) + 1):
        for exception in (Boom, KeyboardInterrupt):
            count = 0

            def failing(self, statement, *args, **kwargs):
                nonlocal count
                count += 1
                if count == fail_at:
                    raise exception(f"injected at statement {fail_at}")
                return original(self, statement, *args, **kwargs)

            monkeypatch.setattr(Connection, "execute", failing)
            with pytest.raises(exception):
                store.train(corpus_a, "new", [300, 310], SPECIALS, workers=1)
            monkeypatch.undo()
            # Counting is done again each time, so that every statement of the dry run is reached.
            if assert_no_tokenizer_and_only_complete_counts(db, before, corpus_a):
                forget_new_corpora(db, before)
            assert table_rows(db) == before, f"{exception.__name__} at statement {fail_at} ({statements[fail_at - 1]})"
    assert_failed_training_left_nothing(store, db, before, corpus_a, None)


def test_interrupt_while_learning_merges(store_with_data, corpus_a, monkeypatch):
    store, db, before = store_with_data
    original = _engine.learn_merges

    def interrupted(counts, max_merges, progress=None, **kwargs):
        # Ctrl-C reaches the engine's merge loop as an exception from its progress callback.
        def interrupt(merges_done):
            raise KeyboardInterrupt

        return original(counts, max_merges, interrupt, **kwargs)

    monkeypatch.setattr(bpestore.train.trainer, "engine_learn_merges", interrupted)
    with pytest.raises(KeyboardInterrupt):
        store.train(corpus_a, "new", [300, 310], SPECIALS, workers=1)
    monkeypatch.undo()
    assert_failed_training_left_nothing(store, db, before, corpus_a, KeyboardInterrupt)


@pytest.mark.parametrize("table", ["vocab", "merges"])
def test_failed_save_leaves_nothing(store_with_data, monkeypatch, table):
    store, db, before = store_with_data
    original = Store._bulk_insert
    written = []

    def fail_after_the_rows(self, connection, into, rows):
        written.append(original(self, connection, into, rows))
        if into.name == table:  # its rows are in (by INSERT, or COPY on PostgreSQL): now fail
            raise Boom

    monkeypatch.setattr(Store, "_bulk_insert", fail_after_the_rows)
    with pytest.raises(Boom):
        store.save("t", small_tokenizer())
    monkeypatch.undo()
    assert written[-1] == (len(small_tokenizer().vocab) if table == "vocab" else len(small_tokenizer().merges))
    assert table_rows(db) == before
    assert store.save("t", small_tokenizer()) == "t@1"


# -- 6. loading ---------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)])
def saved_and_loaded(request, tmp_path_factory):
    """A tokenizer trained with two special tokens (one containing a space) and its stored copy,
    loaded every way."""
    tmp = tmp_path_factory.mktemp("load")
    corpus = write_corpus(tmp / "corpus.txt", corpus_a_text().replace("\n\n", "\n<| sep |>\n"))
    if request.param == "postgresql":
        with fresh_database() as url:
            yield saved_and_loaded_from(url, corpus)
    else:
        yield saved_and_loaded_from(tmp / "store.db", corpus)


def saved_and_loaded_from(db: Path | PostgresDatabase, corpus: Path):
    specials = [ENDOFTEXT, "<| sep |>"]
    vocab, merges = train_bpe(corpus, 600, specials, workers=1)
    original = Tokenizer(vocab, merges, specials)
    with Store(db) as store:
        store.save("older", byte_tokenizer())
        store.save("tok", Tokenizer(*bpestore.train.trainer.vocab_and_merges(specials, merges[:10]), specials))
        ref = store.save("tok", original)
        via_store = store.load("tok")
    via_db = Tokenizer.from_db(db, "tok")
    via_ref = Tokenizer.from_db(str(db), ref)
    via_url = Tokenizer.from_db(db if isinstance(db, PostgresDatabase) else f"sqlite:///{db}", ref)
    return original, [via_store, via_db, via_ref, via_url], db


def test_loaded_tokenizer_equals_the_saved_one(saved_and_loaded):
    original, loaded, db = saved_and_loaded
    for tok in loaded:
        assert_same_tokenizer(tok, original)
    older = Tokenizer.from_db(db, "tok@1")
    assert older.merges == original.merges[:10]
    assert older.special_tokens == original.special_tokens


def test_loaded_tokenizer_encodes_the_fixtures_like_the_saved_one(saved_and_loaded):
    original, loaded, _ = saved_and_loaded
    for name in ["address.txt", "german.txt", "tinystories_sample.txt", "corpus.en"]:
        text = read_text(shared_file("fixtures", name))
        expected = original.encode(text)
        for tok in loaded:
            assert tok.encode(text) == expected
            assert tok.decode(expected) == text
    assert original.special_ids[ENDOFTEXT] in original.encode(read_text(shared_file("fixtures", "tinystories_sample.txt")))


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=texts())
def test_loaded_tokenizer_encodes_generated_text_like_the_saved_one(saved_and_loaded, text):
    original, loaded, _ = saved_and_loaded
    expected = original.encode(text)
    for tok in loaded:
        assert tok.encode(text) == expected
    assert loaded[0].decode(expected) == text


@pytest.mark.parametrize("merge_rule", ["pair", "token"])
def test_pattern_and_merge_rule_survive_the_store(store, merge_rule):
    base = small_tokenizer()
    tok = Tokenizer(base.vocab, base.merges, ["<a>", "<b>"], pattern=r"\S+|\s+", merge_rule=merge_rule)
    ref = store.save("custom", tok)
    loaded = store.load(ref)
    assert_same_tokenizer(loaded, tok)
    text = "hello 中 <a><b> hell world<b>"
    assert loaded.encode(text) == tok.encode(text)


@pytest.mark.slow  # (over 2 s here with its PostgreSQL twin: the full suite's)
def test_gpt2_from_the_fixture_files_saves_and_loads(store, db):
    vocab_path, merges_path = shared_file("fixtures", "gpt2_vocab.json"), shared_file("fixtures", "gpt2_merges.txt")
    from gpt2_tiktoken import gpt2_encoding, gpt2_vocab_and_merges

    gpt2 = Tokenizer.from_files(vocab_path, merges_path, [ENDOFTEXT])
    ref = store.save("gpt2", gpt2)
    loaded = Tokenizer.from_db(db, "gpt2")
    assert_same_tokenizer(loaded, gpt2)
    vocab, merges = gpt2_vocab_and_merges()  # read independently of bpestore
    assert loaded.vocab == vocab and loaded.merges == merges
    assert loaded.special_ids == {ENDOFTEXT: 50256}
    encoding = gpt2_encoding()
    for name in ["address.txt", "german.txt", "tinystories_sample.txt"]:
        text = read_text(shared_file("fixtures", name))
        assert loaded.encode(text) == encoding.encode(text, allowed_special="all") == gpt2.encode(text)
    rows = query(db, "SELECT name, version, id, kind, token, token_hex FROM vocab_readable ORDER BY id")
    assert rows == expected_vocab_readable("gpt2", version_of(ref), gpt2, db)
    assert query(db, "SELECT count(*) FROM merges_readable") == [(len(merges),)]
    (info,) = store.list()
    assert (info.vocab_size, info.num_merges, info.special_tokens, info.corpus_sha256) == (50257, 50000, [ENDOFTEXT], None)


# -- 7. diff ------------------------------------------------------------------------------------


def check_diff(result, tok_a: Tokenizer, tok_b: Tokenizer, corpus: Path | None) -> None:
    set_a, set_b = set(tok_a.vocab.values()), set(tok_b.vocab.values())
    assert (result.vocab_size_a, result.vocab_size_b) == (len(tok_a.vocab), len(tok_b.vocab))
    assert result.shared_tokens == len(set_a & set_b)
    assert result.only_a == sorted((i, t) for i, t in tok_a.vocab.items() if t not in set_b)
    assert result.only_b == sorted((i, t) for i, t in tok_b.vocab.items() if t not in set_a)
    prefix = next((i for i, (x, y) in enumerate(zip(tok_a.merges, tok_b.merges)) if x != y), min(len(tok_a.merges), len(tok_b.merges)))
    assert result.common_merge_prefix == prefix
    assert result.shared_merges == len(set(tok_a.merges) & set(tok_b.merges))
    assert (result.merges_a, result.merges_b) == (len(tok_a.merges), len(tok_b.merges))
    first = result.first_different_merge
    if tok_a.merges == tok_b.merges:
        assert first is None
    else:
        assert first["rank"] == prefix

        def shown(merges):
            if prefix >= len(merges):
                return None
            return [part.decode("utf-8", errors="backslashreplace") for part in merges[prefix]]

        assert (first["a"], first["b"]) == (shown(tok_a.merges), shown(tok_b.merges))
    assert result.special_tokens_only_a == [t for t in tok_a.special_tokens if t not in tok_b.special_tokens]
    assert result.special_tokens_only_b == [t for t in tok_b.special_tokens if t not in tok_a.special_tokens]
    assert result.same_pattern == (tok_a.pattern == tok_b.pattern)
    assert (result.pattern_a, result.pattern_b) == (tok_a.pattern, tok_b.pattern)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["shared_tokens"] == result.shared_tokens
    assert [entry["id"] for entry in data["only_a"]] == [i for i, _ in result.only_a]
    assert [entry["id"] for entry in data["only_b"]] == [i for i, _ in result.only_b]
    if corpus is not None:
        text = read_text(corpus)
        size = corpus.stat().st_size
        assert (result.tokens_a, result.tokens_b) == (len(tok_a.encode(text)), len(tok_b.encode(text)))
        assert result.bytes_per_token_a == pytest.approx(size / len(tok_a.encode(text)))
        assert result.bytes_per_token_b == pytest.approx(size / len(tok_b.encode(text)))
        assert data["tokens_a"] == result.tokens_a and data["tokens_b"] == result.tokens_b
        assert data["bytes_per_token_a"] == pytest.approx(result.bytes_per_token_a)
        assert data["bytes_per_token_b"] == pytest.approx(result.bytes_per_token_b)
    else:
        assert result.tokens_a is None and result.tokens_b is None


def test_diff_of_two_vocab_sizes(store, corpus_a):
    ref_small, ref_large = store.train(corpus_a, "v", [320, 400], SPECIALS, workers=1)
    small, large = store.load(ref_small), store.load(ref_large)
    result = store.diff(ref_small, ref_large)
    check_diff(result, small, large, None)
    assert result.only_a == [] and len(result.only_b) == 80
    assert result.common_merge_prefix == len(small.merges)
    assert result.first_different_merge["a"] is None
    # "v" is the latest version; the diff names the versions it compared
    result = store.diff("v", "v@1", corpus=corpus_a)
    assert (result.a, result.b) == (ref_large, ref_small)
    check_diff(result, large, small, corpus_a)
    assert result.tokens_a < result.tokens_b  # more merges, fewer tokens


def test_diff_of_tokenizers_trained_on_different_corpora(store, corpus_a, corpus_b):
    (ref_a,) = store.train(corpus_a, "en", 400, SPECIALS, workers=1)
    (ref_b,) = store.train(corpus_b, "de", 450, [ENDOFTEXT, "<pad>"], workers=1)
    tok_a, tok_b = store.load(ref_a), store.load(ref_b)
    for corpus in (None, corpus_a, corpus_b):
        result = store.diff(ref_a, ref_b, corpus=corpus)
        check_diff(result, tok_a, tok_b, corpus)
    assert result.only_a and result.only_b and result.first_different_merge["a"] and result.first_different_merge["b"]
    assert result.special_tokens_only_b == ["<pad>"]
    assert result.same_pattern


def test_diff_shows_pattern_and_special_token_differences(store):
    base = small_tokenizer()
    ref_a = store.save("p", Tokenizer(base.vocab, base.merges, ["<x>", "<y>"]))
    ref_b = store.save("p", Tokenizer(base.vocab, list(reversed(base.merges[:3])), ["<y>", "<z>"], pattern=r"\S+|\s+"))
    result = store.diff(ref_a, ref_b)
    check_diff(result, store.load(ref_a), store.load(ref_b), None)
    assert not result.same_pattern
    assert (result.special_tokens_only_a, result.special_tokens_only_b) == (["<x>"], ["<z>"])


# -- 8. concurrency -----------------------------------------------------------------------------

# Each worker waits until all workers are ready (files in a directory), so that they really overlap.
BARRIER = """
import sys, time, json, traceback
from pathlib import Path
def barrier(directory, me, count):
    directory = Path(directory)
    (directory / f"ready-{me}").touch()
    deadline = time.monotonic() + 60
    while len(list(directory.glob("ready-*"))) < count:
        if time.monotonic() > deadline:
            raise SystemExit("barrier timeout")
        time.sleep(0.001)
"""

TRAINER = BARRIER + """
from bpestore import Store
db, corpus, me, count, rounds, open_first, barrier_dir = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6] == "1", sys.argv[7]
store = Store(db) if open_first else None
barrier(barrier_dir, me, count)
store = store or Store(db)
refs = []
for _ in range(rounds):
    refs += store.train(corpus, "shared", [300, 310], ["<|endoftext|>"], workers=1)
print(json.dumps(refs))
"""


def run_workers(tmp_path: Path, scripts: list[list[str]], timeout: float = 120) -> list[str]:
    (tmp_path / "barrier").mkdir(exist_ok=True)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    processes = [
        subprocess.Popen([sys.executable, "-c", *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for args in scripts
    ]
    outputs = []
    for process in processes:
        out, err = process.communicate(timeout=timeout)
        outputs.append((process.returncode, out, err))
    for returncode, out, err in outputs:
        assert returncode == 0, err[-1200:]
    return [out for _, out, _ in outputs]


def check_concurrent_training(db: Path | PostgresDatabase, outputs: list[str], rounds: int, corpus: Path) -> None:
    refs = [json.loads(out) for out in outputs]
    every = [ref for worker in refs for ref in worker]
    assert len(every) == len(set(every)) == 2 * rounds * len(outputs)
    with Store(db) as store:
        assert sorted(store.refs(), key=version_of) == [f"shared@{v}" for v in range(1, len(every) + 1)]
        assert set(store.refs()) == set(every)
        expected = {size: train_bpe(corpus, size, SPECIALS, workers=1)[1] for size in (300, 310)}
        for worker in refs:
            for ref_300, ref_310 in zip(worker[::2], worker[1::2]):
                assert store.load(ref_300).merges == expected[300]
                assert store.load(ref_310).merges == expected[310]
    assert len(query(db, "SELECT id FROM corpora")) == 1  # both trained the same content: one corpus row


@pytest.mark.slow
def test_two_processes_train_into_one_database(tmp_path, db, corpus_b):
    Store(db).close()
    barrier = tmp_path / "barrier"
    outputs = run_workers(tmp_path, [[TRAINER, str(db), str(corpus_b), me, "2", "3", "1", str(barrier)] for me in "ab"])
    check_concurrent_training(db, outputs, 3, corpus_b)


@pytest.mark.slow
def test_processes_create_a_new_database_at_once(tmp_path, db, corpus_b):
    """All open (and so create) the same new database at the same moment, then train into it:
    no error, no version lost or given twice, one corpus row. Eight writers on PostgreSQL (three
    on SQLite, where test_store_deployed runs more)."""
    workers = 8 if isinstance(db, PostgresDatabase) else 3
    barrier = tmp_path / "barrier"
    names = "abcdefgh"[:workers]
    outputs = run_workers(tmp_path, [[TRAINER, str(db), str(corpus_b), me, str(workers), "1", "0", str(barrier)] for me in names])
    check_concurrent_training(db, outputs, 1, corpus_b)


WRITER = BARRIER + """
from bpestore import Tokenizer
from bpestore import Store
db, rounds = sys.argv[1], int(sys.argv[2])
vocab = {b: bytes([b]) for b in range(256)}
merges, last = [], [bytes([65 + c]) for c in range(26)]
for i in range(2000):  # a tokenizer big enough that each save takes a while: 26 chains A+a+b+...
    left, right = last[i % 26], bytes([97 + (i // 26) % 26])
    merges.append((left, right)); vocab[len(vocab)] = last[i % 26] = left + right
store = Store(db)
barrier(sys.argv[3], "writer", 2)
refs = [store.save("w", Tokenizer(vocab, merges[: 1000 + n])) for n in range(rounds)]
(Path(sys.argv[3]) / "writer-done").touch()
print(json.dumps(refs))
"""

READER = BARRIER + """
from bpestore import Store
db = sys.argv[1]
store = Store(db, lock_timeout=0)  # readers must never wait for the writer: no retrying on a lock
barrier(sys.argv[2], "reader", 2)
seen, loads = [], 0
while not (Path(sys.argv[2]) / "writer-done").exists():
    refs = store.refs()
    seen.append(len(refs))
    if refs:
        tok = store.load(refs[-1])
        assert len(tok.merges) == 1000 + int(refs[-1].rpartition("@")[2]) - 1, (refs[-1], len(tok.merges))
        assert store.info(refs[-1]).num_merges == len(tok.merges)
        loads += 1
print(json.dumps({"seen": seen, "loads": loads}))
"""


@pytest.mark.slow
def test_reading_while_another_process_writes(tmp_path, db):
    Store(db).close()
    rounds = 25
    barrier = str(tmp_path / "barrier")
    writer, reader = run_workers(tmp_path, [[WRITER, str(db), str(rounds), barrier], [READER, str(db), barrier]])
    assert json.loads(writer) == [f"w@{v}" for v in range(1, rounds + 1)]
    report = json.loads(reader)
    seen = report["seen"]
    assert report["loads"] > 0
    assert seen == sorted(seen)
    assert len(set(seen)) >= 3, f"the reader saw too few of the writes happen ({sorted(set(seen))}): no real overlap"


OPENER = """
import os, sys
from bpestore import Store
db, stop = sys.argv[1], sys.argv[2]
Store(db).close()  # each last close checkpoints the WAL; each first open recovers it
print("opening", flush=True)
while not os.path.exists(stop):
    Store(db).close()
"""


@pytest.mark.slow
def test_a_reader_with_no_lock_timeout_opens_while_others_open_and_close(tmp_path):
    """Another process opening and closing a WAL store holds a lock for a moment each time (its
    recovery, its last close's checkpoint); that is no writer's lock, and a reader with
    lock_timeout=0 opens all the same (it failed with "another writer holds the store" about
    one open in ten while another process did this)."""
    db = tmp_path / "s.db"
    Store(db).close()
    stop = tmp_path / "stop"
    opener = subprocess.Popen([sys.executable, "-c", OPENER, str(db), str(stop)], stdout=subprocess.PIPE, text=True)
    try:
        assert opener.stdout.readline() == "opening\n"
        # A number of opens, not a time: all of them while the other process opens and closes
        # (it stops only when told, after them), however fast this machine is.
        for _ in range(200):
            Store(db, lock_timeout=0).close()
    finally:
        stop.touch()
        opener.communicate(timeout=60)
    assert opener.returncode == 0


# -- 9. paths and URLs --------------------------------------------------------------------------


def test_a_plain_path_is_a_sqlite_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for where in ["relative.db", tmp_path / "as_path.db", str(tmp_path / "as_str.db")]:
        with Store(where) as store:
            ref = store.save("t", small_tokenizer())
        path = tmp_path / where
        assert path.read_bytes()[:16] == b"SQLite format 3\x00"
        assert query(path, "SELECT name, version FROM tokenizers") == [("t", version_of(ref))]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["as_path.db", "as_str.db", "relative.db"]


@pytest.mark.parametrize("name", ["with space.db", "q?x.db", "p%20q.db", "h#x.db", "ünï.db"])
def test_plain_paths_with_url_characters(tmp_path, name):
    """A plain path is a file name, even with characters that mean something in URLs."""
    path = tmp_path / name
    with Store(path) as store:
        store.save("t", small_tokenizer())
    with Store(path) as store:  # open the existing file again
        assert store.refs() == ["t@1"]
    assert_same_tokenizer(Tokenizer.from_db(path, "t"), small_tokenizer())
    assert_same_tokenizer(Tokenizer.from_db(str(path), "t@1"), small_tokenizer())
    files = sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(("-wal", "-shm")))
    assert files == [name]
    assert query(path, "SELECT name FROM tokenizers") == [("t",)]


def test_sqlite_urls_work(tmp_path):
    path = tmp_path / "url.db"
    with Store(f"sqlite:///{path}") as store:
        ref = store.save("t", small_tokenizer())
    assert path.read_bytes()[:16] == b"SQLite format 3\x00"
    with Store(path) as store:  # the same database as a plain path
        assert store.refs() == [ref]
        assert_same_tokenizer(store.load(ref), small_tokenizer())
    assert_same_tokenizer(Tokenizer.from_db(f"sqlite:///{path}", "t"), small_tokenizer())


def test_in_memory_sqlite_url(tmp_path):
    with Store("sqlite://") as store:
        ref = store.save("t", small_tokenizer())
        assert_same_tokenizer(store.load(ref), small_tokenizer())
    assert list(tmp_path.iterdir()) == []


def test_closing_leaves_no_wal_files(tmp_path):
    path = tmp_path / "store.db"
    with Store(path) as store:
        store.save("t", small_tokenizer())
        store.load("t")
    assert [p.name for p in tmp_path.iterdir()] == ["store.db"]


def test_loading_leaves_no_wal_files(tmp_path):
    path = tmp_path / "store.db"
    with Store(path) as store:
        store.save("t", small_tokenizer())
    assert_same_tokenizer(Tokenizer.from_db(path, "t"), small_tokenizer())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store.db"]


def test_missing_directory_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        Store(tmp_path / "no" / "such" / "dir" / "store.db")
    assert list(tmp_path.iterdir()) == []
