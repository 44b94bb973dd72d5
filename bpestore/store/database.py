"""``Store``: named, versioned tokenizers side by side in one database.

A plain path means a SQLite file (created on first use); any SQLAlchemy URL is accepted. Every
write is one transaction, so an error or Ctrl-C never leaves a partial tokenizer behind. On SQLite,
write transactions start with ``BEGIN IMMEDIATE`` (so concurrent writers queue on the busy timeout
instead of failing), and the database runs in WAL mode (so readers never wait for writers).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from itertools import islice
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import create_engine, delete, event, func, insert, select, update
from sqlalchemy.engine import URL, Connection, Engine, make_url

from . import schema
from ..errors import TokenizerNotFoundError
from ..model import BPEModel
from .rows import MERGES_SQL, VOCAB_SQL, model_from_rows
from .packed import PACKED_SQL, pack, unpack
from .migrate import check_sqlite_file, upgrade_to_head
from ..progress import progress_bar
from .refs import check_name, parse_ref

DEFAULT_BUSY_TIMEOUT_SECONDS = 120.0
_BATCH_ROWS = 50_000


class HasModel(Protocol):
    """Anything that carries a :class:`BPEModel` (a ``bpestore.Tokenizer`` does)."""

    @property
    def model(self) -> BPEModel: ...


@dataclass(frozen=True)
class TokenizerInfo:
    """What the store knows about one stored tokenizer (everything but its vocab and merges)."""

    name: str
    version: int
    vocab_size: int
    num_merges: int
    special_tokens: list[str]
    pattern: str
    merge_rule: str
    created_at: datetime
    source: str
    """Where it came from, in words: ``trained``, ``saved from Python``, or ``imported from
    <format> <paths>`` (built from ``source_format`` and ``source_paths``)."""
    source_format: str | None
    """The format an import read (``gpt2``, ``hf``, ``tiktoken``); None if it was not imported."""
    source_paths: list[str] | None
    """The files an import read, resolved; None if it was not imported."""
    training_seconds: float | None
    training_params: dict[str, Any] | None
    corpus_path: str | None
    corpus_sha256: str | None
    corpus_bytes: int | None

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ref"] = self.ref
        data["created_at"] = self.created_at.isoformat()
        return data


def _source_text(source: str, source_format: str | None, source_paths: list[str] | None) -> str:
    if source_format is None:
        return source
    return f"imported from {source_format} {' '.join(source_paths or [])}".rstrip()


def _as_url(path_or_url: str | os.PathLike) -> URL:
    """A SQLAlchemy URL as given, or a path (any characters, '?' and '#' included) as SQLite."""
    text = os.fspath(path_or_url)
    if "://" in text:
        return make_url(text)
    return URL.create("sqlite", database=str(Path(text).expanduser()))


def _token_kind(token_id: int, token: bytes, special_ids: set[int], merged: set[bytes]) -> str:
    if token_id in special_ids:
        return "special"
    if len(token) == 1:
        return "byte"
    return "merge" if token in merged else "other"


class ModelStore:
    """A database of tokenizers (their vocab, merges and settings), corpora and pre-token counts.
    Use as a context manager, or call :meth:`close`.

    It stores and reads; it neither trains nor encodes. :class:`bpestore.Store`
    (:mod:`bpestore.workflow`) adds training into the store, loading as a ``Tokenizer`` and diffs.
    """

    def __init__(self, path_or_url: str | os.PathLike = "bpestore.db", *, busy_timeout: float = DEFAULT_BUSY_TIMEOUT_SECONDS):
        url = _as_url(path_or_url)
        self.url = url.render_as_string(hide_password=False)
        self.is_sqlite = url.get_backend_name() == "sqlite"
        # For messages: the file for SQLite, else the URL without its password.
        self.location = url.database if self.is_sqlite and url.database else url.render_as_string(hide_password=True)
        if self.is_sqlite and url.database and url.database != ":memory:":
            database = Path(url.database)
            check_sqlite_file(database)
            if not database.parent.is_dir():
                raise FileNotFoundError(f"cannot create {database}: directory {database.parent} does not exist")
        self.engine: Engine = create_engine(url, connect_args={"timeout": busy_timeout} if self.is_sqlite else {})
        if self.is_sqlite:
            event.listen(self.engine, "connect", _configure_sqlite_connection)
            event.listen(self.engine, "begin", _begin_sqlite_transaction)
        upgrade_to_head(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> ModelStore:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.location!r})"

    @contextmanager
    def _transaction(self, write: bool = False) -> Iterator[Connection]:
        with self.engine.connect() as connection:
            connection.execution_options(bpestore_write=write)
            with connection.begin():
                yield connection

    # -- reading ----------------------------------------------------------------------------------

    def _resolve(self, connection: Connection, ref: str) -> Any:
        """The ``tokenizers`` row of ``ref``, joined with its corpus; TokenizerNotFoundError if none."""
        name, version = parse_ref(ref)
        t, c = schema.tokenizers, schema.corpora
        query = (
            select(t, c.c.path.label("corpus_path"), c.c.sha256.label("corpus_sha256"), c.c.size_bytes.label("corpus_bytes"))
            .select_from(t.outerjoin(c, t.c.corpus_id == c.c.id))
            .where(t.c.name == name)
        )
        query = query.where(t.c.version == version) if version else query.order_by(t.c.version.desc()).limit(1)
        row = connection.execute(query).first()
        if row is not None:
            return row
        if version is not None:
            versions = connection.execute(select(t.c.version).where(t.c.name == name).order_by(t.c.version)).scalars().all()
            if versions:
                raise TokenizerNotFoundError(f"{name!r} has no version {version} (versions: {', '.join(map(str, versions))})")
        names = connection.execute(select(t.c.name).distinct().order_by(t.c.name)).scalars().all()
        known = ", ".join(names) if names else "none: the store is empty"
        raise TokenizerNotFoundError(f"no tokenizer named {name!r} in {self.location} (names: {known})")

    def _info(self, connection: Connection, row: Any) -> TokenizerInfo:
        source_paths = json.loads(row.source_paths) if row.source_paths is not None else None
        num_merges = connection.execute(
            select(func.count()).select_from(schema.merges).where(schema.merges.c.tokenizer_id == row.id)
        ).scalar_one()
        return TokenizerInfo(
            name=row.name,
            version=row.version,
            vocab_size=row.vocab_size,
            num_merges=num_merges,
            special_tokens=json.loads(row.special_tokens),
            pattern=row.pattern,
            merge_rule=row.merge_rule,
            created_at=row.created_at.replace(tzinfo=timezone.utc),
            source=_source_text(row.source, row.source_format, source_paths),
            source_format=row.source_format,
            source_paths=source_paths,
            training_seconds=row.training_seconds,
            training_params=json.loads(row.training_params) if row.training_params else None,
            corpus_path=row.corpus_path,
            corpus_sha256=row.corpus_sha256,
            corpus_bytes=row.corpus_bytes,
        )

    def info(self, ref: str) -> TokenizerInfo:
        """Metadata of one tokenizer (``name`` for the latest version or ``name@N``)."""
        with self._transaction() as connection:
            return self._info(connection, self._resolve(connection, ref))

    def list(self, name: str | None = None) -> list[TokenizerInfo]:
        """All tokenizers (or all versions of ``name``), by name then version."""
        t, c = schema.tokenizers, schema.corpora
        query = (
            select(t, c.c.path.label("corpus_path"), c.c.sha256.label("corpus_sha256"), c.c.size_bytes.label("corpus_bytes"))
            .select_from(t.outerjoin(c, t.c.corpus_id == c.c.id))
            .order_by(t.c.name, t.c.version)
        )
        if name is not None:
            query = query.where(t.c.name == check_name(name))
        with self._transaction() as connection:
            return [self._info(connection, row) for row in connection.execute(query)]

    def load_model(self, ref: str) -> BPEModel:
        """The stored tokenizer ``ref`` (``name`` for the latest version, or ``name@N``) as a model."""
        with self._transaction() as connection:
            row = self._resolve(connection, ref)
            vocab_rows, merge_rows = self._vocab_and_merges(connection, row)
        return model_from_rows(row.special_tokens, row.pattern, row.merge_rule, vocab_rows, merge_rows)

    def _vocab_and_merges(self, connection: Connection, row: Any) -> tuple:
        tokenizer_id = row.id
        if self.is_sqlite:  # plain SQL: no per-row type processing on the hot path
            packed = connection.exec_driver_sql(PACKED_SQL, (tokenizer_id,)).scalar()
            if packed is not None:  # the packed copy (bpestore/store/packed.py), else the rows
                return unpack(packed, row.vocab_size, f"{row.name}@{row.version}", self.location)
            vocab = connection.exec_driver_sql(VOCAB_SQL, (tokenizer_id,)).fetchall()
            return vocab, connection.exec_driver_sql(MERGES_SQL, (tokenizer_id,)).fetchall()
        v, m = schema.vocab, schema.merges
        vocab = connection.execute(select(v.c.token_id, v.c.token).where(v.c.tokenizer_id == tokenizer_id)).all()
        merges = connection.execute(
            select(m.c.left, m.c.right).where(m.c.tokenizer_id == tokenizer_id).order_by(m.c.rank)
        ).all()
        return vocab, merges

    def refs(self) -> list[str]:
        return [info.ref for info in self.list()]

    # -- writing ----------------------------------------------------------------------------------

    def save(
        self,
        name: str,
        tokenizer: BPEModel | HasModel,
        *,
        source: str | None = None,
        source_format: str | None = None,
        source_paths: Sequence[str | os.PathLike] | None = None,
        training_params: dict[str, Any] | None = None,
        training_seconds: float | None = None,
    ) -> str:
        """Store ``tokenizer`` (a :class:`BPEModel` or a ``Tokenizer``) as the next version of
        ``name``; returns ``"name@version"``.

        ``source`` says where it came from (default ``"imported"`` when ``source_format`` is given,
        else ``"saved from Python"``); an import gives the format it read and the files.
        """
        check_name(name)
        model = tokenizer if isinstance(tokenizer, BPEModel) else tokenizer.model
        if source is None:
            source = "imported" if source_format is not None else "saved from Python"
        paths = [os.fspath(path) for path in source_paths] if source_paths is not None else None
        with self._transaction(write=True) as connection:
            return self._insert_tokenizer(
                connection, name, model, corpus_id=None, source=source, source_format=source_format,
                source_paths=paths, training_params=training_params, training_seconds=training_seconds,
            )

    def _insert_tokenizer(
        self,
        connection: Connection,
        name: str,
        tokenizer: BPEModel,
        *,
        corpus_id: int | None,
        source: str,
        training_params: dict[str, Any] | None,
        training_seconds: float | None,
        source_format: str | None = None,
        source_paths: list[str] | None = None,
    ) -> str:
        t, names = schema.tokenizers, schema.tokenizer_names
        # Versions are never reused, even after deletions: a ref always means one tokenizer.
        last = connection.execute(select(names.c.last_version).where(names.c.name == name)).scalar()
        existing = connection.execute(select(func.max(t.c.version)).where(t.c.name == name)).scalar()
        version = max(last or 0, existing or 0) + 1
        if last is None:
            connection.execute(insert(names).values(name=name, last_version=version))
        else:
            connection.execute(update(names).where(names.c.name == name).values(last_version=version))
        tokenizer_id = connection.execute(
            insert(t).values(
                name=name,
                version=version,
                created_at=datetime.now(timezone.utc).replace(tzinfo=None),
                vocab_size=tokenizer.vocab_size,
                pattern=tokenizer.pattern,
                special_tokens=json.dumps(tokenizer.special_tokens, ensure_ascii=False),
                merge_rule=tokenizer.merge_rule,
                corpus_id=corpus_id,
                training_params=json.dumps(training_params) if training_params is not None else None,
                training_seconds=training_seconds,
                source=source,
                source_format=source_format,
                source_paths=json.dumps(source_paths, ensure_ascii=False) if source_paths is not None else None,
            )
        ).inserted_primary_key[0]
        special_ids = set(tokenizer.special_ids.values())
        merged = {left + right for left, right in tokenizer.merges}
        connection.execute(
            insert(schema.vocab),
            [
                {
                    "tokenizer_id": tokenizer_id,
                    "token_id": token_id,
                    "token": token,
                    "kind": _token_kind(token_id, token, special_ids, merged),
                    "text": token.decode("utf-8", errors="replace"),
                }
                for token_id, token in sorted(tokenizer.vocab.items())
            ],
        )
        id_of = {token: token_id for token_id, token in tokenizer.vocab.items()}
        if tokenizer.merges:
            connection.execute(
                insert(schema.merges),
                [
                    {"tokenizer_id": tokenizer_id, "rank": rank, "left": left, "right": right, "result_id": id_of[left + right]}
                    for rank, (left, right) in enumerate(tokenizer.merges)
                ],
            )
        if self.is_sqlite:  # after the rows: their triggers delete any packed copy of this id
            connection.execute(insert(schema.packed_models).values(tokenizer_id=tokenizer_id, data=pack(tokenizer.vocab, tokenizer.merges)))
        return f"{name}@{version}"

    def delete(self, ref: str) -> str:
        """Delete one tokenizer; its corpus and pre-token counts go too once no tokenizer uses them."""
        with self._transaction(write=True) as connection:
            row = self._resolve(connection, ref)
            connection.execute(delete(schema.tokenizers).where(schema.tokenizers.c.id == row.id))
            if row.corpus_id is not None:
                still_used = connection.execute(
                    select(func.count()).select_from(schema.tokenizers).where(schema.tokenizers.c.corpus_id == row.corpus_id)
                ).scalar_one()
                if not still_used:
                    connection.execute(delete(schema.corpora).where(schema.corpora.c.id == row.corpus_id))
            return f"{row.name}@{row.version}"

    # -- corpora and their pre-token counts ----------------------------------------------------------

    def _find_corpus(self, connection: Connection, sha256: str, pattern: str, specials_json: str) -> int | None:
        c = schema.corpora
        return connection.execute(
            select(c.c.id).where(c.c.sha256 == sha256, c.c.pattern == pattern, c.c.special_tokens == specials_json)
        ).scalar()

    def pretoken_counts(self, corpus_id: int) -> dict[bytes, int]:
        p = schema.pretoken_counts
        with self._transaction() as connection:
            return dict(connection.execute(select(p.c.pretoken, p.c.count).where(p.c.corpus_id == corpus_id)).all())

    def _insert_corpus(
        self,
        connection: Connection,
        path: Path,
        sha256: str,
        pattern: str,
        specials_json: str,
        counts: dict[bytes, int],
        progress: bool,
    ) -> int:
        corpus_id = connection.execute(
            insert(schema.corpora).values(
                sha256=sha256,
                pattern=pattern,
                special_tokens=specials_json,
                path=str(path.resolve()),
                size_bytes=path.stat().st_size,
                distinct_pretokens=len(counts),
                total_pretokens=sum(counts.values()),
                created_at=datetime.now(timezone.utc).replace(tzinfo=None),
            )
        ).inserted_primary_key[0]
        # In batches: a list of a million rows at once would cost hundreds of MB; the bar shows
        # that saving a big corpus's counts is under way.
        rows = iter(counts.items())
        with progress_bar(progress, len(counts), "saving pre-token counts", unit="row", unit_scale=True) as bar:
            while batch := [
                {"corpus_id": corpus_id, "pretoken": token, "count": count} for token, count in islice(rows, _BATCH_ROWS)
            ]:
                connection.execute(insert(schema.pretoken_counts), batch)
                bar.update(len(batch))
        return corpus_id


def _configure_sqlite_connection(dbapi_connection, _record) -> None:
    # Let SQLAlchemy's "begin" event issue BEGIN itself (pysqlite would otherwise defer it).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys = ON")
    cursor.execute("PRAGMA journal_mode = WAL")
    cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.close()


def _begin_sqlite_transaction(connection: Connection) -> None:
    # IMMEDIATE takes the write lock up front, so two writers queue instead of one failing on upgrade.
    write = connection.get_execution_options().get("bpestore_write", False)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
