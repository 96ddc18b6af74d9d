"""The sweep's rule: find every pending delivery that no broker message will bring.

The scheduler (Celery beat) runs it every WEBHOOKS_SWEEP_INTERVAL seconds
(services/sweep.py: ``run_sweep`` finds the work with :func:`sweep` in one
transaction and publishes after commit). The database is the source of truth:
whatever the broker lost, a worker's death abandoned, or the publisher could
not send, the sweep sends again.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import exists, func, or_, select, true
from sqlalchemy.orm import Session, aliased

from webhooks import states
from webhooks.audit import log as audit_log
from webhooks.audit.entries import SERVICE, Action, Target, TargetKind, changes_between
from webhooks.lifecycle import ordering, transitions
from webhooks.lifecycle.dispatch import Dispatch
from webhooks.states import DeliveryStatus, SubscriptionStatus, due, parked, waiting
from webhooks.storage.models import Delivery, Subscription
from webhooks.tenants.rotation import settle_due

__all__ = ["sweep"]

PENDING = DeliveryStatus.PENDING.value
SENDING = DeliveryStatus.SENDING.value
PAUSED = DeliveryStatus.PAUSED.value
_deliveries = Delivery.__table__


def _take(session: Session, candidates, values: dict, *conditions) -> list[Dispatch]:
    """UPDATE the rows ``candidates`` selects (re-checking ``conditions``), return them as Dispatch."""
    ids = [row[0] for row in session.execute(candidates)]
    if not ids:
        return []
    rows = transitions.take_swept(session, ids, values, *conditions)
    return [Dispatch(delivery_id, count) for delivery_id, count in rows]


def sweep(
    session: Session, now: dt.datetime, *, timeout: float, recover_after: float, batch: int,
    max_in_flight: int = 0, lookahead: float = 0.0, sent: dt.datetime | None = None,
) -> list[Dispatch]:
    """Find what needs a broker message now; return it for publishing after commit.

    ``sent``: when beat sent this run (its slot's start), if it did. Steps 1 and 3
    judge what is overdue by it rather than by ``now``: a run that waited in the
    queue behind a backlog found every message published after it still queued,
    and would have taken those for lost and sent them all again (a loaded cluster
    then made 1.7 to 2.3 claims per attempt, docs/reliability.md). It delays their
    recovery by the run's own wait.

    1. Claims whose worker died: sending for longer than the attempt time-out
       plus ``recover_after`` seconds go back to pending, count restored.
    2. Parked deliveries that are due; and paced ones (holding a rate's slot,
       pacing.py) whose slot comes within ``lookahead`` seconds (two of the
       sweep's intervals), each on a countdown to its slot: sent all at once by the
       sweep, a rate's deliveries would reach the receiver in bursts.
    3. Pending deliveries overdue by ``recover_after`` seconds: their message
       was lost (a flushed broker, a failed publish); next_attempt_at moves to
       now so each is re-published at most once per ``recover_after``.
    4. Deliveries held ``paused`` although their subscription is active (a
       resume that raced a claim).
    5. Deliveries waiting for a slot of a subscription with nothing in
       flight: a release was missed (a worker died before publishing it, or
       the last attempt in flight ended just before the delivery began to
       wait). Up to ``max_in_flight`` each (all, if 0).
    6. Deliveries behind their ordering key whose predecessor has finished: its
       record's release was missed (a claim refused just as it finished).
    Each step touches at most ``batch`` rows; the rest wait for the next sweep.
    """
    judged = min(now, sent) if sent is not None else now
    stale_before = judged - dt.timedelta(seconds=timeout + recover_after)
    lost_before = judged - dt.timedelta(seconds=recover_after)
    made_due = dict(states.made_due(now), updated_at=now)
    dispatches = []

    stale = (Delivery.status == SENDING, Delivery.claimed_at < stale_before)
    dispatches += _take(
        session,
        select(Delivery.id).where(*stale).limit(batch),
        dict(made_due, status=PENDING, attempt_count=Delivery.attempt_count - 1, claimed_at=None),
        *stale,
    )
    parked_due = (parked(_deliveries), Delivery.next_attempt_at <= now)
    dispatches += _take(
        session, select(Delivery.id).where(*parked_due).limit(batch), made_due, *parked_due
    )
    if lookahead > 0:
        dispatches += _ride_to_slots(session, now, lookahead, batch)
    lost = (due(_deliveries, lost_before),)
    dispatches += _take(session, select(Delivery.id).where(*lost).limit(batch), made_due, *lost)
    orphaned = (
        select(Delivery.id)
        .join(Subscription, Subscription.id == Delivery.subscription_id)
        .where(
            Delivery.status == PAUSED,
            Subscription.status == SubscriptionStatus.ACTIVE.value,
            Subscription.deleted_at.is_(None),
        )
        .limit(batch)
    )
    dispatches += _take(session, orphaned, dict(made_due, status=PENDING), Delivery.status == PAUSED)
    dispatches += _take(session, _forgotten_waiting(max_in_flight, batch), made_due, waiting(_deliveries))
    behind = [row[0] for row in session.execute(ordering.forgotten_behind_key(batch))]
    dispatches += [Dispatch(d_id, count)
                   for d_id, count in transitions.release_behind_key(session, behind, now)] if behind else []
    _settle_rotations(session, now, batch)
    return dispatches


def _settle_rotations(session: Session, now: dt.datetime, batch: int) -> None:
    """Write down the staged secrets that took over (tenants/rotation.py), each with its
    ``secret.rotation_activated`` entry by the actor ``service`` in this transaction: the
    secret changed at ``active_at`` (shown), not when this writes it down (the entry's
    time). A transition that settles a due swap itself reports it in its own entry."""
    for settled in settle_due(session, now, batch):
        # The secrets themselves are not read: stand-ins that differ, which the entries' one
        # rule (changes_between) redacts as it would the real ones.
        changes = changes_between(
            {"secret": "current", "next_secret": "staged",
             "next_secret_active_at": settled.active_at},
            {"secret": "staged", "next_secret": None, "next_secret_active_at": None})
        audit_log.write(session, settled.account_id, SERVICE, Action.SECRET_ROTATION_ACTIVATED,
                        Target(TargetKind.SUBSCRIPTION, settled.subscription_id), changes, at=now)


def _ride_to_slots(session: Session, now: dt.datetime, lookahead: float,
                   batch: int) -> list[Dispatch]:
    """Parked paced deliveries whose slot comes within ``lookahead`` seconds, each on a
    countdown message to its slot."""
    near = (parked(_deliveries), Delivery.paced == true(),
            Delivery.next_attempt_at <= now + dt.timedelta(seconds=lookahead))
    ids = [row[0] for row in session.execute(select(Delivery.id).where(*near).limit(batch))]
    if not ids:
        return []
    return [Dispatch(d_id, count, max(0.0, (slot - now).total_seconds()))
            for d_id, count, slot in transitions.ride_to_slots(session, ids, *near)]


def _forgotten_waiting(per_subscription: int, batch: int):
    """The oldest waiting deliveries (up to the subscription's max_in_flight, else
    ``per_subscription``, each; all if 0) of every subscription that has nothing in flight."""
    in_flight = aliased(Delivery)
    ranked = (
        select(
            Delivery.id,
            func.row_number()
            .over(partition_by=Delivery.subscription_id, order_by=(Delivery.created_at, Delivery.id))
            .label("place"),
            func.coalesce(Subscription.max_in_flight, per_subscription).label("cap"),
        )
        .join(Subscription, Subscription.id == Delivery.subscription_id)
        .where(
            waiting(_deliveries),
            ~exists().where(in_flight.subscription_id == Delivery.subscription_id,
                            in_flight.status == SENDING),
        )
        .subquery()
    )
    candidates = select(ranked.c.id).where(or_(ranked.c.cap == 0, ranked.c.place <= ranked.c.cap))
    return candidates.limit(batch)
