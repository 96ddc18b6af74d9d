"""The HTTP API under ``/api/webhooks/``: one blueprint per resource (docs/api.md)."""

from __future__ import annotations

from flask import Flask

from . import (audit_log, deliveries, events, openapi, portal_links, public_keys, publisher,
               subscriptions)
from .prefix import API_PREFIX

__all__ = ["API_PREFIX", "register_api"]


def register_api(app: Flask) -> None:
    """Register every API blueprint on ``app``."""
    for blueprint in (events.bp, subscriptions.bp, deliveries.bp, portal_links.bp,
                      public_keys.bp, audit_log.bp, publisher.bp, openapi.bp):
        app.register_blueprint(blueprint)
