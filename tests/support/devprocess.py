"""Start and watch `webhooks dev` and other service processes from tests."""


from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable


ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
WEBHOOKS = str(BIN / "webhooks")
STARTED = re.compile(r"\| (web|worker|scheduler) started \(pid (\d+)\)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def clean_env(**extra: str) -> dict[str, str]:
    """The test process's environment without any WEBHOOKS_* or PORT, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEBHOOKS_") and k != "PORT"}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Running:
    """A command in its own session; its output is collected line by line (and logged)."""

    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str], log: Path):
        self.argv = argv
        self.log = log
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self.process = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        with open(self.log, "a", encoding="utf-8") as log:
            for raw in iter(self.process.stdout.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip("\n")
                log.write(line + "\n")
                log.flush()
                with self._lock:
                    self.lines.append(line)

    def output(self, start: int = 0) -> str:
        with self._lock:
            return "\n".join(self.lines[start:])

    def mark(self) -> int:
        """A position in the output; wait_for(after=mark) looks only at what came later."""
        with self._lock:
            return len(self.lines)

    def tail(self, count: int = 60) -> str:
        with self._lock:
            return "\n".join(self.lines[-count:])

    def wait_for(self, pattern: str, timeout: float, *, after: int = 0) -> re.Match:
        """The first match of ``pattern`` in one output line; fails the test after ``timeout`` s."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                lines = self.lines[after:]
            for line in lines:
                match = regex.search(line)
                if match:
                    return match
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"no line matching {pattern!r} within {timeout} s from {self.argv[:3]}; "
                    f"last output:\n{self.tail()}"
                )
            if self.process.poll() is not None:
                self._reader.join(2)
                if not any(regex.search(line) for line in self.lines[after:]):
                    raise AssertionError(
                        f"{self.argv[:3]} exited ({self.process.returncode}) before printing "
                        f"{pattern!r}; last output:\n{self.tail()}"
                    )
            time.sleep(0.05)

    def children(self) -> dict[str, int]:
        """For ``webhooks dev``: the pid (= process group) of web, worker and scheduler."""
        with self._lock:
            return {m.group(1): int(m.group(2)) for line in self.lines if (m := STARTED.search(line))}

    def groups(self) -> list[int]:
        return [*self.children().values(), self.process.pid]

    def kill(self) -> None:
        """SIGKILL every process group it started (children first), then its own; reap it."""
        for pgid in self.groups():
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.process.wait(30)
        self._reader.join(5)

    def interrupt(self, timeout: float = 60) -> int:
        """Ctrl-C: SIGINT to its process group, as a terminal does; its exit status."""
        try:
            os.killpg(self.process.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
        code = self.process.wait(timeout)
        self._reader.join(5)
        return code

    def terminate(self, timeout: float = 15) -> int:
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout)
        self._reader.join(5)
        return code


class Processes:
    """Starts the processes of one test and kills every one of them when it ends."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.started: list[Running] = []

    def start(self, argv: list[str], *, cwd: Path, env: dict[str, str], name: str) -> Running:
        log = self.folder / f"{len(self.started):02d}-{name}.log"
        running = Running(argv, cwd=cwd, env=env, log=log)
        self.started.append(running)
        return running

    def dev(self, cwd: Path, env: dict[str, str], port: int, timeout: float = 90) -> Running:
        """``webhooks dev --port port``, once it is ready."""
        dev = self.start([WEBHOOKS, "dev", "--port", str(port)], cwd=cwd, env=env, name="dev")
        dev.wait_for(rf"ready: http://127\.0\.0\.1:{port}\b", timeout)
        dev.wait_for(r"celery@\S+ ready\.", timeout)  # the worker takes messages from now on
        return dev

    def listen(self, cwd: Path, env: dict[str, str], port: int, secret: str, *extra: str) -> Running:
        """``webhooks listen``, once it is ready."""
        listener = self.start(
            [WEBHOOKS, "listen", "--port", str(port), "--secret", secret, *extra],
            cwd=cwd, env=env, name="listen",
        )
        listener.wait_for(r"webhooks listen: ready on", 30)
        return listener

    def kill_all(self) -> None:
        for running in reversed(self.started):
            try:
                running.kill()
            except Exception:  # noqa: BLE001 - keep killing the others
                pass


def wait_until(check: Callable[[], object], timeout: float, what: str, interval: float = 0.1):
    """Call ``check`` until it returns something true; return that, or fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
