"""Processes the harness starts: the receiver, Celery workers, beat.

Each runs in its own session (process group), so stopping it reaches every
child (prefork pool processes, threads are inside). The :class:`Registry`
remembers everything started and stops it all on exit, on error and on
Ctrl-C (the CLI wraps the run in ``with Registry() as registry``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["ManagedProcess", "Registry", "start_worker", "start_beat", "memory_of_group", "ROOT"]

ROOT = Path(__file__).resolve().parents[1]
READY_MARK = b" ready."
BEAT_MARK = b"beat: Starting"


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM if the harness dies without cleaning up (Linux)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class ManagedProcess:
    """One started process group with its log file."""

    def __init__(self, name: str, popen: subprocess.Popen, log_path: Path, log_offset: int = 0):
        self.name = name
        self.popen = popen
        self.log_path = log_path
        self.log_offset = log_offset  # where this process's part of a shared log file begins

    @classmethod
    def spawn(cls, name: str, argv: list[str], *, env: dict, log_path: Path,
              stdout=None) -> "ManagedProcess":
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            offset = log.tell()
            popen = subprocess.Popen(
                argv, cwd=ROOT, env=env,
                stdout=stdout if stdout is not None else log,
                stderr=log if stdout is not None else subprocess.STDOUT,
                start_new_session=True,  # its own group: stop() reaches every child
                preexec_fn=_die_with_parent,
            )
        return cls(name, popen, log_path, offset)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, size: int = 4000) -> str:
        try:
            return self.log_path.read_bytes()[self.log_offset:][-size:].decode(errors="replace")
        except OSError:
            return ""

    def wait_for_log(self, mark: bytes, timeout: float) -> None:
        """Wait until ``mark`` appears in the log; raise with the log's tail if it does not."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"{self.name} exited early:\n{self.log_tail()}")
            try:
                with open(self.log_path, "rb") as log:
                    log.seek(self.log_offset)
                    if mark in log.read():
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} not ready in {timeout} s:\n{self.log_tail()}")

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the group, SIGKILL it after ``grace`` seconds; ``grace=0`` kills at once."""
        if self.popen.poll() is None:
            self._signal(signal.SIGTERM if grace > 0 else signal.SIGKILL)
            try:
                self.popen.wait(grace if grace > 0 else 10)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.popen.wait(10)
        self._signal(signal.SIGKILL)  # stragglers in the group (an orphaned pool child)
        if self.popen.stdout is not None:
            self.popen.stdout.close()

    def _signal(self, signum: int) -> None:
        try:
            os.killpg(self.popen.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


class Registry:
    """Every process the harness started; ``stop_all`` (and leaving the ``with``) stops them."""

    def __init__(self):
        self.processes: list[ManagedProcess] = []

    def add(self, process: ManagedProcess) -> ManagedProcess:
        self.processes.append(process)
        return process

    def stop(self, process: ManagedProcess, grace: float = 10.0) -> None:
        process.stop(grace)
        if process in self.processes:
            self.processes.remove(process)

    def stop_all(self, grace: float = 5.0) -> None:
        while self.processes:
            self.processes.pop().stop(grace)

    def __enter__(self) -> "Registry":
        # SIGTERM (and SIGHUP) become SystemExit so the ``with`` block unwinds.
        def _exit(signum, _frame):
            raise SystemExit(128 + signum)

        self._previous = {s: signal.signal(s, _exit) for s in (signal.SIGTERM, signal.SIGHUP)}
        return self

    def __exit__(self, *exc) -> None:
        # A second Ctrl-C while stopping must not leave processes behind.
        previous_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            self.stop_all()
        finally:
            signal.signal(signal.SIGINT, previous_int)
            for signum, handler in self._previous.items():
                signal.signal(signum, handler)


def start_worker(registry: Registry, *, name: str, env: dict, log_dir: Path, app: str = "worker",
                 pool: str = "prefork", concurrency: int = 2,
                 queues: str = "webhooks,webhooks.maintenance",
                 loglevel: str = "INFO", wait: bool = True, timeout: float = 60.0,
                 python: str = sys.executable) -> ManagedProcess:
    """``celery -A <app> worker`` with this pool and concurrency; returns once it is ready.

    ``python`` is the interpreter (another virtualenv's, for django-webhook2).
    """
    argv = [
        python, "-m", "celery", "-A", app, "worker",
        "--pool", pool, "--concurrency", str(concurrency), "--queues", queues,
        "--loglevel", loglevel, "--without-gossip", "--without-mingle",
        "--hostname", f"bench-{name}-{os.getpid()}-{time.monotonic_ns()}@%h",
    ]
    process = registry.add(ManagedProcess.spawn(
        name, argv, env=env, log_path=log_dir / f"{name}.log"))
    if wait:
        process.wait_for_log(READY_MARK, timeout)
    return process


def start_beat(registry: Registry, *, env: dict, log_dir: Path, loglevel: str = "INFO",
               wait: bool = True, timeout: float = 60.0) -> ManagedProcess:
    """``celery -A worker beat`` (the Procfile's scheduler), its schedule file in ``log_dir``."""
    argv = [sys.executable, "-m", "celery", "-A", "worker", "beat", "--loglevel", loglevel,
            "--schedule", str(log_dir / f"beat-schedule-{time.monotonic_ns()}")]
    process = registry.add(ManagedProcess.spawn(
        "beat", argv, env=env, log_path=log_dir / "beat.log"))
    if wait:
        process.wait_for_log(BEAT_MARK, timeout)
    return process


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
            if int(fields[2]) == pgid:  # field 5 of stat: the process group
                members.append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    return members


def _kib(path: str, key: str) -> int:
    try:
        with open(path) as handle:
            for line in handle:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def memory_of_group(process: ManagedProcess) -> dict:
    """Memory of a process and its children, in MB.

    ``rss_mb`` adds up every member's resident set (pages a prefork child
    shares with its parent count twice); ``pss_mb`` shares them out
    (proportional set size) and is the fairer total; ``max_rss_mb`` is the
    largest single process (the one holding countdown messages).
    """
    members = _group_members(process.pid)
    rss = [_kib(f"/proc/{pid}/status", "VmRSS:") for pid in members]
    pss = [_kib(f"/proc/{pid}/smaps_rollup", "Pss:") for pid in members]
    return {
        "processes": len(members),
        "rss_mb": round(sum(rss) / 1024, 1),
        "pss_mb": round(sum(pss) / 1024, 1),
        "max_rss_mb": round(max(rss, default=0) / 1024, 1),
    }
