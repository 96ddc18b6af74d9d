"""What a `webhooks` command imports: what it needs, not more, so that each starts quickly (users
and this suite run many). The guard counts the modules a command leaves imported, never time:
Alembic (with mako and pygments) only for a `db upgrade` that has something to do, not for
the schema check every other command runs first; nothing of the database for `--help`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.test_cli import folder, upgraded_data  # noqa: F401 (fixtures: an upgraded data folder)
from webhooks.events.samples import sample_data

pytestmark = pytest.mark.process

# Runs the command as the console script does, then writes the top-level packages it imported.
PROBE = """
import json, os, sys
from webhooks.cli import main
sys.argv[0] = "webhooks"
try:
    main()
finally:
    with open(os.environ["IMPORTED_PACKAGES_FILE"], "w") as out:
        json.dump(sorted({name.split(".")[0] for name in sys.modules}), out)
"""

ALEMBIC = {"alembic", "mako", "pygments"}  # mako and pygments come with alembic's templates


def imported_by(*args, cwd) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run ``webhooks *args`` in ``cwd``; its result, and the top-level packages it imported."""
    packages_file = cwd / "imported.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEBHOOKS_")}
    env["IMPORTED_PACKAGES_FILE"] = str(packages_file)
    result = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=60)
    return result, set(json.loads(packages_file.read_text()))


def test_creating_the_schema_imports_alembic(tmp_path):
    """Creating the schema is Alembic's work: the probe sees a package a command imports."""
    result, packages = imported_by("db", "upgrade", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert ALEMBIC <= packages


def test_help_imports_nothing_of_the_database(tmp_path):
    result, packages = imported_by("--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert packages & (ALEMBIC | {"sqlalchemy", "opentelemetry", "celery"}) == set()


def test_the_schema_check_before_a_command_needs_no_alembic(folder):
    result, packages = imported_by("accounts", "create", "Acme", cwd=folder)
    assert result.returncode == 0, result.stderr
    assert packages & ALEMBIC == set()

    data = json.dumps(sample_data("email.sent"))
    account_id = json.loads(result.stdout)["id"]
    result, packages = imported_by("emit", account_id, "email.sent", "--data", data, cwd=folder)
    assert result.returncode == 0, result.stderr
    assert packages & ALEMBIC == set()


def test_upgrading_a_database_already_at_the_head_needs_no_alembic(folder):
    result, packages = imported_by("db", "upgrade", cwd=folder)
    assert result.returncode == 0, result.stderr
    assert "the schema is already at revision" in result.stdout
    assert packages & ALEMBIC == set()


def test_a_schema_the_check_refuses_still_needs_no_alembic(tmp_path):
    (tmp_path / "webhooks-data").mkdir()
    result, packages = imported_by("accounts", "list", cwd=tmp_path)
    assert result.returncode == 2 and "run `webhooks db upgrade` first" in result.stderr
    assert packages & ALEMBIC == set()


def test_listing_publishers_imports_neither_the_rate_limit_storage_nor_tracing(folder):
    result, packages = imported_by("publishers", "list", cwd=folder)
    assert result.returncode == 0, result.stderr
    assert packages & (ALEMBIC | {"limits", "opentelemetry"}) == set()
