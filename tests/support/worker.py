"""Real Celery worker processes (with embedded beat) for integration tests."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class ProcessGroup:
    """A process started in a process group of its own (``process``)."""

    process: subprocess.Popen | None = None

    def kill(self) -> None:
        """SIGKILL the whole group: a worker's main process, pool children and beat."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        """SIGTERM (a warm shutdown), then SIGKILL after 15 s."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


class WorkerProcess(ProcessGroup):
    """``celery -A worker worker`` (with embedded beat unless ``beat=False``) in its own
    process group, with the given environment."""

    def __init__(self, env: dict[str, str], *, concurrency: int = 2, pool: str = "prefork",
                 beat: bool = True, loglevel: str = "INFO", queues: str | None = None):
        self.env = {**os.environ, **env}
        self.queues = queues  # --queues, if given (otherwise every queue of celeryconfig)
        self.concurrency = concurrency
        self.pool = pool
        self.beat = beat
        self.loglevel = loglevel
        self.process: subprocess.Popen | None = None
        self.folder = Path(tempfile.mkdtemp(prefix="webhooks-worker-"))
        self.env.setdefault("WEBHOOKS_DATA_DIR", str(self.folder))
        self.log_path = self.folder / "worker.log"

    def start(self, timeout: float = 30.0) -> "WorkerProcess":
        self.launch()
        return self.wait_ready(timeout)

    def launch(self) -> None:
        """Start the process without waiting for it (several can then start at once)."""
        command = [
            sys.executable, "-m", "celery", "-A", "worker", "worker",
            "--pool", self.pool, "--concurrency", str(self.concurrency),
            "--loglevel", self.loglevel, "--without-gossip", "--without-mingle",
            "--hostname", f"test-{os.getpid()}-{id(self)}-{time.monotonic_ns()}@%h",
        ]
        if self.queues:
            command += ["--queues", self.queues]
        if self.beat:
            command += ["-B", "--schedule", str(self.folder / "beat-schedule")]
        log = open(self.log_path, "ab")
        self._log_offset = self.log_path.stat().st_size
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: kill() reaches every child
        )
        log.close()

    def wait_ready(self, timeout: float = 30.0) -> "WorkerProcess":
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"worker exited early:\n{self.log()}")
            if b" ready." in self.log_path.read_bytes()[self._log_offset:]:
                return self
            time.sleep(0.1)
        raise RuntimeError(f"worker did not become ready in {timeout} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-5000:]



def empty_broker() -> None:
    """The tests' Redis, checked (skip or fail as services.py says) and emptied: a real
    worker starts on a broker with no message of an earlier test."""
    import redis

    from tests.support import services

    services.check_redis()
    redis.Redis.from_url(services.REDIS_URL).flushdb()


def emit_with(monkeypatch, env: dict[str, str]) -> None:
    """Make this test process read ``env`` too (it emits with the workers' settings)."""
    from webhooks.config import reset_settings_cache

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    reset_settings_cache()


def running_worker(env: dict[str, str], **options):
    """For a fixture: a worker started with ``env`` (and WorkerProcess ``options``) on an
    emptied broker, yielded, and stopped after."""
    empty_broker()
    process = WorkerProcess(env, **options).start()
    try:
        yield process
    finally:
        process.stop()


def running_workers(env: dict[str, str], count: int = 2, **options):
    """For a fixture: ``count`` workers started at once with ``env`` (and WorkerProcess
    ``options``) on an emptied broker, the first with beat (one scheduler, as a
    deployment has), yielded as a list, and stopped after."""
    empty_broker()
    processes = [WorkerProcess(env, beat=(index == 0), **options) for index in range(count)]
    try:
        for process in processes:
            process.launch()
        for process in processes:
            process.wait_ready()
        yield processes
    finally:
        for process in processes:
            process.stop()


def threads_worker(monkeypatch, settings: dict[str, str], *, concurrency: int) -> WorkerProcess:
    """A started threads worker (with beat) on the tests' PostgreSQL and an emptied Redis,
    with ``settings`` (WEBHOOKS_* names) for it and for this process, which emits."""
    from tests.support import services

    empty_broker()
    env = {"WEBHOOKS_DATABASE_URL": services.PG_URL, "WEBHOOKS_BROKER_URL": services.REDIS_URL,
           **settings}
    emit_with(monkeypatch, env)
    return WorkerProcess(env, pool="threads", concurrency=concurrency, beat=True).start()


class BeatProcess(ProcessGroup):
    """``celery -A worker beat`` (the Procfile's scheduler) at DEBUG, so that its log shows
    each send with its task id, with its schedule file at ``schedule``."""

    # beat logs this once the message is out ("Sending due task" comes before it).
    SENT = re.compile(r"webhooks\.sweep sent\. id->([0-9a-f-]+)")

    def __init__(self, env: dict[str, str], schedule: Path, log_path: Path):
        self.env = {**os.environ, **env}
        self.env.pop("WEBHOOKS_LOG_LEVEL", None)  # --loglevel DEBUG decides
        self.schedule, self.log_path = schedule, log_path

    def start(self) -> "BeatProcess":
        """Start it without waiting: :meth:`sent` says when it has sent."""
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "worker", "beat", "--loglevel", "DEBUG",
                 "--schedule", str(self.schedule)],
                cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
        return self

    def sent(self) -> list[str]:
        """The task ids of the sweeps this beat has sent so far."""
        return self.SENT.findall(self.log_path.read_text(errors="replace"))
