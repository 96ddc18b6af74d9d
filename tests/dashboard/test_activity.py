"""The Activity page (CONTRACT 10.5): the account's audit log in the dashboard. Changes made
in a dashboard session are entries of the actor ``dashboard``, in a portal link's session
of ``portal``; a read-only portal session sees the page with no secret in it; another
account sees none of it."""

from __future__ import annotations

import hashlib

import pytest

from tests.factories import AUDIT_ACTOR
from webhooks.services import subscriptions
from webhooks.storage.db import session_scope

from .helpers import post_form, sign_in
from .portal_helpers import link_path, new_link, session_rows
from .rows import make_subscription

pytestmark = pytest.mark.database

ACTIVITY = "/dashboard/activity"


def _session_reference() -> str:
    """The reference to the (one) live dashboard session, as entries name it."""
    (row,) = [row for row in session_rows() if row.expires_at is not None]
    return row.id[:16]


def _pause(client, subscription_id: str):
    page = f"/dashboard/subscriptions/{subscription_id}"
    response = post_form(client, page, f"{page}/pause")
    assert response.status_code == 302


def test_a_change_in_the_dashboard_is_listed_with_its_session(app, alice):
    client = app.test_client()
    assert sign_in(client, alice.api_key).status_code == 200
    subscription_id = make_subscription(alice.account_id)
    _pause(client, subscription_id)
    html = client.get(ACTIVITY).get_data(as_text=True)
    assert "<code>subscription.paused</code>" in html
    assert f'dashboard <code title="{_session_reference()}">' in html
    assert "&#34;manual&#34;" in html or '"manual"' in html
    assert hashlib.sha256(alice.api_key.encode()).hexdigest()[:16] not in html


def test_a_portal_session_acts_as_portal(app, alice):
    client = app.test_client()
    assert client.get(link_path(new_link(alice.account_id))).status_code == 302
    subscription_id = make_subscription(alice.account_id)
    _pause(client, subscription_id)
    html = client.get(ACTIVITY).get_data(as_text=True)
    assert "<code>subscription.paused</code>" in html and "portal <code" in html


def test_a_read_only_portal_session_sees_the_activity_and_no_secret(app, alice, bob):
    with session_scope() as session:
        created = subscriptions.create(session, alice.account_id, "https://hooks.example.com/in",
                                       actor=AUDIT_ACTOR, headers={"X-Token": "HEADER-VALUE"})
        secret = created.secret
    reader = app.test_client()
    assert reader.get(link_path(new_link(alice.account_id, read_only=True))).status_code == 302
    page = reader.get(ACTIVITY)
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert "<code>subscription.created</code>" in html and "[redacted]" in html
    assert secret not in html and "HEADER-VALUE" not in html
    assert 'aria-current="page">Activity' in html

    other = app.test_client()
    assert sign_in(other, bob.api_key).status_code == 200
    seen_by_bob = other.get(ACTIVITY).get_data(as_text=True)
    assert "<code>subscription.created</code>" not in seen_by_bob and "No activity" in seen_by_bob


def test_the_action_filter_and_a_foreign_cursor(alice_client, alice):
    first, second = make_subscription(alice.account_id), make_subscription(alice.account_id)
    _pause(alice_client, first)
    with session_scope() as session:
        subscriptions.delete(session, subscriptions.owned(session, alice.account_id, second),
                             actor=AUDIT_ACTOR)
    paused = alice_client.get(ACTIVITY, query_string={"action": "subscription.paused"})
    assert "<code>subscription.paused</code>" in paused.get_data(as_text=True)
    assert "<code>subscription.deleted</code>" not in paused.get_data(as_text=True)
    odd = alice_client.get(ACTIVITY, query_string={"cursor": "not-ours", "action": "nothing"})
    assert odd.status_code == 200
    assert "<code>subscription.deleted</code>" in odd.get_data(as_text=True)
