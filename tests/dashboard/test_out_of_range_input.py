"""CONTRACT 9.2 in the dashboard: input that names nothing, or that the database cannot store,
is refused with a page that says why (or ignored), never a 500 (issue 22)."""

from __future__ import annotations

import base64

import pytest
from sqlalchemy import select

from webhooks.storage.db import session_scope
from webhooks.storage.models import Subscription

from .helpers import csrf_token, post_form
from .rows import make_subscription

pytestmark = pytest.mark.database

NEW = "/dashboard/subscriptions/new"


def _descriptions() -> list:
    with session_scope() as session:
        return list(session.scalars(select(Subscription.description)))


@pytest.mark.parametrize("target", ["/dashboard/\r\nSet-Cookie: x=1", "/dashboard/\nx",
                                    "/dashboard/\x00", "/dashboard/\x7f"])
def test_sign_in_with_control_characters_in_next_goes_to_the_overview(client, alice, target):
    page = client.get("/dashboard/").get_data(as_text=True)
    response = client.post("/dashboard/sign-in", data={
        "csrf_token": csrf_token(page), "api_key": alice.api_key, "next": target})
    assert response.status_code == 302
    assert response.headers["Location"] == "/dashboard/"
    # Signed in already, the sign-in page redirects to ?next= at once: the same rule.
    again = client.get("/dashboard/sign-in", query_string={"next": target})
    assert (again.status_code, again.headers["Location"]) == (302, "/dashboard/")


@pytest.mark.parametrize("value", ["before\x00after", "\x00"])
def test_a_nul_in_the_description_is_refused_on_create_and_edit(alice_client, alice, value):
    """The API's Text field refused it; the form let PostgreSQL refuse it (a 500)."""
    field = "description"
    response = post_form(alice_client, NEW, NEW, {
        "url": "https://hooks.example.com/in", "filter_mode": "all", field: value})
    assert response.status_code == 400
    assert "cannot be stored" in response.get_data(as_text=True)
    assert _descriptions() == []

    subscription_id = make_subscription(alice.account_id)
    edit = f"/dashboard/subscriptions/{subscription_id}/edit"
    response = post_form(alice_client, edit, edit, {
        "url": "https://hooks.example.com/in", "filter_mode": "all", field: value})
    assert response.status_code == 400
    assert "cannot be stored" in response.get_data(as_text=True)
    assert _descriptions() == [None]


def test_a_delivery_cursor_outside_utc_starts_from_the_newest(alice_client):
    raw = "1|0001-01-01T00:00:00+14:00|00000000-0000-4000-8000-000000000000"
    cursor = base64.urlsafe_b64encode(raw.encode()).rstrip(b"=").decode()
    for page in ("/dashboard/deliveries", "/dashboard/subscriptions"):
        assert alice_client.get(page, query_string={"cursor": cursor}).status_code == 200
