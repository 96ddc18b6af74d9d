"""The whole stack for fault tests: worker processes with one configuration, PostgreSQL faults.

``worker_env()`` is the environment every process of a fault test shares
(workers and the test process itself, which emits): the real PostgreSQL and
Redis of tests/support/services.py, a short ladder, a 1 s sweep and 2 s
recovery. :class:`Workers` keeps a set of real Celery worker processes
(tests/support/worker.py) running with one configuration, restarting them
only when a test asks for another one, and can SIGKILL them mid-work.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Callable

from tests.support.services import PG_ADMIN_URL, PG_TEST_DB, PG_URL, REDIS_URL
from tests.support.worker import WorkerProcess, emit_with

__all__ = ["worker_env", "Workers", "wait_until", "terminate_backends", "use_env"]

# Every fault case runs with these unless it says otherwise. The ladder's
# first step is long enough to SIGKILL a worker, or flush the broker, while
# it holds countdown retries; the later steps keep retries quick.
BASE_ENV = {
    "WEBHOOKS_DATABASE_URL": PG_URL,
    "WEBHOOKS_BROKER_URL": REDIS_URL,
    "WEBHOOKS_RETRY_DELAYS": "4,1,1",
    "WEBHOOKS_SWEEP_INTERVAL": "1",
    "WEBHOOKS_RECOVER_AFTER": "2",
    "WEBHOOKS_TIMEOUT": "2",
    "WEBHOOKS_ALLOW_PRIVATE_TARGETS": "true",  # the receiver is on 127.0.0.1
    "WEBHOOKS_PAUSE_AFTER": "1000",
}


def worker_env(**overrides: str) -> dict[str, str]:
    """BASE_ENV with ``overrides`` (names without the WEBHOOKS_ prefix, e.g. TIMEOUT="3")."""
    env = dict(BASE_ENV)
    env.update({f"WEBHOOKS_{name}": str(value) for name, value in overrides.items()})
    return env


use_env = emit_with  # tests/support/worker.py: this process reads the workers' settings too


def wait_until(condition: Callable, timeout: float = 30.0, interval: float = 0.1, what: str = "it"):
    """Poll ``condition`` until it returns something truthy; fail the test after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


class Workers:
    """``count`` worker processes (with embedded beat in the first) sharing one environment."""

    def __init__(self):
        self.processes: list[WorkerProcess] = []
        self.env: dict[str, str] | None = None
        self.shape: tuple | None = None
        self.starts = 0

    def use(self, env: dict[str, str], *, count: int = 1, concurrency: int = 4,
            pool: str = "prefork", loglevel: str = "INFO") -> "Workers":
        """Have exactly these workers running; restart only if the configuration changed."""
        shape = (tuple(sorted(env.items())), count, concurrency, pool, loglevel)
        if shape == self.shape and self.running():
            return self
        self.stop()
        self.env, self.shape = dict(env), shape
        self.processes = [
            WorkerProcess(env, concurrency=concurrency, pool=pool, beat=(index == 0), loglevel=loglevel)
            for index in range(count)
        ]
        self.start()
        return self

    def running(self) -> bool:
        return bool(self.processes) and all(p.process and p.process.poll() is None for p in self.processes)

    def start(self) -> None:
        """Start every worker that is not running, all at once, and wait until each is ready."""
        starting = [p for p in self.processes if not (p.process and p.process.poll() is None)]
        for process in starting:
            process.launch()
            self.starts += 1
        for process in starting:
            process.wait_ready()

    def kill(self) -> None:
        """SIGKILL every worker process group (main process, pool children, beat)."""
        for process in self.processes:
            process.kill()

    def stop(self) -> None:
        """SIGTERM to all at once: a warm shutdown, which hands held countdowns back to the broker."""
        live = [p for p in self.processes if p.process and p.process.poll() is None]
        for process in live:
            os.killpg(process.process.pid, signal.SIGTERM)
        for process in live:
            try:
                process.process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()

    def logs(self) -> str:
        return "\n".join(p.log_path.read_text(errors="replace") for p in self.processes)

    def log_paths(self):
        return [p.log_path for p in self.processes]


_admin_engine = None


def _admin():
    global _admin_engine
    if _admin_engine is None:
        import sqlalchemy

        _admin_engine = sqlalchemy.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    return _admin_engine


def terminate_backends() -> int:
    """``pg_terminate_backend`` every connection to the test database; returns how many."""
    with _admin().connect() as connection:
        return len(connection.exec_driver_sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{PG_TEST_DB}' AND pid <> pg_backend_pid()"
        ).all())
