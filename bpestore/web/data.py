"""What the explorer reads from the store, read-only.

:class:`ReadOnlyStore` opens a SQLite store with ``mode=ro`` (SQLite itself then refuses any
write) and never creates, upgrades or configures it: a store at another schema revision is refused
with a message, not migrated. Other SQLAlchemy URLs are opened as given and only ever read.
Tokenizers are loaded once and kept (a few of them, most recently used first).
"""

from __future__ import annotations

import codecs
import errno
import os
import sqlite3
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, func, select
from sqlalchemy.engine import make_url

from ..encode.tokenizer import Tokenizer
from ..errors import StoreError
from ..store import schema
from ..store.database import ModelStore, TokenizerInfo
from ..store.migrate import check_sqlite_file
from ..store.schema_revision import is_current
from ..store.sqlite_uri import read_only_reason, sqlite_uri

# Tokenizers kept loaded (GPT-2's takes about 0.2 s to load and some tens of MB to keep).
_KEPT_TOKENIZERS = 8
# How much of a stored corpus file the explorer reads as a sample to measure on.
SAMPLE_BYTES = 64 * 1024


@dataclass(frozen=True)
class VocabRow:
    """One token of a vocabulary page."""

    id: int
    token: bytes
    kind: str


@dataclass(frozen=True)
class MergeRow:
    """One merge of a merges page: its rank, the two parts and the id of the token it makes."""

    rank: int
    left: bytes
    right: bytes
    result_id: int


class ReadOnlyStore(ModelStore):
    """A bpestore store opened for reading only (see the module's docstring).

    It reuses :class:`~bpestore.store.database.ModelStore`'s reading methods (``list``, ``info``,
    ``load_model``) over a read-only engine; its writing methods must not be called (on SQLite
    they fail: the connection is read-only).
    """

    def __init__(self, path_or_url: str | os.PathLike):  # noqa: D107 - no super().__init__: it writes
        text = os.fspath(path_or_url)
        if "://" in text:
            url = make_url(text)
            self.url = url.render_as_string(hide_password=False)
            self.is_sqlite = url.get_backend_name() == "sqlite"
            self.location = url.render_as_string(hide_password=True)
            if self.is_sqlite and url.database and url.database != ":memory:":
                text = url.database  # a sqlite:/// URL: open the file read-only as below
            else:
                self.engine = create_engine(url)
                self._check_revision()
                return
        path = Path(text).expanduser()
        if not path.is_file():
            raise FileNotFoundError(errno.ENOENT, "No such tokenizer store", str(path))
        check_sqlite_file(path)  # a file that is not a bpestore store is refused, untouched
        self._path = path
        parameters = {"mode": "ro"}
        if read_only_reason(path) is not None and not _wal_files(path)[0].exists():
            # As the store package does (store/sqlite_uri.py, connect_sqlite): where the side
            # files cannot be made (a read-only directory or file system) and no -wal file says
            # anyone is writing, read the file as it is. Plain mode=ro would need a -shm file.
            parameters["immutable"] = "1"
        # A read-only connection to a WAL database makes its -wal and -shm files if they are not
        # there, and cannot remove them: close() does, if nobody was using the store meanwhile.
        self._made_wal_files = "immutable" not in parameters and not _wal_files(path)[0].exists()
        self.is_sqlite = True
        self.location = str(path)
        self.url = f"sqlite:///{path}"
        uri = sqlite_uri(path, **parameters)
        self.engine = create_engine(
            "sqlite://", creator=lambda: sqlite3.connect(uri, uri=True, check_same_thread=False)
        )
        self._check_revision()

    def close(self) -> None:
        """Close the connections; remove the -wal and -shm files the explorer's reading made,
        if no one else has written since (an empty -wal: closing a connection then checkpoints
        nothing, and the store file is not written)."""
        super().close()
        path = getattr(self, "_path", None)
        if path is None or not self._made_wal_files:
            return
        wal, _ = _wal_files(path)
        if wal.exists() and wal.stat().st_size == 0:
            connection = sqlite3.connect(sqlite_uri(path, mode="rw"), uri=True)
            try:
                connection.execute("SELECT count(*) FROM sqlite_master").fetchone()  # joins the WAL, to leave it last
            finally:
                connection.close()

    def _check_revision(self) -> None:
        with self.engine.connect() as connection:
            try:
                revision = connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
            except Exception:  # noqa: BLE001 - any database error means: not a store we can read
                revision = None
        if not is_current(revision):
            raise StoreError(
                f"{self.location} is empty or at another schema revision ({revision!r}); the explorer only "
                "reads: open it once with another bpestore command (e.g. `bpestore list`) to create or upgrade it"
            )


class Explorer:
    """The explorer's view of one store: tokenizer metadata, pages of vocab and merges, loaded
    tokenizers (kept), and samples of the stored corpora."""

    def __init__(self, path_or_url: str | os.PathLike):
        self.store = ReadOnlyStore(path_or_url)
        self._tokenizers: OrderedDict[str, Tokenizer] = OrderedDict()
        self._lock = threading.Lock()
        self._cache: dict[Any, Any] = {}

    def close(self) -> None:
        self.store.close()

    # -- metadata -----------------------------------------------------------------------------------

    def list(self) -> list[TokenizerInfo]:
        return self.store.list()

    def info(self, ref: str) -> TokenizerInfo:
        return self.store.info(ref)

    def tokenizer(self, ref: str) -> tuple[TokenizerInfo, Tokenizer]:
        """The stored tokenizer ``ref`` (loaded once, then kept) with its metadata."""
        info = self.info(ref)
        with self._lock:
            tokenizer = self._tokenizers.get(info.ref)
            if tokenizer is not None:
                self._tokenizers.move_to_end(info.ref)
                return info, tokenizer
        tokenizer = Tokenizer.from_model(self.store.load_model(info.ref))
        with self._lock:
            self._tokenizers[info.ref] = tokenizer
            while len(self._tokenizers) > _KEPT_TOKENIZERS:
                self._tokenizers.popitem(last=False)
        return info, tokenizer

    def cached(self, key: Any, compute):
        """``compute()``, remembered under ``key`` (refs name one tokenizer for ever: versions are
        never reused)."""
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        value = compute()
        with self._lock:
            if len(self._cache) > 256:
                self._cache.clear()
            self._cache[key] = value
        return value

    def _tokenizer_id(self, connection, info: TokenizerInfo) -> int:
        t = schema.tokenizers
        return connection.execute(select(t.c.id).where(t.c.name == info.name, t.c.version == info.version)).scalar_one()

    # -- vocab and merges, a page at a time ----------------------------------------------------------

    def vocab_page(
        self, info: TokenizerInfo, *, text: str = "", token_id: int | None = None, hex_bytes: bytes | None = None,
        offset: int = 0, limit: int = 100,
    ) -> tuple[int, list[VocabRow]]:
        """Tokens by id: those whose text contains ``text``, the token ``token_id``, or those whose
        bytes contain ``hex_bytes``; returns how many match and the page."""
        v = schema.vocab
        with self.store._transaction() as connection:
            conditions = [v.c.tokenizer_id == self._tokenizer_id(connection, info)]
            if text:
                conditions.append(func.instr(v.c.text, text) > 0 if self.store.is_sqlite else v.c.text.contains(text, autoescape=True))
            if token_id is not None:
                conditions.append(v.c.token_id == token_id)
            if hex_bytes:
                conditions.append(func.instr(v.c.token, hex_bytes) > 0 if self.store.is_sqlite else v.c.token.contains(hex_bytes))
            total = connection.execute(select(func.count()).select_from(v).where(*conditions)).scalar_one()
            rows = connection.execute(
                select(v.c.token_id, v.c.token, v.c.kind).where(*conditions).order_by(v.c.token_id).offset(offset).limit(limit)
            ).all()
        return total, [VocabRow(*row) for row in rows]

    def merges_page(
        self, info: TokenizerInfo, *, text: str = "", rank: int | None = None, offset: int = 0, limit: int = 100,
    ) -> tuple[int, list[MergeRow]]:
        """Merges by rank (those making a token whose text contains ``text``, or the merge of rank
        ``rank``): how many, and the page."""
        m, v = schema.merges, schema.vocab
        with self.store._transaction() as connection:
            tokenizer_id = self._tokenizer_id(connection, info)
            mine = [m.c.tokenizer_id == tokenizer_id] + ([m.c.rank == rank] if rank is not None else [])
            query = select(m.c.rank, m.c.left, m.c.right, m.c.result_id).where(*mine)
            count = select(func.count()).select_from(m).where(*mine)
            if text:
                joined = m.join(v, (v.c.tokenizer_id == m.c.tokenizer_id) & (v.c.token_id == m.c.result_id))
                found = func.instr(v.c.text, text) > 0 if self.store.is_sqlite else v.c.text.contains(text, autoescape=True)
                query = query.select_from(joined).where(found)
                count = select(func.count()).select_from(joined).where(*mine, found)
            total = connection.execute(count).scalar_one()
            rows = connection.execute(query.order_by(m.c.rank).offset(offset).limit(limit)).all()
        return total, [MergeRow(*row) for row in rows]

    def longest_tokens(self, info: TokenizerInfo, count: int = 20) -> list[VocabRow]:
        v = schema.vocab
        with self.store._transaction() as connection:
            rows = connection.execute(
                select(v.c.token_id, v.c.token, v.c.kind)
                .where(v.c.tokenizer_id == self._tokenizer_id(connection, info), v.c.kind != "special")
                .order_by(func.length(v.c.token).desc(), v.c.token_id)
                .limit(count)
            ).all()
        return [VocabRow(*row) for row in rows]

    def kinds_and_lengths(self, info: TokenizerInfo) -> tuple[dict[str, int], dict[int, int]]:
        """How many tokens of each kind, and how many non-special tokens of each length in bytes."""
        v = schema.vocab
        length = func.length(v.c.token)
        with self.store._transaction() as connection:
            tokenizer_id = self._tokenizer_id(connection, info)
            kinds = dict(connection.execute(select(v.c.kind, func.count()).where(v.c.tokenizer_id == tokenizer_id).group_by(v.c.kind)).all())
            lengths = dict(
                connection.execute(
                    select(length, func.count()).where(v.c.tokenizer_id == tokenizer_id, v.c.kind != "special").group_by(length)
                ).all()
            )
        return kinds, lengths

    # -- corpora ----------------------------------------------------------------------------------

    def corpus_sample(self, info: TokenizerInfo, max_bytes: int = SAMPLE_BYTES) -> str | None:
        """The first ``max_bytes`` (cut at a character boundary) of the corpus ``info`` was trained
        on, if the file is still where it was; else None."""
        if not info.corpus_path:
            return None
        return read_sample(info.corpus_path, max_bytes)


def _wal_files(path: Path) -> tuple[Path, Path]:
    return path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")


def read_sample(path: str | os.PathLike, max_bytes: int = SAMPLE_BYTES) -> str | None:
    """The first ``max_bytes`` of a UTF-8 file as text (a character cut by the limit is left out);
    None if it cannot be read or is not UTF-8."""
    try:
        with open(path, "rb") as file:
            data = file.read(max_bytes)
    except OSError:
        return None
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(data, final=False)
    except UnicodeDecodeError:
        return None
