"""Staged secret rotation (webhooks/tenants/rotation.py): which secret signs, decided at the claim.

On PostgreSQL and SQLite. Time is moved by writing ``next_secret_active_at``
(the moment the staged secret takes over), never by waiting.
"""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest
from sqlalchemy import update

from tests.factories import make_account, make_subscription
from tests.test_store import claim, emit
from webhooks.lifecycle.sweep import sweep
from webhooks.sender.post import AttemptResult
from webhooks.services.attempt import run_attempt
from webhooks.signing import InvalidSignature, verify
from webhooks.storage.db import session_scope
from webhooks.storage.models import Subscription, utcnow
from webhooks.tenants import rotation

NOW = dt.datetime(2026, 7, 30, 12, 0, tzinfo=dt.timezone.utc)


def _row(**columns):
    return SimpleNamespace(**{"secret": "whsec_a", "next_secret": None,
                              "next_secret_active_at": None, **columns})


def test_without_a_staged_secret_the_secret_signs():
    assert rotation.secrets_at(_row(), NOW) == rotation.Secrets("whsec_a", None, None)


def test_a_staged_secret_is_shown_until_its_time_and_is_the_secret_from_then_on():
    later = NOW + dt.timedelta(hours=1)
    staged = _row(next_secret="whsec_b", next_secret_active_at=later)
    assert rotation.secrets_at(staged, NOW) == rotation.Secrets("whsec_a", "whsec_b", later)
    assert rotation.secrets_at(staged, later) == rotation.Secrets("whsec_b", None, None)


@pytest.fixture
def subscription(any_db, published):
    account_id, _ = make_account()
    return make_subscription(account_id, "https://example.com/hook")


def _load(subscription_id) -> Subscription:
    with session_scope() as session:
        return session.get(Subscription, subscription_id)


def _change(subscription_id, action, *args) -> object:
    with session_scope() as session:
        return action(session, subscription_id, *args)


def _move_switch(subscription_id, moment):
    """As if time passed: the staged secret's moment is now ``moment``."""
    with session_scope() as session:
        session.execute(update(Subscription).where(Subscription.id == subscription_id)
                        .values(next_secret_active_at=moment))


def test_the_claim_loads_the_secret_that_signs_at_that_moment(subscription):
    old = subscription.secret
    _change(subscription.id, rotation.rotate, utcnow(), 3600)
    new = _load(subscription.id).next_secret
    before = emit(subscription.account_id).delivery_ids[0]
    assert claim(before, 0).secret == old
    _move_switch(subscription.id, utcnow() - dt.timedelta(seconds=1))
    after = emit(subscription.account_id).delivery_ids[0]
    assert claim(after, 0).secret == new


class CapturingSender:
    """A sender that answers 200 and keeps what it was given."""

    def __init__(self):
        self.sent = []

    def __call__(self, url, body, headers):
        self.sent.append((body, headers))
        return AttemptResult(status_code=200, error=None, duration_ms=1)


def test_a_delivery_before_the_switch_verifies_with_the_old_secret_and_after_it_with_the_new(
        subscription):
    old = subscription.secret
    _change(subscription.id, rotation.rotate, utcnow(), 3600)
    new = _load(subscription.id).next_secret
    sender = CapturingSender()

    run_attempt(emit(subscription.account_id).delivery_ids[0], 0, sender=sender)
    _move_switch(subscription.id, utcnow() - dt.timedelta(seconds=1))
    run_attempt(emit(subscription.account_id).delivery_ids[0], 0, sender=sender)

    (body_1, headers_1), (body_2, headers_2) = sender.sent
    verify(old, body_1, headers_1["X-Service-Signature"])
    with pytest.raises(InvalidSignature):
        verify(new, body_1, headers_1["X-Service-Signature"])
    verify(new, body_2, headers_2["X-Service-Signature"])
    with pytest.raises(InvalidSignature):
        verify(old, body_2, headers_2["X-Service-Signature"])
    # A receiver holding both secrets verifies both deliveries; the header format is unchanged.
    for body, headers in sender.sent:
        verify([old, new], body, headers["X-Service-Signature"])
        assert headers["X-Service-Signature"].startswith("sha256=")


def test_a_rotation_at_once_replaces_the_secret_and_drops_a_staged_one(subscription):
    _change(subscription.id, rotation.rotate, utcnow(), 3600)
    _change(subscription.id, rotation.rotate, utcnow())
    row = _load(subscription.id)
    assert row.secret != subscription.secret and row.next_secret is None
    assert row.next_secret_active_at is None


def test_a_second_staged_rotation_replaces_the_staged_secret(subscription):
    _change(subscription.id, rotation.rotate, utcnow(), 3600)
    first = _load(subscription.id).next_secret
    _change(subscription.id, rotation.rotate, utcnow(), 60)
    row = _load(subscription.id)
    assert row.secret == subscription.secret
    assert row.next_secret not in (first, None)
    assert row.next_secret_active_at - utcnow() < dt.timedelta(seconds=61)


def test_staging_after_a_due_swap_keeps_the_secret_that_signs_now(subscription):
    _change(subscription.id, rotation.rotate, utcnow(), 3600)
    took_over = _load(subscription.id).next_secret
    _move_switch(subscription.id, utcnow() - dt.timedelta(seconds=1))
    _change(subscription.id, rotation.rotate, utcnow(), 3600)
    row = _load(subscription.id)
    assert row.secret == took_over  # the swap was settled first, not lost
    assert row.next_secret not in (took_over, subscription.secret)


def test_activate_now_lets_the_staged_secret_sign_and_cancel_drops_it(subscription):
    _change(subscription.id, rotation.rotate, utcnow(), 3600)
    staged = _load(subscription.id).next_secret
    assert _change(subscription.id, rotation.activate_now, utcnow()) is True
    row = _load(subscription.id)
    assert (row.secret, row.next_secret, row.next_secret_active_at) == (staged, None, None)
    assert _change(subscription.id, rotation.activate_now, utcnow()) is False  # none staged

    _change(subscription.id, rotation.rotate, utcnow(), 3600)
    assert _change(subscription.id, rotation.cancel, utcnow()) is True
    row = _load(subscription.id)
    assert (row.secret, row.next_secret, row.next_secret_active_at) == (staged, None, None)
    assert _change(subscription.id, rotation.cancel, utcnow()) is False


def test_cancel_is_too_late_once_the_staged_secret_took_over(subscription):
    _change(subscription.id, rotation.rotate, utcnow(), 3600)
    staged = _load(subscription.id).next_secret
    _move_switch(subscription.id, utcnow() - dt.timedelta(seconds=1))
    assert _change(subscription.id, rotation.cancel, utcnow()) is False
    assert rotation.secrets_at(_load(subscription.id), utcnow()).secret == staged


def test_the_sweep_writes_down_a_swap_whose_time_came(subscription):
    _change(subscription.id, rotation.rotate, utcnow(), 3600)
    staged = _load(subscription.id).next_secret
    with session_scope() as session:
        sweep(session, utcnow(), timeout=15, recover_after=120, batch=100)
    assert _load(subscription.id).next_secret == staged  # not yet due: untouched
    _move_switch(subscription.id, utcnow() - dt.timedelta(seconds=1))
    with session_scope() as session:
        sweep(session, utcnow(), timeout=15, recover_after=120, batch=100)
    row = _load(subscription.id)
    assert (row.secret, row.next_secret, row.next_secret_active_at) == (staged, None, None)


@pytest.mark.parametrize("seconds", [0, -1, rotation.ACTIVATE_IN_MAX + 1])
def test_a_staged_rotation_needs_1_second_to_7_days(subscription, seconds):
    with pytest.raises(ValueError):
        _change(subscription.id, rotation.rotate, utcnow(), seconds)
