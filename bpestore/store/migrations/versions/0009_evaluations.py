"""Evaluations: a tokenizer measured on a text file, kept (``bpestore eval``, ``Store.evaluate``).

One row per tokenizer, file content (sha256) and Rényi order alpha: the file's sizes (bytes,
characters, words, tokens, distinct tokens, single-token words) and the metrics from them, so that
the explorer and a second ``eval`` read them instead of encoding the file again. Deleting a
tokenizer deletes its rows (ON DELETE CASCADE, as its vocab and merges). Only adds a table: every
existing row is kept.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op


# revision identifiers, used by Alembic.
revision: str = '0009'
down_revision: Union[str, Sequence[str], None] = '0008'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

_BIG_INTEGER = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table('evaluations',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('tokenizer_id', sa.Integer(), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False, comment="sha256 of the file's content, hex"),
    sa.Column('label', sa.Text(), nullable=False, comment="the file's name when it was measured (a file per language: the language)"),
    sa.Column('path', sa.Text(), nullable=False, comment='where the file was read from (resolved)'),
    sa.Column('alpha', sa.Float(), nullable=False, comment='the order of the Renyi entropy of renyi_efficiency'),
    sa.Column('bytes', _BIG_INTEGER, nullable=False),
    sa.Column('characters', _BIG_INTEGER, nullable=False, comment='Unicode code points'),
    sa.Column('words', _BIG_INTEGER, nullable=False, comment='whitespace-separated words (str.split)'),
    sa.Column('tokens', _BIG_INTEGER, nullable=False),
    sa.Column('distinct_tokens', sa.Integer(), nullable=False),
    sa.Column('single_token_words', _BIG_INTEGER, nullable=False, comment='words no token boundary falls inside'),
    sa.Column('bytes_per_token', sa.Float(), nullable=True),
    sa.Column('characters_per_token', sa.Float(), nullable=True),
    sa.Column('fertility', sa.Float(), nullable=True, comment='tokens per word'),
    sa.Column('renyi_efficiency', sa.Float(), nullable=True),
    sa.Column('vocab_used', sa.Float(), nullable=True, comment='distinct tokens over the vocab size'),
    sa.Column('single_token_word_rate', sa.Float(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['tokenizer_id'], ['tokenizers.id'], name=op.f('fk_evaluations_tokenizer_id_tokenizers'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_evaluations')),
    sa.UniqueConstraint('tokenizer_id', 'sha256', 'alpha', name=op.f('uq_evaluations_tokenizer_id'))
    )


def downgrade() -> None:
    """Downgrade schema."""
    op.drop_table('evaluations')
