"""A paused delivery's ``next_attempt_at`` in the API: null while the pause holds it."""

from __future__ import annotations

import datetime as dt

from webhooks.storage.db import session_scope
from webhooks.storage.models import utcnow

from .helpers import emit, make_subscription, set_delivery

BASE = "/api/webhooks/deliveries"


def test_a_paused_delivery_has_no_next_attempt_until_resumed(client, alice, broker):
    """Held by a pause, a delivery will not be sent: no next attempt is shown (the dashboard
    shows "—"), though the row keeps the time it was due before. A test ping is never held."""
    from webhooks.lifecycle import changes as store

    subscription_id = make_subscription(alice.account_id, event_types=["email.sent", "test.ping"])
    _, (held,) = emit(alice.account_id, "email.sent")
    _, (ping,) = emit(alice.account_id, "test.ping")
    was_due = utcnow() - dt.timedelta(minutes=5)
    set_delivery(held, attempt_count=1, next_attempt_at=was_due)
    set_delivery(ping, attempt_count=1, next_attempt_at=was_due)
    with session_scope() as session:  # what the worker does on the 25th failure in a row
        assert store.pause_subscription(session, subscription_id, utcnow())
        assert store.hold_pending(session, subscription_id, utcnow()) == 1

    def shown(delivery_id):
        return client.get(f"{BASE}/{delivery_id}", headers=alice.headers).get_json()

    assert (shown(held)["status"], shown(held)["next_attempt_at"]) == ("paused", None)
    listed = {d["id"]: d for d in client.get(BASE, headers=alice.headers).get_json()["data"]}
    assert listed[held]["next_attempt_at"] is None
    assert shown(ping)["status"] == "pending" and shown(ping)["next_attempt_at"].endswith("Z")

    resumed = client.post(f"/api/webhooks/subscriptions/{subscription_id}/resume",
                          headers=alice.headers)
    assert resumed.status_code == 200
    after = shown(held)
    assert after["status"] == "pending"
    assert dt.datetime.fromisoformat(after["next_attempt_at"].replace("Z", "+00:00")) > was_due
