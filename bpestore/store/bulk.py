"""Many rows at once: a corpus's pre-token counts written and read in bulk, and any table's rows
(a tokenizer's vocab and merges) written in bulk, each the fastest way its database takes them.

- SQLite: multi-row ``INSERT ... VALUES (?, ?), (?, ?), ...`` statements of 100 rows, run by the
  driver's ``executemany`` over one flat list of the values (for counts, made by the engine:
  ``SortedRows.flat_rows``): no Python code of ours runs per row, and SQLite runs one statement
  per 100 rows, not per row. Byte strings go in as ``bytearray``, which Python's sqlite3 binds
  without first looking for an adapter. Three times the rows a second of one statement per row.
  Counts are staged that way in TEMP tables before the write lock is taken
  (:func:`staged_counts`), and copied under the lock by SQLite alone (``INSERT ... SELECT``).
- PostgreSQL (psycopg 3): binary ``COPY``. Counts' ``COPY`` data is made by the engine
  (``SortedRows.copy_rows``, rows in the order of the key on their sha256), and read back by it
  (``PretokenCounts.from_copy``); other tables' rows go through psycopg's ``write_row``.
- Any other database: SQLAlchemy's ``executemany``.

Counts are written in byte order of their pre-tokens (the order of ``pretoken_counts``'s key:
SQLite appends them to its B-tree), in batches bounded in rows and bytes, and then packed into
``packed_counts`` in the same transaction: reading a corpus back unpacks that copy (the engine,
``PretokenCounts.unpack``) when it is whole, and reads the rows otherwise. The rows stay the
truth: triggers drop the copy when any of them changes (migration 0008).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from itertools import chain
from typing import Any

from sqlalchemy import LargeBinary, insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from ..engine import PretokenCounts, SortedRows
from ..errors import StoreError
from . import schema

__all__ = [
    "StagedCounts", "delete_corpus", "insert_rows", "read_counts", "row_writes", "sqlite_triggers_suspended", "staged_counts",
    "write_counts",
]

# A batch of counts' rows (one executemany, one piece of COPY data): few enough Python objects
# at once (a pre-token's bytes and an int each) to keep memory flat, enough to make each call's
# cost vanish.
ROWS_PER_BATCH = 20_000
BYTES_PER_BATCH = 4 << 20
STAGED_IN_MEMORY_BYTES = 128 << 20
"""Counts of up to this many bytes of pre-tokens are staged in memory (see :func:`staged_counts`)."""
# A part of a packed copy (of about this many bytes of pre-tokens, some 2/3 of the part): a
# database value holds at most about 1 GB, and a part is held twice while written (by Python and
# by the driver), so small parts keep that memory small (a big corpus's copy in one part of
# 30 MB left 80 MB of freed but unreturned heap behind).
BYTES_PER_PACKED_PART = 4 << 20

# The SQLite triggers that drop a corpus's packed copy when a row is inserted or deleted (0008).
_COUNTS_INSERT_TRIGGER = "pretoken_counts_insert_unpacks"
_COUNTS_DELETE_TRIGGER = "pretoken_counts_delete_unpacks"

# Rows per multi-row INSERT on SQLite: far below its limits (999 parameters in old builds), and
# past the point where the statement's own cost matters (measured: 100 rows a statement as fast as 1000).
_SQLITE_ROWS_PER_STATEMENT = 100
# Rows per INSERT ... SELECT copying staged rows (a progress step: some 0.1 s).
_SQLITE_ROWS_PER_COPY = 100_000
# The TEMP tables of :func:`staged_counts` (the connection's own).
_STAGED_ROWS = "bpestore_staged_counts"
_STAGED_PACKED = "bpestore_staged_packed"
_SELECT_COUNTS = "SELECT pretoken, count FROM pretoken_counts WHERE corpus_id = ?"
_COPY_COUNTS_IN = "COPY pretoken_counts (corpus_id, pretoken, count) FROM STDIN (FORMAT BINARY)"
_COPY_COUNTS_OUT = "COPY (SELECT pretoken, count FROM pretoken_counts WHERE corpus_id = {}) TO STDOUT (FORMAT BINARY)"

# The PostgreSQL type of each SQLAlchemy column type in the tables filled by COPY (binary COPY
# needs each value sent as exactly its column's type).
_COPY_TYPES = {
    "Integer": "int4", "BigInteger": "int8", "LargeBinary": "bytea", "String": "text", "Text": "text", "DateTime": "timestamp",
}


def _driver(connection: Connection) -> str:
    """``sqlite``, ``psycopg`` (PostgreSQL through psycopg 3), or ``other``."""
    dialect = connection.dialect
    if dialect.name == "sqlite":
        return "sqlite"
    if dialect.name == "postgresql" and dialect.driver == "psycopg":
        return "psycopg"
    return "other"


def _raw(connection: Connection) -> Any:
    """The driver's own connection under ``connection``, in the same transaction."""
    return connection.connection.driver_connection


class StagedCounts:
    """A corpus's counts made ready for :func:`write_counts` by :func:`staged_counts`, before the
    write lock is taken: on SQLite, already written to temporary tables of the connection (which
    :func:`write_counts` copies from, in SQLite's own code); elsewhere, the counts as they are."""

    def __init__(self, counts: PretokenCounts, in_temporary_tables: bool) -> None:
        self.counts = counts
        self.in_temporary_tables = in_temporary_tables


def row_writes(dialect: str, rows: int) -> int:
    """How many rows saving ``rows`` counts' rows on a ``dialect`` database reports through
    ``on_rows`` (:func:`staged_counts` and :func:`write_counts`, for a bar's total): on SQLite
    each row is written twice, staged and then copied; elsewhere once."""
    return 2 * rows if dialect == "sqlite" else rows


@contextmanager
def staged_counts(connection: Connection, counts: PretokenCounts, on_rows: Callable[[int], object] | None = None) -> Iterator[StagedCounts]:
    """``counts`` made ready for :func:`write_counts` on ``connection`` (the same connection),
    which must not be in a transaction: call it before taking the write lock.

    On SQLite, a write holds the lock of the whole file, so the slow part of writing the rows
    (making a Python value of every pre-token and binding it, at about 1 µs a row) is done here,
    outside any write lock: the rows, in the order of ``pretoken_counts``'s key, and the packed
    copy go into TEMP tables, which live in the connection's own temporary database (no other
    connection sees them or waits for them). :func:`write_counts` then copies them with one
    ``INSERT ... SELECT`` per 100,000 rows, run by SQLite alone: a third of the time the lock
    was held before. The tables are dropped on the way out. ``on_rows(n)``: n more rows staged."""
    if _driver(connection) != "sqlite":
        yield StagedCounts(counts, in_temporary_tables=False)
        return
    raw = _raw(connection)
    # Small counts are staged in memory, not in a temporary file they are written to and read
    # back from (52 MB of SuperBPE pieces: 0.12 s less of the 1.3 s their save takes); big ones
    # in a file, which needs no memory. (Set outside the transaction; it drops temporary tables.)
    in_memory = counts.pretoken_bytes <= STAGED_IN_MEMORY_BYTES
    if in_memory:
        raw.execute("PRAGMA temp_store = MEMORY")
    try:
        with connection.begin(), _temporary_files_named():  # (BEGIN, not IMMEDIATE: only the temporary database is written)
            for table, columns in ((_STAGED_ROWS, "pretoken BLOB NOT NULL, count INTEGER NOT NULL"), (_STAGED_PACKED, "data BLOB NOT NULL")):
                raw.execute(f"DROP TABLE IF EXISTS temp.{table}")  # (one left by a connection that died mid-way)
                raw.execute(f"CREATE TEMP TABLE {table} ({columns})")
            rows = counts.sorted_rows()
            for start, end in _ranges(rows.piece_ends(ROWS_PER_BATCH, BYTES_PER_BATCH)):
                _sqlite_insert_flat(raw, f"temp.{_STAGED_ROWS}", ["pretoken", "count"], rows.flat_rows(start, end), 2)
                if on_rows is not None:
                    on_rows(end - start)
            # The packed copy's parts, their rowids 1, 2, ... in order, made one at a time (only
            # one is ever held, in Python and again by the driver while it is written).
            for begin, end in _ranges(rows.piece_ends(len(rows), BYTES_PER_PACKED_PART)):
                raw.execute(f"INSERT INTO temp.{_STAGED_PACKED} (data) VALUES (?)", (rows.pack(begin, end),))
            del rows
        yield StagedCounts(counts, in_temporary_tables=True)
    finally:
        if not connection.closed and not connection.invalidated and not connection.in_transaction():
            try:
                with connection.begin():
                    raw.execute(f"DROP TABLE IF EXISTS temp.{_STAGED_ROWS}")
                    raw.execute(f"DROP TABLE IF EXISTS temp.{_STAGED_PACKED}")
            except (DBAPIError, sqlite3.Error):
                # Only the connection's own tables are left, until its next staging or its end:
                # not worth hiding the error that brought us here, or failing a write that is done.
                pass
            if in_memory:
                try:
                    raw.execute("PRAGMA temp_store = DEFAULT")
                except sqlite3.Error:
                    pass  # (as above: the connection's own setting, until its next staging)


# SQLite's errors for a write to a full disk and for a write that failed (past a file size
# limit, say); not a failed read. (Named as the store's errors are told apart: database.py.)
_WRITE_FAILURES = ("SQLITE_FULL", "SQLITE_IOERR_WRITE")


@contextmanager
def _temporary_files_named() -> Iterator[None]:
    """While counts are staged, a write that fails for want of room can only be that of SQLite's
    temporary files (the store itself is not written): say where they are, not that the store is
    full."""
    try:
        yield
    except sqlite3.Error as error:
        if getattr(error, "sqlite_errorname", None) not in _WRITE_FAILURES:
            raise
        raise StoreError(
            f"cannot stage the counts in SQLite's temporary files in {sqlite_temporary_directory()} ({error}): free some "
            "space there, or set SQLITE_TMPDIR to a directory with room; nothing was written to the store"
        ) from None


def sqlite_temporary_directory() -> str:
    """Where SQLite puts its temporary files on Unix: the first writable directory of
    ``$SQLITE_TMPDIR``, ``$TMPDIR``, /var/tmp, /usr/tmp, /tmp and the current one (its own order)."""
    for candidate in (os.environ.get("SQLITE_TMPDIR"), os.environ.get("TMPDIR"), "/var/tmp", "/usr/tmp", "/tmp", "."):
        if candidate and os.path.isdir(candidate) and os.access(candidate, os.W_OK | os.X_OK):
            return candidate
    return "."


def write_counts(connection: Connection, corpus_id: int, staged: StagedCounts, on_rows: Callable[[int], object] | None = None) -> None:
    """Insert the rows of ``staged`` (:func:`staged_counts`, on this connection) as corpus
    ``corpus_id``'s, then their packed copy, in ``connection``'s transaction. ``on_rows(n)``: n
    more rows written (progress)."""
    counts = staged.counts
    driver = _driver(connection)
    if driver == "sqlite":
        if not staged.in_temporary_tables:
            raise ValueError("SQLite counts are written from their staged copy: stage them first (staged_counts)")
        _copy_staged_rows(connection, corpus_id, len(counts), on_rows)
        return
    if driver == "other":  # no triggers keep a copy fresh there: such a store reads the rows
        _insert_count_rows(connection, driver, corpus_id, counts, counts.sorted_rows(), on_rows)
        return
    rows = counts.sorted_rows()
    part_ends = rows.piece_ends(len(rows), BYTES_PER_PACKED_PART)
    _insert_count_rows(connection, driver, corpus_id, counts, rows, on_rows)
    # After the rows, whose triggers would delete a copy made before them; a part at a time, so
    # that only one is ever held (in Python, and again by the driver while it is sent).
    for part, (start, end) in enumerate(_ranges(part_ends)):
        connection.execute(insert(schema.packed_counts).values(corpus_id=corpus_id, part=part, data=rows.pack(start, end)))


def _copy_staged_rows(connection: Connection, corpus_id: int, rows: int, on_rows: Callable[[int], object] | None) -> None:
    """:func:`write_counts` on SQLite: the staged rows copied into ``pretoken_counts`` (in their
    key's order: appended to its B-tree), in slices of rowids for progress, then the packed
    copy's parts after them (the rows' triggers would delete a copy made before)."""
    raw = _raw(connection)
    corpus = int(corpus_id)
    with sqlite_triggers_suspended(connection, _COUNTS_INSERT_TRIGGER):
        for low in range(1, rows + 1, _SQLITE_ROWS_PER_COPY):
            high = min(low + _SQLITE_ROWS_PER_COPY, rows + 1)
            raw.execute(
                f"INSERT INTO pretoken_counts (corpus_id, pretoken, count) SELECT {corpus}, pretoken, count "
                f"FROM temp.{_STAGED_ROWS} WHERE rowid >= ? AND rowid < ? ORDER BY rowid",
                (low, high),
            )
            if on_rows is not None:
                on_rows(high - low)
    raw.execute(
        f"INSERT INTO packed_counts (corpus_id, part, data) SELECT {corpus}, rowid - 1, data FROM temp.{_STAGED_PACKED} ORDER BY rowid"
    )


def _insert_count_rows(
    connection: Connection, driver: str, corpus_id: int, counts: PretokenCounts, rows: SortedRows,
    on_rows: Callable[[int], object] | None,
) -> None:
    """The rows of :func:`write_counts` on any database but SQLite (whose rows are staged:
    :func:`staged_counts`), in batches, the fastest way ``driver`` takes them."""
    if driver == "psycopg":
        # In the order of the key on the pre-tokens' sha256 (migration 0006): appended to that
        # index rather than scattered over it, which halves the time of the COPY.
        rows = counts.sorted_rows("sha256")
    ends = rows.piece_ends(ROWS_PER_BATCH, BYTES_PER_BATCH)
    with ExitStack() as stack:
        if driver == "psycopg":
            copy = stack.enter_context(stack.enter_context(_raw(connection).cursor()).copy(_COPY_COUNTS_IN))
            ends = ends or [0]  # no rows: the COPY's header and trailer alone
        for start, end in _ranges(ends):
            if driver == "psycopg":
                copy.write(rows.copy_rows(corpus_id, start, end))
            else:
                flat = rows.flat_rows(start, end)
                connection.execute(
                    insert(schema.pretoken_counts),
                    [{"corpus_id": corpus_id, "pretoken": bytes(flat[i]), "count": flat[i + 1]} for i in range(0, len(flat), 2)],
                )
            if on_rows is not None:
                on_rows(end - start)


def _ranges(ends: Sequence[int]) -> Iterator[tuple[int, int]]:
    """The ranges ``(start, end)`` of rows that consecutive piece ends (``SortedRows.piece_ends``) mark."""
    return zip([0, *ends], ends)


def read_counts(connection: Connection, corpus_id: int, distinct: int, total: int) -> PretokenCounts:
    """Corpus ``corpus_id``'s counts, which the ``corpora`` row says are ``distinct`` pre-tokens
    counted ``total`` times in all: from the packed copy when it is whole and agrees, else from
    the rows (a copy damaged or missing, a store written before 0008)."""
    p = schema.packed_counts
    parts = connection.execute(select(p.c.data).where(p.c.corpus_id == corpus_id).order_by(p.c.part)).scalars().all()
    if parts:
        try:
            counts = PretokenCounts.unpack(*map(bytes, parts))
        except ValueError:
            pass  # damaged: the rows are the truth
        else:
            if len(counts) == distinct and counts.total == total:
                return counts
    driver = _driver(connection)
    if driver == "sqlite":
        return PretokenCounts.from_rows(_raw(connection).execute(_SELECT_COUNTS, (corpus_id,)))
    if driver == "psycopg":
        with _raw(connection).cursor() as cursor, cursor.copy(_COPY_COUNTS_OUT.format(int(corpus_id))) as copy:
            return PretokenCounts.from_copy(b"".join(copy))
    c = schema.pretoken_counts
    return PretokenCounts.from_rows(connection.execute(select(c.c.pretoken, c.c.count).where(c.c.corpus_id == corpus_id)))


def delete_corpus(connection: Connection, corpus_id: int) -> None:
    """Delete corpus ``corpus_id`` with its counts (their rows and packed copy) and its files."""
    connection.execute(schema.packed_counts.delete().where(schema.packed_counts.c.corpus_id == corpus_id))
    if _driver(connection) == "sqlite":
        # Its copy is gone: the row trigger would only look for it once per deleted row.
        with sqlite_triggers_suspended(connection, _COUNTS_DELETE_TRIGGER):
            connection.execute(schema.corpora.delete().where(schema.corpora.c.id == corpus_id))  # the rows cascade
        return
    connection.execute(schema.corpora.delete().where(schema.corpora.c.id == corpus_id))


def insert_rows(connection: Connection, table: Any, columns: Sequence[Sequence[Any]]) -> int:
    """Insert rows given as ``columns`` (one sequence per column of ``table``, in its order; a
    ``itertools.repeat`` for a constant) into ``table``; returns the number of rows (the length
    of the shortest column)."""
    names = [column.name for column in table.columns]
    if len(columns) != len(names):
        raise ValueError(f"{table.name} has {len(names)} columns, {len(columns)} given")
    driver = _driver(connection)
    if driver == "sqlite":
        binary = [isinstance(column.type, LargeBinary) for column in table.columns]
        bound: list[Iterable[Any]] = [map(bytearray, values) if is_binary else values for values, is_binary in zip(columns, binary)]
        flat = list(chain.from_iterable(zip(*bound)))
        _sqlite_insert_flat(_raw(connection), table.name, names, flat, len(names))
        return len(flat) // len(names)
    rows = zip(*columns)
    if driver == "psycopg":
        from psycopg import sql as psql

        statement = psql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
            psql.Identifier(table.name), psql.SQL(", ").join(map(psql.Identifier, names))
        )
        done = 0
        with _raw(connection).cursor() as cursor, cursor.copy(statement) as copy:
            copy.set_types([_COPY_TYPES[type(column.type).__name__] for column in table.columns])
            for row in rows:
                copy.write_row(row)
                done += 1
        return done
    batch = [dict(zip(names, row)) for row in rows]
    if batch:
        connection.execute(insert(table), batch)
    return len(batch)


@contextmanager
def sqlite_triggers_suspended(connection: Connection, *names: str) -> Iterator[None]:
    """Within ``connection``'s write transaction on SQLite (elsewhere: nothing), drop the triggers
    ``names`` and create them again from their own SQL (as ``sqlite_master`` holds it: the
    migrations stay their one owner) at the end. For rows that a trigger has nothing to do for:
    the triggers that drop a packed copy, while the rows of a new corpus or tokenizer, which has
    none yet, are written. A row trigger costs SQLite a sub-program a row: such writes took three
    times as long with them. Nobody else ever sees them missing: readers see the schema as
    committed, other writers wait for the write lock, and a failure rolls the drop back with
    everything else."""
    if _driver(connection) != "sqlite":
        yield
        return
    found = {
        name: sql
        for name, sql in connection.exec_driver_sql(
            f"SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name IN ({', '.join('?' * len(names))})", names
        ).all()
    }
    for name in found:
        connection.exec_driver_sql(f'DROP TRIGGER "{name}"')
    yield
    for sql in found.values():
        connection.exec_driver_sql(sql)


def _sqlite_insert_flat(raw: Any, table: str, names: Sequence[str], flat: list[Any], width: int, constants: Sequence[str] = ()) -> None:
    """Insert rows given as one flat list of their values, ``width`` a row, into ``table``'s
    columns ``names`` (the first ones filled with the SQL literals ``constants`` in every row),
    by multi-row INSERT statements of :data:`_SQLITE_ROWS_PER_STATEMENT` rows."""
    columns = ", ".join(_quoted(name) for name in names)
    row = "(" + ", ".join([*constants, *["?"] * width]) + ")"
    per_statement = _SQLITE_ROWS_PER_STATEMENT * width
    full = len(flat) // per_statement * per_statement
    if full:
        statement = f"INSERT INTO {table} ({columns}) VALUES {', '.join([row] * _SQLITE_ROWS_PER_STATEMENT)}"
        raw.executemany(statement, (flat[i : i + per_statement] for i in range(0, full, per_statement)))
    if len(flat) > full:
        raw.execute(f"INSERT INTO {table} ({columns}) VALUES {', '.join([row] * ((len(flat) - full) // width))}", flat[full:])


def _quoted(name: str) -> str:
    # "left" and "right" are SQL keywords (merges' columns).
    return f'"{name}"'
