"""The second hot transition of every attempt: record how it ended, and move on.

Six steps, each written once in SQLAlchemy Core: move the delivery to the
status policy.next_step chose, insert the attempt, move the subscription's
counter (+1 for a failure, 0 for a success), release the oldest delivery of
the subscription waiting for the slot this attempt frees, release the next
delivery of its ordering key if it finished one and that one waits behind it
(ordering.py), and count the attempt in the rollups (rollup.py). Each
applies only if the delivery was still ours (sending, this attempt number),
so a record after the sweep took the claim back changes nothing.

How the engine runs them is its backend's (storage/backends): on PostgreSQL
one prepared statement of data-modifying CTEs (one round trip), on SQLite the
same statements one by one. If the counter reaches the pause
threshold (policy.pauses), or the attempt pauses it at once (a 410 Gone:
``Step.pause_reason``), the subscription is paused with its reason and its
pending deliveries held, in the same transaction.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Sequence

from sqlalchemy import Integer, String, Text, bindparam, select, update
from sqlalchemy.engine import Connection

from webhooks.audit import log as audit_log
from webhooks.audit.entries import SERVICE, Action, Target, TargetKind, changes_between
from webhooks.lifecycle import adaptive_pace, listeners, ordering, policy, transitions
from webhooks.lifecycle.changes import pause_subscription
from webhooks.lifecycle.claim import Claim
from webhooks.lifecycle.dispatch import Dispatch
from webhooks.states import DeliveryStatus, PauseReason, SubscriptionStatus, waiting
from webhooks.storage import rollup
from webhooks.storage.backends import RecordStatements, backend_of
from webhooks.storage.models import Attempt, Delivery, Subscription, UTCDateTime

__all__ = ["Recorded", "record", "record_many", "groups"]

deliveries, subscriptions, attempts = Delivery.__table__, Subscription.__table__, Attempt.__table__
SENDING = DeliveryStatus.SENDING.value


@dataclass(frozen=True)
class Recorded:
    """What recording an attempt led to: the delivery's status and what to publish."""

    status: str
    dispatch: Dispatch | None  # the retry's countdown message
    paused_subscription: bool
    # deliveries that waited for the slot this attempt frees, or behind it on its key
    released: tuple[Dispatch, ...] = ()
    notices: tuple[Dispatch, ...] = ()  # operational notices it raised (listeners.py)


# ---------------------------------------------------------------- the four steps

_MOVE = transitions.move_after_attempt()
# Parameters are named apart from every column: on SQLite, a parameter named
# like a column of an UPDATE would be taken as a value to SET.
_ATTEMPT = {
    "number": bindparam("n", type_=Integer),
    "started_at": bindparam("t_started", type_=UTCDateTime),
    "duration_ms": bindparam("t_duration", type_=Integer),
    "status_code": bindparam("code", type_=Integer),
    "error": bindparam("err", type_=Text),
    "error_kind": bindparam("kind_of_error", type_=String(32)),
    "outcome": bindparam("result", type_=Text),
    "response_excerpt": bindparam("excerpt", type_=Text),
    "location": bindparam("redirect_to", type_=Text),
}
_SUBSCRIPTION_ID = bindparam("sub_id", type_=String(36))
_THIS_SUBSCRIPTION = subscriptions.c.id == _SUBSCRIPTION_ID
_COUNT_FAILURE = (update(subscriptions).where(_THIS_SUBSCRIPTION)
                  .values(consecutive_failures=subscriptions.c.consecutive_failures + 1))
# A success writes the subscription's row only if there is a failure to forget.
_COUNT_SUCCESS = (update(subscriptions)
                  .where(_THIS_SUBSCRIPTION, subscriptions.c.consecutive_failures != 0)
                  .values(consecutive_failures=0))


def _release(locking: bool):
    """Make the oldest delivery waiting for a slot of the subscription due now (``locking``:
    skip rows another transaction holds, on PostgreSQL)."""
    w = deliveries.alias("w")
    oldest = (select(w.c.id)
              .where(w.c.subscription_id == _SUBSCRIPTION_ID, waiting(w))
              .order_by(w.c.created_at, w.c.id).limit(1))
    if locking:
        oldest = oldest.with_for_update(skip_locked=True)
    # No second test of "waiting" here: the subquery locks the rows it picks
    # (FOR UPDATE re-checks them), and a second test let the planner run it
    # once per waiting row, releasing more than ``limit``.
    return transitions.release_oldest_waiting(oldest)


# What the backends run, handed to them with each record (storage knows tables, not rules).
STATEMENTS = RecordStatements(
    move=_MOVE, attempts=attempts, attempt_values=_ATTEMPT, deliveries=deliveries,
    subscriptions=subscriptions, subscription_id=_SUBSCRIPTION_ID,
    count_failure=_COUNT_FAILURE, count_success=_COUNT_SUCCESS, release=_release,
    successor=ordering.RELEASE, successor_key=ordering.KEY,
    release_successor=ordering.release_successor,
    count_in_statement=rollup.count_in_statement, count_attempt=rollup.count_attempt)


# ---------------------------------------------------------------- the transition


def _pause_if_due(connection: Connection, claim: Claim, step: policy.Step, rules: policy.Rules,
                  failures: int | None, now: dt.datetime) -> PauseReason | None:
    """Pause the subscription if this attempt does: at once with the step's reason (410),
    or for its failures when the counter (``failures``, after it moved) met the pause rule.
    The reason if this attempt paused it; None if it did not (or it was paused already).
    A pause is written to the account's audit log, by the actor ``service``."""
    if step.pause_reason is not None:
        reason = step.pause_reason
    elif failures is not None and policy.pauses(failures, rules, claim.event_type):
        reason = PauseReason.FAILURES
    else:
        return None
    if not pause_subscription(connection, claim.subscription_id, now, reason):
        return None
    _audit_pause(connection, claim.subscription_id, PauseReason(reason), now)
    return reason


_ACCOUNT_OF = select(subscriptions.c.account_id).where(_THIS_SUBSCRIPTION)


def _audit_pause(connection: Connection, subscription_id: str, reason: PauseReason,
                 now: dt.datetime) -> None:
    """The ``subscription.paused`` entry of a pause by the rule or a 410 (actor
    ``service``), in the record's transaction. The pause moved the subscription from
    active (its only condition) to paused with ``reason``."""
    account_id = connection.execute(_ACCOUNT_OF, {"sub_id": subscription_id}).scalar_one()
    changes = changes_between({"status": SubscriptionStatus.ACTIVE.value, "paused_reason": None},
                              {"status": SubscriptionStatus.PAUSED.value,
                               "paused_reason": reason.value})
    audit_log.write(connection, account_id, SERVICE, Action.SUBSCRIPTION_PAUSED,
                    Target(TargetKind.SUBSCRIPTION, subscription_id), changes, at=now)


def record(connection: Connection, claim: Claim, *, step: policy.Step, rules: policy.Rules,
           started_at: dt.datetime, now: dt.datetime, duration_ms: int, status_code: int | None,
           error: str | None, excerpt: str | None,
           location: str | None = None, error_kind: str | None = None,
           pace: adaptive_pace.Pace | None = None) -> Recorded | None:
    """Record a finished attempt and carry out ``step``; None if the claim was taken back.

    A retry that rides a countdown comes back as a Dispatch with that
    countdown, for the caller to publish after commit. In the same
    transaction, the subscription's adaptive pace moves (``pace``,
    adaptive_pace.py), and a keyed delivery that finished releases the next
    one of its key (ordering.py).
    """
    params = _params(claim, step, started_at, now, duration_ms, status_code, error, excerpt,
                     location, error_kind)
    pacing_on = pace is not None and pace.enabled
    success = step.outcome is policy.Outcome.SUCCESS
    if adaptive_pace.needs_transaction(claim, success, pacing_on):
        # A success alone commits on its own; this one moves the limit after its record.
        adaptive_pace.open_transaction(connection, claim.subscription_id)
    # PostgreSQL: the steps in one prepared statement; SQLite: one by one. A keyed
    # delivery that finished releases the next of its key among them (ordering.py).
    moved = backend_of(connection).record(connection, params, step.is_failure, STATEMENTS)
    if moved is None:
        return None
    failures, released = moved[0], _dispatches(moved[1])
    if pacing_on:
        adaptive_pace.after_attempt(connection, claim, status_code=status_code,
                                    error_kind=error_kind, success=success, pace=pace, now=now)
    status = step.status
    dispatch = (Dispatch(claim.delivery_id, claim.attempt_number, step.retry_after)
                if step.wait is policy.Wait.COUNTDOWN else None)
    paused_for = _pause_if_due(connection, claim, step, rules, failures, now)
    paused_now = paused_for is not None
    if paused_now:
        # The released delivery is held with the others; resume sends it.
        transitions.hold_pending(connection, claim.subscription_id, now)
        released = []
        if step.status_if_paused != status:
            status, dispatch = step.status_if_paused, None
    notices = _notices(connection, claim, status, status_code, paused_for, now)
    return Recorded(status, dispatch, paused_now, tuple(released), notices)


def groups(claim: Claim, step: policy.Step) -> bool:
    """True when recording this attempt is one statement and nothing after it: a success
    that moves no in-flight limit (its claim read none lowered) and pauses nothing (the
    release of a keyed delivery's successor is one of the statement's steps). Such records
    of concurrent attempts may run together (:func:`record_many`, group_commit.py); any
    other runs alone (:func:`record`)."""
    return (step.outcome is policy.Outcome.SUCCESS and step.pause_reason is None
            and step.wait is policy.Wait.NONE and claim.in_flight_limit is None)


def record_many(connection: Connection, attempts: Sequence[dict]) -> list[Recorded | None]:
    """:func:`record` for each of ``attempts`` (its keyword arguments), all of which
    :func:`groups`, in one statement and one commit on PostgreSQL: each exactly as it
    would run alone, seeing what the ones before it wrote. Each one's Recorded, or None
    if its claim was taken back."""
    for one in attempts:
        if not groups(one["claim"], one["step"]):
            raise ValueError(f"the record of delivery {one['claim'].delivery_id} runs alone")
    released = backend_of(connection).record_many(connection, [
        _params(one["claim"], one["step"], one["started_at"], one["now"], one["duration_ms"],
                one["status_code"], one["error"], one["excerpt"], one.get("location"),
                one.get("error_kind")) for one in attempts], STATEMENTS)
    return [None if rows is None else Recorded(one["step"].status, None, False,
                                               tuple(_dispatches(rows)))
            for one, rows in zip(attempts, released)]


def _dispatches(released: Sequence[tuple[str, int]]) -> list[Dispatch]:
    """The messages of the deliveries a record released, (id, attempt_count) each: due now."""
    return [Dispatch(delivery_id, count) for delivery_id, count in released]


def _params(claim: Claim, step: policy.Step, started_at: dt.datetime, now: dt.datetime,
            duration_ms: int, status_code: int | None, error: str | None, excerpt: str | None,
            location: str | None, error_kind) -> dict:
    """The parameters of the record's statements."""
    return dict(
        d_id=claim.delivery_id, n=claim.attempt_number, new_status=step.status,
        next_at=None if step.retry_after is None else now + dt.timedelta(seconds=step.retry_after),
        park=step.wait is policy.Wait.PARKED, now=now, t_started=started_at,
        t_duration=duration_ms, code=status_code, err=error, result=step.outcome.value,
        excerpt=excerpt, redirect_to=location, sub_id=claim.subscription_id,
        okey=claim.ordering_key, kseq=claim.key_sequence,
        kind_of_error=None if error_kind is None else str(getattr(error_kind, "value", error_kind)),
    )


def _notices(connection, claim: Claim, status: str, status_code: int | None,
             paused_for: PauseReason | None, now: dt.datetime) -> tuple[Dispatch, ...]:
    """The operational notices this record raises, stored in its transaction: delivery.dead
    or delivery.failed if the delivery ended so, subscription.paused (with the reason it
    paused for: failures, or gone) if it paused.

    Each of these follows a failed attempt (policy: the counter adds one), whose record
    opens a transaction on the attempt engine (the PostgreSQL backend sends BEGIN with
    its statement): the notices commit with the record, or not at all."""
    heard = listeners.registered()  # operational webhooks (operational/notices.py)
    ended = heard.delivery_ended(
        connection, status, subscription_id=claim.subscription_id,
        delivery_id=claim.delivery_id, event_id=claim.event_id, event_type=claim.event_type,
        attempt_count=claim.attempt_number, status_code=status_code)
    paused = ([] if paused_for is None else heard.subscription_paused(
        connection, claim.subscription_id, reason=str(getattr(paused_for, "value", paused_for)),
        now=now))
    return (*ended, *paused)
