"""The transitions outside the hot path, as SQL, one function each: a subscription's
life (create, change, pause by the rule or by hand, hold, resume, delete) and replay. Secret rotation is in
rotation.py, recover (replay in bulk) in recover.py.

The per-attempt claim and record are in claim.py and record.py, the sweep in
sweep.py. Every function takes the caller's session (or connection) and
never commits: the caller owns the transaction. Transitions are conditional
UPDATEs, so they are atomic on PostgreSQL and SQLite alike.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import update
from sqlalchemy.orm import Session

from webhooks.config import tracing
from webhooks.errors import Conflict, NotFound
from webhooks.lifecycle import listeners, transitions
from webhooks.lifecycle.dispatch import Dispatch
from webhooks.states import DeliveryStatus, PauseReason, SubscriptionStatus, held_while
from webhooks.storage import oauth2_tokens
from webhooks.storage.models import Delivery, Subscription, new_id
from webhooks.tenants.options import SETTABLE
from webhooks.tenants.quotas import reserve_subscription_slot
from webhooks.tenants.schemes import DEFAULT_SCHEME, SignatureScheme, new_secret

__all__ = [
    "SETTINGS",
    "replay_row",
    "create_subscription",
    "change_subscription",
    "pause_subscription",
    "pause_by_hand",
    "hold_pending",
    "resume_subscription",
    "replay_delivery",
    "delete_subscription",
]

PENDING = DeliveryStatus.PENDING.value
PAUSED = DeliveryStatus.PAUSED.value
ACTIVE = SubscriptionStatus.ACTIVE.value
PAUSED_SUBSCRIPTION = SubscriptionStatus.PAUSED.value
# The settings of a subscription that its owner may set (at creation and later), with
# their defaults: inputs are validated by the caller (web/schemas, custom_headers.py).
# Beside the three of every subscription, the options declared in tenants/options.py.
SETTINGS = {"event_types": None, "description": None, "headers": None, **SETTABLE,
            # the credentials its receiver requires, stored as tenants/credentials.py makes them
            "client_certificate": None, "oauth2": None,
            # what it receives and how it retries (CONTRACT 10.4): events/filters.py and
            # tenants/retry_schedules.py; None: every event of its types, the service's ladder
            "filter": None, "retry_schedule": None}


def create_subscription(
    session: Session,
    account_id: str,
    url: str,
    *,
    now: dt.datetime,
    max_subscriptions: int | None = None,
    signature_scheme: str = DEFAULT_SCHEME,
    **settings,
) -> Subscription:
    """A new active subscription with a fresh signing secret in the format of its
    ``signature_scheme`` (tenants/schemes.py; inputs already validated); ``settings`` are
    those of :data:`SETTINGS` (the others take their defaults).

    Conflict ``subscription_limit`` when the account already has
    ``max_subscriptions`` (default WEBHOOKS_MAX_SUBSCRIPTIONS) live ones.
    """
    unknown = set(settings) - set(SETTINGS)
    if unknown:
        raise TypeError(f"not settings of a subscription: {sorted(unknown)}")
    reserve_subscription_slot(session, account_id, max_subscriptions)
    subscription = Subscription(
        id=new_id(),
        account_id=account_id,
        url=url,
        secret=new_secret(signature_scheme),
        signature_scheme=SignatureScheme(signature_scheme).value,
        **{**SETTINGS, **settings, "headers": settings.get("headers") or None},
        status=ACTIVE,
        consecutive_failures=0,
        paused_at=None,
        paused_reason=None,
        created_at=now,
    )
    session.add(subscription)
    session.flush()
    return subscription


def change_subscription(session: Session, subscription_id: str, **changes) -> None:
    """Change the given settings (``url`` and those of :data:`SETTINGS`) of a live
    subscription; NotFound if there is none. Inputs are validated by the caller."""
    unknown = set(changes) - set(SETTINGS) - {"url"}
    if unknown:
        raise TypeError(f"not settings of a subscription: {sorted(unknown)}")
    if "headers" in changes:
        changes["headers"] = changes["headers"] or None  # {} is stored as none
    if not changes:
        return
    written = dict(changes)
    if "max_in_flight" in changes:
        # A new cap starts the adaptive pace over from it (adaptive_pace.py).
        written.update(in_flight_limit=None, pace_successes=0)
    found = session.execute(
        update(Subscription)
        .where(Subscription.id == subscription_id, Subscription.deleted_at.is_(None))
        .values(**written)
    )
    if found.rowcount != 1:
        raise NotFound("subscription not found")
    if "oauth2" in changes:
        # No token of the old settings stays stored; the next attempt fetches one.
        oauth2_tokens.forget(session, subscription_id)


def pause_subscription(session, subscription_id: str, now: dt.datetime,
                       reason: PauseReason = PauseReason.FAILURES) -> bool:
    """active -> paused for ``reason`` (the pause rule was met, a 410, or its owner asked);
    False if it was not active (or is deleted): of concurrent attempts that reach the
    threshold, exactly one pauses it, and a paused one keeps its first reason."""
    paused = session.execute(
        update(Subscription)
        .where(Subscription.id == subscription_id, Subscription.status == ACTIVE,
               Subscription.deleted_at.is_(None))
        .values(status=SubscriptionStatus.PAUSED.value, paused_at=now,
                paused_reason=PauseReason(reason).value)
    )
    return paused.rowcount == 1


def pause_by_hand(session: Session, subscription_id: str, now: dt.datetime) -> bool:
    """Its owner pauses it: active -> paused (reason ``manual``) and its pending deliveries
    held, exactly as the pause rule does (record.py); False if it was paused already."""
    paused = pause_subscription(session, subscription_id, now, PauseReason.MANUAL)
    if paused:
        transitions.hold_pending(session, subscription_id, now)
    return paused


hold_pending = transitions.hold_pending  # a paused subscription's pending deliveries -> paused


def resume_subscription(session: Session, subscription_id: str, now: dt.datetime) -> int | None:
    """paused -> active (whatever the reason), counter to 0, reason cleared, held deliveries
    parked and due now; returns how many were held. An active subscription only has its
    counter set to 0: None (nothing was held).

    The held deliveries are parked and due, so nothing of them is lost whatever
    happens next: the caller sends them in bounded batches (release.py), and
    the sweep would send whatever it does not.
    """
    resumed = session.execute(
        update(Subscription)
        .where(Subscription.id == subscription_id, Subscription.status == PAUSED_SUBSCRIPTION,
               Subscription.deleted_at.is_(None))
        .values(status=ACTIVE, consecutive_failures=0, paused_at=None, paused_reason=None)
    )
    if resumed.rowcount == 1:
        return transitions.release_held(session, subscription_id, now)
    found = session.execute(
        update(Subscription)
        .where(Subscription.id == subscription_id, Subscription.deleted_at.is_(None))
        .values(consecutive_failures=0)
    )
    if found.rowcount != 1:
        raise NotFound("subscription not found")
    return None


def replay_row(original, *, held: bool, parked: bool, now: dt.datetime) -> dict:
    """The row of a replay of ``original`` (a delivery or a row with its ids and type): a
    new delivery of the same event to the same subscription, attempts from 1, due now;
    ``paused`` if ``held`` (its subscription is paused), else pending, ``parked`` for
    the sweep to send or carried by a message the caller publishes. With tracing on, its
    attempts go in a new trace, linked to the original's (config/tracing.py)."""
    replay_id = new_id()
    return dict(
        id=replay_id,
        account_id=original.account_id,
        event_id=original.event_id,
        subscription_id=original.subscription_id,
        event_type=original.event_type,
        status=PAUSED if held else PENDING,
        attempt_count=0,
        next_attempt_at=now,
        parked=parked and not held,
        replay_of=original.id,
        trace_context=tracing.replay_trace_context(
            original.trace_context, delivery_id=replay_id, replay_of=original.id,
            event_id=original.event_id, subscription_id=original.subscription_id),
        created_at=now,
        updated_at=now,
    )


def replay_delivery(session: Session, delivery: Delivery, now: dt.datetime) -> Delivery:
    """A new delivery of the same event to the same subscription, attempts from 1.

    Only a ``failed`` or ``dead`` delivery may be replayed (Conflict otherwise);
    the original is left as it was. A paused subscription holds the replay;
    otherwise it is published after the caller's transaction commits.
    """
    if delivery.status not in (DeliveryStatus.FAILED.value, DeliveryStatus.DEAD.value):
        raise Conflict(
            "not_replayable",
            "only failed or dead deliveries can be replayed; "
            f"this one is {DeliveryStatus(delivery.status).public}",
        )
    subscription = session.get(Subscription, delivery.subscription_id)
    if subscription is None or subscription.deleted_at is not None:
        raise Conflict("not_replayable", "the subscription of this delivery has been deleted")
    held = held_while(subscription.status, delivery.event_type)
    replay = transitions.add_replay(session, replay_row(delivery, held=held, parked=False, now=now))
    if not held:
        # Like emit_event: published by the background publisher once the
        # caller commits, so a request never waits for the broker (listeners.py).
        listeners.registered().publish_after_commit(session, [Dispatch(replay.id, 0)])
    return replay


def delete_subscription(session: Session, subscription_id: str, now: dt.datetime) -> None:
    """Soft-delete a subscription; its waiting deliveries end ``failed`` with no further attempt."""
    found = session.execute(
        update(Subscription)
        .where(Subscription.id == subscription_id, Subscription.deleted_at.is_(None))
        .values(deleted_at=now)
    )
    if found.rowcount != 1:
        raise NotFound("subscription not found")
    transitions.fail_waiting(session, subscription_id, now)
