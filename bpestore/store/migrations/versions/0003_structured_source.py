"""A tokenizer's source as columns: ``source_format`` and ``source_paths`` (a JSON list).

Until now an import wrote its origin as free text, ``imported from <format> <path> [<path>]``,
which readers had to parse back. Existing rows are converted: their ``source`` becomes
``imported`` and the format and paths move to the new columns. The paths were written resolved
(absolute), so a GPT-2 import's two paths are told apart at the last " /"; hf and tiktoken imports
have one path, spaces and all. Downgrading writes the old text back.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

import json
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op


# revision identifiers, used by Alembic.
revision: str = '0003'
down_revision: Union[str, Sequence[str], None] = '0002'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

_PREFIX = "imported from "
_tokenizers = sa.table(
    "tokenizers",
    sa.column("id", sa.Integer),
    sa.column("source", sa.Text),
    sa.column("source_format", sa.String),
    sa.column("source_paths", sa.Text),
)


def split_source(source: str) -> tuple[str, list[str]] | None:
    """``imported from <format> <paths>`` -> (format, paths); None for any other text."""
    if not source.startswith(_PREFIX):
        return None
    format, _, rest = source[len(_PREFIX):].partition(" ")
    if not format or not rest:
        return None
    if format == "gpt2" and " /" in rest:
        vocab, merges = rest.rsplit(" /", 1)
        return format, [vocab, "/" + merges]
    return format, [rest]


def upgrade() -> None:
    """Upgrade schema."""
    # Plain ALTER TABLE (SQLite >= 3.35 drops columns too): a batch copy of `tokenizers` would
    # cascade-delete every vocab and merge row through their foreign keys, and trip the views.
    op.add_column('tokenizers', sa.Column('source_format', sa.String(length=32), nullable=True, comment="the format an import read: 'gpt2', 'hf', 'tiktoken'"))
    op.add_column('tokenizers', sa.Column('source_paths', sa.Text(), nullable=True, comment='JSON list of the files an import read'))
    connection = op.get_bind()
    rows = connection.execute(sa.select(_tokenizers.c.id, _tokenizers.c.source)).all()
    for tokenizer_id, source in rows:
        parts = split_source(source)
        if parts is not None:
            format, paths = parts
            connection.execute(
                _tokenizers.update()
                .where(_tokenizers.c.id == tokenizer_id)
                .values(source="imported", source_format=format, source_paths=json.dumps(paths, ensure_ascii=False))
            )


def downgrade() -> None:
    """Downgrade schema."""
    connection = op.get_bind()
    rows = connection.execute(
        sa.select(_tokenizers.c.id, _tokenizers.c.source_format, _tokenizers.c.source_paths).where(_tokenizers.c.source_format.is_not(None))
    ).all()
    for tokenizer_id, format, paths in rows:
        text = f"{_PREFIX}{format} {' '.join(json.loads(paths or '[]'))}"
        connection.execute(_tokenizers.update().where(_tokenizers.c.id == tokenizer_id).values(source=text))
    op.drop_column('tokenizers', 'source_paths')
    op.drop_column('tokenizers', 'source_format')
