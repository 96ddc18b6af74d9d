"""``GET /healthz``: does this web process reach the database and the broker?

200 ``{"status": "ok", "database": "ok", "broker": "ok"}`` when both answer;
503 ``{"status": "unavailable", "failing": ["broker"], "database": "ok",
"broker": "unavailable: ConnectionError"}`` otherwise, naming each failing
part. The database is asked ``SELECT 1``; the broker is connected to through
the Celery app (a Redis connection pings the server). Both checks run at the
same time and each is cut off after ``CHECK_TIMEOUT_S`` seconds, so a server
that does not answer at all makes the check fail fast instead of hanging the
load balancer's probe. Only the error's type is shown (the details, which
may name hosts, go to the log).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from flask import Blueprint, jsonify
from sqlalchemy import text

from webhooks.db import get_engine

__all__ = ["bp", "CHECK_TIMEOUT_S", "check_database", "check_broker", "run_checks"]

log = logging.getLogger(__name__)

bp = Blueprint("health", __name__)

CHECK_TIMEOUT_S = 3.0
# Shared and small: a check stuck on a dead server keeps its thread until its
# own time-out; later probes then wait in the queue and fail at CHECK_TIMEOUT_S
# instead of starting ever more threads.
_executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="healthz")


def check_database() -> None:
    """Raise unless the configured database answers ``SELECT 1``."""
    with get_engine().connect() as connection:
        connection.execute(text("SELECT 1"))


def check_broker() -> None:
    """Raise unless the Celery broker accepts a connection."""
    from webhooks.queue import celery_app

    with celery_app.connection_for_write() as connection:
        # One try, no retry loop: the probe wants an answer now.
        connection.ensure_connection(max_retries=0, timeout=CHECK_TIMEOUT_S)


CHECKS = {"database": check_database, "broker": check_broker}


def run_checks(timeout: float = CHECK_TIMEOUT_S) -> dict[str, str]:
    """``{part: "ok" or "unavailable: <ErrorType>"}`` for each check, run concurrently."""
    futures = {name: _executor.submit(check) for name, check in CHECKS.items()}
    results = {}
    for name, future in futures.items():
        try:
            future.result(timeout=timeout)
            results[name] = "ok"
        except FutureTimeout:
            log.warning("healthz: the %s did not answer within %.1f s", name, timeout)
            results[name] = "unavailable: no answer within %g s" % timeout
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
