"""Build the event envelope (docs/events.md) and serialise it to bytes, once per event.

The bytes are stored with the event and sent unchanged on every attempt to
every subscription, so a receiver can verify the signature over the raw body.
"""

from __future__ import annotations

import datetime as dt
import json

__all__ = ["MODE", "build_envelope", "serialise", "format_created_at"]

MODE = "live"


def format_created_at(moment: dt.datetime) -> str:
    """UTC, ISO 8601, millisecond precision, ``Z`` suffix: ``2026-07-30T12:00:00.123Z``."""
    utc = moment.astimezone(dt.timezone.utc)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def build_envelope(
    *, event_id: str, event_type: str, data: dict, created_at: dt.datetime, version: str
) -> dict:
    """The envelope as a dict, keys in the documented order."""
    return {
        "version": version,
        "id": event_id,
        "type": event_type,
        "mode": MODE,
        "created_at": format_created_at(created_at),
        "data": data,
    }


def serialise(envelope: dict) -> bytes:
    """Compact UTF-8 JSON; NaN and Infinity are refused because JSON has no such values."""
    return json.dumps(envelope, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode(
        "utf-8"
    )
