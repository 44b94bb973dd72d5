"""Added tokens, as a column: ``tokenizers.added_tokens``.

A tokenizer's added tokens (``bpestore add-tokens``, ``BPEModel.added_tokens``: Hugging Face's
non-special added tokens) are strings that encoding always cuts out of the text and encodes whole,
like special tokens, but that are ordinary (no special-token policy refuses them). Their ids and
bytes are in ``vocab`` like any token's (kind ``other``, or ``merge``/``byte`` for one that already
was such a token); this column lists which they are, as JSON, as ``special_tokens`` does. Every
tokenizer stored before has none: ``'[]'``.

Plain ALTER TABLE, as in 0003 and 0007: a batch copy of ``tokenizers`` would cascade-delete its
vocab and merges through the foreign keys. Downgrading drops the column: the tokens stay in the
vocab as ordinary tokens, no longer encoded whole.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op


# revision identifiers, used by Alembic.
revision: str = '0010'
down_revision: Union[str, Sequence[str], None] = '0009'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

COMMENT = "JSON list of the added tokens: ordinary tokens always encoded whole (bpestore add-tokens)"


def upgrade() -> None:
    """Upgrade schema."""
    op.add_column('tokenizers', sa.Column('added_tokens', sa.Text(), nullable=False, server_default='[]', comment=COMMENT))


def downgrade() -> None:
    """Downgrade schema."""
    op.drop_column('tokenizers', 'added_tokens')
