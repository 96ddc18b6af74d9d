"""Alembic environment: runs on the connection webhooks.storage.migrate hands it."""

from alembic import context
from sqlalchemy import create_engine

from webhooks.storage.models import Base
from webhooks.storage.partitions import comparison_options

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is None:  # plain `alembic` command line use
        engine = create_engine(config.get_main_option("sqlalchemy.url"))
        with engine.begin() as connection:
            _run(connection)
    else:
        _run(connection)


def _run(connection) -> None:
    # Batch mode lets later migrations alter tables on SQLite too.
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True,
                      **comparison_options(connection.dialect.name))
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
