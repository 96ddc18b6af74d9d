"""``POST /subscriptions/<id>/pause`` and ``paused_reason`` (CONTRACT 9.3): a subscription
paused by hand holds its deliveries exactly as one the pause rule paused, and resume
clears the reason whatever it was."""

from __future__ import annotations

from webhooks.lifecycle import changes
from webhooks.storage.db import session_scope
from webhooks.storage.models import Delivery, Subscription, utcnow

from .helpers import emit, make_subscription, new_caller

BASE = "/api/webhooks/subscriptions"


def _row(subscription_id: str) -> Subscription:
    with session_scope() as session:
        return session.get(Subscription, subscription_id)


def _status(delivery_id: str) -> str:
    with session_scope() as session:
        return session.get(Delivery, delivery_id).status


def test_pause_holds_its_deliveries_until_resume_clears_the_reason(client, alice, broker):
    subscription_id = make_subscription(alice.account_id, event_types=["email.sent", "test.ping"])
    _, (waiting,) = emit(alice.account_id)
    assert client.get(f"{BASE}/{subscription_id}", headers=alice.headers).get_json()[
        "paused_reason"] is None

    response = client.post(f"{BASE}/{subscription_id}/pause", headers=alice.headers)
    assert response.status_code == 200
    body = response.get_json()
    assert (body["status"], body["paused_reason"]) == ("paused", "manual")
    assert body["paused_at"].endswith("Z") and "secret" not in body
    assert _status(waiting) == "paused"  # held, as the pause rule holds them
    _, (later,) = emit(alice.account_id)
    _, (ping,) = emit(alice.account_id, "test.ping")
    assert (_status(later), _status(ping)) == ("paused", "pending")  # test.ping is never held
    listed = client.get(BASE, headers=alice.headers).get_json()["data"]
    assert [s["paused_reason"] for s in listed] == ["manual"]

    resumed = client.post(f"{BASE}/{subscription_id}/resume", headers=alice.headers)
    assert resumed.status_code == 200
    assert (resumed.get_json()["status"], resumed.get_json()["paused_reason"]) == ("active", None)
    assert _row(subscription_id).paused_reason is None
    assert {_status(waiting), _status(later)} == {"pending"}


def test_pausing_a_paused_subscription_changes_nothing(client, alice, broker):
    subscription_id = make_subscription(alice.account_id)
    with session_scope() as session:  # what the worker does at the threshold
        assert changes.pause_subscription(session, subscription_id, utcnow())
    before = _row(subscription_id)
    assert before.paused_reason == "failures"

    response = client.post(f"{BASE}/{subscription_id}/pause", headers=alice.headers)
    assert response.status_code == 200
    assert (response.get_json()["status"], response.get_json()["paused_reason"]) == (
        "paused", "failures")
    after = _row(subscription_id)
    assert (after.paused_reason, after.paused_at) == ("failures", before.paused_at)

    again = client.post(f"{BASE}/{subscription_id}/resume", headers=alice.headers)
    assert again.get_json()["paused_reason"] is None


def test_a_paused_row_without_a_reason_shows_failures(client, alice):
    """A worker of the release before migration 0013 pauses without a reason; it paused only
    for failures."""
    subscription_id = make_subscription(alice.account_id, status="paused")
    body = client.get(f"{BASE}/{subscription_id}", headers=alice.headers).get_json()
    assert (body["status"], body["paused_reason"]) == ("paused", "failures")


def test_pause_of_another_accounts_or_a_deleted_subscription_is_404(client, alice, broker):
    bob = new_caller("bob")
    theirs = make_subscription(bob.account_id)
    deleted = make_subscription(alice.account_id)
    assert client.delete(f"{BASE}/{deleted}", headers=alice.headers).status_code == 204
    for subscription_id in (theirs, deleted, "not-a-uuid"):
        response = client.post(f"{BASE}/{subscription_id}/pause", headers=alice.headers)
        assert response.status_code == 404
        assert response.get_json()["error"]["code"] == "not_found"
    assert _row(theirs).status == "active" and _row(deleted).status == "active"
