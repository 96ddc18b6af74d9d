"""The per-tenant limits as the dashboard shows them: a flash message for Send test and for
one subscription too many, a 429 page (with Retry-After) for a signed-in account over its
request limit, which the dashboard counts apart from the API."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select, update

from webhooks.config import reset_settings_cache
from webhooks.storage.db import session_scope
from webhooks.storage.models import DashboardSession, Delivery, Subscription, utcnow

from .helpers import post_form, sign_in
from .rows import make_subscription

pytestmark = pytest.mark.database


@pytest.fixture
def make_client(db, redis_broker, data_dir, monkeypatch):
    """``make_client(caller, address, **env)``: an app with these WEBHOOKS_* variables and a
    browser at ``address`` signed in as ``caller``."""
    from web import create_app

    def make(caller, address: str = "198.51.100.1", **env):
        for name, value in env.items():
            monkeypatch.setenv(f"WEBHOOKS_{name}", value)
        reset_settings_cache()
        client = create_app({"TESTING": True}).test_client()
        client.environ_base["REMOTE_ADDR"] = address
        assert sign_in(client, caller.api_key).status_code == 200
        return client

    return make


def text(response) -> str:
    return response.get_data(as_text=True)


def count(model, **where) -> int:
    with session_scope() as session:
        statement = select(func.count()).select_from(model).filter_by(**where)
        return session.scalar(statement)


def test_send_test_over_its_limit_shows_a_flash_and_sends_nothing(make_client, alice):
    client = make_client(alice, TEST_RATE_LIMIT="1 per minute")
    subscription_id = make_subscription(alice.account_id)
    # The budget is the subscription's: the API's test uses it up for the button too.
    api = client.post(f"/api/webhooks/subscriptions/{subscription_id}/test",
                      headers={"Authorization": f"Bearer {alice.api_key}"})
    assert api.status_code == 202
    page = f"/dashboard/subscriptions/{subscription_id}"
    response = post_form(client, page, f"{page}/test", follow_redirects=True)
    assert response.status_code == 200
    assert "Test event not sent: Too many test events for this subscription; retry in" in text(
        response)
    assert count(Delivery, subscription_id=subscription_id) == 1


def test_one_subscription_too_many_is_refused_with_a_message(make_client, alice):
    client = make_client(alice, MAX_SUBSCRIPTIONS="1")
    make_subscription(alice.account_id)
    new = "/dashboard/subscriptions/new"
    response = post_form(client, new, new, {"url": "https://hooks.example.com/in",
                                            "filter_mode": "all"})
    assert response.status_code == 409
    assert "Subscription not created: this account already has 1 subscriptions" in text(response)
    assert count(Subscription, account_id=alice.account_id) == 1


def test_the_dashboard_counts_per_signed_in_account_apart_from_the_api(make_client, alice, bob):
    client = make_client(alice, API_RATE_LIMIT="4 per minute")
    api_key = {"Authorization": f"Bearer {alice.api_key}"}
    assert [client.get("/api/webhooks/subscriptions", headers=api_key).status_code
            for _ in range(5)] == [200] * 4 + [429]
    # Signing in spent one of alice's dashboard budget (the page after the redirect).
    assert [client.get("/dashboard/subscriptions").status_code for _ in range(3)] == [200] * 3
    refused = client.get("/dashboard/subscriptions")
    assert refused.status_code == 429 and refused.mimetype == "text/html"
    assert "Too many requests" in text(refused)
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    # Bob, at the same address, has his own budget.
    assert make_client(bob).get("/dashboard/subscriptions").status_code == 200


def test_a_replayed_cookie_of_an_ended_session_is_charged_to_its_client(make_client, alice):
    """Issue 36, finding 6: a spent portal cookie replayed from elsewhere used up the budget
    of the account it names, and the account's own people got 429."""
    from web import create_app

    from .portal_helpers import link_path, new_link

    own = make_client(alice, API_RATE_LIMIT="4 per minute")  # one spent on the landing page
    replayer = create_app({"TESTING": True}).test_client()
    replayer.environ_base["REMOTE_ADDR"] = "203.0.113.9"
    assert replayer.get(link_path(new_link(alice.account_id, read_only=True))).status_code == 302
    with session_scope() as session:  # the portal session ends; its cookie still names alice
        session.execute(update(DashboardSession).where(DashboardSession.read_only)
                        .values(expires_at=utcnow()))
    replayed = [replayer.get("/dashboard/subscriptions").status_code for _ in range(6)]
    assert replayed[-1] == 429  # its own address ran out
    assert 429 not in [own.get("/dashboard/subscriptions").status_code for _ in range(3)]
