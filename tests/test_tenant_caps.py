"""test.ping's own cap per subscription and the per-account cap, in the claim.

On both databases; the concurrent case on PostgreSQL, where claims race.
"""

from __future__ import annotations

import threading

import pytest

from tests.factories import make_account, make_subscription
from webhooks.emit import emit_event, send_test
from webhooks.events.samples import sample_data
from webhooks.lifecycle.claim import Caps, claim as claim_attempt
from webhooks.storage.db import get_engine, session_scope
from webhooks.storage.models import Delivery, Subscription, utcnow


def claim(delivery_id, caps, count=0):
    with get_engine().begin() as connection:
        return claim_attempt(connection, delivery_id, count, utcnow(), caps)


def waits(delivery_id) -> bool:
    with session_scope() as session:
        row = session.get(Delivery, delivery_id)
        return (row.status, row.parked, row.next_attempt_at) == ("pending", True, None)


def test_pings(subscription_id, n) -> list[str]:
    ids = []
    for _ in range(n):
        with session_scope() as session:
            ids += send_test(session, session.get(Subscription, subscription_id)).delivery_ids
    return ids


test_pings.__test__ = False  # a helper, not a test


@pytest.fixture
def account(any_db, published):
    account_id, _ = make_account()
    return account_id


def test_test_pings_have_a_cap_of_their_own_even_on_a_paused_subscription(account):
    subscription = make_subscription(account, "https://example.com/hook", status="paused")
    pings = test_pings(subscription.id, 3)
    caps = Caps(subscription=1, test=2)
    assert [claim(p, caps) is not None for p in pings] == [True, True, False]
    assert waits(pings[2])


def test_a_ping_in_flight_counts_toward_its_subscriptions_cap_and_each_has_its_own_slot(account):
    subscription = make_subscription(account, "https://example.com/hook")
    (ping,) = test_pings(subscription.id, 1)
    (ordinary,) = emit_event(account, "email.sent", sample_data("email.sent")).delivery_ids
    caps = Caps(subscription=1, test=1)
    assert claim(ping, caps) is not None
    assert claim(ordinary, caps) is None  # the ping in flight counts toward the subscription's cap
    other = make_subscription(account, "https://example.com/other")
    (second_ping,) = test_pings(other.id, 1)
    assert claim(second_ping, caps) is not None  # another subscription: its own test slot


def test_an_account_has_a_cap_across_its_subscriptions(account):
    for index in range(3):
        make_subscription(account, f"https://example.com/{index}")
    ids = emit_event(account, "email.sent", sample_data("email.sent")).delivery_ids
    caps = Caps(subscription=10, account=2)
    assert [claim(d, caps) is not None for d in ids] == [True, True, False]
    assert waits(ids[2])
    other_account, _ = make_account("other")
    make_subscription(other_account, "https://example.com/x")
    (theirs,) = emit_event(other_account, "email.sent", sample_data("email.sent")).delivery_ids
    assert claim(theirs, caps) is not None  # another account is not held back


def test_no_caps_claims_everything(account):
    subscription = make_subscription(account, "https://example.com/hook")
    pings = test_pings(subscription.id, 4)
    assert all(claim(p, Caps()) is not None for p in pings)


@pytest.mark.database
def test_the_account_cap_holds_under_concurrent_claims(db, published):
    account_id, _ = make_account()
    for index in range(6):
        make_subscription(account_id, f"https://example.com/{index}")
    ids = emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids
    start, claimed = threading.Barrier(len(ids)), []

    def race(delivery_id):
        start.wait()
        if claim(delivery_id, Caps(account=1)) is not None:
            claimed.append(delivery_id)

    threads = [threading.Thread(target=race, args=(d,)) for d in ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(claimed) == 1
