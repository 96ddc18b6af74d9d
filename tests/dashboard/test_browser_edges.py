"""The dashboard's edges (issue 28) in headless Chromium, at 390 px and at 1280 px.

An endpoint URL with a long token (no place to wrap in it) and a subscription
to every event type: no page is wider than its window; the subscription form's
Save and Cancel sit on one line; the chart's legend is at least 11 px however
the chart is scaled; at 1280 px a row of the deliveries list is one line; the
recover form shows 24-hour UTC times, 24 hours back by default; a failed
delivery that was replayed says so in the list; the help text names no file
of the repository. Screenshots as in test_browser_layout.py
(``edges-<width>-<page>.png``; docs/screenshots/ with WEBHOOKS_DOCS_SCREENSHOTS=1).
"""

from __future__ import annotations

import datetime as dt

import pytest

from tests.api.helpers import settle_publisher
from webhooks.events.catalogue import EVENT_TYPE_NAMES
from webhooks.lifecycle import changes as store
from webhooks.storage.db import session_scope
from webhooks.storage.models import Delivery, utcnow

from .rows import add_attempts, emit, make_subscription, set_delivery
from tests.dashboard.test_browser import sync_playwright  # noqa: F401  (a fixture)

from .test_browser_layout import browser, layout_faults, served, shoot  # noqa: F401  (fixtures)

pytestmark = pytest.mark.database

# A token of 160 characters with nowhere to wrap: wider than a 1280 px page's column.
TOKEN_URL = "https://hooks.partner-platform.example.com/ingest?token=" + "Zm9vYmFyYmF6cXV4" * 10

# The legend's size as drawn: an SVG's text is scaled with the SVG (its width / viewBox).
_LEGEND_PX = """() => {
  const out = [];
  for (const text of document.querySelectorAll("svg.chart text.legend")) {
    const svg = text.ownerSVGElement;
    if (!text.getClientRects().length) continue;
    const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
    out.push(parseFloat(getComputedStyle(text).fontSize) * scale);
  }
  for (const item of document.querySelectorAll(".chart-legend li")) {
    if (item.getClientRects().length) out.push(parseFloat(getComputedStyle(item).fontSize));
  }
  return out;
}"""

# The rows of the deliveries table that take more than one line: taller than a one-line row.
_TALL_ROWS = """() => {
  const rows = [...document.querySelectorAll("table.deliveries tbody tr")];
  const line = parseFloat(getComputedStyle(document.body).lineHeight) ||
    1.5 * parseFloat(getComputedStyle(document.body).fontSize);
  return rows.filter((row) => row.getBoundingClientRect().height > 2 * line + 4)
    .map((row) => `${row.innerText.replace(/\\s+/g, " ").slice(0, 60)}: ` +
                  `${Math.round(row.getBoundingClientRect().height)} px`);
}"""

_BOXES = """(selectors) => selectors.map((selector) => {
  const box = document.querySelector(selector).getBoundingClientRect();
  return {top: box.top, bottom: box.bottom, height: box.height};
})"""


@pytest.fixture
def rows(db, redis_broker):
    """A subscription whose URL carries a long token, taking every event type, with a failed
    delivery that was replayed and a few others."""
    from tests.factories import make_account

    account_id, api_key = make_account("Acme Mail Platform")
    subscription = make_subscription(account_id, TOKEN_URL, event_types=list(EVENT_TYPE_NAMES))
    made = {}
    for status, outcome in (("done", (200, "success")), ("failed", (410, "permanent_failure")),
                            ("pending", (503, "retry"))):
        _, (made[status],) = emit(account_id, "email.sent")
        add_attempts(made[status], [outcome])
        set_delivery(made[status], status=status, attempt_count=1)
    with session_scope() as session:
        store.replay_delivery(session, session.get(Delivery, made["failed"]), utcnow())
    settle_publisher()
    return {"api_key": api_key, "subscription": subscription, "replayed": made["failed"]}


def _signed_in(browser, served, rows, width):  # noqa: F811
    context = browser.new_context(viewport={"width": width, "height": 844 if width < 600 else 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{served}/dashboard/")
    page.get_by_label("API key").fill(rows["api_key"])
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", name="Overview").wait_for()
    return context, page


@pytest.mark.parametrize("width", [390, 1280])
def test_the_edges_at_each_width(browser, served, rows, width):  # noqa: F811
    context, page = _signed_in(browser, served, rows, width)
    faults = []
    try:
        subscription = f"/dashboard/subscriptions/{rows['subscription']}"
        for name, path in {"overview": "/dashboard/", "subscription": subscription,
                           "subscription-form": f"{subscription}/edit",
                           "deliveries": "/dashboard/deliveries"}.items():
            page.goto(f"{served}{path}")
            if name != "overview":  # the overview's edges are the subscription page's chart
                shoot(page, f"edges-{width}-{name}")
            faults += layout_faults(page, f"{name} at {width} px")
            if name in ("overview", "subscription"):
                sizes = page.evaluate(_LEGEND_PX)
                assert sizes, f"no legend shown on {name} at {width} px"
                if min(sizes) < 11:
                    faults.append(f"{name} at {width} px: legend drawn at {min(sizes):.1f} px")
            if name == "subscription":
                faults += _recover_form_faults(page, width)
                text = page.inner_text("main")
                if "docs/secret-rotation.md" in text:
                    faults.append("the help text names a file of the repository")
            if name == "subscription-form":
                save, cancel = page.evaluate(
                    _BOXES, ["form.stacked .actions .button.primary",
                             "form.stacked .actions a.button"])
                if abs(save["top"] - cancel["top"]) > 1 or abs(save["height"] - cancel["height"]) > 1:
                    faults.append(f"Save {save} and Cancel {cancel} are not side by side at "
                                  f"{width} px")
            if name == "deliveries":
                replayed_row = page.locator("table.deliveries tbody tr", has=page.locator(
                    f"a[href$='/deliveries/{rows['replayed']}']"))
                if "replayed" not in replayed_row.inner_text():
                    faults.append(f"the replayed failed delivery has no mark at {width} px")
                if width >= 1280:
                    tall = page.evaluate(_TALL_ROWS)
                    if tall:
                        faults.append(f"deliveries rows wrap at {width} px: {tall}")
    finally:
        context.close()
    assert not faults, "\n".join(faults)


def _recover_form_faults(page, width) -> list[str]:
    """The recover form's times: 24-hour UTC like every time shown, 24 hours back at first."""
    since = page.locator("#since")
    value = since.input_value()
    try:
        shown = dt.datetime.strptime(value, "%Y-%m-%d %H:%M").replace(tzinfo=dt.timezone.utc)
    except ValueError:
        return [f"the recover form's start reads {value!r} at {width} px, not YYYY-MM-DD HH:MM"]
    back = utcnow() - shown
    if not dt.timedelta(hours=23, minutes=58) <= back <= dt.timedelta(hours=24, minutes=2):
        return [f"the recover form starts {back} back, not 24 hours"]
    if since.get_attribute("type") != "text":
        return [f"the recover form's start is an <input type={since.get_attribute('type')}>, "
                "which Chromium shows in the local 12- or 24-hour format"]
    return []
