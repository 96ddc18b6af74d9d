"""What a portal session (CONTRACT 9.3) changes in the dashboard: refusals, framing, cookie.

A portal link (webhooks/services/portal_links.py) opens a dashboard session marked
``portal`` in the signed cookie, ending at the link's ``expires_at`` and
``read_only`` if the link is. Three rules follow, each decided here:

- A read-only session may not change anything: every request with a
  state-changing method answers 403 before any view (or the CSRF check)
  runs, whatever the route, so a route added later is covered without
  being listed. Signing in (with an API key or another portal link) and
  signing out stay allowed: they change only which session the browser holds.
- Framing: the dashboard forbids every frame (``frame-ancestors 'none'``)
  except for a portal session's pages when ``WEBHOOKS_PORTAL_FRAME_ANCESTORS``
  lists origins: those pages allow exactly those origins.
- A framed page from another site gets its cookie only if it is
  ``SameSite=None``, which browsers accept only with ``Secure``; and browsers
  that block third-party cookies (Chromium does) still keep one that is
  ``Partitioned`` (CHIPS: kept apart for each embedding site). So a portal
  session's cookie is ``SameSite=None; Secure; Partitioned`` while framing is
  allowed. ``Secure`` cookies need https, except on http://localhost and
  http://127.0.0.1, which browsers treat as secure origins.

The cookie of every session, a portal link's or an API key's, expires when the
session ends on the server (:data:`ENDS_AT_KEY`, set at sign-in), not
PERMANENT_SESSION_LIFETIME after each request: a 60-second link's cookie says
60 seconds (issue 36, finding 18).
"""

from __future__ import annotations

import datetime as dt

from flask import current_app, session

from .cookie_scope import CookiePathSessionInterface

__all__ = ["STATE_CHANGING_METHODS", "ALLOWED_WHEN_READ_ONLY", "PORTAL_KEY", "ENDS_AT_KEY",
           "refused_when_read_only", "content_security_policy", "frame_ancestors",
           "PortalCookieSessionInterface"]

STATE_CHANGING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: Endpoints a read-only session may still POST to: they change the browser's session only.
ALLOWED_WHEN_READ_ONLY = frozenset({"dashboard.sign_in", "dashboard.sign_out",
                                    "dashboard.switch_to_portal_link"})
#: The signed cookie's key that marks a session opened by a portal link.
PORTAL_KEY = "portal"
#: The signed cookie's key that holds when its session ends on the server (Unix seconds).
ENDS_AT_KEY = "ends_at"

_POLICY = ("default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
           "frame-ancestors {ancestors}; base-uri 'none'")


def refused_when_read_only(method: str, endpoint: str | None) -> bool:
    """True when a read-only session must be refused this request (403)."""
    return method.upper() in STATE_CHANGING_METHODS and endpoint not in ALLOWED_WHEN_READ_ONLY


def content_security_policy(ancestors: tuple[str, ...]) -> str:
    """The dashboard's CSP, allowing frames from ``ancestors`` only (none: ``'none'``)."""
    return _POLICY.format(ancestors=" ".join(ancestors) if ancestors else "'none'")


def frame_ancestors() -> tuple[str, ...]:
    """The origins WEBHOOKS_PORTAL_FRAME_ANCESTORS allows (web/portal_config.py)."""
    return current_app.extensions["portal_config"].frame_ancestors


def _framed_portal_session() -> bool:
    return bool(session.get(PORTAL_KEY)) and bool(frame_ancestors())


class PortalCookieSessionInterface(CookiePathSessionInterface):
    """Flask's signed-cookie sessions (opened under the cookie's path only: cookie_scope.py),
    with ``SameSite=None; Secure; Partitioned`` for a portal session while framing is allowed
    (every other cookie keeps the app's settings), and an ``Expires`` that is the session's
    end on the server."""

    def get_expiration_time(self, app, session):
        ends_at = session.get(ENDS_AT_KEY)
        if isinstance(ends_at, int) and session.permanent:
            return dt.datetime.fromtimestamp(ends_at, dt.timezone.utc)
        return super().get_expiration_time(app, session)

    def get_cookie_samesite(self, app):
        if _framed_portal_session():
            return "None"
        return super().get_cookie_samesite(app)

    def get_cookie_secure(self, app):
        return True if _framed_portal_session() else super().get_cookie_secure(app)

    def get_cookie_partitioned(self, app):
        return True if _framed_portal_session() else super().get_cookie_partitioned(app)
