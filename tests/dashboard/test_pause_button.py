"""The dashboard's Pause button (CONTRACT 9.3): a form with its CSRF token, the same
pause as the API's (reason ``manual``, deliveries held), and the banner saying why."""

from __future__ import annotations

import pytest

from webhooks.storage.db import session_scope
from webhooks.storage.models import Delivery, Subscription

from .helpers import post_form
from .rows import emit, make_subscription

pytestmark = pytest.mark.database


def _text(response) -> str:
    return response.get_data(as_text=True).replace("<wbr>", "")


def _subscription(subscription_id: str) -> Subscription:
    with session_scope() as session:
        return session.get(Subscription, subscription_id)


def test_pause_from_the_dashboard_holds_deliveries_and_resume_undoes_it(alice_client, alice):
    subscription_id = make_subscription(alice.account_id)
    _, (delivery_id,) = emit(alice.account_id)
    page = f"/dashboard/subscriptions/{subscription_id}"
    shown = _text(alice_client.get(page))
    assert "Pause</button>" in shown and "Resume</button>" not in shown

    response = post_form(alice_client, page, f"{page}/pause", follow_redirects=True)
    assert "Subscription paused" in _text(response)
    stored = _subscription(subscription_id)
    assert (stored.status, stored.paused_reason) == ("paused", "manual")
    with session_scope() as session:
        assert session.get(Delivery, delivery_id).status == "paused"
    paused_page = _text(alice_client.get(page))
    assert 'data-reason="manual"' in paused_page and "by hand" in paused_page
    assert "Resume</button>" in paused_page and "Pause</button>" not in paused_page

    post_form(alice_client, page, f"{page}/resume")
    stored = _subscription(subscription_id)
    assert (stored.status, stored.paused_reason) == ("active", None)


def test_pause_without_the_csrf_token_is_refused(alice_client, alice):
    subscription_id = make_subscription(alice.account_id)
    response = alice_client.post(f"/dashboard/subscriptions/{subscription_id}/pause")
    assert response.status_code == 400
    assert _subscription(subscription_id).status == "active"


def test_the_banner_says_a_410_paused_it(alice_client, alice):
    subscription_id = make_subscription(alice.account_id)
    from webhooks.lifecycle import changes
    from webhooks.states import PauseReason
    from webhooks.storage.models import utcnow

    with session_scope() as session:
        assert changes.pause_subscription(session, subscription_id, utcnow(), PauseReason.GONE)
    shown = _text(alice_client.get(f"/dashboard/subscriptions/{subscription_id}"))
    assert 'data-reason="gone"' in shown and "410 Gone" in shown
