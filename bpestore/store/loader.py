"""Loading a stored tokenizer: the one way a database row becomes a :class:`~bpestore.BPEModel`.

:func:`load_model` serves ``Tokenizer.from_db``, ``Store.load`` (and so ``Store.diff``) and every
command of the command line that reads a tokenizer (``encode``, ``decode``, ``show``, ``diff``,
``export``) alike. On a SQLite file at the current schema revision it reads with the standard
library alone: it needs neither SQLAlchemy nor alembic (whose imports alone cost more than the
load) and runs two or three queries, reading the tokenizer's packed copy (:mod:`.packed`) when
there is one and its rows otherwise. Given a store that is already open (a
:class:`~bpestore.store.database.ModelStore`), it runs the same queries on that store's own SQLite
connection instead of opening another. Anything unusual (another database, an older schema, an
unknown name) goes through :meth:`ModelStore.load_model
<bpestore.store.database.ModelStore.load_model>`, which upgrades the schema or explains the
problem. The schema revision is checked in one place, :func:`.schema_revision.is_current`.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import StoreNotFoundError
from ..model import BPEModel, PackedMerges
from .checked import Row, checked_merge_rows, checked_vocab_rows
from .refs import parse_ref
from .packed import unpack
from .rows import MERGES_SQL, VOCAB_SQL, WARM_SQL, StoredWarm, checked_warm, model_from_rows
from .schema_revision import is_current
from .sqlite_uri import connect_sqlite

if TYPE_CHECKING:  # not at run time: the fast path must not import SQLAlchemy
    from .database import ModelStore

_TOKENIZER_SQL = (
    "SELECT t.id, t.version, t.special_tokens, t.pattern, t.merge_rule, t.vocab_size, p.data, t.added_tokens, t.pipeline"
    " FROM tokenizers t LEFT JOIN packed_models p ON p.tokenizer_id = t.id WHERE t.name = ?"
)
_TABLES = ("alembic_version", "tokenizers", "packed_models", "vocab", "merges", "warm_caches")
_KINDS_SQL = f"SELECT name, type FROM sqlite_master WHERE name IN ({', '.join(repr(t) for t in _TABLES)})"


def load_model(store: str | os.PathLike[str] | ModelStore, ref: str) -> BPEModel:
    """:func:`load_with_warm` without the warm table."""
    return load_with_warm(store, ref, warm=False)[0]


def load_with_warm(
    store: str | os.PathLike[str] | ModelStore, ref: str, *, warm: bool = True
) -> tuple[BPEModel, StoredWarm | None]:
    """The stored tokenizer ``ref`` (``name`` for the latest version, or ``name@N``) from ``store``:
    a SQLite file or a SQLAlchemy URL, or a store already open (a
    :class:`~bpestore.store.database.ModelStore`, such as a :class:`bpestore.Store`), which is read
    through its own connection; and, if ``warm``, its warm table (None if it has none), read in the
    same transaction on SQLite.

    Raises:
        StoreNotFoundError: a SQLite file that does not exist or is empty (a read creates nothing;
            it is a FileNotFoundError too).
        TokenizerNotFoundError: no tokenizer ``ref``; the message lists what there is.
        InvalidReferenceError, TypeError: ``ref`` is not ``name`` or ``name@N``, or not a str.
        StoreError: the database is not a bpestore store, is damaged, or is newer than this bpestore.
    """
    if not isinstance(store, (str, os.PathLike)):
        return _load_from_open_store(store, ref, warm)
    location = os.fsdecode(store)
    parse_ref(ref)  # a bad reference (or not a str) is refused before the store is opened
    if "://" not in location and not os.path.exists(location):
        raise StoreNotFoundError(f"no store at {location} (no such file): only writes (train, import) create one")
    loaded = load_from_sqlite(location, ref, warm=warm)
    if loaded is None:
        from .database import ModelStore  # upgrades an older schema, or explains what is wrong

        with ModelStore(location, create=False) as opened:
            loaded = opened.load_model(ref), opened.warm_of(ref) if warm else None
    return loaded


def _load_from_open_store(store: ModelStore, ref: str, warm: bool) -> tuple[BPEModel, StoredWarm | None]:
    """:func:`load_model` for a store already open: the fast queries on one of its own pooled
    connections when it is a SQLite file, its SQLAlchemy path otherwise or when they find nothing."""
    from .database import ModelStore  # already imported by whoever opened the store: costs nothing

    if not isinstance(store, ModelStore):
        raise TypeError(f"a store is a path or a database URL (str or os.PathLike), not {type(store).__name__}")
    parse_ref(ref)
    loaded = None
    if store.is_sqlite:
        pooled = store.engine.raw_connection()
        try:
            connection = pooled.driver_connection
            assert isinstance(connection, sqlite3.Connection)
            loaded = _read_current_sqlite(connection, store.location, ref, warm)
        finally:
            pooled.close()  # back to the store's pool, not closed
    if loaded is not None:
        return loaded
    # (the store's own SQLAlchemy reading: a subclass's load_model may come back here)
    return ModelStore.load_model(store, ref), ModelStore.warm_of(store, ref) if warm else None


def load_from_sqlite(
    path_or_url: str | os.PathLike[str], ref: str, *, warm: bool = False
) -> tuple[BPEModel, StoredWarm | None] | None:
    """The tokenizer ``ref`` (and, if ``warm``, its warm table) from a SQLite file at the current
    revision, else None."""
    text = os.fspath(path_or_url)
    if "://" in text or not Path(text).is_file():
        return None
    try:
        # Read-write where possible: only a writable connection removes the WAL files when it
        # closes. Read-only (or immutable) where the file, directory or file system is read-only.
        connection, _ = connect_sqlite(Path(text))
    except sqlite3.Error:
        return None
    try:
        return _read_current_sqlite(connection, text, ref, warm)
    finally:
        connection.close()


def _read_current_sqlite(
    connection: sqlite3.Connection, location: str, ref: str, warm: bool
) -> tuple[BPEModel, StoredWarm | None] | None:
    """The tokenizer ``ref`` (and its warm table, if ``warm``) read on ``connection`` (to the
    SQLite file ``location``) with plain SQL, in one read transaction, if the file is a store at
    the current revision holding it; else None (for :meth:`ModelStore.load_model` to upgrade,
    refuse or explain)."""
    name, version = parse_ref(ref)
    began = False
    try:
        if not connection.in_transaction:
            connection.execute("BEGIN")  # one snapshot: the tokenizer's row and its vocab and merges
            began = True
        # Tables must be tables: a view in a table's place (a recursive one never ends) is for
        # ModelStore to refuse, with its reason.
        kinds = dict(connection.execute(_KINDS_SQL).fetchall())
        if any(kinds.get(table) != "table" for table in _TABLES):
            return None
        revisions = connection.execute("SELECT version_num FROM alembic_version LIMIT 2").fetchall()
        if len(revisions) != 1 or not is_current(revisions[0][0]):
            return None
        query = _TOKENIZER_SQL + (" AND t.version = ?" if version else " ORDER BY t.version DESC LIMIT 1")
        row = connection.execute(query, (name, version) if version else (name,)).fetchone()
        if row is None:
            return None
        tokenizer_id, found_version, special_tokens, pattern, merge_rule, vocab_size, packed, added_tokens, pipeline = row
        vocab_rows: Mapping[int, bytes] | Iterable[tuple[int, bytes]]
        merge_rows: Iterable[tuple[bytes, bytes]] | PackedMerges
        if packed is None:  # saved without a packed copy, or its rows changed since
            ref_found = f"{name}@{found_version}"
            vocab_rows = checked_vocab_rows(
                connection.execute(VOCAB_SQL, (tokenizer_id,)).fetchall(), location, ref_found, tokenizer_id, vocab_size
            )
            merge_rows = checked_merge_rows(connection.execute(MERGES_SQL, (tokenizer_id,)).fetchall(), location, ref_found)
        warm_row = connection.execute(WARM_SQL, (tokenizer_id,)).fetchone() if warm else None
    except sqlite3.Error:
        return None
    finally:
        if began:
            try:
                connection.execute("ROLLBACK")  # read only: nothing to keep
            except sqlite3.Error:
                pass
    Row(location, f"{name}@{found_version}", "tokenizers", f"id {tokenizer_id}").integer("vocab_size", vocab_size)
    if packed is not None:
        # (the merges' list is made when first asked for: a tokenizer's encoder reads them in the copy)
        vocab_rows, merge_rows = unpack(packed, vocab_size, f"{name}@{found_version}", location, merges_now=False)
    model = model_from_rows(
        special_tokens, pattern, merge_rule, vocab_rows, merge_rows, f"{name}@{found_version}", location, added_tokens, pipeline
    )
    if warm_row is None:
        return model, None
    fingerprint, entries, source, data = warm_row
    where = Row(location, f"{name}@{found_version}", "warm_caches", f"tokenizer_id {tokenizer_id}")
    return model, checked_warm(fingerprint, entries, source, data, None, where)
