"""The cluster's processes: each started inside its host's namespace, in a process group of
its own, with its output in a log file of the run; every one is stopped at teardown."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .net import Host

__all__ = ["Process", "Processes"]


@dataclass
class Process:
    name: str
    host: Host
    popen: subprocess.Popen
    log: Path

    def alive(self) -> bool:
        return self.popen.poll() is None

    def signal(self, number: int) -> None:
        """Send ``number`` to the whole process group (a gunicorn or celery master and its
        children, like a machine that loses power when it is SIGKILL)."""
        try:
            os.killpg(self.popen.pid, number)
        except ProcessLookupError:
            pass


    def signal_tree(self, number: int) -> None:
        """Send ``number`` to the process and every descendant, whatever their group:
        PostgreSQL's backends are session leaders of their own, so SIGSTOP to the
        group would stop the postmaster alone while the backends went on answering."""
        for pid in [self.popen.pid, *_descendants(self.popen.pid)]:
            try:
                os.kill(pid, number)
            except ProcessLookupError:
                pass


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid``, from /proc (children before their own children)."""
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        children = []
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
        found += children
        frontier += children
    return found


class Processes:
    """Every process of one run, by name."""

    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.running: dict[str, Process] = {}

    def start(self, name: str, host: Host, argv: list[str], *, env: dict[str, str],
              cwd: str | Path | None = None, user: str | None = None,
              hostname: str | None = None) -> Process:
        """Start ``argv`` on ``host``: as ``user`` (runuser) if given, and in a UTS namespace
        of its own named ``hostname`` if given (Celery names its nodes after the host)."""
        command = list(argv)
        if user:
            command = ["runuser", "-u", user, "--", *command]
        if hostname:
            command = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', hostname,
                       *command]
        log = self.log_dir / f"{name}.log"
        with open(log, "ab") as out:
            popen = subprocess.Popen(host.command(*command), stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env, cwd=cwd,
                                     start_new_session=True)
        process = Process(name, host, popen, log)
        self.running[name] = process
        return process

    def kill(self, name: str) -> None:
        """SIGKILL ``name``'s whole process group, at once (a host that dies)."""
        process = self.running[name]
        process.signal(signal.SIGKILL)
        process.popen.wait(timeout=30)

    def stop(self, name: str, grace: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds."""
        process = self.running.get(name)
        if process is None:
            return
        process.signal(signal.SIGTERM)
        try:
            process.popen.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.signal(signal.SIGKILL)
            process.popen.wait(timeout=30)
        process.signal(signal.SIGKILL)  # children that outlived their parent

    def stop_all(self, grace: float = 5.0) -> None:
        """Stop every process: SIGTERM to all, then SIGKILL to what is left after ``grace``."""
        for process in self.running.values():
            process.signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for process in self.running.values():
            try:
                process.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for process in self.running.values():
            process.signal(signal.SIGKILL)
            try:
                process.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
