"""How a corpus's counts were made, as a column: ``corpora.origin``.

Until now counts made elsewhere were told apart by prefixes written into ``corpora.path``:
``counts: <where>`` for counts given (a Parquet or TSV file, counts made in Python) and
``counts: dask: <inputs>`` for counts made on a Dask cluster, which every reader (the command
line's ``list``, the web explorer) had to strip back off. Now ``origin`` says ``files`` (counted
here from ``path``), ``counts`` or ``dask``, and ``path`` holds only where the counts came from.
Existing rows are converted; downgrading writes the prefixes back.

Plain ALTER TABLE, as in 0003: a batch copy of ``corpora`` would cascade-delete its pre-token
counts and its tokenizers' links through the foreign keys.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op


# revision identifiers, used by Alembic.
revision: str = '0007'
down_revision: Union[str, Sequence[str], None] = '0006'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

# The prefixes of before, longest first: a Dask count was stored as counts given, from "dask: ...".
PREFIXES = (("dask", "counts: dask: "), ("counts", "counts: "))
COMMENT = (
    "how the counts were made: 'files' (counted here from path), 'counts' (given as counts; path: where from), "
    "'dask' (counted on a Dask cluster; path: its inputs)"
)
_corpora = sa.table("corpora", sa.column("id", sa.Integer), sa.column("path", sa.Text), sa.column("origin", sa.String))


def upgrade() -> None:
    """Upgrade schema."""
    op.add_column('corpora', sa.Column('origin', sa.String(length=16), nullable=False, server_default='files', comment=COMMENT))
    connection = op.get_bind()
    for corpus_id, path in connection.execute(sa.select(_corpora.c.id, _corpora.c.path)).all():
        for origin, prefix in PREFIXES:
            if path.startswith(prefix):
                connection.execute(_corpora.update().where(_corpora.c.id == corpus_id).values(origin=origin, path=path[len(prefix):]))
                break


def downgrade() -> None:
    """Downgrade schema."""
    connection = op.get_bind()
    prefixes = dict(PREFIXES)
    rows = connection.execute(sa.select(_corpora.c.id, _corpora.c.path, _corpora.c.origin).where(_corpora.c.origin != 'files')).all()
    for corpus_id, path, origin in rows:
        connection.execute(_corpora.update().where(_corpora.c.id == corpus_id).values(path=prefixes.get(origin, "counts: ") + path))
    op.drop_column('corpora', 'origin')
