"""Realistic sample ``data`` for every event type, generated from the schemas.

Used by ``GET /api/webhooks/events/samples`` and by tests. Each call returns
fresh UUIDs and the current time, and the result always passes
``validate_data`` for its type (a test checks every type), so a sample is also
valid input to ``emit_event``.

How a value is chosen, first match wins: the per-type table (where one type
needs a different value than the others, e.g. a null ``phone`` for an email
reply), then the per-field-name table, then the field's class (a fresh UUID for
every UUID field, now for every timestamp).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any, Callable

from marshmallow import fields

from webhooks.events.catalogue import get_event_type
from webhooks.events.schemas import CanonicalUUID, Timestamp

__all__ = ["sample_data"]

_DKIM_KEY = "v=DKIM1; k=rsa; p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAq1w"

# Example values by field name, shared by every type that has the field.
_BY_FIELD: dict[str, Any] = {
    "from_email": "maria.lopez@example.com",
    "to_email": "jordan.lee@example.org",
    "email": "jordan.lee@example.org",
    "from_name": "Maria Lopez",
    "subject": "Re: Quick question about your onboarding",
    "url": "https://example.com/pricing?utm_source=newsletter",
    "user_agent": "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15",
    "bounce_type": "hard",
    "smtp_code": 550,
    "diagnostic": "550 5.1.1 <jordan.lee@example.org>: Recipient address rejected: User unknown",
    "name": "Demo booked",
    "external_id": "crm-opportunity-48213",
    "amount_minor": 129900,
    "currency": "USD",
    "reason": "hard_bounce",
    "domain": "mail.example.com",
    "provider": "google",
    "from_phone": "+14155550123",
    "to_phone": "+14155550199",
    "phone": "+14155550123",
    "text": "Hi, yes, Thursday at 10 works for me.",
    "automation_name": "Notify owner on hot lead",
    "action": "notify_owner",
    "message": "This is a test event sent from the dashboard. No action is needed.",
    # reply.received classification
    "channel": "email",
    "party_type": "prospect",
    "category": "interested",
    "intent": "book_meeting",
    "sentiment": "positive",
    "urgency": "medium",
    "intensity": 6,
    "priority_score": 82,
    "risk_flags": [],
    "needs_review": False,
    "confidence": 0.93,
}

# Where one type needs a value that differs from the shared table.
_BY_TYPE: dict[str, dict[str, Any]] = {
    "reply.received": {"phone": None},  # an email reply has no phone (docs/events.md, reply.received)
    "email.sent": {"from_email": "sam.carter@mail.example.com",
                   "subject": "Quick question about your onboarding"},
    "mailbox.connected": {"email": "sam.carter@mail.example.com"},
    "sms.received": {"text": "Yes please, call me after 3pm."},
    "domain.failed": {
        "records": lambda: [_record("dkim", "TXT", "s1._domainkey.mail.example.com", None)],
    },
    "domain.drift": {
        "records": lambda: [
            _record("spf", "TXT", "mail.example.com", "v=spf1 include:_spf.google.com ~all")
        ],
    },
}


def _record(purpose: str, record_type: str, name: str, found: str | None) -> dict:
    expected = _DKIM_KEY if purpose == "dkim" else "v=spf1 include:relay.example.net ~all"
    return {"purpose": purpose, "type": record_type, "name": name,
            "expected": expected, "found": found}


def sample_data(event_type: str) -> dict:
    """Return a new valid, realistic ``data`` dict for ``event_type``.

    Raises ``KeyError`` for a type that is not in the catalogue.
    """
    schema = get_event_type(event_type).schema
    overrides = _BY_TYPE.get(event_type, {})
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return {
        name: _value(name, field, overrides, now)
        for name, field in schema().fields.items()
    }


def _value(name: str, field: fields.Field, overrides: dict[str, Any], now: str) -> Any:
    """Pick the example value of one field (see the module docstring for the order)."""
    if name in overrides:
        return _fresh(overrides[name])
    if name in _BY_FIELD:
        return _fresh(_BY_FIELD[name])
    if isinstance(field, CanonicalUUID):
        return str(uuid.uuid4())
    if isinstance(field, Timestamp):
        return now
    raise LookupError(f"no sample value for field {name!r}")  # a test catches a new field


def _fresh(value: Any | Callable[[], Any]) -> Any:
    # Callables build nested values anew, and lists are copied, so that a caller
    # who edits one sample never changes the next.
    if callable(value):
        return value()
    return list(value) if isinstance(value, list) else value
