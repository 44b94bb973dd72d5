"""Loading a tokenizer from a SQLite store with the standard library alone.

``Tokenizer.from_db`` on a SQLite file at the current schema revision takes this path: it needs
neither SQLAlchemy nor alembic (whose imports alone cost more than the load), opens the file
read-only and runs three queries. Anything unusual (another database, an older schema, an unknown
name) returns None, and the caller goes through :class:`bpestore.store.database.ModelStore`, which upgrades the
schema or explains the problem.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from .sqlite_uri import sqlite_uri
from .refs import parse_ref
from .schema_revision import SCHEMA_REVISION

VOCAB_SQL = "SELECT token_id, token FROM vocab WHERE tokenizer_id = ?"
MERGES_SQL = 'SELECT "left", "right" FROM merges WHERE tokenizer_id = ? ORDER BY rank'
_TOKENIZER_SQL = "SELECT id, special_tokens, pattern, merge_rule FROM tokenizers WHERE name = ?"


StoredParts = tuple[dict[int, bytes], list[tuple[bytes, bytes]], list[str], str, str]


def load_from_sqlite(path_or_url: str | os.PathLike, ref: str) -> StoredParts | None:
    """The tokenizer ``ref`` from a SQLite file at the current revision as ``(vocab, merges,
    special_tokens, pattern, merge_rule)``, else None."""
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
        if connection.execute("SELECT version_num FROM alembic_version").fetchone() != (SCHEMA_REVISION,):
            return None
        query = _TOKENIZER_SQL + (" AND version = ?" if version else " ORDER BY version DESC LIMIT 1")
        row = connection.execute(query, (name, version) if version else (name,)).fetchone()
        if row is None:
            return None
        tokenizer_id, special_tokens, pattern, merge_rule = row
        vocab = dict(connection.execute(VOCAB_SQL, (tokenizer_id,)).fetchall())
        merges = connection.execute(MERGES_SQL, (tokenizer_id,)).fetchall()
    except sqlite3.Error:
        return None
    finally:
        connection.close()
    return vocab, merges, json.loads(special_tokens), pattern, merge_rule
