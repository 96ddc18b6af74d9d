"""One database session per request: committed on success, rolled back on error.

Views call :func:`db_session` (created on first use, so routes that never
touch the database never open a connection) and register with
:func:`after_commit` whatever must happen only once their changes are
visible to workers: publishing deliveries, requesting a sweep. A worker
that received a message before the commit would not find the row.

The transaction ends in an ``after_request`` hook, that is before the
response is sent: a client that gets a 2xx can rely on the change being
stored. A failed commit replaces the response with the JSON 500 answer.
"""

from __future__ import annotations

from typing import Callable

from flask import Flask, Response, current_app, g
from sqlalchemy.orm import Session

from webhooks.broker.outbox import on_commit
from webhooks.storage.backends import backend_of
from webhooks.storage.db import get_sessionmaker

from .errors import error_response

__all__ = ["db_session", "read_snapshot", "after_commit", "init_app"]

_SESSION = "webhooks_session"


def db_session() -> Session:
    """The request's session (the configured database, read when the request runs)."""
    session = g.get(_SESSION)
    if session is None:
        session = get_sessionmaker()()
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
