"""A store that works on PostgreSQL as on SQLite: 64-bit counts, keys on long byte strings, an
index for deleting, and triggers that keep ``packed_models`` fresh.

* ``corpora.size_bytes``, ``distinct_pretokens``, ``total_pretokens`` and
  ``pretoken_counts.count`` become 64-bit (PostgreSQL's ``integer`` is 32-bit: a corpus over 2 GiB
  or a count over 2^31 failed with "integer out of range"). SQLite's integers are 64-bit already,
  so on SQLite the type is left as it is (changing it would copy the tables, and a copy of a table
  cascade-deletes through the foreign keys).
* On PostgreSQL, ``pretoken_counts``'s primary key (corpus_id, pretoken) and ``vocab``'s unique
  (tokenizer_id, token) become unique indexes on (id, sha256(bytes)): a B-tree entry holds at most
  2704 bytes, and a pre-token or a token can be longer (a 6 kB run of '=' is one pre-token).
* An index on merges (tokenizer_id, result_id), which deleting a tokenizer needs (each deleted vocab
  row looks up the merges whose result it is: without the index, rm of GPT-2 took 247 s on
  PostgreSQL), and one on tokenizers (corpus_id), which deleting a corpus needs.
* On PostgreSQL, triggers that delete a tokenizer's packed copy whenever its vocab or merge rows
  change, as migration 0004's do on SQLite (per statement here, with transition tables, so that a
  COPY of 50,000 rows runs one DELETE, not 50,000). Tokenizers stored before have no packed copy
  on PostgreSQL and are read from their rows, as before.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op


# revision identifiers, used by Alembic.
revision: str = '0006'
down_revision: Union[str, Sequence[str], None] = '0005'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

_WIDENED = [("corpora", "size_bytes"), ("corpora", "distinct_pretokens"), ("corpora", "total_pretokens"), ("pretoken_counts", "count")]

# (frozen here, as migrations must be)
_FUNCTION = """
CREATE FUNCTION bpestore_unpack_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        DELETE FROM packed_models WHERE tokenizer_id IN (SELECT tokenizer_id FROM old_rows);
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        DELETE FROM packed_models WHERE tokenizer_id IN (SELECT tokenizer_id FROM new_rows);
    END IF;
    RETURN NULL;
END
$$
"""


def _triggers() -> dict[str, str]:
    """``CREATE TRIGGER`` statements (PostgreSQL): any change to a tokenizer's vocab or merge rows
    deletes its packed copy."""
    statements = {}
    for table in ("vocab", "merges"):
        for event, tables in (
            ("INSERT", "NEW TABLE AS new_rows"),
            ("UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"),
            ("DELETE", "OLD TABLE AS old_rows"),
        ):
            name = f"{table}_{event.lower()}_unpacks"
            statements[name] = (
                f"CREATE TRIGGER {name} AFTER {event} ON {table} REFERENCING {tables} "
                f"FOR EACH STATEMENT EXECUTE FUNCTION bpestore_unpack_changed()"
            )
    return statements


def upgrade() -> None:
    """Upgrade schema."""
    op.create_index('ix_merges_tokenizer_id_result_id', 'merges', ['tokenizer_id', 'result_id'])
    op.create_index(op.f('ix_tokenizers_corpus_id'), 'tokenizers', ['corpus_id'])
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, column in _WIDENED:
        op.alter_column(table, column, type_=sa.BigInteger(), existing_type=sa.Integer(), existing_nullable=False)
    op.drop_constraint('pk_pretoken_counts', 'pretoken_counts', type_='primary')
    op.execute("CREATE UNIQUE INDEX uq_pretoken_counts_pretoken_sha256 ON pretoken_counts (corpus_id, sha256(pretoken))")
    op.drop_constraint('uq_vocab_tokenizer_id', 'vocab', type_='unique')
    op.execute("CREATE UNIQUE INDEX uq_vocab_token_sha256 ON vocab (tokenizer_id, sha256(token))")
    op.execute(_FUNCTION)
    for statement in _triggers().values():
        op.execute(statement)


def downgrade() -> None:
    """Downgrade schema."""
    if op.get_bind().dialect.name == "postgresql":
        for name in _triggers():
            op.execute(f"DROP TRIGGER {name} ON {name.partition('_')[0]}")
        op.execute("DROP FUNCTION bpestore_unpack_changed()")
        # 0005 never writes packed copies on PostgreSQL, and would not keep them fresh.
        op.execute("DELETE FROM packed_models")
        # (fails, as it must, if a token or pre-token is too long for 0005's keys)
        op.execute("DROP INDEX uq_vocab_token_sha256")
        op.create_unique_constraint('uq_vocab_tokenizer_id', 'vocab', ['tokenizer_id', 'token'])
        op.execute("DROP INDEX uq_pretoken_counts_pretoken_sha256")
        op.create_primary_key('pk_pretoken_counts', 'pretoken_counts', ['corpus_id', 'pretoken'])
        # (fails, as it must, if a value is above 2^31 - 1)
        for table, column in _WIDENED:
            op.alter_column(table, column, type_=sa.Integer(), existing_type=sa.BigInteger(), existing_nullable=False)
    op.drop_index(op.f('ix_tokenizers_corpus_id'), table_name='tokenizers')
    op.drop_index('ix_merges_tokenizer_id_result_id', table_name='merges')
