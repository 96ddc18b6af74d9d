"""Portal links (CONTRACT 9.3): single-use links that sign a browser in to one account's dashboard.

:func:`create_link` stores a :class:`~webhooks.storage.models.PortalLink` named by
the SHA-256 of a random token and returns the token (the only copy: it goes
into the link's URL). :func:`find_link` reads what a link would grant without
spending it; :func:`consume_link` spends a link once: a conditional
UPDATE sets ``used_at`` only where it is still NULL and the link has not
expired, so of two opens at the same moment exactly one gets the link's
account. Spent links (used or expired) do not pile up: every new link
deletes up to :data:`CLEANUP_BATCH` of them, oldest first, in its own
transaction (as dashboard sessions are cleaned at each sign-in).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from dataclasses import dataclass

from sqlalchemy import delete, or_, select, update
from sqlalchemy.orm import Session

from ..storage.models import PortalLink
from .audit import Action, Actor, Target, TargetKind, created, reference, write as write_entry

__all__ = ["EXPIRES_IN_DEFAULT", "EXPIRES_IN_RANGE", "CLEANUP_BATCH", "OpenedLink",
           "create_link", "find_link", "consume_link", "delete_spent"]

#: How long a link (and the session it opens) lasts, in seconds, unless the caller says.
EXPIRES_IN_DEFAULT = 3600
#: The ``expires_in`` a caller may ask for, in seconds (both ends included).
EXPIRES_IN_RANGE = (60, 86400)
#: Spent links deleted at most per new link.
CLEANUP_BATCH = 100
_TOKEN_BYTES = 32


@dataclass(frozen=True)
class OpenedLink:
    """What opening a link grants: a session of ``account_id`` until ``expires_at``."""

    account_id: str
    expires_at: dt.datetime
    read_only: bool


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def create_link(db: Session, account_id: str, now: dt.datetime, expires_in: int,
                *, actor: Actor, read_only: bool = False) -> tuple[str, PortalLink]:
    """Store a link to ``account_id``'s dashboard valid for ``expires_in`` seconds from ``now``,
    with its ``portal_link.created`` entry by ``actor`` (the link named by a reference to its
    digest, never the token); return its token and row. Raises ValueError if
    ``expires_in`` is outside EXPIRES_IN_RANGE."""
    low, high = EXPIRES_IN_RANGE
    whole = isinstance(expires_in, int) and not isinstance(expires_in, bool)
    if not whole or not low <= expires_in <= high:
        raise ValueError(f"expires_in must be a whole number of seconds from {low} to {high}, "
                         f"got {expires_in!r}")
    delete_spent(db, now)
    token = secrets.token_urlsafe(_TOKEN_BYTES)
    link = PortalLink(id=_digest(token), account_id=account_id, created_at=now,
                      expires_at=now + dt.timedelta(seconds=expires_in), read_only=read_only)
    db.add(link)
    db.flush()
    write_entry(db, account_id, actor, Action.PORTAL_LINK_CREATED,
                Target(TargetKind.PORTAL_LINK, reference(link.id)),
                created({"expires_at": link.expires_at, "read_only": read_only}), at=now)
    return token, link


def _unspent(token: str, now: dt.datetime):
    """The WHERE clause of the link ``token`` names, while unused and unexpired."""
    return (PortalLink.id == _digest(token), PortalLink.used_at.is_(None),
            PortalLink.expires_at > now)


def find_link(db: Session, token: object, now: dt.datetime) -> OpenedLink | None:
    """What the link ``token`` names would grant if opened now, without spending it; None if
    it is unknown, used or expired (the dashboard asks before a link replaces a session)."""
    if not isinstance(token, str) or not token:
        return None
    row = db.execute(
        select(PortalLink.account_id, PortalLink.expires_at, PortalLink.read_only)
        .where(*_unspent(token, now))
    ).first()
    if row is None:
        return None
    return OpenedLink(account_id=row.account_id, expires_at=row.expires_at, read_only=row.read_only)


def consume_link(db: Session, token: object, now: dt.datetime) -> OpenedLink | None:
    """Spend the link ``token`` names; what it grants, or None if it is unknown, used or expired.

    One statement (UPDATE ... WHERE used_at IS NULL ... RETURNING): the row
    lock makes a second, concurrent open wait and then find ``used_at`` set.
    """
    if not isinstance(token, str) or not token:
        return None
    row = db.execute(
        update(PortalLink)
        .where(*_unspent(token, now))
        .values(used_at=now)
        .returning(PortalLink.account_id, PortalLink.expires_at, PortalLink.read_only)
        .execution_options(synchronize_session=False)
    ).first()
    if row is None:
        return None
    return OpenedLink(account_id=row.account_id, expires_at=row.expires_at, read_only=row.read_only)


def delete_spent(db: Session, now: dt.datetime, limit: int = CLEANUP_BATCH) -> int:
    """Delete up to ``limit`` links that were used or have expired, oldest first; how many."""
    spent = list(db.scalars(
        select(PortalLink.id)
        .where(or_(PortalLink.expires_at <= now, PortalLink.used_at.is_not(None)))
        .order_by(PortalLink.expires_at).limit(limit)))
    if spent:
        db.execute(delete(PortalLink).where(PortalLink.id.in_(spent)))
    return len(spent)
