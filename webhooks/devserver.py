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

import fcntl
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from .config import load_settings
from .datadir import PRIVATE_FILE_MODE, private_dir
from .supervisor import Supervisor

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
                    "--pool", "prefork", "--concurrency", "2",
                    "--queues", "webhooks,webhooks.maintenance"]),
        # beat's schedule file is under the data folder (celeryconfig.beat_schedule_filename).
        ("scheduler", [python, "-m", "celery", "-A", "worker", "beat", "--loglevel", "INFO"]),
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
