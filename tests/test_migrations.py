"""The Alembic migrations build exactly the schema the models describe, on both databases."""

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from webhooks.db import get_engine
from webhooks.models import Base


def test_migrated_schema_matches_the_models(any_db):
    with get_engine(any_db).connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert differences == []


def test_upgrade_twice_is_harmless(sqlite_db):
    from webhooks.migrate import upgrade

    upgrade(sqlite_db)
    upgrade(sqlite_db)
