"""``GET /healthz``: does this web process reach the database and the broker?

200 ``{"status": "ok", "database": "ok", "broker": "ok"}`` when both answer;
503 ``{"status": "unavailable", "failing": ["broker"], "database": "ok",
"broker": "unavailable: ConnectionError"}`` otherwise, naming each failing
part. The database is asked ``SELECT 1``; the broker is connected to through
the Celery app (a Redis connection pings the server). Only the error's type
is shown (the details, which may name hosts, go to the log).

Checks never pile up. Each backend has at most one check in flight per
process (:class:`SingleFlight`), in a thread of its own: a probe that arrives
while one is running waits for that same check instead of starting another.
A probe waits at most ``CHECK_TIMEOUT_S`` seconds in all; a check still
running then answers ``unavailable: no answer within 3 s`` (or ``still
checking``, when the probe found it already running) and goes on alone, so a
load balancer probing a hung server every second costs one thread per
backend, not one per probe. Each check also ends on its own: the database's
connect gives up after ``CONNECT_TIMEOUT_S`` (PostgreSQL's connect_timeout),
the broker's reads after its socket time-out (celeryconfig).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Callable

from flask import Blueprint, jsonify
from sqlalchemy import text
from sqlalchemy.engine import make_url

from webhooks.broker import celery_app as broker_app
from webhooks.config import get_settings
from webhooks.storage.db import get_engine

__all__ = ["bp", "CHECK_TIMEOUT_S", "CONNECT_TIMEOUT_S", "check_database", "check_broker",
           "run_checks", "SingleFlight", "checks_in_flight"]

log = logging.getLogger(__name__)

bp = Blueprint("health", __name__)

CHECK_TIMEOUT_S = 3.0
# A connect to a server that accepts and never answers would otherwise wait forever.
CONNECT_TIMEOUT_S = 5


def _health_database_url() -> str:
    """The configured database, with a connect time-out on PostgreSQL (libpq's connect_timeout)."""
    url = make_url(get_settings().database_url)
    if url.get_backend_name() == "postgresql" and "connect_timeout" not in url.query:
        url = url.update_query_dict({"connect_timeout": str(CONNECT_TIMEOUT_S)})
    return url.render_as_string(hide_password=False)


def check_database() -> None:
    """Raise unless the configured database answers ``SELECT 1``."""
    with get_engine(_health_database_url()).connect() as connection:
        connection.execute(text("SELECT 1"))


def check_broker() -> None:
    """Raise unless the Celery broker accepts a connection."""
    with broker_app.get_app().connection_for_write() as connection:
        # One try, no retry loop: the probe wants an answer now.
        connection.ensure_connection(max_retries=0, timeout=CHECK_TIMEOUT_S)


def _broker_url() -> str:
    conf = broker_app.get_app().conf
    return conf.broker_write_url or conf.broker_url or ""


CHECKS: dict[str, Callable[[], None]] = {"database": check_database, "broker": check_broker}
# Which backend each check reaches: a check of another URL is a check of another backend.
BACKENDS: dict[str, Callable[[], str]] = {
    "database": lambda: get_settings().database_url,
    "broker": _broker_url,
}


class SingleFlight:
    """Runs ``check`` in a daemon thread, one run at a time; callers meanwhile share that run."""

    def __init__(self, name: str, check: Callable[[], None]):
        self.name = name
        self._check = check
        self._lock = threading.Lock()
        self._run: Future | None = None
        self._started = 0.0

    def running(self) -> bool:
        with self._lock:
            return self._run is not None and not self._run.done()

    def join_or_start(self) -> tuple[Future, float, bool]:
        """(the run in flight, its start in monotonic seconds, whether this call started it)."""
        with self._lock:
            if self._run is not None and not self._run.done():
                return self._run, self._started, False
            self._run, self._started = Future(), time.monotonic()
            threading.Thread(target=self._execute, args=(self._run,),
                             name=f"healthz-{self.name}", daemon=True).start()
            return self._run, self._started, True

    def _execute(self, run: Future) -> None:
        try:
            self._check()
        except BaseException as error:  # noqa: BLE001 - handed to every waiting probe
            run.set_exception(error)
        else:
            run.set_result(None)


_flights: dict[tuple, SingleFlight] = {}
_flights_lock = threading.Lock()


def _join_or_start(name: str) -> tuple[Future, float, bool]:
    """Join the check of ``name`` against its current backend, or start it (see SingleFlight).

    Under one lock with the pruning, so a flight about to be joined is never
    dropped as idle by another probe.
    """
    check = CHECKS[name]
    key = (name, check, BACKENDS[name]())
    with _flights_lock:
        # Forget idle flights of other backends (a changed URL), so the map stays small.
        for stale in [k for k, f in _flights.items() if k != key and not f.running()]:
            del _flights[stale]
        return _flights.setdefault(key, SingleFlight(name, check)).join_or_start()


def checks_in_flight() -> int:
    """How many checks are running in this process now (at most one per backend)."""
    with _flights_lock:
        return sum(flight.running() for flight in _flights.values())


def run_checks(timeout: float | None = None) -> dict[str, str]:
    """``{part: "ok" or "unavailable: …"}`` for each check, waiting ``timeout`` s in all.

    ``timeout`` defaults to ``CHECK_TIMEOUT_S``.
    """
    timeout = CHECK_TIMEOUT_S if timeout is None else timeout
    runs = {name: _join_or_start(name) for name in CHECKS}
    deadline = time.monotonic() + timeout
    results = {}
    for name, (run, started, fresh) in runs.items():
        try:
            run.result(timeout=max(0.0, deadline - time.monotonic()))
            results[name] = "ok"
        except FutureTimeout:
            waited = time.monotonic() - started
            log.warning("healthz: the %s has not answered for %.1f s", name, waited)
            results[name] = (f"unavailable: no answer within {timeout:g} s" if fresh else
                             f"unavailable: still checking (no answer for {waited:.0f} s)")
        except Exception as error:  # noqa: BLE001 - any failure means "unavailable"
            log.warning("healthz: the %s check failed: %s", name, error)
            results[name] = f"unavailable: {type(error).__name__}"
    return results


@bp.get("/healthz")
def healthz():
    results = run_checks()
    failing = [name for name, result in results.items() if result != "ok"]
    if failing:
        response = jsonify(status="unavailable", failing=failing, **results)
        response.status_code = 503
    else:
        response = jsonify(status="ok", **results)
    response.headers["Cache-Control"] = "no-store"
    return response
