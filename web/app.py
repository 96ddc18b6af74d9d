"""The application factory: ``create_app()``, served as ``gunicorn 'web:create_app()'``."""

from __future__ import annotations

import os

from flask import Flask

from webhooks.composition import compose
from webhooks.config import get_settings, tracing
from webhooks.config.logs import configure_logging

from . import access_log, body_limit, health, metrics, ratelimit, security, transaction
from .api import publisher as publisher_api
from .api import register_api
from .dashboard import bp as dashboard_bp
from .dashboard import register_dashboard
from .dashboard.blueprint import signed_in_account_id
from .errors import register_error_handlers
from .portal_config import load_portal_config

__all__ = ["create_app", "check_settings"]


def check_settings() -> None:
    """Parse what the web app reads from the environment: the WEBHOOKS_* settings, the
    OTEL_* variables and the portal's configuration. ConfigError names the first it cannot
    use. ``create_app`` does it first; gunicorn's master does it before it starts a worker
    (web/server.py), so that a bad setting stops the process once, not in each worker."""
    get_settings()
    tracing.check(os.environ)
    load_portal_config()


def create_app(config: dict | None = None) -> Flask:
    """A Flask app for the service.

    ``config`` overrides Flask settings (tests), e.g. ``MAX_CONTENT_LENGTH``
    (default WEBHOOKS_MAX_REQUEST_BYTES, 64 KiB); a larger body answers 413 on every
    route (web/body_limit.py).
    """
    # Parse the settings now: a malformed WEBHOOKS_* variable stops the web
    # process at start, naming the variable, not on some later request.
    settings = get_settings()
    tracing.check(os.environ)  # OTEL_* (webhooks/config/tracing.py): set up at the first span
    compose()  # the lifecycle's listeners: the broker, operational webhooks (composition.py)
    portal_config = load_portal_config()
    app = Flask(__name__)
    app.extensions["portal_config"] = portal_config
    app.config["MAX_CONTENT_LENGTH"] = settings.max_request_bytes
    if config:
        app.config.update(config)
    # Answer keys in the order the schemas declare them (id first, envelope in its documented order).
    app.json.sort_keys = False
    security.init_app(app, settings)
    # First of the request hooks: an oversized body is refused before a key is looked up.
    body_limit.init_app(app)
    transaction.init_app(app)
    # Per-tenant request limits (429 over them); probes and scrapes are never limited, and
    # the publisher API counts per publisher key (WEBHOOKS_PUBLISHER_RATE_LIMIT) instead.
    ratelimit.init_app(
        app, settings, exempt=(health.bp, metrics.bp, publisher_api.bp),
        signed_in={dashboard_bp.name: signed_in_account_id},
    )
    register_error_handlers(app)
    register_api(app)
    # Operations and the dashboard (README, "Operations"): /healthz, /metrics, /dashboard/,
    # and JSON log lines (webhooks/config/logs.py) outside tests.
    app.register_blueprint(health.bp)
    metrics.init_app(app)  # who may scrape: web/metrics_access.py
    register_dashboard(app)
    if not app.testing:
        configure_logging()
    # Portal links' tokens stay out of gunicorn's access and error logs (web/access_log.py).
    access_log.install()
    return app
