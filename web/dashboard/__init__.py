"""The dashboard (README, "Dashboard"): server-rendered pages where a subscriber signs in with an
API key, subscribes endpoints, sends a test, replays and resumes.

Flask + Jinja templates (``web/templates/dashboard/``) and one plain stylesheet
(``web/static/dashboard.css``): no JavaScript, no build step. Every action
calls the same core functions as the JSON API, inside the same per-request
transaction (``web/transaction.py``).
"""

from __future__ import annotations

import datetime as dt

from flask import Flask

from webhooks.config import get_settings

from . import (  # noqa: F401  (routes)
    views_activity, views_deliveries, views_overview, views_portal, views_recover, views_rotation,
    views_subscriptions,
)
from .blueprint import bp, csrf
from .portal import PortalCookieSessionInterface
from .secret_key import session_secret_key

__all__ = ["register_dashboard", "bp", "SESSION_LIFETIME"]

SESSION_LIFETIME = dt.timedelta(hours=12)


def register_dashboard(app: Flask) -> None:
    """Mount the dashboard under ``/dashboard/`` with its session and CSRF settings.

    ``SECRET_KEY`` given in the app's config wins (tests); otherwise see
    :func:`web.dashboard.secret_key.session_secret_key`.
    """
    if not app.config.get("SECRET_KEY"):
        app.config["SECRET_KEY"] = session_secret_key(get_settings())
    app.config.update(
        SESSION_COOKIE_NAME="webhooks_session",
        SESSION_COOKIE_HTTPONLY=True,
        # Sent over https only; WEBHOOKS_SECURE_COOKIES=false for plain http (webhooks dev).
        SESSION_COOKIE_SECURE=get_settings().secure_cookies,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_PATH="/dashboard",
        # Signed cookies carry their age: the server refuses one older than this.
        PERMANENT_SESSION_LIFETIME=SESSION_LIFETIME,
        # CSRF is checked by the dashboard blueprint only (before each of its
        # views), not app-wide: the JSON API authenticates with Bearer keys.
        WTF_CSRF_CHECK_DEFAULT=False,
        # A token lives as long as the session it belongs to (a tab left open works).
        WTF_CSRF_TIME_LIMIT=None,
    )
    # A portal session's cookie is SameSite=None; Secure while framing is allowed (portal.py).
    app.session_interface = PortalCookieSessionInterface()
    csrf.init_app(app)
    app.register_blueprint(bp)
