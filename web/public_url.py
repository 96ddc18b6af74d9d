"""Absolute URLs of this service as people outside reach it (portal links, the key set).

``WEBHOOKS_PUBLIC_URL`` (web/portal_config.py) is their base when set: behind
a proxy the request's own host may be an internal one. Otherwise the
request's own scheme and host.
"""

from __future__ import annotations

from flask import current_app, request, url_for

__all__ = ["public_url_for"]


def public_url_for(endpoint: str, **values) -> str:
    """The absolute URL of ``endpoint`` (with ``values``), under WEBHOOKS_PUBLIC_URL if set."""
    public_url = current_app.extensions["portal_config"].public_url
    if public_url:
        # The public URL replaces scheme, host and any mount point of this request.
        path = url_for(endpoint, **values)
        return public_url + path[len(request.script_root):]
    return url_for(endpoint, _external=True, **values)
