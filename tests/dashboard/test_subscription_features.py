"""The dashboard's staged rotation, recover form, limits and custom headers, without a browser
(test_browser_subscription_features.py drives the same pages in Chromium)."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from sqlalchemy import select

from webhooks.storage.db import session_scope
from webhooks.storage.models import Delivery, Subscription, utcnow

from .helpers import post_form
from .rows import emit, make_subscription, set_delivery


def text(response) -> str:
    return response.get_data(as_text=True)


def row(subscription_id: str) -> Subscription:
    with session_scope() as session:
        return session.get(Subscription, subscription_id)


def _page(subscription_id):
    return f"/dashboard/subscriptions/{subscription_id}"


# --- rotation ------------------------------------------------------------------------------


def test_a_staged_rotation_shows_the_next_secret_and_when_it_takes_over(alice_client, alice):
    subscription_id = make_subscription(alice.account_id)
    old = row(subscription_id).secret
    page = _page(subscription_id)
    response = post_form(alice_client, page, f"{page}/rotate-secret", {"activate_in": "3600"},
                         follow_redirects=True)
    stored = row(subscription_id)
    assert stored.secret == old and stored.next_secret.startswith("whsec_")
    html = text(response)
    assert "New signing secret staged" in html
    assert f'id="secret">{old}<' in html and f'id="next-secret">{stored.next_secret}<' in html
    when = stored.next_secret_active_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    assert f'id="takes-over">{when}<' in html and "(in 1 hour)" in html
    assert "Activate now</button>" in html and "Cancel</button>" in html
    # Without "Show secret", neither secret is on the page, but the staged one's time is.
    plain = text(alice_client.get(page))
    assert old not in plain and stored.next_secret not in plain and when in plain


def test_activate_now_and_cancel(alice_client, alice):
    subscription_id = make_subscription(alice.account_id)
    page = _page(subscription_id)
    post_form(alice_client, page, f"{page}/rotate-secret", {"activate_in": "86400"})
    staged = row(subscription_id).next_secret
    response = post_form(alice_client, page, f"{page}/next-secret/activate",
                         follow_redirects=True)
    assert "The staged secret signs from now on" in text(response)
    assert (row(subscription_id).secret, row(subscription_id).next_secret) == (staged, None)
    assert "Activate now</button>" not in text(response)

    post_form(alice_client, page, f"{page}/rotate-secret", {"activate_in": "604800"})
    response = post_form(alice_client, page, f"{page}/next-secret/cancel", follow_redirects=True)
    assert "Staged secret cancelled" in text(response)
    assert (row(subscription_id).secret, row(subscription_id).next_secret) == (staged, None)

    again = post_form(alice_client, page, f"{page}/next-secret/cancel", follow_redirects=True)
    assert "No staged secret to cancel" in text(again)
    again = post_form(alice_client, page, f"{page}/next-secret/activate", follow_redirects=True)
    assert "No staged secret to activate" in text(again)


def test_a_rotation_delay_not_offered_by_the_form_changes_nothing(alice_client, alice):
    subscription_id = make_subscription(alice.account_id)
    before = row(subscription_id).secret
    page = _page(subscription_id)
    response = post_form(alice_client, page, f"{page}/rotate-secret", {"activate_in": "5"},
                         follow_redirects=True)
    assert "Secret not rotated" in text(response)
    assert (row(subscription_id).secret, row(subscription_id).next_secret) == (before, None)


# --- recover -------------------------------------------------------------------------------


def _failed(alice, subscription_id, count):
    ids = []
    for _ in range(count):
        (delivery_id,) = emit(alice.account_id)[1]
        set_delivery(delivery_id, status="failed", attempt_count=1)
        ids.append(delivery_id)
    return ids


def _window(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M")


def test_the_recover_form_replays_once(alice_client, alice, monkeypatch):
    from webhooks.broker import outbox

    sweeps = []
    monkeypatch.setattr(outbox, "request_sweep", lambda: sweeps.append(1))
    subscription_id = make_subscription(alice.account_id)
    failed = _failed(alice, subscription_id, 2)
    page = _page(subscription_id)
    assert 'name="since"' in text(alice_client.get(page))
    since = _window(utcnow() - dt.timedelta(hours=1))
    response = post_form(alice_client, page, f"{page}/recover", {"since": since},
                         follow_redirects=True)
    assert "2 failed or dead deliveries replayed" in text(response)
    assert sweeps  # the replays go out through the sweep
    with session_scope() as session:
        replayed = session.scalars(select(Delivery.replay_of).where(
            Delivery.replay_of.is_not(None))).all()
    assert sorted(replayed) == sorted(failed)
    again = post_form(alice_client, page, f"{page}/recover", {"since": since},
                      follow_redirects=True)
    assert "0 failed or dead deliveries replayed" in text(again)


def test_the_recover_form_offers_the_last_24_hours_in_24_hour_utc_text(alice_client, alice):
    subscription_id = make_subscription(alice.account_id)
    page = text(alice_client.get(_page(subscription_id)))
    since = re.search(r'<input[^>]*id="since"[^>]*>', page).group()
    assert 'type="text"' in since and 'placeholder="YYYY-MM-DD HH:MM"' in since
    shown = dt.datetime.strptime(re.search(r'value="([^"]+)"', since).group(1), "%Y-%m-%d %H:%M")
    back = utcnow().replace(tzinfo=None) - shown
    assert dt.timedelta(hours=24) <= back < dt.timedelta(hours=24, minutes=1)


@pytest.mark.parametrize("since", ["%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M"])
def test_the_recover_form_takes_a_space_or_a_t(alice_client, alice, since):
    subscription_id = make_subscription(alice.account_id)
    _failed(alice, subscription_id, 1)
    page = _page(subscription_id)
    moment = (utcnow() - dt.timedelta(hours=1)).strftime(since)
    response = post_form(alice_client, page, f"{page}/recover", {"since": moment},
                         follow_redirects=True)
    assert "1 failed or dead delivery replayed" in text(response)


def test_a_replayed_delivery_is_marked_in_the_lists(alice_client, alice):
    subscription_id = make_subscription(alice.account_id)
    failed, kept = _failed(alice, subscription_id, 2)
    page = _page(subscription_id)
    post_form(alice_client, f"/dashboard/deliveries/{failed}",
              f"/dashboard/deliveries/{failed}/replay", {})
    for listing in ("/dashboard/deliveries", page):
        rows = re.findall(r"<tr[^>]*>.*?</tr>", text(alice_client.get(listing)), re.S)
        row_of = {d: next(r for r in rows if f"/deliveries/{d}" in r) for d in (failed, kept)}
        assert ">replayed</span>" in row_of[failed], listing
        assert ">replayed</span>" not in row_of[kept], listing


def test_the_help_text_names_no_file_of_the_repository(alice_client, alice):
    page = text(alice_client.get(_page(make_subscription(alice.account_id))))
    assert "docs/secret-rotation.md" not in page
    assert "accept a delivery signed with either" in page


def test_recover_on_a_paused_subscription_says_the_replays_wait_for_resume(
        alice_client, alice):
    subscription_id = make_subscription(alice.account_id, status="paused")
    _failed(alice, subscription_id, 3)
    page = _page(subscription_id)
    assert "This subscription is paused: what you recover" in text(alice_client.get(page))
    since = _window(utcnow() - dt.timedelta(hours=1))
    response = post_form(alice_client, page, f"{page}/recover", {"since": since},
                         follow_redirects=True)
    assert "3 failed or dead deliveries replayed" in text(response)
    assert "The subscription is paused: 3 of them wait until you resume it." in text(response)


def test_an_active_subscription_s_recover_says_nothing_of_pauses(alice_client, alice):
    subscription_id = make_subscription(alice.account_id)
    _failed(alice, subscription_id, 1)
    page = _page(subscription_id)
    assert "This subscription is paused" not in text(alice_client.get(page))
    response = post_form(alice_client, page, f"{page}/recover",
                         {"since": _window(utcnow() - dt.timedelta(hours=1))},
                         follow_redirects=True)
    assert "wait until you resume" not in text(response)


@pytest.mark.parametrize("data, message", [
    ({"since": _window(utcnow() + dt.timedelta(days=2))}, "since is in the future"),
    ({"since": "2026-01-02T00:00", "until": "2026-01-01T00:00"}, "since is after until"),
    ({}, "Enter when the window starts."),
    ({"since": "yesterday"}, "Nothing recovered"),
])
def test_the_recover_form_refuses_a_bad_window(alice_client, alice, data, message):
    subscription_id = make_subscription(alice.account_id)
    _failed(alice, subscription_id, 1)
    page = _page(subscription_id)
    response = post_form(alice_client, page, f"{page}/recover", data, follow_redirects=True)
    assert message in text(response) and "Nothing recovered" in text(response)
    with session_scope() as session:
        assert session.scalars(select(Delivery).where(Delivery.replay_of.is_not(None))).all() == []


# --- the edit form: limits and custom headers ----------------------------------------------


def _edit(alice_client, subscription_id, **fields):
    edit = f"{_page(subscription_id)}/edit"
    data = {"url": "https://hooks.example.com/in", "filter_mode": "all", "description": "",
            **fields}
    return post_form(alice_client, edit, edit, data)


def test_the_edit_form_sets_and_clears_the_limits_and_headers(alice_client, alice):
    subscription_id = make_subscription(alice.account_id)
    response = _edit(alice_client, subscription_id, max_in_flight="3", rate_limit="0.5",
                     headers="Authorization: Bearer abc\n\nX-Tenant:acme")
    assert response.status_code == 302
    stored = row(subscription_id)
    assert (stored.max_in_flight, stored.rate_limit) == (3, 0.5)
    assert stored.headers == {"Authorization": "Bearer abc", "X-Tenant": "acme"}
    form = text(alice_client.get(f"{_page(subscription_id)}/edit"))
    assert 'value="3"' in form and 'value="0.5"' in form
    assert "Authorization: ***\nX-Tenant: ***" in form  # values are masked (finding 1 of issue 36)
    page = text(alice_client.get(_page(subscription_id)))
    assert "at most 3 at once" in page and "at most 0.5 attempts per second" in page
    assert "Authorization: " in page and "Bearer abc" not in page  # the name; the value on request
    revealed = text(post_form(alice_client, _page(subscription_id), f"{_page(subscription_id)}/secret"))
    assert "Authorization: Bearer abc" in revealed  # the customer's own value, not masked

    assert _edit(alice_client, subscription_id).status_code == 302
    stored = row(subscription_id)
    assert (stored.max_in_flight, stored.rate_limit, stored.headers) == (None, None, None)


@pytest.mark.parametrize("fields, message", [
    ({"headers": "Host: example.com\nX-Service-Signature: x"},
     "Host, X-Service-Signature cannot be set"),
    ({"headers": "no colon here"}, "Line 1 has no colon"),
    ({"headers": "Bad Name: v"}, "is not a header name"),
    ({"max_in_flight": "0"}, "between 1 and 1000"),
    ({"max_in_flight": "1001"}, "between 1 and 1000"),
    ({"rate_limit": "0.001"}, "between 0.01 and 10000"),
    ({"rate_limit": "lots"}, "Not a valid float value"),
])
def test_the_edit_form_refuses_bad_limits_and_reserved_headers(alice_client, alice, fields,
                                                               message):
    subscription_id = make_subscription(alice.account_id)
    response = _edit(alice_client, subscription_id, **fields)
    assert response.status_code == 400
    assert message in text(response)
    stored = row(subscription_id)
    assert (stored.max_in_flight, stored.rate_limit, stored.headers) == (None, None, None)


def test_each_event_type_box_is_inside_the_label_with_its_name_and_description(alice_client):
    form = text(alice_client.get("/dashboard/subscriptions/new"))
    labels = re.findall(r'<label class="type-choice" for="([^"]+)">\s*<input[^>]*id="([^"]+)"'
                        r'[^>]*>\s*<span class="type-text"><code class="type-name">([^<]+)</code>'
                        r'\s*<span class="type-description">([^<]+)</span>', form)
    assert len(labels) == 15
    for label_for, input_id, name, description in labels:
        assert label_for == input_id and description.strip()
    assert ("email.sent", "An outbound email was accepted by the relay.") in {
        (name, description) for _, _, name, description in labels}


# --- the adaptive pace's current limit ------------------------------------------------------


def test_the_subscription_page_shows_the_current_in_flight_limit(alice_client, alice):
    from sqlalchemy import update

    subscription_id = make_subscription(alice.account_id)
    html = text(alice_client.get(_page(subscription_id)))
    assert re.search(r'id="in-flight-limit">10 at once<', html)
    with session_scope() as session:
        session.execute(update(Subscription).where(Subscription.id == subscription_id)
                        .values(in_flight_limit=3))
    html = text(alice_client.get(_page(subscription_id)))
    assert re.search(r'id="in-flight-limit">3 at once <span class="muted">\(lowered by the '
                     r'adaptive pace', html)
