"""The Procfile's web process opens no gunicorn control socket (issue 36, finding 18): two
gunicorns of one user fought over ~/.gunicorn/gunicorn.ctl. The systemd unit runs the same
options (tests/cluster/test_guides_text.py)."""

from __future__ import annotations

import secrets

import pytest

from tests.support.devprocess import Processes, clean_env, free_port, wait_until
from tests.support.services import PG_URL, REDIS_URL
from tests.test_gunicorn_errors import ROOT, _answers, procfile_web_command


@pytest.mark.process
def test_the_procfile_s_web_process_opens_no_control_socket(db, redis_broker, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    env = clean_env(PORT=str(port), HOME=str(home), WEBHOOKS_DATABASE_URL=PG_URL,
                    WEBHOOKS_BROKER_URL=REDIS_URL, WEBHOOKS_DATA_DIR=str(tmp_path / "data"),
                    WEBHOOKS_SECRET_KEY=secrets.token_urlsafe(48))
    env.pop("XDG_RUNTIME_DIR", None)  # gunicorn's first choice; HOME/.gunicorn is the other
    processes = Processes(tmp_path)
    processes.start(["sh", "-c", procfile_web_command()], cwd=ROOT, env=env, name="web")
    try:
        wait_until(lambda: _answers(port), 60, "the web process to answer")
    finally:
        processes.kill_all()
    assert not (home / ".gunicorn").exists()
