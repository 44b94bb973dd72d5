"""A tokenizer's pipeline around its BPE model, as a column: ``tokenizers.pipeline``.

A tokenizer imported from a Hugging Face ``tokenizer.json`` may normalize its text before it is
pre-tokenized (GPT-NeoX and Qwen2 compose it to NFC; others lowercase it or replace spaces), and
some of its added tokens are then found in the normalized text. This column holds those parts of
the pipeline as a JSON object, ``{"normalizer": <the tokenizer.json form>, "normalized_tokens":
[...], "post_processor": <the tokenizer.json form>, "token_options": {token: ["lstrip", ...]}}``
(the post-processor: the special tokens put around a text when encoding is asked to add them;
the options: how RoBERTa's ``<mask>`` and the like take the whitespace around them); NULL for a tokenizer without any (every
tokenizer stored before, and every one bpestore trains).

Plain ALTER TABLE, as in 0010: a batch copy of ``tokenizers`` would cascade-delete its vocab and
merges through the foreign keys. Downgrading drops the column, and with it the normalizers: the
tokenizers that had one would encode differently, so a downgrade refuses a store that holds any.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-05
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op


# revision identifiers, used by Alembic.
revision: str = '0012'
down_revision: Union[str, Sequence[str], None] = '0011'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

COMMENT = (
    'JSON object: the normalizer ("normalizer", tokenizer.json form), the added tokens found in normalized text '
    '("normalized_tokens") and the post-processor ("post_processor", tokenizer.json form), '
    'the tokens that take their surroundings ("token_options"); NULL: none'
)


def upgrade() -> None:
    """Upgrade schema."""
    op.add_column('tokenizers', sa.Column('pipeline', sa.Text(), nullable=True, comment=COMMENT))


def downgrade() -> None:
    """Downgrade schema."""
    held = op.get_bind().execute(sa.text("SELECT name, version FROM tokenizers WHERE pipeline IS NOT NULL LIMIT 1")).first()
    if held is not None:
        raise RuntimeError(
            f"cannot downgrade below 0012: {held[0]}@{held[1]} normalizes its text, which the older schema cannot hold"
        )
    op.drop_column('tokenizers', 'pipeline')
