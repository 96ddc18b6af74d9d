"""Ordering keys (CONTRACT 9.4): deliveries of one subscription with one key, one at a time.

An event emitted with ``ordering_key`` takes the next number of the
account's sequence for that key (:func:`next_sequence`, an upsert of one
``ordering_keys`` row in the emitting transaction: the row stays locked
until that transaction ends, so the numbers follow the order in which the
events commit, whichever process emits them). Each of its deliveries
carries the key and the number.

The claim takes a keyed delivery only when no delivery of its subscription
with the same key and a smaller number is unfinished (``pending``,
``sending`` or ``paused``): :func:`clear_of_predecessors`, one probe of the
partial index ``ix_deliveries_ordering``. One it refuses waits
(``states.behind_its_key``) without a message; the record of the delivery
before it, once that is ``done``, ``failed`` or ``dead``, makes it due, or
puts it in the queue for a free slot when one is waiting
(:func:`release_successor`; on PostgreSQL its statement, :data:`RELEASE`, is a
step of the record's own statement, so a keyed success records as one
statement and groups with others), and the sweep does so for a release that was
missed (:func:`forgotten_behind_key`: a claim refused just as its
predecessor finished). No lock is held while a POST is in flight.

Deliveries without a key, and those of other keys, are never held back. A
replay has no key (changes.replay_row), so it is never held back either,
and holds nothing back.

A key's row matters only while a delivery of the key is unfinished: the
claim and the record compare numbers among unfinished deliveries alone, and
a finished delivery never becomes unfinished again. So retention removes the
row of a key whose deliveries it purges once none of the key's deliveries is
unfinished (:func:`forget_idle_keys`), and the key's next event starts again
at 1, ahead of nothing. An event whose type no subscription takes has no
delivery to order, and takes no number (emit.py).
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import BigInteger, String, and_, bindparam, delete, exists, literal_column, or_, select
from sqlalchemy.engine import Connection

from webhooks import states
from webhooks.lifecycle import transitions
from webhooks.storage.backends import backend_of
from webhooks.storage.models import Delivery, OrderingKey, Subscription

__all__ = ["next_sequence", "clear_of_predecessors", "release_successor", "RELEASE", "KEY",
           "forgotten_behind_key", "forget_idle_keys", "UNFINISHED"]

deliveries, ordering_keys = Delivery.__table__, OrderingKey.__table__
subscriptions = Subscription.__table__
# Spelled as literals (not bound values) so that the planner matches the predicate of
# the partial index ix_deliveries_ordering even in a generic plan.
UNFINISHED = tuple(literal_column(f"'{status}'") for status in ("pending", "sending", "paused"))
KEY = bindparam("okey", type_=String(200))  # the finished delivery's key (release_successor)


def _unfinished_keyed(t):
    return and_(t.c.ordering_key.is_not(None), t.c.status.in_(UNFINISHED))


def next_sequence(connection: Connection, account_id: str, ordering_key: str) -> int:
    """The next number of the account's sequence for ``ordering_key`` (1 for the first),
    taken in the caller's transaction, whose row lock orders concurrent emitters."""
    statement = backend_of(connection).upsert_adding(
        ordering_keys, {"account_id": account_id, "ordering_key": ordering_key, "last_sequence": 1},
        ("account_id", "ordering_key"), ("last_sequence",))
    return connection.execute(statement.returning(ordering_keys.c.last_sequence)).scalar_one()


def clear_of_predecessors(t=deliveries):
    """SQL: the delivery ``t`` has no key, or no unfinished delivery of its subscription with
    its key comes before it."""
    before = deliveries.alias("before_it")
    return or_(t.c.ordering_key.is_(None), ~exists().where(
        before.c.subscription_id == t.c.subscription_id, before.c.ordering_key == t.c.ordering_key,
        _unfinished_keyed(before), before.c.key_sequence < t.c.key_sequence))


def _successor():
    after = deliveries.alias("after_it")
    return (select(after.c.id)
            .where(after.c.subscription_id == bindparam("sub_id", type_=String(36)),
                   after.c.ordering_key == KEY,
                   _unfinished_keyed(after),
                   after.c.key_sequence > bindparam("kseq", type_=BigInteger))
            .order_by(after.c.key_sequence).limit(1))


def _queue():
    """SQL: deliveries of the subscription wait for a free slot (the successor joins them)."""
    waiting = deliveries.alias("in_queue")
    return exists().where(waiting.c.subscription_id == bindparam("sub_id", type_=String(36)),
                          states.waiting(waiting))


# The record's statement runs RELEASE among its own steps (storage/backends): params
# sub_id, okey (KEY), kseq, now.
RELEASE = transitions.release_successor(_successor(), _queue())


def release_successor(connection: Connection, subscription_id: str, ordering_key: str,
                      key_sequence: int, now: dt.datetime) -> list[tuple[str, int]]:
    """Release the next delivery of this subscription and key, if it waits behind the one
    numbered ``key_sequence`` (which has just finished): due now, or, while deliveries of
    the subscription wait for a free slot, into that queue in its place (a finished
    attempt releases it there, oldest first). Its (id, attempt_count) if it is due now
    (it needs a message), else nothing."""
    rows = connection.execute(RELEASE, {"sub_id": subscription_id, "okey": ordering_key,
                                         "kseq": key_sequence, "now": now})
    return [(delivery_id, count) for delivery_id, count, parked in rows if not parked]


def forgotten_behind_key(batch: int):
    """The ids of deliveries behind their key whose way is clear (a release was missed),
    at most ``batch``: for the sweep."""
    return (select(deliveries.c.id)
            .where(states.behind_its_key(deliveries), clear_of_predecessors(deliveries))
            .limit(batch))


def forget_idle_keys(connection: Connection, account_id: str, keys: list[str]) -> int:
    """Delete the account's rows of these ``keys`` (at most a retention batch of them)
    that no unfinished delivery needs; how many went. In the caller's transaction.

    The rows are locked first (skipping those an emitter holds: it is using the key),
    and the check for unfinished deliveries is a later statement, whose snapshot
    therefore sees every emit that numbered the key before the lock was taken; an
    emitter that comes after waits for this transaction, then starts the key again
    at 1 (its upsert finds no row). Checked in one statement with the row lock, a
    concurrent emit could commit between the check's snapshot and the lock, and its
    unfinished delivery would lose its key's row.
    """
    if not keys:
        return 0
    locked = list(connection.scalars(backend_of(connection).skip_locked(
        select(ordering_keys.c.ordering_key)
        .where(ordering_keys.c.account_id == account_id,
               ordering_keys.c.ordering_key.in_(sorted(keys)))
        .order_by(ordering_keys.c.ordering_key))))
    if not locked:
        return 0
    # Through the account's subscriptions, so that each probe is one look-up of the
    # partial index ix_deliveries_ordering (subscription, key, ...).
    unfinished = (select(deliveries.c.id)
                  .join(subscriptions, subscriptions.c.id == deliveries.c.subscription_id)
                  .where(subscriptions.c.account_id == account_id,
                         deliveries.c.ordering_key == ordering_keys.c.ordering_key,
                         _unfinished_keyed(deliveries))
                  .exists())
    return connection.execute(
        delete(ordering_keys).where(ordering_keys.c.account_id == account_id,
                                    ordering_keys.c.ordering_key.in_(locked), ~unfinished)
    ).rowcount
