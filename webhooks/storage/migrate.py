"""Schema migrations with Alembic, run by ``webhooks db upgrade`` (idempotent).

:func:`check_schema` tells the other commands whether the database is at this
version's revision before they touch a table, so that a fresh or older
database says "run webhooks db upgrade" instead of failing on a missing table;
:func:`schema_errors` gives ``emit_event``, which checks nothing beforehand
(it runs on every event), the same answer when a table turns out to be missing.
Every such message names the database, without its password.

Alembic is imported when a function needs it, not with this module: it costs
about 0.1 s of a command's start on a quiet machine, more on a loaded one, and
``emit_event``'s module imports this one for a path that only runs when something is
already wrong. The check itself needs no Alembic: it reads the revisions through
:mod:`webhooks.storage.revisions`, and so does ``upgrade`` on a database already at
the head.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError, ProgrammingError, SQLAlchemyError

from webhooks.config import get_settings
from webhooks.config.redaction import redact
from webhooks.errors import SchemaNotReady
from webhooks.storage.db import check_sqlite_folder, get_engine, sqlite_file
from webhooks.storage.revisions import (MIGRATIONS, database_revisions, head_revisions,
                                        script_revisions)

__all__ = ["upgrade", "alembic_config", "check_schema", "schema_errors"]

UPGRADE_HINT = "run `webhooks db upgrade`"


def _database_name(url: str | None = None) -> str:
    """``url`` (default: WEBHOOKS_DATABASE_URL) as messages name it: its password masked."""
    return redact(url or get_settings().database_url)


def alembic_config(url: str | None = None):
    """An Alembic ``Config`` for ``url`` (default: WEBHOOKS_DATABASE_URL)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", (url or get_settings().database_url).replace("%", "%%"))
    return config


def upgrade(url: str | None = None, revision: str = "head") -> tuple[str | None, str | None]:
    """Create or upgrade the schema to ``revision``.

    Returns the database's revision before and after, each None when there
    is no schema, so a caller can say what was done (``webhooks db upgrade``).
    A database already at the one head is left as Alembic would leave it, without
    importing Alembic (``webhooks dev`` and deploys upgrade at every start).
    """
    with get_engine(url).begin() as connection:
        before = _current_revision(connection)
        if revision == "head" and _at_the_one_head(connection):
            return before, before
        from alembic import command  # here, not above: see the module's docstring

        config = alembic_config(url)
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
        return before, _current_revision(connection)


def _at_the_one_head(connection) -> bool:
    """Whether the database is at this version's head, and there is one (with two unmerged
    heads, Alembic's upgrade to "head" refuses: let it say so)."""
    heads = head_revisions()
    return len(heads) == 1 and database_revisions(connection) == heads


def _current_revision(connection) -> str | None:
    """The database's schema revision(s), comma-separated; None when it has no schema."""
    return ", ".join(sorted(database_revisions(connection))) or None


def check_schema(url: str | None = None, *, engine: Engine | None = None) -> None:
    """Raise :class:`SchemaNotReady` unless the database is at this version's head revision.

    The message names the database and says why and what to do: upgrade the
    database when it has no schema or an older one; when it has a revision
    this version does not know (a newer release migrated it), upgrade the code
    instead. A SQLite file that does not exist is not created here: from the
    wrong folder, the default data folder (``./webhooks-data``) is another,
    empty one, and the message says so. ``engine`` checks that engine's
    database instead of ``url``'s (the caller's own, for ``emit_event(session=)``).
    """
    url = url or (engine.url.render_as_string(hide_password=False) if engine is not None
                  else get_settings().database_url)
    name = _database_name(url)
    _check_file_exists(url, name)
    heads = head_revisions()
    with (engine or get_engine(url)).connect() as connection:
        current = database_revisions(connection)
    if current == heads:
        return
    wanted = ", ".join(sorted(heads))
    if not current:
        raise SchemaNotReady(f"the database {name} has no schema yet: {UPGRADE_HINT} first")
    found = ", ".join(sorted(current))
    if not current <= script_revisions().keys():
        raise SchemaNotReady(
            f"the schema of the database {name} is at revision {found}, newer than this "
            f"version of webhooks knows ({wanted}): install the newer webhooks that migrated it"
        )
    raise SchemaNotReady(
        f"the schema of the database {name} is at revision {found}, this version needs "
        f"{wanted}: {UPGRADE_HINT}"
    )


def _check_file_exists(url: str, name: str) -> None:
    """SchemaNotReady if ``url`` names a SQLite file that does not exist (ConfigError if its
    folder does not either, as the engine would say)."""
    path = sqlite_file(url)
    if path is None or path.exists():
        return
    check_sqlite_folder(path)
    hint = ""
    if path.parent == get_settings().data_dir:
        hint = (" (the data folder, WEBHOOKS_DATA_DIR, defaults to ./webhooks-data in the "
                "folder webhooks is run from: if your data is elsewhere, run this from that "
                "folder or set WEBHOOKS_DATA_DIR)")
    raise SchemaNotReady(f"the database {name} does not exist yet: {UPGRADE_HINT} first to "
                         f"create it{hint}")


@contextlib.contextmanager
def schema_errors(engine: Engine | None = None) -> Iterator[None]:
    """Inside the block, a database error that a missing or older schema explains becomes
    :class:`SchemaNotReady` naming the database (``engine``'s, default: the configured one).

    Nothing is checked before the block runs: a table that is missing fails
    its first statement (``no such table`` on SQLite, ``UndefinedTable`` on
    PostgreSQL), and only then is the schema's revision read. Any other
    error, and an error the revision does not explain, is raised as it was.
    """
    try:
        yield
    except (OperationalError, ProgrammingError) as error:
        try:
            check_schema(engine=engine)
        except SchemaNotReady as not_ready:
            raise not_ready from error
        except SQLAlchemyError:
            pass  # the database cannot be read either: the first error says more
        raise
