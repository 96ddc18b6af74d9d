"""Helpers for the API tests: callers with API keys, and rows made without the API."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from sqlalchemy import insert, update

from webhooks.broker import outbox
from webhooks.emit import emit_event
from webhooks.events.samples import sample_data
from webhooks.storage.db import session_scope
from webhooks.storage.models import Delivery, Event, Subscription, new_id, utcnow
from webhooks.tenants.accounts import create_account, new_signing_secret

__all__ = [
    "Caller", "new_caller", "make_subscription", "emit", "settle_publisher", "set_delivery",
    "insert_deliveries",
]


@dataclass
class Caller:
    """An account as a client sees it: its id and the headers that carry its key."""

    account_id: str
    api_key: str
    headers: dict = field(init=False)

    def __post_init__(self):
        self.headers = {"Authorization": f"Bearer {self.api_key}"}


def new_caller(name: str = "acme") -> Caller:
    with session_scope() as session:
        account, api_key = create_account(session, name)
        return Caller(account.id, api_key)


def make_subscription(account_id: str, url: str = "https://hooks.example.com/in", *,
                      event_types=None, status: str = "active") -> str:
    """A subscription row; returns its id."""
    subscription_id = new_id()
    with session_scope() as session:
        session.add(Subscription(
            id=subscription_id, account_id=account_id, url=url, secret=new_signing_secret(),
            event_types=event_types, description=None, status=status, consecutive_failures=0,
            paused_at=utcnow() if status == "paused" else None, created_at=utcnow(),
        ))
    return subscription_id


def emit(account_id: str, event_type: str = "email.sent") -> tuple[str, tuple[str, ...]]:
    """Emit one sample event through the core; returns (event id, delivery ids)."""
    emitted = emit_event(account_id, event_type, sample_data(event_type))
    settle_publisher()
    return emitted.id, emitted.delivery_ids


def settle_publisher(timeout: float = 10.0) -> None:
    """Wait until the core's background publisher has sent what it was handed.

    emit_event and send_test publish from a thread after the commit; waiting
    makes a test deterministic: nothing publishes behind its back later.
    """
    assert outbox.flush(timeout), "the background publisher did not finish in time"


def set_delivery(delivery_id: str, **values) -> None:
    """Force a delivery's columns (status, attempt_count, ...) as a worker would leave them."""
    with session_scope() as session:
        session.execute(update(Delivery).where(Delivery.id == delivery_id).values(**values))


def insert_deliveries(account_id: str, subscription_id: str, created: list[dt.datetime],
                      event_type: str = "email.sent") -> list[str]:
    """Delivery rows with the given created_at values (one event); returns their ids."""
    event_id = new_id()
    now = utcnow()
    ids = [new_id() for _ in created]
    with session_scope() as session:
        session.execute(insert(Event).values(
            id=event_id, account_id=account_id, type=event_type, version="2026-07-30",
            idempotency_key=None, body=b"{}", created_at=now,
        ))
        session.execute(insert(Delivery), [
            dict(id=delivery_id, account_id=account_id, event_id=event_id,
                 subscription_id=subscription_id, event_type=event_type, status="pending",
                 attempt_count=0, next_attempt_at=at, parked=False, created_at=at, updated_at=at)
            for delivery_id, at in zip(ids, created)
        ])
    return ids
