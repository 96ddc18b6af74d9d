"""The web worker spreads new connections over gunicorn's workers by free threads
(web/accept_balance.py): with 2 workers of 2 threads and 4 clients connecting while the
first requests are still being served, each worker takes 2. gunicorn's own gthread worker
left it to a race (8 kept-alive clients on 2 workers of 4 threads were split 6 to 2)."""

from __future__ import annotations

import http.client
import threading
from collections import Counter
from pathlib import Path

import pytest

from tests.support.devprocess import Processes, clean_env, free_port, wait_until
from tests.support.services import PG_URL, REDIS_URL

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[1]


def _listening(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def test_each_worker_takes_as_many_connections_as_it_has_threads(tmp_path):
    port = free_port()
    env = clean_env(WEBHOOKS_DATABASE_URL=PG_URL, WEBHOOKS_BROKER_URL=REDIS_URL,
                    WEBHOOKS_DATA_DIR=str(tmp_path / "data"), XDG_RUNTIME_DIR=str(tmp_path))
    processes = Processes(tmp_path)
    processes.start(["gunicorn", "--bind", f"127.0.0.1:{port}", "--workers", "2", "--threads", "2",
                     "--worker-class", "web.server.JsonErrorWorker", "--no-control-socket",
                     "tests.support.pid_app:app"], cwd=ROOT, env=env, name="web")
    try:
        wait_until(lambda: _listening(port), 60, "gunicorn to listen")
        served = _pids(port, 4)
    finally:
        processes.kill_all()
    assert sorted(Counter(served).values()) == [2, 2], served


def _pids(port: int, clients: int) -> list[str]:
    """The pid each of ``clients`` connections, made at once, was served by."""
    answers: list[str] = []
    barrier = threading.Barrier(clients)

    def client() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        barrier.wait()
        try:
            connection.request("GET", "/")
            answers.append(connection.getresponse().read().decode())
        finally:
            connection.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers
