"""Pause a subscription by hand, resume a paused one, and send what the resume released.

(A subscription also pauses itself, in the record of an attempt: lifecycle/record.py,
for its failures or a 410 Gone.)

A resume sends the deliveries its subscription held, and only those, in bounded
batches (lifecycle/release.py): the first with the resume itself, the rest by
that subscription's one release task. It never asks for a sweep, and resuming
a subscription that is active already sends nothing at all.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from webhooks.broker import outbox
from webhooks.broker.outbox import publish_after_commit, publish_now, request_release_after_commit
from webhooks.config import get_settings
from webhooks.lifecycle import changes, release
from webhooks.lifecycle.dispatch import Dispatch
from webhooks.operational import notices as operational
from webhooks.states import PauseReason
from webhooks.services import audit
from webhooks.services.audit import Action, Actor
from webhooks.storage import clock
from webhooks.storage.db import session_scope
from webhooks.storage.models import Subscription, utcnow

__all__ = ["PauseReason", "pause", "resume", "send_next_batch"]


def pause(session: Session, subscription: Subscription, *, actor: Actor) -> bool:
    """Its owner pauses it (reason ``manual``): its deliveries are held exactly as a pause by
    the rule holds them, until it is resumed. False if it was paused already (nothing
    changes, its reason stays). Pausing raises the subscription.paused notice (reason
    ``manual``) and writes its ``subscription.paused`` entry by ``actor``, in the same
    transaction."""
    now = utcnow()
    before = audit.snapshot(subscription)
    paused = changes.pause_by_hand(session, subscription.id, now)
    session.refresh(subscription)
    if paused:
        audit.subscription_changed(session, subscription, before, Action.SUBSCRIPTION_PAUSED,
                                   actor, at=now)  # subscription.paused, in this transaction (webhooks/operational)
        publish_after_commit(session, operational.notify_paused(
            session, subscription.id, reason=PauseReason.MANUAL.value, now=now))
    return paused


def resume(session: Session, subscription: Subscription, *, actor: Actor) -> int:
    """Active again, failure counter at 0; returns how many held deliveries were released.

    The oldest ``WEBHOOKS_RELEASE_BATCH`` of them are published once the caller's
    transaction commits; if there are more, the subscription's release task is sent
    then, unless one runs already (lifecycle/release.py). Resuming a paused subscription
    raises the subscription.resumed notice and writes its ``subscription.resumed`` entry
    by ``actor`` in the same transaction. Resuming one that is active only sets its
    counter to 0: no message, no task, no notice, no entry.
    """
    settings = get_settings()
    now = clock.now()  # the database's: the released deliveries are due by it
    before = audit.snapshot(subscription)
    released = changes.resume_subscription(session, subscription.id, now)
    session.refresh(subscription)
    if released is None:
        return 0
    audit.subscription_changed(session, subscription, before, Action.SUBSCRIPTION_RESUMED, actor)
    # subscription.resumed, in this transaction (webhooks/operational)
    notices = operational.notify_resumed(session, subscription.id, now=now)
    batch = release.take_batch(session, subscription.id, now, settings.release_batch)
    publish_after_commit(session, notices + [Dispatch(*taken) for taken in batch])
    if len(batch) == settings.release_batch and release.hold_release(
            session, subscription.id, now, stale=settings.recover_after):
        request_release_after_commit(session, subscription.id)
    return released


def send_next_batch(subscription_id: str) -> int:
    """A run of the subscription's release task (worker/tasks.py): take the next batch of
    what a resume released, commit, publish it, and send the task again if the batch
    was full; returns how many were sent. Ends when the subscription is paused again or
    deleted (its deliveries are held again, or failed)."""
    settings = get_settings()
    with session_scope() as session:
        now = clock.now()
        if not release.continue_release(session, subscription_id, now):
            return 0
        batch = release.take_batch(session, subscription_id, now, settings.release_batch)
        more = len(batch) == settings.release_batch
        if not more:
            release.end_release(session, subscription_id)
    publish_now([Dispatch(*taken) for taken in batch])
    if more:
        outbox.request_release(subscription_id)
    return len(batch)
