"""A password in a subscription URL never reaches a dashboard page, nor the session cookie
through a flash message; the edit form saved unchanged keeps it."""

from __future__ import annotations

import pytest

from webhooks.storage.db import session_scope
from webhooks.storage.models import Subscription

from .helpers import inputs, post_form
from .rows import dead_delivery, make_subscription, pause_subscription

URL = "https://hook-user:s3cret-pass@hooks.example.com/in"
SHOWN = "https://hook-user:***@hooks.example.com/in"

pytestmark = pytest.mark.database


@pytest.fixture
def subscribed(alice):
    """Paused, with a dead delivery: the overview lists both."""
    subscription_id = make_subscription(alice.account_id, URL)
    delivery_id = dead_delivery(alice.account_id, subscription_id)
    pause_subscription(subscription_id)
    return subscription_id, delivery_id


def session_content(app, client) -> dict:
    cookie = client.get_cookie("webhooks_session", path="/dashboard")
    return app.session_interface.get_signing_serializer(app).loads(cookie.value)


def test_no_page_shows_the_password(alice_client, subscribed):
    subscription_id, delivery_id = subscribed
    pages = ["/dashboard/", "/dashboard/subscriptions", f"/dashboard/subscriptions/{subscription_id}",
             f"/dashboard/subscriptions/{subscription_id}/secret",
             f"/dashboard/subscriptions/{subscription_id}/edit",
             f"/dashboard/subscriptions/{subscription_id}/delete", "/dashboard/deliveries",
             f"/dashboard/deliveries?subscription_id={subscription_id}",
             f"/dashboard/deliveries/{delivery_id}"]
    for page in pages:
        response = alice_client.get(page)
        html = response.get_data(as_text=True).replace("<wbr>", "")  # URLs read whole
        assert response.status_code == 200, page
        assert "s3cret-pass" not in html, page
        assert "hook-user:***@hooks.example.com" in html, page


def test_the_edit_form_saved_unchanged_keeps_the_password(alice_client, subscribed):
    subscription_id, _ = subscribed
    edit = f"/dashboard/subscriptions/{subscription_id}/edit"
    shown = next(i for i in inputs(alice_client.get(edit).get_data(as_text=True)) if i.get("name") == "url")
    assert shown["value"] == SHOWN
    response = post_form(alice_client, edit, edit, {"url": SHOWN, "filter_mode": "all"})
    assert response.status_code == 302
    with session_scope() as session:
        assert session.get(Subscription, subscription_id).url == URL


def test_the_delete_flash_message_carries_no_password_into_the_cookie(app, alice_client, subscribed):
    subscription_id, _ = subscribed
    delete = f"/dashboard/subscriptions/{subscription_id}/delete"
    response = post_form(alice_client, delete, delete)
    assert response.status_code == 302
    flashes = session_content(app, alice_client)["_flashes"]
    assert any(SHOWN in message for _, message in flashes), flashes
    assert "s3cret-pass" not in repr(flashes)
    page = alice_client.get(response.headers["Location"]).get_data(as_text=True)
    assert SHOWN in page and "s3cret-pass" not in page
