"""docs/integrate.md's Node program, run as written with Debian's ``node`` (no package),
against a served web app and a real worker on PostgreSQL and Redis: it creates an account
through the publisher API, subscribes a receiver of its own with the account's API key,
emits 1,000 events over HTTP, and checks the signature of every delivery (issue 38).

Skips locally when ``/usr/bin/node`` is missing (``scripts/install-node.sh``); fails when
CI is set.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import func, select

from tests.support import services
from tests.support.live_app import serving_app
from tests.support.worker import emit_with, running_worker
from tests.test_pipeline import WORKER_ENV
from webhooks.services import publishers
from webhooks.storage.db import session_scope
from webhooks.storage.models import Delivery, Event

pytestmark = [pytest.mark.integration, pytest.mark.process]

DOC = Path(__file__).resolve().parents[1] / "docs" / "integrate.md"
NODE = "/usr/bin/node"
EVENTS = 1000


def node_program() -> str:
    """The ```js block under "### Node (no package)" in integrate.md."""
    section = DOC.read_text(encoding="utf-8").split("\n### Node (no package)\n", 1)[1]
    start = section.index("```js\n") + len("```js\n")
    return section[start:section.index("\n```", start)] + "\n"


@pytest.fixture(scope="module")
def worker(postgres):
    yield from running_worker(WORKER_ENV)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_node_program_emits_1000_events_and_every_delivery_arrives_signed(
        worker, db, monkeypatch, tmp_path):
    if not Path(NODE).exists():
        services.unavailable("node (scripts/install-node.sh)", FileNotFoundError(NODE))
    emit_with(monkeypatch, WORKER_ENV)  # the served app: this database, broker, private targets
    with session_scope() as session:
        _, key = publishers.create(session, "node example")
    program = tmp_path / "emit.js"
    program.write_text(node_program(), encoding="utf-8")
    port = _free_port()
    with serving_app() as url:
        done = subprocess.run(
            [NODE, str(program)], capture_output=True, text=True, timeout=600,
            env={**os.environ, "WEBHOOKS_URL": url, "PUBLISHER_KEY": key, "EVENTS": str(EVENTS),
                 "RECEIVER_URL": f"http://127.0.0.1:{port}/webhooks",
                 "RECEIVER_PORT": str(port)})
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["emitted"] == summary["delivered"] == EVENTS
    assert summary["bad"] == 0
    with session_scope() as session:
        events = session.scalar(select(func.count()).select_from(Event)
                                .where(Event.account_id == summary["account_id"]))
        statuses = dict(session.execute(
            select(Delivery.status, func.count()).where(
                Delivery.account_id == summary["account_id"]).group_by(Delivery.status)).all())
    assert events == EVENTS
    assert statuses == {"done": EVENTS}
