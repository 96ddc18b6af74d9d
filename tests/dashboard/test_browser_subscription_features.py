"""Staged secret rotation, recover and the subscription form in a real browser.

The same set-up as test_browser.py (headless Chromium through Playwright, the
app on a real WSGI server, a real worker with beat, a real local receiver).
Each step saves a screenshot under artifacts/screenshots/, or under
docs/screenshots/ (where the docs show them) when WEBHOOKS_DOCS_SCREENSHOTS=1:
a test run does not rewrite tracked files unless asked to.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy import select

from tests.dashboard.test_browser import (  # noqa: F401  (fixtures)
    deliveries_of,
    live_server,
    page,
    sync_playwright,
    wait_until,
    worker,
)
from webhooks.signing import InvalidSignature, verify
from webhooks.storage.db import session_scope
from webhooks.storage.models import Subscription

pytestmark = pytest.mark.integration

_ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = _ROOT / ("docs" if os.environ.get("WEBHOOKS_DOCS_SCREENSHOTS") == "1"
                       else "artifacts") / "screenshots"


def shoot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def _sign_in_and_subscribe(page, live_server, receiver, path: str) -> Subscription:
    from tests.factories import make_account

    _, api_key = make_account("Acme")
    page.goto(f"{live_server}/dashboard/")
    page.get_by_label("API key").fill(api_key)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", name="Overview").wait_for()
    page.goto(f"{live_server}/dashboard/subscriptions/new")
    page.get_by_label("Endpoint URL").fill(receiver.url(path))
    page.get_by_role("button", name="Create subscription").click()
    page.get_by_text("Subscription created").wait_for()
    with session_scope() as session:
        subscription = session.scalars(select(Subscription)).one()
        session.expunge(subscription)
    return subscription


def _send_test_and_receive(page, receiver, path: str):
    before = len(receiver.received(path))
    page.get_by_role("button", name="Send test").click()
    page.get_by_text("Test event sent").wait_for()
    return receiver.wait_for(before + 1, path, timeout=60)[before]


def _signed_with(secret: str, request) -> bool:
    try:
        verify(secret, request.body, request.headers["X-Service-Signature"])
        return True
    except InvalidSignature:
        return False


def test_a_staged_rotation_shows_the_next_secret_and_activates_or_cancels_it(
        page, live_server, receiver, worker):
    subscription = _sign_in_and_subscribe(page, live_server, receiver, "/hook")
    old = page.locator("#secret").inner_text()

    # Stage a rotation: the next secret is shown now, with the moment it takes over.
    page.get_by_label("The new secret signs").select_option(label="in 24 hours")
    page.get_by_role("button", name="Rotate secret").click()
    page.get_by_text("New signing secret staged").wait_for()
    new = page.locator("#next-secret").inner_text()
    assert new.startswith("whsec_") and new != old
    assert page.locator("#secret").inner_text() == old
    staged = page.locator("#staged-secret")
    assert "(in 1 day)" in staged.inner_text()
    shoot(page, "rotation-1-staged")

    # Until then the current secret signs.
    before_switch = _send_test_and_receive(page, receiver, "/hook")
    assert _signed_with(old, before_switch) and not _signed_with(new, before_switch)

    # Activate now: the staged secret signs from here on and becomes the secret.
    page.get_by_role("button", name="Activate now").click()
    page.get_by_text("The staged secret signs from now on").wait_for()
    assert page.locator("#staged-secret").count() == 0
    after_switch = _send_test_and_receive(page, receiver, "/hook")
    assert _signed_with(new, after_switch) and not _signed_with(old, after_switch)
    page.get_by_role("button", name="Show secret").click()
    assert page.locator("#secret").inner_text() == new
    shoot(page, "rotation-2-activated")

    # Stage another and cancel it: the current secret keeps signing.
    page.get_by_label("The new secret signs").select_option(label="in 1 hour")
    page.get_by_role("button", name="Rotate secret").click()
    page.get_by_text("New signing secret staged").wait_for()
    page.get_by_role("button", name="Cancel").click()
    page.get_by_text("Staged secret cancelled").wait_for()
    assert page.locator("#staged-secret").count() == 0
    with session_scope() as session:
        row = session.get(Subscription, subscription.id)
        assert (row.secret, row.next_secret) == (new, None)
    shoot(page, "rotation-3-cancelled")


def test_recover_replays_what_failed_once_and_not_twice(page, live_server, receiver, worker):
    from webhooks import emit_event
    from webhooks.events.samples import sample_data

    subscription = _sign_in_and_subscribe(page, live_server, receiver, "/recover")
    receiver.script("/recover", 400)  # a 4xx fails a delivery at once, for good
    failed_ids = [emit_event(subscription.account_id, "email.sent",
                             sample_data("email.sent")).delivery_ids[0] for _ in range(2)]
    wait_until(lambda: {d.id: d.status for d in deliveries_of(subscription.id)} == {
        delivery_id: "failed" for delivery_id in failed_ids},
        what=lambda: f"two failed deliveries\n{worker.log()}")

    receiver.script("/recover", 200)
    page.reload()
    shoot(page, "recover-1-form")
    page.get_by_role("button", name="Recover").click()
    page.get_by_text("2 failed or dead deliveries replayed").wait_for()
    replayed = wait_until(lambda: [r for r in receiver.received("/recover")
                                   if r.headers["X-Service-Delivery-Id"] not in failed_ids
                                   and r.headers["X-Service-Event"] == "email.sent"] or None,
                          what="the replays to arrive")
    wait_until(lambda: len([r for r in receiver.received("/recover")
                            if r.headers["X-Service-Delivery-Id"] not in failed_ids]) == 2,
               what=lambda: f"both replays to arrive\n{worker.log()}")
    assert all(r.headers["X-Service-Attempt"] == "1" for r in replayed)
    page.reload()
    shoot(page, "recover-2-replayed")

    # The same window again: nothing is replayed twice.
    page.get_by_role("button", name="Recover").click()
    page.get_by_text("0 failed or dead deliveries replayed").wait_for()
    shoot(page, "recover-3-nothing-twice")
    replays = [d for d in deliveries_of(subscription.id) if d.replay_of is not None]
    assert sorted(d.replay_of for d in replays) == sorted(failed_ids)


def test_the_form_puts_each_event_type_s_box_beside_its_name_and_sets_the_limits(
        page, live_server, receiver, worker):
    subscription = _sign_in_and_subscribe(page, live_server, receiver, "/form")
    page.goto(f"{live_server}/dashboard/subscriptions/{subscription.id}/edit")
    page.get_by_label("Only the types checked below").check()
    box = page.get_by_role("checkbox", name="email.sent")
    box.check()
    name = page.locator("label.type-choice", has=box).locator(".type-name")
    box_at, name_at = box.bounding_box(), name.bounding_box()
    assert box_at["x"] + box_at["width"] <= name_at["x"]  # beside it, to its left
    assert abs((box_at["y"] + box_at["height"] / 2) - (name_at["y"] + name_at["height"] / 2)) < (
        name_at["height"])  # on the same line
    description = page.locator("label.type-choice", has=box).locator(".type-description")
    assert "outbound email" in description.inner_text()
    page.get_by_label("Attempts in flight at once (optional)").fill("2")
    page.get_by_label("Attempts per second at most (optional)").fill("5")
    page.get_by_label("Custom headers (optional)").fill("X-Tenant: acme")
    shoot(page, "subscription-form")
    page.get_by_role("button", name="Save").click()
    page.get_by_text("Subscription saved.").wait_for()
    assert "at most 2 at once" in page.locator("#max-in-flight").inner_text()
    assert "at most 5 attempts per second" in page.locator("#rate-limit").inner_text()
    # The header's value is a secret: shown on request, with the signing secret.
    assert page.locator("#custom-headers").inner_text() == "X-Tenant: hidden"
    page.get_by_role("button", name="Show secret").click()
    assert page.locator("#custom-headers").inner_text() == "X-Tenant: acme"
    with session_scope() as session:
        row = session.get(Subscription, subscription.id)
        assert (row.max_in_flight, row.rate_limit, row.headers, row.event_types) == (
            2, 5.0, {"X-Tenant": "acme"}, ["email.sent"])
