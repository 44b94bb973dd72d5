"""Warm caches: the pre-tokens a tokenizer worked out ahead, and their ids (``warm_caches``).

One row per tokenizer at most: the engine's packed table of pre-tokens and ids
(crates/encode/src/warm.rs), the fingerprint of the model that made it, how many pre-tokens it
holds and where they came from. ``Tokenizer.from_db`` gives a tokenizer's caches these pre-tokens
before its first text, so that a fresh tokenizer does not merge them again. Deleting a tokenizer
deletes its row (ON DELETE CASCADE). Only adds a table: tokenizers stored before have none (they
load as before; ``bpestore warm REF`` makes one).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op


# revision identifiers, used by Alembic.
revision: str = '0011'
down_revision: Union[str, Sequence[str], None] = '0010'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table('warm_caches',
    sa.Column('tokenizer_id', sa.Integer(), nullable=False),
    sa.Column('fingerprint', sa.String(length=16), nullable=False, comment="the engine's fingerprint of the model that made the table, hex"),
    sa.Column('entries', sa.Integer(), nullable=False, comment='pre-tokens in the table'),
    sa.Column('source', sa.Text(), nullable=False, comment='where the pre-tokens came from: the training corpus, files, the vocabulary'),
    sa.Column('data', sa.LargeBinary(), nullable=False, comment='the pre-tokens and their ids, packed by the engine (crates/encode/src/warm.rs)'),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['tokenizer_id'], ['tokenizers.id'], name=op.f('fk_warm_caches_tokenizer_id_tokenizers'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('tokenizer_id', name=op.f('pk_warm_caches'))
    )


def downgrade() -> None:
    """Downgrade schema."""
    op.drop_table('warm_caches')
