"""A PostgreSQL server for the store tests, and a fresh database on it per test.

The server is the one ``$BPESTORE_TEST_POSTGRES_URL`` names (a SQLAlchemy URL such as
``postgresql+psycopg://postgres@127.0.0.1:5433/postgres``, as ``.ci/run`` exports it), by default
``postgresql+psycopg://postgres@127.0.0.1:5432/postgres``. The URL's user must be allowed to
create databases: each test gets its own (``CREATE DATABASE`` with a random name, dropped
afterwards), so tests never see each other's data.

Where there is no server (or no psycopg), the PostgreSQL tests skip, saying why. If the variable
is set but its server cannot be reached, they fail instead: whoever set it expects them to run.
"""

from __future__ import annotations

import functools
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy.engine import make_url

URL_VARIABLE = "BPESTORE_TEST_POSTGRES_URL"
DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


def _conninfo(url: str) -> str:
    """The libpq form (``postgresql://...``) of a SQLAlchemy URL."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@functools.cache
def _server() -> tuple[str | None, str]:
    """(the server's URL, "") if one answers, else (None, why not)."""
    url = os.environ.get(URL_VARIABLE) or DEFAULT_URL
    try:
        import psycopg
    except ImportError:
        return None, "psycopg is not installed (pip install 'bpestore[postgres]'): no PostgreSQL tests"
    try:
        with psycopg.connect(_conninfo(url), connect_timeout=3, autocommit=True) as connection:
            connection.execute("SELECT 1")
    except psycopg.Error as error:
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        return None, f"no PostgreSQL server at {make_url(url).render_as_string(hide_password=True)} ({reason}); set {URL_VARIABLE}"
    return url, ""


def server_url() -> str:
    """The server's URL, or skip (fail, if ``$BPESTORE_TEST_POSTGRES_URL`` is set) saying why not."""
    url, reason = _server()
    if url is None:
        if os.environ.get(URL_VARIABLE):
            pytest.fail(f"{URL_VARIABLE} is set, but: {reason}")
        pytest.skip(reason)
    return url


class PostgresDatabase(str):
    """The SQLAlchemy URL of one test's own database (a ``str``: ``Store(db)`` opens it), which
    :meth:`query` reads as a person at the ``psql`` prompt would, with plain psycopg."""

    def query(self, statement: str, params: tuple | dict = ()) -> list[tuple]:
        """Rows of ``statement``, whose parameters are written ``?`` (as for sqlite3) or ``%(name)s``."""
        import psycopg

        if isinstance(params, tuple):
            statement = statement.replace("?", "%s")
        with psycopg.connect(_conninfo(self), autocommit=True) as connection:
            cursor = connection.execute(statement, params or None)
            rows = cursor.fetchall() if cursor.description else []
        return [tuple(bytes(value) if isinstance(value, memoryview) else value for value in row) for row in rows]

    def execute(self, statement: str, params: Any = None) -> None:
        import psycopg

        with psycopg.connect(_conninfo(self), autocommit=True) as connection:
            connection.execute(statement, params)


@contextmanager
def fresh_database() -> Iterator[PostgresDatabase]:
    """A new, empty database on the server (skip if there is none), dropped afterwards."""
    import psycopg

    url = server_url()
    name = f"bpestore_test_{secrets.token_hex(6)}"
    with psycopg.connect(_conninfo(url), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield PostgresDatabase(make_url(url).set(database=name).render_as_string(hide_password=False))
    finally:
        with psycopg.connect(_conninfo(url), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# (PostgreSQL: the full suite's, not the fast tier's: a database made and dropped for each test)
@pytest.fixture(name="db", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)])
def sqlite_or_postgresql_db(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Any]:
    """The ``db`` fixture of the store tests that run on both back ends: a SQLite file's path, or
    the URL of a new database on the PostgreSQL server (skipped, saying why, where there is none)."""
    if request.param == "sqlite":
        yield tmp_path / "store.db"
        return
    with fresh_database() as url:
        yield url
