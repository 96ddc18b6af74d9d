"""The event types' JSON Schemas (CONTRACT 10.4, webhooks/events/json_schemas.py): each is
a valid draft 2020-12 schema, every sample validates, and over generated data (the samples
with fields dropped, added or replaced) the schema and emit_event's input check agree: what
one refuses the other refuses, what one accepts the other accepts."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from webhooks.errors import InvalidEvent
from webhooks.events.catalogue import EVENT_TYPE_NAMES
from webhooks.events.fields import EMAIL_RE, HOSTNAME_RE, LABEL_RE, TIMESTAMP_RE, URL_RE
from webhooks.events.inputs import validate_input
from webhooks.events.json_schemas import DIALECT, data_schema
from webhooks.events.samples import sample_data

from tests.support import services

ACCOUNT = "acme"
NODE = "/usr/bin/node"


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


# JSON values only: NaN and the infinities are not JSON (RFC 8259), so no schema speaks of
# them; emit_event refuses them (test_catalogue.py).
_CANDIDATES = [
    None, True, False, 0, -1, 1, 10, 11, 100, 101, 399, 400, 599, 600, 10**15, 10**15 + 1,
    0.5, 1.5, -0.5, 0.0, 1.0, 10.0, 100.0, 400.0, -1.0, 1e15, 1e16, 1e300, 5e-324, -0.0,
    "", "a", "email", "sms", "chat", "webhook", "hard", "soft", "USD", "usd",
    "USD\n", "\x00", "a\x00b", "snake_case", "snake_case\n", "Bad-Label", "+14155550123",
    "14155550123", "example.com", "Example.com", "example.com\n",
    "6f1c3e3a-0000-4000-8000-000000000000", "6F1C3E3A-0000-4000-8000-000000000000",
    "6f1c3e3a-0000-4000-8000-000000000000\n",
    "2026-02-28T12:00:00Z", "2024-02-29T12:00:00+00:00", "2026-02-29T12:00:00Z",
    "2026-04-31T00:00:00Z", "2026-01-01T24:00:00Z", "2026-01-01T00:00:00.123456Z",
    "2026-01-01T00:00:00.1234567Z", "2026-01-01T00:00:00+01:00", "2026-01-01", "2000-02-29",
    "2026-01-01T00:00:00Z\n", "0000-01-01T00:00:00Z", "2000-02-29T00:00:00Z",
    "1900-02-29T00:00:00Z",
    # email addresses
    "ann@example.com", "not-an-email", "ann@example.com\n", "a.b+c@mail.example.co",
    ".ann@example.com", "ann.@example.com", "a..b@example.com", "ann@localhost", "ann@b",
    "ann@-bad.example.com", "ann@bad-.example.com", "ann@1.2.3.4", "ann@example.123",
    '"quoted"@example.com', "ünï@example.com", "ann@bücher.example", "ann@xn--bcher-kva.example",
    "ann@@example.com", "ann example@example.com", "ANN@EXAMPLE.COM",
    "x" * 243 + "@example.com", "x" * 244 + "@example.com",
    # URLs
    "https://example.com/x", "ftp://example.com/x", "http://example.com", "https://example.com.",
    "HTTPS://EXAMPLE.COM/x?y=1#z", "https://example.com:8080/path", "https://1.2.3.4/x",
    "https://[::1]/x", "https://user:pw@example.com/", "https://example.com/a b",
    "https://exa_mple.com/", "https://localhost/x", "https://example.com/ü",
    "https://example.com/x\n", "https://", "https://example", "https://example.c0m",
    "https://example.com/" + "x" * 2028, "https://example.com/" + "x" * 2029,
    "x" * 65, "x" * 201, "x" * 254, "x" * 255, "x" * 999, "x" * 1001, "x" * 4097,
    [], ["a"], ["snake_case", "snake_case"], ["snake_case", "other"], [{"k": 1}], {},
    [1.0], {"k": 1},
]
# Random text from an alphabet that can spell addresses, URLs, labels and line ends; and
# values each field's own pattern generates (accepted by both, unless the length bound or
# a rule across fields says otherwise).
_values = st.one_of(
    st.none(), st.sampled_from(["email", "sms", "chat", "USD"]), st.sampled_from(_CANDIDATES),
    st.text(alphabet="ab.-_ 1Z@:/?#\nÄ\x00", max_size=12), st.integers(-5, 10**6),
    st.floats(allow_nan=False, allow_infinity=False), st.integers(-5, 10**6).map(float),
    st.from_regex(EMAIL_RE), st.from_regex(URL_RE), st.from_regex(HOSTNAME_RE),
    st.from_regex(LABEL_RE), st.from_regex(TIMESTAMP_RE, fullmatch=True),
)


def _each_field_with_each_candidate():
    for event_type in EVENT_TYPE_NAMES:
        for field in sample_data(event_type):
            yield event_type, field


@pytest.mark.parametrize("event_type, field", list(_each_field_with_each_candidate()))
def test_each_field_given_each_candidate_is_judged_alike(event_type, field):
    """Every field of every type given every candidate value, one at a time: the schema and
    emit_event agree on each."""
    validator = Draft202012Validator(data_schema(event_type))
    disagreements = [
        value for value in _CANDIDATES
        if validator.is_valid(data := {**sample_data(event_type), field: value})
        is not emit_accepts(event_type, data)
    ]
    assert disagreements == []


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


@settings(max_examples=1000, deadline=None)  # the field-by-candidate test above is exhaustive
@given(_generated())
def test_the_schema_and_emit_event_agree_on_generated_data(generated):
    event_type, data = generated
    by_schema = Draft202012Validator(data_schema(event_type)).is_valid(data)
    assert by_schema is emit_accepts(event_type, data), (event_type, data)


def _patterns(node, found: set) -> set:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern":
                found.add(value)
            else:
                _patterns(value, found)
    elif isinstance(node, list):
        for value in node:
            _patterns(value, found)
    return found


_STRINGS_OF_EACH_FIELD = st.one_of(*(st.from_regex(regex) for regex in
                                     (EMAIL_RE, URL_RE, HOSTNAME_RE, LABEL_RE, TIMESTAMP_RE)))


@settings(max_examples=5, deadline=None)
@given(st.lists(st.one_of(_STRINGS_OF_EACH_FIELD, st.text(max_size=20)), min_size=40))
def test_every_pattern_reads_alike_in_ecma_262_and_python(generated):
    """Each pattern of the schemas, run by node's RegExp (ECMA 262, what JSON Schema names)
    and by Python's re.search (what jsonschema runs) over the candidate strings and strings
    each field's regular expression generates: the same verdict on every one."""
    if not Path(NODE).exists():
        services.unavailable("node (scripts/install-node.sh)", FileNotFoundError(NODE))
    patterns = sorted(set().union(*(_patterns(data_schema(t), set()) for t in EVENT_TYPE_NAMES)))
    strings = [value for value in _CANDIDATES if isinstance(value, str)] + generated
    script = ("const [ps, ss] = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
              "console.log(JSON.stringify(ps.map(p => ss.map(s => new RegExp(p).test(s)))));")
    answer = subprocess.run([NODE, "-e", script], input=json.dumps([patterns, strings]),
                            capture_output=True, text=True, timeout=60, check=True)
    by_node = json.loads(answer.stdout)
    by_python = [[re.search(p, s) is not None for s in strings] for p in patterns]
    assert [(p, s) for p, row_n, row_p in zip(patterns, by_node, by_python)
            for s, n, y in zip(strings, row_n, row_p) if n != y] == []
