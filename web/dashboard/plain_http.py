"""Why signing in cannot work over plain http with Secure cookies, said on the page.

With ``WEBHOOKS_SECURE_COOKIES=true`` (the default) the session cookie, which
carries the sign-in form's CSRF token, is marked ``Secure``: a browser keeps
it only from https and never sends it over plain http. A dashboard reached
over http outside ``webhooks dev`` therefore answered every sign-in with "The
form could not be accepted… reload the page", forever. The sign-in page and
that error page now say what is wrong and how to fix it.

"Over https" is ``request.is_secure``: the request's own scheme, or the
``X-Forwarded-Proto`` of a proxy the app trusts (``WEBHOOKS_TRUSTED_PROXIES``,
web/security.py; gunicorn also believes it from 127.0.0.1).
"""

from __future__ import annotations

from flask import current_app, request

__all__ = ["PLAIN_HTTP_ADVICE", "plain_http_advice"]

PLAIN_HTTP_ADVICE = (
    "This page was reached over plain http, but the dashboard's sign-in cookie is marked "
    "Secure (WEBHOOKS_SECURE_COOKIES=true), so the browser never sends it back and signing "
    "in cannot work. Serve the dashboard over https (TLS in front of the service; behind a "
    "proxy that terminates TLS, set WEBHOOKS_TRUSTED_PROXIES so its X-Forwarded-Proto is "
    "believed), or, on a network you trust, set WEBHOOKS_SECURE_COOKIES=false."
)


def plain_http_advice() -> str | None:
    """PLAIN_HTTP_ADVICE when this request came over plain http while cookies are Secure."""
    if request.is_secure or not current_app.config.get("SESSION_COOKIE_SECURE"):
        return None
    return PLAIN_HTTP_ADVICE
