"""Counts in bulk: a packed copy of each corpus's counts, the files a corpus holds, and on SQLite
the counts clustered by (corpus, pre-token).

* ``packed_counts``: each corpus's pre-token counts in one BLOB (several parts for a huge corpus:
  a database value holds at most about 1 GB; layout: the engine's ``SortedRows.pack``,
  crates/train/src/stored.rs), read back in milliseconds where 300,000 rows took seconds. The rows of ``pretoken_counts`` stay the truth, and plain SQL reads them as
  before: triggers delete a corpus's packed copy whenever any of its rows is inserted, changed or
  deleted (row triggers on SQLite, guarded so that writing a new corpus's rows, before its copy
  exists, costs one index probe a row; per statement on PostgreSQL, with transition tables, as
  0006's for ``packed_models``), so a copy is never stale; readers then fall back to the rows.
  On PostgreSQL those statement triggers also stand for ``pretoken_counts``'s foreign key to
  ``corpora`` (dropped: its check ran a query a row, most of the time of writing counts), with
  the same rules (see ``_postgresql_triggers``).
  Corpora stored before have no copy and are read from their rows.
* ``corpus_files``: the files a corpus was counted from, in order, each with its content's
  sha256 and size (``bpestore count add`` grows a corpus by files; adding one twice is refused).
  Corpora stored before have none listed (``corpora.path`` still says where they came from).
* On SQLite, ``pretoken_counts`` becomes a ``WITHOUT ROWID`` table: its rows live in the primary
  key's B-tree, in (corpus_id, pretoken) order, instead of a table plus a copy of every pre-token
  in the key's index. Written in that order, rows are appended; a corpus's rows are read as one
  range. (Rebuilt by copying: nothing references ``pretoken_counts``, so nothing cascades.)

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op


# revision identifiers, used by Alembic.
revision: str = '0008'
down_revision: Union[str, Sequence[str], None] = '0007'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

# (frozen here, as migrations must be)
_SQLITE_COUNTS = """
CREATE TABLE pretoken_counts{suffix} (
    corpus_id INTEGER NOT NULL,
    pretoken BLOB NOT NULL,
    count INTEGER NOT NULL,
    CONSTRAINT pk_pretoken_counts PRIMARY KEY (corpus_id, pretoken),
    CONSTRAINT fk_pretoken_counts_corpus_id_corpora FOREIGN KEY(corpus_id) REFERENCES corpora (id) ON DELETE CASCADE
){rowid}
"""

_POSTGRESQL_FUNCTION = """
CREATE FUNCTION bpestore_counts_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changed integer[];
    missing integer;
BEGIN
    -- The corpora whose rows changed, found in one pass over the statement's rows.
    IF TG_OP = 'DELETE' THEN
        changed := ARRAY(SELECT DISTINCT corpus_id FROM old_rows);
    ELSIF TG_OP = 'INSERT' THEN
        changed := ARRAY(SELECT DISTINCT corpus_id FROM new_rows);
    ELSE
        changed := ARRAY(SELECT corpus_id FROM old_rows UNION SELECT corpus_id FROM new_rows);
    END IF;
    DELETE FROM packed_counts WHERE corpus_id = ANY(changed);
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        -- The reference to corpora, checked once a statement. The rows' corpora are locked as a
        -- foreign key's own check locks them (FOR KEY SHARE): none can go before this commits.
        -- (For an UPDATE the old rows' corpora are checked too: they exist, being referred to.)
        PERFORM 1 FROM corpora WHERE id = ANY(changed) FOR KEY SHARE;
        SELECT min(i) INTO missing FROM unnest(changed) AS i WHERE NOT EXISTS (SELECT 1 FROM corpora c WHERE c.id = i);
        IF missing IS NOT NULL THEN
            RAISE foreign_key_violation USING MESSAGE = format(
                'insert or update on table "pretoken_counts" refers to corpus %s, which is not in "corpora"', missing);
        END IF;
    END IF;
    RETURN NULL;
END
$$
"""

_POSTGRESQL_CORPORA_FUNCTION = """
CREATE FUNCTION bpestore_corpora_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        -- ON DELETE CASCADE
        DELETE FROM pretoken_counts WHERE corpus_id IN (SELECT id FROM old_rows);
    ELSIF EXISTS (
        SELECT 1 FROM old_rows o
        WHERE NOT EXISTS (SELECT 1 FROM new_rows n WHERE n.id = o.id)
          AND EXISTS (SELECT 1 FROM pretoken_counts p WHERE p.corpus_id = o.id)
    ) THEN
        -- ON UPDATE NO ACTION: a corpus with counts keeps its id
        RAISE foreign_key_violation USING MESSAGE = 'update on table "corpora" would leave rows of "pretoken_counts" without their corpus';
    END IF;
    RETURN NULL;
END
$$
"""

def _sqlite_triggers() -> dict[str, str]:
    """Row triggers: a change to a corpus's counts deletes its packed copy. The WHEN clauses keep
    the cost of a row written where there is no copy (a new corpus, before its copy) to a probe."""
    statements = {}
    for event, ids in (("INSERT", ("NEW",)), ("UPDATE", ("OLD", "NEW")), ("DELETE", ("OLD",))):
        name = f"pretoken_counts_{event.lower()}_unpacks"
        listed = ", ".join(f"{row}.corpus_id" for row in ids)
        statements[name] = (
            f"CREATE TRIGGER {name} AFTER {event} ON pretoken_counts FOR EACH ROW "
            f"WHEN EXISTS (SELECT 1 FROM packed_counts WHERE corpus_id IN ({listed})) "
            f"BEGIN DELETE FROM packed_counts WHERE corpus_id IN ({listed}); END"
        )
    return statements


def _postgresql_triggers() -> dict[str, str]:
    """Statement triggers (transition tables): a change to a corpus's counts drops its packed
    copy; and, on PostgreSQL, they keep ``pretoken_counts``'s reference to ``corpora`` in place of
    a foreign key, whose check runs a query a row (most of the time of writing a corpus's counts:
    16 of 20 microseconds a row, measured with COPY): inserted and updated rows must name a corpus
    (locked FOR KEY SHARE, as a foreign key locks it), deleting a corpus deletes its counts
    (ON DELETE CASCADE), and a corpus with counts keeps its id."""
    statements = {}
    for event, tables in (
        ("INSERT", "NEW TABLE AS new_rows"),
        ("UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"),
        ("DELETE", "OLD TABLE AS old_rows"),
    ):
        name = f"pretoken_counts_{event.lower()}_unpacks"
        statements[name] = (
            f"CREATE TRIGGER {name} AFTER {event} ON pretoken_counts REFERENCING {tables} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION bpestore_counts_changed()"
        )
    for event, tables in (("UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"), ("DELETE", "OLD TABLE AS old_rows")):
        name = f"corpora_{event.lower()}_keeps_counts"
        statements[name] = (
            f"CREATE TRIGGER {name} AFTER {event} ON corpora REFERENCING {tables} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION bpestore_corpora_changed()"
        )
    return statements


def _rebuild_sqlite_counts(rowid: bool) -> None:
    """Copy ``pretoken_counts`` into a table of the other kind (WITHOUT ROWID or not), in key order."""
    op.execute(_SQLITE_COUNTS.format(suffix="_rebuilt", rowid="" if rowid else " WITHOUT ROWID"))
    op.execute(
        "INSERT INTO pretoken_counts_rebuilt (corpus_id, pretoken, count) "
        "SELECT corpus_id, pretoken, count FROM pretoken_counts ORDER BY corpus_id, pretoken"
    )
    op.execute("DROP TABLE pretoken_counts")
    op.execute("ALTER TABLE pretoken_counts_rebuilt RENAME TO pretoken_counts")


def upgrade() -> None:
    """Upgrade schema."""
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        _rebuild_sqlite_counts(rowid=False)
    op.create_table('packed_counts',
    sa.Column('corpus_id', sa.Integer(), nullable=False),
    sa.Column('part', sa.Integer(), nullable=False, comment='0, 1, ...: consecutive ranges of the counts in byte order'),
    sa.Column('data', sa.LargeBinary(), nullable=False, comment="those counts packed (the engine's SortedRows.pack)"),
    sa.ForeignKeyConstraint(['corpus_id'], ['corpora.id'], name=op.f('fk_packed_counts_corpus_id_corpora'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('corpus_id', 'part', name=op.f('pk_packed_counts'))
    )
    op.create_table('corpus_files',
    sa.Column('corpus_id', sa.Integer(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False, comment='0, 1, ...: the order the files were given and added in'),
    sa.Column('path', sa.Text(), nullable=False, comment='where the file was read from (resolved)'),
    sa.Column('sha256', sa.String(length=64), nullable=False, comment="sha256 of the file's content (decompressed), hex"),
    sa.Column('size_bytes', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False, comment='its content in bytes (decompressed)'),
    sa.Column('added_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['corpus_id'], ['corpora.id'], name=op.f('fk_corpus_files_corpus_id_corpora'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('corpus_id', 'position', name=op.f('pk_corpus_files'))
    )
    if dialect == "sqlite":
        for statement in _sqlite_triggers().values():
            op.execute(statement)
    elif dialect == "postgresql":
        op.drop_constraint('fk_pretoken_counts_corpus_id_corpora', 'pretoken_counts', type_='foreignkey')
        # Stored as it is, not compressed (pglz took 0.35 s for a 6 MB copy, most of its write).
        op.execute("ALTER TABLE packed_counts ALTER COLUMN data SET STORAGE EXTERNAL")
        op.execute(_POSTGRESQL_FUNCTION)
        op.execute(_POSTGRESQL_CORPORA_FUNCTION)
        for statement in _postgresql_triggers().values():
            op.execute(statement)


def downgrade() -> None:
    """Downgrade schema."""
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for name in _sqlite_triggers():
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
    elif dialect == "postgresql":
        for name in _postgresql_triggers():
            table = "corpora" if name.startswith("corpora_") else "pretoken_counts"
            op.execute(f"DROP TRIGGER {name} ON {table}")
        op.execute("DROP FUNCTION bpestore_counts_changed()")
        op.execute("DROP FUNCTION bpestore_corpora_changed()")
        op.create_foreign_key(
            'fk_pretoken_counts_corpus_id_corpora', 'pretoken_counts', 'corpora', ['corpus_id'], ['id'], ondelete='CASCADE'
        )
    op.drop_table('corpus_files')
    op.drop_table('packed_counts')
    if dialect == "sqlite":
        _rebuild_sqlite_counts(rowid=True)
