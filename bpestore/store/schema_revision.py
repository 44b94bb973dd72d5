"""The alembic revision this code's schema corresponds to (a test checks it is the head).

Kept apart from the migrations so that reading a store needs no alembic import.
"""

SCHEMA_REVISION = "0002"
