"""The README and the guides in docs/ say what this version does: the schema revisions they
name are this version's. Fast: reads files, needs no server."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory

from webhooks.storage.migrate import alembic_config
from webhooks.tenants.options import OPTIONS

ROOT = Path(__file__).resolve().parent.parent


def _revisions() -> list[str]:
    """Every revision of the migrations, oldest first."""
    script = ScriptDirectory.from_config(alembic_config())
    return [revision.revision for revision in reversed(list(script.walk_revisions()))]


def test_the_readme_names_no_revision_so_a_migration_leaves_it_alone():
    """The README shows `webhooks db upgrade`'s answers with N for the revision and sends the
    reader to docs/upgrade.md, the one file that names each migration (below)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert re.findall(r"revision (\d{4})", text) == [], "docs/upgrade.md names the revisions"
    assert "[docs/upgrade.md](docs/upgrade.md)" in text
    said = (ROOT / "webhooks" / "cli" / "commands.py").read_text(encoding="utf-8")
    flowing = " ".join(text.split())
    for answer in ("created the schema at revision {after}",
                   "upgraded the schema from revision {before} to {after}",
                   "the schema is already at revision {after}, the newest this version knows"):
        assert answer in said, "the README quotes what `webhooks db upgrade` prints"
        assert answer.format(before="M", after="N") in flowing, answer


@pytest.mark.process
def test_the_api_reference_builds_without_a_warning(tmp_path):
    """What `make docs` runs: Sphinx autodoc over the docstrings, warnings as errors."""
    pytest.importorskip("sphinx", reason="the docs extra (pip install -e '.[docs]') is missing")
    built = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-E", "-q", "-b", "html",
         str(ROOT / "docs" / "reference"), str(tmp_path / "html")],
        capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert built.returncode == 0, built.stderr
    emitting = (tmp_path / "html" / "emitting.html").read_text(encoding="utf-8")
    assert "emit_event" in emitting and "scoped_session" in emitting
    assert "verify" in (tmp_path / "html" / "receiving.html").read_text(encoding="utf-8")
    options = (tmp_path / "html" / "options.html").read_text(encoding="utf-8")
    terms = re.findall(r'<dt><code[^>]*><span class="pre">(\w+)</span>', options)
    assert terms == [option.name for option in OPTIONS], "one term per option, from OPTIONS"


def test_the_upgrade_guide_says_of_every_revision_whether_it_is_safe_during_a_rolling_deploy():
    text = (ROOT / "docs" / "upgrade.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| (\d{4}) \| (.+)$", text, re.MULTILINE))
    assert list(rows) == _revisions(), "one row per migration, in order, in docs/upgrade.md"
    assert all(cells.count("|") >= 4 for cells in rows.values()), "every column of each row"


def test_the_guides_link_to_files_that_exist():
    for guide in ("deploy.md", "upgrade.md", "integrate.md"):
        text = (ROOT / "docs" / guide).read_text(encoding="utf-8")
        for path in re.findall(r"`(deploy/[\w@./-]+)`", text):
            assert (ROOT / path).exists() or list(ROOT.glob(path)), (guide, path)
        for link in re.findall(r"\]\(([\w./-]+\.md)\)", text):
            assert (ROOT / "docs" / link).exists(), (guide, link)


def test_the_alert_rules_parse_and_name_only_metrics_that_metrics_exposes():
    yaml = pytest.importorskip("yaml")
    rules = (ROOT / "deploy" / "prometheus" / "webhooks.rules.yml").read_text(encoding="utf-8")
    groups = yaml.safe_load(rules)["groups"]
    assert all(rule["alert"] and rule["expr"] for group in groups for rule in group["rules"])
    exposed = (ROOT / "web" / "metrics.py").read_text(encoding="utf-8")
    named = {re.sub(r"_(bucket|count|sum)$", "", name)
             for name in re.findall(r"\b(webhooks_[a-z_]+)", rules)}
    assert named and all(f"``{name}" in exposed for name in named), named
