"""Rows and messages the scenarios start from, made fast.

Accounts and subscriptions are created through the ORM like the tests do;
thousands of deliveries are made in one server-side ``INSERT ... SELECT``
(events and their deliveries in one statement, bodies built from one real
envelope), then their broker messages are published.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass

from sqlalchemy import text

__all__ = ["Target", "make_target", "add_subscription", "bulk_deliveries", "publish_deliveries", "sample_body",
           "EVENT_TYPE", "PLACEHOLDER_ID"]

EVENT_TYPE = "reply.received"
PLACEHOLDER_ID = "00000000-0000-4000-8000-000000000000"


@dataclass(frozen=True)
class Target:
    """An account with one subscription to ``url``."""

    account_id: str
    subscription_id: str
    url: str
    secret: str


def make_target(url: str, name: str = "bench", signature_scheme: str = "service") -> Target:
    """Create an account and one subscription (all event types) to ``url``, signed in
    ``signature_scheme``."""
    from webhooks.storage.db import session_scope
    from webhooks.tenants.accounts import create_account

    with session_scope() as session:
        account, _ = create_account(session, name)
        account_id = account.id
    return add_subscription(account_id, url, signature_scheme=signature_scheme)


def add_subscription(account_id: str, url: str, secret: str | None = None,
                     signature_scheme: str = "service") -> Target:
    """One more subscription (all event types) of the account to ``url``; a new secret (or
    private key) of ``signature_scheme``'s format if None."""
    from webhooks.storage.db import session_scope
    from webhooks.storage.models import Subscription, new_id, utcnow
    from webhooks.tenants.schemes import new_secret

    with session_scope() as session:
        subscription = Subscription(
            id=new_id(), account_id=account_id, url=url,
            secret=secret or new_secret(signature_scheme), signature_scheme=signature_scheme,
            event_types=None, status="active", consecutive_failures=0, created_at=utcnow(),
        )
        session.add(subscription)
        session.flush()
        return Target(account_id, subscription.id, url, subscription.secret)


def sample_body(event_id: str = PLACEHOLDER_ID, event_type: str = EVENT_TYPE) -> bytes:
    """A real serialised envelope of ``event_type`` (sample data), as emit_event stores it."""
    from webhooks.config import get_settings
    from webhooks.events.envelope import build_envelope, serialise
    from webhooks.events.samples import sample_data
    from webhooks.storage.models import utcnow

    envelope = build_envelope(event_id=event_id, event_type=event_type,
                              data=sample_data(event_type), created_at=utcnow(),
                              version=get_settings().version)
    return serialise(envelope)


_BULK_SQL = text("""
WITH new_events AS (
    INSERT INTO events (id, account_id, type, version, idempotency_key, body, created_at)
    SELECT s.id, :account_id, :event_type, :version, NULL,
           convert_to(replace(:template, :placeholder, s.id), 'UTF8'), :now
    FROM (SELECT gen_random_uuid()::text AS id FROM generate_series(1, :n)) AS s
    RETURNING id
)
INSERT INTO deliveries (id, account_id, event_id, subscription_id, event_type, status,
                        attempt_count, next_attempt_at, parked, claimed_at, replay_of,
                        created_at, updated_at)
SELECT gen_random_uuid()::text, :account_id, new_events.id, :subscription_id, :event_type,
       'pending', :attempt_count, :next_attempt_at, :parked, NULL, NULL, :now, :now
FROM new_events
RETURNING id
""")


def bulk_deliveries(target: Target, n: int, *, attempt_count: int = 0,
                    next_attempt_at: dt.datetime | None = None, parked: bool = False,
                    chunk: int = 20_000) -> list[str]:
    """Insert ``n`` events and one pending delivery each to ``target``; returns the delivery ids.

    ``attempt_count`` and ``next_attempt_at`` (aware UTC, default now) give
    the state a delivery is in after that many failed attempts; ``parked``
    says whether a broker message carries its next attempt (False) or the
    sweep must send it (True).
    """
    from webhooks.config import get_settings
    from webhooks.storage.db import session_scope

    now = dt.datetime.now(dt.timezone.utc)
    template = sample_body().decode()
    naive = lambda moment: moment.astimezone(dt.timezone.utc).replace(tzinfo=None)  # noqa: E731
    ids: list[str] = []
    for start in range(0, n, chunk):
        with session_scope() as session:
            rows = session.execute(_BULK_SQL, {
                "account_id": target.account_id, "subscription_id": target.subscription_id,
                "event_type": EVENT_TYPE, "version": get_settings().version,
                "template": template, "placeholder": PLACEHOLDER_ID,
                "n": min(chunk, n - start), "attempt_count": attempt_count,
                "next_attempt_at": naive(next_attempt_at or now), "parked": parked,
                "now": naive(now),
            })
            ids.extend(row[0] for row in rows)
    return ids


def publish_deliveries(delivery_ids: list[str], attempt_count: int = 0, *,
                       eta: dt.datetime | None = None) -> float:
    """Publish one deliver message per id; returns messages published per second.

    Without ``eta`` this is the service's own path (``webhooks.broker.outbox.send_to_broker``);
    with ``eta`` (aware UTC) each message is a countdown due then, as a failed
    attempt's retry is.
    """
    from webhooks.broker import celery_app, outbox
    from webhooks.lifecycle.dispatch import Dispatch

    started = time.perf_counter()
    if eta is None:
        failed = outbox.send_to_broker(Dispatch(i, attempt_count) for i in delivery_ids)
        if failed:
            raise RuntimeError(f"{len(failed)} messages could not be published")
    else:
        app = celery_app.celery_app
        with app.producer_or_acquire() as producer:
            for delivery_id in delivery_ids:
                app.send_task(celery_app.DELIVER_TASK, args=(delivery_id, attempt_count), eta=eta,
                              producer=producer)
    elapsed = time.perf_counter() - started
    return len(delivery_ids) / elapsed if elapsed > 0 else 0.0
