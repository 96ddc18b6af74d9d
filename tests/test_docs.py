"""The README and the guides in docs/ say what this version does: the schema revisions they
name are this version's. Fast: reads files, needs no server."""

from __future__ import annotations

import re
from pathlib import Path

from alembic.script import ScriptDirectory

from webhooks.migrate import alembic_config

ROOT = Path(__file__).resolve().parent.parent


def _revisions() -> list[str]:
    """Every revision of the migrations, oldest first."""
    script = ScriptDirectory.from_config(alembic_config())
    return [revision.revision for revision in reversed(list(script.walk_revisions()))]


def test_the_readme_s_db_upgrade_examples_name_the_newest_revision():
    head = _revisions()[-1]
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    named = re.findall(r"revision (\d{4})", text)
    assert named, "the README shows what `webhooks db upgrade` prints"
    assert head in named
    assert f"the schema is already at revision {head}" in text
    assert f"created the schema at revision {head}" in text
    assert max(named) == head, f"the README names revision {max(named)}; the newest is {head}"
