"""CONTRACT 9.3 in the dashboard: a portal link signs a browser in once, its session ends at
``expires_at``, a second open signs nothing in, and framing is for the allowed origins only."""

from __future__ import annotations

import datetime as dt
import threading
from email.utils import parsedate_to_datetime
from http.cookies import SimpleCookie

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


def test_a_second_open_says_used_or_expired_and_signs_nothing_in(app, client, alice):
    token = new_link(alice.account_id)
    _opened(client, token)
    again = client.get(link_path(token))
    assert again.status_code == 410
    text = again.get_data(as_text=True)
    assert "used or has expired" in text and "You are still signed in as" in text
    assert len(session_rows()) == 1  # the session the first open made stays (finding 5)
    assert client.get("/dashboard/subscriptions").status_code == 200

    other = app.test_client()  # the link forwarded to someone else
    forwarded = other.get(link_path(token))
    assert forwarded.status_code == 410 and "Set-Cookie" not in forwarded.headers
    assert "still signed in" not in forwarded.get_data(as_text=True)
    assert len(session_rows()) == 1


def test_a_bogus_spent_or_expired_link_leaves_the_browser_s_session_alone(alice_client, alice):
    """Issue 36, finding 5: any page could sign a browser out with a made-up link."""
    spent = new_link(alice.account_id)
    assert alice_client.application.test_client().get(link_path(spent)).status_code == 302
    expired = new_link(alice.account_id)
    with session_scope() as session:
        session.execute(update(PortalLink).where(PortalLink.used_at.is_(None))
                        .values(expires_at=utcnow()))
    before = {row.id for row in session_rows()}
    for token in ("anything", spent, expired):
        assert alice_client.get(link_path(token)).status_code == 410
    assert {row.id for row in session_rows()} == before
    assert alice_client.get("/dashboard/subscriptions").status_code == 200


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


def test_a_link_of_another_account_asks_before_it_replaces_the_session(alice_client, alice, bob):
    """Issue 36, finding 4 (login CSRF): a page that opens bob's link in alice's browser must
    not silently put her to work in bob's account."""
    token = new_link(bob.account_id, read_only=True)
    asked = alice_client.get(link_path(token))
    assert asked.status_code == 200
    page = asked.get_data(as_text=True)
    assert "Switch to another account?" in page and "bob" in page and "alice" in page
    assert link_rows()[0].used_at is None  # asking spends nothing
    (row,) = session_rows()
    assert row.account_id == alice.account_id
    # Another site cannot say yes for her: the yes needs the form's CSRF token.
    assert alice_client.post(link_path(token)).status_code == 400
    assert link_rows()[0].used_at is None
    switched = alice_client.post(link_path(token), data={"csrf_token": csrf_token(page)})
    assert switched.status_code == 302 and switched.headers["Location"] == "/dashboard/"
    (row,) = session_rows()
    assert row.account_id == bob.account_id and row.read_only
    assert "bob" in alice_client.get("/dashboard/").get_data(as_text=True)


def test_staying_keeps_the_session_and_the_link(alice_client, alice, bob):
    token = new_link(bob.account_id)
    alice_client.get(link_path(token))
    assert "alice" in alice_client.get("/dashboard/").get_data(as_text=True)
    (row,) = session_rows()
    assert row.account_id == alice.account_id
    assert link_rows()[0].used_at is None  # still good for the browser it was meant for


def test_a_link_of_the_same_account_opens_at_once(alice_client, alice):
    _opened(alice_client, new_link(alice.account_id, read_only=True))
    (row,) = session_rows()
    assert row.account_id == alice.account_id and row.read_only


def test_a_read_only_session_may_switch_to_another_account_s_link(app, alice, bob):
    client = app.test_client()
    _opened(client, new_link(alice.account_id, read_only=True))
    token = new_link(bob.account_id)
    page = client.get(link_path(token)).get_data(as_text=True)
    switched = client.post(link_path(token), data={"csrf_token": csrf_token(page)})
    assert switched.status_code == 302
    (row,) = session_rows()
    assert row.account_id == bob.account_id and not row.read_only


def _cookie_expires(response) -> dt.datetime:
    cookie = SimpleCookie(response.headers["Set-Cookie"])[COOKIE]
    return parsedate_to_datetime(cookie["expires"])


def test_the_cookie_expires_with_the_link_s_session(client, alice):
    """Issue 36, finding 18: a 60 s link's cookie said Expires 12 hours out."""
    token = new_link(alice.account_id, expires_in=60)
    (link,) = link_rows()
    opened = _opened(client, token)
    ends = link.expires_at.replace(microsecond=0)
    assert ends <= _cookie_expires(opened) <= ends + dt.timedelta(seconds=1)
    # Every later answer that sends the cookie again keeps the same end.
    later = client.get("/dashboard/subscriptions")
    assert _cookie_expires(later) == _cookie_expires(opened)


def test_an_api_key_session_s_cookie_expires_with_its_row(app, alice):
    client = app.test_client()
    page = client.get("/dashboard/")
    signed_in = client.post("/dashboard/sign-in", data={
        "csrf_token": csrf_token(page.get_data(as_text=True)), "api_key": alice.api_key})
    (row,) = session_rows()
    ends = row.expires_at.replace(microsecond=0)
    assert ends <= _cookie_expires(signed_in) <= ends + dt.timedelta(seconds=1)


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
