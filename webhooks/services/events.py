"""Emitting events for the publisher API (CONTRACT 10.7): exactly ``emit_event`` and
``emit_events``, so that an event sent over HTTP and one emitted from Python are checked by
the same rules and stored as the same rows, messages and deliveries.

Each runs in a transaction of its own (not the request's): the request returns
its 202 only after the event is committed and its messages were accepted by the
broker or parked (CONTRACT 9.1), and concurrent requests of one web process
share commits as concurrent ``emit_event`` calls do (emit.py, group commit).
"""

from __future__ import annotations

from typing import Mapping, Sequence

from webhooks.emit import EmittedEvent, emit_event, emit_events
from webhooks.errors import InvalidEvent

__all__ = ["EmittedEvent", "EVENT_FIELDS", "emit_one", "emit_many"]

EVENT_FIELDS = ("type", "data", "idempotency_key", "ordering_key")  # as emit_events' items


def emit_one(account_id: str, event: Mapping) -> EmittedEvent:
    """``emit_event`` of ``event`` (``type``, ``data``, optional ``idempotency_key`` and
    ``ordering_key``); InvalidEvent or NotFound as it raises them. An event with another
    field, or without ``type`` or ``data``, is refused as one item of ``emit_events`` is."""
    unknown = sorted(set(event) - set(EVENT_FIELDS), key=str)
    missing = [name for name in ("type", "data") if name not in event]
    if unknown or missing:
        problems = ([f"unknown field {name!r}" for name in unknown]
                    + [f"missing field {name!r}" for name in missing])
        raise InvalidEvent(", ".join(problems), {name: ["invalid"] for name in unknown + missing})
    return emit_event(account_id, event["type"], event["data"],
                      idempotency_key=event.get("idempotency_key"),
                      ordering_key=event.get("ordering_key"))


def emit_many(account_id: str, events: Sequence[Mapping]) -> list[str]:
    """``emit_events``: every event checked first, stored together; their ids in order."""
    return emit_events(account_id, events)
