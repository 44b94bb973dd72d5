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

from sqlalchemy.exc import DBAPIError

from ..errors import BpestoreError, StoreError
from .database import ModelStore, _as_url
from .packed import PACKED_SQL, unpack
from .rows import MERGES_SQL, VOCAB_SQL


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
        store = ModelStore(path_or_url, create=False)
    except BpestoreError as error:
        return problems + [Problem("store", str(error))]
    with store:
        for part in (_check_tokenizers, _check_corpora):
            try:
                problems += part(store)
            except (sqlite3.Error, DBAPIError) as error:  # a damaged file: what SQLite says, once
                reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
                problems.append(Problem("store", f"{store.location}: {reason}"))
    return problems


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
