"""Checking a whole store: the file, the schema revision, and every tokenizer and corpus in it.

``bpestore check`` runs :func:`check_store`. It reads everything the other commands would read,
with the same rules (a damaged row is a problem here because it would be an error there), and
reports each problem it finds as one :class:`Problem` instead of stopping at the first.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Column, DateTime, Float, Integer, LargeBinary
from sqlalchemy.exc import DBAPIError

from . import schema
from ..errors import BpestoreError, StoreError
from .checked import Row, described
from .database import ModelStore, _as_url
from .packed import PACKED_SQL, unpack
from .rows import MERGES_SQL, VOCAB_SQL
from .migrate import sqlite_file_state
from .schema_revision import SCHEMA_REVISION
from .sqlite_uri import sqlite_uri

JSON_SHAPES = {
    ("corpora", "special_tokens"): "array",
    ("tokenizers", "special_tokens"): "array",
    ("tokenizers", "added_tokens"): "array",
    ("tokenizers", "source_paths"): "array",
    ("tokenizers", "training_params"): "object",
    ("tokenizers", "pipeline"): "object",
}
"""The columns that hold JSON of one shape (an array: of strings), as migration 0013's checks say."""

SHOWN_PER_COLUMN = 5
"""Damaged rows named one by one per column; the rest are counted in one line."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a store: ``where`` (``store``, ``NAME@V`` or ``corpus N``) and what."""

    where: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _integrity(path: Path) -> list[Problem]:
    """SQLite's own check of the file (pages, indexes), read-only."""
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            # (a row may hold several lines; the first says which database, not what is wrong)
            lines = [line for row in connection.execute("PRAGMA integrity_check") for line in str(row[0]).splitlines()
                     if line.strip() and not line.startswith("*** in database")]
        finally:
            connection.close()
    except sqlite3.Error as error:
        return [Problem("store", f"{path}: {error}")]
    return [] if lines == ["ok"] else [Problem("store", f"{path}: integrity_check: {line}") for line in lines]


def check_store(path_or_url: str | os.PathLike[str]) -> list[Problem]:
    """Every problem found in the store at ``path_or_url`` (empty when it is sound); writes nothing.

    Checked: SQLite's ``integrity_check`` (a SQLite file), that the database is a bpestore store
    whose recorded schema revision matches its tables, every tokenizer's row and its vocab and
    merges (and the packed copy against those rows, on SQLite), every corpus's row against the
    counts stored for it."""
    url = _as_url(path_or_url)
    problems: list[Problem] = []
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        path = Path(url.database)
        if not path.is_file():
            return [Problem("store", f"no store at {path}")]
        problems += _integrity(path)
        try:
            state = sqlite_file_state(path)
        except BpestoreError as error:
            return problems + [Problem("store", str(error))]
        if state == "older":
            return problems + _check_older(path, url.database)
    try:
        store = ModelStore(path_or_url, create=False)
    except BpestoreError as error:
        return problems + [Problem("store", str(error))]
    with store:
        found: list[Problem] = []
        for part in (_check_columns, _check_tokenizers, _check_corpora):
            try:
                found += [problem for problem in part(store) if not _reported(problem, found)]
            except (sqlite3.Error, DBAPIError) as error:  # a damaged file: what SQLite says, once
                reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
                problem = Problem("store", f"{store.location}: {reason}")
                if problem not in problems + found:
                    found.append(problem)
    return problems + found


_CORPUS_TABLES = ("corpora.", "pretoken_counts.", "packed_counts.", "corpus_files.")


def _reported(problem: Problem, found: list[Problem]) -> bool:
    """Whether ``problem`` (found by reading a tokenizer or a corpus as the commands do) repeats
    what the column scan found already: the same tokenizer or corpus and the same column, or any
    damaged corpus column for the whole corpora table's failure."""
    if any(_damage(earlier.message) == _damage(problem.message) is not None for earlier in found):
        return True  # the same column of the same row, read through another tokenizer or table
    if problem.where == "corpora":
        return any(earlier.message.count(table) for earlier in found for table in _CORPUS_TABLES)
    if problem.where.startswith("corpus "):  # its counts unreadable, or compared with a count the scan found damaged
        return any(
            earlier.where == problem.where and ("cannot be read" in problem.message or any(
                f"corpora.{column}" in earlier.message for column in ("distinct_pretokens", "total_pretokens")))
            for earlier in found
        )
    return any(
        earlier.where == problem.where
        and any(f"{table}.{column}" in earlier.message and f"{table}.{column}" in problem.message for table, column in _COLUMNS)
        for earlier in found
    )


def _damage(message: str) -> str | None:
    """``table.column (row) holds ...``: what a damaged-row message says, whoever read the row."""
    for marker in (" is damaged: ", "damaged row: "):
        if marker in message:
            return message.split(marker, 1)[1]
    return None


_COLUMNS = [(table.name, column.name) for table in schema.metadata.sorted_tables for column in table.columns]


def _storage(column: Column[object]) -> tuple[str, str]:
    """What a STRICT table accepts in ``column``: SQLite's storage classes (``typeof``), and what it
    is called in a message."""
    kind = column.type
    if isinstance(kind, Integer):
        return "'integer'", "integer"
    if isinstance(kind, Float):
        return "'integer', 'real'", "number"
    if isinstance(kind, LargeBinary):
        return "'blob'", "blob"
    if isinstance(kind, DateTime):
        return "'text'", "moment"
    return "'text'", "text"


def _misfit(table: str, column: Column[object]) -> str:
    """A SQL condition true of a row whose ``column`` a STRICT table of the current schema (with
    migration 0013's checks) would refuse."""
    name = f'"{column.name}"'
    kinds, what = _storage(column)
    fits = f"typeof({name}) IN ({kinds})"
    shape = JSON_SHAPES.get((table, column.name))
    if shape:
        fits += f" AND CASE WHEN json_valid({name}) THEN json_type({name}) = '{shape}' ELSE 0 END"
    if shape == "array":
        fits += f" AND NOT EXISTS (SELECT 1 FROM json_each({name}) WHERE type <> 'text')"
    if what == "moment":
        fits += f" AND {name} GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*'"
    if column.nullable:
        fits = f"{name} IS NULL OR ({fits})"
    return f"NOT ({fits})"


def _named(row: Row, table: str, column: Column[object], value: object) -> str:
    """What is wrong with ``value``, in the words of the reads (the same checks, so the same line)."""
    _, what = _storage(column)
    shape = JSON_SHAPES.get((table, column.name))
    try:
        if shape == "array":
            row.json_list_of_text(column.name, value, nullable=bool(column.nullable))
        elif shape == "object":
            row.json_object(column.name, value, nullable=bool(column.nullable))
        elif what == "integer":
            row.integer(column.name, value)
        elif what == "number":
            row.number(column.name, value)
        elif what == "moment":
            row.moment(column.name, value)
        elif what == "text":
            row.text(column.name, value)
        raise row.damaged(column.name, f"holds {described(value)}, not a {what}")
    except StoreError as error:
        return str(error)


def _check_older(path: Path, location: str) -> list[Problem]:
    """A store at an older schema revision, read-only: opening it as the other checks do would
    upgrade it (a write). Its columns are scanned (the rows the upgrade to strict tables would
    refuse, all of them, where the upgrade names the first), and one line says the rest waits."""
    connection = sqlite3.connect(sqlite_uri(path, mode="ro"), uri=True)
    try:
        (revision,) = connection.execute("SELECT version_num FROM alembic_version").fetchone()
        problems = _scan_columns(connection, location)
    except sqlite3.Error as error:
        return [Problem("store", f"{location}: {error}")]
    finally:
        connection.close()
    return problems + [Problem("store", (
        f"{location}: at schema revision {revision!r}, older than this bpestore's {SCHEMA_REVISION!r}: its tokenizers and "
        "corpora are checked once it is upgraded (any other command upgrades it; check writes nothing)"
    ))]


def _check_columns(store: ModelStore) -> list[Problem]:
    """:func:`_scan_columns` of a SQLite store, and whether its tables are STRICT at all."""
    if not store.is_sqlite:
        return []  # PostgreSQL's columns are typed, its JSON columns checked (0013)
    pooled = store.engine.raw_connection()
    try:
        connection = pooled.driver_connection
        assert isinstance(connection, sqlite3.Connection)
        return _loose_tables(connection, store.location) + _scan_columns(connection, store.location)
    finally:
        pooled.close()


def _scan_columns(connection: sqlite3.Connection, location: str) -> list[Problem]:
    """Every value that a STRICT table of the current schema would refuse (a wrong type, a NULL,
    JSON of another shape, a moment that is not one), one line per row (at most
    :data:`SHOWN_PER_COLUMN` per column): the tables may be ordinary ones, in an older store, one
    written by another program or a hostile file, where nothing stopped such a write. Only the
    tables and columns that the store has (an older one lacks some)."""
    problems: list[Problem] = []
    refs = {key: f"{name}@{version}" for key, name, version in connection.execute("SELECT id, name, version FROM tokenizers")}
    present = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for table in schema.metadata.sorted_tables:
        if table.name not in present:
            continue
        has = {row[1] for row in connection.execute("SELECT * FROM pragma_table_info(?)", (table.name,))}
        if not {column.name for column in table.primary_key.columns} <= has:
            continue
        misfits = {column.name: _misfit(table.name, column) for column in table.columns if column.name in has}
        if connection.execute(f"SELECT 1 FROM {table.name} WHERE {' OR '.join(misfits.values())} LIMIT 1").fetchone() is None:
            continue  # one pass over a sound table
        keys = [column.name for column in table.primary_key.columns]
        for column in table.columns:
            if column.name not in misfits:
                continue
            rows = connection.execute(
                f"SELECT {', '.join(keys)}, {'tokenizer_id' if 'tokenizer_id' in has else 'NULL'}, "
                f"{'corpus_id' if 'corpus_id' in has else 'NULL'}, \"{column.name}\" "
                f"FROM {table.name} WHERE {misfits[column.name]} LIMIT {SHOWN_PER_COLUMN + 1}"
            ).fetchall()
            for found in rows[:SHOWN_PER_COLUMN]:
                key = ", ".join(f"{name} {value!r}" for name, value in zip(keys, found))
                tokenizer_id, corpus_id, value = found[len(keys):]
                if table.name == "tokenizers":
                    tokenizer_id = found[0]
                ref = refs.get(tokenizer_id, "") if tokenizer_id is not None else ""
                where = ref or (f"corpus {corpus_id if table.name != 'corpora' else found[0]}"
                                if corpus_id is not None or table.name == "corpora" else table.name)
                problems.append(Problem(where, _named(Row(location, ref, table.name, key), table.name, column, value)))
            if len(rows) > SHOWN_PER_COLUMN:
                (more,) = connection.execute(f"SELECT count(*) FROM {table.name} WHERE {misfits[column.name]}").fetchone()
                problems.append(Problem(table.name, f"{location}: {more - SHOWN_PER_COLUMN} more rows of {table.name}.{column.name} are damaged too"))
    return problems


def _loose_tables(connection: sqlite3.Connection, location: str) -> list[Problem]:
    """A store recorded at the current revision whose tables are not STRICT: written by another
    program (or copied from an older store by hand), SQLite does not refuse a wrong type in it."""
    try:
        listed = dict(connection.execute("SELECT name, strict FROM pragma_table_list WHERE schema = 'main'").fetchall())
    except sqlite3.Error:  # SQLite < 3.37 knows no STRICT tables
        return []
    loose = sorted(table.name for table in schema.metadata.sorted_tables if listed.get(table.name) == 0)
    if not loose:
        return []
    shown = ", ".join(loose[:3]) + (f" and {len(loose) - 3} more" if len(loose) > 3 else "")
    return [Problem("store", (
        f"{location}: recorded at schema revision {SCHEMA_REVISION}, whose tables are STRICT, but {shown} "
        f"{'is' if len(loose) == 1 else 'are'} not: SQLite does not refuse a value of the wrong type there"
    ))]


def _check_tokenizers(store: ModelStore) -> list[Problem]:
    problems: list[Problem] = []
    damaged: list[Any] = []
    try:
        infos = store.list(damaged=damaged)
    except BpestoreError as error:
        return [Problem("store", str(error))]
    problems += [Problem("tokenizers", str(error)) for error in damaged]
    for info in infos:
        try:
            store.load_model(info.ref)
        except BpestoreError as error:
            problems.append(Problem(info.ref, str(error)))
            continue
        if store.is_sqlite and (mismatch := _packed_mismatch(store, info.ref)):
            problems.append(Problem(info.ref, f"{store.location}: {info.ref}'s packed copy {mismatch}"))
    return problems


def _packed_mismatch(store: ModelStore, ref: str) -> str | None:
    """How the packed copy of ``ref`` differs from its vocab and merges rows, or None."""
    name, version = ref.rsplit("@", 1)
    pooled = store.engine.raw_connection()
    try:
        connection = pooled.driver_connection
        assert isinstance(connection, sqlite3.Connection)
        (tokenizer_id, vocab_size) = connection.execute(
            "SELECT id, vocab_size FROM tokenizers WHERE name = ? AND version = ?", (name, int(version))
        ).fetchone()
        packed = connection.execute(PACKED_SQL, (tokenizer_id,)).fetchone()
        if packed is None or packed[0] is None:
            return None  # no packed copy: the rows were read (and checked) above
        rows_vocab = dict(connection.execute(VOCAB_SQL, (tokenizer_id,)).fetchall())
        rows_merges = [tuple(row) for row in connection.execute(MERGES_SQL, (tokenizer_id,)).fetchall()]
    finally:
        pooled.close()
    try:
        packed_vocab, packed_merges = unpack(packed[0], vocab_size, ref, store.location)
    except StoreError as error:
        return f"cannot be read ({error})"
    if dict(packed_vocab) != rows_vocab:
        return "differs from its vocab rows"
    if list(packed_merges) != rows_merges:
        return "differs from its merges rows"
    return None


def _check_corpora(store: ModelStore) -> list[Problem]:
    problems: list[Problem] = []
    try:
        corpora = store.corpora()
    except (BpestoreError, TypeError, ValueError, AttributeError) as error:
        return [Problem("corpora", f"{store.location}: the corpora table cannot be read ({error})")]
    for corpus in corpora:
        where = f"corpus {corpus.id}"
        try:
            counts = store.pretoken_counts(corpus.id)
        except (BpestoreError, TypeError, ValueError) as error:
            problems.append(Problem(where, f"{store.location}: its counts cannot be read ({error})"))
            continue
        if len(counts) != corpus.distinct_pretokens or counts.total != corpus.total_pretokens:
            problems.append(Problem(where, (
                f"{store.location}: its row says {corpus.distinct_pretokens} distinct pre-tokens and {corpus.total_pretokens} in all, "
                f"its stored counts hold {len(counts)} and {counts.total}"
            )))
    return problems
