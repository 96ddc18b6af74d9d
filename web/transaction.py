"""One database session per request: committed on success, rolled back on error.

Views call :func:`db_session` (created on first use, so routes that never
touch the database never open a connection) and register with
:func:`after_commit` whatever must happen only once their changes are
visible to workers: publishing deliveries, requesting a sweep. A worker
that received a message before the commit would not find the row.

With WEBHOOKS_READ_DATABASE_URL set, the requests of :func:`reads_replica`
(the dashboard's pages, the API's lists) read a streaming replica; every
other request, and so every write and every read a write depends on, uses
the primary. A dashboard user who has just changed something reads the
primary for WEBHOOKS_READ_OWN_WRITES_FOR seconds, so the page they are sent
to after a form shows what they did even while the replica lags. A replica
that does not answer, or lags more than WEBHOOKS_READ_MAX_LAG seconds, is
not read at all (web/replica.py).

The transaction ends in an ``after_request`` hook, that is before the
response is sent: a client that gets a 2xx can rely on the change being
stored. A failed commit replaces the response with the JSON 500 answer.
"""

from __future__ import annotations

import time
from typing import Callable

from flask import Flask, Response, current_app, g, request, session as cookie
from sqlalchemy.orm import Session

from webhooks.broker.outbox import on_commit
from webhooks.config import get_settings
from webhooks.storage.backends import backend_of
from webhooks.storage.db import get_sessionmaker

from .errors import error_response
from .replica import usable as replica_usable

__all__ = ["db_session", "read_snapshot", "after_commit", "init_app", "reads_replica",
           "REPLICA_ENDPOINTS"]

_SESSION = "webhooks_session"
# The API's lists; every page of the dashboard blueprint also reads the replica.
REPLICA_ENDPOINTS = frozenset({"deliveries.list_page", "subscriptions.list_all"})
_PRIMARY_UNTIL = "read_primary_until"  # in the dashboard's signed cookie: a Unix time
# Signing out ends the session: nothing is read after it. Signing in stores the session that
# every page then checks, so it counts as a change like any other form.
_WRITE_NOTHING = frozenset({"dashboard.sign_out"})


def reads_replica() -> bool:
    """True when this request may read the replica: a GET or HEAD of a dashboard page or
    of an API list, by a user who has changed nothing in the last few seconds."""
    if request.method not in ("GET", "HEAD"):
        return False
    if request.blueprint == "dashboard":
        return cookie.get(_PRIMARY_UNTIL, 0) <= time.time()
    return request.endpoint in REPLICA_ENDPOINTS


def db_session() -> Session:
    """The request's session: on the replica for :func:`reads_replica`, else the primary."""
    session = g.get(_SESSION)
    if session is None:
        settings = get_settings()
        replica = settings.read_database_url and reads_replica() and replica_usable()
        session = get_sessionmaker(settings.read_database_url if replica else None)()
        setattr(g, _SESSION, session)
    return session


def read_snapshot() -> Session:
    """The request's session, reading from here on as of one moment (a read-only view).

    Under PostgreSQL's default READ COMMITTED each statement sees its own
    moment, so a delivery read before an attempt was recorded could be shown
    with that attempt. The request's earlier reads (the caller's key) are
    ended, and the rest run in one REPEATABLE READ transaction. SQLite's
    transactions here begin IMMEDIATE (db.py), which already reads one moment.
    """
    session = db_session()
    backend_of(session).begin_snapshot(session)
    return session


def after_commit(callback: Callable[[], object]) -> None:
    """Run ``callback`` after the request's transaction commits; never if it rolls back
    (outbox.on_commit, the one after-commit mechanism of the core and the web app)."""
    on_commit(db_session(), callback)


def _finish(response: Response) -> Response:
    session: Session | None = g.pop(_SESSION, None)
    if session is None:
        return response
    succeeded = response.status_code < 400
    if (succeeded and request.blueprint == "dashboard" and request.method == "POST"
            and request.endpoint not in _WRITE_NOTHING and get_settings().read_database_url):
        # Read-your-writes: the page after this form reads the primary for a while.
        cookie[_PRIMARY_UNTIL] = time.time() + get_settings().read_own_writes_for
    try:
        if succeeded:
            session.commit()
        else:
            session.rollback()
    except Exception:  # noqa: BLE001
        # The change is not stored, so the client must not get its 2xx.
        session.rollback()
        current_app.logger.exception("commit failed")
        return error_response(500, "internal_error", "The server could not complete this request.")
    finally:
        session.close()
    return response


def _discard(_error: BaseException | None) -> None:
    # Only reached with a session still open when _finish did not run (an
    # exception escaped every handler); never leave a transaction open.
    session: Session | None = g.pop(_SESSION, None)
    if session is not None:
        session.rollback()
        session.close()


def init_app(app: Flask) -> None:
    """Install the per-request transaction hooks on ``app``."""
    app.after_request(_finish)
    app.teardown_request(_discard)
