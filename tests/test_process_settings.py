"""Every process stops on a database URL it cannot use with one ``error:`` line naming what is
supported, never a traceback (issue 36, item 12): the CLI, the web process (gunicorn with the
Procfile's worker class), the Celery worker and beat, and ``emit_event`` in the caller's
process. And a bare ``postgresql://`` URL works: it used to die on ``import psycopg``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.devprocess import ROOT, clean_env, free_port
from tests.support.services import PG_URL
from webhooks.cli.devserver import process_specs

pytestmark = pytest.mark.process

UNSUPPORTED = "mysql://app:s3cret@db.internal/webhooks"
SUPPORTED = "must be a PostgreSQL URL (postgresql://, postgres:// or postgresql+psycopg2://"


def _specs(port: int) -> dict[str, list[str]]:
    """The Procfile's three processes as `webhooks dev` runs them (web: the Procfile's worker
    class), at INFO, the Procfile's level (at DEBUG gunicorn adds the traceback on purpose)."""
    return dict(process_specs(host="127.0.0.1", port=port, log_level="INFO"))


def _cli() -> list[str]:
    return [sys.executable, "-m", "webhooks.cli", "accounts", "create", "Acme"]


@pytest.mark.parametrize("name", ["cli", "web", "worker", "scheduler"])
def test_each_process_refuses_an_unsupported_database_url_in_one_line(name, tmp_path):
    argv = _cli() if name == "cli" else _specs(free_port())[name]
    env = clean_env(WEBHOOKS_DATABASE_URL=UNSUPPORTED, WEBHOOKS_DATA_DIR=str(tmp_path / "data"))
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error: ")]
    assert len(errors) >= 1 and all(SUPPORTED in line for line in errors), output
    assert "got a mysql:// URL" in errors[0] and "s3cret" not in output


def test_emit_event_refuses_it_with_the_same_message(monkeypatch):
    from webhooks import emit_event
    from webhooks.config import reset_settings_cache
    from webhooks.errors import ConfigError

    monkeypatch.setenv("WEBHOOKS_DATABASE_URL", UNSUPPORTED)
    reset_settings_cache()
    with pytest.raises(ConfigError) as error:
        emit_event("00000000-0000-4000-8000-000000000000", "email.sent", {})
    assert SUPPORTED in str(error.value) and "s3cret" not in str(error.value)


def test_a_bare_postgresql_url_works_from_the_command_line(postgres, tmp_path):
    """The README's table calls WEBHOOKS_READ_DATABASE_URL "a postgresql:// URL"; with it the
    process crashed on `import psycopg` (psycopg 3, which is not installed)."""
    plain = PG_URL.replace("postgresql+psycopg2://", "postgresql://")
    for url in (plain, plain.replace("postgresql://", "postgres://")):
        env = clean_env(WEBHOOKS_DATABASE_URL=url, WEBHOOKS_READ_DATABASE_URL=plain,
                        WEBHOOKS_DATA_DIR=str(tmp_path / "data"))
        done = subprocess.run(_cli(), cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["api_key"].startswith("whk_")
