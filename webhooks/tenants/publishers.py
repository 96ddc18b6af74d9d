"""Publisher keys (CONTRACT 10.7): the operator's credential for the publisher API.

A key is ``whpub_`` and 32 random bytes (URL-safe base64), shown once; only
its SHA-256 is stored, as an account's API key is (tenants/accounts.py). A key
names a publisher, never an account: it acts on accounts, not as one.

Storage only, in the caller's transaction; the web's cache of verified keys
and the once-a-minute ``last_used_at`` are services/publishers.py's.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets

from sqlalchemy import select, update
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from webhooks.errors import NotFound
from webhooks.storage.models import Publisher, new_id, utcnow

__all__ = ["PUBLISHER_KEY_PREFIX", "NAME_LIMIT", "hash_key", "create_publisher", "listing",
           "revoke", "live_publisher_id", "touch"]

PUBLISHER_KEY_PREFIX = "whpub_"
NAME_LIMIT = 200  # characters of a publisher's name
_RANDOM_BYTES = 32  # 256 bits of entropy, as an account's key

_publishers = Publisher.__table__


def hash_key(key: str) -> str:
    """The stored form of a publisher key (hex SHA-256; keys are random, so no salt)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def create_publisher(session: Session, name: str) -> tuple[Publisher, str]:
    """A new publisher named ``name`` (1 to 200 characters, ValueError otherwise), and its
    key, which is stored nowhere."""
    name = (name or "").strip()
    if not 0 < len(name) <= NAME_LIMIT:
        raise ValueError(f"publisher name must be 1 to {NAME_LIMIT} characters (without the "
                         f"spaces around it), not {len(name)}")
    key = PUBLISHER_KEY_PREFIX + secrets.token_urlsafe(_RANDOM_BYTES)
    publisher = Publisher(id=new_id(), name=name, key_hash=hash_key(key), created_at=utcnow())
    session.add(publisher)
    session.flush()
    return publisher, key


def listing(session: Session) -> list[dict]:
    """Every publisher that is not revoked, oldest first: ``{"id", "name", "created_at",
    "last_used_at"}`` (times as ISO 8601 UTC text, or null)."""
    rows = session.scalars(select(Publisher).where(Publisher.revoked_at.is_(None))
                           .order_by(Publisher.created_at, Publisher.id))
    return [{"id": row.id, "name": row.name, "created_at": _text(row.created_at),
             "last_used_at": _text(row.last_used_at)} for row in rows]


def _text(moment: dt.datetime | None) -> str | None:
    return None if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def revoke(session: Session, publisher_id: str, now: dt.datetime) -> None:
    """Revoke the publisher: its key never works again. NotFound if there is no such
    publisher, or it was revoked already."""
    done = session.execute(
        update(Publisher).where(Publisher.id == publisher_id, Publisher.revoked_at.is_(None))
        .values(revoked_at=now)
    ).rowcount
    if not done:
        raise NotFound(f"publisher {publisher_id} does not exist or was revoked already")


def live_publisher_id(connection: Connection, key: str) -> str | None:
    """The id of the publisher whose unrevoked key ``key`` is, else None."""
    if not key.startswith(PUBLISHER_KEY_PREFIX):
        return None
    return connection.execute(
        select(_publishers.c.id).where(_publishers.c.key_hash == hash_key(key),
                                       _publishers.c.revoked_at.is_(None))
    ).scalar()


def touch(connection: Connection, publisher_id: str, now: dt.datetime,
          interval: dt.timedelta) -> bool:
    """Set ``last_used_at`` to ``now`` unless it is within ``interval`` of it already: one
    conditional UPDATE, so that processes that all try write once. True if it wrote."""
    return bool(connection.execute(
        update(_publishers).where(
            _publishers.c.id == publisher_id,
            (_publishers.c.last_used_at.is_(None)) | (_publishers.c.last_used_at < now - interval))
        .values(last_used_at=now)
    ).rowcount)
