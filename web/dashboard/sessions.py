"""Dashboard sessions kept on the server: signing out ends them for every copy of the cookie.

Flask's session cookie is signed, not remembered: clearing it at sign-out
left any copy saved before (another tab's, a stolen one) valid for its whole
lifetime. Each sign-in now stores a :class:`~webhooks.storage.models.DashboardSession`
row named by the SHA-256 of a random token, and the cookie carries the
token. A request is signed in only while that row exists and has not passed
its ``expires_at``; sign-out deletes it.

The record is made to be reused: :func:`open_session` takes the lifetime and
``read_only`` (portal links, CONTRACT 9.3, end at a given time and may be
read-only). Expired rows do not pile up: every sign-in deletes up to
:data:`CLEANUP_BATCH` of them, oldest first (a bounded cleanup, in the
sign-in's own transaction).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from webhooks.storage.models import DashboardSession

__all__ = ["CLEANUP_BATCH", "open_session", "live_session", "close_session",
           "delete_expired"]

#: Expired sessions deleted at most per sign-in (more sign-ins than that in a lifetime
#: leave the rest to the next ones).
CLEANUP_BATCH = 100
_TOKEN_BYTES = 32


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def open_session(db: Session, account_id: str, now: dt.datetime, lifetime: dt.timedelta,
                 *, read_only: bool = False) -> str:
    """Store a new session of ``account_id`` ending at ``now + lifetime``; return the token its
    cookie carries (the only copy: the row keeps its SHA-256). Deletes a batch of expired ones."""
    delete_expired(db, now)
    token = secrets.token_urlsafe(_TOKEN_BYTES)
    db.add(DashboardSession(id=_digest(token), account_id=account_id, created_at=now,
                            expires_at=now + lifetime, read_only=read_only))
    return token


def live_session(db: Session, token: object, now: dt.datetime) -> DashboardSession | None:
    """The session ``token`` names if it exists and has not expired, else None."""
    if not isinstance(token, str) or not token:
        return None
    found = db.get(DashboardSession, _digest(token))
    if found is None or found.expires_at <= now:
        return None
    return found


def close_session(db: Session, token: object) -> None:
    """End the session ``token`` names (nothing if there is none)."""
    if isinstance(token, str) and token:
        db.execute(delete(DashboardSession).where(DashboardSession.id == _digest(token)))


def delete_expired(db: Session, now: dt.datetime, limit: int = CLEANUP_BATCH) -> int:
    """Delete up to ``limit`` sessions past their ``expires_at``, oldest first; how many."""
    expired = list(db.scalars(
        select(DashboardSession.id).where(DashboardSession.expires_at <= now)
        .order_by(DashboardSession.expires_at).limit(limit)))
    if expired:
        db.execute(delete(DashboardSession).where(DashboardSession.id.in_(expired)))
    return len(expired)
