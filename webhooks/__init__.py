"""Outbound webhook delivery: signed events to subscribers' endpoints, retried and paused.

Public API::

    from webhooks import emit_event, emit_events
    from webhooks.signing import sign, verify, InvalidSignature

Names are imported lazily so that ``webhooks.signing`` (standard library only)
stays cheap to import for receivers.
"""

from __future__ import annotations

__all__ = ["emit_event", "emit_events", "EmittedEvent", "InvalidEvent", "InvalidSignature", "sign", "verify"]

_LAZY = {
    "emit_event": ("webhooks.emit", "emit_event"),
    "emit_events": ("webhooks.emit", "emit_events"),
    "EmittedEvent": ("webhooks.emit", "EmittedEvent"),
    "InvalidEvent": ("webhooks.errors", "InvalidEvent"),
    "InvalidSignature": ("webhooks.signing", "InvalidSignature"),
    "sign": ("webhooks.signing", "sign"),
    "verify": ("webhooks.signing", "verify"),
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'webhooks' has no attribute {name!r}")
    import importlib

    module_name, attribute = _LAZY[name]
    value = getattr(importlib.import_module(module_name), attribute)
    globals()[name] = value
    return value
