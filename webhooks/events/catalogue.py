"""The catalogue of the 15 event types (docs/events.md) and validation of their data.

``CATALOGUE`` is the one ordered list of what the service can emit: each entry
has its name, a one-line description of when it fires, and the marshmallow
schema of its ``data``. ``checked_data`` is what ``emit_event`` calls before it
stores anything: it reports errors (never raises, whatever it is given) and gives
the data as it is written; ``validate_data`` gives the errors alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from marshmallow import Schema, ValidationError

from webhooks.events.schemas import DATA_SCHEMAS

__all__ = ["EventType", "CATALOGUE", "EVENT_TYPE_NAMES", "get_event_type", "validate_data",
           "checked_data"]


@dataclass(frozen=True)
class EventType:
    """One event type: ``name`` (the envelope ``type``), when it fires, its data schema."""

    name: str
    description: str
    schema: type[Schema]


_DESCRIPTIONS: dict[str, str] = {
    "reply.received": "A reply arrived and was classified; fires for every channel "
    "(email, chat, SMS, inbound webhook) with the same shape.",
    "email.sent": "An outbound email was accepted by the relay.",
    "email.opened": "A tracking pixel fired. Display only: some mail clients pre-fetch "
    "images, so it is not a reliable engagement signal.",
    "email.clicked": "A tracked link was followed.",
    "email.bounced": "An outbound email failed at the relay.",
    "conversion.recorded": "A conversion was ingested through the conversions "
    "ingestion interface.",
    "suppression.created": "An address became suppressed; mirror it into your own "
    "do-not-send list.",
    "domain.verified": "A sending domain finished verifying.",
    "domain.failed": "A previously verified sending domain stopped verifying.",
    "domain.drift": "DNS records of a verified domain changed.",
    "mailbox.connected": "A mailbox was connected for reply ingestion "
    "(Google, Microsoft or IMAP).",
    "chatapp.received": "An inbound chat-app message arrived; reply.received fires too.",
    "sms.received": "An inbound SMS arrived; reply.received fires too.",
    "automation.fired": "An automation action ran.",
    "test.ping": "Sent when the subscriber clicks Send test in the dashboard.",
}

#: All event types, in the catalogue's order (docs/events.md) (the order of DATA_SCHEMAS).
CATALOGUE: tuple[EventType, ...] = tuple(
    EventType(name, _DESCRIPTIONS[name], schema) for name, schema in DATA_SCHEMAS.items()
)
EVENT_TYPE_NAMES: tuple[str, ...] = tuple(event_type.name for event_type in CATALOGUE)

_BY_NAME: dict[str, EventType] = {event_type.name: event_type for event_type in CATALOGUE}
# Schema instances hold no per-call state, so one per type is enough.
_SCHEMAS: dict[str, Schema] = {name: schema() for name, schema in DATA_SCHEMAS.items()}


def get_event_type(name: str) -> EventType:
    """Return the catalogue entry called ``name``; raise ``KeyError`` if there is none."""
    if not isinstance(name, str) or name not in _BY_NAME:
        raise KeyError(name)
    return _BY_NAME[name]


def validate_data(event_type: Any, data: Any) -> dict[str, list[str]]:
    """Check ``data`` against the schema of ``event_type``.

    Returns the error messages keyed by dotted field path (``"records.0.found"``);
    an empty dict means valid. An unknown type is reported on key ``"type"``,
    data that is not a JSON object on key ``"data"``. Never raises.
    """
    return checked_data(event_type, data)[0]


def checked_data(event_type: Any, data: Any) -> tuple[dict[str, list[str]], Any]:
    """:func:`validate_data`'s errors, and ``data`` as it is written: ``data`` itself,
    unless a timestamp was given with ``Z``; then a copy, in the same key order, with that
    timestamp ending ``+00:00`` (fields.Timestamp: SPEC 2.3's form) and nothing else
    changed. One load does both (it costs what a validation did)."""
    if not isinstance(event_type, str) or event_type not in _BY_NAME:
        expected = ", ".join(EVENT_TYPE_NAMES)
        return {"type": [f"Unknown event type; expected one of: {expected}."]}, data
    if not isinstance(data, dict):
        return {"data": ["Must be a JSON object."]}, data
    if not all(isinstance(key, str) for key in data):
        return {"data": ["Keys must be strings."]}, data
    try:
        loaded = _SCHEMAS[event_type].load(data)
    except ValidationError as invalid:
        return _flatten(invalid.messages), data
    return {}, _as_loaded(data, loaded)


def _as_loaded(given: Any, loaded: Any) -> Any:
    """``given`` with the values its load rewrote taken from ``loaded``, in ``given``'s own
    key order (the JSON body keeps the caller's); ``given`` itself where nothing changed."""
    if _identical(given, loaded):
        return given
    if isinstance(given, dict):
        return {key: _as_loaded(value, loaded[key]) for key, value in given.items()}
    if isinstance(given, list):
        return [_as_loaded(one, other) for one, other in zip(given, loaded)]
    return loaded


def _identical(given: Any, loaded: Any) -> bool:
    """``given == loaded``, and of the same types throughout: ``1.0 == 1`` in Python, but an
    integer field given ``1.0`` is written ``1`` (fields.DataInteger)."""
    if type(given) is not type(loaded):
        return False
    if isinstance(given, dict):
        return given.keys() == loaded.keys() and all(
            _identical(value, loaded[key]) for key, value in given.items())
    if isinstance(given, list):
        return len(given) == len(loaded) and all(map(_identical, given, loaded))
    return given == loaded


def _flatten(errors: Any, path: str = "") -> dict[str, list[str]]:
    """Turn marshmallow's nested error tree into ``{"a.0.b": [messages]}``.

    Schema-level messages (key ``_schema``) belong to the object that holds
    them; at the top that object is ``data`` itself.
    """
    if not isinstance(errors, dict):
        messages = errors if isinstance(errors, list) else [errors]
        return {path or "data": [str(message) for message in messages]}
    flat: dict[str, list[str]] = {}
    for key, value in errors.items():
        child = path if key == "_schema" else f"{path}.{key}" if path else str(key)
        for field, messages in _flatten(value, child).items():
            flat.setdefault(field, []).extend(messages)
    return flat
