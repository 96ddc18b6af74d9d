"""The envelope of SPEC 2.2, serialised once."""

import datetime as dt
import json

import pytest

from webhooks.events.envelope import build_envelope, format_created_at, serialise


def test_envelope_has_exactly_the_spec_fields_in_order():
    created = dt.datetime(2026, 7, 30, 12, 0, 0, 123456, tzinfo=dt.timezone.utc)
    envelope = build_envelope(
        event_id="3f2b1c1e-0000-4000-8000-000000000001",
        event_type="email.sent",
        data={"b": 1, "a": "é"},
        created_at=created,
        version="2026-07-30",
    )
    assert list(envelope) == ["version", "id", "type", "mode", "created_at", "data"]
    assert envelope["mode"] == "live"
    assert envelope["created_at"] == "2026-07-30T12:00:00.123Z"
    body = serialise(envelope)
    assert json.loads(body) == envelope
    assert "é".encode() in body  # UTF-8, not \\u escapes


def test_created_at_is_converted_to_utc():
    plus_two = dt.timezone(dt.timedelta(hours=2))
    moment = dt.datetime(2026, 7, 30, 14, 0, tzinfo=plus_two)
    assert format_created_at(moment) == "2026-07-30T12:00:00.000Z"


def test_nan_is_refused():
    with pytest.raises(ValueError):
        serialise({"data": {"x": float("nan")}})
