"""What the explorer reads from the store, read-only.

:class:`ReadOnlyStore` opens a SQLite store with ``mode=ro`` (SQLite itself then refuses any
write) and never creates, upgrades or configures it: a store at another schema revision is refused
with a message, not migrated. Other SQLAlchemy URLs are opened as the store opens them
(``_create_engine``: the driver, a connect timeout, one-line errors) and only ever read; on
PostgreSQL every transaction is ``READ ONLY``, so the server refuses writes.
Tokenizers are loaded once and kept (a few of them, most recently used first). Corpora are
measured from their stored pre-token counts (:meth:`Explorer.corpus_counts`), never from the files
they were read from, which may be gone, compressed or never have existed (counts made on Dask).
"""

from __future__ import annotations

import builtins
import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import create_engine, event, func, select
from sqlalchemy.pool import QueuePool

from ..encode.tokenizer import Tokenizer
from ..errors import StoreError, StoreNotFoundError
from ..store import schema
from ..store.checked import Row, described
from ..store.database import ModelStore, TokenizerInfo
from ..store.loader import load_model
from ..store.migrate import check_sqlite_file
from ..store.schema_revision import is_current
from ..store.sqlite_uri import read_only_reason, sqlite_uri, text_or_raw_bytes

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

_T = TypeVar("_T")
_R = TypeVar("_R", bound=Sequence[Any])

# Tokenizers kept loaded (GPT-2's takes about 0.2 s to load and some tens of MB to keep).
_KEPT_TOKENIZERS = 8
# The most frequent pre-tokens of a corpus the explorer measures tokenizers on. Measured by
# benchmarks/measure_counts.py: GPT-2 encodes wiki_en_57M's 307,187 distinct pre-tokens in
# 1.2-1.5 s on one thread, the top 200,000 (98.4 % of its bytes) in 0.7-0.8 s.
MAX_PRETOKENS = 200_000
# Corpora whose pre-tokens are kept read (some tens of MB each at MAX_PRETOKENS).
_KEPT_CORPORA = 4
# SQLite connections kept open for the server's threads, and as many more opened for a burst (a
# request holds one for a few milliseconds); a request waits this long for one before failing.
_POOLED_CONNECTIONS = 8
_POOL_TIMEOUT_SECONDS = 60


@dataclass(frozen=True)
class CorpusCounts:
    """A stored corpus's most frequent pre-tokens, to measure tokenizers on
    (:func:`bpestore.metrics.measure_counts`), and how much of the corpus they hold."""

    corpus_id: int
    path: str
    """Where it was read from, as stored (a path, a JSON list of paths, a counts file, a Dask
    count's inputs: see ``origin``)."""
    pattern: str
    """The pattern it was pre-tokenized with: the measure is exact for tokenizers that use it."""
    size_bytes: int
    distinct_pretokens: int
    total_pretokens: int
    counts: list[tuple[bytes, int]]
    """The most frequent pre-tokens (valid UTF-8 only), most frequent first."""
    unreadable: int
    """Pre-tokens among the most frequent left out because they are not UTF-8 (counts made elsewhere)."""
    origin: str = "files"
    """How the counts were made (``corpora.origin``): ``files``, ``counts`` or ``dask``."""

    @property
    def complete(self) -> bool:
        """Whether ``counts`` holds every pre-token of the corpus."""
        return len(self.counts) == self.distinct_pretokens

    @property
    def covered_bytes(self) -> int:
        return sum(len(pretoken) * count for pretoken, count in self.counts)

    @property
    def covered_share(self) -> float | None:
        """The share of the corpus's bytes in ``counts`` (its special tokens are in no pre-token)."""
        return self.covered_bytes / self.size_bytes if self.size_bytes else None


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

    read_only_reason = "the explorer only reads"

    def __init__(self, path_or_url: str | os.PathLike[str]) -> None:
        super().__init__(path_or_url, create=False)

    def _connect(self, path_or_url: str | os.PathLike[str], lock_timeout: float | None, create: bool) -> None:
        """A read-only engine: a SQLite file opened ``mode=ro`` (a pool of connections, one per
        request's thread at a time), or a server's engine whose transactions are read-only."""
        text = os.fspath(path_or_url)
        self.is_postgresql = False
        if "://" in text:
            url = self._address(text)  # as the store reads it: postgresql:// means psycopg 3
            if self.is_sqlite and url.database and url.database != ":memory:":
                text = url.database  # a sqlite:/// URL: open the file read-only as below
            else:
                # The store's engine (its driver, PostgreSQL's connect timeout, one-line errors
                # for a missing driver); every transaction read-only where the server can say so.
                self.engine = self._server_engine(url)
                if self.is_postgresql:
                    event.listen(self.engine, "begin", _read_only_transaction)
                return
        path = Path(text).expanduser()
        if not path.is_file():
            raise StoreNotFoundError(f"no store at {path} (no such file): only writes (train, import) create one")  # (list's words)
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
        # A queue of connections, each used by one request's thread at a time (a threaded server
        # runs many requests at once). Not the pool SQLAlchemy picks for a "sqlite://" URL
        # (SingletonThreadPool): past 5 threads it closes other threads' connections while they
        # are in use, which crashed the server (a segmentation fault in SQLite) under a burst of
        # requests. check_same_thread=False only lets a connection pass from one thread to the
        # next through the pool; no two threads ever hold it at once.
        self.engine = create_engine(
            "sqlite://",
            creator=lambda: _connected(uri),
            poolclass=QueuePool,
            pool_size=_POOLED_CONNECTIONS,
            max_overflow=_POOLED_CONNECTIONS,
            pool_timeout=_POOL_TIMEOUT_SECONDS,
        )

    def _migrate(self, create: bool) -> None:
        """Never: the explorer only reads. A store at another revision is refused instead."""
        self._check_revision()

    def _configure(self, create: bool) -> None:
        """Nothing to set: the store is only read."""

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
        # An unreachable server, refused login, ...: the store's one-line StoreUnavailableError.
        with self._errors(), self.engine.connect() as connection:
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
    tokenizers (kept), and the stored corpora's most frequent pre-tokens (kept)."""

    def __init__(self, path_or_url: str | os.PathLike[str]):
        self.store = ReadOnlyStore(path_or_url)
        self._tokenizers: OrderedDict[str, Tokenizer] = OrderedDict()
        self._lock = threading.Lock()
        self._cache: dict[Any, Any] = {}
        self._corpora: OrderedDict[Any, CorpusCounts] = OrderedDict()

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
        tokenizer = Tokenizer.from_model(load_model(self.store, info.ref))
        with self._lock:
            self._tokenizers[info.ref] = tokenizer
            while len(self._tokenizers) > _KEPT_TOKENIZERS:
                self._tokenizers.popitem(last=False)
        return info, tokenizer

    def cached(self, key: Any, compute: Callable[[], _T]) -> _T:
        """``compute()``, remembered under ``key`` (refs name one tokenizer for ever: versions are
        never reused)."""
        with self._lock:
            if key in self._cache:
                value: _T = self._cache[key]  # (what compute() gave for this key)
                return value
        value = compute()
        with self._lock:
            if len(self._cache) > 256:
                self._cache.clear()
            self._cache[key] = value
        return value

    def _tokenizer_id(self, connection: Connection, info: TokenizerInfo) -> int:
        t = schema.tokenizers
        tokenizer_id: int = connection.execute(select(t.c.id).where(t.c.name == info.name, t.c.version == info.version)).scalar_one()
        return tokenizer_id

    # -- vocab and merges, a page at a time ----------------------------------------------------------

    def vocab_page(
        self, info: TokenizerInfo, *, text: str = "", token_id: int | None = None, hex_bytes: bytes | None = None,
        offset: int = 0, limit: int = 100,
    ) -> tuple[int, builtins.list[VocabRow]]:
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
        return total, [VocabRow(*row) for row in _checked_vocab(rows, self.store.location, info)]

    def merges_page(
        self, info: TokenizerInfo, *, text: str = "", rank: int | None = None, offset: int = 0, limit: int = 100,
    ) -> tuple[int, builtins.list[MergeRow]]:
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
        return total, [MergeRow(*row) for row in _checked_merges(rows, self.store.location, info)]

    def longest_tokens(self, info: TokenizerInfo, count: int = 20) -> builtins.list[VocabRow]:
        v = schema.vocab
        with self.store._transaction() as connection:
            rows = connection.execute(
                select(v.c.token_id, v.c.token, v.c.kind)
                .where(v.c.tokenizer_id == self._tokenizer_id(connection, info), v.c.kind != "special")
                .order_by(func.length(v.c.token).desc(), v.c.token_id)
                .limit(count)
            ).all()
        return [VocabRow(*row) for row in _checked_vocab(rows, self.store.location, info)]

    def kinds_and_lengths(self, info: TokenizerInfo) -> tuple[dict[str, int], dict[int, int]]:
        """How many tokens of each kind, and how many non-special tokens of each length in bytes."""
        v = schema.vocab
        length = func.length(v.c.token)
        with self.store._transaction() as connection:
            tokenizer_id = self._tokenizer_id(connection, info)
            kinds: dict[str, int] = dict(connection.execute(select(v.c.kind, func.count()).where(v.c.tokenizer_id == tokenizer_id).group_by(v.c.kind)).all())
            lengths: dict[int, int] = dict(
                connection.execute(
                    select(length, func.count()).where(v.c.tokenizer_id == tokenizer_id, v.c.kind != "special").group_by(length)
                ).all()
            )
        return kinds, lengths

    # -- corpora ----------------------------------------------------------------------------------

    def corpus_counts(self, info: TokenizerInfo, limit: int | None = None) -> CorpusCounts | None:
        """The ``limit`` (default :data:`MAX_PRETOKENS`) most frequent pre-tokens of the corpus
        ``info`` was trained on (kept once read); None for a tokenizer that was not trained here
        (imported, saved)."""
        limit = MAX_PRETOKENS if limit is None else limit
        t, c, p = schema.tokenizers, schema.corpora, schema.pretoken_counts
        with self.store._transaction() as connection:
            corpus = connection.execute(
                select(c.c.id, c.c.sha256, c.c.path, c.c.origin, c.c.pattern, c.c.size_bytes, c.c.distinct_pretokens, c.c.total_pretokens)
                .select_from(t.join(c, t.c.corpus_id == c.c.id))
                .where(t.c.name == info.name, t.c.version == info.version)
            ).first()
        if corpus is None:
            return None

        def read() -> CorpusCounts:
            with self.store._transaction() as connection:
                rows = connection.execute(
                    select(p.c.pretoken, p.c.count).where(p.c.corpus_id == corpus.id).order_by(p.c.count.desc(), p.c.pretoken).limit(limit)
                ).all()
            counts, unreadable = [], 0
            for pretoken, count in rows:
                where = Row(self.store.location, "", "pretoken_counts", f"corpus_id {corpus.id}, pretoken {pretoken!r}")
                if not isinstance(pretoken, bytes):
                    raise where.damaged("pretoken", f"holds {described(pretoken)}, not a blob")
                where.integer("count", count)
                try:
                    pretoken.decode("utf-8")
                except UnicodeDecodeError:
                    unreadable += 1
                    continue
                counts.append((pretoken, int(count)))
            return CorpusCounts(
                corpus.id, corpus.path, corpus.pattern, int(corpus.size_bytes), int(corpus.distinct_pretokens),
                int(corpus.total_pretokens), counts, unreadable, corpus.origin,
            )

        key = (corpus.id, corpus.sha256, limit)  # ids of deleted corpora can come back
        with self._lock:
            found = self._corpora.get(key)
            if found is not None:
                self._corpora.move_to_end(key)
                return found
        found = read()
        with self._lock:
            self._corpora[key] = found
            while len(self._corpora) > _KEPT_CORPORA:
                self._corpora.popitem(last=False)
        return found


def _connected(uri: str) -> sqlite3.Connection:
    connection = sqlite3.connect(uri, uri=True, check_same_thread=False)
    connection.text_factory = text_or_raw_bytes  # text that is not UTF-8: named by the reads' checks, as the store's own connections do
    return connection


def _checked_vocab(rows: Sequence[_R], location: str, info: TokenizerInfo) -> Sequence[_R]:
    """``vocab`` rows ``(token_id, token, kind)`` as their columns promise, else DamagedStoreError."""
    for token_id, token, kind in rows:
        where = Row(location, info.ref, "vocab", f"token_id {token_id!r}")
        where.integer("token_id", token_id)
        if not isinstance(token, bytes):
            raise where.damaged("token", f"holds {described(token)}, not a blob")
        where.text("kind", kind)
    return rows


def _checked_merges(rows: Sequence[_R], location: str, info: TokenizerInfo) -> Sequence[_R]:
    """``merges`` rows ``(rank, left, right, result_id)`` as their columns promise, else DamagedStoreError."""
    for rank, left, right, result_id in rows:
        where = Row(location, info.ref, "merges", f"rank {rank!r}")
        where.integer("rank", rank)
        for column, value in (("left", left), ("right", right)):
            if not isinstance(value, bytes):
                raise where.damaged(column, f"holds {described(value)}, not a blob")
        where.integer("result_id", result_id)
    return rows


def _read_only_transaction(connection: Connection) -> None:
    """Start each PostgreSQL transaction read-only: the server then refuses any write (the store's
    tables, a temporary table, a sequence), as SQLite's ``mode=ro`` does."""
    connection.exec_driver_sql("SET TRANSACTION READ ONLY")


def _wal_files(path: Path) -> tuple[Path, Path]:
    return path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")
