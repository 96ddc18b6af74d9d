"""``webhooks dev``: web, worker and scheduler as three real processes on the embedded defaults.

The supervisor prepares the data folder, migrates the database, then starts
the three Procfile processes (gunicorn serving ``web:create_app()``,
``celery -A worker worker``, ``celery -A worker beat``) with one environment,
prefixes their output with their names, and:

- on Ctrl-C, SIGTERM or SIGHUP sends SIGTERM to each process once and waits
  for it: gunicorn finishes its requests, the Celery worker finishes the
  attempts in flight and hands the messages it holds for a countdown back to
  the broker, so a second start resumes where this one stopped. Exit status 0.
  A second Ctrl-C, or a process still running after the grace period, gets
  SIGKILL; nothing is lost even then, because the sweep recovers it.
- if one process exits on its own, stops the other two the same way and
  exits non-zero.

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
import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from .config import load_settings
from .datadir import PRIVATE_FILE_MODE, private_dir

__all__ = ["DEV_DEFAULTS", "dev_environment", "process_specs", "run"]

# Set for the three processes unless the user set them.
DEV_DEFAULTS = {
    # A receiver on localhost (``webhooks listen``) is the point of dev mode.
    "WEBHOOKS_ALLOW_PRIVATE_TARGETS": "true",
    # After a crash, the sweep re-sends deliveries whose broker message died
    # with the worker once they are this many seconds overdue (production: 120).
    "WEBHOOKS_RECOVER_AFTER": "10",
    # The web process serves plain http on this machine: a Secure cookie would
    # never come back, and nobody could stay signed in to the dashboard.
    "WEBHOOKS_SECURE_COOKIES": "false",
}
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1


def dev_environment(base: dict[str, str], *, port: int) -> dict[str, str]:
    """The environment of the three processes: ``base`` plus the dev defaults it lacks."""
    env = dict(base)
    for name, value in DEV_DEFAULTS.items():
        if not env.get(name, "").strip():
            env[name] = value
    # Every process must find the same folder, whatever its working directory.
    env["WEBHOOKS_DATA_DIR"] = str(load_settings(env).data_dir)
    env["PORT"] = str(port)
    env["PYTHONUNBUFFERED"] = "1"  # lines appear as they are written, not in 4 KiB blocks
    return env


def _gunicorn_extra() -> list[str]:
    """Newer gunicorn opens a control socket in ~/.gunicorn; two dev servers would share it."""
    try:
        from gunicorn.config import KNOWN_SETTINGS
    except ImportError:
        return []
    return ["--no-control-socket"] if any(
        "--no-control-socket" in (setting.cli or ()) for setting in KNOWN_SETTINGS
    ) else []


def process_specs(*, host: str, port: int) -> list[tuple[str, list[str]]]:
    """The Procfile's three entries as argument lists run by this Python."""
    python = sys.executable
    return [
        ("web", [python, "-m", "gunicorn", "--bind", f"{host}:{port}", "--workers", "2",
                 "--threads", "4", "--access-logfile", "-", *_gunicorn_extra(),
                 "web:create_app()"]),
        ("worker", [python, "-m", "celery", "-A", "worker", "worker", "--loglevel", "INFO",
                    "--pool", "prefork", "--concurrency", "2", "--queues", "webhooks"]),
        # beat's schedule file is under the data folder (celeryconfig.beat_schedule_filename).
        ("scheduler", [python, "-m", "celery", "-A", "worker", "beat", "--loglevel", "INFO"]),
    ]


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
        for raw in iter(child.process.stdout.readline, b""):
            self.say(raw.decode("utf-8", "replace").rstrip(), child.name)
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


def _lock_data_dir(data_dir: Path):
    """Hold an exclusive lock on the data folder for as long as this process lives."""
    handle = open(os.open(data_dir / "dev.lock", os.O_RDWR | os.O_CREAT, PRIVATE_FILE_MODE), "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def _announce_ready(supervisor: Supervisor, url: str, stop: threading.Event) -> None:
    """Print one line once the web process answers."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
    while not stop.is_set():
        try:
            with opener.open(url + "/healthz", timeout=2):
                pass
        except urllib.error.HTTPError:
            pass  # it answers; /healthz says what is unwell
        except (OSError, ValueError):
            time.sleep(0.25)
            continue
        supervisor.say(f"ready: {url} (Ctrl-C stops all three)")
        return


def run(*, host: str = "127.0.0.1", port: int = 5000) -> int:
    """``webhooks dev``: prepare, migrate, supervise; returns the exit status."""
    env = dev_environment(dict(os.environ), port=port)
    settings = load_settings(env)
    private_dir(settings.data_dir)
    lock = _lock_data_dir(settings.data_dir)
    if lock is None:
        print(f"error: webhooks dev is already running on {settings.data_dir} "
              f"(see {settings.data_dir / 'dev.lock'})", file=sys.stderr)
        return 2

    from .db import dispose_engine
    from .migrate import upgrade

    try:
        upgrade(settings.database_url)
    except Exception as exc:  # noqa: BLE001 - say what failed, without a traceback
        print(f"error: could not migrate {_redact(settings.database_url)}: {exc}", file=sys.stderr)
        lock.close()
        return 1
    finally:
        dispose_engine()  # the supervisor keeps no connection open

    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}"
    supervisor = Supervisor(
        process_specs(host=host, port=port), env, grace=settings.timeout + 15
    )
    say = supervisor.say
    say(f"data folder: {settings.data_dir}")
    say(f"database:    {_redact(settings.database_url)}")
    broker = (f"filesystem:// (no server; messages in {settings.broker_folder})"
              if settings.is_embedded_broker else _redact(settings.broker_url))
    say(f"broker:      {broker}")
    say(f"web:         {url}  (API under {url}/api/webhooks/)")
    if settings.allow_private_targets:
        origin = ("from your environment" if os.environ.get("WEBHOOKS_ALLOW_PRIVATE_TARGETS", "")
                  .strip() else "the default in webhooks dev only; elsewhere it is false")
        say(f"WEBHOOKS_ALLOW_PRIVATE_TARGETS=true ({origin}): endpoints on localhost and "
            "private networks, such as `webhooks listen`, are allowed")
    else:
        say("WEBHOOKS_ALLOW_PRIVATE_TARGETS=false (set in your environment): endpoints on "
            "localhost and private networks are refused")
    say(f"WEBHOOKS_RECOVER_AFTER={env['WEBHOOKS_RECOVER_AFTER']}: after a crash, a delivery "
        "goes out again this many seconds after it was due")

    ready_stop = threading.Event()

    def announce() -> None:
        threading.Thread(target=_announce_ready, args=(supervisor, url, ready_stop),
                         daemon=True).start()

    try:
        return supervisor.run(after_start=announce)
    finally:
        ready_stop.set()
        lock.close()


def _redact(url: str) -> str:
    """``url`` without its password, for printing."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - a broker URL may not parse as a database URL
        return url.split("@")[-1] if "@" in url else url
