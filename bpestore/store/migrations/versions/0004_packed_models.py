"""A packed copy of each tokenizer's vocab and merges, one BLOB, for fast loading.

Loading GPT-2 read 100,000 vocab and merge rows (0.15 s of ``Tokenizer.from_db``'s 0.2 s); the
table ``packed_models`` holds the same vocab and merges as one BLOB per tokenizer (layout in
``bpestore/store/packed.py``). The rows stay the truth. On SQLite, triggers delete a tokenizer's
packed copy whenever any of its vocab or merge rows is inserted, changed or deleted, so a copy is
never stale; readers then fall back to the rows. Existing tokenizers are packed here. Other
databases get the (empty) table only: they are read from the rows, as before.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

import struct
from typing import Any, Sequence, Union

import sqlalchemy as sa
from alembic import op


# revision identifiers, used by Alembic.
revision: str = '0004'
down_revision: Union[str, Sequence[str], None] = '0003'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

# (frozen here, as migrations must be: the layout of bpestore/store/packed.py at this revision)
_MAGIC = b"BPEPACK\x01"


def _pack(vocab: Sequence[Any], merges: Sequence[Any]) -> bytes:
    """``vocab`` rows (by ascending id) and ``merges`` rows (by rank) packed."""
    lengths = [length for left, right in merges for length in (len(left), len(right))]
    return b"".join(
        [
            _MAGIC,
            struct.pack("<II", len(vocab), len(merges)),
            struct.pack(f"<{len(vocab)}I", *(token_id for token_id, _ in vocab)),
            struct.pack(f"<{len(vocab)}I", *(len(token) for _, token in vocab)),
            struct.pack(f"<{len(lengths)}I", *lengths),
            *(token for _, token in vocab),
            *(part for pair in merges for part in pair),
        ]
    )


def _triggers() -> dict[str, str]:
    """``CREATE TRIGGER`` statements (SQLite): any change to a tokenizer's vocab or merge rows
    deletes its packed copy."""
    statements = {}
    for table in ("vocab", "merges"):
        for event, ids in (("INSERT", "NEW.tokenizer_id"), ("UPDATE", "OLD.tokenizer_id, NEW.tokenizer_id"), ("DELETE", "OLD.tokenizer_id")):
            name = f"{table}_{event.lower()}_unpacks"
            statements[name] = (
                f"CREATE TRIGGER {name} AFTER {event} ON {table} FOR EACH ROW "
                f"BEGIN DELETE FROM packed_models WHERE tokenizer_id IN ({ids}); END"
            )
    return statements


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table('packed_models',
    sa.Column('tokenizer_id', sa.Integer(), nullable=False),
    sa.Column('data', sa.LargeBinary(), nullable=False, comment="the tokenizer's vocab and merges packed (bpestore/store/packed.py)"),
    sa.ForeignKeyConstraint(['tokenizer_id'], ['tokenizers.id'], name=op.f('fk_packed_models_tokenizer_id_tokenizers'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('tokenizer_id', name=op.f('pk_packed_models'))
    )
    connection = op.get_bind()
    if connection.dialect.name != "sqlite":
        return
    for statement in _triggers().values():
        op.execute(statement)
    tokenizer_ids = connection.exec_driver_sql("SELECT id FROM tokenizers ORDER BY id").scalars().all()
    for tokenizer_id in tokenizer_ids:
        vocab = connection.exec_driver_sql(
            "SELECT token_id, token FROM vocab WHERE tokenizer_id = ? ORDER BY token_id", (tokenizer_id,)
        ).all()
        merges = connection.exec_driver_sql(
            'SELECT "left", "right" FROM merges WHERE tokenizer_id = ? ORDER BY rank', (tokenizer_id,)
        ).all()
        connection.exec_driver_sql(
            "INSERT INTO packed_models (tokenizer_id, data) VALUES (?, ?)", (tokenizer_id, _pack(vocab, merges))
        )


def downgrade() -> None:
    """Downgrade schema."""
    if op.get_bind().dialect.name == "sqlite":
        for name in _triggers():
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
    op.drop_table('packed_models')
