"""CONTRACT 9.3 in the dashboard: a portal link signs a browser in once, its session ends at
``expires_at``, a second open signs nothing in, and framing is for the allowed origins only."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import update

from webhooks.storage.db import session_scope
from webhooks.storage.models import DashboardSession, PortalLink, utcnow

from .helpers import csrf_token, post_form
from .portal_helpers import COOKIE, link_path, link_rows, new_link, session_rows

pytestmark = pytest.mark.database

ALLOWED = "https://app.example.com http://127.0.0.1:9000"


def _opened(client, token: str):
    response = client.get(link_path(token))
    assert response.status_code == 302 and response.headers["Location"] == "/dashboard/"
    return response


def test_opening_a_link_signs_the_browser_in_until_the_link_s_expiry(client, alice):
    token = new_link(alice.account_id, expires_in=600)
    (link,) = link_rows()
    _opened(client, token)
    page = client.get("/dashboard/")
    assert page.status_code == 200 and "alice" in page.get_data(as_text=True)
    (row,) = session_rows()
    assert row.account_id == alice.account_id and not row.read_only
    assert row.expires_at == link.expires_at
    (spent,) = link_rows()
    assert spent.used_at is not None
    # A full link acts like an API-key sign-in.
    created = post_form(client, "/dashboard/subscriptions/new", "/dashboard/subscriptions/new",
                        {"url": "https://hooks.example.com/in", "filter_mode": "all"})
    assert created.status_code == 302


def test_a_second_open_says_used_or_expired_and_leaves_no_session(app, client, alice):
    token = new_link(alice.account_id)
    _opened(client, token)
    again = client.get(link_path(token))
    assert again.status_code == 410
    text = again.get_data(as_text=True)
    assert "used or has expired" in text and "Sign out" not in text
    assert client.get_cookie(COOKIE, path="/dashboard") is None
    assert session_rows() == []  # the session it had opened is ended too
    assert client.get("/dashboard/subscriptions").status_code == 302

    other = app.test_client()  # the link forwarded to someone else
    forwarded = other.get(link_path(token))
    assert forwarded.status_code == 410 and "Set-Cookie" not in forwarded.headers
    assert session_rows() == []


@pytest.mark.parametrize("token", ["nope", "x" * 43, "%00", "a" * 600])
def test_an_unknown_token_opens_nothing(client, alice, token):
    response = client.get(link_path(token))
    assert response.status_code == 410 and "Set-Cookie" not in response.headers
    assert session_rows() == []


def test_an_expired_link_opens_nothing(client, alice):
    token = new_link(alice.account_id)
    with session_scope() as session:
        session.execute(update(PortalLink).values(expires_at=utcnow()))
    assert client.get(link_path(token)).status_code == 410
    assert session_rows() == []


def test_the_session_ends_at_expires_at_and_asks_to_sign_in(client, alice):
    _opened(client, new_link(alice.account_id))
    assert client.get("/dashboard/deliveries").status_code == 200
    with session_scope() as session:
        session.execute(update(DashboardSession).values(expires_at=utcnow()))
    page = client.get("/dashboard/deliveries")
    assert page.status_code == 302 and "/dashboard/sign-in" in page.headers["Location"]
    sign_in = client.get(page.headers["Location"], follow_redirects=True)
    assert "Your session has ended" in sign_in.get_data(as_text=True)


def test_a_head_request_does_not_spend_the_link(client, alice):
    token = new_link(alice.account_id)
    assert client.head(link_path(token)).status_code == 200
    assert session_rows() == [] and link_rows()[0].used_at is None
    _opened(client, token)


def test_two_opens_at_once_give_one_session(app, alice):
    token = new_link(alice.account_id)
    barrier = threading.Barrier(2)
    statuses: list[int] = []

    def open_link() -> None:
        client = app.test_client()
        barrier.wait()
        statuses.append(client.get(link_path(token)).status_code)

    threads = [threading.Thread(target=open_link) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [302, 410]
    assert len(session_rows()) == 1


def test_opening_a_link_replaces_the_browser_s_session(alice_client, alice, bob):
    _opened(alice_client, new_link(bob.account_id, read_only=True))
    (row,) = session_rows()
    assert row.account_id == bob.account_id and row.read_only


# ---------------------------------------------------------------- framing and the cookie
def _headers_of_a_portal_page(app, account_id: str):
    client = app.test_client()
    opened = client.get(link_path(new_link(account_id)))
    return opened, client.get("/dashboard/subscriptions")


def test_by_default_no_page_may_be_framed(app, alice):
    opened, page = _headers_of_a_portal_page(app, alice.account_id)
    for response in (opened, page):
        assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]
        assert response.headers["X-Frame-Options"] == "DENY"
    assert "SameSite=Lax" in opened.headers["Set-Cookie"]
    assert "Partitioned" not in opened.headers["Set-Cookie"]


@pytest.fixture
def framing_app(db, redis_broker, data_dir, monkeypatch):
    from web import create_app

    monkeypatch.setenv("WEBHOOKS_PORTAL_FRAME_ANCESTORS", ALLOWED)
    return create_app({"TESTING": True})


def test_allowed_origins_may_frame_a_portal_session_only(framing_app, alice):
    opened, page = _headers_of_a_portal_page(framing_app, alice.account_id)
    for response in (opened, page):
        policy = response.headers["Content-Security-Policy"]
        assert "frame-ancestors https://app.example.com http://127.0.0.1:9000;" in policy
        assert "X-Frame-Options" not in response.headers
    cookie = opened.headers["Set-Cookie"]
    assert "SameSite=None" in cookie and "Secure" in cookie and "Partitioned" in cookie
    # The page that says a link was used may be framed too, so the embedding page shows it.
    spent = framing_app.test_client().get(link_path("used-or-unknown"))
    assert "frame-ancestors https://app.example.com" in spent.headers["Content-Security-Policy"]


def test_an_api_key_session_is_never_framed_even_with_allowed_origins(framing_app, alice):
    from .helpers import sign_in

    client = framing_app.test_client()
    page = client.get("/dashboard/")
    assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
    signed_in = client.post("/dashboard/sign-in", data={
        "csrf_token": csrf_token(page.get_data(as_text=True)), "api_key": alice.api_key})
    assert "SameSite=Lax" in signed_in.headers["Set-Cookie"]
    sign_in(client, alice.api_key)
    overview = client.get("/dashboard/")
    assert "frame-ancestors 'none'" in overview.headers["Content-Security-Policy"]
    assert overview.headers["X-Frame-Options"] == "DENY"


@pytest.mark.parametrize("value", ["https://a.example/path", "app.example.com", "*",
                                   "https://a.example; script-src *", "'self'",
                                   "javascript:alert(1)"])
def test_a_malformed_frame_ancestors_value_stops_the_app_at_start(db, monkeypatch, value):
    from web import create_app
    from webhooks.errors import ConfigError

    monkeypatch.setenv("WEBHOOKS_PORTAL_FRAME_ANCESTORS", value)
    with pytest.raises(ConfigError, match="WEBHOOKS_PORTAL_FRAME_ANCESTORS"):
        create_app({"TESTING": True})


@pytest.mark.parametrize("value", ["hooks.example.com", "ftp://hooks.example.com",
                                   "https://hooks.example.com/?x=1", "https://"])
def test_a_malformed_public_url_stops_the_app_at_start(db, monkeypatch, value):
    from web import create_app
    from webhooks.errors import ConfigError

    monkeypatch.setenv("WEBHOOKS_PUBLIC_URL", value)
    with pytest.raises(ConfigError, match="WEBHOOKS_PUBLIC_URL"):
        create_app({"TESTING": True})
