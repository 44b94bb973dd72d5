"""The alembic revision this code's schema corresponds to (a test checks it is the head), and the
one check of a database's revision against it.

Kept apart from the migrations so that reading a store needs no alembic import.
"""

SCHEMA_REVISION = "0013"


def is_current(revision: str | None) -> bool:
    """Whether a database at ``revision`` has exactly this code's schema (no upgrade needed)."""
    return revision == SCHEMA_REVISION
