"""The dashboard's signed cookie session exists only where its cookie is sent.

The session cookie's path is ``/dashboard`` (SESSION_COOKIE_PATH), so a
browser never sends it to any other route: the JSON API (Bearer keys),
``/healthz``, ``/metrics``. Flask still opens and saves a session on every
request, and building its signer and checking for the cookie cost ~40 us of
CPU a request, about 5 % of an event sent through the publisher API (issue 38).
Outside the cookie's path the request gets Flask's null session instead: read,
it is empty, as the real one would be with no cookie; written, it raises, so a
route that starts using the session outside the dashboard fails loudly instead
of setting a cookie that would never come back.
"""

from __future__ import annotations

from flask import Flask, Request
from flask.sessions import SecureCookieSessionInterface, SessionMixin

__all__ = ["CookiePathSessionInterface", "sends_the_cookie"]


def sends_the_cookie(cookie_path: str, request_path: str) -> bool:
    """Whether a browser sends a cookie of ``cookie_path`` with a request of ``request_path``
    (RFC 6265's path-match, section 5.1.4)."""
    if request_path == cookie_path or cookie_path == "/":
        return True
    prefix = cookie_path if cookie_path.endswith("/") else cookie_path + "/"
    return request_path.startswith(prefix)


class CookiePathSessionInterface(SecureCookieSessionInterface):
    """Flask's signed-cookie sessions, opened only for requests under the cookie's path."""

    def open_session(self, app: Flask, request: Request) -> SessionMixin | None:
        if not sends_the_cookie(self.get_cookie_path(app), request.path):
            return self.make_null_session(app)
        return super().open_session(app, request)

    def save_session(self, app: Flask, session: SessionMixin, response) -> None:
        if self.is_null_session(session):
            return  # nothing was read and nothing could be written
        super().save_session(app, session, response)
