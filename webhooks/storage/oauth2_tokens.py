"""The statements on the shared OAuth2 token rows (models.OAuth2Token), one per step.

Statements only: when a token is fetched, used or refreshed is the
sender's (webhooks/sender/oauth2_tokens.py). Every one runs on a connection
of the attempt engine (storage/db.py: autocommit on PostgreSQL, so a losing
INSERT aborts no transaction; SQLite fails the statement alone) and is made
of single conditional statements, so it needs no lock and gives the same
answer on both. Times are unix seconds by
the database's clock (storage/clock.py).
"""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import and_, delete, insert, or_, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from webhooks.storage.models import OAuth2Token

__all__ = ["TokenRow", "read", "lease", "store", "release", "drop", "forget"]

tokens = OAuth2Token.__table__


class TokenRow(NamedTuple):
    """A subscription's token as stored (any field may be null)."""

    config_hash: str | None
    access_token: str | None
    refresh_at: float | None
    expires_at: float | None


def read(connection: Connection, subscription_id: str) -> TokenRow | None:
    """The subscription's token row, or None if it has none yet."""
    row = connection.execute(
        select(tokens.c.config_hash, tokens.c.access_token, tokens.c.refresh_at,
               tokens.c.expires_at).where(tokens.c.subscription_id == subscription_id)).first()
    return None if row is None else TokenRow(*row)


def lease(connection: Connection, subscription_id: str, owner: str, now: float,
          until: float, config_hash: str) -> bool:
    """Take the right to fetch the subscription's token until ``until``, unless another
    owner holds it past ``now`` or a token of ``config_hash`` that is not due for refresh
    is stored (another owner just fetched it); True if ``owner`` now holds it. The first
    lease of a subscription creates its row (a second creator loses: the row exists)."""
    fresh = and_(tokens.c.config_hash == config_hash, tokens.c.access_token.is_not(None),
                 tokens.c.refresh_at > now)
    taken = connection.execute(
        update(tokens)
        .where(tokens.c.subscription_id == subscription_id,
               or_(tokens.c.lease_until.is_(None), tokens.c.lease_until < now), ~fresh)
        .values(lease_owner=owner, lease_until=until)).rowcount
    if taken == 1:
        return True
    exists = connection.execute(
        select(tokens.c.subscription_id).where(tokens.c.subscription_id == subscription_id)
    ).first()
    if exists is not None:
        return False
    try:
        connection.execute(insert(tokens).values(
            subscription_id=subscription_id, lease_owner=owner, lease_until=until))
    except IntegrityError:
        return False  # another worker created it first: its lease
    return True


def store(connection: Connection, subscription_id: str, owner: str, *, config_hash: str,
          access_token: str, refresh_at: float, expires_at: float) -> bool:
    """Keep the token ``owner`` fetched and end its lease; False (nothing stored) if the
    lease was lost meanwhile (it expired and another worker took it, or the subscription's
    ``oauth2`` changed: :func:`forget`)."""
    return connection.execute(
        update(tokens)
        .where(tokens.c.subscription_id == subscription_id, tokens.c.lease_owner == owner)
        .values(config_hash=config_hash, access_token=access_token, refresh_at=refresh_at,
                expires_at=expires_at, lease_owner=None, lease_until=None)).rowcount == 1


def release(connection: Connection, subscription_id: str, owner: str) -> None:
    """End ``owner``'s lease without a token (the fetch failed): the next attempt tries."""
    connection.execute(
        update(tokens)
        .where(tokens.c.subscription_id == subscription_id, tokens.c.lease_owner == owner)
        .values(lease_owner=None, lease_until=None))


def drop(connection: Connection, subscription_id: str, access_token: str) -> bool:
    """Forget ``access_token`` (the endpoint answered 401 to it) if it is still the stored
    one; True if it was. Attempts that all got 401 for one token drop it once, so one new
    token is fetched."""
    return connection.execute(
        update(tokens)
        .where(tokens.c.subscription_id == subscription_id,
               tokens.c.access_token == access_token)
        .values(access_token=None, refresh_at=None, expires_at=None)).rowcount == 1


def forget(connection: Connection, subscription_id: str) -> None:
    """Delete the subscription's token row (its ``oauth2`` changed or was removed): no token
    of the old settings stays stored."""
    connection.execute(delete(tokens).where(tokens.c.subscription_id == subscription_id))
