"""Loading a stored tokenizer: the one way a database row becomes a :class:`~bpestore.BPEModel`.

:func:`load_model` serves ``Tokenizer.from_db``, ``Store.load`` and the command line alike. On a
SQLite file at the current schema revision it reads with the standard library alone: it needs
neither SQLAlchemy nor alembic (whose imports alone cost more than the load) and runs two or
three queries, reading the tokenizer's packed copy (:mod:`.packed`) when there is one and its rows
otherwise. Anything unusual (another database, an older schema, an unknown name) goes through
:class:`bpestore.store.database.ModelStore`, which upgrades the schema or explains the problem.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ..errors import StoreNotFoundError
from ..model import BPEModel
from .refs import parse_ref
from .packed import unpack
from .rows import MERGES_SQL, VOCAB_SQL, model_from_rows
from .schema_revision import is_current
from .sqlite_uri import connect_sqlite

_TOKENIZER_SQL = (
    "SELECT t.id, t.version, t.special_tokens, t.pattern, t.merge_rule, t.vocab_size, p.data"
    " FROM tokenizers t LEFT JOIN packed_models p ON p.tokenizer_id = t.id WHERE t.name = ?"
)
_TABLES = ("alembic_version", "tokenizers", "packed_models", "vocab", "merges")
_KINDS_SQL = f"SELECT name, type FROM sqlite_master WHERE name IN ({', '.join(repr(t) for t in _TABLES)})"


def load_model(path_or_url: str | os.PathLike, ref: str) -> BPEModel:
    """The stored tokenizer ``ref`` (``name`` for the latest version, or ``name@N``) from the store
    at ``path_or_url`` (a SQLite file or a SQLAlchemy URL).

    Raises:
        StoreNotFoundError: a SQLite file that does not exist or is empty (a read creates nothing;
            it is a FileNotFoundError too).
        TokenizerNotFoundError: no tokenizer ``ref``; the message lists what there is.
        InvalidReferenceError, TypeError: ``ref`` is not ``name`` or ``name@N``, or not a str.
        StoreError: the database is not a bpestore store, is damaged, or is newer than this bpestore.
    """
    if not isinstance(path_or_url, (str, os.PathLike)):
        raise TypeError(f"a store is a path or a database URL (str or os.PathLike), not {type(path_or_url).__name__}")
    location = os.fsdecode(path_or_url)
    parse_ref(ref)  # a bad reference (or not a str) is refused before the store is opened
    if "://" not in location and not os.path.exists(location):
        raise StoreNotFoundError(f"no store at {location} (no such file): only writes (train, import) create one")
    model = load_from_sqlite(location, ref)
    if model is None:
        from .database import ModelStore  # upgrades an older schema, or explains what is wrong

        with ModelStore(location, create=False) as store:
            model = store.load_model(ref)
    return model


def load_from_sqlite(path_or_url: str | os.PathLike, ref: str) -> BPEModel | None:
    """The tokenizer ``ref`` from a SQLite file at the current revision, else None."""
    text = os.fspath(path_or_url)
    if "://" in text or not Path(text).is_file():
        return None
    name, version = parse_ref(ref)
    try:
        # Read-write where possible: only a writable connection removes the WAL files when it
        # closes. Read-only (or immutable) where the file, directory or file system is read-only.
        connection, _ = connect_sqlite(Path(text))
    except sqlite3.Error:
        return None
    try:
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
        tokenizer_id, found_version, special_tokens, pattern, merge_rule, vocab_size, packed = row
        if packed is None:  # saved without a packed copy, or its rows changed since
            vocab_rows = connection.execute(VOCAB_SQL, (tokenizer_id,)).fetchall()
            merge_rows = connection.execute(MERGES_SQL, (tokenizer_id,)).fetchall()
    except sqlite3.Error:
        return None
    finally:
        connection.close()
    if packed is not None:
        vocab_rows, merge_rows = unpack(packed, vocab_size, f"{name}@{found_version}", text)
    return model_from_rows(special_tokens, pattern, merge_rule, vocab_rows, merge_rows)
