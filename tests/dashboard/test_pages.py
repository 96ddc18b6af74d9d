"""The dashboard's pages and forms through Flask's test client, on the real PostgreSQL.

Every action goes through the page's form (with its CSRF token) and is
checked in the database, as the API tests check the API.
"""

from __future__ import annotations

import base64
import json
import re

import pytest
from sqlalchemy import select

from webhooks.storage.db import session_scope
from webhooks.storage.models import Delivery, Subscription

from .helpers import csrf_token, inputs, post_form, sign_in
from .rows import add_attempts, dead_delivery, emit, make_subscription, pause_subscription

pytestmark = pytest.mark.database


def text(response) -> str:
    """The page's HTML, without the <wbr> that let a URL wrap (url_breaks.py): URLs read whole."""
    return response.get_data(as_text=True).replace("<wbr>", "")


def subscription_row(subscription_id: str) -> Subscription:
    with session_scope() as session:
        return session.get(Subscription, subscription_id)


def delivery_row(delivery_id: str) -> Delivery:
    with session_scope() as session:
        return session.get(Delivery, delivery_id)


# ---------------------------------------------------------------- signing in


def test_the_dashboard_asks_for_an_api_key(client):
    response = client.get("/dashboard/")
    assert response.status_code == 200
    assert response.mimetype == "text/html"
    fields = {i.get("name"): i for i in inputs(text(response))}
    assert fields["api_key"]["type"] == "password"
    assert "csrf_token" in fields
    assert "Sign in" in text(response)


def test_a_wrong_key_is_refused_and_a_right_one_signs_in(client, alice):
    page = text(client.get("/dashboard/"))
    wrong = client.post("/dashboard/sign-in",
                        data={"csrf_token": csrf_token(page), "api_key": "whk_nope"})
    assert wrong.status_code == 401
    assert "That API key is not valid." in text(wrong)

    response = sign_in(client, alice.api_key)
    assert response.status_code == 200
    assert "Overview" in text(response) and "alice" in text(response)


def test_the_session_cookie_holds_no_key_and_is_secure_httponly_lax(client, alice):
    page = text(client.get("/dashboard/"))
    response = client.post("/dashboard/sign-in",
                           data={"csrf_token": csrf_token(page), "api_key": alice.api_key})
    assert response.status_code == 302
    cookie = next(h for h in response.headers.getlist("Set-Cookie")
                  if h.startswith("webhooks_session="))
    flags = [part.strip().lower() for part in cookie.split(";")]
    assert "httponly" in flags
    assert "secure" in flags  # WEBHOOKS_SECURE_COOKIES defaults to true
    assert "samesite=lax" in flags
    assert "path=/dashboard" in flags
    assert any(flag.startswith("expires=") for flag in flags)
    # The value is signed, not encrypted: it must not hold the key.
    value = cookie.split(";", 1)[0].split("=", 1)[1]
    payload = value.lstrip(".").split(".")[0]
    decoded = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    if value.startswith("."):  # compressed
        import zlib

        decoded = zlib.decompress(decoded)
    content = json.loads(decoded)
    # The account's id, the token of its session row on the server (sessions.py) and when
    # that row ends (the cookie's Expires, portal.py).
    assert set(content) == {"account_id", "session", "ends_at", "_permanent"}
    assert (content["account_id"], content["_permanent"]) == (alice.account_id, True)
    assert alice.api_key not in cookie


def test_the_session_cookie_is_not_secure_where_secure_cookies_are_off(db, redis_broker, data_dir,
                                                                       alice, monkeypatch):
    """WEBHOOKS_SECURE_COOKIES=false (set by webhooks dev, which serves plain http)."""
    from web import create_app
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_SECURE_COOKIES", "false")
    reset_settings_cache()
    client = create_app({"TESTING": True}).test_client()
    page = text(client.get("/dashboard/"))
    response = client.post("/dashboard/sign-in",
                           data={"csrf_token": csrf_token(page), "api_key": alice.api_key})
    cookie = next(h for h in response.headers.getlist("Set-Cookie")
                  if h.startswith("webhooks_session="))
    assert "secure" not in [part.strip().lower() for part in cookie.split(";")]


def test_pages_need_a_sign_in_and_come_back_after_it(client, alice):
    response = client.get("/dashboard/deliveries?status=dead")
    assert response.status_code == 302
    assert response.headers["Location"].startswith("/dashboard/sign-in?next=")
    page = client.get(response.headers["Location"])
    assert dict((i["name"], i.get("value")) for i in inputs(text(page)) if "name" in i)[
        "next"] == "/dashboard/deliveries?status=dead"
    signed_in = client.post("/dashboard/sign-in", data={
        "csrf_token": csrf_token(text(page)), "api_key": alice.api_key,
        "next": "/dashboard/deliveries?status=dead"})
    assert signed_in.headers["Location"] == "/dashboard/deliveries?status=dead"


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/x", "/api/webhooks/x",
                                    "/dashboard/\\evil"])
def test_sign_in_never_redirects_off_the_dashboard(client, alice, target):
    page = text(client.get("/dashboard/"))
    response = client.post("/dashboard/sign-in", data={
        "csrf_token": csrf_token(page), "api_key": alice.api_key, "next": target})
    assert response.headers["Location"] == "/dashboard/"


def test_sign_out_ends_the_session(alice_client):
    response = post_form(alice_client, "/dashboard/", "/dashboard/sign-out", follow_redirects=True)
    assert response.status_code == 200
    assert "You are signed out." in text(response)
    assert alice_client.get("/dashboard/subscriptions").status_code == 302


def test_pages_carry_security_headers(alice_client):
    response = alice_client.get("/dashboard/")
    assert response.headers["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]
    assert "script-src" not in response.headers["Content-Security-Policy"]  # none at all
    assert response.headers["Cache-Control"] == "no-store"


# ---------------------------------------------------------------- CSRF


def test_a_form_posted_without_its_csrf_token_is_refused(alice_client, alice):
    subscription_id = make_subscription(alice.account_id)
    pause_subscription(subscription_id)
    response = alice_client.post(f"/dashboard/subscriptions/{subscription_id}/resume")
    assert response.status_code == 400
    assert response.mimetype == "text/html"
    assert "security token" in text(response)
    assert subscription_row(subscription_id).status == "paused"  # nothing happened


def test_a_token_of_another_session_is_refused(app, alice_client, alice, bob):
    subscription_id = make_subscription(alice.account_id)
    other = app.test_client()
    sign_in(other, bob.api_key)
    foreign_token = csrf_token(text(other.get("/dashboard/")))
    response = alice_client.post(f"/dashboard/subscriptions/{subscription_id}/delete",
                                 data={"csrf_token": foreign_token})
    assert response.status_code == 400
    assert subscription_row(subscription_id).deleted_at is None


def test_sign_in_and_sign_out_need_the_token_too(client, alice_client, alice):
    assert client.post("/dashboard/sign-in", data={"api_key": alice.api_key}).status_code == 400
    assert alice_client.post("/dashboard/sign-out").status_code == 400
    assert alice_client.get("/dashboard/subscriptions").status_code == 200  # still signed in


def test_the_json_api_stays_exempt_from_csrf(client, alice):
    response = client.post("/api/webhooks/subscriptions", headers=alice.headers,
                           json={"url": "https://hooks.example.com/api"})
    assert response.status_code == 201


# ---------------------------------------------------------------- subscriptions


def test_create_a_subscription_and_see_its_secret_once_asked(alice_client, alice):
    response = post_form(alice_client, "/dashboard/subscriptions/new", "/dashboard/subscriptions/new", {
        "url": "https://hooks.example.com/in", "filter_mode": "only",
        "event_types": ["email.sent", "reply.received"], "description": "CRM sync",
    })
    assert response.status_code == 302
    location = response.headers["Location"]
    subscription_id = re.search(r"/subscriptions/([0-9a-f-]{36})/secret", location).group(1)
    stored = subscription_row(subscription_id)
    assert stored.account_id == alice.account_id
    assert stored.url == "https://hooks.example.com/in"
    assert stored.event_types == ["reply.received", "email.sent"]  # catalogue order
    assert stored.description == "CRM sync"
    shown = text(alice_client.get(location))
    assert stored.secret in shown and "Subscription created" in shown

    page = text(alice_client.get(f"/dashboard/subscriptions/{subscription_id}"))
    assert stored.secret not in page and "Show secret" in page
    listing = text(alice_client.get("/dashboard/subscriptions"))
    assert "https://hooks.example.com/in" in listing and "Active" in listing


@pytest.mark.parametrize("url, message", [
    ("ftp://hooks.example.com/in", "Must be an http or https URL."),
    ("not a url", "Must not contain spaces"),
    ("http://127.0.0.1:9/in", "127.0.0.1 is not a public address"),
])
def test_a_bad_or_private_url_is_refused_with_a_reason(alice_client, url, message):
    response = post_form(alice_client, "/dashboard/subscriptions/new",
                         "/dashboard/subscriptions/new", {"url": url, "filter_mode": "all"})
    assert response.status_code == 400
    assert message in text(response)
    with session_scope() as session:
        assert session.scalars(select(Subscription)).all() == []


def test_only_some_types_needs_a_type(alice_client):
    response = post_form(alice_client, "/dashboard/subscriptions/new", "/dashboard/subscriptions/new",
                         {"url": "https://hooks.example.com/in", "filter_mode": "only"})
    assert response.status_code == 400
    assert "Check at least one type" in text(response)


def test_edit_the_url_and_the_filter(alice_client, alice):
    subscription_id = make_subscription(alice.account_id, event_types=["email.sent"])
    edit = f"/dashboard/subscriptions/{subscription_id}/edit"
    form = text(alice_client.get(edit))
    assert 'value="https://hooks.example.com/in"' in form
    checked = [i["value"] for i in inputs(form) if i.get("name") == "event_types" and "checked" in
               re.search(rf'<input[^>]*value="{re.escape(i["value"])}"[^>]*>', form).group(0)]
    assert checked == ["email.sent"]
    response = post_form(alice_client, edit, edit, {
        "url": "https://hooks.example.com/v2", "filter_mode": "all", "description": ""})
    assert response.status_code == 302
    stored = subscription_row(subscription_id)
    assert (stored.url, stored.event_types, stored.description) == (
        "https://hooks.example.com/v2", None, None)


def test_send_test_creates_a_test_ping_delivery_and_shows_it(alice_client, alice, monkeypatch):
    from webhooks.broker import outbox

    handed = []
    monkeypatch.setattr(outbox, "publish", lambda items, timeout=None: handed.extend(items) or True)
    subscription_id = make_subscription(alice.account_id)
    page = f"/dashboard/subscriptions/{subscription_id}"
    response = post_form(alice_client, page, f"{page}/test", follow_redirects=True)
    assert response.status_code == 200
    assert "Test event sent" in text(response)
    with session_scope() as session:
        (delivery,) = session.scalars(select(Delivery)).all()
    assert delivery.event_type == "test.ping" and delivery.subscription_id == subscription_id
    assert [item.delivery_id for item in handed] == [delivery.id]  # published after commit
    assert f"/dashboard/deliveries/{delivery.id}" in text(response)
    assert "test.ping" in text(response)


def test_resume_releases_held_deliveries_and_asks_for_a_sweep(alice_client, alice, monkeypatch):
    from webhooks.broker import outbox

    sweeps = []
    monkeypatch.setattr(outbox, "request_sweep", lambda: sweeps.append(1) or True)
    subscription_id = make_subscription(alice.account_id)
    _, (delivery_id,) = emit(alice.account_id)
    pause_subscription(subscription_id, failures=25)
    page = f"/dashboard/subscriptions/{subscription_id}"
    shown = text(alice_client.get(page))
    assert "Paused" in shown and "Resume" in shown and "25 consecutive failed attempts" in shown
    # Once each: the badge beside the URL, Resume in the banner that says why.
    assert shown.count("Resume</button>") == 1 and shown.count('class="badge badge-paused"') == 1

    response = post_form(alice_client, page, f"{page}/resume", follow_redirects=True)
    assert "1 held delivery goes out now" in text(response)
    stored = subscription_row(subscription_id)
    assert (stored.status, stored.consecutive_failures) == ("active", 0)
    assert delivery_row(delivery_id).status == "pending"
    assert sweeps == [1]
    resumed = text(alice_client.get(page))
    assert "Resume</button>" not in resumed and resumed.count('class="badge badge-active"') == 1


def test_rotate_secret_shows_the_new_one(alice_client, alice):
    subscription_id = make_subscription(alice.account_id)
    before = subscription_row(subscription_id).secret
    page = f"/dashboard/subscriptions/{subscription_id}"
    response = post_form(alice_client, page, f"{page}/rotate-secret", follow_redirects=True)
    after = subscription_row(subscription_id).secret
    assert after != before and after.startswith("whsec_")
    assert after in text(response) and before not in text(response)


def test_delete_asks_for_confirmation_then_deletes(alice_client, alice):
    subscription_id = make_subscription(alice.account_id)
    _, (delivery_id,) = emit(alice.account_id)
    confirm = f"/dashboard/subscriptions/{subscription_id}/delete"
    page = alice_client.get(confirm)
    assert "Delete this subscription?" in text(page)
    assert subscription_row(subscription_id).deleted_at is None  # asking deletes nothing
    response = post_form(alice_client, confirm, confirm, follow_redirects=True)
    assert "deleted" in text(response)
    assert subscription_row(subscription_id).deleted_at is not None
    assert delivery_row(delivery_id).status == "failed"
    assert alice_client.get(f"/dashboard/subscriptions/{subscription_id}").status_code == 404
    # Its history stays readable.
    history = text(alice_client.get(f"/dashboard/deliveries/{delivery_id}"))
    assert "deleted" in history


# ---------------------------------------------------------------- deliveries


def test_the_deliveries_list_filters_by_status_type_and_subscription(alice_client, alice):
    first = make_subscription(alice.account_id, "https://one.example.com/in")
    second = make_subscription(alice.account_id, "https://two.example.com/in",
                               event_types=["email.opened"])
    dead_id = dead_delivery(alice.account_id, first)
    _, opened_ids = emit(alice.account_id, "email.opened")

    everything = text(alice_client.get("/dashboard/deliveries"))
    assert everything.count("Open <code") == 3  # email.sent to first, email.opened to both

    dead = text(alice_client.get("/dashboard/deliveries?status=dead"))
    assert dead.count("Open <code") == 1 and dead_id[:8] in dead
    assert 'class="row-dead"' in dead and "Dead</span>" in dead

    opened = text(alice_client.get("/dashboard/deliveries?event_type=email.opened"))
    assert opened.count("Open <code") == 2

    only_second = text(alice_client.get(f"/dashboard/deliveries?subscription_id={second}"))
    assert only_second.count("Open <code") == 1
    assert "https://two.example.com/in" in only_second

    combined = text(alice_client.get(
        f"/dashboard/deliveries?subscription_id={second}&event_type=email.sent"))
    assert combined.count("Open <code") == 0 and "match these filters" in combined
    # Nonsense filters are dropped, not errors.
    assert alice_client.get("/dashboard/deliveries?status=bogus&cursor=zzz").status_code == 200


def test_a_delivery_page_shows_every_attempt_and_replays_a_dead_one(alice_client, alice, monkeypatch):
    from webhooks.broker import outbox

    subscription_id = make_subscription(alice.account_id)
    dead_id = dead_delivery(alice.account_id, subscription_id)
    handed = []
    monkeypatch.setattr(outbox, "publish", lambda items, timeout=None: handed.extend(items) or True)
    page = f"/dashboard/deliveries/{dead_id}"
    shown = text(alice_client.get(page))
    for number in range(1, 7):
        assert f'<td class="number" data-label="#">{number}</td>' in shown
    assert shown.count("upstream said no") == 6  # the response excerpt of each attempt
    assert "240 ms" in shown  # duration of attempt 6
    assert "Replay</button>" in shown and "Dead" in shown

    response = post_form(alice_client, page, f"{page}/replay")
    assert response.status_code == 302
    replay_id = response.headers["Location"].rsplit("/", 1)[1]
    replay = delivery_row(replay_id)
    assert (replay.replay_of, replay.attempt_count, replay.status) == (dead_id, 0, "pending")
    assert [item.delivery_id for item in handed] == [replay_id]
    assert delivery_row(dead_id).status == "dead"  # the original stays as it was
    assert "Replay of" in text(alice_client.get(f"/dashboard/deliveries/{replay_id}"))


def test_a_done_delivery_has_no_replay(alice_client, alice):
    make_subscription(alice.account_id)
    _, (delivery_id,) = emit(alice.account_id)
    add_attempts(delivery_id, [(200, "success")], excerpt="ok")
    from tests.api.helpers import set_delivery

    set_delivery(delivery_id, status="done", attempt_count=1)
    page = f"/dashboard/deliveries/{delivery_id}"
    assert "Replay</button>" not in text(alice_client.get(page))
    response = post_form(alice_client, page, f"{page}/replay", follow_redirects=True)
    assert "Not replayed: only failed or dead deliveries can be replayed; this one is done." in text(
        response)
    with session_scope() as session:
        assert len(session.scalars(select(Delivery)).all()) == 1


def test_a_delivery_waiting_for_a_free_slot_says_so(alice_client, alice):
    make_subscription(alice.account_id)
    _, (waiting_id,) = emit(alice.account_id)
    _, (due_id,) = emit(alice.account_id)
    from tests.api.helpers import set_delivery

    set_delivery(waiting_id, parked=True, next_attempt_at=None)  # as the in-flight cap leaves it
    assert "waiting: this endpoint already has the most attempts in flight" in text(
        alice_client.get(f"/dashboard/deliveries/{waiting_id}"))
    assert "waiting" not in text(alice_client.get(f"/dashboard/deliveries/{due_id}"))
    listing = text(alice_client.get("/dashboard/deliveries"))
    assert listing.count("waiting for a free slot") == 1


def test_paused_subscriptions_and_dead_deliveries_stand_out(alice_client, alice):
    healthy = make_subscription(alice.account_id, "https://ok.example.com/in")
    broken = make_subscription(alice.account_id, "https://broken.example.com/in")
    dead_id = dead_delivery(alice.account_id, broken)
    pause_subscription(broken)

    listing = text(alice_client.get("/dashboard/subscriptions"))
    rows = re.findall(r"<tr class=\"([^\"]*)\">\s*<td class=\"url\"[^>]*><a href=\"[^\"]*/([0-9a-f-]{36})\"",
                      listing)
    assert rows[0] == ("row-paused", broken)  # paused first, marked
    assert rows[1] == ("", healthy)
    assert "Paused</span>" in listing and "badge-paused" in listing

    overview = text(alice_client.get("/dashboard/"))
    assert "1 paused subscription" in overview and "https://broken.example.com/in" in overview
    assert "Recent dead deliveries" in overview and dead_id[:8] in overview
    assert "<svg" in overview and "Failed, last: 1" in overview  # the chart counts the dead attempt


# ---------------------------------------------------------------- isolation


def test_another_accounts_pages_answer_404_and_their_forms_change_nothing(alice_client, bob):
    subscription_id = make_subscription(bob.account_id)
    dead_id = dead_delivery(bob.account_id, subscription_id)
    pause_subscription(subscription_id)
    before = subscription_row(subscription_id)

    for path in (f"/dashboard/subscriptions/{subscription_id}",
                 f"/dashboard/subscriptions/{subscription_id}/secret",
                 f"/dashboard/subscriptions/{subscription_id}/edit",
                 f"/dashboard/subscriptions/{subscription_id}/delete",
                 f"/dashboard/deliveries/{dead_id}",
                 "/dashboard/deliveries/not-a-uuid"):
        response = alice_client.get(path)
        assert response.status_code == 404, path
        assert response.mimetype == "text/html"
        assert before.secret not in text(response)

    token = csrf_token(text(alice_client.get("/dashboard/")))
    for action in ("test", "resume", "rotate-secret", "delete", "edit"):
        response = alice_client.post(f"/dashboard/subscriptions/{subscription_id}/{action}",
                                     data={"csrf_token": token, "url": "https://x.example.com/"})
        assert response.status_code == 404, action
    assert alice_client.post(f"/dashboard/deliveries/{dead_id}/replay",
                             data={"csrf_token": token}).status_code == 404

    after = subscription_row(subscription_id)
    assert (after.status, after.secret, after.url, after.deleted_at) == (
        "paused", before.secret, before.url, None)
    with session_scope() as session:
        assert len(session.scalars(select(Delivery)).all()) == 1  # no test ping, no replay
    # Nor do bob's rows show up in alice's lists.
    assert subscription_id not in text(alice_client.get("/dashboard/subscriptions"))
    assert dead_id[:8] not in text(alice_client.get("/dashboard/deliveries"))
    assert dead_id[:8] not in text(alice_client.get(
        f"/dashboard/deliveries?subscription_id={subscription_id}"))


def test_an_unknown_dashboard_path_answers_the_dashboards_404_page(alice_client):
    response = alice_client.get("/dashboard/no/such/page")
    assert response.status_code == 404
    assert response.mimetype == "text/html" and "Not found" in text(response)
    # The API keeps its JSON errors.
    assert alice_client.get("/api/webhooks/nope").json["error"]["code"] == "not_found"
