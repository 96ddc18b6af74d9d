"""Tenant isolation: account B, with its own valid key, can neither see nor change A's objects.

Every route that takes an id answers B exactly as for an id that does not
exist (404 ``not_found``, same message), and nothing of A's changes.
"""

from __future__ import annotations

from sqlalchemy import select

from webhooks.storage.db import session_scope
from webhooks.storage.models import Delivery, Event, Subscription

from .helpers import emit, make_subscription, set_delivery

MISSING = "00000000-0000-4000-8000-000000000000"


def _snapshot():
    """Every row of every table that B's calls could touch, as plain tuples."""
    with session_scope() as session:
        subscriptions = [
            (s.id, s.url, s.secret, s.event_types, s.description, s.status,
             s.consecutive_failures, s.paused_at, s.deleted_at)
            for s in session.scalars(select(Subscription).order_by(Subscription.id))
        ]
        deliveries = [
            (d.id, d.status, d.attempt_count, d.next_attempt_at, d.parked, d.replay_of)
            for d in session.scalars(select(Delivery).order_by(Delivery.id))
        ]
        events = session.scalars(select(Event.id).order_by(Event.id)).all()
    return subscriptions, deliveries, events


def test_b_cannot_reach_a_s_objects(client, alice, bob, broker):
    paused = make_subscription(alice.account_id, status="paused")
    active = make_subscription(alice.account_id)
    _, delivery_ids = emit(alice.account_id)
    failed = delivery_ids[0]
    set_delivery(failed, status="failed", attempt_count=1)
    make_subscription(bob.account_id)  # B has objects of its own
    emit(bob.account_id)
    before = _snapshot()
    broker.clear()

    calls = []
    for sub in (paused, active):
        base = f"/api/webhooks/subscriptions/{sub}"
        calls += [
            ("get", base, None),
            ("patch", base, {"description": "mine now", "url": "https://evil.example.com/x"}),
            ("patch", base, {}),
            ("delete", base, None),
            ("post", f"{base}/test", None),
            ("post", f"{base}/resume", None),
            ("post", f"{base}/rotate-secret", None),
        ]
    for delivery in delivery_ids:
        calls += [
            ("get", f"/api/webhooks/deliveries/{delivery}", None),
            ("post", f"/api/webhooks/deliveries/{delivery}/replay", None),
        ]

    for method, path, body in calls:
        as_b = getattr(client, method)(path, json=body, headers=bob.headers)
        missing_path = path.replace(paused, MISSING).replace(active, MISSING)
        for delivery in delivery_ids:
            missing_path = missing_path.replace(delivery, MISSING)
        as_missing = getattr(client, method)(missing_path, json=body, headers=bob.headers)
        assert as_b.status_code == 404, (method, path, as_b.get_json())
        assert as_b.get_json() == as_missing.get_json(), (method, path)

    broker.settle()
    assert _snapshot() == before
    assert broker.published == [] and broker.sweeps == 0


def test_lists_never_show_another_account_s_objects(client, alice, bob):
    a_subscription = make_subscription(alice.account_id)
    a_event, (a_delivery,) = emit(alice.account_id)
    b_subscription = make_subscription(bob.account_id)
    b_event, (b_delivery,) = emit(bob.account_id)

    def listed(path, caller):
        return [item["id"] for item in client.get(path, headers=caller.headers).get_json()["data"]]

    assert listed("/api/webhooks/subscriptions", bob) == [b_subscription]
    assert listed("/api/webhooks/subscriptions", alice) == [a_subscription]
    assert listed("/api/webhooks/deliveries", bob) == [b_delivery]
    assert listed("/api/webhooks/deliveries", alice) == [a_delivery]
    # Filters naming A's objects find nothing for B.
    for query in (f"subscription_id={a_subscription}", f"event_id={a_event}"):
        assert listed(f"/api/webhooks/deliveries?{query}", bob) == []


def test_a_cursor_from_another_account_shows_only_the_caller_s_rows(client, alice, bob):
    make_subscription(alice.account_id)
    make_subscription(bob.account_id)
    for _ in range(3):
        emit(alice.account_id)
        emit(bob.account_id)
    a_page = client.get("/api/webhooks/deliveries?limit=1", headers=alice.headers).get_json()
    b_rest = client.get(
        f"/api/webhooks/deliveries?cursor={a_page['next_cursor']}", headers=bob.headers
    ).get_json()
    with session_scope() as session:
        bob_ids = set(session.scalars(
            select(Delivery.id).where(Delivery.account_id == bob.account_id)
        ))
    assert {d["id"] for d in b_rest["data"]} <= bob_ids
