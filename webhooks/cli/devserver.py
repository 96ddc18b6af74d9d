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

The supervisor (supervisor.py) runs them; why it is not honcho's is said there.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from webhooks.cli.supervisor import Supervisor
from webhooks.config import load_settings
from webhooks.config.datadir import PRIVATE_FILE_MODE, private_dir

__all__ = ["DEV_DEFAULTS", "dev_environment", "process_specs", "quiet_warnings", "run"]

# The Procfile's gunicorn worker: its own error answers (414, 431, 400) are JSON (web/server.py).
WEB_WORKER_CLASS = "web.server.JsonErrorWorker"

# The dev worker's processes (prefork): attempts it can make at once.
DEV_WORKER_CONCURRENCY = 2

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
    # The production default (20 per account) is above the dev worker's 2 processes: one
    # account's two hanging test pings would hold every process. One less than the
    # processes leaves one for every other account.
    "WEBHOOKS_ACCOUNT_MAX_IN_FLIGHT": str(max(1, DEV_WORKER_CONCURRENCY - 1)),
}


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


# Celery's warning when the worker runs as root: eight lines at every start
# (in containers, often). `webhooks dev` says it in one line instead (run()).
ROOT_WARNING = "You're running the worker with superuser privileges"


def quiet_warnings(env: dict[str, str]) -> str:
    """``env``'s PYTHONWARNINGS plus a filter that hides Celery's root SecurityWarning."""
    return ",".join(filter(None, [env.get("PYTHONWARNINGS", ""), f"ignore:{ROOT_WARNING}"]))


def process_specs(*, host: str, port: int, log_level: str = "INFO") -> list[tuple[str, list[str]]]:
    """The Procfile's three entries as argument lists run by this Python.

    Below DEBUG (``log_level`` is WEBHOOKS_LOG_LEVEL) they print only what a
    person needs: no Celery banners (``--quiet``), no gunicorn start-up lines
    (its ``--log-level warning``; run() prints the URL and "ready"), and the
    access log only at INFO; run() hides the root SecurityWarning.
    """
    python = sys.executable
    debug = log_level == "DEBUG"
    gunicorn_level = "debug" if debug else "warning" if log_level == "INFO" else log_level.lower()
    access_log = ["--access-logfile", "-"] if log_level in ("DEBUG", "INFO") else []
    quiet = [] if debug else ["--quiet"]
    return [
        ("web", [python, "-m", "gunicorn", "--bind", f"{host}:{port}", "--workers", "2",
                 "--threads", "4", "--worker-class", WEB_WORKER_CLASS,
                 "--log-level", gunicorn_level, *access_log,
                 # The Procfile's: two dev servers of one user would share a control socket.
                 "--no-control-socket", "web:create_app()"]),
        ("worker", [python, "-m", "celery", *quiet, "-A", "worker", "worker",
                    "--loglevel", log_level, "--pool", "prefork",
                    "--concurrency", str(DEV_WORKER_CONCURRENCY),
                    "--queues", "webhooks,webhooks.maintenance"]),
        # beat's schedule file is under the data folder (celeryconfig.beat_schedule_filename).
        ("scheduler", [python, "-m", "celery", *quiet, "-A", "worker", "beat",
                       "--loglevel", log_level]),
    ]


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
            # The first /healthz of a fresh web process may take over 2 s (it
            # checks the database and the broker for the first time); a
            # shorter time-out sent a second probe, and printed its line twice.
            with opener.open(url + "/healthz", timeout=10):
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
    problem = _port_problem(host, port)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        lock.close()
        return 2

    from webhooks.storage.db import dispose_engine
    from webhooks.storage.migrate import upgrade

    try:
        upgrade(settings.database_url)
    except Exception as exc:  # noqa: BLE001 - say what failed, without a traceback
        print(f"error: could not migrate {_redact(settings.database_url)}: {exc}", file=sys.stderr)
        lock.close()
        return 1
    finally:
        dispose_engine()  # the supervisor keeps no connection open

    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}"
    if settings.log_level != "DEBUG":
        env["PYTHONWARNINGS"] = quiet_warnings(env)
    supervisor = Supervisor(
        process_specs(host=host, port=port, log_level=settings.log_level), env,
        grace=settings.timeout + 15,
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
    if settings.log_level != "DEBUG":
        say(f"WEBHOOKS_LOG_LEVEL={settings.log_level}: routine lines (banners, the scheduler's "
            "every sweep) are hidden; WEBHOOKS_LOG_LEVEL=DEBUG shows them")
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            say("warning: running as root; Celery advises running its worker as a user "
                "without privileges (its SecurityWarning, in full, at DEBUG)")

    ready_stop = threading.Event()

    def announce() -> None:
        threading.Thread(target=_announce_ready, args=(supervisor, url, ready_stop),
                         daemon=True).start()

    try:
        return supervisor.run(after_start=announce)
    finally:
        ready_stop.set()
        lock.close()


def _port_problem(host: str, port: int) -> str | None:
    """Why the web process could not listen on ``host:port``, or None when it can.

    Checked before anything starts: gunicorn would retry for 5 s and exit,
    and the two other processes would be stopped with it.
    """
    try:
        family, kind, _, _, address = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        with socket.socket(family, kind) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn binds
            probe.bind(address)
    except socket.gaierror as exc:
        return f"--host {host!r} does not resolve to an address: {exc.strerror}"
    except OSError as exc:
        in_use = " (another webhooks dev? give --port or PORT)" if exc.errno == errno.EADDRINUSE else ""
        return f"cannot listen on {host}:{port}: {exc.strerror or exc}{in_use}"
    return None


def _redact(url: str) -> str:
    """``url`` without its password, for printing."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - a broker URL may not parse as a database URL
        return url.split("@")[-1] if "@" in url else url
