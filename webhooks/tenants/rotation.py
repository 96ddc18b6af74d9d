"""Signing secrets and their rotation: at once, or staged to take over at a set time.

A staged rotation keeps ``secret`` signing and stores the ``next_secret`` with
the moment it takes over (``next_secret_active_at``). From that moment on the
next secret signs and *is* the subscription's secret: every reader computes
this with :func:`secrets_at` (Python) or :func:`signing_secret` (SQL, in the
claim), so the swap needs no write at that moment and no reader can see it
late. The sweep writes the swap down afterwards (:func:`settle_due`), and
every transition here settles a due swap before it changes anything.

Which secret signs an attempt is decided when the attempt is claimed
(claim.py); receivers verify with both secrets while one is staged
(docs/secret-rotation.md).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import and_, case, null, select, update
from sqlalchemy.sql import ColumnElement

from webhooks.storage.backends import backend_of
from webhooks.storage.models import Subscription
from webhooks.tenants.schemes import new_secret

__all__ = [
    "ACTIVATE_IN_MAX", "Secrets", "Settled", "secrets_at", "signing_secret", "rotate", "activate_now",
    "cancel", "settle_due", "staged_secret", "switch_scheme",
]

ACTIVATE_IN_MAX = 7 * 24 * 3600  # seconds: the longest a rotation may be staged for

_subscriptions = Subscription.__table__


@dataclass(frozen=True)
class Secrets:
    """A subscription's secrets as of one moment: the one that signs, and the staged one
    with the moment it takes over (both None when no rotation is staged)."""

    secret: str
    next_secret: str | None
    next_secret_active_at: dt.datetime | None


def secrets_at(subscription, now: dt.datetime) -> Secrets:
    """The secrets of ``subscription`` (anything with the three columns) at ``now``."""
    active_at = subscription.next_secret_active_at
    if subscription.next_secret is not None and active_at is not None:
        if active_at <= now:
            return Secrets(subscription.next_secret, None, None)
        return Secrets(subscription.secret, subscription.next_secret, active_at)
    return Secrets(subscription.secret, None, None)


def _due(t, now) -> ColumnElement:
    return and_(t.c.next_secret.is_not(None), t.c.next_secret_active_at <= now)


def signing_secret(t, now) -> ColumnElement:
    """The secret that signs at ``now`` (a value or a bind parameter), in SQL."""
    return case((_due(t, now), t.c.next_secret), else_=t.c.secret)


def staged_secret(t, now) -> ColumnElement:
    """The staged secret at ``now`` (null when none is staged or it already signs), in SQL:
    the second signature of a Standard Webhooks delivery during a staged rotation."""
    return case((_due(t, now), null()), else_=t.c.next_secret)


def _scheme_of(session, subscription_id: str) -> str:
    """The subscription's signature scheme (its secrets are made in that scheme's format)."""
    scheme = session.execute(select(Subscription.signature_scheme)
                             .where(Subscription.id == subscription_id)).scalar_one_or_none()
    return scheme or "service"


def switch_scheme(session, subscription_id: str, now: dt.datetime, scheme: str) -> str | None:
    """Sign with ``scheme`` from the next attempt on, with a new secret of its format; a
    staged secret is dropped (it was of the old format). Returns the new secret, or None
    when the subscription already uses ``scheme`` (nothing changes)."""
    secret = new_secret(scheme)
    changed = _change(session, subscription_id, now, Subscription.signature_scheme != scheme,
                      Subscription.deleted_at.is_(None),
                      signature_scheme=scheme, secret=secret, next_secret=None,
                      next_secret_active_at=None)
    return secret if changed else None


def _change(session, subscription_id: str, now: dt.datetime, *conditions, **values) -> bool:
    """UPDATE the subscription where ``conditions`` hold; True if it did. A due swap is
    settled in the same statement, so that no transition loses the secret that signs."""
    settled = {"secret": signing_secret(_subscriptions, now)}
    result = session.execute(
        update(Subscription)
        .where(Subscription.id == subscription_id, *conditions)
        .values(**{**settled, **values})
    )
    return result.rowcount == 1


def rotate(session, subscription_id: str, now: dt.datetime,
           activate_in: int | None = None) -> None:
    """A new secret in the format of the subscription's scheme (schemes.py): signing from the next attempt on (``activate_in`` None), or staged to
    sign from ``activate_in`` seconds after ``now`` on. A rotation at once also drops a
    staged secret; a staged one replaces a secret staged before."""
    scheme = _scheme_of(session, subscription_id)
    if activate_in is None:
        _change(session, subscription_id, now, secret=new_secret(scheme), next_secret=None,
                next_secret_active_at=None)
        return
    if not 1 <= activate_in <= ACTIVATE_IN_MAX:
        raise ValueError(f"activate_in must be 1 to {ACTIVATE_IN_MAX} seconds")
    _change(session, subscription_id, now, next_secret=new_secret(scheme),
            next_secret_active_at=now + dt.timedelta(seconds=activate_in))


def activate_now(session, subscription_id: str, now: dt.datetime) -> bool:
    """Let the staged secret sign from now on; False if none was staged (or it already
    took over)."""
    pending = (_subscriptions.c.next_secret.is_not(None),
               _subscriptions.c.next_secret_active_at > now)
    return _change(session, subscription_id, now, *pending,
                   secret=_subscriptions.c.next_secret, next_secret=None,
                   next_secret_active_at=None)


def cancel(session, subscription_id: str, now: dt.datetime) -> bool:
    """Drop the staged secret, which then never signs; False if none was staged (or it
    already took over, too late to cancel)."""
    pending = (_subscriptions.c.next_secret.is_not(None),
               _subscriptions.c.next_secret_active_at > now)
    return _change(session, subscription_id, now, *pending, next_secret=None,
                   next_secret_active_at=None)


@dataclass(frozen=True)
class Settled:
    """A staged secret's swap written down by :func:`settle_due`."""

    subscription_id: str
    account_id: str
    active_at: dt.datetime  # when the staged secret took over (it signed from then on)


def settle_due(session, now: dt.datetime, batch: int) -> list[Settled]:
    """Write down up to ``batch`` swaps whose time has come (the sweep); returns them.

    Nothing depends on when this runs: readers compute the swap themselves. Of two
    sweeps that see one swap due, only the one whose UPDATE changes the row returns it.
    A row another transaction holds is left for the next sweep (SKIP LOCKED, on
    PostgreSQL): waiting, two overlapping sweeps could lock the same rows in different
    orders and deadlock, as their swept moves did (transitions._move_swept).
    """
    due = session.execute(
        select(Subscription.id, Subscription.account_id, Subscription.next_secret_active_at)
        .where(_due(_subscriptions, now)).limit(batch)
    ).all()
    if not due:
        return []
    free = backend_of(session).skip_locked(
        select(Subscription.id)
        .where(Subscription.id.in_([row.id for row in due]), _due(_subscriptions, now)))
    swapped = set(session.scalars(
        update(Subscription)
        .where(Subscription.id.in_(free), _due(_subscriptions, now))
        .values(secret=Subscription.next_secret, next_secret=None, next_secret_active_at=None)
        .returning(Subscription.id)
        .execution_options(synchronize_session=False)
    ))
    return [Settled(*row) for row in due if row.id in swapped]
