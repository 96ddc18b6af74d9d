"""/healthz checks never pile up: one check per backend in flight, whatever the probes do.

A load balancer probes every few seconds; while a backend hangs, each probe used
to queue one more check behind the stuck ones. Here a hanging backend is a
local TCP socket that accepts and never answers, used as the database and the
broker URL, and a check blocked on an event stands in for one that hangs.
"""

from __future__ import annotations

import socket
import threading

import pytest

from tests.support.stack import wait_until

from tests.test_metrics_health import app  # noqa: F401 - the same app fixture

pytestmark = pytest.mark.database


class SilentServer:
    """Accepts connections and never answers (until closed)."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                connection, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(connection)

    def close(self):
        self.sock.close()
        for connection in self.accepted:
            connection.close()


def healthz_threads() -> int:
    return sum(t.name.startswith("healthz") for t in threading.enumerate())


@pytest.fixture
def silent(monkeypatch):
    from web import health
    from webhooks.config import reset_settings_cache
    from webhooks.broker.celery_app import celery_app

    server = SilentServer()
    monkeypatch.setenv("WEBHOOKS_DATABASE_URL", f"postgresql+psycopg2://postgres@127.0.0.1:{server.port}/x")
    monkeypatch.setattr(celery_app.conf, "broker_write_url", f"redis://127.0.0.1:{server.port}/0")
    reset_settings_cache()
    monkeypatch.setattr(health, "CHECK_TIMEOUT_S", 0.05)  # probes give up fast; checks go on
    yield server
    server.close()
    wait_until(lambda: health.checks_in_flight() == 0, timeout=15, what="the hung checks to end")


def test_many_probes_of_a_hanging_backend_keep_one_check_per_backend(client, silent):
    from web import health

    for _ in range(40):
        response = client.get("/healthz")
        assert response.status_code == 503
        assert response.json["failing"] == ["database", "broker"], response.json
        assert health.checks_in_flight() <= 2
        assert healthz_threads() <= 2
    later = client.get("/healthz").json
    assert later["database"].startswith("unavailable: still checking"), later


def test_a_hung_check_is_shared_and_run_once(monkeypatch):
    """20 probes while the database check hangs: it ran once, not 20 times after it woke."""
    from web import health

    calls, release = [], threading.Event()

    def hanging():
        calls.append(1)
        release.wait(10)

    monkeypatch.setitem(health.CHECKS, "database", hanging)
    monkeypatch.setitem(health.CHECKS, "broker", lambda: None)
    for _ in range(20):
        results = health.run_checks(timeout=0.01)
        assert results["broker"] == "ok" and results["database"].startswith("unavailable: ")
    release.set()
    wait_until(lambda: health.checks_in_flight() == 0, what="the check to end")
    assert len(calls) == 1


def test_probes_arriving_together_share_one_answer(monkeypatch):
    from web import health

    calls, gate = [], threading.Event()

    def slow():
        calls.append(1)
        gate.wait(10)

    monkeypatch.setitem(health.CHECKS, "database", slow)
    monkeypatch.setitem(health.CHECKS, "broker", lambda: None)
    joined, join = [], health.SingleFlight.join_or_start
    monkeypatch.setattr(health.SingleFlight, "join_or_start",
                        lambda self: joined.append(self.name) or join(self))
    answers = []
    probes = [threading.Thread(target=lambda: answers.append(health.run_checks(timeout=10)))
              for _ in range(20)]
    for probe in probes:
        probe.start()
    wait_until(lambda: joined.count("database") == 20, what="every probe to reach the check")
    gate.set()
    for probe in probes:
        probe.join(10)
    assert answers == [{"database": "ok", "broker": "ok"}] * 20 and len(calls) == 1
