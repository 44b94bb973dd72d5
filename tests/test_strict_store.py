"""Types enforced where the data lives: a new SQLite store's tables are STRICT (revision 0013).

On a new store, a hand edit with plain ``sqlite3`` that puts a value of the wrong type, a NULL or
JSON of the wrong shape in any column of any table is refused by SQLite itself, at write time.
A store made by the previous schema (0012) is moved to the strict tables with every row kept and
the same answers from ``show``, ``encode`` and the README's queries; one with a row that would not
fit is refused in one line naming the table, the column and the row, and left unchanged.
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config

from bpestore.store.migrate import migrations_dir
from test_cli import invoke, ok
from test_store import sql_page_queries

TEXT = "the cat sat on the mat, and then the cat ate the rat.\n" * 40
OTHER = "Der Hund lief über die Straße, und dann lief die Katze.\n" * 40

STRICT_TYPES = {"INTEGER", "REAL", "TEXT", "BLOB"}
JSON_SHAPES = {
    ("corpora", "special_tokens"): "array",
    ("tokenizers", "special_tokens"): "array",
    ("tokenizers", "added_tokens"): "array",
    ("tokenizers", "source_paths"): "array",
    ("tokenizers", "training_params"): "object",
    ("tokenizers", "pipeline"): "object",
}
MOMENTS = {("corpora", "created_at"), ("corpus_files", "added_at"), ("tokenizers", "created_at"), ("warm_caches", "created_at"), ("evaluations", "created_at")}


def alembic_config(db: Path) -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("sqlalchemy.url", f"sqlite:///{db}")
    return config


def make_store(folder: Path) -> Path:
    """A store with a row in every table: two versions of stdlib (the README's queries name it),
    an evaluation and a warm table."""
    corpus, other = folder / "corpus.txt", folder / "other.txt"
    corpus.write_text(TEXT)
    other.write_text(OTHER)
    db = folder / "store.db"
    ok(invoke("train", corpus, "--name", "stdlib", "--vocab-size", "290", "--special-token", "<|endoftext|>", "--db", db))
    ok(invoke("train", other, "--name", "stdlib", "--vocab-size", "280", "--db", db))
    ok(invoke("warm", "stdlib@1", "--db", db))
    ok(invoke("eval", "stdlib@2", "--corpus", other, "-q", "--db", db))
    return db


@pytest.fixture(scope="module")
def strict_store(tmp_path_factory) -> Path:
    return make_store(tmp_path_factory.mktemp("strict"))


def bpestore_tables(db: Path) -> dict[str, list[tuple]]:
    """Each of bpestore's tables: its columns as PRAGMA table_info gives them."""
    with sqlite3.connect(db) as connection:
        names = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT IN ('alembic_version') AND name NOT LIKE 'sqlite_%'")]
        tables = {name: connection.execute("SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info(?)", (name,)).fetchall() for name in names}
    connection.close()
    return tables


def strict_flags(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as connection:
        flags = {name: strict for name, strict in connection.execute("SELECT name, strict FROM pragma_table_list WHERE schema = 'main'")}
    connection.close()
    return flags


def rows(db: Path) -> dict[str, list[tuple]]:
    """Every row of every bpestore table, with each value's SQLite type, in key order."""
    out = {}
    with sqlite3.connect(db) as connection:
        for table, columns in bpestore_tables(db).items():
            listed = ", ".join(f'typeof("{c[0]}"), "{c[0]}"' for c in columns)
            out[table] = sorted(connection.execute(f"SELECT {listed} FROM {table}").fetchall(), key=repr)
    connection.close()
    return out


def test_a_new_store_has_only_strict_tables(strict_store):
    tables = bpestore_tables(strict_store)
    assert set(tables) == {
        "corpora", "pretoken_counts", "packed_counts", "corpus_files", "tokenizers", "tokenizer_names", "vocab", "merges",
        "packed_models", "warm_caches", "evaluations",
    }
    flags = strict_flags(strict_store)
    assert {table: flags[table] for table in tables} == {table: 1 for table in tables}
    for table, columns in tables.items():
        for name, declared, *_ in columns:
            assert declared in STRICT_TYPES, f"{table}.{name} is declared {declared}"
    for table, columns in rows(strict_store).items():
        assert columns, f"the store has no row in {table}: the edits below would test nothing"


def wrong_values(table: str, column: str, declared: str, not_null: bool) -> list[tuple[str, str]]:
    """(SQL literal, the start of SQLite's message) for values the column must refuse."""
    refused = f"{table}.{column}"
    wrong_type = {
        "INTEGER": ["'x'", "X'00'", "1.5"],
        "REAL": ["'x'", "X'00'"],
        "TEXT": ["X'4142'"],
        "BLOB": ["'abc'", "7", "1.5"],
    }[declared]
    values = [(value, "cannot store") for value in wrong_type]
    if not_null:
        values.append(("NULL", f"NOT NULL constraint failed: {refused}"))
    if (table, column) in JSON_SHAPES:
        shape = JSON_SHAPES[table, column]
        check = f"CHECK constraint failed: ck_{table}_{column}_json_{shape}"
        values += [("'{'", check), ("'\"x\"'", check), ("'7'", check), ("'[1,2]'" if shape == "object" else "'{\"a\": 1}'", check)]
        values.append(("CAST(X'FF41' AS TEXT)", check))
        if shape == "array":  # (a trigger's: a CHECK cannot look at the items)
            strings = f"{table}.{column} must be a JSON array of strings"
            values += [("'[1, 2]'", strings), ("'[null]'", strings), ("'[\"a\", [\"b\"]]'", strings)]
    if (table, column) in MOMENTS:
        check = f"CHECK constraint failed: ck_{table}_{column}_moment"
        values += [("7", check), ("'yesterday'", check), ("''", check)]
    return values


def column_cases() -> list[tuple[str, str, str, bool]]:
    """Every column of every table of a new store, read from the schema a new store gets."""
    from bpestore.store.migrate import sqlite_head_statements

    connection = sqlite3.connect(":memory:")
    for statement in sqlite_head_statements() or ():
        connection.execute(statement)
    cases = []
    for (table,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'alembic_version'"):
        columns = connection.execute('SELECT name, type, "notnull", pk FROM pragma_table_info(?)', (table,)).fetchall()
        keys = [(name, declared) for name, declared, _, pk in columns if pk]
        without_rowid = "WITHOUT ROWID" in connection.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
        if len(keys) == 1 and keys[0][1] == "INTEGER" and not without_rowid:
            ROWID_ALIASES.add((table, keys[0][0]))
        for name, declared, not_null, _ in columns:
            cases.append((table, name, declared, bool(not_null)))
    connection.close()
    return cases


ROWID_ALIASES: set[tuple[str, str]] = set()
COLUMN_CASES = column_cases()


def test_the_cases_cover_every_table():
    assert len({table for table, *_ in COLUMN_CASES}) == 11 and len(COLUMN_CASES) > 70


@pytest.mark.parametrize("table,column,declared,not_null", COLUMN_CASES, ids=[f"{t}.{c}" for t, c, *_ in COLUMN_CASES])
def test_a_wrong_value_written_by_hand_is_refused_by_sqlite(strict_store, tmp_path, table, column, declared, not_null):
    db = tmp_path / "edited.db"
    shutil.copy(strict_store, db)
    before = rows(db)
    with sqlite3.connect(db) as connection:
        # one row: the first in the table's own order (WITHOUT ROWID tables have no rowid)
        first = connection.execute(f"SELECT * FROM {table} LIMIT 1").fetchone()
        names = [c[0] for c in connection.execute(f"SELECT * FROM {table} LIMIT 1").description]
        where = " AND ".join(f'"{name}" IS ?' for name in names)
        for value, message in wrong_values(table, column, declared, not_null):
            with pytest.raises(sqlite3.IntegrityError) as refused:
                connection.execute(f'UPDATE {table} SET "{column}" = {value} WHERE {where}', first)
            text = str(refused.value)
            if (table, column) in ROWID_ALIASES and (message == "cannot store" or value == "NULL"):
                message = "datatype mismatch"  # the rowid itself (an INTEGER PRIMARY KEY): SQLITE_MISMATCH
            assert text.startswith(message), f"{table}.{column} = {value}: {text}"
            if message == "cannot store":
                assert text.endswith(f"{declared} column {table}.{column}"), text
    connection.close()
    assert rows(db) == before


def test_what_sqlite_cannot_refuse_is_left_to_the_reads(strict_store, tmp_path):
    """STRICT TEXT holds text that is not UTF-8: it is written, and the reads' checks
    (tests/test_damaged_rows.py) name it."""
    db = tmp_path / "edited.db"
    shutil.copy(strict_store, db)
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE tokenizers SET pattern = CAST(X'FF41' AS TEXT) WHERE version = 1")
    connection.close()
    result = invoke("show", "stdlib@1", "--db", db)
    assert result.exit_code == 1
    assert "tokenizers.pattern" in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_new_item_of_the_right_type_is_accepted(strict_store, tmp_path):
    """The triggers refuse only what they must: a list of strings is written as before."""
    db = tmp_path / "edited.db"
    shutil.copy(strict_store, db)
    with sqlite3.connect(db) as connection:
        connection.execute("""UPDATE tokenizers SET source_paths = '["a", "b"]', added_tokens = '[]' WHERE version = 1""")
        assert connection.execute("SELECT source_paths, added_tokens FROM tokenizers WHERE version = 1").fetchall() == [('["a", "b"]', "[]")]
        connection.execute("UPDATE tokenizers SET source_paths = NULL WHERE version = 1")
        assert connection.execute("SELECT source_paths FROM tokenizers WHERE version = 1").fetchall() == [(None,)]
    connection.close()


# -- moving a store made by the previous schema -----------------------------------------------------


def old_store(strict: Path, folder: Path) -> Path:
    """A copy of ``strict`` made by the previous schema (0012): its tables as 0012 declares them
    (checked against a database that alembic took to 0012 from nothing), the same rows."""
    db = folder / "old.db"
    shutil.copy(strict, db)
    command.downgrade(alembic_config(db), "0012")
    made = folder / "made-at-0012.db"
    command.upgrade(alembic_config(made), "0012")
    assert bpestore_tables(db) == bpestore_tables(made)
    assert not any(strict_flags(db).values())
    return db


def answers(db: Path, folder: Path) -> list[str]:
    text = folder / "text.txt"
    text.write_text("the cat ate the rat.\n<|endoftext|>Der Hund.")
    return [
        ok(invoke("show", ref, "--db", db)) for ref in ("stdlib@1", "stdlib@2")
    ] + [ok(invoke("encode", ref, text, "--db", db)) for ref in ("stdlib@1", "stdlib@2")] + [ok(invoke("list", "--db", db))]


def readme_answers(db: Path) -> list[list[tuple]]:
    with sqlite3.connect(db) as connection:
        results = [connection.execute(statement).fetchall() for statement in sql_page_queries()]
    connection.close()
    return results


def test_a_store_made_by_the_previous_schema_moves_to_strict_tables_keeping_every_row(strict_store, tmp_path):
    expected_answers = answers(strict_store, tmp_path)
    expected_readme = readme_answers(strict_store)
    assert all(expected_readme) and len(expected_readme) == 3
    db = old_store(strict_store, tmp_path)
    before = rows(db)
    assert answers(db, tmp_path) == expected_answers  # (the first command moves it)
    flags = strict_flags(db)
    assert {table: flags[table] for table in before} == {table: 1 for table in before}
    assert bpestore_tables(db) == bpestore_tables(strict_store)
    assert rows(db) == before
    assert readme_answers(db) == expected_readme
    with sqlite3.connect(db) as connection:
        assert connection.execute("SELECT version_num FROM alembic_version").fetchall() == [("0013",)]
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert connection.execute("PRAGMA foreign_key_check").fetchall() == []
        # the triggers came back: a changed vocab row drops its tokenizer's packed copy
        assert connection.execute("SELECT count(*) FROM packed_models").fetchone()[0] == 2
        connection.execute("UPDATE vocab SET text = text WHERE token_id = 0 AND tokenizer_id = (SELECT min(id) FROM tokenizers)")
        assert connection.execute("SELECT count(*) FROM packed_models").fetchone()[0] == 1
        connection.rollback()
    connection.close()


V1 = "(SELECT id FROM tokenizers WHERE version = 1)"
# (edit of the old store, what the refusal names: table, column and row)
DAMAGED = [
    (f"UPDATE vocab SET token = 'abc' WHERE token_id = 100 AND tokenizer_id = {V1}", ["table vocab", "column token", "token_id=100", "text"]),
    (f"UPDATE vocab SET token_id = 'x' WHERE token_id = 100 AND tokenizer_id = {V1}", ["table vocab", "column token_id", "token_id='x'"]),
    (f"UPDATE merges SET \"left\" = 12 WHERE rank = 3 AND tokenizer_id = {V1}", ["table merges", "column left", "rank=3", "integer"]),
    ("UPDATE tokenizers SET created_at = 5 WHERE version = 1", ["table tokenizers", "column created_at", "id=1"]),
    ("UPDATE tokenizers SET training_params = '[1,2]' WHERE version = 2", ["table tokenizers", "column training_params", "id=2", "'[1,2]'", "JSON object"]),
    ("UPDATE tokenizers SET special_tokens = '{' WHERE version = 1", ["table tokenizers", "column special_tokens", "JSON array"]),
    ("UPDATE tokenizers SET special_tokens = '[1, 2]' WHERE version = 1", ["table tokenizers", "column special_tokens", "id=1", "array of strings"]),
    ("UPDATE corpora SET special_tokens = '[null]' WHERE id = 2", ["table corpora", "column special_tokens", "id=2", "array of strings"]),
    ("UPDATE tokenizers SET pattern = X'4142' WHERE version = 1", ["table tokenizers", "column pattern", "blob"]),
    ("UPDATE corpora SET path = X'00' WHERE id = 1", ["table corpora", "column path", "id=1", "blob"]),
    ("UPDATE pretoken_counts SET count = 'many' WHERE pretoken = (SELECT min(pretoken) FROM pretoken_counts)", ["table pretoken_counts", "column count", "corpus_id=1, pretoken=X'"]),
    ("UPDATE evaluations SET alpha = 'x'", ["table evaluations", "column alpha"]),
    ("UPDATE warm_caches SET data = 'x'", ["table warm_caches", "column data"]),
    (f"UPDATE merges SET result_id = 9999 WHERE rank = 0 AND tokenizer_id = {V1}", ["table merges", "refers to a row of vocab"]),
]


def file_state(db: Path) -> tuple[str, bytes]:
    """The database file's bytes (digest) and what its write-ahead log holds, if there is one."""
    wal = db.with_name(db.name + "-wal")
    return hashlib.sha256(db.read_bytes()).hexdigest(), wal.read_bytes() if wal.exists() else b""


@pytest.mark.parametrize("edit,named", DAMAGED, ids=[case[0][:60] for case in DAMAGED])
def test_a_row_that_would_not_fit_refuses_the_move_in_one_line_and_changes_nothing(strict_store, tmp_path, edit, named):
    db = old_store(strict_store, tmp_path)
    with sqlite3.connect(db) as connection:  # (plain sqlite3: foreign keys are not enforced)
        assert connection.execute(edit).rowcount >= 1
    connection.close()
    before, state = rows(db), file_state(db)
    for args in (("show", "stdlib@2"), ("list",), ("rm", "stdlib@1")):
        result = invoke(*args, "--db", db)
        assert result.exit_code == 1, f"{args}: exit {result.exit_code}: {result.stderr!r} {result.exception!r}"
        message = result.stderr.strip()
        assert len(message.splitlines()) == 1 and "Internal error" not in message, message
        assert str(db) in message and "nothing was changed" in message, message
        for needle in named:
            assert needle in message, f"{needle!r} not in {message!r}"
        assert file_state(db) == state and rows(db) == before
