"""The comment on ``tokenizers.source`` says what 0003 made it hold.

It still described the free text of before 0003 (``'imported from <format> <path>'``); since 0003
an import stores ``imported`` and says from what in ``source_format`` and ``source_paths``.

Only the comment changes, and only where the database stores column comments (PostgreSQL, MySQL,
...). SQLite has no column comments (the schema's comments are documentation there), so on SQLite
this revision changes nothing: no table copy, which would also cascade-delete through the foreign
keys.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op


# revision identifiers, used by Alembic.
revision: str = '0005'
down_revision: Union[str, Sequence[str], None] = '0004'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

OLD_COMMENT = "'trained', or 'imported from <format> <path>'"
NEW_COMMENT = (
    "where it came from: 'trained', 'imported' (source_format and source_paths say from what), "
    "'saved from Python', or the words a caller of Store.save gave"
)


def _set_comment(comment: str, existing: str) -> None:
    if not op.get_context().dialect.supports_comments:
        return
    op.alter_column(
        "tokenizers", "source", comment=comment, existing_comment=existing, existing_type=sa.Text(), existing_nullable=False
    )


def upgrade() -> None:
    """Upgrade schema."""
    _set_comment(NEW_COMMENT, OLD_COMMENT)


def downgrade() -> None:
    """Downgrade schema."""
    _set_comment(OLD_COMMENT, NEW_COMMENT)
