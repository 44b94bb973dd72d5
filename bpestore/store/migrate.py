"""Bringing a database to the schema this code expects, with the alembic migrations.

A new (empty) database is created at the head revision and an older bpestore database is
upgraded. Anything else is refused and left untouched: a file that is not SQLite, a database with
tables of its own but no bpestore revision, or a revision newer than this code knows.
"""

from __future__ import annotations

import sqlite3
from functools import lru_cache
from pathlib import Path

from typing import TYPE_CHECKING

from sqlalchemy import inspect

from ..errors import DatabaseTooNewError, NotABpestoreDatabaseError
from .schema_revision import is_current
from .sqlite_uri import sqlite_uri

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from sqlalchemy.engine import Connection, Engine

# alembic is imported only when a database needs creating or upgrading: opening a store that is
# already at SCHEMA_REVISION should not pay for it.

BPESTORE_TABLES = frozenset({"corpora", "pretoken_counts", "tokenizers", "vocab", "merges"})


def migrations_dir() -> Path:
    """The alembic environment, which lives inside the package (a checkout and a wheel alike)."""
    return Path(__file__).resolve().parent / "migrations"


@lru_cache(maxsize=1)
def _script_directory() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(migrations_dir()))


def head_revision() -> str:
    return _script_directory().get_current_head()


def known_revisions() -> set[str]:
    return {script.revision for script in _script_directory().walk_revisions()}


def _alembic_config(connection: Connection) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.attributes["connection"] = connection
    return config


def check_sqlite_file(path: Path) -> None:
    """Refuse, without writing to it, a file that is not SQLite or not bpestore's database."""
    if not path.exists() or path.stat().st_size == 0:
        return
    if path.is_dir():
        raise NotABpestoreDatabaseError(f"{path} is a directory, not a bpestore database")
    # immutable=1: no -wal/-shm files appear next to a database we may refuse. A -wal file means
    # someone is using it, and then only a plain read-only open sees everything in it.
    wal_in_use = path.with_name(path.name + "-wal").exists()
    parameters = {"mode": "ro"} if wal_in_use else {"mode": "ro", "immutable": "1"}
    try:
        connection = sqlite3.connect(sqlite_uri(path, **parameters), uri=True)
        try:
            tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            revision = None
            if "alembic_version" in tables:
                revision = connection.execute("SELECT version_num FROM alembic_version").fetchone()
        finally:
            connection.close()
    except sqlite3.DatabaseError as error:
        raise NotABpestoreDatabaseError(f"{path} is not a bpestore database (SQLite says: {error})") from None
    _check_contents(str(path), tables, revision[0] if revision else None)


def _check_contents(where: str, tables: set[str], revision: str | None) -> None:
    tables = tables - {"sqlite_sequence"}
    if not tables or (tables == {"alembic_version"} and revision is None):
        return  # new, or downgraded to the base revision: to be created
    if "alembic_version" not in tables or not (tables & BPESTORE_TABLES):
        shown = ", ".join(sorted(tables)[:5])
        raise NotABpestoreDatabaseError(f"{where} is not a bpestore database (it has other tables: {shown})")
    if revision is not None and not is_current(revision) and revision not in known_revisions():
        raise DatabaseTooNewError(
            f"{where} has schema revision {revision!r}, which this bpestore does not know (its newest is "
            f"{head_revision()!r}); upgrade bpestore to use this database"
        )


def _current_revision(connection: Connection, tables: set[str]) -> str | None:
    if "alembic_version" not in tables:
        return None
    return connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()


def _needs_upgrade(connection: Connection, where: str) -> bool:
    tables = set(inspect(connection).get_table_names())
    current = _current_revision(connection, tables)
    _check_contents(where, tables, current)
    return not is_current(current)


def upgrade_to_head(engine: Engine) -> None:
    """Create or upgrade the schema; checks the database first (see module docstring)."""
    where = engine.url.render_as_string(hide_password=True)
    with engine.connect() as connection:
        if not _needs_upgrade(connection, where):
            return
    with engine.connect() as connection:
        # Take the write lock, then look again: another process may have done the work meanwhile.
        connection.execution_options(bpestore_write=True)
        with connection.begin():
            if _needs_upgrade(connection, where):
                from alembic import command

                command.upgrade(_alembic_config(connection), "head")
