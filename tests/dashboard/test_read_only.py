"""CONTRACT 9.3: a read-only portal session shows every page, hides every action and answers 403
to every state-changing request, whichever route (enumerated from the app's url_map, so a route
added later is checked too), with or without a CSRF token, and changes nothing."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from webhooks.storage.db import session_scope
from webhooks.storage.models import Base

from web.dashboard.portal import ALLOWED_WHEN_READ_ONLY, STATE_CHANGING_METHODS

from .helpers import csrf_token
from .portal_helpers import link_path, new_link, session_rows
from .rows import dead_delivery, make_subscription, pause_subscription

pytestmark = pytest.mark.database

# Tables a refused request could have changed (the session and link tables change by design).
_WATCHED = sorted(name for name in Base.metadata.tables
                  if name not in {"dashboard_sessions", "portal_links"})


def _snapshot() -> dict[str, list]:
    with session_scope() as session:
        return {name: sorted(map(repr, session.execute(select(Base.metadata.tables[name]))))
                for name in _WATCHED}


@pytest.fixture
def account_rows(alice):
    subscription_id = make_subscription(alice.account_id)
    delivery_id = dead_delivery(alice.account_id, subscription_id)
    pause_subscription(subscription_id)
    return {"subscription_id": subscription_id, "delivery_id": delivery_id,
            "_unknown": "anything", "token": "not-a-link"}


@pytest.fixture
def read_only_client(app, alice):
    client = app.test_client()
    opened = client.get(link_path(new_link(alice.account_id, read_only=True)))
    assert opened.status_code == 302
    (row,) = session_rows()
    assert row.read_only
    return client


def _state_changing_requests(app, values: dict) -> list[tuple[str, str, str]]:
    """(method, path, endpoint) of every dashboard route and state-changing method it takes."""
    requests = []
    adapter = app.url_map.bind("localhost")
    for rule in app.url_map.iter_rules():
        if not rule.endpoint.startswith("dashboard."):
            continue
        for method in sorted(rule.methods & STATE_CHANGING_METHODS):
            path = adapter.build(rule.endpoint, {name: values[name] for name in rule.arguments},
                                 method=method)
            requests.append((method, path, rule.endpoint))
    return requests


_FORM = {"url": "https://elsewhere.example.com/in", "filter_mode": "all", "activate_in": "",
         "since": "2026-01-01T00:00", "until": "", "description": "changed"}


def test_every_state_changing_route_answers_403_and_changes_nothing(app, read_only_client,
                                                                    account_rows):
    requests = _state_changing_requests(app, account_rows)
    refused = [r for r in requests if r[2] not in ALLOWED_WHEN_READ_ONLY]
    assert len(refused) >= 10  # the enumeration found the dashboard's actions
    token = csrf_token(read_only_client.get("/dashboard/").get_data(as_text=True))
    before = _snapshot()
    for method, path, endpoint in refused:
        for form in ({**_FORM, "csrf_token": token}, {}):
            response = read_only_client.open(path, method=method, data=form)
            assert response.status_code == 403, (method, path, endpoint, response.status_code)
            assert "Read-only session" in response.get_data(as_text=True)
    assert _snapshot() == before
    assert len(session_rows()) == 1  # still signed in: refusals do not end the session


def test_a_full_session_is_not_refused(app, alice_client, account_rows):
    """The check above can fail: the same requests from a full session get past it."""
    token = csrf_token(alice_client.get("/dashboard/").get_data(as_text=True))
    for method, path, endpoint in _state_changing_requests(app, account_rows):
        if endpoint in ALLOWED_WHEN_READ_ONLY:
            continue
        response = alice_client.open(path, method=method, data={**_FORM, "csrf_token": token})
        assert response.status_code != 403, (method, path)


def test_a_read_only_session_shows_every_page(read_only_client, account_rows):
    """Every page but those that show secrets (tests/dashboard/test_secrets_shown.py)."""
    subscription_id, delivery_id = account_rows["subscription_id"], account_rows["delivery_id"]
    for path in ("/dashboard/", "/dashboard/subscriptions", "/dashboard/deliveries",
                 f"/dashboard/subscriptions/{subscription_id}",
                 f"/dashboard/deliveries/{delivery_id}", "/dashboard/activity"):
        page = read_only_client.get(path)
        assert page.status_code == 200, path
        assert "Read-only" in page.get_data(as_text=True)


_ACTION = re.compile(r'<form method="post"[^>]*action="([^"]*)"|href="([^"]*/(?:new|edit|delete))"')


def test_a_read_only_session_hides_every_action(read_only_client, alice_client, account_rows):
    subscription_id, delivery_id = account_rows["subscription_id"], account_rows["delivery_id"]
    pages = ("/dashboard/", "/dashboard/subscriptions",
             f"/dashboard/subscriptions/{subscription_id}", f"/dashboard/deliveries/{delivery_id}",
             "/dashboard/activity")
    full_actions = set()
    for path in pages:
        html = read_only_client.get(path).get_data(as_text=True)
        actions = {a or b for a, b in _ACTION.findall(html)}
        assert actions == {"/dashboard/sign-out"}, (path, actions)
        full_actions |= {a or b for a, b in _ACTION.findall(
            alice_client.get(path).get_data(as_text=True))}
    # What a full session shows on those pages (so the pattern does find actions).
    assert {f"/dashboard/subscriptions/{subscription_id}/resume",
            f"/dashboard/deliveries/{delivery_id}/replay",
            "/dashboard/subscriptions/new"} <= full_actions


def test_a_read_only_session_may_sign_out(read_only_client):
    token = csrf_token(read_only_client.get("/dashboard/").get_data(as_text=True))
    response = read_only_client.post("/dashboard/sign-out", data={"csrf_token": token})
    assert response.status_code == 302
    assert session_rows() == []


def test_a_read_only_session_may_sign_in_with_an_api_key(read_only_client, alice):
    token = csrf_token(read_only_client.get("/dashboard/").get_data(as_text=True))
    response = read_only_client.post("/dashboard/sign-in",
                                     data={"csrf_token": token, "api_key": alice.api_key})
    assert response.status_code == 302
    (row,) = session_rows()
    assert not row.read_only
