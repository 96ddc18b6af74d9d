"""Schema migrations with Alembic, run by ``webhooks db upgrade`` (idempotent).

:func:`check_schema` tells the other commands whether the database is at this
version's revision before they touch a table, so that a fresh or older
database says "run webhooks db upgrade" instead of failing on a missing table.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.script.revision import ResolutionError
from alembic.util.exc import CommandError

from webhooks.config import get_settings
from webhooks.errors import SchemaNotReady
from webhooks.storage.db import get_engine

__all__ = ["upgrade", "alembic_config", "check_schema"]

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
UPGRADE_HINT = "run `webhooks db upgrade`"


def alembic_config(url: str | None = None) -> Config:
    """An Alembic configuration for ``url`` (default: WEBHOOKS_DATABASE_URL)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", (url or get_settings().database_url).replace("%", "%%"))
    return config


def upgrade(url: str | None = None, revision: str = "head") -> tuple[str | None, str | None]:
    """Create or upgrade the schema to ``revision``.

    Returns the database's revision before and after, each None when there
    is no schema, so a caller can say what was done (``webhooks db upgrade``).
    """
    config = alembic_config(url)
    with get_engine(url).begin() as connection:
        before = _current_revision(connection)
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
        return before, _current_revision(connection)


def _current_revision(connection) -> str | None:
    """The database's schema revision(s), comma-separated; None when it has no schema."""
    heads = MigrationContext.configure(connection).get_current_heads()
    return ", ".join(sorted(heads)) or None


def _is_known(script: ScriptDirectory, revision: str) -> bool:
    try:
        return script.get_revision(revision) is not None
    except (ResolutionError, CommandError):
        return False


def check_schema(url: str | None = None) -> None:
    """Raise :class:`SchemaNotReady` unless the database is at this version's head revision.

    The message says why and what to do: upgrade the database when it has no
    schema or an older one; when it has a revision this version does not
    know (a newer release migrated it), upgrade the code instead.
    """
    script = ScriptDirectory.from_config(alembic_config(url))
    heads = set(script.get_heads())
    with get_engine(url).connect() as connection:
        current = set(MigrationContext.configure(connection).get_current_heads())
    if current == heads:
        return
    wanted = ", ".join(sorted(heads))
    if not current:
        raise SchemaNotReady(f"the database has no schema yet: {UPGRADE_HINT} first")
    found = ", ".join(sorted(current))
    if not all(_is_known(script, revision) for revision in current):
        raise SchemaNotReady(
            f"the database's schema is at revision {found}, newer than this version of "
            f"webhooks knows ({wanted}): install the newer webhooks that migrated it"
        )
    raise SchemaNotReady(
        f"the database's schema is at revision {found}, this version needs {wanted}: {UPGRADE_HINT}"
    )
