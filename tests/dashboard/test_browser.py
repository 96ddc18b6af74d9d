"""The dashboard in a real browser: headless Chromium (Debian's package) driven by Playwright.

The app is served in this process by a real WSGI server on a free port, on the
real PostgreSQL and Redis; a real Celery worker process (with beat) delivers
to a real local HTTP receiver, with 1 s retries and a pause after 3 failures,
so Send test, the pause, Resume and Replay really happen. Each step saves a
screenshot under artifacts/screenshots/.

Needs ``pip install playwright`` (the Python package only; never
``playwright install``) and ``scripts/install-browser.sh`` (Debian's chromium).
Skips locally when either is missing; fails when CI is set.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from tests.support import services
from tests.support.live_app import serving_app
from tests.support.services import PG_URL, REDIS_URL
from tests.support.worker import WorkerProcess
from webhooks.storage.db import session_scope
from webhooks.storage.models import Delivery, Subscription

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
ENV = {
    # The live server below speaks plain http: a Secure cookie would not come back.
    "WEBHOOKS_SECURE_COOKIES": "false",
    "WEBHOOKS_DATABASE_URL": PG_URL,
    "WEBHOOKS_BROKER_URL": REDIS_URL,
    "WEBHOOKS_RETRY_DELAYS": "1,1,1,1,1",
    "WEBHOOKS_PAUSE_AFTER": "3",
    "WEBHOOKS_SWEEP_INTERVAL": "1",
    "WEBHOOKS_RECOVER_AFTER": "2",
    "WEBHOOKS_TIMEOUT": "5",
    "WEBHOOKS_ALLOW_PRIVATE_TARGETS": "true",  # the receiver is on 127.0.0.1
}


@pytest.fixture
def sync_playwright():
    """Playwright's entry point, or skip (locally) / fail (CI) saying what is missing.

    Checked before the worker and the server start, so a skip costs nothing.
    """
    try:
        from playwright.sync_api import sync_playwright as start
    except ImportError as error:
        services.unavailable("Playwright for Python (pip install playwright)", error)
    if not os.access(CHROMIUM, os.X_OK):
        services.unavailable(
            f"Chromium at {CHROMIUM}",
            FileNotFoundError("run scripts/install-browser.sh (Debian's chromium package)"),
        )
    return start


@pytest.fixture
def worker(sync_playwright, postgres):
    services.check_redis()
    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()
    process = WorkerProcess(ENV).start()
    yield process
    process.stop()


@pytest.fixture
def live_server(worker, db, tmp_path, monkeypatch):
    """The app on a real WSGI server in a thread; returns its base URL."""
    from webhooks.config import reset_settings_cache

    for name, value in {**ENV, "WEBHOOKS_DATA_DIR": str(tmp_path)}.items():
        monkeypatch.setenv(name, value)
    reset_settings_cache()
    with serving_app() as url:
        yield url


@pytest.fixture
def page(sync_playwright, live_server):
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(15_000)
        yield page
        context.close()
        browser.close()


def nav(page, name: str):
    """A link of the header's navigation."""
    return page.get_by_role("navigation").get_by_role("link", name=name)


def shoot(page, step: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{step}.png"), full_page=True)


def reload_until(page, condition, timeout: float = 60.0, what: str = "the page to change"):
    """Reload ``page`` until ``condition(page)`` is true, as a person pressing F5 would."""
    deadline = time.time() + timeout
    while True:
        if condition(page):
            return
        if time.time() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.4)
        page.reload()


def wait_until(condition, timeout: float = 60.0, what="condition"):
    """Wait for ``condition()``; ``what`` (a string, or a function giving one) says what failed."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what() if callable(what) else what}")


def deliveries_of(subscription_id: str) -> list[Delivery]:
    with session_scope() as session:
        return list(session.scalars(
            select(Delivery).where(Delivery.subscription_id == subscription_id)
            .order_by(Delivery.created_at)))


def test_a_subscriber_tests_pauses_resumes_and_replays_in_the_dashboard(
    page, live_server, receiver, worker
):
    from playwright.sync_api import expect

    from tests.factories import make_account
    from webhooks import emit_event
    from webhooks.events.samples import sample_data

    _, api_key = make_account("Acme")

    # 1. Sign in with the API key.
    page.goto(f"{live_server}/dashboard/")
    page.get_by_label("API key").fill(api_key)
    shoot(page, "01-sign-in")
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", name="Overview").wait_for()

    # 2. Subscribe the local receiver.
    nav(page, "Subscriptions").click()
    page.get_by_role("link", name="New subscription").click()
    page.get_by_label("Endpoint URL").fill(receiver.url("/hook"))
    page.get_by_label("Description (optional)").fill("Local receiver")
    page.get_by_role("button", name="Create subscription").click()
    page.get_by_text("Subscription created").wait_for()
    secret = page.locator("#secret").inner_text()
    assert secret.startswith("whsec_")
    with session_scope() as session:
        subscription = session.scalars(select(Subscription)).one()
    subscription_id = subscription.id
    shoot(page, "02-subscription-created")

    # 3. Send test: the delivery appears, and arrives signed with that secret.
    page.get_by_role("button", name="Send test").click()
    page.get_by_text("Test event sent").wait_for()
    (arrived,) = receiver.wait_for(1, "/hook", timeout=60)
    assert arrived.headers["X-Service-Event"] == "test.ping"
    from webhooks.signing import verify

    verify(secret, arrived.body, arrived.headers["X-Service-Signature"])
    recent = page.locator("table.deliveries tbody tr")
    reload_until(page, lambda p: recent.count() == 1 and "Done" in recent.first.inner_text(),
                 what="the test delivery to show Done")
    assert "test.ping" in recent.first.inner_text()
    shoot(page, "03-test-delivered")

    # 4. The receiver fails: an event of the application and another test. Three failures
    #    in a row pause the subscription; the test ping is never held and dies at attempt 6.
    receiver.script("/hook", 500)
    emitted = emit_event(subscription.account_id, "email.sent", sample_data("email.sent"))
    page.get_by_role("button", name="Send test").click()
    nav(page, "Subscriptions").click()
    row = page.locator("table.subscriptions tbody tr").first
    reload_until(page, lambda p: "PAUSED" in row.inner_text().upper(),
                 what="the subscription to show Paused")
    assert "row-paused" in row.get_attribute("class")
    shoot(page, "04-subscription-paused")

    held_id = emitted.delivery_ids[0]

    def settled():
        states = {(d.event_type, d.status, d.attempt_count) for d in deliveries_of(subscription_id)}
        return states == {("test.ping", "done", 1), ("email.sent", "paused", 2),
                          ("test.ping", "dead", 6)} or (
            states == {("test.ping", "done", 1), ("email.sent", "paused", 3),
                       ("test.ping", "dead", 6)})

    wait_until(settled, what=lambda: "the ping to die and the event to be held: "
               f"{[(d.event_type, d.status, d.attempt_count) for d in deliveries_of(subscription_id)]}"
               f"\nworker log:\n{worker.log()}")
    dead = [d for d in deliveries_of(subscription_id) if d.status == "dead"]
    assert len(dead) == 1 and dead[0].event_type == "test.ping" and dead[0].attempt_count == 6
    dead_id = dead[0].id
    nav(page, "Deliveries").click()
    page.get_by_label("Status").select_option("dead")
    page.get_by_role("button", name="Filter").click()
    page.get_by_role("link", name=f"Open {dead_id[:8]}").click()
    # expect() waits for the new page: count() alone could read the old one.
    expect(page.locator("table.attempts tbody tr")).to_have_count(6)
    shoot(page, "05-dead-delivery")

    # 5. Fix the receiver and Resume: the held delivery goes out at once.
    receiver.script("/hook", 200)
    before = len(receiver.received("/hook"))
    page.get_by_role("link", name=subscription.url).click()
    page.get_by_role("button", name="Resume").first.click()
    page.get_by_text("Subscription resumed. 1 held delivery goes out now.").wait_for()
    wait_until(lambda: any(r.headers["X-Service-Delivery-Id"] == held_id and
                           r.headers["X-Service-Event"] == "email.sent"
                           for r in receiver.received("/hook")[before:]),
               what="the held delivery to arrive")
    rows = page.locator("table.deliveries tbody tr")
    reload_until(page, lambda p: _row_done(rows, held_id), what="the held delivery to show Done")
    assert "PAUSED" not in page.locator(".heading-row").first.inner_text().upper()
    shoot(page, "06-resumed")

    # 6. Replay the dead delivery: a new delivery of the same event, and it arrives.
    page.goto(f"{live_server}/dashboard/deliveries/{dead_id}")
    page.get_by_role("button", name="Replay").click()
    page.get_by_text("Replay sent as a new delivery.").wait_for()
    replay_id = page.url.rsplit("/", 1)[1]
    assert replay_id != dead_id
    reload_until(page, lambda p: "Done" in p.locator(".heading-row").first.inner_text(),
                 what="the replay to show Done")
    replayed = [r for r in receiver.received("/hook")
                if r.headers["X-Service-Delivery-Id"] == replay_id]
    assert replayed and replayed[0].headers["X-Service-Event-Id"] == dead[0].event_id
    assert replayed[0].headers["X-Service-Attempt"] == "1"
    assert page.get_by_text("Replay of").is_visible()
    shoot(page, "07-replayed")

    # The overview's chart now shows the last hour's outcomes.
    nav(page, "Overview").click()
    page.get_by_role("heading", name="Overview").wait_for()
    expect(page.locator("figure.chart-box svg")).to_have_count(1)
    expect(page.locator("rect.bar-dead")).to_have_count(1)
    shoot(page, "08-overview")


def _row_done(rows, delivery_id: str) -> bool:
    for index in range(rows.count()):
        text = rows.nth(index).inner_text()
        if delivery_id[:8] in text:
            return "Done" in text
    return False
