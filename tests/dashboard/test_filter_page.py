"""The subscription's page shows its filter and the retry schedule in force, and answers
"would this event be delivered?" for a sample event (CONTRACT 10.4): nothing is emitted."""

from __future__ import annotations

import json

from sqlalchemy import func, select

from webhooks.config import get_settings
from webhooks.events.samples import sample_data
from webhooks.storage.db import session_scope
from webhooks.storage.models import Event

from .helpers import post_form

BASE = "/api/webhooks/subscriptions"
ANN_ONLY = {"data.to_email": {"$prefix": "ann@"}}


def _create(app, alice, **body) -> str:
    created = app.test_client().post(BASE, headers=alice.headers, json={
        "url": "https://hooks.example.com/in", **body})
    assert created.status_code == 201, created.get_json()
    return created.get_json()["id"]


def _envelope(event_type: str, **data) -> str:
    return json.dumps({"type": event_type, "data": {**sample_data(event_type), **data}})


def test_the_page_shows_the_filter_and_the_schedule_in_force(app, alice, alice_client):
    filtered = _create(app, alice, filter=ANN_ONLY, retry_schedule=[1, 1])
    plain = _create(app, alice)
    html = alice_client.get(f"/dashboard/subscriptions/{filtered}").get_data(as_text=True)
    assert "data.to_email" in html and "$prefix" in html
    assert "1 s, 1 s; <code>dead</code> after 3 attempts" in html and "(its own)" in html
    html = alice_client.get(f"/dashboard/subscriptions/{plain}").get_data(as_text=True)
    assert "none: every event of its types" in html
    ladder = ", ".join(f"{delay:,} s" for delay in get_settings().retry_delays)
    assert f"{ladder}; <code>dead</code> after" in html and "(the service's ladder)" in html


def test_the_tester_says_whether_a_sample_would_be_delivered(app, alice, alice_client):
    subscription_id = _create(app, alice, filter=ANN_ONLY, event_types=["email.sent"])
    page = f"/dashboard/subscriptions/{subscription_id}"
    action = f"{page}/filter-test"
    cases = [
        (_envelope("email.sent", to_email="ann@example.com"), "true", "the filter accepts"),
        (_envelope("email.sent", to_email="bob@example.com"), "false", "the filter refuses"),
        (_envelope("email.opened"), "false", "does not take email.opened events"),
        ("{not json", "unknown", "not JSON"),
        ("[1, 2]", "unknown", "must be an event envelope"),
    ]
    for sample, delivered, reason in cases:
        answer = post_form(alice_client, page, action, {"event": sample})
        assert answer.status_code == 200
        html = answer.get_data(as_text=True)
        assert f'data-delivered="{delivered}"' in html, (sample, html[:200])
        assert reason in html
    with session_scope() as session:
        assert session.scalar(select(func.count()).select_from(Event)) == 0  # nothing emitted


def test_the_page_offers_a_sample_of_the_subscribed_type(app, alice, alice_client):
    subscription_id = _create(app, alice, event_types=["domain.drift"])
    html = alice_client.get(f"/dashboard/subscriptions/{subscription_id}").get_data(as_text=True)
    assert "&#34;type&#34;: &#34;domain.drift&#34;" in html or '"type": "domain.drift"' in html
