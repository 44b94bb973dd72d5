"""Migration 0005: the comment on ``tokenizers.source`` describes what the column holds since 0003
(issue 11), where the database keeps comments, and SQLite's tables are left as they are."""

from __future__ import annotations

import importlib.util
import io
import sqlite3

from alembic import command
from alembic.config import Config

from bpestore import Store
from bpestore.store import schema
from bpestore.store.migrate import migrations_dir


def migration_0005():
    path = migrations_dir() / "versions" / "0005_source_comment.py"
    spec = importlib.util.spec_from_file_location("migration_0005", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def offline_sql(url: str, revisions: str, downgrade: bool = False) -> str:
    output = io.StringIO()
    config = Config(output_buffer=output)
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("sqlalchemy.url", url)
    (command.downgrade if downgrade else command.upgrade)(config, revisions, sql=True)
    return output.getvalue()


def test_the_comment_names_what_the_column_holds_now():
    comment = schema.tokenizers.c.source.comment
    assert comment == migration_0005().NEW_COMMENT
    assert "imported from <format>" not in comment
    assert all(value in comment for value in ("'trained'", "'imported'", "source_format", "source_paths", "'saved from Python'"))


def test_a_database_that_keeps_comments_gets_the_new_one_and_the_old_one_back():
    new, old = migration_0005().NEW_COMMENT, migration_0005().OLD_COMMENT
    quoted = lambda text: "'" + text.replace("'", "''") + "'"  # noqa: E731
    up = offline_sql("postgresql://nowhere/db", "0004:0005")
    assert f"COMMENT ON COLUMN tokenizers.source IS {quoted(new)}" in up
    down = offline_sql("postgresql://nowhere/db", "0005:0004", downgrade=True)
    assert f"COMMENT ON COLUMN tokenizers.source IS {quoted(old)}" in down


def test_on_sqlite_it_changes_no_table(tmp_path):
    db = tmp_path / "s.db"
    Store(db).close()
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("sqlalchemy.url", f"sqlite:///{db}")

    def schema_sql():
        connection = sqlite3.connect(db)
        try:
            return sorted(connection.execute("SELECT type, name, sql FROM sqlite_master"))
        finally:
            connection.close()

    command.downgrade(config, "0005")  # (0006 adds indexes)
    at_0005 = schema_sql()
    command.downgrade(config, "0004")
    assert schema_sql() == at_0005
    sql = offline_sql(f"sqlite:///{db}", "0004:0005")
    assert "UPDATE alembic_version SET version_num='0005'" in sql  # (the output is captured)
    assert "ALTER" not in sql and "COMMENT" not in sql
