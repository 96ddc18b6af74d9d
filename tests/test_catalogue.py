"""Pure tests of the event catalogue, its data schemas and the sample generator."""

from __future__ import annotations

import json
import math
import re
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from webhooks.events.catalogue import (
    CATALOGUE,
    EVENT_TYPE_NAMES,
    checked_data,
    EventType,
    get_event_type,
    validate_data,
)
from webhooks.events.samples import sample_data
from webhooks.events.schemas import (
    DATA_SCHEMAS,
    CanonicalUUID,
    EnvelopeSchema,
    StrictBoolean,
    StrictInteger,
    StrictList,
    StrictNumber,
    StrictString,
)

SPEC_ORDER = (
    "reply.received", "email.sent", "email.opened", "email.clicked", "email.bounced",
    "conversion.recorded", "suppression.created", "domain.verified", "domain.failed",
    "domain.drift", "mailbox.connected", "chatapp.received", "sms.received",
    "automation.fired", "test.ping",
)

REPLY_FIELDS = (
    "reply_id", "channel", "from_email", "from_name", "phone", "subject", "party_type",
    "category", "intent", "sentiment", "urgency", "intensity", "priority_score",
    "risk_flags", "needs_review", "confidence", "received_at", "contact_id",
)

# The nullable fields of each type: part of the contract, so spelled out here.
NULLABLE = {
    "reply.received": {"from_email", "phone"},
    "email.opened": {"user_agent"},
    "email.clicked": {"user_agent"},
    "email.bounced": {"smtp_code"},
    "conversion.recorded": {"contact_id", "message_id", "external_id", "amount_minor", "currency"},
    "suppression.created": {"contact_id", "message_id"},
    "automation.fired": {"contact_id"},
}

DOCS = Path(__file__).resolve().parent.parent / "docs" / "events.md"


def fields_of(event_type: str) -> dict:
    return DATA_SCHEMAS[event_type]().fields


def wrong_values(field) -> list:
    """Values of the wrong JSON type for ``field`` (never valid, whatever the bounds)."""
    common = [{"not": "this"}]
    if isinstance(field, StrictList):
        return common + ["flag", 3]
    if isinstance(field, StrictBoolean):
        return common + ["true", 1, 0, "false"]
    if isinstance(field, StrictInteger):
        return common + ["1", 1.5, True, False]
    if isinstance(field, StrictNumber):
        return common + ["0.5", True, math.nan, math.inf]
    if isinstance(field, StrictString):
        return common + [42, True, ["x"], b"bytes"]
    raise AssertionError(f"no wrong values for {field!r}")


def cases():
    """(event_type, field name) for every field of every type."""
    return [(t, name) for t in EVENT_TYPE_NAMES for name in fields_of(t)]


def names_error(errors: dict, field: str) -> bool:
    return any(key == field or key.startswith(field + ".") for key in errors)


# -- the catalogue ----------------------------------------------------------


def test_all_15_types_in_spec_order():
    assert EVENT_TYPE_NAMES == SPEC_ORDER
    assert tuple(e.name for e in CATALOGUE) == SPEC_ORDER
    assert tuple(DATA_SCHEMAS) == SPEC_ORDER
    for entry in CATALOGUE:
        assert isinstance(entry, EventType)
        assert entry.description and entry.schema is DATA_SCHEMAS[entry.name]


def test_event_type_is_frozen():
    with pytest.raises(AttributeError):
        CATALOGUE[0].name = "other"


def test_get_event_type():
    assert get_event_type("email.bounced").name == "email.bounced"
    for unknown in ("email.Bounced", "", "reply", None):
        with pytest.raises(KeyError):
            get_event_type(unknown)


def test_reply_received_has_exactly_the_spec_fields():
    # SPEC 2.3 has 18 rows (contact_id is the last); no more, no fewer, same order.
    assert tuple(fields_of("reply.received")) == REPLY_FIELDS
    assert len(REPLY_FIELDS) == 18


@pytest.mark.parametrize("event_type", SPEC_ORDER)
def test_nullable_fields_are_the_documented_ones(event_type):
    nullable = {n for n, f in fields_of(event_type).items() if f.allow_none}
    assert nullable == NULLABLE.get(event_type, set())
    assert all(f.required for f in fields_of(event_type).values())


# -- samples ----------------------------------------------------------------


@pytest.mark.parametrize("event_type", SPEC_ORDER)
def test_every_sample_validates_and_loads_unchanged(event_type):
    data = sample_data(event_type)
    assert validate_data(event_type, data) == {}
    assert DATA_SCHEMAS[event_type]().load(data) == data  # validated, never rewritten
    assert json.loads(json.dumps(data)) == data


@pytest.mark.parametrize("event_type", SPEC_ORDER)
def test_samples_are_fresh_on_every_call(event_type):
    first, second = sample_data(event_type), sample_data(event_type)
    ids = [n for n, f in fields_of(event_type).items()
           if isinstance(f, CanonicalUUID) and first[n] is not None]
    assert ids, "every type has at least one id"
    assert all(first[n] != second[n] for n in ids)
    now = datetime.now(timezone.utc)
    for name in (n for n in first if n.endswith("_at")):
        assert abs(datetime.fromisoformat(first[name]) - now) < timedelta(seconds=5)
    first.get("risk_flags", []).append("edited")  # editing one sample leaves the next alone
    assert validate_data(event_type, sample_data(event_type)) == {}


def test_sample_of_unknown_type_raises_key_error():
    with pytest.raises(KeyError):
        sample_data("email.delivered")


def test_test_ping_tells_it_is_a_test():
    assert "test" in sample_data("test.ping")["message"].lower()


# -- each field: missing, unknown, wrong type, null ------------------------


@pytest.mark.parametrize("event_type, field", cases())
def test_missing_field_is_named(event_type, field):
    data = sample_data(event_type)
    del data[field]
    assert field in validate_data(event_type, data)


@pytest.mark.parametrize("event_type", SPEC_ORDER)
def test_unknown_field_is_named(event_type):
    data = {**sample_data(event_type), "extra_field": "x"}
    assert validate_data(event_type, data) == {"extra_field": ["Unknown field."]}


@pytest.mark.parametrize("event_type, field", cases())
def test_wrong_type_is_named(event_type, field):
    for value in wrong_values(fields_of(event_type)[field]):
        errors = validate_data(event_type, {**sample_data(event_type), field: value})
        assert names_error(errors, field), (field, value, errors)


@pytest.mark.parametrize("event_type, field", cases())
def test_null_only_where_nullable(event_type, field):
    errors = validate_data(event_type, {**sample_data(event_type), field: None})
    if field in NULLABLE.get(event_type, set()):
        # null is allowed; only a rule tying it to another field may object
        assert "Field may not be null." not in errors.get(field, [])
    else:
        assert errors == {field: ["Field may not be null."]}


# -- strictness -------------------------------------------------------------


def reply(**changes) -> dict:
    return {**sample_data("reply.received"), **changes}


@pytest.mark.parametrize("field, value", [
    ("intensity", True), ("intensity", "1"), ("intensity", 1.5), ("intensity", 11.0),
    ("intensity", 11),
    ("intensity", -1), ("priority_score", 101), ("priority_score", False),
    ("confidence", math.nan), ("confidence", math.inf), ("confidence", -math.inf),
    ("confidence", True), ("confidence", "0.5"), ("confidence", 1.01),
    ("needs_review", "true"), ("needs_review", 1), ("needs_review", None),
    ("channel", "whatsapp"), ("sentiment", "happy"), ("urgency", "HIGH"),
    ("party_type", "Prospect"), ("category", "out of office"), ("risk_flags", ["a", "a"]),
    ("risk_flags", ("a",)), ("from_email", "not-an-address"), ("subject", "x" * 999),
])
def test_reply_strictness(field, value):
    assert field in validate_data("reply.received", reply(**{field: value}))


@pytest.mark.parametrize("given, written", [(3.0, 3), (0.0, 0), (-0.0, 0), (10.0, 10)])
def test_an_integer_given_as_a_float_without_fraction_is_written_as_the_integer(given, written):
    """JSON Schema counts 3.0 an integer; emit_event accepts it and writes 3, which a
    receiver's integer type can read (json.dumps(3.0) is "3.0")."""
    errors, data = checked_data("reply.received", reply(intensity=given))
    assert errors == {} and type(data["intensity"]) is int and data["intensity"] == written
    assert list(data) == list(reply())  # the caller's key order is kept


@pytest.mark.parametrize("value", [0, 1, 0.0, 1.0, 0.5])
def test_confidence_accepts_numbers_in_range(value):
    assert validate_data("reply.received", reply(confidence=value)) == {}


@pytest.mark.parametrize("value", [
    "4F1C2B8E-5D3A-4C2B-9E1F-0A1B2C3D4E5F",   # uppercase
    "4f1c2b8e5d3a4c2b9e1f0a1b2c3d4e5f",       # no hyphens
    "{4f1c2b8e-5d3a-4c2b-9e1f-0a1b2c3d4e5f}",  # braces
    "urn:uuid:4f1c2b8e-5d3a-4c2b-9e1f-0a1b2c3d4e5f",
    " 4f1c2b8e-5d3a-4c2b-9e1f-0a1b2c3d4e5f",
    "4f1c2b8e-5d3a-4c2b-9e1f-0a1b2c3d4e5f\n",
    "not-a-uuid", "",
])
def test_non_canonical_uuid_is_refused(value):
    assert "reply_id" in validate_data("reply.received", reply(reply_id=value))


@pytest.mark.parametrize("value", [
    "2026-07-30T12:00:00",             # no offset
    "2026-07-30T14:00:00+02:00",       # an offset other than UTC
    "2026-07-30T12:00:00z",            # UTC, but not as ISO 8601 spells it
    "2026-07-30T12:00:00-00:00",
    "2026-07-30 12:00:00+00:00",       # space instead of T
    "20260730T120000+0000",            # basic format
    "2026-07-30T12:00:00.1234567+00:00",
    "2026-02-30T12:00:00+00:00",       # no such day
    "2026-07-30T24:00:00+00:00",
    "2026-07-30", "1785412800", "",
])
def test_bad_data_timestamps_are_refused(value):
    assert "received_at" in validate_data("reply.received", reply(received_at=value))


@pytest.mark.parametrize("value", [
    "2026-07-30T12:00:00+00:00", "2026-07-30T12:00:00.5+00:00", "2026-07-30T12:00:00.123456+00:00",
    "2026-07-30T12:00:00Z", "2026-07-30T12:00:00.5Z", "2026-07-30T12:00:00.123456Z",
])
def test_utc_data_timestamps_are_accepted_with_either_suffix(value):
    assert validate_data("reply.received", reply(received_at=value)) == {}


def test_suffix_rule_message_names_both_utc_suffixes():
    errors = validate_data("reply.received", reply(received_at="2026-07-30T14:00:00+02:00"))
    assert "'Z' or '+00:00'" in errors["received_at"][0]


@pytest.mark.parametrize("given, written", [
    ("2026-07-30T12:00:00Z", "2026-07-30T12:00:00+00:00"),
    ("2026-07-30T12:00:00.123456Z", "2026-07-30T12:00:00.123456+00:00"),
    ("2026-07-30T12:00:00.5+00:00", "2026-07-30T12:00:00.5+00:00"),
])
def test_a_data_timestamp_is_written_with_plus_zero_and_nothing_else_changes(given, written):
    """Issue 36: data timestamps are written in one form, SPEC 2.3's; only the suffix of
    one given with Z is rewritten, in a copy that keeps the caller's key order."""
    from webhooks.events.catalogue import checked_data

    data = dict(reversed(list(reply(received_at=given).items())))  # an order of the caller's
    errors, stored = checked_data("reply.received", data)
    assert errors == {}
    assert stored["received_at"] == written
    assert list(stored) == list(data)
    assert {k: v for k, v in stored.items() if k != "received_at"} == {
        k: v for k, v in data.items() if k != "received_at"}
    assert data["received_at"] == given  # the caller's own dict is left as it was


def test_data_without_a_z_is_written_exactly_as_given():
    from webhooks.events.catalogue import checked_data

    data = reply()
    assert checked_data("reply.received", data) == ({}, data)
    assert checked_data("reply.received", data)[1] is data


def test_reply_channel_rules():
    assert "phone" in validate_data("reply.received", reply(phone="+14155550123"))
    assert "from_email" in validate_data("reply.received", reply(from_email=None))
    for channel in ("sms", "chat"):
        assert "phone" in validate_data("reply.received", reply(channel=channel))
        ok = reply(channel=channel, phone="+14155550123", from_email=None, subject="")
        assert validate_data("reply.received", ok) == {}
    assert validate_data("reply.received", reply(channel="webhook")) == {}


def test_conversion_amount_and_currency_go_together():
    base = sample_data("conversion.recorded")
    assert "currency" in validate_data("conversion.recorded", {**base, "currency": None})
    assert "amount_minor" in validate_data("conversion.recorded", {**base, "amount_minor": None})
    both_null = {**base, "amount_minor": None, "currency": None}
    assert validate_data("conversion.recorded", both_null) == {}
    assert "currency" in validate_data("conversion.recorded", {**base, "currency": "usd"})


def test_enumerations():
    bounced = sample_data("email.bounced")
    assert validate_data("email.bounced", {**bounced, "bounce_type": "soft"}) == {}
    assert "bounce_type" in validate_data("email.bounced", {**bounced, "bounce_type": "block"})
    assert "smtp_code" in validate_data("email.bounced", {**bounced, "smtp_code": 250})
    mailbox = sample_data("mailbox.connected")
    assert "provider" in validate_data("mailbox.connected", {**mailbox, "provider": "gmail"})


def test_nested_errors_have_dotted_paths():
    data = sample_data("domain.drift")
    data["records"][0]["found"] = 7
    data["records"].append("not a record")
    errors = validate_data("domain.drift", data)
    assert set(errors) == {"records.0.found", "records.1"}
    no_records = {**sample_data("domain.failed"), "records": []}
    assert "records" in validate_data("domain.failed", no_records)


def test_not_a_dict_or_unknown_type():
    assert set(validate_data("test.ping", ["message"])) == {"data"}
    assert set(validate_data("test.ping", None)) == {"data"}
    assert set(validate_data("test.ping", {1: "x"})) == {"data"}
    assert set(validate_data("email.delivered", {})) == {"type"}
    assert set(validate_data(None, {})) == {"type"}


# -- envelope ---------------------------------------------------------------


def envelope(**changes) -> dict:
    body = {
        "version": "2026-07-30", "id": str(uuid.uuid4()), "type": "test.ping",
        "mode": "live", "created_at": "2026-07-30T12:00:00Z", "data": sample_data("test.ping"),
    }
    return {**body, **changes}


def test_envelope_is_checked_with_its_data():
    assert EnvelopeSchema().validate(envelope()) == {}
    assert EnvelopeSchema().validate(envelope(data={"message": "x"})) == {
        "data": {"subscription_id": ["Missing data for required field."]}
    }


@pytest.mark.parametrize("field, value", [
    ("version", "2026-7-30"), ("version", "2026-02-30"), ("id", "A5999980-F122-43F7-8464-2516CCDA77A4"),
    ("type", "email.delivered"), ("created_at", "2026-07-30T12:00:00+00:00"),
    ("created_at", "2026-07-30T12:00:00"), ("data", []),
])
def test_envelope_strictness(field, value):
    assert field in EnvelopeSchema().validate(envelope(**{field: value}))


# -- docs -------------------------------------------------------------------


def doc_sections() -> dict[str, str]:
    parts = re.split(r"^## ", DOCS.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return {part.split("\n", 1)[0].strip(): part for part in parts[1:]}


@pytest.mark.parametrize("event_type", SPEC_ORDER)
def test_docs_list_every_field_and_a_valid_example(event_type):
    section = doc_sections()[event_type]
    for name in fields_of(event_type):
        assert f"\n| {name} |" in section, name
    example = re.search(r"```json\n(.*?)\n```", section, re.DOTALL).group(1)
    assert validate_data(event_type, json.loads(example)) == {}


# -- never raises -----------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def assert_error_shape(errors) -> None:
    assert isinstance(errors, dict)
    for key, messages in errors.items():
        assert isinstance(key, str) and messages
        assert all(isinstance(m, str) for m in messages)


@settings(max_examples=examples(300))
@given(event_type=st.sampled_from(SPEC_ORDER) | st.text(), data=JSON)
def test_validate_data_never_raises_on_arbitrary_json(event_type, data):
    assert_error_shape(validate_data(event_type, data))


@settings(max_examples=examples(300))
@given(st.data())
def test_validate_data_never_raises_on_mutated_samples(draw):
    event_type = draw.draw(st.sampled_from(SPEC_ORDER))
    data = sample_data(event_type)
    names = list(data)
    for name in draw.draw(st.lists(st.sampled_from(names), max_size=3)):
        data[name] = draw.draw(JSON)
    extra = draw.draw(st.dictionaries(st.text(max_size=8), JSON, max_size=2))
    assert_error_shape(validate_data(event_type, {**data, **extra}))


@given(event_type=JSON, data=JSON)
def test_validate_data_never_raises_for_any_type_value(event_type, data):
    assert_error_shape(validate_data(event_type, data))
