"""Alembic environment for bpestore's schema.

bpestore runs migrations in-process (bpestore/store/migrate.py) and hands over its own connection in
``config.attributes["connection"]``; the alembic command line (with migrations/alembic.ini) gets a
fresh engine from the ini file's URL instead.
"""

from alembic import context
from sqlalchemy import engine_from_config, pool

from bpestore.store.schema import metadata

config = context.config


def run_migrations(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite cannot ALTER most things
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
elif (connection := config.attributes.get("connection")) is not None:
    run_migrations(connection)
else:
    engine = engine_from_config(config.get_section(config.config_ini_section, {}), prefix="sqlalchemy.", poolclass=pool.NullPool)
    with engine.connect() as connection:
        run_migrations(connection)
