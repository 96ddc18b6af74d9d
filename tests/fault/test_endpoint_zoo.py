"""Every zoo endpoint (tests/support/zoo.py) through the real worker, PostgreSQL and Redis.

Each delivery gets the same fault on every attempt. Each attempt must be
recorded within WEBHOOKS_TIMEOUT + 2 s of its start with the error the
README lists; each failure counts toward the pause, and the delivery walks
the ladder to ``dead`` (three attempts here); nothing stays ``sending``.

Set WEBHOOKS_ZOO_REPORT to a file name to get the measured times as a
markdown table (docs/reliability.md shows one).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.support.stack import use_env, wait_until, worker_env
from tests.support.zoo import Certificates, url_of, zoo
from webhooks.storage.db import get_engine

from .helpers import emit_event_to

pytestmark = [pytest.mark.fault, pytest.mark.integration]

TIMEOUT_S = 2
RECORD_SLACK_S = 2  # the bound: recorded within WEBHOOKS_TIMEOUT + 2 s of the start
ATTEMPTS = 3  # RETRY_DELAYS below has two steps
SLOW_DNS = Path(__file__).resolve().parents[1] / "support" / "slowdns"


@pytest.fixture
def zoo_stack(workers, db, redis_broker, monkeypatch):
    certificates = Certificates()
    env = worker_env(TIMEOUT=str(TIMEOUT_S), RETRY_DELAYS="1,1", PAUSE_AFTER=str(ATTEMPTS),
                     CA_BUNDLE=str(certificates.ca_bundle))
    use_env(monkeypatch, env)
    # The workers' resolver hangs on the zoo's slow-DNS names (tests/support/slowdns).
    workers.use({**env, "PYTHONPATH": str(SLOW_DNS)}, pool="threads", concurrency=20)
    endpoints = zoo(certificates)
    yield endpoints
    for endpoint, _ in endpoints.values():
        endpoint.close()


def _attempts(delivery_id: str):
    """Each attempt with the seconds from its start to its record (the delivery's last update
    is the record of its last attempt, so that one is measured exactly)."""
    with get_engine().connect() as connection:
        return connection.execute(text(
            "SELECT a.number, a.status_code, a.error, a.outcome, a.duration_ms, a.response_excerpt,"
            "       a.location,"
            "       EXTRACT(EPOCH FROM d.updated_at - a.started_at) AS record_after_s,"
            "       d.status, s.consecutive_failures, s.status AS subscription_status"
            "  FROM attempts a JOIN deliveries d ON d.id = a.delivery_id"
            "  JOIN subscriptions s ON s.id = d.subscription_id"
            " WHERE a.delivery_id = :d ORDER BY a.number"), {"d": delivery_id}).all()


def test_every_zoo_endpoint_through_the_real_worker(zoo_stack):
    deliveries = {name: emit_event_to(url_of(name, endpoint))
                  for name, (endpoint, _) in zoo_stack.items()}

    def finished():
        with get_engine().connect() as connection:
            rows = connection.execute(text("SELECT status FROM deliveries")).scalars().all()
        return all(status in ("done", "failed", "dead") for status in rows)

    wait_until(finished, timeout=90, what="every zoo delivery finished")
    measured = {}
    for name, (_, expect) in zoo_stack.items():
        rows = _attempts(deliveries[name])
        last = rows[-1]
        assert last.status == expect.end, (name, last)
        assert len(rows) == (1 if expect.end == "done" else ATTEMPTS), (name, rows)
        for row in rows:
            if expect.error is None:
                assert (row.status_code, row.error) == (expect.status_code, None), (name, row)
            else:
                assert row.status_code is None and row.error.startswith(expect.error), (name, row)
            assert row.duration_ms <= (TIMEOUT_S + RECORD_SLACK_S) * 1000, (name, row)
            if expect.excerpt_has is not None:
                assert expect.excerpt_has in row.response_excerpt, (name, row.response_excerpt)
            assert row.location == expect.location, (name, row.location)
        assert float(last.record_after_s) <= TIMEOUT_S + RECORD_SLACK_S, (name, last)
        if expect.end == "dead":
            # Every failed attempt counted toward the pause: the third paused it.
            assert (last.consecutive_failures, last.subscription_status) == (ATTEMPTS, "paused"), name
        measured[name] = (last.error or f"status {last.status_code}", float(last.record_after_s))
    _write_report(measured)


def _write_report(measured: dict) -> None:
    path = os.environ.get("WEBHOOKS_ZOO_REPORT")
    if not path:
        return
    lines = ["| endpoint | error recorded | start to record (s) |", "|---|---|---:|"]
    lines += [f"| {name} | {error} | {seconds:.2f} |" for name, (error, seconds) in measured.items()]
    Path(path).write_text("\n".join(lines) + "\n")
