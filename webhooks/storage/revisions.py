"""The schema's revisions, read without Alembic: the migration scripts' ids, their head, and
the revision a database is at.

Every ``webhooks`` command but ``db upgrade`` checks the database's revision before it
runs (``check_schema``, docs/upgrade.md "The rule"). Alembic's ``ScriptDirectory`` and
``MigrationContext`` give the same answers, but importing them costs about 0.1 s of each
command's start (alembic, mako, pygments and every SQL dialect's DDL module) and they
execute every script. Here each script's ``revision`` and ``down_revision`` are read from
its source as literals, and the database's revision from Alembic's version table with one
SELECT; tests/test_schema_revisions.py proves both agree with Alembic.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import Connection

__all__ = ["MIGRATIONS", "script_revisions", "head_revisions", "database_revisions"]

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
VERSIONS = MIGRATIONS / "versions"
# Alembic's default version table and column: migrations/env.py names no other.
VERSION_TABLE = "alembic_version"
VERSION_COLUMN = "version_num"


@functools.cache
def script_revisions(versions: Path = VERSIONS) -> dict[str, tuple[str, ...]]:
    """Each migration script's revision id, mapped to the ids it revises (none for the first).

    Read from the scripts' source once per process: the files Alembic loads, every
    ``*.py`` in ``versions`` (default: this version's migrations) but ``__init__.py``.
    """
    scripts = sorted(path for path in versions.glob("*.py")
                     if path.name != "__init__.py")
    return dict(_revision_of(path) for path in scripts)


def head_revisions(versions: Path = VERSIONS) -> frozenset[str]:
    """The revisions no script in ``versions`` revises: the newest, the one this version's
    code needs (one, unless two branches are left unmerged)."""
    revisions = script_revisions(versions)
    revised = {down for downs in revisions.values() for down in downs}
    return frozenset(revisions) - revised


def database_revisions(connection: Connection) -> frozenset[str]:
    """The revisions the database's version table records; empty when it has no schema."""
    if not connection.dialect.has_table(connection, VERSION_TABLE):
        return frozenset()
    rows = connection.execute(text(f"SELECT {VERSION_COLUMN} FROM {VERSION_TABLE}"))
    return frozenset(row[0] for row in rows)


def _revision_of(script: Path) -> tuple[str, tuple[str, ...]]:
    """``script``'s ``revision`` and its ``down_revision`` as a tuple, from the module's
    top-level assignments (literals, as Alembic's template writes them)."""
    assigned = {}
    for statement in ast.parse(script.read_text(encoding="utf-8"), str(script)).body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            target = statement.target  # revision: str = "…", as newer templates write it
        else:
            continue
        if isinstance(target, ast.Name) and target.id in ("revision", "down_revision"):
            assigned[target.id] = ast.literal_eval(statement.value)
    if not isinstance(assigned.get("revision"), str):
        raise ValueError(f"{script} assigns no literal revision id")
    down = assigned.get("down_revision")
    downs = () if down is None else (down,) if isinstance(down, str) else tuple(down)
    return assigned["revision"], downs
