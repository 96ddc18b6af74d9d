"""The API shows a subscription's current ``in_flight_limit`` (the adaptive pace) and a
delivery's ``ordering_key``; the dashboard's subscription page shows the limit too."""

from __future__ import annotations

from sqlalchemy import update

from webhooks import emit_event
from webhooks.events.samples import sample_data
from webhooks.storage.db import session_scope
from webhooks.storage.models import Subscription

from .helpers import make_subscription

SUBSCRIPTIONS = "/api/webhooks/subscriptions"
DELIVERIES = "/api/webhooks/deliveries"


def _limit(subscription_id, **values):
    with session_scope() as session:
        session.execute(update(Subscription).where(Subscription.id == subscription_id)
                        .values(**values))


def test_in_flight_limit_is_the_cap_until_the_pace_lowers_it(client, alice, monkeypatch):
    subscription_id = make_subscription(alice.account_id)
    url = f"{SUBSCRIPTIONS}/{subscription_id}"
    assert client.get(url, headers=alice.headers).get_json()["in_flight_limit"] == 10
    _limit(subscription_id, max_in_flight=6)
    assert client.get(url, headers=alice.headers).get_json()["in_flight_limit"] == 6
    _limit(subscription_id, in_flight_limit=2)
    body = client.get(url, headers=alice.headers).get_json()
    assert (body["max_in_flight"], body["in_flight_limit"]) == (6, 2)
    listed = client.get(SUBSCRIPTIONS, headers=alice.headers).get_json()["data"][0]
    assert listed["in_flight_limit"] == 2


def test_a_delivery_shows_its_ordering_key(client, alice, published):
    make_subscription(alice.account_id)
    keyed = emit_event(alice.account_id, "email.sent", sample_data("email.sent"),
                       ordering_key="order-42").delivery_ids[0]
    plain = emit_event(alice.account_id, "email.sent", sample_data("email.sent")).delivery_ids[0]
    assert client.get(f"{DELIVERIES}/{keyed}", headers=alice.headers).get_json()["ordering_key"] == "order-42"
    assert client.get(f"{DELIVERIES}/{plain}", headers=alice.headers).get_json()["ordering_key"] is None
