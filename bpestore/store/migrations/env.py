"""Alembic environment for bpestore's schema.

bpestore runs migrations in-process (bpestore/store/migrate.py) and hands over its own connection in
``config.attributes["connection"]``; the alembic command line (run from the repository's root,
with its alembic.ini) gets a fresh engine from the ini file's URL instead, or from ``-x url=URL``.
"""

from typing import TYPE_CHECKING

from alembic import context
from sqlalchemy import engine_from_config, pool

from bpestore.store.schema import metadata

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

config = context.config


def run_migrations(connection: "Connection") -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite cannot ALTER most things
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    context.configure(url=url, target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
elif (connection := config.attributes.get("connection")) is not None:
    run_migrations(connection)
else:
    options = config.get_section(config.config_ini_section, {})
    url = context.get_x_argument(as_dictionary=True).get("url")
    if url:
        options["sqlalchemy.url"] = url
    engine = engine_from_config(options, prefix="sqlalchemy.", poolclass=pool.NullPool)
    with engine.connect() as connection:
        run_migrations(connection)
