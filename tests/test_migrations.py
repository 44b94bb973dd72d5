"""Tests of the schema migrations: creating a store at head, upgrading an older database, refusing
(and leaving byte-for-byte untouched) databases that are too new or not bpestore's, and agreement
between the SQLAlchemy models and the alembic migrations.

Revisions are read here with alembic's own ``ScriptDirectory`` and the plain ``sqlite3`` module,
not with bpestore's helpers.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Column, Integer, MetaData, create_engine

import bpestore.store.migrate
import bpestore.store.schema_revision
from bpestore import Tokenizer, formats
from bpestore.store import schema
from bpestore.errors import DatabaseTooNewError, NotABpestoreDatabaseError
from bpestore.store.migrate import migrations_dir
from bpestore import Store
from conftest import REPO_ROOT

TABLES = {"corpora", "pretoken_counts", "tokenizers", "vocab", "merges"}
VIEWS = {"vocab_readable", "merges_readable"}


def head() -> str:
    return ScriptDirectory(str(migrations_dir())).get_current_head()


def alembic_config(db: Path, script_location: Path | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(script_location or migrations_dir()))
    config.set_main_option("sqlalchemy.url", f"sqlite:///{db}")
    return config


def revision_of(db: Path) -> list[tuple]:
    connection = sqlite3.connect(db)
    try:
        return connection.execute("SELECT version_num FROM alembic_version").fetchall()
    finally:
        connection.close()


def objects(db: Path, kind: str) -> set[str]:
    connection = sqlite3.connect(db)
    try:
        return {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = ?", (kind,))}
    finally:
        connection.close()


def schema_sql(db: Path) -> list[tuple]:
    connection = sqlite3.connect(db)
    try:
        return sorted(connection.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall(), key=repr)
    finally:
        connection.close()


def snapshot(directory: Path) -> dict[str, str]:
    """Every file in ``directory`` by name, with the sha256 of its bytes."""
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(directory.iterdir()) if path.is_file()}


def sample_tokenizer() -> Tokenizer:
    vocab = {b: bytes([b]) for b in range(256)}
    merges = [(b"t", b"h"), (b"th", b"e"), (b" ", b"the")]
    for left, right in merges:
        vocab[len(vocab)] = left + right
    return Tokenizer(vocab, merges, ["<|endoftext|>"])


def assert_same_tokenizer(a: Tokenizer, b: Tokenizer) -> None:
    assert (a.vocab, a.merges, a.special_tokens, a.pattern, a.merge_rule) == (b.vocab, b.merges, b.special_tokens, b.pattern, b.merge_rule)


# -- creating and upgrading -----------------------------------------------------------------------


def test_the_migrations_have_one_head_and_the_code_knows_it():
    script = ScriptDirectory(str(migrations_dir()))
    assert len(script.get_heads()) == 1
    assert bpestore.store.schema_revision.SCHEMA_REVISION == script.get_current_head()
    assert migrations_dir() == REPO_ROOT / "bpestore" / "store" / "migrations"  # in a checkout, the repository's


@pytest.mark.slow
def test_the_alembic_command_runs_the_migrations_from_the_repositorys_root(tmp_path):
    """The design's top-level ``migrations/`` (a link to the package's, which the wheel carries)
    with the root's alembic.ini: ``alembic upgrade head`` there makes a store bpestore opens."""
    assert (REPO_ROOT / "migrations").resolve() == migrations_dir()
    db = tmp_path / "scratch.db"
    alembic = [sys.executable, "-m", "alembic", "-x", f"url=sqlite:///{db}"]
    for arguments in (["upgrade", "head"], ["current"]):
        result = subprocess.run([*alembic, *arguments], cwd=REPO_ROOT, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [bpestore.store.schema_revision.SCHEMA_REVISION, "(head)"]
    assert not list(REPO_ROOT.glob("scratch-migrations.db*"))  # (-x url= was used, not the ini's URL)
    Store(db).close()  # bpestore opens it as a store at its revision


def test_a_new_database_is_created_at_head(tmp_path):
    db = tmp_path / "new.db"
    with Store(db) as store:
        assert store.refs() == []
    assert revision_of(db) == [(head(),)]
    assert TABLES <= objects(db, "table")
    assert VIEWS <= objects(db, "view")


def test_an_empty_file_becomes_a_new_database(tmp_path):
    db = tmp_path / "empty.db"
    db.touch()
    with Store(db) as store:
        store.save("t", sample_tokenizer())
    assert revision_of(db) == [(head(),)]


def test_models_and_migrations_agree(tmp_path):
    db = tmp_path / "head.db"
    command.upgrade(alembic_config(db), "head")  # alembic alone, not through bpestore
    assert revision_of(db) == [(head(),)]
    engine = create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            assert compare_metadata(context, schema.metadata) == []
            # the comparison does see differences: the same models plus a column
            changed = MetaData(naming_convention=schema.metadata.naming_convention)
            for table in schema.metadata.tables.values():
                table.to_metadata(changed)
            changed.tables["tokenizers"].append_column(Column("extra", Integer))
            differences = compare_metadata(context, changed)
            assert [d[0] for d in differences] == ["add_column"]
    finally:
        engine.dispose()


def test_a_store_and_alembic_create_the_same_schema(tmp_path):
    by_store, by_alembic = tmp_path / "store.db", tmp_path / "alembic.db"
    Store(by_store).close()
    command.upgrade(alembic_config(by_alembic), "head")
    assert schema_sql(by_store) == schema_sql(by_alembic)


@pytest.mark.slow
def test_a_new_sqlite_store_is_made_from_the_head_file_without_alembic(tmp_path):
    """A new SQLite store is created from sqlite_head.sql (what the migrations make: the test
    above compares the two schemas), without importing alembic; the file is the migrations'
    output exactly, so a new migration without a regenerated file fails here."""
    import subprocess
    import sys

    from bpestore.store.migrate import SQLITE_HEAD_FILE, sqlite_head_statements, sqlite_head_text

    assert (migrations_dir() / SQLITE_HEAD_FILE).read_text(encoding="utf-8") == sqlite_head_text(), (
        "sqlite_head.sql is stale: python -c 'from bpestore.store.migrate import write_sqlite_head; write_sqlite_head()'"
    )
    assert sqlite_head_statements() is not None
    code = "import sys; from bpestore import Store; Store(sys.argv[1]).close(); print('alembic' in sys.modules)"
    made = subprocess.run([sys.executable, "-c", code, str(tmp_path / "new.db")], capture_output=True, text=True, check=True)
    assert made.stdout.strip() == "False"
    assert revision_of(tmp_path / "new.db") == [(head(),)]


def test_downgrade_and_upgrade_round_trip(tmp_path):
    db = tmp_path / "round.db"
    Store(db).close()
    created = schema_sql(db)
    command.downgrade(alembic_config(db), "base")
    assert not (TABLES | VIEWS) & (objects(db, "table") | objects(db, "view"))
    command.upgrade(alembic_config(db), "head")
    assert schema_sql(db) == created


def test_upgrading_from_0001_keeps_versions_increasing(tmp_path):
    """0002 adds tokenizer_names (versions are never reused); a store made by a 0001 release gets
    it filled from its tokenizers, so that the next version follows the highest stored one."""
    db = tmp_path / "old.db"
    with Store(db) as store:
        for _ in range(3):
            store.save("t", sample_tokenizer())
        store.save("u", sample_tokenizer())
        store.delete("t@2")
    command.downgrade(alembic_config(db), "0001")
    assert revision_of(db) == [("0001",)] and "tokenizer_names" not in objects(db, "table")
    with Store(db) as store:
        assert revision_of(db) == [(head(),)]
        assert store.refs() == ["t@1", "t@3", "u@1"]
        assert store.save("t", sample_tokenizer()) == "t@4"
        store.delete("u@1")
        assert store.save("u", sample_tokenizer()) == "u@2"


def test_a_database_downgraded_to_base_is_upgraded_when_opened(tmp_path):
    """alembic_version exists (empty: the database is at base) and nothing else: bpestore's
    database at its oldest revision, which opening must upgrade."""
    db = tmp_path / "base.db"
    Store(db).close()
    created = schema_sql(db)
    command.downgrade(alembic_config(db), "base")
    assert revision_of(db) == []
    with Store(db) as store:
        assert store.save("t", sample_tokenizer()) == "t@1"
    assert revision_of(db) == [(head(),)]
    assert schema_sql(db) == created


NEXT_REVISION = '''
"""A later revision, for testing upgrades: a table and a column.

Revision ID: {revision}
Revises: {down}
"""
import sqlalchemy as sa
from alembic import op

revision = "{revision}"
down_revision = "{down}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("upgrade_test_notes", sa.Column("id", sa.Integer(), primary_key=True), sa.Column("note", sa.Text()))
    op.add_column("tokenizers", sa.Column("upgrade_test_note", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tokenizers") as batch:
        batch.drop_column("upgrade_test_note")
    op.drop_table("upgrade_test_notes")
'''


@pytest.fixture
def newer_release(tmp_path, monkeypatch):
    """A copy of the migrations with one more revision on top, and a function that makes bpestore
    behave like the release that ships it (its migrations, its SCHEMA_REVISION)."""
    current = head()
    later = "9001_upgrade_test"
    directory = tmp_path / "migrations_next"
    shutil.copytree(migrations_dir(), directory, ignore=shutil.ignore_patterns("__pycache__"))
    (directory / "versions" / f"{later}.py").write_text(textwrap.dedent(NEXT_REVISION.format(revision=later, down=current)))
    assert ScriptDirectory(str(directory)).get_current_head() == later

    def activate() -> None:
        monkeypatch.setattr(bpestore.store.migrate, "migrations_dir", lambda: directory)
        monkeypatch.setattr(bpestore.store.schema_revision, "SCHEMA_REVISION", later)  # the one revision check
        bpestore.store.migrate._script_directory.cache_clear()

    yield later, activate
    monkeypatch.undo()
    bpestore.store.migrate._script_directory.cache_clear()


@pytest.mark.parametrize("open_with", ["Store", "from_db"])
def test_a_database_at_an_older_revision_is_upgraded_and_keeps_its_data(tmp_path, newer_release, open_with):
    later, activate = newer_release
    db = tmp_path / "old.db"
    tokenizer = sample_tokenizer()
    with Store(db) as store:
        ref = store.save("t", tokenizer)
    old_rows = sqlite3.connect(db).execute("SELECT * FROM vocab ORDER BY tokenizer_id, token_id").fetchall()
    assert revision_of(db) == [(head(),)]

    activate()
    if open_with == "Store":
        with Store(db) as store:
            assert store.refs() == [ref]
            loaded = store.load(ref)
    else:
        loaded = Tokenizer.from_db(db, ref)
    assert_same_tokenizer(loaded, tokenizer)
    assert revision_of(db) == [(later,)]
    assert "upgrade_test_notes" in objects(db, "table")
    connection = sqlite3.connect(db)
    assert "upgrade_test_note" in {row[1] for row in connection.execute("PRAGMA table_info(tokenizers)")}
    assert connection.execute("SELECT * FROM vocab ORDER BY tokenizer_id, token_id").fetchall() == old_rows
    connection.close()


def test_the_older_release_refuses_the_upgraded_database(tmp_path, newer_release, monkeypatch):
    later, activate = newer_release
    db = tmp_path / "old.db"
    with Store(db) as store:
        store.save("t", sample_tokenizer())
    activate()
    Store(db).close()
    assert revision_of(db) == [(later,)]
    monkeypatch.undo()  # back to this release, which does not know `later`
    bpestore.store.migrate._script_directory.cache_clear()
    _convert_to_rollback_journal(db)
    before = snapshot(tmp_path)
    with pytest.raises(DatabaseTooNewError, match=later):
        Store(db)
    assert snapshot(tmp_path) == before


# -- refusing, untouched ------------------------------------------------------------------------


def _convert_to_rollback_journal(db: Path) -> None:
    connection = sqlite3.connect(db)
    connection.execute("PRAGMA journal_mode = DELETE")
    connection.close()


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_an_unknown_revision_is_refused_and_left_untouched(tmp_path, journal):
    db = tmp_path / "future.db"
    with Store(db) as store:
        store.save("t", sample_tokenizer())
    connection = sqlite3.connect(db)
    connection.execute("UPDATE alembic_version SET version_num = 'ffff_from_the_future'")
    connection.commit()
    connection.execute(f"PRAGMA journal_mode = {journal}")
    connection.close()
    before = snapshot(tmp_path)
    assert list(before) == ["future.db"]

    with pytest.raises(DatabaseTooNewError, match="ffff_from_the_future"):
        Store(db)
    assert snapshot(tmp_path) == before, "refusing the database changed or created files"
    with pytest.raises(DatabaseTooNewError):
        Tokenizer.from_db(db, "t")
    with pytest.raises(DatabaseTooNewError):
        Store(f"sqlite:///{db}")
    assert snapshot(tmp_path) == before, "refusing the database changed or created files"


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(lambda: random.Random(1).randbytes(20_000), id="random-bytes"),
        pytest.param(lambda: b"SQLite format 3\x00" + random.Random(2).randbytes(5000), id="sqlite-header-then-garbage"),
        pytest.param(lambda: "the corpus, given as the database by mistake\n".encode() * 200, id="text"),
    ],
)
def test_a_file_that_is_not_sqlite_is_refused_and_left_untouched(tmp_path, content):
    db = tmp_path / "not_sqlite.db"
    db.write_bytes(content())
    before = snapshot(tmp_path)
    with pytest.raises(NotABpestoreDatabaseError):
        Store(db)
    with pytest.raises(NotABpestoreDatabaseError):
        Tokenizer.from_db(db, "t")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("name", ["h#x.db", "q?x.db", "p%41.db"])
def test_a_file_that_is_not_sqlite_is_refused_whatever_its_name(tmp_path, name):
    """Characters that mean something in a URI ('#', '?', '%') are part of a file name."""
    db = tmp_path / name
    db.write_bytes(random.Random(3).randbytes(20_000))
    before = snapshot(tmp_path)
    with pytest.raises(NotABpestoreDatabaseError):
        Store(db)
    with pytest.raises(NotABpestoreDatabaseError):
        Tokenizer.from_db(db, "t")
    assert snapshot(tmp_path) == before


def _other_database(db: Path, journal: str, statements: list[str]) -> None:
    connection = sqlite3.connect(db)
    connection.execute(f"PRAGMA journal_mode = {journal}")
    for statement in statements:
        connection.execute(statement)
    connection.commit()
    connection.close()


@pytest.mark.parametrize("journal", ["delete", "wal"])
@pytest.mark.parametrize(
    "statements",
    [
        pytest.param(["CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)", "INSERT INTO customers (name) VALUES ('ada')"], id="unrelated"),
        pytest.param(["CREATE TABLE tokenizers (id INTEGER PRIMARY KEY, name TEXT)", "INSERT INTO tokenizers (name) VALUES ('mine')"], id="same-table-name"),
        pytest.param(
            ["CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY)", "INSERT INTO alembic_version VALUES ('abc123')",
             "CREATE TABLE orders (id INTEGER PRIMARY KEY)"],
            id="another-alembic-project",
        ),
    ],
)
def test_a_sqlite_database_with_other_tables_is_refused_and_left_untouched(tmp_path, statements, journal):
    db = tmp_path / "other.db"
    _other_database(db, journal, statements)
    before = snapshot(tmp_path)
    assert list(before) == ["other.db"]
    with pytest.raises(NotABpestoreDatabaseError, match="other.db"):
        Store(db)
    with pytest.raises(NotABpestoreDatabaseError):
        Tokenizer.from_db(db, "t")
    assert snapshot(tmp_path) == before, "refusing the database changed or created files"


def test_a_directory_is_refused(tmp_path):
    directory = tmp_path / "dir.db"
    directory.mkdir()
    with pytest.raises(NotABpestoreDatabaseError):
        Store(directory)
    assert list(directory.iterdir()) == []


OLD_SOURCES = {
    "trained": "trained",
    "saved": "saved from Python",
    "gpt2": "imported from gpt2 /data/my files/vocab.json /data/my files/merges.txt",
    "hf": "imported from hf /data/a tokenizer.json",
    "tiktoken": "imported from tiktoken /data/cl100k_base.tiktoken",
}


def test_upgrading_from_0002_moves_import_sources_into_columns(tmp_path):
    """0003 keeps where an import came from as columns (format, paths) instead of free text; the
    rows of a store made by a 0002 release are converted, other sources are kept, and a downgrade
    writes the old text back."""
    db = tmp_path / "old.db"
    Store(db).close()
    command.downgrade(alembic_config(db), "0002")
    assert revision_of(db) == [("0002",)]
    connection = sqlite3.connect(db)
    with connection:
        for version, source in enumerate(OLD_SOURCES.values(), start=1):
            connection.execute(
                "INSERT INTO tokenizers (name, version, created_at, vocab_size, pattern, special_tokens, merge_rule, source)"
                " VALUES ('t', ?, '2026-11-22 10:00:00', 256, 'p', '[]', 'pair', ?)",
                (version, source),
            )
        connection.execute("INSERT INTO tokenizer_names (name, last_version) VALUES ('t', ?)", (len(OLD_SOURCES),))
    connection.close()

    with Store(db) as store:
        assert revision_of(db) == [(head(),)]
        infos = {info.version: info for info in store.list()}
    connection = sqlite3.connect(db)
    rows = connection.execute("SELECT version, source, source_format, source_paths FROM tokenizers ORDER BY version").fetchall()
    connection.close()
    assert [(source, fmt, paths and json.loads(paths)) for _, source, fmt, paths in rows] == [
        ("trained", None, None),
        ("saved from Python", None, None),
        ("imported", "gpt2", ["/data/my files/vocab.json", "/data/my files/merges.txt"]),
        ("imported", "hf", ["/data/a tokenizer.json"]),
        ("imported", "tiktoken", ["/data/cl100k_base.tiktoken"]),
    ]
    # What a reader sees is unchanged: the same words, now built from the columns.
    assert [infos[version].source for version in sorted(infos)] == list(OLD_SOURCES.values())
    assert (infos[3].source_format, infos[3].source_paths) == ("gpt2", ["/data/my files/vocab.json", "/data/my files/merges.txt"])

    command.downgrade(alembic_config(db), "0002")
    connection = sqlite3.connect(db)
    assert [row[0] for row in connection.execute("SELECT source FROM tokenizers ORDER BY version")] == list(OLD_SOURCES.values())
    connection.close()


def test_an_import_stores_its_format_and_paths(tmp_path):
    """A new import fills the columns directly (no text to parse back)."""
    from bpestore.workflow import import_into_store

    vocab, merges = tmp_path / "my vocab.json", tmp_path / "merges.txt"
    formats.export(sample_tokenizer(), "gpt2", tmp_path / "files")
    (tmp_path / "files" / "vocab.json").rename(vocab)
    (tmp_path / "files" / "merges.txt").rename(merges)
    db = tmp_path / "new.db"
    ref, imported = import_into_store(db, "g", "gpt2", vocab, merges, special_tokens=["<|endoftext|>"])
    with Store(db) as store:
        info = store.info(ref)
    assert (info.source_format, info.source_paths) == ("gpt2", [str(vocab.resolve()), str(merges.resolve())])
    assert info.source == f"imported from gpt2 {vocab.resolve()} {merges.resolve()}"


OLD_CORPUS_PATHS = {  # corpora.path as stores before 0007 wrote it -> (origin, path) after
    "/data/a.txt": ("files", "/data/a.txt"),
    '["/data/a.txt", "/data/b.txt.gz"]': ("files", '["/data/a.txt", "/data/b.txt.gz"]'),
    "counts: /data/c.parquet (min_count=2)": ("counts", "/data/c.parquet (min_count=2)"),
    "counts: counts given": ("counts", "counts given"),
    "counts: dask: /data/a b.txt s3://bucket/x.txt": ("dask", "/data/a b.txt s3://bucket/x.txt"),
}


def test_upgrading_from_0006_moves_the_corpus_origin_into_a_column(tmp_path):
    """0007 keeps how a corpus's counts were made in ``corpora.origin`` instead of prefixes of its
    path; the rows of a store made by a 0006 release are converted (and the tokenizers trained on
    them list as before), and a downgrade writes the prefixes back."""
    db = tmp_path / "old.db"
    Store(db).close()
    command.downgrade(alembic_config(db), "0006")
    assert revision_of(db) == [("0006",)]
    connection = sqlite3.connect(db)
    with connection:
        for index, path in enumerate(OLD_CORPUS_PATHS, start=1):
            connection.execute(
                "INSERT INTO corpora (id, sha256, pattern, special_tokens, path, size_bytes, distinct_pretokens, total_pretokens, created_at)"
                " VALUES (?, ?, 'p', '[]', ?, 10, 1, 1, '2026-11-22 10:00:00')",
                (index, f"{index:064x}", path),
            )
            connection.execute(
                "INSERT INTO tokenizers (name, version, created_at, vocab_size, pattern, special_tokens, merge_rule, source, corpus_id)"
                " VALUES ('t', ?, '2026-11-22 10:00:00', 256, 'p', '[]', 'pair', 'trained', ?)",
                (index, index),
            )
        connection.execute("INSERT INTO tokenizer_names (name, last_version) VALUES ('t', ?)", (len(OLD_CORPUS_PATHS),))
    connection.close()

    with Store(db) as store:
        assert revision_of(db) == [(head(),)]
        infos = sorted(store.list(), key=lambda info: info.version)
    connection = sqlite3.connect(db)
    rows = connection.execute("SELECT origin, path FROM corpora ORDER BY id").fetchall()
    connection.close()
    assert rows == list(OLD_CORPUS_PATHS.values())
    assert [(info.corpus_origin, info.corpus_path) for info in infos] == list(OLD_CORPUS_PATHS.values())
    # What `list` shows is what it showed before, read from the column instead of the text.
    from bpestore.pretokenize.inputs import short_corpus_path

    assert [short_corpus_path(info.corpus_path, info.corpus_origin) for info in infos] == [
        "a.txt", "a.txt +1 file", "counts: c.parquet (min_count=2)", "counts: counts given", "counts: dask: a b.txt +1 file",
    ]

    command.downgrade(alembic_config(db), "0006")
    connection = sqlite3.connect(db)
    assert [row[0] for row in connection.execute("SELECT path FROM corpora ORDER BY id")] == list(OLD_CORPUS_PATHS)
    assert "origin" not in {row[1] for row in connection.execute("PRAGMA table_info(corpora)")}
    connection.close()


def test_new_corpora_store_their_origin_and_a_bare_path(tmp_path):
    """Training from files, and from counts given, fill the column directly (no text to parse back)."""
    from bpestore.train.counts import count_shard

    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat\n" * 50, encoding="utf-8")
    with Store(tmp_path / "s.db") as store:
        [here] = store.train(corpus, "here", 260)
        counts = count_shard(corpus)
        counts.source = "made in a notebook"
        [given] = store.train_from_counts(counts, "given", 260)
        assert (store.info(here).corpus_origin, store.info(here).corpus_path) == ("files", str(corpus.resolve()))
        assert (store.info(given).corpus_origin, store.info(given).corpus_path) == ("counts", "made in a notebook")
