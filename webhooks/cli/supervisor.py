"""Run child processes as one: their output prefixed with their names, stopped together.

Why not honcho's Manager (a well-kept Procfile runner): it sends SIGTERM to
each whole process group, which kills Celery's prefork children in the middle
of an attempt instead of letting the worker finish it; it escalates to
SIGKILL after a fixed 5 s, shorter than one attempt may take
(WEBHOOKS_TIMEOUT); it exits 130/143 after Ctrl-C; and it cannot tie the
children's lifetime to its own. The small supervisor below does exactly what
``webhooks dev`` needs instead.

Each child runs in its own session (process group), like under honcho or
foreman, so a Ctrl-C in the terminal reaches only the supervisor, which then
stops each child once, in order. On Linux each child also gets SIGTERM if the
supervisor itself dies (``PR_SET_PDEATHSIG``), so no orphan keeps the port.
"""

from __future__ import annotations

import ctypes
import datetime as dt
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import IO

__all__ = ["Supervisor"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1


def _die_with_parent_hook():
    """A preexec_fn that makes the child get SIGTERM when the supervisor dies (Linux), or None.

    Everything is looked up here, in the parent; the child only makes the call.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the supervisor died before the call above
            os._exit(1)

    return hook


@dataclass
class _Child:
    name: str
    argv: list[str]
    process: subprocess.Popen | None = None
    reader: threading.Thread | None = field(default=None, repr=False)

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, signum: int, *, group: bool = False) -> None:
        try:
            if group:
                os.killpg(self.process.pid, signum)
            elif self.running():
                self.process.send_signal(signum)
        except (ProcessLookupError, PermissionError):
            pass


class Supervisor:
    """Start, watch and stop the three processes; see the module docstring."""

    def __init__(self, specs, env: dict[str, str], *, grace: float, out: IO[str] | None = None):
        self.children = [_Child(name, argv) for name, argv in specs]
        self.env = env
        self.grace = grace
        self.out = out or sys.stdout
        self._width = max(len(c.name) for c in self.children)
        self._lock = threading.Lock()
        self._stop_requested = threading.Event()
        self._signals = 0
        self._colour = getattr(self.out, "isatty", lambda: False)()

    def say(self, text: str, name: str = "dev") -> None:
        stamp = dt.datetime.now().strftime("%H:%M:%S")
        prefix = f"{stamp} {name:<{self._width}} |"
        if self._colour:
            colours = {"web": "\033[36m", "worker": "\033[33m", "scheduler": "\033[35m"}
            prefix = f"{colours.get(name, chr(27) + '[1m')}{prefix}\033[0m"
        with self._lock:
            self.out.write(f"{prefix} {text}\n")
            self.out.flush()

    def _pump(self, child: _Child) -> None:
        """Print each line ``child`` writes, prefixed with its name; blank lines are dropped:
        alone behind a prefix they say nothing (Celery writes one before each shutdown
        message, which showed as a bare ``worker |`` line)."""
        for raw in iter(child.process.stdout.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip()
            if line.strip():
                self.say(line, child.name)
        child.process.stdout.close()

    def _on_signal(self, signum, _frame) -> None:
        self._signals += 1
        if self._signals == 1:
            self._stop_requested.set()
        else:  # a second Ctrl-C: do not wait any longer
            for child in self.children:
                if child.process is not None:
                    child.signal(signal.SIGKILL, group=True)

    def start(self) -> None:
        # All three are forked before any reader thread exists (preexec_fn and threads do not mix).
        hook = _die_with_parent_hook()
        for child in self.children:
            child.process = subprocess.Popen(
                child.argv,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=hook,
            )
        for child in self.children:
            self.say(f"{child.name} started (pid {child.pid}): {' '.join(child.argv[1:])}")
            child.reader = threading.Thread(target=self._pump, args=(child,), daemon=True)
            child.reader.start()

    def run(self, after_start=None) -> int:
        """Start the three, wait for a stop request or a death, stop them all; the exit status.

        ``after_start`` (no arguments) is called once the three have been started.
        """
        previous = {s: signal.signal(s, self._on_signal) for s in _SIGNALS}
        try:
            self.start()
            if after_start is not None:
                after_start()
            failed = None
            while not self._stop_requested.wait(0.2):
                failed = next((c for c in self.children if not c.running()), None)
                if failed is not None:
                    break
            if failed is not None:
                code = failed.process.returncode
                self.say(f"{failed.name} exited unexpectedly (status {code}); stopping the others")
            else:
                self.say("stopping web, worker and scheduler (Ctrl-C again to kill them)")
            self.stop()
            if failed is None:
                self.say("stopped")
                return 0
            return code if code and code > 0 else 1
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

    def stop(self) -> None:
        """SIGTERM each process once (its own shutdown stops its children); SIGKILL after grace."""
        for child in self.children:
            child.signal(signal.SIGTERM)
        deadline = time.monotonic() + self.grace
        while any(c.running() for c in self.children) and time.monotonic() < deadline:
            time.sleep(0.1)
        for child in self.children:
            if child.running():
                self.say(f"{child.name} still running after {self.grace:.0f} s; killing it")
            # Also reaches a straggler (a pool child) whose parent has already gone.
            child.signal(signal.SIGKILL, group=True)
            child.process.wait()
        for child in self.children:
            child.reader.join(timeout=2)
