"""A delivery and its attempts are read as of one moment (PostgreSQL, READ COMMITTED otherwise).

An attempt is recorded by "another worker" between the read of the delivery
row and the read of its attempts. Without one snapshot the answer showed
the row from before (pending, attempt in flight) with the attempt from after.
"""

from __future__ import annotations

import pytest

from webhooks.lifecycle.claim import claim as claim_attempt
from webhooks.lifecycle.policy import Rules, next_step
from webhooks.lifecycle.record import record
from webhooks.storage.db import get_engine
from webhooks.storage.models import utcnow

from .helpers import emit, make_subscription


@pytest.fixture
def claimed(alice):
    """One delivery of alice's with its first attempt in flight (claimed, not recorded)."""
    make_subscription(alice.account_id)
    event_id, (delivery_id,) = emit(alice.account_id)
    with get_engine().begin() as connection:
        claim = claim_attempt(connection, delivery_id, 0, utcnow())
    assert claim is not None
    return event_id, claim


def _record_between_reads(monkeypatch, claim):
    """Record ``claim``'s attempt (done) in another transaction just before attempts are read."""
    import web.api.deliveries as view

    original = view._attempts_of

    def attempts_after_a_record(ids):
        with get_engine().begin() as connection:
            now, rules = utcnow(), Rules((60,), 300, 25)
            record(connection, claim, step=next_step(1, 200, claim.event_type, rules), rules=rules,
                   started_at=now, now=now, duration_ms=3, status_code=200, error=None,
                   excerpt="ok")
        return original(ids)

    monkeypatch.setattr(view, "_attempts_of", attempts_after_a_record)


def _consistent(resource) -> bool:
    """The status and the attempts tell the same story."""
    succeeded = any(a["outcome"] == "success" for a in resource["attempts"])
    return succeeded == (resource["status"] == "done")


def test_one_delivery_is_read_in_one_snapshot(client, alice, claimed, monkeypatch):
    _, claim = claimed
    _record_between_reads(monkeypatch, claim)
    answer = client.get(f"/api/webhooks/deliveries/{claim.delivery_id}", headers=alice.headers)
    assert answer.status_code == 200
    body = answer.get_json()
    assert _consistent(body), body
    assert (body["status"], body["attempts"]) == ("pending", [])  # as of before the record
    # The next read sees the record, whole.
    after = client.get(f"/api/webhooks/deliveries/{claim.delivery_id}", headers=alice.headers)
    assert after.get_json()["status"] == "done" and len(after.get_json()["attempts"]) == 1


def test_the_delivery_list_is_read_in_one_snapshot(client, alice, claimed, monkeypatch):
    event_id, claim = claimed
    _record_between_reads(monkeypatch, claim)
    answer = client.get(f"/api/webhooks/deliveries?event_id={event_id}", headers=alice.headers)
    assert answer.status_code == 200
    (row,) = answer.get_json()["data"]
    assert _consistent(row), row
