"""CONTRACT 9.2: signing out ends the session on the server; a cookie saved before sign-out
opens no page afterwards (issue 22: it opened pages and passed CSRF for 12 hours)."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import func, select, update

from webhooks.storage.db import session_scope
from webhooks.storage.models import DashboardSession, Subscription, utcnow

from web.dashboard.sessions import CLEANUP_BATCH

from .helpers import csrf_token, post_form, sign_in

pytestmark = pytest.mark.database

COOKIE = "webhooks_session"
NEW = "/dashboard/subscriptions/new"


def _saved_cookie(client) -> str:
    saved = client.get_cookie(COOKIE, path="/dashboard")
    assert saved is not None
    return saved.value


def _browser_with(app, cookie: str):
    """Another browser holding ``cookie`` (a copy saved earlier, replayed as it was)."""
    other = app.test_client()
    other.set_cookie(COOKIE, cookie, path="/dashboard")
    return other


def _session_rows() -> list[DashboardSession]:
    with session_scope() as session:
        rows = list(session.scalars(select(DashboardSession)))
        session.expunge_all()
        return rows


def test_a_cookie_saved_before_sign_out_opens_no_page_after_it(app, alice_client):
    saved = _saved_cookie(alice_client)
    form = _browser_with(app, saved).get(NEW)
    assert form.status_code == 200  # the copy works while the session lives
    token = csrf_token(form.get_data(as_text=True))

    post_form(alice_client, "/dashboard/", "/dashboard/sign-out")

    page = _browser_with(app, saved).get("/dashboard/subscriptions")
    assert page.status_code == 302 and "/dashboard/sign-in" in page.headers["Location"]
    acted = _browser_with(app, saved).post(NEW, data={
        "csrf_token": token, "url": "https://hooks.example.com/in", "filter_mode": "all"})
    assert acted.status_code == 302 and "/dashboard/sign-in" in acted.headers["Location"]
    with session_scope() as session:
        assert session.scalar(select(func.count()).select_from(Subscription)) == 0
    assert _session_rows() == []


def test_a_session_ends_at_its_expiry(alice_client, alice):
    (row,) = _session_rows()
    assert row.account_id == alice.account_id and not row.read_only
    assert dt.timedelta(hours=11) < row.expires_at - utcnow() <= dt.timedelta(hours=12)
    with session_scope() as session:
        session.execute(update(DashboardSession).values(expires_at=utcnow()))
    assert alice_client.get("/dashboard/subscriptions").status_code == 302


def test_signing_in_again_replaces_the_browser_s_session(alice_client, alice):
    (first,) = _session_rows()
    sign_in(alice_client, alice.api_key)
    (second,) = _session_rows()
    assert second.id != first.id


def test_each_sign_in_deletes_a_bounded_batch_of_expired_sessions(client, alice, bob):
    now = utcnow()
    with session_scope() as session:
        session.add_all(DashboardSession(
            id=f"{number:064x}", account_id=bob.account_id, created_at=now,
            expires_at=now - dt.timedelta(minutes=number)) for number in range(1, 151))
        session.add(DashboardSession(id="f" * 64, account_id=bob.account_id, created_at=now,
                                     expires_at=now + dt.timedelta(hours=1)))
    sign_in(client, alice.api_key)
    left = {row.id for row in _session_rows()}
    # The oldest go first; the live session of bob and alice's new one stay.
    assert len(left) == 151 + 1 - CLEANUP_BATCH
    assert "f" * 64 in left and f"{150:064x}" not in left and f"{1:064x}" in left
    sign_in(client, alice.api_key)
    assert {row.account_id for row in _session_rows()} == {alice.account_id, bob.account_id}
    assert len(_session_rows()) == 2
