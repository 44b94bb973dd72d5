"""A store edited by hand: every read checks what it reads, and `bpestore check` finds the damage.

Each case edits a store with plain ``sqlite3`` (as a user at the ``sqlite3`` prompt would), then
runs the commands that read the edited row: each must exit 1 with one line that names the store,
the tokenizer, the table and the column, never 70 ("Internal error").
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from test_cli import invoke, ok

TEXT = "the cat sat on the mat, and then the cat ate the rat.\n" * 40


@pytest.fixture(scope="module")
def clean_store(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("damaged")
    corpus = folder / "corpus.txt"
    corpus.write_text(TEXT)
    db = folder / "clean.db"
    ok(invoke("train", corpus, "--name", "en", "--vocab-size", "280", "--db", db))
    other = folder / "other.txt"
    other.write_text(TEXT.upper())
    ok(invoke("train", other, "--name", "other", "--vocab-size", "270", "--db", db))
    return loosened(db)


def loosened(db: Path) -> Path:
    """``db`` with ordinary tables in place of its STRICT ones (their types before revision 0013),
    still recorded at the head revision: a store written by another program, or a hostile file.
    On a strict store SQLite itself refuses these edits (tests/test_strict_store.py); on such a
    store, an old one and a PostgreSQL one, the reads' checks are what finds the damage."""
    from alembic import command
    from alembic.config import Config

    from bpestore.store.migrate import migrations_dir
    from bpestore.store.schema_revision import SCHEMA_REVISION

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("sqlalchemy.url", f"sqlite:///{db}")
    command.downgrade(config, "0012")
    with sqlite3.connect(db) as connection:
        assert "STRICT" not in connection.execute("SELECT sql FROM sqlite_master WHERE name = 'vocab'").fetchone()[0]
        connection.execute("UPDATE alembic_version SET version_num = ?", (SCHEMA_REVISION,))
    connection.close()
    return db


def edited(clean_store: Path, tmp_path: Path, *statements: str) -> Path:
    db = tmp_path / "edited.db"
    shutil.copy(clean_store, db)
    with sqlite3.connect(db) as connection:
        for statement in statements:
            connection.execute(statement)
    return db


def dump(db: Path) -> list[str]:
    with sqlite3.connect(db) as connection:
        return list(connection.iterdump())


EN = "(SELECT id FROM tokenizers WHERE name = 'en')"
# (edit, table.column it damages, commands that read it)
ROW_CASES = [
    (f"UPDATE vocab SET token = 'abc' WHERE token_id = 100 AND tokenizer_id = {EN}", "vocab.token", "loads"),
    (f"UPDATE vocab SET token = 7 WHERE token_id = 100 AND tokenizer_id = {EN}", "vocab.token", "loads"),
    (f"UPDATE vocab SET token_id = 'x' WHERE token_id = 100 AND tokenizer_id = {EN}", "vocab.token_id", "loads"),
    (f"UPDATE merges SET \"left\" = 'ab' WHERE rank = 3 AND tokenizer_id = {EN}", "merges.left", "loads"),
    (f"UPDATE merges SET \"right\" = 12 WHERE rank = 3 AND tokenizer_id = {EN}", "merges.right", "loads"),
    ("UPDATE tokenizers SET created_at = 5 WHERE name = 'en'", "tokenizers.created_at", "infos"),
    ("UPDATE tokenizers SET created_at = 'yesterday' WHERE name = 'en'", "tokenizers.created_at", "infos"),
    ("UPDATE tokenizers SET training_params = '[1,2]' WHERE name = 'en'", "tokenizers.training_params", "infos"),
    ("UPDATE tokenizers SET training_params = '{' WHERE name = 'en'", "tokenizers.training_params", "infos"),
    ("UPDATE tokenizers SET special_tokens = '[1, 2]' WHERE name = 'en'", "tokenizers.special_tokens", "both"),
    ("UPDATE tokenizers SET special_tokens = '[null]' WHERE name = 'en'", "tokenizers.special_tokens", "both"),
    ("UPDATE tokenizers SET special_tokens = '{\"a\": 1}' WHERE name = 'en'", "tokenizers.special_tokens", "both"),
    ("UPDATE tokenizers SET added_tokens = '\"x\"' WHERE name = 'en'", "tokenizers.added_tokens", "both"),
    ("UPDATE tokenizers SET pattern = X'4142' WHERE name = 'en'", "tokenizers.pattern", "both"),
    ("UPDATE tokenizers SET vocab_size = 'many' WHERE name = 'en'", "tokenizers.vocab_size", "infos"),
    ("UPDATE tokenizers SET source_paths = '[1]' WHERE name = 'en'", "tokenizers.source_paths", "infos"),
    ("UPDATE tokenizers SET training_seconds = 'slow' WHERE name = 'en'", "tokenizers.training_seconds", "infos"),
    ("UPDATE tokenizers SET pattern = CAST(X'FF41' AS TEXT) WHERE name = 'en'", "tokenizers.pattern", "both"),
    ("UPDATE tokenizers SET training_params = CAST(X'FF41' AS TEXT) WHERE name = 'en'", "tokenizers.training_params", "infos"),
    ("UPDATE corpora SET path = X'00' WHERE id = (SELECT corpus_id FROM tokenizers WHERE name = 'en')", "corpora.path", "infos"),
]
LOAD_COMMANDS = [("show", "en"), ("encode", "en", "-"), ("decode", "en", "1", "2"), ("diff", "en", "other")]
INFO_COMMANDS = [("show", "en"), ("diff", "en", "other")]  # the commands that read the tokenizer's metadata


def assert_names_damage(result, column: str) -> str:
    assert result.exit_code == 1, f"exit {result.exit_code}: {result.stderr!r} {result.exception!r}"
    message = result.stderr.strip()
    assert "Internal error" not in message and "Traceback" not in message
    assert column in message and "en@1" in message and "edited.db" in message, message
    return message


@pytest.mark.parametrize("edit, column, reads", ROW_CASES, ids=[case[0][:60] for case in ROW_CASES])
def test_a_damaged_row_is_named_by_every_command_that_reads_it(clean_store, tmp_path, edit, column, reads):
    db = edited(clean_store, tmp_path, edit)
    for command in INFO_COMMANDS if reads == "infos" else LOAD_COMMANDS:
        result = invoke(*command, "--db", db, input="the cat\n")
        assert_names_damage(result, column)
        assert len(result.stderr.strip().splitlines()) == 1
    if reads in ("infos", "both"):
        # list shows the sound tokenizer and marks the damaged one
        listed = invoke("list", "--db", db)
        assert listed.exit_code == 1
        assert "other" in listed.stdout and "DAMAGED" in listed.stderr and column in listed.stderr
        as_json = invoke("list", "--json", "--db", db)
        assert as_json.exit_code == 1 and [item["name"] for item in json.loads(as_json.stdout)] == ["other"]
    checked = invoke("check", "--db", db)
    assert checked.exit_code == 1 and column in checked.stdout, checked.stdout
    assert "other@" not in checked.stdout  # the sound tokenizer is not blamed


def test_a_name_that_is_not_utf8_is_named_not_internal_error(clean_store, tmp_path):
    db = edited(clean_store, tmp_path, "UPDATE tokenizers SET name = CAST(X'FF41' AS TEXT) WHERE name = 'en'")
    listed = invoke("list", "--db", db)
    assert listed.exit_code == 1 and "not UTF-8" in listed.stderr and "other" in listed.stdout
    shown = invoke("show", "en", "--db", db)
    assert shown.exit_code == 1 and "Internal error" not in shown.stderr, shown.stderr


def test_check_finds_nothing_in_a_sound_store(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT)
    db = tmp_path / "sound.db"
    ok(invoke("train", corpus, "--name", "en", "--vocab-size", "280", "--db", db))
    result = invoke("check", "--db", db)
    assert result.exit_code == 0, result.stdout
    assert json.loads(ok(invoke("check", "--json", "--db", db))) == []


def test_check_says_once_that_the_tables_of_a_store_at_head_are_not_strict(clean_store):
    result = invoke("check", "--json", "--db", clean_store)
    assert result.exit_code == 1
    (problem,) = json.loads(result.stdout)  # and nothing else: its rows are sound
    assert problem["where"] == "store" and "STRICT" in problem["message"] and "0013" in problem["message"]


def test_check_compares_a_corpus_row_with_its_stored_counts(clean_store, tmp_path):
    db = edited(clean_store, tmp_path, "UPDATE corpora SET total_pretokens = 3")
    result = invoke("check", "--json", "--db", db)
    assert result.exit_code == 1
    problems = [problem for problem in json.loads(result.stdout) if "STRICT" not in problem["message"]]  # (the loosened tables' line)
    assert problems and all(problem["where"].startswith("corpus ") for problem in problems)
    assert "3 in all" in problems[0]["message"]


def test_a_trigger_that_refuses_a_write_is_one_line_and_nothing_is_stored(clean_store, tmp_path):
    db = edited(clean_store, tmp_path, "CREATE TRIGGER no_more BEFORE INSERT ON tokenizers BEGIN SELECT RAISE(ABORT, 'frozen store'); END")
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT)
    result = invoke("train", corpus, "--name", "new", "--vocab-size", "270", "--db", db)
    assert result.exit_code == 1, result.stderr
    message = result.stderr.strip()
    assert "frozen store" in message and "rolled back" in message and "Internal error" not in message
    with sqlite3.connect(db) as connection:
        assert connection.execute("SELECT count(*) FROM tokenizers WHERE name = 'new'").fetchone() == (0,)


@pytest.mark.parametrize("command", [("list",), ("show", "en"), ("rm", "en"), ("encode", "en", "-"), ("check",)])
def test_a_recorded_revision_older_than_the_tables_is_named_before_any_migration(clean_store, tmp_path, command):
    db = edited(clean_store, tmp_path, "UPDATE alembic_version SET version_num = '0003'")
    before = dump(db)
    result = invoke(*command, "--db", db, input="x")
    assert result.exit_code == 1, result.stderr + result.stdout
    text = result.stderr + result.stdout
    assert "'0003'" in text and "do not match" in text and "'0011'" in text and "no upgrade was started" in text
    assert "Internal error" not in text
    assert dump(db) == before  # nothing migrated, nothing deleted


def test_tables_that_do_not_fit_the_recorded_revision_roll_the_upgrade_back(clean_store, tmp_path):
    # (0010 adds tokenizers.added_tokens, which these tables have already: the upgrade fails there, after 0009's steps)
    db = edited(clean_store, tmp_path, "UPDATE alembic_version SET version_num = '0009'", "DROP TABLE warm_caches")
    before = dump(db)
    result = invoke("list", "--db", db)
    assert result.exit_code == 1
    assert "'0009'" in result.stderr and "rolled back" in result.stderr and "Internal error" not in result.stderr
    assert dump(db) == before


def test_strict_tables_under_a_revision_before_they_were_strict_are_named_before_any_migration(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT)
    db = tmp_path / "edited.db"
    ok(invoke("train", corpus, "--name", "en", "--vocab-size", "280", "--db", db))
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE alembic_version SET version_num = '0012'")
    connection.close()
    before = dump(db)
    result = invoke("show", "en", "--db", db)
    assert result.exit_code == 1 and "'0012'" in result.stderr and "STRICT" in result.stderr and "'0013'" in result.stderr
    assert dump(db) == before


def test_the_revision_that_made_each_table_is_the_migrations_own():
    from alembic import command
    from sqlalchemy import create_engine

    from bpestore.store.migrate import TABLES_SINCE, _alembic_config, known_revisions

    engine = create_engine("sqlite://")
    made: dict[str, str] = {}
    with engine.connect() as connection:
        for revision in sorted(known_revisions()):
            with connection.begin():
                command.upgrade(_alembic_config(connection), revision)
            for table in connection.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'table'").scalars():
                made.setdefault(table, revision)
            connection.commit()
    engine.dispose()
    assert {table: since for table, since in made.items() if since != "0001" and table != "alembic_version"} == TABLES_SINCE


def test_check_reports_a_corrupt_file_in_lines_not_a_traceback(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"word{i} other{i * 7} thing{i % 13}\n" for i in range(20000)))
    db = tmp_path / "big.db"
    ok(invoke("train", corpus, "--name", "w", "--vocab-size", "400", "--db", db))
    size = db.stat().st_size
    with open(db, "r+b") as file:  # 4 bytes at the head of a page in the middle of the file (its b-tree header)
        file.seek((size // 2) // 4096 * 4096)
        file.write(b"\xde\xad\xbe\xef")
    with sqlite3.connect(db) as connection:
        sound = connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    if sound:
        pytest.skip("the flipped bytes fell on a free page: SQLite sees no damage")
    result = invoke("check", "--db", db)
    assert result.exit_code == 1
    assert "Internal error" not in result.stdout + result.stderr
    assert all(line.startswith(("store:", "w@", "corpus ", "tokenizers:")) for line in result.stdout.splitlines())
