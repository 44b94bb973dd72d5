"""Loading a stored tokenizer: the one way a database row becomes a :class:`~bpestore.BPEModel`.

:func:`load_model` serves ``Tokenizer.from_db``, ``Store.load`` and the command line alike. On a
SQLite file at the current schema revision it reads with the standard library alone: it needs
neither SQLAlchemy nor alembic (whose imports alone cost more than the load) and runs two or
three queries, reading the tokenizer's packed copy (:mod:`.packed`) when there is one and its rows
otherwise. Anything unusual (another database, an older schema, an unknown name) goes through
:class:`bpestore.store.database.ModelStore`, which upgrades the schema or explains the problem.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from ..model import BPEModel
from .refs import parse_ref
from .packed import unpack
from .rows import MERGES_SQL, VOCAB_SQL, model_from_rows
from .schema_revision import is_current
from .sqlite_uri import sqlite_uri

_TOKENIZER_SQL = (
    "SELECT t.id, t.version, t.special_tokens, t.pattern, t.merge_rule, t.vocab_size, p.data"
    " FROM tokenizers t LEFT JOIN packed_models p ON p.tokenizer_id = t.id WHERE t.name = ?"
)


def load_model(path_or_url: str | os.PathLike, ref: str) -> BPEModel:
    """The stored tokenizer ``ref`` (``name`` for the latest version, or ``name@N``) from the store
    at ``path_or_url`` (a SQLite file or a SQLAlchemy URL).

    Raises:
        FileNotFoundError: a SQLite file that does not exist (it is not created).
        TokenizerNotFoundError: no tokenizer ``ref``; the message lists what there is.
        StoreError: the database is not a bpestore store, or newer than this bpestore.
    """
    location = os.fspath(path_or_url)
    if "://" not in location and not os.path.exists(location):
        raise FileNotFoundError(errno.ENOENT, "No such tokenizer store", location)
    model = load_from_sqlite(location, ref)
    if model is None:
        from .database import ModelStore  # upgrades an older schema, or explains what is wrong

        with ModelStore(location) as store:
            model = store.load_model(ref)
    return model


def load_from_sqlite(path_or_url: str | os.PathLike, ref: str) -> BPEModel | None:
    """The tokenizer ``ref`` from a SQLite file at the current revision, else None."""
    text = os.fspath(path_or_url)
    if "://" in text or not Path(text).is_file():
        return None
    name, version = parse_ref(ref)
    try:
        # Not read-only: only a writable connection removes the WAL files when it closes.
        connection = sqlite3.connect(sqlite_uri(Path(text), mode="rw"), uri=True)
    except sqlite3.Error:
        return None
    try:
        (revision,) = connection.execute("SELECT version_num FROM alembic_version").fetchone() or (None,)
        if not is_current(revision):
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
