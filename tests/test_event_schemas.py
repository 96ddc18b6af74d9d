"""The event types' JSON Schemas (CONTRACT 10.4, webhooks/events/json_schemas.py): each is
a valid draft 2020-12 schema, every sample validates, and over generated data (the samples
with fields dropped, added or replaced) the schema and emit_event's input check agree: what
one refuses the other refuses, what one accepts the other accepts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from webhooks.errors import InvalidEvent
from webhooks.events.catalogue import EVENT_TYPE_NAMES
from webhooks.events.inputs import validate_input
from webhooks.events.json_schemas import DIALECT, data_schema
from webhooks.events.samples import sample_data

ACCOUNT = "acme"


def emit_accepts(event_type: str, data) -> bool:
    """emit_event's own check of its input (everything it checks before storing)."""
    try:
        validate_input(ACCOUNT, event_type, data, None)
    except InvalidEvent:
        return False
    return True


@pytest.mark.parametrize("event_type", EVENT_TYPE_NAMES)
def test_each_schema_is_draft_2020_12_and_its_sample_validates(event_type):
    schema = data_schema(event_type)
    assert schema["$schema"] == DIALECT
    Draft202012Validator.check_schema(schema)
    Draft202012Validator(schema).validate(sample_data(event_type))
    assert emit_accepts(event_type, sample_data(event_type))


@pytest.mark.parametrize("event_type, change", [
    ("reply.received", {"channel": "email", "from_email": None}),  # a rule across fields
    ("reply.received", {"channel": "sms", "phone": None}),
    ("conversion.recorded", {"amount_minor": 100, "currency": None}),
    ("email.sent", {"sent_at": "2026-02-29T00:00:00Z"}),  # not a calendar date
    ("email.sent", {"sent_at": "2026-01-01T00:00:00+01:00"}),  # not UTC
    ("email.sent", {"contact_id": "6F1C3E3A-0000-4000-8000-000000000000"}),  # not canonical
    ("email.sent", {"unknown": 1}),
])
def test_known_refusals_are_refused_by_both(event_type, change):
    data = {**sample_data(event_type), **change}
    assert not Draft202012Validator(data_schema(event_type)).is_valid(data)
    assert not emit_accepts(event_type, data)


_CANDIDATES = [
    None, True, False, 0, -1, 1, 10, 11, 100, 101, 399, 400, 599, 600, 10**15, 10**15 + 1,
    0.5, 1.5, -0.5, "", "a", "email", "sms", "chat", "webhook", "hard", "soft", "USD", "usd",
    "snake_case", "Bad-Label", "+14155550123", "14155550123", "example.com", "Example.com",
    "ann@example.com", "not-an-email", "https://example.com/x", "ftp://example.com/x",
    "6f1c3e3a-0000-4000-8000-000000000000", "6F1C3E3A-0000-4000-8000-000000000000",
    "2026-02-28T12:00:00Z", "2024-02-29T12:00:00+00:00", "2026-02-29T12:00:00Z",
    "2026-04-31T00:00:00Z", "2026-01-01T24:00:00Z", "2026-01-01T00:00:00.123456Z",
    "2026-01-01T00:00:00.1234567Z", "2026-01-01T00:00:00+01:00", "2026-01-01", "2000-02-29",
    "x" * 65, "x" * 201, "x" * 254, "x" * 255, "x" * 999, "x" * 1001, "x" * 4097,
    [], ["a"], ["snake_case", "snake_case"], ["snake_case", "other"], [{"k": 1}], {},
]
# Strings without "@" or ":": random text never looks like an address or a URL, the two
# checks the schema states as a format and a necessary pattern only (json_schemas.py).
_values = st.one_of(st.none(), st.sampled_from(["email", "sms", "chat", "USD"]),
                    st.sampled_from(_CANDIDATES),
                    st.text(alphabet="ab.-_ 1Z", max_size=6), st.integers(-5, 10**6))


@st.composite
def _generated(draw):
    event_type = draw(st.sampled_from(EVENT_TYPE_NAMES))
    data = sample_data(event_type)
    for _ in range(draw(st.integers(0, 4))):
        action = draw(st.sampled_from(["drop", "add", "replace", "replace", "replace"]))
        if action == "drop" and data:
            del data[draw(st.sampled_from(sorted(data)))]
        elif action == "add":
            data[draw(st.sampled_from(["extra", "x"]))] = draw(_values)
        elif data:
            data[draw(st.sampled_from(sorted(data)))] = draw(_values)
    return event_type, data


@settings(max_examples=800, deadline=None)
@given(_generated())
def test_the_schema_and_emit_event_agree_on_generated_data(generated):
    event_type, data = generated
    by_schema = Draft202012Validator(data_schema(event_type)).is_valid(data)
    assert by_schema is emit_accepts(event_type, data), (event_type, data)
