"""The dashboard's cookie session is opened only under its cookie's path (web/dashboard/
cookie_scope.py): the API, /healthz and /metrics never pay for it, and the dashboard keeps it."""

from __future__ import annotations

import pytest
from flask import session
from flask.sessions import NullSession

from web.dashboard.cookie_scope import sends_the_cookie

pytestmark = pytest.mark.database


@pytest.mark.parametrize(("cookie_path", "request_path", "sent"), [
    ("/dashboard", "/dashboard", True),
    ("/dashboard", "/dashboard/", True),
    ("/dashboard", "/dashboard/portal/abc", True),
    ("/dashboard", "/dashboardx", False),
    ("/dashboard", "/api/webhooks/accounts", False),
    ("/dashboard", "/healthz", False),
    ("/dashboard/", "/dashboard/sign-in", True),
    ("/", "/anything", True),
])
def test_a_cookie_is_sent_under_its_path_only(cookie_path, request_path, sent):
    assert sends_the_cookie(cookie_path, request_path) is sent


@pytest.mark.parametrize("path", ["/api/webhooks/accounts/x/events", "/healthz", "/metrics"])
def test_outside_the_dashboard_a_request_gets_the_null_session(app, path):
    with app.test_request_context(path, method="POST"):
        assert isinstance(session, NullSession)
        assert dict(session) == {}
        with pytest.raises(RuntimeError):  # written there, it raises instead of a lost cookie
            session["x"] = 1


@pytest.mark.parametrize("path", ["/dashboard/", "/dashboard/subscriptions/new"])
def test_under_the_dashboard_a_request_gets_its_cookie_session(app, path):
    with app.test_request_context(path):
        assert not isinstance(session, NullSession)
        session["x"] = 1  # a real session takes writes


def test_an_api_answer_sets_no_cookie_and_the_dashboard_still_signs_in(app, alice_client):
    answer = alice_client.get("/api/webhooks/subscriptions",
                              headers={"Authorization": "Bearer not-a-key"})
    assert answer.status_code == 401
    assert "Set-Cookie" not in answer.headers
    assert alice_client.get("/dashboard/").status_code == 200  # still signed in
