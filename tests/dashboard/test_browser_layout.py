"""Every dashboard page laid out in a real browser, at 390 px (a phone) and at 1280 px.

Headless Chromium (Debian's package) through Playwright, as in test_browser.py,
but with no worker: the rows are made directly (tests/dashboard/rows.py), so
every page has something in each state to lay out, with long URLs.

At each width, on each page: nothing reaches past the right edge of the window
(``scrollWidth <= innerWidth``, and no element sticks out unless a box that
scrolls on its own clips it, as a wide table's does); the header's items stay
on the header's dark band; and every URL shown wraps, if it wraps, after a
``/`` or before a ``.`` (url_breaks.py), never mid-word. Each page is saved as
``layout-<width>-<page>.png`` under artifacts/screenshots/, or docs/screenshots/
with WEBHOOKS_DOCS_SCREENSHOTS=1.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.dashboard.test_browser import CHROMIUM, CHROMIUM_ARGS, sync_playwright  # noqa: F401

from tests.api.helpers import settle_publisher
from tests.factories import AUDIT_ACTOR
from tests.support.live_app import serving_app
from webhooks.lifecycle import changes as store
from webhooks.services import rotation
from webhooks.storage.db import session_scope
from webhooks.storage.models import Delivery, Subscription, utcnow

from .rows import add_attempts, dead_delivery, emit, make_subscription, pause_subscription, set_delivery

pytestmark = pytest.mark.database

_ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = _ROOT / ("docs" if os.environ.get("WEBHOOKS_DOCS_SCREENSHOTS") == "1"
                       else "artifacts") / "screenshots"

# Long, as real endpoints are: a line of the deliveries list at 1280 px cannot hold them.
LONG_URL = "https://hooks.customer-platform.example.com/webhooks/v2/email-events/receiver/acme-production"
PAUSED_URL = "https://hook-user:s3cret@billing.internal-gateway.example.org/callbacks/mail/bounced?tenant=42"

# Everything whose box reaches past the window's right (or left) edge, unless an
# ancestor with overflow other than visible clips it (a table's own scroll box).
_OVERFLOWING = """() => {
  const width = window.innerWidth;
  const clipped = (element) => {
    for (let up = element.parentElement; up && up !== document.body; up = up.parentElement) {
      if (getComputedStyle(up).overflowX !== "visible") return true;
    }
    return false;
  };
  const name = (e) => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") +
    (e.className && typeof e.className === "string" ? "." + e.className.trim().split(/\\s+/).join(".") : "");
  const out = [];
  for (const element of document.body.querySelectorAll("*")) {
    const box = element.getBoundingClientRect();
    if (box.width === 0 && box.height === 0) continue;
    if ((box.right > width + 0.5 || box.left < -0.5) && !clipped(element)) {
      out.push(`${name(element)} spans ${Math.round(box.left)}..${Math.round(box.right)} px`);
    }
  }
  return {width, scrollWidth: document.documentElement.scrollWidth, out: out.slice(0, 12)};
}"""

# Items of the header that are not inside its dark band.
_OFF_HEADER = """() => {
  const band = document.querySelector("header.top").getBoundingClientRect();
  const out = [];
  for (const element of document.querySelectorAll("header.top a, header.top button, header.top span")) {
    const box = element.getBoundingClientRect();
    if (box.width === 0) continue;
    if (box.left < band.left - 0.5 || box.right > band.right + 0.5 ||
        box.top < band.top - 0.5 || box.bottom > band.bottom + 0.5) {
      out.push(`${element.textContent.trim()} at ${Math.round(box.left)},${Math.round(box.top)}`);
    }
  }
  return out;
}"""

# Where each URL shown (class "url") wraps: the characters either side of each line break.
_URL_WRAPS = """() => {
  const wraps = [];
  for (const element of document.querySelectorAll(".url")) {
    const chars = [];
    const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (let i = 0; i < node.data.length; i++) {
        const range = document.createRange();
        range.setStart(node, i);
        range.setEnd(node, i + 1);
        const boxes = range.getClientRects();
        if (boxes.length) chars.push([node.data[i], boxes[0].top, boxes[0].height]);
      }
    }
    for (let i = 1; i < chars.length; i++) {
      if (chars[i][1] > chars[i - 1][1] + chars[i - 1][2] / 2) {
        wraps.push({url: element.textContent.trim(), before: chars[i - 1][0], after: chars[i][0]});
      }
    }
  }
  return wraps;
}"""


def wraps_between_words(wrap: dict) -> bool:
    """A URL's line break falls beside punctuation (``/``, ``.``, ``?``...) or a space,
    not between two letters or digits of one word."""
    return not (wrap["before"].isalnum() and wrap["after"].isalnum())


@pytest.fixture
def rows(db, redis_broker):
    """An account with an active and a paused subscription, and deliveries in every state."""
    from tests.factories import make_account

    account_id, api_key = make_account("Acme Mail Platform")
    active = make_subscription(account_id, LONG_URL)
    paused = make_subscription(account_id, PAUSED_URL, event_types=["email.bounced"])
    dead = dead_delivery(account_id, active)
    made = {}
    for outcomes, status in ([[(200, "success")], "done"], [[(410, "permanent_failure")], "failed"],
                             [[(503, "retry")], "pending"]):
        _, (made[status],) = emit(account_id, "email.sent")
        add_attempts(made[status], outcomes, excerpt="<html><body>Service Unavailable</body></html>")
        set_delivery(made[status], status=status, attempt_count=1)
    with session_scope() as session:  # the failed one, replayed: its page points to the replay
        store.replay_delivery(session, session.get(Delivery, made["failed"]), utcnow())
    settle_publisher()
    emit(account_id, "email.bounced")  # one to each subscription: held by the pause below
    pause_subscription(paused)
    with session_scope() as session:  # an entry on the Activity page, long changes and all
        rotation.rotate(session, session.get(Subscription, active), 3600, actor=AUDIT_ACTOR)
    return {"api_key": api_key, "active": active, "paused": paused, "dead": dead,
            "replayed": made["failed"]}


@pytest.fixture
def served(rows, tmp_path, monkeypatch):
    """The app on a real WSGI server in a thread (no worker: nothing here sends); its base URL."""
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_SECURE_COOKIES", "false")  # plain http
    monkeypatch.setenv("WEBHOOKS_DATA_DIR", str(tmp_path))
    reset_settings_cache()
    with serving_app() as url:
        yield url


@pytest.fixture
def browser(sync_playwright):  # noqa: F811  (the fixture of test_browser.py)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def pages(rows) -> dict[str, str]:
    """Every page of the dashboard a signed-in person sees, by name: its path."""
    return {
        "overview": "/dashboard/",
        "deliveries": "/dashboard/deliveries",
        "delivery": f"/dashboard/deliveries/{rows['dead']}",
        "delivery-replayed": f"/dashboard/deliveries/{rows['replayed']}",
        "subscriptions": "/dashboard/subscriptions",
        "subscription": f"/dashboard/subscriptions/{rows['paused']}",
        "subscription-form": f"/dashboard/subscriptions/{rows['active']}/edit",
        "subscription-delete": f"/dashboard/subscriptions/{rows['active']}/delete",
        "activity": "/dashboard/activity",
    }


def layout_faults(page, where: str) -> list[str]:
    """What in ``page`` does not fit its window or its header, each said in a line."""
    faults = []
    fits = page.evaluate(_OVERFLOWING)
    if fits["scrollWidth"] > fits["width"] or fits["out"]:
        faults.append(f"{where}: the page is {fits['scrollWidth']} px wide in a {fits['width']} px "
                      f"window; past the edge: {fits['out']}")
    off = page.evaluate(_OFF_HEADER)
    if off:
        faults.append(f"{where}: off the header's dark band (light text on the light page): {off}")
    return faults


def shoot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


@pytest.mark.parametrize("width", [390, 1280])
def test_every_page_fits_the_window_and_urls_wrap_between_words(browser, served, rows, width):
    context = browser.new_context(viewport={"width": width, "height": 844 if width < 600 else 900})
    try:
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.goto(f"{served}/dashboard/")
        faults = layout_faults(page, f"sign-in at {width} px")
        shoot(page, f"layout-{width}-sign-in")
        page.get_by_label("API key").fill(rows["api_key"])
        page.get_by_role("button", name="Sign in").click()
        page.get_by_role("heading", name="Overview").wait_for()

        wraps = []
        for name, path in pages(rows).items():
            page.goto(f"{served}{path}")
            shoot(page, f"layout-{width}-{name}")
            faults += layout_faults(page, f"{name} at {width} px")
            wraps += page.evaluate(_URL_WRAPS)
    finally:
        context.close()

    assert not faults, "\n".join(faults)
    mid_word = {(wrap["url"], wrap["before"] + "|" + wrap["after"])
                for wrap in wraps if not wraps_between_words(wrap)}
    assert not mid_word, f"URLs broken mid-word at {width} px: {sorted(mid_word)}"
    # The long URL does not fit one line of the deliveries list at either width:
    # without a wrap, the check above would have checked nothing.
    assert any(wrap["url"] == LONG_URL for wrap in wraps), f"no URL wrapped at {width} px"
