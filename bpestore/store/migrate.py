"""Bringing a database to the schema this code expects, with the alembic migrations.

A new (empty) database is created at the head revision and an older bpestore database is
upgraded. Anything else is refused and left untouched: a file that is not SQLite, a database with
tables of its own but no bpestore revision, or a revision newer than this code knows.
"""

from __future__ import annotations

import sqlite3
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from typing import TYPE_CHECKING

from sqlalchemy import inspect

from . import schema
from ..errors import DamagedStoreError, DatabaseTooNewError, NotABpestoreDatabaseError, StoreLockTimeoutError, StoreUnavailableError
from .schema_revision import SCHEMA_REVISION, is_current
from .sqlite_uri import sqlite_uri

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from sqlalchemy.engine import Connection, Engine

# alembic is imported only when a database needs creating or upgrading: opening a store that is
# already at SCHEMA_REVISION should not pay for it.

BPESTORE_TABLES = frozenset({"corpora", "pretoken_counts", "tokenizers", "vocab", "merges"})

TABLES_SINCE = {"tokenizer_names": "0002", "packed_models": "0004", "packed_counts": "0008", "corpus_files": "0008",
                "evaluations": "0009", "warm_caches": "0011"}
"""The revision that made each table that 0001 did not (a test checks it against the migrations):
a store recorded at an older revision that has one has another store's tables under its record."""

STRICT_SINCE = "0013"
"""The revision from which bpestore's SQLite tables are STRICT."""


def migrations_dir() -> Path:
    """The alembic environment, which lives inside the package (a checkout and a wheel alike)."""
    return Path(__file__).resolve().parent / "migrations"


@lru_cache(maxsize=1)
def _script_directory() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(migrations_dir()))


def head_revision() -> str:
    head = _script_directory().get_current_head()
    if head is None:  # (the package always carries its migrations)
        raise RuntimeError(f"no migration found in {migrations_dir()}")
    return head


def known_revisions() -> set[str]:
    return {script.revision for script in _script_directory().walk_revisions()}


def _alembic_config(connection: Connection) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.attributes["connection"] = connection
    return config


SQLITE_HEADER = b"SQLite format 3\x00"

# What SQLite's errors mean for a file we were asked to open: only these say the file is not a
# database (or is a broken one); anything else (I/O, a full disk, permissions, locks) is a problem
# of the disk or the system, and saying "not a bpestore database" would send the user the wrong way.
_NOT_A_DATABASE = {"SQLITE_NOTADB", "SQLITE_CORRUPT"}


@dataclass(frozen=True)
class DatabaseContents:
    """What a database holds, as far as deciding whether it is a bpestore store goes."""

    tables: frozenset[str]
    views: frozenset[str]
    revisions: tuple[str | None, ...]
    """The rows of ``alembic_version`` (empty if there is no such table)."""
    columns: dict[str, frozenset[str]]
    """The columns of each of bpestore's tables that exists as a table."""
    strict: frozenset[str] = frozenset()
    """The tables that are STRICT (SQLite >= 3.37)."""


def sqlite_file_state(path: Path, busy_timeout: float = 5.0) -> str:
    """Look at ``path`` without writing to it (no side files either) and say what it is:
    ``"missing"``, ``"new"`` (an empty file or database, to be created), ``"current"`` or
    ``"older"`` (a bpestore store at an older schema revision). Anything else is refused with the
    one true reason: NotABpestoreDatabaseError, DamagedStoreError, DatabaseTooNewError, or
    StoreUnavailableError for a file that cannot be read.
    """
    try:
        status = path.stat()
    except FileNotFoundError:
        return "missing"
    except OSError as error:
        raise StoreUnavailableError(f"cannot use {path}: {error.strerror or error}") from None
    if stat.S_ISDIR(status.st_mode):
        raise NotABpestoreDatabaseError(f"{path} is a directory, not a bpestore database")
    if not stat.S_ISREG(status.st_mode):  # a device or a pipe: reading it could block or never end
        raise NotABpestoreDatabaseError(f"{path} is not a regular file, so not a bpestore database")
    try:
        with open(path, "rb") as file:
            header = file.read(100)
    except OSError as error:
        raise StoreUnavailableError(f"cannot read {path}: {error.strerror or error}") from None
    if not header:
        return "new"  # an empty file: SQLite's own way of starting a database
    if not header.startswith(SQLITE_HEADER):  # /proc files, for one, claim size 0 but have text in them
        raise NotABpestoreDatabaseError(f"{path} is not a bpestore database (not a SQLite file)")
    # Read without leaving a trace: no -wal/-shm files may appear next to a database we may refuse.
    # A file in WAL mode (header byte 18 is 2) with no -wal file is not being written: immutable=1
    # reads it with no side files at all. With a -wal file someone is using it, and only a plain
    # read-only open sees everything in it. A file in rollback-journal mode is read with its locks,
    # which create nothing and wait for a writer that is, say, creating this very database.
    wal_mode = len(header) > 18 and header[18] == 2
    wal_in_use = path.with_name(path.name + "-wal").exists()
    parameters = {"mode": "ro", "immutable": "1"} if wal_mode and not wal_in_use else {"mode": "ro"}
    started = time.monotonic()
    try:
        connection = sqlite3.connect(sqlite_uri(path, **parameters), uri=True, timeout=busy_timeout)
        try:
            contents = _sqlite_contents(connection)
        finally:
            connection.close()
    except sqlite3.Error as error:
        if getattr(error, "sqlite_errorname", None) in _NOT_A_DATABASE:
            raise NotABpestoreDatabaseError(f"{path} is not a bpestore database (SQLite says: {error})") from None
        if (getattr(error, "sqlite_errorname", None) or "").startswith("SQLITE_BUSY"):
            # A writer in rollback-journal mode holds the file (a WAL store never blocks a reader).
            waited = time.monotonic() - started
            raise StoreLockTimeoutError(
                f"another writer holds the store {path}: waited {waited:.1f} s for it to finish (the lock timeout is "
                f"{busy_timeout:g} s: --lock-timeout SECONDS or BPESTORE_LOCK_TIMEOUT); nothing was written",
                waited,
            ) from None
        raise StoreUnavailableError(f"cannot read {path}: {error}") from None
    return classify(str(path), contents)


def check_sqlite_file(path: Path) -> None:
    """Refuse, without writing to it, a file that is not SQLite or not bpestore's database."""
    sqlite_file_state(path)


def _sqlite_contents(connection: sqlite3.Connection) -> DatabaseContents:
    objects = connection.execute("SELECT type, name FROM sqlite_master WHERE type IN ('table', 'view')").fetchall()
    tables = frozenset(name for kind, name in objects if kind == "table")
    views = frozenset(name for kind, name in objects if kind == "view")
    revisions: tuple[str | None, ...] = ()
    if "alembic_version" in tables:
        revisions = tuple(row[0] for row in connection.execute("SELECT version_num FROM alembic_version LIMIT 2"))
    columns = {
        table: frozenset(row[1] for row in connection.execute("SELECT * FROM pragma_table_info(?)", (table,)))
        for table in tables & set(schema.metadata.tables)
    }
    return DatabaseContents(tables, views, revisions, columns, _strict_tables(connection))


def _strict_tables(connection: sqlite3.Connection) -> frozenset[str]:
    try:
        return frozenset(name for name, strict in connection.execute("SELECT name, strict FROM pragma_table_list WHERE schema = 'main'") if strict)
    except sqlite3.Error:  # SQLite < 3.37: no STRICT tables
        return frozenset()


def _inspected_contents(connection: Connection) -> DatabaseContents:
    inspector = inspect(connection)
    tables = frozenset(inspector.get_table_names())
    views = frozenset(inspector.get_view_names())
    revisions: tuple[str | None, ...] = ()
    if "alembic_version" in tables:
        revisions = tuple(connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalars().all()[:2])
    columns = {
        table: frozenset(column["name"] for column in inspector.get_columns(table)) for table in tables & set(schema.metadata.tables)
    }
    strict: frozenset[str] = frozenset()
    if connection.dialect.name == "sqlite":
        driver = connection.connection.driver_connection
        if isinstance(driver, sqlite3.Connection):
            strict = _strict_tables(driver)
    return DatabaseContents(tables, views, revisions, columns, strict)


def _listed(names: Iterable[str]) -> str:
    names = sorted(names)
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def classify(where: str, contents: DatabaseContents) -> str:
    """``"new"``, ``"current"`` or ``"older"`` (see :func:`sqlite_file_state`), or the error that
    says what else the database is. The schema itself is checked, not only table names: a view
    in a table's place could make every read run forever."""
    tables = contents.tables - {"sqlite_sequence"}
    everything = tables | contents.views
    if not everything or (everything == {"alembic_version"} and not contents.revisions):
        return "new"  # empty, or downgraded to the base revision: to be created
    if "alembic_version" not in tables:
        raise NotABpestoreDatabaseError(f"{where} is not a bpestore database (it has other tables: {_listed(everything)})")
    ours = everything & BPESTORE_TABLES
    if len(contents.revisions) != 1 or contents.revisions[0] is None:
        if not ours:
            raise NotABpestoreDatabaseError(f"{where} is not a bpestore database (it has other tables: {_listed(everything)})")
        found = "no schema revision (alembic_version is empty)" if not contents.revisions else "several schema revisions"
        raise DamagedStoreError(f"{where} is a damaged bpestore database: it has bpestore's tables but {found}")
    revision = contents.revisions[0]
    current = is_current(revision)
    if not ours:
        raise NotABpestoreDatabaseError(
            f"{where} is another application's alembic database (revision {revision!r}, tables: "
            f"{_listed(everything - {'alembic_version'})}), not a bpestore database"
        )
    if not current and revision not in known_revisions():
        if BPESTORE_TABLES <= tables:
            raise DatabaseTooNewError(
                f"{where} has schema revision {revision!r}, which this bpestore does not know (its newest is "
                f"{head_revision()!r}); upgrade bpestore to use this database"
            )
        raise NotABpestoreDatabaseError(
            f"{where} is not a bpestore database (its alembic revision {revision!r} is unknown and it lacks bpestore's "
            f"tables: {_listed(BPESTORE_TABLES - tables)})"
        )
    if not current:
        # Tables newer than the record (a newer store's tables under an older revision, restored or
        # edited by hand): migrating would fail halfway through, or redo what is done. Said before
        # any migration starts.
        if newer := sorted(table for table in tables if TABLES_SINCE.get(table, "0000") > str(revision)):
            raise DamagedStoreError(
                f"{where}: its tables do not match its recorded schema revision {revision!r}: it has tables that later "
                f"revisions made, up to {max(TABLES_SINCE[table] for table in newer)!r} ({_listed(newer)}); nothing was changed "
                "(no upgrade was started)"
            )
        if str(revision) < STRICT_SINCE and (strict := sorted(contents.strict & set(schema.metadata.tables))):
            raise DamagedStoreError(
                f"{where}: its tables do not match its recorded schema revision {revision!r}: {_listed(strict)} "
                f"{'is' if len(strict) == 1 else 'are'} STRICT, as revision {STRICT_SINCE!r} made them; nothing was changed "
                "(no upgrade was started)"
            )
    required = set(schema.metadata.tables) if current else BPESTORE_TABLES
    if views := sorted(required & contents.views):
        raise DamagedStoreError(f"{where} is a damaged bpestore database: {_listed(views)} should be a table, not a view")
    if missing := required - tables:
        raise DamagedStoreError(f"{where} is a damaged bpestore database (schema revision {revision}): table {_listed(missing)} is missing")
    if current:
        for table in sorted(required):
            if lacking := {column.name for column in schema.metadata.tables[table].columns} - contents.columns.get(table, frozenset()):
                raise DamagedStoreError(f"{where} is a damaged bpestore database: table {table} lacks column {_listed(lacking)}")
    return "current" if current else "older"



def _is_lock_or_disk_error(error: Exception) -> bool:
    """A database error that is the system's (a lock, the disk, permissions), not the schema's."""
    name = getattr(getattr(error, "orig", None), "sqlite_errorname", "") or ""
    return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_FULL", "SQLITE_IOERR", "SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM"))


def database_state(connection: Connection, where: str) -> str:
    """:func:`classify` of the database behind ``connection`` (any SQLAlchemy dialect)."""
    return classify(where, _inspected_contents(connection))


def _needs_upgrade(connection: Connection, where: str) -> bool:
    return database_state(connection, where) != "current"


def upgrade_to_head(engine: Engine, where: str | None = None) -> None:
    """Create or upgrade the schema; checks the database first (see module docstring). ``where``
    names the database in messages (default: its URL without the password).

    A new SQLite database is created from :func:`sqlite_head_statements` (what the migrations
    make, taken from them once and checked against them by the tests): milliseconds, where
    importing alembic and running every migration took a third of a second, a third of a small
    training through the store. Every other database goes through the migrations."""
    where = where or engine.url.render_as_string(hide_password=True)
    with engine.connect() as connection:
        if not _needs_upgrade(connection, where):
            return
    with engine.connect() as connection:
        # Take the write lock, then look again: another process may have done the work meanwhile.
        connection.execution_options(bpestore_write=True)
        with connection.begin():
            contents = _inspected_contents(connection)
            state = classify(where, contents)
            if state == "current":
                return
            # Only a database with nothing in it: one at base (an empty alembic_version) upgrades.
            empty = not contents.tables and not contents.views
            statements = sqlite_head_statements() if empty and connection.dialect.name == "sqlite" else None
            if statements is not None:
                for statement in statements:
                    connection.exec_driver_sql(statement)
                return
            from alembic import command
            from sqlalchemy.exc import DBAPIError

            revision = contents.revisions[0] if contents.revisions else None
            try:
                command.upgrade(_alembic_config(connection), "head")
            except DamagedStoreError as error:  # a row the new schema refuses (0012: one that a STRICT table would not hold)
                raise DamagedStoreError(f"{where}: {error}; the upgrade was rolled back, nothing was changed") from None
            except DBAPIError as error:  # the tables are not what the recorded revision says
                if _is_lock_or_disk_error(error):
                    raise
                reason = (str(error.orig).strip().splitlines() or [type(error.orig).__name__])[0]
                raise DamagedStoreError(
                    f"{where}: its tables do not match its recorded schema revision {revision!r}: upgrading it failed "
                    f"({reason}); the upgrade was rolled back, nothing was changed"
                ) from None


SQLITE_HEAD_FILE = "sqlite_head.sql"
"""The file, beside the migrations, that holds the SQL of a new SQLite store at the head revision."""


@lru_cache(maxsize=1)
def sqlite_head_statements() -> tuple[str, ...] | None:
    """The statements that make a new SQLite database a store at :data:`SCHEMA_REVISION
    <bpestore.store.schema_revision.SCHEMA_REVISION>`: the schema the migrations create, in the
    order SQLite keeps it, then the revision. None when the file is missing or is of another
    revision (the migrations then run)."""
    path = migrations_dir() / SQLITE_HEAD_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    statements, pending = [], ""
    for line in text.splitlines(keepends=True):
        if not pending and (not line.strip() or line.startswith("--")):
            continue
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    revision_statement = f"INSERT INTO alembic_version (version_num) VALUES ('{SCHEMA_REVISION}')"
    if pending.strip() or not statements or statements[-1].rstrip(";") != revision_statement:
        return None
    return tuple(statement.rstrip(";") for statement in statements)


def sqlite_head_text() -> str:
    """What :data:`SQLITE_HEAD_FILE` must hold: the schema a new SQLite database gets from the
    migrations (alembic, from nothing to the head), as SQLite keeps it, then the revision.
    Regenerate the file after adding a migration with::

        python -c "from bpestore.store.migrate import write_sqlite_head; write_sqlite_head()"
    """
    from sqlalchemy import create_engine

    engine = create_engine("sqlite://")
    with engine.connect() as connection:
        with connection.begin():
            from alembic import command

            command.upgrade(_alembic_config(connection), "head")
        rows = connection.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
        ).scalars().all()
        (revision,) = connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalars().all()
    engine.dispose()
    header = (
        "-- A new SQLite store at the head revision: what the migrations in versions/ create, as SQLite\n"
        "-- keeps it (bpestore/store/migrate.py, sqlite_head_text). Generated, never edited by hand; a test\n"
        "-- checks that it matches the migrations.\n\n"
    )
    body = "".join(f"{statement};\n\n" for statement in rows)
    return header + body + f"INSERT INTO alembic_version (version_num) VALUES ('{revision}');\n"


def write_sqlite_head() -> Path:
    """Write :func:`sqlite_head_text` into :data:`SQLITE_HEAD_FILE`; returns its path."""
    path = migrations_dir() / SQLITE_HEAD_FILE
    path.write_text(sqlite_head_text(), encoding="utf-8")
    sqlite_head_statements.cache_clear()
    return path
