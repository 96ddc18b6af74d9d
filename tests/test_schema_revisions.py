"""webhooks.storage.revisions reads the revisions without Alembic and gives Alembic's answers:
the scripts' ids and head (so a new migration moves the head the commands check for, with
nothing to update by hand), and the revision a database records."""

from __future__ import annotations

import textwrap

import pytest
from alembic import util
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, text

from webhooks.storage.migrate import alembic_config, upgrade
from webhooks.storage.revisions import database_revisions, head_revisions, script_revisions


def _alembics(script: ScriptDirectory) -> dict[str, tuple[str, ...]]:
    """Each revision Alembic loads, mapped to the ones it revises, as a tuple."""
    return {revision.revision: util.to_tuple(revision.down_revision, default=())
            for revision in script.walk_revisions()}


def test_this_versions_scripts_and_head_are_the_ones_alembic_loads():
    script = ScriptDirectory.from_config(alembic_config())
    assert script_revisions() == _alembics(script)
    assert head_revisions() == set(script.get_heads())
    assert len(head_revisions()) == 1


SCRIPTS = {  # a branch, a merge of it (a tuple), ids annotated as newer templates write them
    "1_first.py": 'revision = "a1"\ndown_revision = None\n',
    "2_left.py": 'revision: str = "b2"\ndown_revision: str | None = "a1"\n',
    "3_right.py": '"""Right."""\nfrom alembic import op\n\nrevision = "c3"\ndown_revision = "a1"\n'
                  'branch_labels = None\n\n\ndef upgrade():\n    revision = "not this"\n',
    "4_merge.py": 'revision = "d4"\ndown_revision = (\n    "b2",\n    "c3",\n)\n',
    "5_one.py": "revision = 'e5'\ndown_revision = 'd4'\n",
    "6_other.py": "revision = 'f6'\ndown_revision = ('d4',)\n",
    "__init__.py": "",
}


def test_a_branch_a_merge_and_two_heads_read_as_alembic_reads_them(tmp_path):
    versions = tmp_path / "versions"
    versions.mkdir()
    for name, source in SCRIPTS.items():
        (versions / name).write_text(textwrap.dedent(source))
    script = ScriptDirectory(str(tmp_path))
    assert script_revisions(versions) == _alembics(script)
    assert head_revisions(versions) == set(script.get_heads()) == {"e5", "f6"}


def _sqlite_at(path, state: str):
    """A SQLite database at ``state``: no schema, an older revision, or two unknown heads."""
    url = f"sqlite:///{path / 'state.db'}"
    if state == "older":
        upgrade(url, "0002")
    engine = create_engine(url)
    if state == "two unknown heads":
        with engine.begin() as connection:
            connection.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32))"))
            connection.execute(text("INSERT INTO alembic_version VALUES ('9998'), ('9999')"))
    return engine


@pytest.mark.parametrize("state", ["no schema", "older", "two unknown heads"])
def test_the_database_revision_is_the_one_alembic_reads_on_sqlite(tmp_path, state):
    engine = _sqlite_at(tmp_path, state)
    try:
        with engine.connect() as connection:
            alembics = set(MigrationContext.configure(connection).get_current_heads())
            assert database_revisions(connection) == alembics
    finally:
        engine.dispose()


def test_the_database_revision_is_the_one_alembic_reads_on_postgresql(postgres):
    engine = create_engine(postgres)
    try:
        with engine.connect() as connection:
            alembics = set(MigrationContext.configure(connection).get_current_heads())
            assert database_revisions(connection) == alembics == head_revisions()
    finally:
        engine.dispose()
