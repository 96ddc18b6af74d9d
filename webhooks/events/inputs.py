"""What emit_event accepts: the checks of its inputs and the envelope's bytes, before
anything is stored. Every refusal is an InvalidEvent whose message names each offending
field with the reason, as the HTTP API does (``sent_at: Missing data for required field.``)."""

from __future__ import annotations

from webhooks.config import Settings
from webhooks.errors import InvalidEvent
from webhooks.events.catalogue import EVENT_TYPE_NAMES, checked_data
from webhooks.events.envelope import build_envelope, serialise
from webhooks.reserved import is_operator

__all__ = ["MAX_IDEMPOTENCY_KEY", "MAX_ORDERING_KEY", "validate_input", "validate_ordering_key",
           "envelope_bytes", "describe_errors"]

MAX_IDEMPOTENCY_KEY = 255
MAX_ORDERING_KEY = 200  # characters (CONTRACT 9.4)


def validate_ordering_key(ordering_key) -> None:
    """None, or 1 to MAX_ORDERING_KEY printable ASCII characters (space to ``~``); else
    InvalidEvent naming ``ordering_key``."""
    if ordering_key is None:
        return
    if (not isinstance(ordering_key, str) or not 0 < len(ordering_key) <= MAX_ORDERING_KEY
            or not all(" " <= character <= "~" for character in ordering_key)):
        raise InvalidEvent(
            f"ordering_key must be a string of 1 to {MAX_ORDERING_KEY} printable ASCII "
            "characters (space to ~)",
            {"ordering_key": ["invalid"]},
        )


def validate_input(account_id, event_type, data, idempotency_key):
    """Check every input; raise InvalidEvent naming the bad fields. Returns ``data`` as it
    is written (catalogue.checked_data: a timestamp given with ``Z`` ends ``+00:00``)."""
    if not isinstance(account_id, str) or not account_id:
        raise InvalidEvent("account_id must be a non-empty string", {"account_id": ["required"]})
    if not _storable(account_id):
        raise InvalidEvent(
            "account_id must not contain NUL characters or unpaired surrogates",
            {"account_id": ["invalid"]},
        )
    if is_operator(account_id):  # operational webhooks (issue 25): its endpoints take notices only
        raise InvalidEvent(
            "account_id names the operator account, whose subscriptions are the operational "
            "endpoints (`webhooks operational`): it takes no events",
            {"account_id": ["reserved"]},
        )
    if idempotency_key is not None and (
        not isinstance(idempotency_key, str)
        or not 0 < len(idempotency_key) <= MAX_IDEMPOTENCY_KEY
        or not _storable(idempotency_key)
    ):
        raise InvalidEvent(
            f"idempotency_key must be a string of 1 to {MAX_IDEMPOTENCY_KEY} characters, "
            "without NUL characters or unpaired surrogates",
            {"idempotency_key": ["invalid"]},
        )
    errors, written = checked_data(event_type, data)
    if not errors:
        return written
    if event_type not in EVENT_TYPE_NAMES:
        raise InvalidEvent(
            f"unknown event type {event_type!r}; the valid types are: {', '.join(EVENT_TYPE_NAMES)}",
            errors,
        )
    raise InvalidEvent(f"invalid {event_type!r} event: {describe_errors(errors)}", errors)


def describe_errors(errors: dict[str, list[str]]) -> str:
    """``{"to_email": ["Not a valid email address."]}`` as one line, fields in name order:
    ``to_email: Not a valid email address.``; fields are separated by ``; ``."""
    return "; ".join(f"{field}: {' '.join(errors[field])}" for field in sorted(errors))


def _storable(text: str) -> bool:
    """False for a NUL (PostgreSQL text cannot hold it) or an unpaired surrogate (not UTF-8)."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def envelope_bytes(event_id, event_type, data, created_at, settings: Settings) -> bytes:
    envelope = build_envelope(
        event_id=event_id, event_type=event_type, data=data, created_at=created_at,
        version=settings.version,
    )
    try:
        body = serialise(envelope)
    except (TypeError, ValueError) as exc:
        raise InvalidEvent(f"data is not serialisable as JSON: {exc}", {"data": [str(exc)]}) from None
    if len(body) > settings.max_payload_bytes:
        raise InvalidEvent(
            f"the event is {len(body)} bytes; WEBHOOKS_MAX_PAYLOAD_BYTES allows "
            f"{settings.max_payload_bytes}",
            {"data": ["payload too large"]},
        )
    return body
