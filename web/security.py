"""Transport security of the web process: who may say the request came over https, and HSTS.

- ``WEBHOOKS_TRUSTED_PROXIES`` (default 0): how many reverse proxies stand in
  front of the app. With 0, ``X-Forwarded-Proto`` and ``X-Forwarded-For`` are
  ignored (anyone could send them); with n, the n-th value from the right of
  each is believed (werkzeug's ProxyFix), so ``request.is_secure`` and
  ``request.remote_addr`` describe the client, not the proxy. (gunicorn,
  independently, already believes ``X-Forwarded-Proto`` from a proxy on
  127.0.0.1; see its ``FORWARDED_ALLOW_IPS``.)
- ``Strict-Transport-Security: max-age=<WEBHOOKS_HSTS_MAX_AGE>`` on every
  answer to a request that came over https (default one year; 0 sends none).
  Never on plain http, where a browser ignores it anyway, so ``webhooks dev``
  on http://127.0.0.1 is unaffected. No ``includeSubDomains``: the service
  cannot know what else runs under its parent domain.

The dashboard's session cookie is marked ``Secure`` unless
``WEBHOOKS_SECURE_COOKIES=false`` (see web/dashboard/__init__.py).
"""

from __future__ import annotations

from flask import Flask, Response, request
from werkzeug.middleware.proxy_fix import ProxyFix

from webhooks.config import Settings

__all__ = ["init_app", "HSTS_HEADER"]

HSTS_HEADER = "Strict-Transport-Security"


def init_app(app: Flask, settings: Settings) -> None:
    """Trust ``settings.trusted_proxies`` proxies and send HSTS over https."""
    if settings.trusted_proxies:
        hops = settings.trusted_proxies
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops)
    if not settings.hsts_max_age:
        return
    value = f"max-age={settings.hsts_max_age}"

    @app.after_request
    def _strict_transport_security(response: Response) -> Response:
        if request.is_secure:
            response.headers.setdefault(HSTS_HEADER, value)
        return response
