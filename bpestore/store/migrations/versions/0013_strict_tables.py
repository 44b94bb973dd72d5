"""Types enforced where the data lives: SQLite ``STRICT`` tables, JSON shape checks.

SQLite lets any column hold any type: ``UPDATE vocab SET token = 'abc'`` at the ``sqlite3`` prompt
was accepted, and only bpestore's reads could find it. From this revision every bpestore table on
SQLite is ``STRICT`` (SQLite >= 3.37): bytes are BLOB, ids and counts INTEGER, fractions REAL,
names, paths and JSON TEXT, and moments TEXT that must start with a date (``YYYY-MM-DD``). A
column that holds JSON of one shape checks it (``json_valid``, then ``json_type``: an array for
the lists of special tokens, added tokens and source paths, an object for ``training_params``),
and triggers refuse a list with an item that is not a string (a CHECK allows no ``json_each``).
A wrong-typed write by hand now fails in SQLite itself, with SQLite's own message ("cannot store
TEXT value in BLOB column vocab.token", "CHECK constraint failed: ...").

SQLite cannot change a table's type in place, so each table is copied, in one transaction: the
old tables are renamed aside (``PRAGMA legacy_alter_table``: the other tables' references keep
naming the table, which the new one then is), the strict tables made under the old names, the rows
copied (keys and ids kept, ``pretoken_counts`` in key order), the old tables dropped, and the
indexes, triggers (0004, 0008) and readable views (0001) made again. Before anything is changed,
every row is checked against the strict tables: one that would not fit (a wrong type, a NULL, JSON
of another shape, a reference to a missing row) refuses the upgrade in one line naming the table,
the column and the row's key, and the store is left as it was.

PostgreSQL's columns are typed already; its JSON columns (TEXT) get the same shape checks
(``json_typeof``, and a jsonpath for the lists' items), which existing rows must pass. Downgrading makes SQLite's tables ordinary again
(the types of 0012) and drops PostgreSQL's checks.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05
"""

from typing import NamedTuple, Sequence, Union

from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0013'
down_revision: Union[str, Sequence[str], None] = '0012'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


class _Column(NamedTuple):
    name: str
    strict: str
    """The STRICT type: INTEGER, REAL, TEXT or BLOB."""
    loose: str
    """The type 0012 declared (for the downgrade)."""
    nullable: bool = False
    shape: str | None = None
    """'array' or 'object': a JSON column of that shape."""
    moment: bool = False
    default: str | None = None


def _c(name: str, strict: str, loose: str | None = None, **options: object) -> _Column:
    return _Column(name, strict, loose or strict, **options)  # type: ignore[arg-type]


# (frozen here, as migrations must be: the tables of 0012, in their columns' order)
_TABLES: dict[str, tuple[list[_Column], list[str], str]] = {
    "corpora": (
        [
            _c("id", "INTEGER"), _c("sha256", "TEXT", "VARCHAR(64)"), _c("pattern", "TEXT"),
            _c("special_tokens", "TEXT", shape="array"), _c("path", "TEXT"),
            _c("size_bytes", "INTEGER"), _c("distinct_pretokens", "INTEGER"), _c("total_pretokens", "INTEGER"),
            _c("created_at", "TEXT", "DATETIME", moment=True), _c("origin", "TEXT", "VARCHAR(16)", default="'files'"),
        ],
        ["CONSTRAINT pk_corpora PRIMARY KEY (id)", "CONSTRAINT uq_corpora_sha256 UNIQUE (sha256, pattern, special_tokens)"],
        "",
    ),
    "pretoken_counts": (
        [_c("corpus_id", "INTEGER"), _c("pretoken", "BLOB"), _c("count", "INTEGER")],
        [
            "CONSTRAINT pk_pretoken_counts PRIMARY KEY (corpus_id, pretoken)",
            "CONSTRAINT fk_pretoken_counts_corpus_id_corpora FOREIGN KEY(corpus_id) REFERENCES corpora (id) ON DELETE CASCADE",
        ],
        "WITHOUT ROWID",
    ),
    "packed_counts": (
        [_c("corpus_id", "INTEGER"), _c("part", "INTEGER"), _c("data", "BLOB")],
        [
            "CONSTRAINT pk_packed_counts PRIMARY KEY (corpus_id, part)",
            "CONSTRAINT fk_packed_counts_corpus_id_corpora FOREIGN KEY(corpus_id) REFERENCES corpora (id) ON DELETE CASCADE",
        ],
        "",
    ),
    "corpus_files": (
        [
            _c("corpus_id", "INTEGER"), _c("position", "INTEGER"), _c("path", "TEXT"), _c("sha256", "TEXT", "VARCHAR(64)"),
            _c("size_bytes", "INTEGER"), _c("added_at", "TEXT", "DATETIME", moment=True),
        ],
        [
            "CONSTRAINT pk_corpus_files PRIMARY KEY (corpus_id, position)",
            "CONSTRAINT fk_corpus_files_corpus_id_corpora FOREIGN KEY(corpus_id) REFERENCES corpora (id) ON DELETE CASCADE",
        ],
        "",
    ),
    "tokenizers": (
        [
            _c("id", "INTEGER"), _c("name", "TEXT", "VARCHAR(200)"), _c("version", "INTEGER"),
            _c("created_at", "TEXT", "DATETIME", moment=True), _c("vocab_size", "INTEGER"), _c("pattern", "TEXT"),
            _c("special_tokens", "TEXT", shape="array"), _c("merge_rule", "TEXT", "VARCHAR(10)"),
            _c("corpus_id", "INTEGER", nullable=True), _c("training_params", "TEXT", nullable=True, shape="object"),
            _c("training_seconds", "REAL", "FLOAT", nullable=True), _c("source", "TEXT"),
            _c("source_format", "TEXT", "VARCHAR(32)", nullable=True), _c("source_paths", "TEXT", nullable=True, shape="array"),
            _c("added_tokens", "TEXT", shape="array", default="'[]'"), _c("pipeline", "TEXT", nullable=True, shape="object"),
        ],
        [
            "CONSTRAINT pk_tokenizers PRIMARY KEY (id)",
            "CONSTRAINT ck_tokenizers_merge_rule_known CHECK (merge_rule IN ('pair', 'token'))",
            "CONSTRAINT ck_tokenizers_version_positive CHECK (version >= 1)",
            "CONSTRAINT fk_tokenizers_corpus_id_corpora FOREIGN KEY(corpus_id) REFERENCES corpora (id) ON DELETE RESTRICT",
            "CONSTRAINT uq_tokenizers_name UNIQUE (name, version)",
        ],
        "",
    ),
    "tokenizer_names": (
        [_c("name", "TEXT", "VARCHAR(200)"), _c("last_version", "INTEGER")],
        ["CONSTRAINT pk_tokenizer_names PRIMARY KEY (name)"],
        "",
    ),
    "vocab": (
        [_c("tokenizer_id", "INTEGER"), _c("token_id", "INTEGER"), _c("token", "BLOB"), _c("kind", "TEXT", "VARCHAR(10)"), _c("text", "TEXT")],
        [
            "CONSTRAINT pk_vocab PRIMARY KEY (tokenizer_id, token_id)",
            "CONSTRAINT ck_vocab_kind_known CHECK (kind IN ('special', 'byte', 'merge', 'other'))",
            "CONSTRAINT fk_vocab_tokenizer_id_tokenizers FOREIGN KEY(tokenizer_id) REFERENCES tokenizers (id) ON DELETE CASCADE",
            "CONSTRAINT uq_vocab_tokenizer_id UNIQUE (tokenizer_id, token)",
        ],
        "",
    ),
    "merges": (
        [_c("tokenizer_id", "INTEGER"), _c("rank", "INTEGER"), _c("left", "BLOB"), _c("right", "BLOB"), _c("result_id", "INTEGER")],
        [
            "CONSTRAINT pk_merges PRIMARY KEY (tokenizer_id, rank)",
            "CONSTRAINT fk_merges_result_vocab FOREIGN KEY(tokenizer_id, result_id) REFERENCES vocab (tokenizer_id, token_id) ON DELETE CASCADE",
            "CONSTRAINT fk_merges_tokenizer_id_tokenizers FOREIGN KEY(tokenizer_id) REFERENCES tokenizers (id) ON DELETE CASCADE",
        ],
        "",
    ),
    "packed_models": (
        [_c("tokenizer_id", "INTEGER"), _c("data", "BLOB")],
        [
            "CONSTRAINT pk_packed_models PRIMARY KEY (tokenizer_id)",
            "CONSTRAINT fk_packed_models_tokenizer_id_tokenizers FOREIGN KEY(tokenizer_id) REFERENCES tokenizers (id) ON DELETE CASCADE",
        ],
        "",
    ),
    "warm_caches": (
        [
            _c("tokenizer_id", "INTEGER"), _c("fingerprint", "TEXT", "VARCHAR(16)"), _c("entries", "INTEGER"), _c("source", "TEXT"),
            _c("data", "BLOB"), _c("created_at", "TEXT", "DATETIME", moment=True),
        ],
        [
            "CONSTRAINT pk_warm_caches PRIMARY KEY (tokenizer_id)",
            "CONSTRAINT fk_warm_caches_tokenizer_id_tokenizers FOREIGN KEY(tokenizer_id) REFERENCES tokenizers (id) ON DELETE CASCADE",
        ],
        "",
    ),
    "evaluations": (
        [
            _c("id", "INTEGER"), _c("tokenizer_id", "INTEGER"), _c("sha256", "TEXT", "VARCHAR(64)"), _c("label", "TEXT"),
            _c("path", "TEXT"), _c("alpha", "REAL", "FLOAT"), _c("bytes", "INTEGER"), _c("characters", "INTEGER"),
            _c("words", "INTEGER"), _c("tokens", "INTEGER"), _c("distinct_tokens", "INTEGER"), _c("single_token_words", "INTEGER"),
            *(_c(name, "REAL", "FLOAT", nullable=True) for name in (
                "bytes_per_token", "characters_per_token", "fertility", "renyi_efficiency", "vocab_used", "single_token_word_rate",
            )),
            _c("created_at", "TEXT", "DATETIME", moment=True),
        ],
        [
            "CONSTRAINT pk_evaluations PRIMARY KEY (id)",
            "CONSTRAINT fk_evaluations_tokenizer_id_tokenizers FOREIGN KEY(tokenizer_id) REFERENCES tokenizers (id) ON DELETE CASCADE",
            "CONSTRAINT uq_evaluations_tokenizer_id UNIQUE (tokenizer_id, sha256, alpha)",
        ],
        "",
    ),
}
"""Each table's columns, table constraints and options; parents before children."""

_INDEXES = [
    "CREATE INDEX ix_merges_tokenizer_id_result_id ON merges (tokenizer_id, result_id)",
    "CREATE INDEX ix_tokenizers_corpus_id ON tokenizers (corpus_id)",
]

_MOMENT = "'[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*'"
"""What a moment's text starts with: a date (SQLAlchemy writes '2026-12-05 10:23:56.123456')."""


def _quoted(name: str) -> str:
    return f'"{name}"' if name in ("left", "right") else name


def _shape_check(column: str, shape: str) -> str:
    # json_type of text that is not JSON is an error, not false: asked only of valid JSON.
    return f"CASE WHEN json_valid({column}) THEN json_type({column}) = '{shape}' ELSE 0 END"


def _column_sql(table: str, column: _Column, strict: bool) -> str:
    name = _quoted(column.name)
    parts = [name, column.strict if strict else column.loose]
    if column.default is not None:
        parts.append(f"DEFAULT {column.default}")
    if not column.nullable:
        parts.append("NOT NULL")
    if strict and column.shape:
        check = _shape_check(name, column.shape)
        check = f"{name} IS NULL OR {check}" if column.nullable else check
        parts.append(f"CONSTRAINT ck_{table}_{column.name}_json_{column.shape} CHECK ({check})")
    if strict and column.moment:
        parts.append(f"CONSTRAINT ck_{table}_{column.name}_moment CHECK ({name} GLOB {_MOMENT})")
    return " ".join(parts)


def _table_sql(table: str, strict: bool) -> str:
    columns, constraints, options = _TABLES[table]
    lines = [_column_sql(table, column, strict) for column in columns] + constraints
    tail = ", ".join(option for option in (options, "STRICT" if strict else "") if option)
    body = ",\n\t".join(lines)
    return f"CREATE TABLE {table} (\n\t{body}\n){(' ' + tail) if tail else ''}"


def _not_all_text(column: str) -> str:
    """True of a JSON array (valid JSON) with an item that is not a string."""
    return f"EXISTS (SELECT 1 FROM json_each({column}) WHERE json_type({column}) = 'array' AND type <> 'text')"


def _strings_triggers() -> dict[str, str]:
    """A CHECK allows no subquery, so no json_each: triggers refuse a JSON array with an item that
    is not a string (``[1, 2]``, ``[null]``) in the columns that hold lists of strings."""
    statements = {}
    for table, (columns, _, _) in _TABLES.items():
        for column in columns:
            if column.shape != "array":
                continue
            for event, on in (("insert", "INSERT"), ("update", f"UPDATE OF {column.name}")):
                name = f"{table}_{column.name}_{event}_strings"
                value = f"NEW.{column.name}"
                statements[name] = (
                    f"CREATE TRIGGER {name} BEFORE {on} ON {table} FOR EACH ROW "
                    f"WHEN CASE WHEN json_valid({value}) THEN {_not_all_text(value)} ELSE 0 END "
                    f"BEGIN SELECT RAISE(ABORT, '{table}.{column.name} must be a JSON array of strings'); END"
                )
    return statements


def _misfit(table: str, column: _Column) -> str:
    """A condition true of a row whose ``column`` would not fit the strict table."""
    name = _quoted(column.name)
    kinds = {"INTEGER": "'integer'", "REAL": "'integer', 'real'", "TEXT": "'text'", "BLOB": "'blob'"}[column.strict]
    fits = f"typeof({name}) IN ({kinds})"
    if column.shape:
        fits += f" AND {_shape_check(name, column.shape)}"
    if column.shape == "array":
        fits += f" AND NOT {_not_all_text(name)}"
    if column.moment:
        fits += f" AND {name} GLOB {_MOMENT}"
    if column.nullable:
        fits = f"{name} IS NULL OR ({fits})"
    return f"NOT ({fits})"


def _key_columns(table: str) -> list[str]:
    constraint = next(c for c in _TABLES[table][1] if "PRIMARY KEY" in c)
    return [name.strip() for name in constraint.partition("(")[2].rstrip(")").split(",")]


def _describe(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return f"a BLOB ({len(value)} bytes)"
    text = repr(value)
    return f"{type(value).__name__} {text[:40] + '...' if len(text) > 40 else text}"


def _refuse_misfits(connection) -> None:  # type: ignore[no-untyped-def]
    """Raise, naming the first row that the strict tables would refuse; before anything changes."""
    from bpestore.errors import DamagedStoreError

    for table, (columns, _, _) in _TABLES.items():
        keys = _key_columns(table)
        shown = ", ".join(f"substr(quote({_quoted(key)}), 1, 40)" for key in keys)
        # one pass over a sound table (pretoken_counts can hold millions of rows), a column at a time only to name a misfit
        if connection.exec_driver_sql(f"SELECT 1 FROM {table} WHERE {' OR '.join(_misfit(table, c) for c in columns)} LIMIT 1").first() is None:
            continue
        for column in columns:
            row = connection.exec_driver_sql(
                f"SELECT {shown}, CAST({_quoted(column.name)} AS BLOB) IS NULL, typeof({_quoted(column.name)}), "
                f"substr(CAST({_quoted(column.name)} AS BLOB), 1, 60) FROM {table} WHERE {_misfit(table, column)} LIMIT 1"
            ).first()
            if row is None:
                continue
            key = ", ".join(f"{name}={value}" for name, value in zip(keys, row[: len(keys)]))
            kind = row[len(keys) + 1]
            if kind == "null":
                held = "NULL"
            elif kind == "text" and (column.shape or column.moment):
                sample = bytes(row[len(keys) + 2]).decode("utf-8", "replace")
                wanted = {"array": "a JSON array of strings", "object": "a JSON object"}[column.shape] if column.shape else "a date and time (YYYY-MM-DD ...)"
                held = f"text {sample!r}, not {wanted}"
            else:
                held = f"a value of type {kind}, not {column.strict}"
            raise DamagedStoreError(
                f"cannot upgrade to strict tables (revision 0013): row ({key}) of table {table}, column "
                f"{column.name}, holds {held}; fix or delete the row (at the sqlite3 prompt) and run the command again"
            )
    orphan = connection.exec_driver_sql("SELECT \"table\", rowid, parent FROM pragma_foreign_key_check LIMIT 1").first()
    if orphan is not None:
        table, rowid, parent = orphan
        raise DamagedStoreError(
            f"cannot upgrade to strict tables (revision 0013): row (rowid={rowid}) of table {table} refers to a row of "
            f"{parent} that does not exist; fix or delete the row"
        )


# (frozen here: the views of 0001 and the triggers of 0004 and 0008, as SQLite keeps them)
_VIEWS = {
    "vocab_readable": """CREATE VIEW vocab_readable AS
            SELECT t.name, t.version, v.token_id AS id, v.kind, v.text AS token, hex(v.token) AS token_hex
            FROM vocab v JOIN tokenizers t ON t.id = v.tokenizer_id""",
    "merges_readable": """CREATE VIEW merges_readable AS
            SELECT t.name, t.version, m.rank, l.text AS "left", r.text AS "right", res.text AS result,
                   m.result_id
            FROM merges m
            JOIN tokenizers t ON t.id = m.tokenizer_id
            JOIN vocab l ON l.tokenizer_id = m.tokenizer_id AND l.token = m."left"
            JOIN vocab r ON r.tokenizer_id = m.tokenizer_id AND r.token = m."right"
            JOIN vocab res ON res.tokenizer_id = m.tokenizer_id AND res.token_id = m.result_id""",
}


def _triggers() -> dict[str, str]:
    statements = {}
    for table, key, target, probe in (
        ("vocab", "tokenizer_id", "packed_models", False),
        ("merges", "tokenizer_id", "packed_models", False),
        ("pretoken_counts", "corpus_id", "packed_counts", True),
    ):
        for event, rows in (("INSERT", ("NEW",)), ("UPDATE", ("OLD", "NEW")), ("DELETE", ("OLD",))):
            name = f"{table}_{event.lower()}_unpacks"
            listed = ", ".join(f"{row}.{key}" for row in rows)
            when = f"WHEN EXISTS (SELECT 1 FROM {target} WHERE {key} IN ({listed})) " if probe else ""
            statements[name] = (
                f"CREATE TRIGGER {name} AFTER {event} ON {table} FOR EACH ROW {when}"
                f"BEGIN DELETE FROM {target} WHERE {key} IN ({listed}); END"
            )
    return statements


def _rebuild_sqlite(strict: bool) -> None:
    """Copy every table into one made by :func:`_table_sql` (strict or not), in this transaction."""
    connection = op.get_bind()
    if strict:
        _refuse_misfits(connection)
    for view in _VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {view}")
    for trigger in _triggers():
        op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    (legacy,) = connection.exec_driver_sql("PRAGMA legacy_alter_table").first() or (0,)
    op.execute("PRAGMA legacy_alter_table = ON")  # references to a renamed table keep its name
    try:
        for table in _TABLES:
            op.execute(f"ALTER TABLE {table} RENAME TO {table}_0013")
    finally:
        op.execute(f"PRAGMA legacy_alter_table = {int(legacy)}")
    for table, (columns, _, options) in _TABLES.items():
        op.execute(_table_sql(table, strict))
        listed = ", ".join(_quoted(column.name) for column in columns)
        order = f" ORDER BY {', '.join(_key_columns(table))}" if "WITHOUT ROWID" in options else ""
        op.execute(f"INSERT INTO {table} ({listed}) SELECT {listed} FROM {table}_0013{order}")
    for table in reversed(_TABLES):  # children first: no cascade reaches a copied row
        op.execute(f"DROP TABLE {table}_0013")
    for statement in [*_INDEXES, *_triggers().values(), *_VIEWS.values()]:
        op.execute(statement)
    if strict:
        for statement in _strings_triggers().values():
            op.execute(statement)


_POSTGRESQL_SHAPES = [
    (table, column.name, column.shape)
    for table, (columns, _, _) in _TABLES.items()
    for column in columns
    if column.shape
]


def _refuse_postgresql_misfits(connection) -> None:  # type: ignore[no-untyped-def]
    """Raise, naming the first row whose JSON the checks would refuse (an ALTER TABLE that finds
    one names only the constraint); the JSON columns are in corpora and tokenizers, keyed by id."""
    import json

    from bpestore.errors import DamagedStoreError

    for table, column, shape in _POSTGRESQL_SHAPES:
        for key, value in connection.exec_driver_sql(f"SELECT id, {column} FROM {table} WHERE {column} IS NOT NULL ORDER BY id"):
            try:
                parsed = json.loads(value)
            except ValueError:
                parsed = None
            if shape == "array" and isinstance(parsed, list) and not all(isinstance(item, str) for item in parsed):
                parsed = None
            if not isinstance(parsed, dict if shape == "object" else list):
                sample = value if len(value) <= 40 else value[:40] + "..."
                raise DamagedStoreError(
                    f"cannot upgrade to revision 0013: row (id={key}) of table {table}, column {column}, holds text "
                    f"{sample!r}, not a JSON {'object' if shape == 'object' else 'array of strings'}; fix or delete the row (at the psql prompt) and run the command again"
                )


_POSTGRESQL_STRINGS = """
CREATE FUNCTION bpestore_json_strings(value text) RETURNS boolean IMMUTABLE STRICT LANGUAGE sql AS $$
    SELECT json_typeof(value::json) = 'array'
       AND NOT EXISTS (SELECT 1 FROM json_array_elements(value::json) AS item WHERE json_typeof(item) <> 'string')
$$
"""
"""Whether ``value`` is a JSON array of strings: a CHECK allows no subquery, a function may hold
one. (json, not jsonb: a jsonb string cannot hold the character NUL, which a special token may.)"""


def upgrade() -> None:
    """Upgrade schema."""
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        _rebuild_sqlite(strict=True)
    elif dialect == "postgresql":
        _refuse_postgresql_misfits(op.get_bind())
        op.execute(_POSTGRESQL_STRINGS)
        for table, column, shape in _POSTGRESQL_SHAPES:
            condition = f"json_typeof({column}::json) = '{shape}'"
            if shape == "array":
                condition = f"bpestore_json_strings({column})"
            op.create_check_constraint(op.f(f"ck_{table}_{column}_json_{shape}"), table, condition)


def downgrade() -> None:
    """Downgrade schema."""
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        _rebuild_sqlite(strict=False)
    elif dialect == "postgresql":
        for table, column, shape in _POSTGRESQL_SHAPES:
            op.drop_constraint(op.f(f"ck_{table}_{column}_json_{shape}"), table, type_="check")
        op.execute("DROP FUNCTION bpestore_json_strings(text)")
