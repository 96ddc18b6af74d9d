"""Rows made directly through the core, as a worker would leave them."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import update

from webhooks.storage.db import session_scope
from webhooks.storage.models import Attempt, Delivery, Subscription, utcnow
from webhooks.storage.rollup import count_attempt

from tests.api.helpers import emit, make_subscription, set_delivery

__all__ = ["make_subscription", "emit", "set_delivery", "add_attempts", "dead_delivery",
           "pause_subscription"]


def add_attempts(delivery_id: str, outcomes: list[tuple[int | None, str]], *,
                 started: dt.datetime | None = None, error: str | None = None,
                 excerpt: str | None = "upstream said no") -> None:
    """Attempt rows 1..n with these (status code, outcome), one second apart, counted in the
    rollups as record.py counts them."""
    started = started or utcnow() - dt.timedelta(seconds=len(outcomes) + 1)
    with session_scope() as session:
        subscription_id = session.get(Delivery, delivery_id).subscription_id
        for number, (code, outcome) in enumerate(outcomes, start=1):
            attempt = Attempt(
                delivery_id=delivery_id, number=number,
                started_at=started + dt.timedelta(seconds=number), duration_ms=40 * number,
                status_code=code, error=None if code is not None else (error or "connection refused"),
                outcome=outcome, response_excerpt=excerpt if code is not None else None,
            )
            session.add(attempt)
            count_attempt(session.connection(), delivery_id=delivery_id,
                          subscription_id=subscription_id, started_at=attempt.started_at,
                          outcome=outcome, duration_ms=attempt.duration_ms)


def dead_delivery(account_id: str, subscription_id: str) -> str:
    """A delivery whose six attempts all answered 500: dead."""
    _, delivery_ids = emit(account_id)
    with session_scope() as session:
        delivery_id = next(d for d in delivery_ids
                           if session.get(Delivery, d).subscription_id == subscription_id)
    add_attempts(delivery_id, [(500, "retry")] * 5 + [(500, "dead")])
    set_delivery(delivery_id, status="dead", attempt_count=6, next_attempt_at=None)
    return delivery_id


def pause_subscription(subscription_id: str, failures: int = 25) -> None:
    with session_scope() as session:
        session.execute(update(Subscription).where(Subscription.id == subscription_id).values(
            status="paused", consecutive_failures=failures, paused_at=utcnow()))
        session.execute(update(Delivery).where(
            Delivery.subscription_id == subscription_id, Delivery.status == "pending"
        ).values(status="paused"))
