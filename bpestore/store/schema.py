"""The database schema, as SQLAlchemy Core tables.

The migrations in ``bpestore/store/migrations/`` own the schema: a change here needs a new revision there, and a
test checks that the two agree (alembic's autogenerate comparison finds no difference).

The readable views (``vocab_readable``, ``merges_readable``) are defined in the migrations only.

Tokens are stored as bytes (BLOB); ``vocab.text`` repeats each token as UTF-8 text with invalid
bytes replaced by U+FFFD (on PostgreSQL, whose text cannot hold NUL, the byte 0x00 too), so that
people at the ``sqlite3`` or ``psql`` prompt can read and search tokens.

On SQLite every table is ``STRICT`` (since 0013): SQLite itself refuses a value of the wrong
type, so the types here are SQLite's own there (TEXT for strings and moments, REAL, INTEGER, BLOB),
and migration 0013 adds CHECKs that JSON columns hold JSON of their shape (an array, an object)
and that moments start with a date; on PostgreSQL, the same JSON checks (``json_typeof``).

PostgreSQL differs in four ways, made by migrations 0006 and 0008 and invisible to the code: the
keys on pre-tokens and tokens (``pretoken_counts``'s primary key, ``vocab``'s unique (tokenizer_id,
token)) are unique indexes on the bytes' sha256 (a B-tree entry holds at most 2704 bytes, and a
pre-token or token can be longer); triggers drop stale ``packed_models`` and ``packed_counts``
rows as SQLite's do; and ``pretoken_counts``'s foreign key to ``corpora`` is kept by statement
triggers (the same rules, checked once a statement instead of by a query a row).
"""

from __future__ import annotations

from sqlalchemy.dialects import sqlite
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.types import TypeEngine
from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

class _SQLiteMoment(sqlite.DATETIME):
    """A date and time on SQLite: stored as SQLAlchemy's DATETIME stores it (ISO text), declared
    TEXT, the only type of the three that a STRICT table accepts for it."""

    cache_ok = True


@compiles(_SQLiteMoment, "sqlite")
def _compile_sqlite_moment(_type: _SQLiteMoment, _compiler: object, **_options: object) -> str:
    return "TEXT"


def _text(length: int) -> TypeEngine[str]:
    """A short string: VARCHAR(length), and on SQLite TEXT (STRICT tables know no VARCHAR)."""
    return String(length).with_variant(Text(), "sqlite")


MOMENT = DateTime().with_variant(_SQLiteMoment(), "sqlite")  # type: ignore[no-untyped-call]
"""A date and time (naive, UTC): TIMESTAMP, and on SQLite TEXT (since 0013)."""

REAL = Float().with_variant(sqlite.REAL(), "sqlite")
"""A floating-point number: FLOAT, and on SQLite REAL (since 0013; STRICT tables know no FLOAT)."""

BIG_INTEGER = BigInteger().with_variant(Integer(), "sqlite")
"""A 64-bit integer: BIGINT, and on SQLite INTEGER, which is 64-bit already (0006 leaves SQLite's
columns as they are: changing their type would copy the tables)."""

corpora = Table(
    "corpora",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("sha256", _text(64), nullable=False, comment="sha256 of the corpus bytes, hex"),
    Column("pattern", Text, nullable=False, comment="pre-tokenizer regex"),
    Column("special_tokens", Text, nullable=False, comment="JSON list of the special tokens that cut the corpus"),
    Column("path", Text, nullable=False, comment="where the corpus was read from"),
    Column(
        "origin", _text(16), nullable=False, server_default="files",
        comment="how the counts were made: 'files' (counted here from path), 'counts' (given as counts; path: where from), "
        "'dask' (counted on a Dask cluster; path: its inputs)",
    ),
    # 64-bit (since 0006): a corpus can hold more than 2 GiB and more than 2^31 pre-tokens.
    Column("size_bytes", BIG_INTEGER, nullable=False),
    Column("distinct_pretokens", BIG_INTEGER, nullable=False),
    Column("total_pretokens", BIG_INTEGER, nullable=False),
    Column("created_at", MOMENT, nullable=False),
    UniqueConstraint("sha256", "pattern", "special_tokens"),
    sqlite_strict=True,
)

pretoken_counts = Table(
    "pretoken_counts",
    metadata,
    Column("corpus_id", Integer, ForeignKey("corpora.id", ondelete="CASCADE"), primary_key=True),
    Column("pretoken", LargeBinary, primary_key=True),
    Column("count", BIG_INTEGER, nullable=False),
    # On SQLite (since 0008) the rows live in the primary key's B-tree, in (corpus_id, pretoken)
    # order: written in that order they are appended, and a corpus is read as one range.
    sqlite_with_rowid=False,
    sqlite_strict=True,
)

# A copy of each corpus's counts in one BLOB (parts, for a huge corpus), the fast way to read them
# back (since 0008; packed and unpacked by the engine: SortedRows.pack, PretokenCounts.unpack).
# Triggers (in the migration) delete a copy when its rows change; the rows stay the truth.
packed_counts = Table(
    "packed_counts",
    metadata,
    Column("corpus_id", Integer, ForeignKey("corpora.id", ondelete="CASCADE"), primary_key=True),
    Column("part", Integer, primary_key=True, comment="0, 1, ...: consecutive ranges of the counts in byte order"),
    Column("data", LargeBinary, nullable=False, comment="those counts packed (the engine's SortedRows.pack)"),
    sqlite_strict=True,
)

# The files a corpus was counted from, in order (since 0008): what `bpestore count add` grows.
corpus_files = Table(
    "corpus_files",
    metadata,
    Column("corpus_id", Integer, ForeignKey("corpora.id", ondelete="CASCADE"), primary_key=True),
    Column("position", Integer, primary_key=True, comment="0, 1, ...: the order the files were given and added in"),
    Column("path", Text, nullable=False, comment="where the file was read from (resolved)"),
    Column("sha256", _text(64), nullable=False, comment="sha256 of the file's content (decompressed), hex"),
    Column("size_bytes", BIG_INTEGER, nullable=False, comment="its content in bytes (decompressed)"),
    Column("added_at", MOMENT, nullable=False),
    sqlite_strict=True,
)

tokenizers = Table(
    "tokenizers",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", _text(200), nullable=False),
    Column("version", Integer, nullable=False),
    Column("created_at", MOMENT, nullable=False),
    Column("vocab_size", Integer, nullable=False),
    Column("pattern", Text, nullable=False, comment="pre-tokenizer regex"),
    Column("special_tokens", Text, nullable=False, comment="JSON list"),
    Column("merge_rule", _text(10), nullable=False, comment="pair: GPT-2/HF/CS336 merge ranks; token: tiktoken token ranks"),
    Column("corpus_id", Integer, ForeignKey("corpora.id", ondelete="RESTRICT"), nullable=True, index=True),
    Column("training_params", Text, nullable=True, comment="JSON object"),
    Column("training_seconds", REAL, nullable=True),
    # (the comment as migration 0005 sets it; until 0003 an import wrote 'imported from <format> <path>')
    Column(
        "source",
        Text,
        nullable=False,
        comment="where it came from: 'trained', 'imported' (source_format and source_paths say from what), "
        "'saved from Python', or the words a caller of Store.save gave",
    ),
    Column("source_format", _text(32), nullable=True, comment="the format an import read: 'gpt2', 'hf', 'tiktoken'"),
    Column("source_paths", Text, nullable=True, comment="JSON list of the files an import read"),
    # (since 0010; their ids and bytes are vocab rows like any token's)
    Column(
        "added_tokens", Text, nullable=False, server_default="[]",
        comment="JSON list of the added tokens: ordinary tokens always encoded whole (bpestore add-tokens)",
    ),
    # (since 0012)
    Column(
        "pipeline", Text, nullable=True,
        comment='JSON object: the normalizer ("normalizer", tokenizer.json form), the added tokens found in normalized text '
        '("normalized_tokens") and the post-processor ("post_processor", tokenizer.json form), '
        'the tokens that take their surroundings ("token_options"); NULL: none',
    ),
    UniqueConstraint("name", "version"),
    CheckConstraint("version >= 1", name="version_positive"),
    CheckConstraint("merge_rule IN ('pair', 'token')", name="merge_rule_known"),
    sqlite_strict=True,
)

tokenizer_names = Table(
    "tokenizer_names",
    metadata,
    Column("name", _text(200), primary_key=True),
    Column("last_version", Integer, nullable=False, comment="the highest version ever given: versions are never reused"),
    sqlite_strict=True,
)

vocab = Table(
    "vocab",
    metadata,
    Column("tokenizer_id", Integer, ForeignKey("tokenizers.id", ondelete="CASCADE"), primary_key=True),
    Column("token_id", Integer, primary_key=True),
    Column("token", LargeBinary, nullable=False),
    Column("kind", _text(10), nullable=False),
    Column("text", Text, nullable=False, comment="token as UTF-8 with errors='replace'"),
    UniqueConstraint("tokenizer_id", "token"),
    CheckConstraint("kind IN ('special', 'byte', 'merge', 'other')", name="kind_known"),
    sqlite_strict=True,
)

merges = Table(
    "merges",
    metadata,
    Column("tokenizer_id", Integer, primary_key=True),
    Column("rank", Integer, primary_key=True),
    Column("left", LargeBinary, nullable=False),
    Column("right", LargeBinary, nullable=False),
    Column("result_id", Integer, nullable=False),
    ForeignKeyConstraint(["tokenizer_id"], ["tokenizers.id"], ondelete="CASCADE"),
    ForeignKeyConstraint(
        ["tokenizer_id", "result_id"],
        ["vocab.tokenizer_id", "vocab.token_id"],
        name="fk_merges_result_vocab",
        ondelete="CASCADE",
    ),
    # Deleting a tokenizer deletes its vocab rows, and each must find the merges that point at it
    # (fk_merges_result_vocab): without this index, a scan of all the tokenizer's merges per token
    # (rm of GPT-2 took 247 s on PostgreSQL). Since 0006.
    Index("ix_merges_tokenizer_id_result_id", "tokenizer_id", "result_id"),
    sqlite_strict=True,
)

# A copy of each tokenizer's vocab and merges in one BLOB, the fast way to load it (since 0004;
# bpestore/store/packed.py). On SQLite, triggers (in the migration) delete a copy when its rows change.
packed_models = Table(
    "packed_models",
    metadata,
    Column("tokenizer_id", Integer, ForeignKey("tokenizers.id", ondelete="CASCADE"), primary_key=True),
    Column("data", LargeBinary, nullable=False, comment="the tokenizer's vocab and merges packed (bpestore/store/packed.py)"),
    sqlite_strict=True,
)

# Pre-tokens whose ids a tokenizer worked out ahead, packed by the engine (since 0011;
# bpestore/encode/warm.py): a loaded tokenizer's caches start with them. The fingerprint says which
# model (tokens, merges, rule) made them: a table whose fingerprint is not the loaded model's is
# left unused, so no trigger needs to keep it fresh.
warm_caches = Table(
    "warm_caches",
    metadata,
    Column("tokenizer_id", Integer, ForeignKey("tokenizers.id", ondelete="CASCADE"), primary_key=True),
    Column("fingerprint", _text(16), nullable=False, comment="the engine's fingerprint of the model that made the table, hex"),
    Column("entries", Integer, nullable=False, comment="pre-tokens in the table"),
    Column("source", Text, nullable=False, comment="where the pre-tokens came from: the training corpus, files, the vocabulary"),
    Column("data", LargeBinary, nullable=False, comment="the pre-tokens and their ids, packed by the engine (crates/encode/src/warm.rs)"),
    Column("created_at", MOMENT, nullable=False),
    sqlite_strict=True,
)

# One tokenizer measured on one text file (since 0009; `bpestore eval`, Store.evaluate): kept so
# that the explorer and a second `eval` show it without encoding the file again. A file is known by
# its content's sha256, whatever its name; parity is not stored (it depends on the reference file
# chosen when the results are shown: tokens over the reference's tokens).
evaluations = Table(
    "evaluations",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("tokenizer_id", Integer, ForeignKey("tokenizers.id", ondelete="CASCADE"), nullable=False),
    Column("sha256", _text(64), nullable=False, comment="sha256 of the file's content, hex"),
    Column("label", Text, nullable=False, comment="the file's name when it was measured (a file per language: the language)"),
    Column("path", Text, nullable=False, comment="where the file was read from (resolved)"),
    Column("alpha", REAL, nullable=False, comment="the order of the Renyi entropy of renyi_efficiency"),
    Column("bytes", BIG_INTEGER, nullable=False),
    Column("characters", BIG_INTEGER, nullable=False, comment="Unicode code points"),
    Column("words", BIG_INTEGER, nullable=False, comment="whitespace-separated words (str.split)"),
    Column("tokens", BIG_INTEGER, nullable=False),
    Column("distinct_tokens", Integer, nullable=False),
    Column("single_token_words", BIG_INTEGER, nullable=False, comment="words no token boundary falls inside"),
    Column("bytes_per_token", REAL, nullable=True),
    Column("characters_per_token", REAL, nullable=True),
    Column("fertility", REAL, nullable=True, comment="tokens per word"),
    Column("renyi_efficiency", REAL, nullable=True),
    Column("vocab_used", REAL, nullable=True, comment="distinct tokens over the vocab size"),
    Column("single_token_word_rate", REAL, nullable=True),
    Column("created_at", MOMENT, nullable=False),
    UniqueConstraint("tokenizer_id", "sha256", "alpha"),
    sqlite_strict=True,
)
