"""Data timestamps given with ``Z`` are taken, and written as every data timestamp is,
with ``+00:00`` (issue 36, item 16; docs/events.md, "Timestamps"), on both backends and
by every way of emitting: emit_event alone (one statement on PostgreSQL), with a
session, and emit_events."""

from __future__ import annotations

import json

import pytest

from tests.factories import make_account, make_subscription
from webhooks.emit import emit_event, emit_events
from webhooks.events.samples import sample_data
from webhooks.storage.db import session_scope
from webhooks.storage.models import Event


@pytest.fixture
def account(any_db, published):
    account_id, _ = make_account()
    make_subscription(account_id, "https://example.com/hook")
    return account_id


def stored_data(event_id: str) -> dict:
    with session_scope() as session:
        return json.loads(session.get(Event, event_id).body)["data"]


def given_with_z() -> dict:
    data = sample_data("email.sent")
    data["sent_at"] = "2026-07-30T09:41:07.25Z"
    return data


def emitted_alone(account_id, data):
    return emit_event(account_id, "email.sent", data).id


def emitted_in_a_session(account_id, data):
    with session_scope() as session:
        return emit_event(account_id, "email.sent", data, session=session).id


def emitted_in_a_batch(account_id, data):
    return emit_events(account_id, [{"type": "email.sent", "data": data}])[0]


@pytest.mark.parametrize("emit", [emitted_alone, emitted_in_a_session, emitted_in_a_batch])
def test_a_timestamp_given_with_z_is_delivered_with_plus_zero(account, emit):
    data = given_with_z()
    delivered = stored_data(emit(account, data))
    assert delivered["sent_at"] == "2026-07-30T09:41:07.25+00:00"
    assert list(delivered) == list(data)  # the caller's key order
    assert {k: v for k, v in delivered.items() if k != "sent_at"} == {
        k: v for k, v in data.items() if k != "sent_at"}


@pytest.mark.parametrize("emit", [emitted_alone, emitted_in_a_session, emitted_in_a_batch])
def test_data_given_with_plus_zero_is_delivered_exactly_as_passed(account, emit):
    data = sample_data("email.sent")
    assert stored_data(emit(account, data)) == data
