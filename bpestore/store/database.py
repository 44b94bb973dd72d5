"""``Store``: named, versioned tokenizers side by side in one database.

A plain path means a SQLite file (created on first use); any SQLAlchemy URL is accepted, and
PostgreSQL (``postgresql://user@host/db``, driver psycopg 3) is tested as well as SQLite. Every
write is one transaction, so an error or Ctrl-C never leaves a partial tokenizer behind.

Writers queue, one at a time, on both: on SQLite, write transactions start with ``BEGIN
IMMEDIATE`` and the database runs in WAL mode (so readers never wait for writers); on PostgreSQL,
write transactions first take a transaction-level advisory lock (:data:`WRITE_LOCK_KEY`), which
serialises them as SQLite's write lock does (creating the schema of a new database included), while
readers go on reading what was committed. Both wait up to the busy timeout. On PostgreSQL the big
tables are filled with ``COPY``.
"""

from __future__ import annotations

import builtins
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from itertools import repeat
from pathlib import Path
from typing import Any, Protocol, Self

from sqlalchemy import create_engine, delete, event, func, insert, select, type_coerce, update
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import StaticPool
from sqlalchemy.types import NullType

from . import bulk, schema
from ..engine import PretokenCounts
from ..errors import (
    DamagedStoreError,
    ReadOnlyStoreError,
    StoreError,
    StoreLockTimeoutError,
    StoreNotFoundError,
    StoreUnavailableError,
    TokenizerNotFoundError,
)
from ..model import BPEModel, PackedMerges
from ..pretokenize.patterns import name_of_pattern
from .checked import Row, checked_merge_rows, checked_vocab_rows, described
from .rows import StoredWarm, MERGES_SQL, VOCAB_SQL, checked_warm, model_from_rows, pipeline_from_json, pipeline_json, pipeline_lines
from .packed import PACKED_SQL, pack, unpack
from .migrate import database_state, sqlite_file_state, upgrade_to_head
from ..progress import progress_bar
from .refs import check_name, parse_ref
from .sqlite_uri import connect_sqlite, read_only_reason, sqlite_uri, text_or_raw_bytes

DEFAULT_LOCK_TIMEOUT_SECONDS = 120.0
LOCK_TIMEOUT_VARIABLE = "BPESTORE_LOCK_TIMEOUT"
"""The environment variable that sets how long a writer waits for the store's write lock when
``Store(lock_timeout=)`` (or ``--lock-timeout``) is not given."""
WRITE_LOCK_KEY = 0x6270_6573_746F_7265  # b"bpestore": the PostgreSQL advisory lock writers take
"""The key of the transaction-level advisory lock every write transaction on PostgreSQL takes
first (advisory locks belong to one database, so stores in other databases do not wait)."""
_POSTGRES_CONNECT_TIMEOUT_SECONDS = 10


class HasModel(Protocol):
    """Anything that carries a :class:`BPEModel` (a ``bpestore.Tokenizer`` does)."""

    @property
    def model(self) -> BPEModel: ...


@dataclass(frozen=True)
class TokenizerInfo:
    """What the store knows about one stored tokenizer (everything but its vocab and merges)."""

    name: str
    version: int
    vocab_size: int
    num_merges: int
    special_tokens: list[str]
    pattern: str
    merge_rule: str
    created_at: datetime
    source: str
    """Where it came from, in words: ``trained``, ``saved from Python``, or ``imported from
    <format> <paths>`` (built from ``source_format`` and ``source_paths``)."""
    source_format: str | None
    """The format an import read (``gpt2``, ``hf``, ``tiktoken``); None if it was not imported."""
    source_paths: list[str] | None
    """The files an import read, resolved; None if it was not imported."""
    training_seconds: float | None
    training_params: dict[str, Any] | None
    corpus_path: str | None
    """Where the corpus it was trained on came from: a file, a JSON list of files, a counts file,
    a Dask count's inputs (see ``corpus_origin``); None if it was not trained here."""
    corpus_sha256: str | None
    corpus_bytes: int | None
    corpus_origin: str | None = None
    """How the corpus's counts were made: ``files`` (counted here from ``corpus_path``),
    ``counts`` (given as counts) or ``dask`` (counted on a Dask cluster)."""
    added_tokens: list[str] = field(default_factory=list)
    """Its added tokens (``add-tokens``): ordinary tokens always encoded whole."""
    normalizer: str | None = None
    """What normalizes its text before it is pre-tokenized, in a line (``NFC``; None: nothing)."""
    pipeline: list[tuple[str, str]] = field(default_factory=list)
    """What its pipeline holds besides the pattern, one (label, text) line each (an imported
    tokenizer's normalizer, pre-tokenizer, post-processor, decoder, model-folder config)."""

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def base_ref(self) -> str | None:
        """The ref of the tokenizer whose training this one continued (``train --from``,
        ``Store.train(base=...)``; kept in its training parameters as ``base``): its lineage.
        None if it was not continued."""
        base = (self.training_params or {}).get("base")
        return base if isinstance(base, str) else None

    @property
    def reshaped_from(self) -> str | None:
        """The ref of the tokenizer this one was reshaped from (``trim``, ``Store.trim`` and
        ``Store.drop_unused``; kept in its training parameters as ``reshaped_from``, how in
        ``how``): its lineage. None if it was not reshaped."""
        origin = (self.training_params or {}).get("reshaped_from")
        return origin if isinstance(origin, str) else None

    @property
    def pattern_name(self) -> str | None:
        """The name of its pre-tokenizer (``gpt2``, ``cl100k_base``, ``o200k_base``), or None for
        another regex."""
        return name_of_pattern(self.pattern)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ref"] = self.ref
        data["pattern_name"] = self.pattern_name
        data["created_at"] = self.created_at.isoformat()
        return data


def _source_text(source: str, source_format: str | None, source_paths: list[str] | None) -> str:
    if source_format is None:
        return source
    return f"imported from {source_format} {' '.join(source_paths or [])}".rstrip()


# SQLAlchemy's own database kinds (and its alias postgres): a store named like one of these but
# without '://' ('sqlite', 'sqlite:', 'postgresql:x') is a URL written wrong, not a file name.
_DATABASE_KINDS = frozenset({"sqlite", "postgresql", "postgres", "mysql", "mariadb", "oracle", "mssql"})


def _as_url(path_or_url: str | os.PathLike[str]) -> URL:
    """A SQLAlchemy URL as given, or a path (any characters, '?' and '#' included) as SQLite.
    ValueError for an empty string and for a URL without its '://'."""
    if not isinstance(path_or_url, (str, os.PathLike)):
        raise TypeError(f"a store is a path or a database URL (str or os.PathLike), not {type(path_or_url).__name__}")
    text = os.fsdecode(path_or_url)
    if not text:
        raise ValueError("the store is empty: give a SQLite file path or a database URL (such as postgresql://user@host/db)")
    kind, colon, rest = text.partition(":")
    if "://" not in text and kind.partition("+")[0].lower() in _DATABASE_KINDS and (colon or not rest):
        raise ValueError(
            f"the store {text!r} looks like a database URL without its '://' (such as sqlite:///tokenizers.db or "
            f"postgresql://user@host/db); for a file of that name, write ./{text}"
        )
    if "://" in text:
        try:
            url = make_url(text)
        except sa_exc.ArgumentError as error:
            raise StoreUnavailableError(f"unusable store URL {text!r}: {error}") from None
        # SQLAlchemy's default PostgreSQL driver is psycopg2; bpestore's (the postgres extra) is psycopg 3.
        return url.set(drivername="postgresql+psycopg") if url.drivername in ("postgresql", "postgres") else url
    return URL.create("sqlite", database=str(Path(text).expanduser()))


def is_in_memory(path_or_url: str | os.PathLike[str]) -> bool:
    """Whether ``path_or_url`` names an in-memory SQLite database (``sqlite://``), which lives only
    as long as the store opened on it; the errors of :class:`ModelStore` for what names no store."""
    url = _as_url(path_or_url)
    return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")


# The package that provides each database driver SQLAlchemy may ask for, where its name differs.
_DRIVER_PACKAGES = {
    "psycopg": "psycopg[binary]",
    "psycopg2": "psycopg2-binary",
    "MySQLdb": "mysqlclient",
    "pymysql": "PyMySQL",
    "cx_Oracle": "cx-Oracle",
    "mysql": "mysql-connector-python",
}


def _create_engine(url: URL, location: str, sqlite_timeout: float | None) -> Engine:
    """``create_engine``, with a missing driver or an unknown kind of database as one clear line."""
    if sqlite_timeout is not None:
        connect_args: dict[str, Any] = {"timeout": sqlite_timeout}
    elif url.get_backend_name() == "postgresql" and "connect_timeout" not in url.query:
        connect_args = {"connect_timeout": _POSTGRES_CONNECT_TIMEOUT_SECONDS}  # an unreachable host: an error, not a hang
    else:
        connect_args = {}
    try:
        return create_engine(url, connect_args=connect_args)
    except ModuleNotFoundError as error:
        module = (error.name or "").partition(".")[0] or str(error)
        package = _DRIVER_PACKAGES.get(module, module)
        extra = " (or: pip install 'bpestore[postgres]')" if module == "psycopg" else ""
        raise StoreUnavailableError(
            f"the store {location} needs the Python package {package} (module {module}), which is not installed: "
            f"pip install '{package}'{extra}"
        ) from None
    except sa_exc.NoSuchModuleError:
        raise StoreUnavailableError(f"unusable store URL {location}: SQLAlchemy knows no database {url.drivername!r}") from None
    except (sa_exc.ArgumentError, sa_exc.InvalidRequestError, TypeError, ValueError) as error:
        raise StoreUnavailableError(f"unusable store URL {location}: {error}") from None


def lock_timeout_seconds(lock_timeout: float | None) -> float:
    """How long a writer waits for the write lock: ``lock_timeout`` (seconds) if given, else
    ``$BPESTORE_LOCK_TIMEOUT``, else :data:`DEFAULT_LOCK_TIMEOUT_SECONDS`. ValueError (naming
    where it came from) for anything but a finite number of seconds, 0 or more."""
    where, value = "lock_timeout", lock_timeout
    if value is None:
        text = os.environ.get(LOCK_TIMEOUT_VARIABLE, "").strip()
        if not text:
            return DEFAULT_LOCK_TIMEOUT_SECONDS
        where = LOCK_TIMEOUT_VARIABLE
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{LOCK_TIMEOUT_VARIABLE} must be a number of seconds (0 or more), got {text!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{where} must be a number of seconds, not {type(value).__name__}")
    if not 0 <= value < float("inf"):
        raise ValueError(f"{where} must be a number of seconds, 0 or more, got {value!r}")
    return float(value)


def _in_memory_engine(url: URL, location: str, busy_timeout: float) -> Engine:
    """The engine of an in-memory SQLite store: its one connection, usable from the thread that
    opened the store only. SQLAlchemy's default for such a URL (SingletonThreadPool) would give
    each thread a database of its own, empty, and past 5 threads close connections that other
    threads are using (a crash in SQLite); sharing the one connection between threads would be
    no safer. Another thread gets a :class:`StoreError` saying so."""
    owner = threading.get_ident()

    class OneThreadPool(StaticPool):
        # Refused before the pool hands the connection out: refusing later (a "checkout" event)
        # would make SQLAlchemy invalidate the connection, and with it the whole database.
        def _do_get(self) -> Any:
            if threading.get_ident() != owner:
                raise StoreError(
                    f"the in-memory store {location} can be used only from the thread that opened it (its database "
                    "lives in one SQLite connection, which threads must not share); for a store shared by threads, use a file"
                )
            return super()._do_get()

    return create_engine(url, poolclass=OneThreadPool, connect_args={"timeout": busy_timeout, "check_same_thread": False})


def _is_lock_timeout(error: BaseException | None) -> bool:
    """Whether ``error`` (the driver's) says the write lock was not had in time: SQLite's
    SQLITE_BUSY ("database is locked"), PostgreSQL's lock_not_available (55P03)."""
    if isinstance(error, sqlite3.Error):
        return (getattr(error, "sqlite_errorname", "") or "").startswith("SQLITE_BUSY")
    return getattr(error, "sqlstate", None) == "55P03"


# How long a connection to a WAL store waits at most for another process's moment of opening or
# closing it (see ModelStore.__init__).
_WAL_MOMENT_SECONDS = 5.0


def _is_wal_file(path: Path) -> bool:
    """Whether the SQLite file ``path`` is in WAL mode (its header's read version, byte 18, is 2)."""
    try:
        with open(path, "rb") as file:
            header = file.read(20)
    except OSError:
        return False
    return len(header) > 18 and header[18] == 2


def _disk_is_full(location: str) -> bool:
    """Whether the file system holding ``location`` has no space left (SQLite reports a full disk
    as an I/O error when it cannot grow its shared-memory file)."""
    try:
        status = os.statvfs(Path(location).parent)
    except (OSError, ValueError):
        return False
    return status.f_bavail == 0


def _sqlite_error(location: str, error: sqlite3.Error, writing: bool) -> StoreError | None:
    """The StoreError that says what a SQLite error about the disk or the file means, or None for
    an error that is not of that kind (a bug, a constraint, ...)."""
    name = getattr(error, "sqlite_errorname", "") or ""
    nothing = "; nothing was written" if writing else ""
    if name == "SQLITE_FULL" or (name.startswith("SQLITE_IOERR") and _disk_is_full(location)):
        return StoreUnavailableError(f"cannot write to {location}: the disk is full{nothing}")
    if name.startswith("SQLITE_READONLY"):
        return ReadOnlyStoreError(f"cannot write to {location}: {error}{nothing}")
    if name.startswith(("SQLITE_IOERR", "SQLITE_CANTOPEN", "SQLITE_PERM")):
        return StoreUnavailableError(f"cannot use {location}: {error} (SQLite's {name}){nothing}")
    if name in ("SQLITE_NOTADB", "SQLITE_CORRUPT"):
        return DamagedStoreError(f"{location} is damaged or not a database: {error}")
    if name == "SQLITE_CONSTRAINT_TRIGGER":  # RAISE() in a trigger someone added to the store
        return StoreError(f"{location}: a trigger refused the write: {error}; that write was rolled back")
    return None


def readable_text(token: bytes, postgresql: bool) -> str:
    """``vocab.text``: the token as UTF-8 with invalid bytes replaced by U+FFFD, and on PostgreSQL,
    whose text cannot hold the character NUL, NUL replaced too (the ``token`` bytes stay exact)."""
    text = token.decode("utf-8", errors="replace")
    return text.replace("\x00", "\ufffd") if postgresql else text


def _token_kind(token_id: int, token: bytes, special_ids: set[int], merged: set[bytes]) -> str:
    if token_id in special_ids:
        return "special"
    if len(token) == 1:
        return "byte"
    return "merge" if token in merged else "other"


class ModelStore:
    """A database of tokenizers (their vocab, merges and settings), corpora and pre-token counts.
    Use as a context manager, or call :meth:`close`.

    It stores and reads; it neither trains nor encodes. :class:`bpestore.Store`
    (:mod:`bpestore.workflow`) adds training into the store, loading as a ``Tokenizer`` and diffs.
    """

    # Defaults for subclasses that make their own engine (the web explorer's read-only store).
    read_only_reason: str | None = None
    """Why the store cannot be written, or None if it can."""
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT_SECONDS
    """How long, in seconds, a write waits for another writer to finish before it fails."""
    lock_waited: float = 0.0
    """How long the last write transaction waited for the write lock, in seconds."""

    def __init__(
        self,
        path_or_url: str | os.PathLike[str] = "bpestore.db",
        *,
        lock_timeout: float | None = None,
        create: bool = True,
    ):
        """Open the store at ``path_or_url``.

        With ``create=True`` (the default) a missing or empty SQLite file, or an empty database,
        becomes a new store, and the store is put in WAL mode. With ``create=False`` (every read of
        the command line, ``Tokenizer.from_db``) there must be a store already
        (:class:`~bpestore.errors.StoreNotFoundError` otherwise), and opening writes nothing, with
        one exception: a bpestore store at an older schema revision is upgraded, as any open does.

        A store that cannot be written (a read-only file, directory or file system) opens for
        reading; writing to it raises :class:`~bpestore.errors.ReadOnlyStoreError`.

        Writers take the store's write lock one at a time, for their final inserts and commit
        only (counting, merging and reading files happen before). ``lock_timeout``: how long, in
        seconds, a write waits for another writer's to finish (default ``$BPESTORE_LOCK_TIMEOUT``,
        else 120); past it, :class:`~bpestore.errors.StoreLockTimeoutError` says so. Readers never
        wait.
        """
        self._connect(path_or_url, lock_timeout, create)
        with self._errors():
            self._migrate(create)
            self._configure(create)

    def _address(self, path_or_url: str | os.PathLike[str]) -> URL:
        """Read where the store is: sets ``url``, ``is_sqlite``, ``is_postgresql`` and
        ``location`` (for messages: the file for SQLite, else the URL without its password);
        returns the SQLAlchemy URL (a path is a SQLite file; ``postgresql://`` means psycopg 3)."""
        url = _as_url(path_or_url)
        self.url = url.render_as_string(hide_password=False)
        self.is_sqlite = url.get_backend_name() == "sqlite"
        self.is_postgresql = url.get_backend_name() == "postgresql"
        self.location = url.database if self.is_sqlite and url.database else url.render_as_string(hide_password=True)
        return url

    def _server_engine(self, url: URL) -> Engine:
        """An engine for a database server at ``url`` (its driver, PostgreSQL's connect timeout,
        one line for a missing driver)."""
        return _create_engine(url, self.location, None)

    def _connect(self, path_or_url: str | os.PathLike[str], lock_timeout: float | None, create: bool) -> None:
        """The first step of opening (see :meth:`__init__`): where the store is
        (:meth:`_address`), and an engine to it, set up for this store's transactions; a SQLite
        file is looked at (what state it is in, whether it can be written) and made if missing."""
        url = self._address(path_or_url)
        self.lock_timeout = busy_timeout = lock_timeout_seconds(lock_timeout)
        self.read_only_reason = None
        self._sqlite_file: Path | None = None
        self._sqlite_parameters: dict[str, str] = {}
        self._found_state = "unknown"  # the file's, for _migrate
        # How long a connection waits on a lock that is no writer's: on a WAL store, another
        # process's moment of opening or closing (its recovery, its last close's checkpoint),
        # which a reader never waits for otherwise; so a lock timeout of 0 still opens and reads
        # (readers of a store being written failed now and then). Writes wait for the write
        # lock up to lock_timeout (_begin_sqlite_transaction); on a rollback-journal file a
        # writer holds the whole file, and everything waits up to lock_timeout.
        self._sqlite_busy_seconds = busy_timeout
        if self.is_sqlite and url.database and url.database != ":memory:":
            self._sqlite_file = database = Path(url.database)
            if _is_wal_file(database):
                self._sqlite_busy_seconds = max(busy_timeout, _WAL_MOMENT_SECONDS)
            self._found_state = sqlite_file_state(database, self._sqlite_busy_seconds)
            self._open_sqlite_file(database, self._found_state, create)
            self.engine: Engine = create_engine(url, creator=self._connect_sqlite_file)
        elif self.is_sqlite:  # in memory: the database lives in one connection
            self.engine = _in_memory_engine(url, self.location, busy_timeout)
        else:
            self.engine = self._server_engine(url)
        if self.is_sqlite:
            event.listen(self.engine, "connect", _configure_sqlite_connection)
            event.listen(self.engine, "begin", self._begin_sqlite_transaction)
        elif self.is_postgresql:
            event.listen(self.engine, "begin", self._begin_postgresql_transaction)

    def _migrate(self, create: bool) -> None:
        """The second step: a store at an older schema revision is upgraded, an empty database
        made a store (``create``; else StoreNotFoundError for a database server's)."""
        state = self._found_state
        if not create and not self.is_sqlite:
            with self.engine.connect() as connection:
                state = database_state(connection, self.location)
            if state == "new":
                raise StoreNotFoundError(f"no store at {self.location} (the database has no bpestore tables): only writes (train, import) create one")
        if state != "current":
            upgrade_to_head(self.engine, self.location)

    def _configure(self, create: bool) -> None:
        """The last step: a SQLite file that can be written goes into WAL mode (``create``), and
        whether the PostgreSQL user may write is found out."""
        if self._sqlite_file is not None and self.read_only_reason is None and create:
            self._use_wal()
        if self.is_postgresql:
            self.read_only_reason = self._postgresql_read_only_reason()

    def _open_sqlite_file(self, database: Path, state: str, create: bool) -> None:
        """Decide how to connect to the SQLite file ``database`` (see :meth:`__init__`)."""
        if state in ("missing", "new"):
            if not create:
                what = "the file is empty" if state == "new" else "no such file"
                raise StoreNotFoundError(f"no store at {database} ({what}): only writes (train, import) create one")
            if not database.parent.is_dir():
                raise FileNotFoundError(f"cannot create {database}: directory {database.parent} does not exist")
            reason = read_only_reason(database if state == "new" else database.parent)
            if reason is not None:
                raise ReadOnlyStoreError(f"cannot create a store at {database}: {reason}")
            self._sqlite_parameters = {"mode": "rwc"}
            return
        waiting_since = time.monotonic()
        try:
            connection, self._sqlite_parameters = connect_sqlite(database, timeout=self._sqlite_busy_seconds)
        except sqlite3.Error as error:
            # (_sqlite_error is None for errors that are not the disk's: raising None was a TypeError.)
            if _is_lock_timeout(error):  # a writer in rollback-journal mode held the file all along
                raise self._lock_timeout_error(waiting_since) from None
            translated = _sqlite_error(str(database), error, writing=False)
            if translated is None:
                raise
            raise translated from None
        connection.close()
        if self._sqlite_parameters["mode"] != "rw":
            self.read_only_reason = read_only_reason(database) or "SQLite can open it only for reading"
            if state == "older":
                raise ReadOnlyStoreError(
                    f"{database} is a bpestore store at an older schema revision, which this bpestore must "
                    f"upgrade, but it cannot be written ({self.read_only_reason})"
                )

    def _connect_sqlite_file(self) -> sqlite3.Connection:
        assert self._sqlite_file is not None
        return sqlite3.connect(
            sqlite_uri(self._sqlite_file, **self._sqlite_parameters), uri=True, timeout=self._sqlite_busy_seconds, check_same_thread=False
        )

    def _begin_sqlite_transaction(self, connection: Connection) -> None:
        """BEGIN, or for a write BEGIN IMMEDIATE: it takes the write lock up front, so that two
        writers queue instead of one failing on upgrade, waiting for it up to :attr:`lock_timeout`
        (the connection's busy timeout otherwise covers only a moment's lock: see __init__)."""
        if not connection.get_execution_options().get("bpestore_write", False):
            connection.exec_driver_sql("BEGIN")
            return
        if self._sqlite_busy_seconds == self.lock_timeout:
            connection.exec_driver_sql("BEGIN IMMEDIATE")
            return
        driver = connection.connection.driver_connection
        assert driver is not None  # (a connection in use)
        driver.execute(f"PRAGMA busy_timeout = {round(self.lock_timeout * 1000)}")
        try:
            connection.exec_driver_sql("BEGIN IMMEDIATE")
        finally:
            driver.execute(f"PRAGMA busy_timeout = {round(self._sqlite_busy_seconds * 1000)}")

    def _begin_postgresql_transaction(self, connection: Connection) -> None:
        """A write transaction waits (up to the busy timeout) for the write lock, so that writers
        run one at a time: what SQLite's ``BEGIN IMMEDIATE`` does. Without it two writers race on
        the unique constraints (versions, corpora, a new database's schema) and one fails."""
        options = connection.get_execution_options()
        if options.get("bpestore_write", False):
            connection.exec_driver_sql(f"SET LOCAL lock_timeout = {max(1, round(self.lock_timeout * 1000))}")
            if options.get("bpestore_store_lock", True):
                connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({WRITE_LOCK_KEY})")

    def _postgresql_read_only_reason(self) -> str | None:
        """Why the server's user may not write this store (the privileges it lacks), or None:
        asked once, at open, so that a write is refused before any work (counting a corpus for
        an hour, say), not at its first INSERT."""
        with self.engine.connect() as connection:
            user = connection.exec_driver_sql("SELECT current_user").scalar()
            missing = [*connection.exec_driver_sql(
                "SELECT p.privilege || ' on ' || t.name FROM unnest(%(tables)s::text[]) WITH ORDINALITY t(name, i) "
                "CROSS JOIN unnest(ARRAY['INSERT', 'UPDATE', 'DELETE']) WITH ORDINALITY p(privilege, j) "
                "WHERE NOT has_table_privilege(t.name, p.privilege) ORDER BY i, j",
                {"tables": sorted(schema.metadata.tables)},
            ).scalars()]
            missing += connection.exec_driver_sql(
                "SELECT 'USAGE on ' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                # (CASE: the server may test the privilege before the kind, and a table is no sequence)
                "WHERE c.relkind = 'S' AND n.nspname = current_schema() "
                "AND NOT CASE WHEN c.relkind = 'S' THEN has_sequence_privilege(c.oid, 'USAGE') ELSE true END "
                "ORDER BY c.relname"
            ).scalars().all()
        if not missing:
            return None
        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        return f"the user {user!r} may not write this store (no {shown})"

    def _use_wal(self) -> None:
        """Put the store in WAL mode (readers then never wait for writers). The switch needs the
        database to itself for a moment, and SQLite does not wait for that on its own, so retry
        while other processes hold it (several creating one new store at once, say)."""
        connection = self.engine.raw_connection()
        try:
            sqlite = connection.driver_connection
            assert sqlite is not None  # (a connection just checked out of the pool)
            deadline = time.monotonic() + self.lock_timeout
            while True:
                try:
                    if sqlite.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                        sqlite.execute("PRAGMA journal_mode = WAL").fetchone()
                    return
                except sqlite3.OperationalError as error:
                    if getattr(error, "sqlite_errorname", "") not in ("SQLITE_BUSY", "SQLITE_LOCKED") or time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)
        finally:
            connection.close()

    @contextmanager
    def _errors(self, writing: bool = False, waiting_since: float | None = None) -> Iterator[None]:
        """Database errors that are the disk's or the system's, as one clear StoreError; a write
        lock not had within the lock timeout (asked for at ``waiting_since``, a monotonic time)
        as :class:`StoreLockTimeoutError`."""
        try:
            yield
        except DBAPIError as error:
            if waiting_since is not None and _is_lock_timeout(error.orig):
                raise self._lock_timeout_error(waiting_since) from None
            if getattr(error.orig, "sqlstate", None) == "P0001":  # raise_exception: a trigger's RAISE (PostgreSQL)
                reason = (str(error.orig).strip().splitlines() or ["raised"])[0]
                raise StoreError(f"{self.location}: a trigger refused the write: {reason}; that write was rolled back") from None
            if getattr(error.orig, "sqlstate", None) == "42501":  # insufficient_privilege (PostgreSQL)
                reason = (str(error.orig).strip().splitlines() or ["permission denied"])[0]
                raise ReadOnlyStoreError(f"cannot write to {self.location}: the server's user may not ({reason}); nothing was written") from None
            if isinstance(error.orig, sqlite3.Error):
                if (translated := _sqlite_error(self.location, error.orig, writing)) is not None:
                    raise translated from None
            elif isinstance(error, (sa_exc.OperationalError, sa_exc.InterfaceError)):  # e.g. no server there
                reason = (str(error.orig).strip().splitlines() or [type(error.orig).__name__])[0]
                raise StoreUnavailableError(f"cannot use the store {self.location}: {reason}") from None
            raise
        except sqlite3.Error as error:
            if waiting_since is not None and _is_lock_timeout(error):
                raise self._lock_timeout_error(waiting_since) from None
            if (translated := _sqlite_error(self.location, error, writing)) is not None:
                raise translated from None
            raise

    def _lock_timeout_error(self, waiting_since: float) -> StoreLockTimeoutError:
        waited = time.monotonic() - waiting_since
        return StoreLockTimeoutError(
            f"another writer holds the store {self.location}: waited {waited:.1f} s for its write lock "
            f"(the lock timeout is {self.lock_timeout:g} s: --lock-timeout SECONDS or {LOCK_TIMEOUT_VARIABLE}); "
            "nothing was written",
            waited,
        )

    def check_writable(self) -> None:
        """Raise ReadOnlyStoreError if the store cannot be written (before any long work)."""
        if self.read_only_reason is not None:
            raise ReadOnlyStoreError(f"cannot write to {self.location}: {self.read_only_reason}")

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.location!r})"

    @contextmanager
    def _transaction(self, write: bool = False, *, store_lock: bool = True, on: Connection | None = None) -> Iterator[Connection]:
        """A transaction on a connection of the store's own (``on``: that one, which is not in a
        transaction). A write one first takes the store's write lock (SQLite's ``BEGIN
        IMMEDIATE``, PostgreSQL's advisory lock), waiting up to :attr:`lock_timeout`;
        :attr:`lock_waited` then says how long it waited, in seconds. ``store_lock=False``: on
        PostgreSQL, a write that races no other writer (its rows are its own, keyed by a new
        corpus) takes no advisory lock, so that others need not wait for it; SQLite has one write
        lock for the whole file and always takes it."""
        if write:
            self.check_writable()
        asked = time.monotonic()
        connected = self.engine.connect() if on is None else nullcontext(on)
        with self._errors(writing=write, waiting_since=asked if write else None), connected as connection:
            connection.execution_options(bpestore_write=write, bpestore_store_lock=store_lock)
            try:
                with connection.begin():
                    if write:
                        self.lock_waited = time.monotonic() - asked
                    yield connection
            finally:
                if on is not None:  # the caller's connection goes on reading (its next BEGIN takes no lock)
                    connection.execution_options(bpestore_write=False, bpestore_store_lock=True)

    # -- reading ----------------------------------------------------------------------------------

    @staticmethod
    def _tokenizers_with_corpora() -> Any:
        """``tokenizers`` rows joined with what their corpus says (``_info`` reads them)."""
        t, c = schema.tokenizers, schema.corpora
        # created_at as the driver gives it (ISO text on SQLite, a timestamp on PostgreSQL): the
        # DateTime type's own conversion fails with a TypeError on a row edited to hold a number,
        # where _info names the damaged row instead.
        columns = [type_coerce(column, NullType()).label("created_at") if column.name == "created_at" else column for column in t.c]
        return select(
            *columns, c.c.path.label("corpus_path"), c.c.sha256.label("corpus_sha256"), c.c.size_bytes.label("corpus_bytes"),
            c.c.origin.label("corpus_origin"),
        ).select_from(t.outerjoin(c, t.c.corpus_id == c.c.id))

    def _resolve(self, connection: Connection, ref: str) -> Any:
        """The ``tokenizers`` row of ``ref``, joined with its corpus; TokenizerNotFoundError if none."""
        name, version = parse_ref(ref)
        t = schema.tokenizers
        query = self._tokenizers_with_corpora().where(t.c.name == name)
        query = query.where(t.c.version == version) if version else query.order_by(t.c.version.desc()).limit(1)
        row = connection.execute(query).first()
        if row is not None:
            return row
        if version is not None:
            versions = connection.execute(select(t.c.version).where(t.c.name == name).order_by(t.c.version)).scalars().all()
            if versions:
                raise TokenizerNotFoundError(f"{name!r} has no version {version} (versions: {', '.join(map(str, versions))})")
        names = connection.execute(select(t.c.name).distinct().order_by(t.c.name)).scalars().all()
        known = ", ".join(map(str, names)) if names else "none: the store is empty"  # (str: a damaged name is shown as bytes)
        if not all(isinstance(found, str) for found in names):  # a name edited by hand into a blob or a number
            damaged = next(found for found in names if not isinstance(found, str))
            known += f"; tokenizers.name holds {described(damaged)} in a damaged row, not text"
        raise TokenizerNotFoundError(f"no tokenizer named {name!r} in {self.location} (names: {known})")

    def _info(self, connection: Connection, row: Any) -> TokenizerInfo:
        """The row's metadata, each column read as the type it promises (else DamagedStoreError)."""
        ref = f"{row.name}@{row.version}"
        place = Row(self.location, ref, "tokenizers", f"id {row.id}")
        corpus = Row(self.location, ref, "corpora", f"id {row.corpus_id}")
        num_merges = connection.execute(
            select(func.count()).select_from(schema.merges).where(schema.merges.c.tokenizer_id == row.id)
        ).scalar_one()
        source_format = place.text("source_format", row.source_format, nullable=True)
        source_paths = place.json_list_of_text("source_paths", row.source_paths, nullable=True)
        pipeline = pipeline_from_json(place, row.pipeline)
        return TokenizerInfo(
            name=place.text("name", row.name),
            version=place.integer("version", row.version),
            vocab_size=place.integer("vocab_size", row.vocab_size),
            num_merges=num_merges,
            special_tokens=place.json_list_of_text("special_tokens", row.special_tokens),
            pattern=place.text("pattern", row.pattern),
            merge_rule=place.text("merge_rule", row.merge_rule),
            created_at=place.moment("created_at", row.created_at),
            source=_source_text(place.text("source", row.source), source_format, source_paths),
            source_format=source_format,
            source_paths=source_paths,
            training_seconds=place.number("training_seconds", row.training_seconds, nullable=True),
            training_params=place.json_object("training_params", row.training_params or None, nullable=True),
            corpus_path=corpus.text("path", row.corpus_path, nullable=True),
            corpus_sha256=corpus.text("sha256", row.corpus_sha256, nullable=True),
            corpus_bytes=corpus.integer("size_bytes", row.corpus_bytes, nullable=True),
            corpus_origin=corpus.text("origin", row.corpus_origin, nullable=True),
            added_tokens=place.json_list_of_text("added_tokens", row.added_tokens),
            normalizer=str(pipeline["normalizer"]) if pipeline.get("normalizer") is not None else None,
            pipeline=pipeline_lines(pipeline),
        )

    def info(self, ref: str) -> TokenizerInfo:
        """Metadata of one tokenizer (``name`` for the latest version or ``name@N``)."""
        with self._transaction() as connection:
            return self._info(connection, self._resolve(connection, ref))

    def list(self, name: str | None = None, *, damaged: builtins.list[DamagedStoreError] | None = None) -> list[TokenizerInfo]:
        """All tokenizers (or all versions of ``name``), by name then version. A row that cannot
        be read as its columns promise raises DamagedStoreError; given a list as ``damaged``, it
        is left out and its error appended there instead, so that the others can still be shown."""
        t = schema.tokenizers
        query = self._tokenizers_with_corpora().order_by(t.c.name, t.c.version)
        if name is not None:
            query = query.where(t.c.name == check_name(name))
        infos: builtins.list[TokenizerInfo] = []
        with self._transaction() as connection:
            for row in connection.execute(query):
                try:
                    infos.append(self._info(connection, row))
                except DamagedStoreError as error:
                    if damaged is None:
                        raise
                    damaged.append(error)
        return infos

    def load_model(self, ref: str) -> BPEModel:
        """The stored tokenizer ``ref`` (``name`` for the latest version, or ``name@N``) as a model."""
        with self._transaction() as connection:
            row = self._resolve(connection, ref)
            vocab_rows, merge_rows = self._vocab_and_merges(connection, row)
        return model_from_rows(
            row.special_tokens, row.pattern, row.merge_rule, vocab_rows, merge_rows, f"{row.name}@{row.version}", self.location,
            row.added_tokens, row.pipeline,
        )

    def _vocab_and_merges(
        self, connection: Connection, row: Any
    ) -> tuple[Mapping[int, bytes] | Iterable[tuple[int, bytes]], Iterable[tuple[bytes, bytes]] | PackedMerges]:
        tokenizer_id = row.id
        if self.is_sqlite:  # plain SQL: no per-row type processing on the hot path
            packed = connection.exec_driver_sql(PACKED_SQL, (tokenizer_id,)).scalar()
            if packed is not None:  # the packed copy (bpestore/store/packed.py), else the rows
                return unpack(packed, row.vocab_size, f"{row.name}@{row.version}", self.location, merges_now=False)
            ref = f"{row.name}@{row.version}"
            vocab = checked_vocab_rows(
                connection.exec_driver_sql(VOCAB_SQL, (tokenizer_id,)).fetchall(), self.location, ref, tokenizer_id, row.vocab_size
            )
            return vocab, checked_merge_rows(connection.exec_driver_sql(MERGES_SQL, (tokenizer_id,)).fetchall(), self.location, ref)
        packed = connection.execute(select(schema.packed_models.c.data).where(schema.packed_models.c.tokenizer_id == tokenizer_id)).scalar()
        if packed is not None:
            return unpack(bytes(packed), row.vocab_size, f"{row.name}@{row.version}", self.location, merges_now=False)
        v, m = schema.vocab, schema.merges
        vocab = connection.execute(select(v.c.token_id, v.c.token).where(v.c.tokenizer_id == tokenizer_id)).all()
        merges = connection.execute(
            select(m.c.left, m.c.right).where(m.c.tokenizer_id == tokenizer_id).order_by(m.c.rank)
        ).all()
        return vocab, merges

    def identical_versions(self, ref: str) -> builtins.list[str]:
        """The other versions of ``ref``'s name that hold the same tokenizer: the same vocab and
        merges (their packed copies equal), special and added tokens, pattern and merge rule. On a
        SQLite store (where the packed copies are); empty elsewhere or when ``ref`` has none."""
        if not self.is_sqlite:
            return []
        name, _ = parse_ref(ref)
        info = self.info(ref)
        query = (
            "SELECT o.version FROM tokenizers t JOIN packed_models tp ON tp.tokenizer_id = t.id"
            " JOIN tokenizers o ON o.name = t.name AND o.id != t.id JOIN packed_models op ON op.tokenizer_id = o.id"
            " WHERE t.name = ? AND t.version = ? AND op.data = tp.data AND o.pattern = t.pattern"
            " AND o.special_tokens = t.special_tokens AND o.added_tokens = t.added_tokens AND o.merge_rule = t.merge_rule"
            " AND o.pipeline IS t.pipeline"
            " ORDER BY o.version"
        )
        with self._transaction() as connection:
            versions = connection.exec_driver_sql(query, (name, info.version)).scalars().all()
        return [f"{name}@{version}" for version in versions]

    def refs(self) -> builtins.list[str]:
        return [info.ref for info in self.list()]

    # -- writing ----------------------------------------------------------------------------------

    def save(
        self,
        name: str,
        tokenizer: BPEModel | HasModel,
        *,
        source: str | None = None,
        source_format: str | None = None,
        source_paths: Sequence[str | os.PathLike[str]] | None = None,
        training_params: dict[str, Any] | None = None,
        training_seconds: float | None = None,
        progress: bool = False,
        warm: StoredWarm | None = None,
        before_commit: Callable[[str], object] | None = None,
    ) -> str:
        """Store ``tokenizer`` (a :class:`BPEModel` or a ``Tokenizer``) as the next version of
        ``name``; returns ``"name@version"``. ``warm``: its warm table, stored with it in the same
        transaction. ``before_commit(ref)``: called with the new ref inside that transaction, last;
        if it raises, nothing is stored (what must exist with the tokenizer, or not at all).

        ``source`` says where it came from (default ``"imported"`` when ``source_format`` is given,
        else ``"saved from Python"``); an import gives the format it read and the files.
        ``progress``: a bar while the vocab and merges are written.
        """
        check_name(name)
        model = tokenizer if isinstance(tokenizer, BPEModel) else getattr(tokenizer, "model", None)
        if not isinstance(model, BPEModel):
            raise TypeError(f"save takes a BPEModel or a Tokenizer, not {type(tokenizer).__name__}")
        if source is None:
            source = "imported" if source_format is not None else "saved from Python"
        paths = [os.fspath(path) for path in source_paths] if source_paths is not None else None
        with self._transaction(write=True) as connection:
            ref = self._insert_tokenizer(
                connection, name, model, corpus_id=None, source=source, source_format=source_format,
                source_paths=paths, training_params=training_params, training_seconds=training_seconds, progress=progress,
                warm=warm,
            )
            if before_commit is not None:
                before_commit(ref)
            return ref

    def _insert_tokenizer(
        self,
        connection: Connection,
        name: str,
        tokenizer: BPEModel,
        *,
        corpus_id: int | None,
        source: str,
        training_params: dict[str, Any] | None,
        training_seconds: float | None,
        source_format: str | None = None,
        source_paths: builtins.list[str] | None = None,
        progress: bool = False,
        warm: StoredWarm | None = None,
    ) -> str:
        t, names = schema.tokenizers, schema.tokenizer_names
        # Versions are never reused, even after deletions: a ref always means one tokenizer.
        last = connection.execute(select(names.c.last_version).where(names.c.name == name)).scalar()
        existing = connection.execute(select(func.max(t.c.version)).where(t.c.name == name)).scalar()
        # (a version edited by hand into text, in a table that is not STRICT, is named here, not compared with a number)
        Row(self.location, name, "tokenizer_names", f"name {name!r}").integer("last_version", last, nullable=True)
        Row(self.location, name, "tokenizers", f"the latest version of {name!r}").integer("version", existing, nullable=True)
        version = max(last or 0, existing or 0) + 1
        if last is None:
            connection.execute(insert(names).values(name=name, last_version=version))
        else:
            connection.execute(update(names).where(names.c.name == name).values(last_version=version))
        tokenizer_id = connection.execute(
            insert(t).values(
                name=name,
                version=version,
                created_at=datetime.now(timezone.utc).replace(tzinfo=None),
                vocab_size=tokenizer.vocab_size,
                pattern=tokenizer.pattern,
                special_tokens=json.dumps(tokenizer.special_tokens, ensure_ascii=False),
                added_tokens=json.dumps(tokenizer.added_tokens, ensure_ascii=False),
                pipeline=pipeline_json(tokenizer),
                merge_rule=tokenizer.merge_rule,
                corpus_id=corpus_id,
                training_params=json.dumps(training_params) if training_params is not None else None,
                training_seconds=training_seconds,
                source=source,
                source_format=source_format,
                source_paths=json.dumps(source_paths, ensure_ascii=False) if source_paths is not None else None,
            )
        ).inserted_primary_key[0]  # type: ignore[index]  # (an INSERT of one row: its key)
        self._insert_vocab_and_merges(connection, tokenizer_id, tokenizer, progress)
        if warm is not None:
            self._insert_warm(connection, tokenizer_id, warm)
        return f"{name}@{version}"

    @staticmethod
    def _insert_warm(connection: Connection, tokenizer_id: int, warm: StoredWarm) -> None:
        w = schema.warm_caches
        connection.execute(delete(w).where(w.c.tokenizer_id == tokenizer_id))
        connection.execute(
            insert(w).values(
                tokenizer_id=tokenizer_id, fingerprint=warm.fingerprint, entries=warm.entries, source=warm.source,
                data=warm.data, created_at=datetime.now(timezone.utc).replace(tzinfo=None),
            )
        )

    # -- warm tables: pre-tokens whose ids a tokenizer worked out ahead ----------------------------

    def save_warm(self, ref: str, warm: StoredWarm) -> str:
        """Keep ``warm`` as the warm table of the stored tokenizer ``ref``, in place of any it had;
        returns the tokenizer's full ref. TokenizerNotFoundError for a ``ref`` not stored."""
        self.check_writable()
        with self._transaction(write=True) as connection:
            row = self._resolve(connection, ref)
            self._insert_warm(connection, row.id, warm)
        return f"{row.name}@{row.version}"

    def warm_of(self, ref: str, *, data: bool = True) -> StoredWarm | None:
        """The warm table of the stored tokenizer ``ref``, or None; ``data=False`` leaves its
        bytes out (``b""``): what ``show`` tells needs only the rest."""
        w = schema.warm_caches
        # (created_at as stored, unprocessed: a value that is not a moment is named, not a TypeError in SQLAlchemy)
        columns = [w.c.fingerprint, w.c.entries, w.c.source, type_coerce(w.c.created_at, NullType()).label("created_at")]
        with self._transaction() as connection:
            found = self._resolve(connection, ref)
            row = connection.execute(select(*columns, *([w.c.data] if data else [])).where(w.c.tokenizer_id == found.id)).first()
        if row is None:
            return None
        where = Row(self.location, f"{found.name}@{found.version}", "warm_caches", f"tokenizer_id {found.id}")
        return checked_warm(row.fingerprint, row.entries, row.source, row.data if data else None, row.created_at, where, with_data=data)

    def delete_warm(self, ref: str) -> bool:
        """Delete the warm table of the stored tokenizer ``ref``; whether it had one."""
        self.check_writable()
        w = schema.warm_caches
        with self._transaction(write=True) as connection:
            tokenizer_id = self._resolve(connection, ref).id
            deleted = connection.execute(delete(w).where(w.c.tokenizer_id == tokenizer_id)).rowcount
        return bool(deleted)

    def _insert_vocab_and_merges(self, connection: Connection, tokenizer_id: int, tokenizer: BPEModel, progress: bool) -> None:
        """The rows of ``tokenizer``'s vocab and merges, in bulk (:mod:`.bulk`), then its packed copy."""
        special_ids = set(tokenizer.special_ids.values())
        merged = {left + right for left, right in tokenizer.merges}
        postgresql = self.is_postgresql
        ids = sorted(tokenizer.vocab)
        tokens = [tokenizer.vocab[token_id] for token_id in ids]
        id_of = dict(zip(tokens, ids))
        merges = tokenizer.merges
        # A new tokenizer has no packed copy for the rows' triggers to drop (migration 0004).
        unpacks = ("vocab_insert_unpacks", "merges_insert_unpacks")
        with progress_bar(progress, len(ids) + len(merges), "saving the vocab and merges", unit="rows", unit_scale=True) as bar, \
                bulk.sqlite_triggers_suspended(connection, *unpacks):
            self._bulk_insert(
                connection,
                schema.vocab,
                [
                    repeat(tokenizer_id),
                    ids,
                    tokens,
                    [_token_kind(token_id, token, special_ids, merged) for token_id, token in zip(ids, tokens)],
                    [readable_text(token, postgresql) for token in tokens],
                ],
            )
            bar.update(len(ids))
            self._bulk_insert(
                connection,
                schema.merges,
                [
                    repeat(tokenizer_id),
                    range(len(merges)),
                    [left for left, _ in merges],
                    [right for _, right in merges],
                    [id_of[left + right] for left, right in merges],
                ],
            )
            bar.update(len(merges))
        # After the rows: their triggers (SQLite; PostgreSQL since 0006) delete any packed copy of this
        # id. Other databases have no such triggers, so no copy: they are read from the rows.
        if self.is_sqlite or self.is_postgresql:
            connection.execute(insert(schema.packed_models).values(tokenizer_id=tokenizer_id, data=pack(tokenizer.vocab, tokenizer.merges)))

    def _bulk_insert(self, connection: Connection, table: Any, columns: Sequence[Any]) -> int:
        """Insert rows given as columns into ``table`` in bulk (:func:`.bulk.insert_rows`);
        returns the number of rows."""
        return bulk.insert_rows(connection, table, columns)

    def delete(self, ref: str) -> str:
        """Delete one tokenizer; its corpus and pre-token counts go too once no tokenizer uses them."""
        with self._transaction(write=True) as connection:
            row = self._resolve(connection, ref)
            connection.execute(delete(schema.tokenizers).where(schema.tokenizers.c.id == row.id))
            if row.corpus_id is not None:
                still_used = connection.execute(
                    select(func.count()).select_from(schema.tokenizers).where(schema.tokenizers.c.corpus_id == row.corpus_id)
                ).scalar_one()
                if not still_used:
                    self._delete_corpus(connection, row.corpus_id)
            return f"{row.name}@{row.version}"

    def _delete_corpus(self, connection: Connection, corpus_id: int) -> None:
        """Delete a corpus, its counts and its list of files (in bulk: :func:`.bulk.delete_corpus`)."""
        bulk.delete_corpus(connection, corpus_id)

    # -- corpora and their pre-token counts ----------------------------------------------------------

    def _find_corpus(self, connection: Connection, sha256: str, pattern: str, specials_json: str) -> int | None:
        c = schema.corpora
        return connection.execute(
            select(c.c.id).where(c.c.sha256 == sha256, c.c.pattern == pattern, c.c.special_tokens == specials_json)
        ).scalar()

    def corpora(self, corpus_id: int | None = None) -> builtins.list[CorpusInfo]:
        """The stored corpora (or the one ``corpus_id``), by id: what they hold and which
        tokenizers were trained on them."""
        c, f, t = schema.corpora, schema.corpus_files, schema.tokenizers
        query = select(c).order_by(c.c.id)
        if corpus_id is not None:
            query = query.where(c.c.id == corpus_id)
        with self._transaction() as connection:
            rows = connection.execute(query).all()
            files: dict[int, int] = dict(connection.execute(select(f.c.corpus_id, func.count()).group_by(f.c.corpus_id)).all())
            users: dict[int, builtins.list[str]] = {}
            for used, name, version in connection.execute(
                select(t.c.corpus_id, t.c.name, t.c.version).where(t.c.corpus_id.is_not(None)).order_by(t.c.name, t.c.version)
            ):
                users.setdefault(used, []).append(f"{name}@{version}")
        return [
            CorpusInfo(
                id=row.id, sha256=row.sha256, pattern=row.pattern, special_tokens=json.loads(row.special_tokens), path=row.path,
                origin=row.origin, size_bytes=row.size_bytes, distinct_pretokens=row.distinct_pretokens,
                total_pretokens=row.total_pretokens, created_at=row.created_at.replace(tzinfo=timezone.utc),
                files=files.get(row.id, 0), tokenizers=users.get(row.id, []),
            )
            for row in rows
        ]

    def tokenizers_trained_on(self, corpus_id: int) -> builtins.list[TokenizerInfo]:
        """The tokenizers trained on corpus ``corpus_id`` (not imported or saved), by name and version."""
        t = schema.tokenizers
        query = (
            self._tokenizers_with_corpora()
            .where(t.c.corpus_id == corpus_id, t.c.source == "trained")
            .order_by(t.c.name, t.c.version)
        )
        with self._transaction() as connection:
            return [self._info(connection, row) for row in connection.execute(query)]

    def corpus_of(self, ref_or_id: int | str) -> CorpusInfo:
        """A stored corpus, named by its id (an int, or digits) or by a tokenizer's ref (the
        corpus it was trained on); StoreError (TokenizerNotFoundError) if there is none."""
        if isinstance(ref_or_id, bool) or not isinstance(ref_or_id, (int, str)):
            raise TypeError(f"a corpus is named by its id or a tokenizer's ref, not {type(ref_or_id).__name__}")
        if isinstance(ref_or_id, int) or ref_or_id.isdigit():
            # (an id past SQLite's and PostgreSQL's 64-bit integers names no corpus: asking would overflow)
            found = self.corpora(int(ref_or_id)) if int(ref_or_id) < 2**63 else []
            if not found:
                raise StoreError(f"no corpus {ref_or_id} in {self.location} (bpestore count list shows the corpora)")
            return found[0]
        info = self.info(ref_or_id)
        with self._transaction() as connection:
            corpus_id = connection.execute(
                select(schema.tokenizers.c.corpus_id).where(schema.tokenizers.c.name == info.name, schema.tokenizers.c.version == info.version)
            ).scalar()
        if corpus_id is None:
            raise StoreError(f"{info.ref} was not trained here ({info.source}): it has no stored corpus")
        return self.corpora(corpus_id)[0]

    def pretoken_counts(self, corpus_id: int) -> PretokenCounts:
        """The stored counts of corpus ``corpus_id``, as the engine's counts (read in bulk:
        :func:`.bulk.read_counts`)."""
        c = schema.corpora
        with self._transaction() as connection:
            row = connection.execute(select(c.c.distinct_pretokens, c.c.total_pretokens).where(c.c.id == corpus_id)).first()
            if row is None:
                raise StoreError(f"no corpus {corpus_id} in {self.location}")
            return bulk.read_counts(connection, corpus_id, row.distinct_pretokens, row.total_pretokens)

    def _row_writes(self, rows: int) -> int:
        """How many rows saving a corpus of ``rows`` pre-tokens reports as written, staged and
        stored (a bar's total): :func:`.bulk.row_writes`."""
        return bulk.row_writes(self.engine.dialect.name, rows)

    @contextmanager
    def _staged_corpus(
        self, source: str, counts: PretokenCounts | Mapping[bytes, int], progress: bool, on_rows: Callable[[int], object] | None,
    ) -> Iterator[tuple[Connection, bulk.StagedCounts, Callable[[int], object]]]:
        """A connection of the store's own with ``counts`` (of ``source``, named in messages; the
        engine's, or a mapping) made ready to write on it (:func:`.bulk.staged_counts`: on
        SQLite, the slow part of writing the rows, done before the write lock is taken), and the
        callback told of rows written: ``on_rows`` (for a bar drawn elsewhere: another
        thread's), or with ``progress``, a bar's of every row written, staged and stored."""
        if not isinstance(counts, PretokenCounts):
            counts = PretokenCounts.from_dict(counts)
        if counts.total >= 1 << 63:
            raise ValueError(
                f"the pre-tokens of {source} are counted {counts.total} times in all, more than the store's 64-bit counts hold (2**63 - 1)"
            )
        # (rows are written per pre-token, twice on SQLite: staged, then copied; the bar counts
        # pre-tokens, as the user knows them)
        per_pretoken = max(1, self._row_writes(len(counts)) // max(1, len(counts)))
        with self._errors(writing=True), self.engine.connect() as connection, progress_bar(
            progress and on_rows is None, len(counts), "saving pre-token counts", unit="pre-tokens", unit_scale=True
        ) as bar:
            written = [0]

            def advance(rows: int) -> None:
                written[0] += rows
                bar.update(written[0] // per_pretoken - bar.n)

            report = on_rows or advance
            with bulk.staged_counts(connection, counts, report) as staged:
                yield connection, staged, report

    def _insert_corpus(
        self,
        connection: Connection,
        source: str,
        size_bytes: int,
        sha256: str,
        pattern: str,
        specials_json: str,
        staged: bulk.StagedCounts,
        origin: str = "files",
        files: Sequence[CorpusFile] = (),
        on_rows: Callable[[int], object] | None = None,
    ) -> int:
        """A new corpus: its row, its files (if counted from files), its counts' rows and their
        packed copy, in bulk (:func:`.bulk.write_counts`), from ``staged`` counts
        (:meth:`_staged_corpus`, on ``connection``). ``on_rows(n)``: told of each n more rows."""
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        corpus_id: int = connection.execute(
            insert(schema.corpora).values(
                sha256=sha256,
                pattern=pattern,
                special_tokens=specials_json,
                path=source,
                origin=origin,
                size_bytes=size_bytes,
                distinct_pretokens=len(staged.counts),
                total_pretokens=staged.counts.total,
                created_at=now,
            )
        ).inserted_primary_key[0]  # type: ignore[index]  # (an INSERT of one row: its key)
        if files:
            self._bulk_insert(
                connection,
                schema.corpus_files,
                [
                    repeat(corpus_id),
                    range(len(files)),
                    [file.path for file in files],
                    [file.sha256 for file in files],
                    [file.size_bytes for file in files],
                    [file.added_at or now for file in files],
                ],
            )
        bulk.write_counts(connection, corpus_id, staged, on_rows=on_rows)
        return corpus_id

    def _store_corpus(
        self, source: str, size_bytes: int, sha256: str, pattern: str, specials_json: str, counts: PretokenCounts,
        progress: bool, *, origin: str = "files", files: Sequence[CorpusFile] = (), on_rows: Callable[[int], object] | None = None,
    ) -> int:
        """Store a corpus and its counts (:meth:`_insert_corpus`) in a transaction of their own,
        unless the same corpus is stored already (by another process since it was looked for);
        returns its id. The counts are staged first, outside the write lock (:meth:`_staged_corpus`).
        On PostgreSQL the transaction takes no store-wide lock (writing a big corpus's rows
        takes seconds, and nothing else another writer does can collide with new rows of a new
        corpus): two stores of the same corpus at once meet at the corpora's unique key, where
        the second waits for the first and then takes its corpus."""
        locked = not self.is_postgresql
        try:
            with self._staged_corpus(source, counts, progress, on_rows) as (connection, staged, report):
                with self._transaction(write=True, store_lock=locked, on=connection):
                    corpus_id = self._find_corpus(connection, sha256, pattern, specials_json)
                    if corpus_id is None:
                        corpus_id = self._insert_corpus(
                            connection, source, size_bytes, sha256, pattern, specials_json, staged,
                            origin=origin, files=files, on_rows=report,
                        )
            return corpus_id
        except sa_exc.IntegrityError:
            if locked:
                raise
            with self._transaction() as connection:  # the other writer's corpus, committed
                found = self._find_corpus(connection, sha256, pattern, specials_json)
            if found is None:
                raise
            return found

    # -- evaluations: tokenizers measured on text files ------------------------------------------

    def evaluations(
        self, ref: str | None = None, *, sha256: str | None = None, alpha: float | None = None
    ) -> builtins.list[Evaluation]:
        """The stored evaluations (``bpestore eval``), by tokenizer name, version and file label;
        only those of tokenizer ``ref``, of the file with content ``sha256``, of Rényi order
        ``alpha``, when given. TokenizerNotFoundError for a ``ref`` not stored."""
        e, t = schema.evaluations, schema.tokenizers
        query = select(*_evaluation_columns(), t.c.name, t.c.version).select_from(e.join(t, e.c.tokenizer_id == t.c.id))
        if sha256 is not None:
            query = query.where(e.c.sha256 == sha256)
        if alpha is not None:
            query = query.where(e.c.alpha == alpha)
        with self._transaction() as connection:
            if ref is not None:
                query = query.where(e.c.tokenizer_id == self._resolve(connection, ref).id)
            rows = connection.execute(query.order_by(t.c.name, t.c.version, e.c.label, e.c.id)).all()
        return [self._evaluation(row) for row in rows]

    def _evaluation(self, row: Any) -> Evaluation:
        """An ``evaluations`` row (with its tokenizer's name and version), each column read as the
        type it promises (else DamagedStoreError naming it)."""
        where = Row(self.location, f"{row.name}@{row.version}", "evaluations", f"id {row.id}")
        values: dict[str, Any] = {}
        for name in _EVALUATION_VALUES:
            value = getattr(row, name)
            if name in ("sha256", "label", "path"):
                values[name] = where.text(name, value)
            elif name in ("alpha",) or name in _EVALUATION_RATES:
                values[name] = where.number(name, value, nullable=name != "alpha")
            else:
                values[name] = where.integer(name, value)
        return Evaluation(ref=f"{row.name}@{row.version}", created_at=where.moment("created_at", row.created_at), **values)

    def save_evaluation(self, evaluation: Evaluation, *, replace: bool = False) -> Evaluation:
        """Keep ``evaluation`` (of the stored tokenizer ``evaluation.ref``) and return it as stored.
        One row per tokenizer, file content and alpha: if there is one already, it is kept and
        returned (another writer measured the same meanwhile), unless ``replace``, which puts this
        one in its place."""
        e = schema.evaluations
        with self._transaction(write=True) as connection:
            tokenizer = self._resolve(connection, evaluation.ref)
            same = (e.c.tokenizer_id == tokenizer.id, e.c.sha256 == evaluation.sha256, e.c.alpha == evaluation.alpha)
            if replace:
                connection.execute(delete(e).where(*same))
            elif connection.execute(select(e.c.id).where(*same)).first() is not None:
                existing = connection.execute(
                    select(*_evaluation_columns(), schema.tokenizers.c.name, schema.tokenizers.c.version)
                    .select_from(e.join(schema.tokenizers, e.c.tokenizer_id == schema.tokenizers.c.id))
                    .where(*same)
                ).one()
                return self._evaluation(existing)
            connection.execute(
                insert(e).values(
                    tokenizer_id=tokenizer.id,
                    created_at=evaluation.created_at.astimezone(timezone.utc).replace(tzinfo=None),
                    **{name: getattr(evaluation, name) for name in _EVALUATION_VALUES},
                )
            )
        return evaluation

    def corpus_files(self, corpus_id: int) -> builtins.list[CorpusFile]:
        """The files corpus ``corpus_id`` was counted from, in order (none listed for counts made
        elsewhere, and for corpora stored before bpestore listed them)."""
        f = schema.corpus_files
        with self._transaction() as connection:
            rows = connection.execute(
                select(f.c.path, f.c.sha256, f.c.size_bytes, f.c.added_at).where(f.c.corpus_id == corpus_id).order_by(f.c.position)
            ).all()
        return [CorpusFile(row.path, row.sha256, row.size_bytes, row.added_at) for row in rows]


@dataclass(frozen=True)
class Evaluation:
    """One tokenizer measured on one text file, as the store keeps it (the ``evaluations`` table;
    ``bpestore eval``): the file's sizes and the metrics of :mod:`bpestore.metrics` from them."""

    ref: str
    """The tokenizer, ``name@version``."""
    sha256: str
    """The sha256 of the file's content (hex): what identifies the file, whatever its name."""
    label: str
    """What the file is called in tables: its name (a file per language: the language)."""
    path: str
    """Where it was read from (resolved)."""
    alpha: float
    """The order of the Rényi entropy of ``renyi_efficiency``."""
    bytes: int
    characters: int
    words: int
    tokens: int
    distinct_tokens: int
    single_token_words: int
    bytes_per_token: float | None
    characters_per_token: float | None
    fertility: float | None
    renyi_efficiency: float | None
    vocab_used: float | None
    single_token_word_rate: float | None
    created_at: datetime
    """When it was measured (UTC)."""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["created_at"] = self.created_at.isoformat()
        return data


_EVALUATION_VALUES = (
    "sha256", "label", "path", "alpha", "bytes", "characters", "words", "tokens", "distinct_tokens", "single_token_words",
    "bytes_per_token", "characters_per_token", "fertility", "renyi_efficiency", "vocab_used", "single_token_word_rate",
)
"""The columns of ``evaluations`` that an :class:`Evaluation` gives as they are."""

_EVALUATION_RATES = ("bytes_per_token", "characters_per_token", "fertility", "renyi_efficiency", "vocab_used", "single_token_word_rate")


def _evaluation_columns() -> builtins.list[Any]:
    """The columns of ``evaluations``, ``created_at`` as stored (unprocessed: a value that is not
    a moment is named by :meth:`ModelStore._evaluation`, not a TypeError in SQLAlchemy)."""
    return [type_coerce(column, NullType()).label("created_at") if column.name == "created_at" else column for column in schema.evaluations.c]


@dataclass(frozen=True)
class CorpusInfo:
    """What the store knows about one stored corpus (everything but its counts)."""

    id: int
    sha256: str
    """Its identity: the sha256 of its file's content, of its files' sorted content hashes, or of
    the counts themselves (counts made elsewhere)."""
    pattern: str
    special_tokens: list[str]
    path: str
    """Where it came from (a file, a JSON list of files, a counts file, a Dask count's inputs)."""
    origin: str
    """``files`` (counted here), ``counts`` (given as counts) or ``dask``."""
    size_bytes: int
    distinct_pretokens: int
    total_pretokens: int
    created_at: datetime
    files: int
    """How many files it lists (:meth:`ModelStore.corpus_files`); 0 for counts made elsewhere."""
    tokenizers: list[str]
    """The refs of the tokenizers trained on it."""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["created_at"] = self.created_at.isoformat()
        return data


@dataclass(frozen=True)
class CorpusFile:
    """One file a stored corpus was counted from."""

    path: str
    """Where it was read from (resolved)."""
    sha256: str
    """The sha256 of its content, decompressed (hex): what identifies it."""
    size_bytes: int
    """Its content's length, decompressed."""
    added_at: datetime | None = None
    """When it was counted into the corpus (None: now, for one being stored)."""


def _configure_sqlite_connection(dbapi_connection: sqlite3.Connection, _record: object) -> None:
    # Let SQLAlchemy's "begin" event issue BEGIN itself (pysqlite would otherwise defer it).
    dbapi_connection.isolation_level = None
    dbapi_connection.text_factory = text_or_raw_bytes  # text that is not UTF-8: named by the reads' checks
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys = ON")
    # Not the journal mode: that is a property of the file, set once by a writer (_use_wal); a
    # reader must not change the file it reads.
    cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.close()




@dataclass(frozen=True)
class StoreSummary:
    """Which store a path or URL names and what is in it (``bpestore info``, ``--verbose``)."""

    location: str
    """The SQLite file (absolute), or the URL without its password."""
    kind: str
    """``SQLite file``, ``SQLite in memory``, or the SQLAlchemy dialect (``postgresql``, ...)."""
    exists: bool
    """Whether there is a bpestore store there (a read needs one; a write creates it)."""
    schema_revision: str | None
    tokenizers: int | None
    names: int | None
    read_only_reason: str | None
    """Why it cannot be written, or None if it can."""
    journal_mode: str | None
    """``wal`` or ``rollback`` for a SQLite file."""
    size_bytes: int | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize_store(path_or_url: str | os.PathLike[str]) -> StoreSummary:
    """What :class:`StoreSummary` says about the store at ``path_or_url``, found without writing
    anything (a missing store is reported, not created; an older one is not upgraded)."""
    url = _as_url(path_or_url)
    is_sqlite = url.get_backend_name() == "sqlite"
    if is_sqlite and url.database and url.database != ":memory:":
        path = Path(url.database).resolve()
        state = sqlite_file_state(path)
        size = path.stat().st_size if state != "missing" else None
        journal = None
        if state not in ("missing", "new"):
            journal = "wal" if _is_wal_file(path) else "rollback"
        if state in ("missing", "new"):
            return StoreSummary(str(path), "SQLite file", False, None, None, None, None, None, size)
        if state == "older":
            connection, parameters = connect_sqlite(path)
            try:
                (revision,) = connection.execute("SELECT version_num FROM alembic_version").fetchone()
            finally:
                connection.close()
            reason = read_only_reason(path) if parameters["mode"] == "rw" else (read_only_reason(path) or "SQLite can open it only for reading")
            return StoreSummary(str(path), "SQLite file", True, revision, None, None, reason, journal, size)
        location, kind = str(path), "SQLite file"
    else:
        location = url.render_as_string(hide_password=True)
        kind, journal, size = ("SQLite in memory" if is_sqlite else url.get_backend_name()), None, None
    try:
        store = ModelStore(path_or_url, create=False)
    except StoreNotFoundError:
        return StoreSummary(location, kind, False, None, None, None, None, journal, size)
    with store, store._transaction() as reading:
        t = schema.tokenizers
        revision = reading.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
        count, names = reading.execute(select(func.count(), func.count(t.c.name.distinct()))).one()
        return StoreSummary(location, kind, True, revision, count, names, store.read_only_reason, journal, size)
