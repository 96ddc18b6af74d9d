"""Portal links (CONTRACT 9.3) in a real browser: headless Chromium driven by Playwright.

The app is served by a real WSGI server on 127.0.0.1 (plain http), on the real
PostgreSQL. Links are made through the API route with the account's key, as
the product would. A person opens a read-only link, browses, tries an action
(refused with 403), reuses the link, and outlives the session (its
``expires_at`` is moved to now in the database: the contract's shortest link,
60 s, is too long to wait for). Then two tiny pages, each served from a local
http server of its own (a different origin), embed a link in an iframe: the
one WEBHOOKS_PORTAL_FRAME_ANCESTORS allows shows the dashboard, signed in; the
other shows nothing of it (the browser refuses the frame).

The allowed page is served from ``localhost`` and the app from ``127.0.0.1``:
two different sites, so the frame gets its session only because the portal
cookie is ``SameSite=None; Secure; Partitioned`` (Chromium blocks other
third-party cookies, and keeps a Secure cookie from http://127.0.0.1, a
potentially trustworthy origin).

Needs ``pip install playwright`` (never ``playwright install``) and
``scripts/install-browser.sh``; skips locally when either is missing, fails when CI is set.
"""

from __future__ import annotations

import contextlib
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest
import requests
from sqlalchemy import update

from tests.dashboard.test_browser import CHROMIUM, CHROMIUM_ARGS, sync_playwright  # noqa: F401
from tests.support.live_app import serving_app
from webhooks.storage.db import session_scope
from webhooks.storage.models import DashboardSession, utcnow

pytestmark = pytest.mark.integration

_ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = _ROOT / ("docs" if os.environ.get("WEBHOOKS_DOCS_SCREENSHOTS") == "1"
                       else "artifacts") / "screenshots"


def shoot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


class _Pages:
    """A tiny http server on 127.0.0.1 answering each path with the HTML put there."""

    def __init__(self) -> None:
        pages: dict[str, str] = {}
        self.pages = pages

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                body = pages.get(self.path, "not here").encode()
                self.send_response(200 if self.path in pages else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_port
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "_Pages":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


def _embedding(link: str) -> str:
    return (f'<!doctype html><title>Customer app</title><h1>Our product</h1>'
            f'<iframe id="portal" src="{link}" width="1000" height="700"></iframe>')


@contextlib.contextmanager
def _app(monkeypatch, tmp_path, **env: str) -> Iterator[str]:
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_SECURE_COOKIES", "false")  # plain http on 127.0.0.1
    monkeypatch.setenv("WEBHOOKS_DATA_DIR", str(tmp_path))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    reset_settings_cache()
    with serving_app() as url:
        yield url


def _new_link(base: str, api_key: str, **body) -> dict:
    answer = requests.post(f"{base}/api/webhooks/portal-links", json=body, timeout=10,
                           headers={"Authorization": f"Bearer {api_key}"})
    assert answer.status_code == 201, answer.text
    return answer.json()


@pytest.fixture
def browser(sync_playwright):  # noqa: F811 (the fixture of test_browser.py)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def _new_page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    return page


def test_a_read_only_link_browses_refuses_an_action_is_used_once_and_expires(
        browser, db, redis_broker, monkeypatch, tmp_path):
    from tests.dashboard.rows import dead_delivery, make_subscription
    from tests.factories import make_account

    account_id, api_key = make_account("Acme")
    subscription_id = make_subscription(account_id)
    delivery_id = dead_delivery(account_id, subscription_id)
    with _app(monkeypatch, tmp_path) as base:
        link = _new_link(base, api_key, read_only=True, expires_in=600)["url"]
        page = _new_page(browser)

        # Open the link: signed in, read-only, and the token is gone from the address bar.
        page.goto(link)
        page.get_by_role("heading", name="Overview").wait_for()
        assert page.url == f"{base}/dashboard/"
        assert page.locator("#read-only-banner").is_visible()
        shoot(page, "portal-01-read-only-overview")

        # Browse: every page shows, no action does.
        page.get_by_role("navigation").get_by_role("link", name="Subscriptions").click()
        assert page.get_by_role("link", name="New subscription").count() == 0
        page.goto(f"{base}/dashboard/subscriptions/{subscription_id}")
        page.get_by_text("Signing secret", exact=True).wait_for()
        for action in ("Send test", "Rotate secret", "Recover", "Show secret"):
            assert page.get_by_role("button", name=action).count() == 0, action
        assert page.get_by_role("link", name="Edit subscription").count() == 0
        shoot(page, "portal-02-read-only-subscription")
        page.goto(f"{base}/dashboard/deliveries/{delivery_id}")
        page.get_by_role("heading", name="Delivery").first.wait_for()
        assert page.get_by_role("button", name="Replay").count() == 0

        # An action anyway (a form the page does not offer, with this session's CSRF token):
        # the server refuses it.
        token = page.locator("input[name=csrf_token]").first.get_attribute("value")
        page.set_content(
            f'<form method="post" action="{base}/dashboard/deliveries/{delivery_id}/replay">'
            f'<input name="csrf_token" value="{token}"><button>Replay</button></form>')
        with page.expect_navigation() as navigation:
            page.get_by_role("button", name="Replay").click()
        assert navigation.value.status == 403
        page.get_by_role("heading", name="Read-only session").wait_for()
        shoot(page, "portal-03-read-only-refused")

        # A link of another account opened in this browser (by a page, say): asked first,
        # nothing spent, and staying keeps the session (issue 36, finding 4).
        _, other_key = make_account("Globex")
        page.goto(_new_link(base, other_key)["url"])
        page.get_by_role("heading", name="Switch to another account?").wait_for()
        shoot(page, "portal-07-switch-account")
        page.get_by_role("link", name="Stay as Acme").click()
        page.get_by_role("heading", name="Overview").wait_for()
        assert page.locator("#read-only-banner").is_visible()

        # Reuse the link (another person it was forwarded to): used, nobody signed in.
        other = _new_page(browser)
        answer = other.goto(link)
        assert answer.status == 410
        other.get_by_role("heading", name="This link was used or has expired").wait_for()
        assert other.context.cookies() == []
        shoot(other, "portal-04-link-used")

        # Past expiry: the session ends and the page asks to sign in.
        page.goto(f"{base}/dashboard/deliveries")
        page.get_by_role("heading", name="Deliveries").wait_for()
        with session_scope() as session:
            session.execute(update(DashboardSession).values(expires_at=utcnow()))
        page.reload()
        page.get_by_text("Your session has ended").wait_for()
        assert page.get_by_label("API key").is_visible()
        assert "/dashboard/sign-in" in page.url


def test_a_link_embeds_from_an_allowed_origin_only(browser, db, redis_broker, monkeypatch,
                                                   tmp_path):
    from tests.factories import make_account

    _, api_key = make_account("Acme")
    with _Pages() as allowed, _Pages() as refused:
        allowed_origin = f"http://localhost:{allowed.port}"  # another site than 127.0.0.1
        refused_origin = f"http://127.0.0.1:{refused.port}"
        with _app(monkeypatch, tmp_path, WEBHOOKS_PORTAL_FRAME_ANCESTORS=allowed_origin) as base:
            allowed.pages["/"] = _embedding(_new_link(base, api_key)["url"])
            refused.pages["/"] = _embedding(_new_link(base, api_key)["url"])

            page = _new_page(browser)
            page.goto(f"{allowed_origin}/")
            framed = page.frame_locator("#portal")
            framed.get_by_role("heading", name="Overview").wait_for()
            # Signed in inside the frame: the cross-site frame sent the portal cookie back.
            assert framed.get_by_role("button", name="Sign out").is_visible()
            framed.get_by_role("link", name="Deliveries").click()
            framed.get_by_role("heading", name="Deliveries").wait_for()
            shoot(page, "portal-05-embedded-allowed")

            blocked = _new_page(browser)
            with blocked.expect_console_message(
                    predicate=lambda message: "frame-ancestors" in message.text) as refusal:
                blocked.goto(f"{refused_origin}/")
            # The browser refused to frame the dashboard: only the allowed origin may.
            assert base in refusal.value.text and allowed_origin in refusal.value.text
            blocked.get_by_role("heading", name="Our product").wait_for()
            inside = blocked.frame_locator("#portal")
            assert inside.get_by_role("heading", name="Overview").count() == 0
            assert inside.get_by_text("Acme").count() == 0
            shoot(blocked, "portal-06-embedded-refused")
