"""The portal links' two settings (CONTRACT 9.3), read once when the app is made.

- ``WEBHOOKS_PUBLIC_URL``: the base of every link, e.g. ``https://hooks.example.com``
  (an http or https URL, no query or fragment; a path is kept, for a service
  mounted under one). Empty (default): the request's own scheme and host.
- ``WEBHOOKS_PORTAL_FRAME_ANCESTORS``: the origins allowed to show a portal
  session in a frame, separated by spaces or commas, each ``scheme://host[:port]``
  (``https://app.example.com``). Empty (default): no framing at all. The value
  goes into a CSP header, so anything but a plain origin is refused at start.

A malformed value raises ConfigError naming the variable, so the web process
stops at start rather than on some later request.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import urlsplit

from webhooks.errors import ConfigError

__all__ = ["PortalConfig", "load_portal_config"]

# scheme://host[:port] only: letters, digits, dots, hyphens; an IPv6 host in brackets.
_ORIGIN = re.compile(r"^https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?$")


@dataclass(frozen=True)
class PortalConfig:
    public_url: str | None = None
    frame_ancestors: tuple[str, ...] = ()


def _public_url(raw: str) -> str | None:
    name = "WEBHOOKS_PUBLIC_URL"
    if not raw:
        return None
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{name} must be an http or https URL such as "
                          f"https://hooks.example.com, got {raw!r}")
    if parts.query or parts.fragment or any(c.isspace() for c in raw):
        raise ConfigError(f"{name} must not hold a query, a fragment or spaces, got {raw!r}")
    return raw.rstrip("/")


def _frame_ancestors(raw: str) -> tuple[str, ...]:
    origins = tuple(part for part in re.split(r"[\s,]+", raw) if part)
    for origin in origins:
        if not _ORIGIN.match(origin):
            raise ConfigError(
                "WEBHOOKS_PORTAL_FRAME_ANCESTORS must list origins such as "
                f"https://app.example.com (scheme, host, optional port), got {origin!r}")
    return tuple(origin.lower() for origin in origins)


def load_portal_config(env: Mapping[str, str] | None = None) -> PortalConfig:
    """Parse both settings from ``env`` (default: ``os.environ``); ConfigError if malformed."""
    env = os.environ if env is None else env
    return PortalConfig(
        public_url=_public_url((env.get("WEBHOOKS_PUBLIC_URL") or "").strip()),
        frame_ancestors=_frame_ancestors(env.get("WEBHOOKS_PORTAL_FRAME_ANCESTORS") or ""),
    )
