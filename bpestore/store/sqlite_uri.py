"""``file:`` URIs for the sqlite3 module, and opening a store's SQLite file even where it cannot
be written (a read-only file, directory or file system)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from urllib.parse import quote, urlencode


def sqlite_uri(path: Path, **parameters: str) -> str:
    """A URI that names exactly ``path``, whatever characters it holds ('?' and '#' included)."""
    return f"file:{quote(str(path.resolve()))}?{urlencode(parameters)}"


def read_only_reason(path: Path) -> str | None:
    """Why ``path`` (an existing file) cannot be written, or None if nothing says it cannot.

    A store in WAL mode also needs its directory (for the ``-wal`` and ``-shm`` files).
    """
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return "it is on a read-only file system"
    except OSError:
        pass
    if not os.access(path, os.W_OK):
        return "the file is read-only"
    if not os.access(path.parent, os.W_OK | os.X_OK):
        return f"its directory {path.parent} is read-only"
    return None


class NotUtf8Text(bytes):
    """A TEXT value whose bytes are not UTF-8 (a row edited by hand, ``CAST(X'FF' AS TEXT)``), as
    :func:`text_or_raw_bytes` gives it: the reads that check a column's type then name the row,
    where the driver's own decoding failed first with a UnicodeDecodeError (an 'Internal error')."""


def text_or_raw_bytes(data: bytes) -> str | bytes:
    """A connection's ``text_factory``: a TEXT value as str, or :class:`NotUtf8Text` when it is
    not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return NotUtf8Text(data)


def connect_sqlite(path: Path, *, timeout: float = 5.0, check_same_thread: bool = True) -> tuple[sqlite3.Connection, dict[str, str]]:
    """A connection to the existing SQLite file ``path``, and the URI parameters that made it
    (``mode`` is ``rw`` when it can write).

    Read-write if possible. Otherwise, when no ``-wal`` file says anyone is writing,
    ``immutable=1``: SQLite then reads the file as it is, without locks or side files (a read-only
    connection to a WAL database would need a ``-shm`` file, which a read-only directory or file
    system cannot hold, and could not remove the side files it made), exact for a file nobody
    changes meanwhile. Otherwise plain read-only, which sees what is in the ``-wal`` file.

    Raises sqlite3.Error from the last attempt if none works.
    """
    attempts: list[dict[str, str]] = []
    if read_only_reason(path) is None:
        attempts.append({"mode": "rw"})
    if not path.with_name(path.name + "-wal").exists():
        # Nobody is writing (a writer would have made the -wal file), and a read-only connection
        # could not remove the -wal and -shm files it would make: read the file as it is.
        attempts.append({"mode": "ro", "immutable": "1"})
    attempts.append({"mode": "ro"})
    error: sqlite3.Error | None = None
    for parameters in attempts:
        try:
            connection = sqlite3.connect(sqlite_uri(path, **parameters), uri=True, timeout=timeout, check_same_thread=check_same_thread)
        except sqlite3.Error as failed:
            error = failed
            continue
        try:
            # SQLite opens lazily: a WAL database fails only at its first read (the -shm file).
            connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError as failed:
            connection.close()
            if not getattr(failed, "sqlite_errorname", "").startswith(("SQLITE_CANTOPEN", "SQLITE_READONLY")):
                raise
            error = failed
            continue
        connection.text_factory = text_or_raw_bytes
        return connection, parameters
    assert error is not None
    raise error
