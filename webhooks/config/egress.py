"""The operator's egress proxy (WEBHOOKS_EGRESS_PROXY, WEBHOOKS_EGRESS_PROXY_CONNECT), read once.

Every connection to a subscriber (endpoints, OAuth2 token URLs, operational
endpoints) goes through a ``CONNECT`` tunnel of this proxy when it is set
(webhooks/sender/tunnel.py). ``address`` mode asks the proxy for the address
the private-address guard approved, so the guard holds behind a proxy that
filters nothing; ``name`` mode asks for the host name and leaves the proxy's
resolver and rules in charge.

The proxy's credentials live only in :attr:`EgressProxy.authorization`, the
``Proxy-Authorization`` value: the object's ``repr`` and :attr:`EgressProxy.shown`
mask the password, so no log line, answer or page can print it.
"""

from __future__ import annotations

import base64
import enum
from dataclasses import dataclass, field
from typing import Mapping
from urllib.parse import unquote, urlsplit

from webhooks.errors import ConfigError

__all__ = ["ConnectMode", "EgressProxy", "egress_proxy"]


class ConnectMode(str, enum.Enum):
    """What the ``CONNECT`` line names: the address the guard approved, or the host name."""

    ADDRESS = "address"
    NAME = "name"


@dataclass(frozen=True)
class EgressProxy:
    """An HTTP proxy reached at ``host``:``port``; ``authorization`` is the whole
    ``Proxy-Authorization`` header value (``Basic …``), or None without credentials."""

    host: str
    port: int
    mode: ConnectMode = ConnectMode.ADDRESS
    user: str | None = None
    authorization: str | None = field(default=None, repr=False)

    @property
    def shown(self) -> str:
        """The proxy as logs and messages name it: ``http://user:***@host:port``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        credentials = f"{self.user}:***@" if self.user is not None else ""
        return f"http://{credentials}{host}:{self.port}"

    def __repr__(self) -> str:
        return f"EgressProxy({self.shown!r}, mode={self.mode.value!r})"


def egress_proxy(env: Mapping[str, str]) -> EgressProxy | None:
    """WEBHOOKS_EGRESS_PROXY (``http://[user:password@]host:port``) and
    WEBHOOKS_EGRESS_PROXY_CONNECT (``address``, the default, or ``name``); None when no
    proxy is set. A malformed value raises ConfigError, which never quotes the password."""
    raw = (env.get("WEBHOOKS_EGRESS_PROXY") or "").strip()
    mode = _connect_mode((env.get("WEBHOOKS_EGRESS_PROXY_CONNECT") or "").strip().lower())
    if not raw:
        return None
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError:
        raise ConfigError(_malformed("its port is not a number from 1 to 65535")) from None
    if parts.scheme.lower() != "http":
        raise ConfigError(_malformed("only an http:// proxy is supported (the tunnel to an "
                                     "https endpoint is TLS from end to end)"))
    if not parts.hostname:
        raise ConfigError(_malformed("it names no host"))
    if not port:
        raise ConfigError(_malformed("it names no port (http://host:port)"))
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigError(_malformed("it must be http://[user:password@]host:port alone"))
    user = None if parts.username is None else unquote(parts.username)
    authorization = None
    if user is not None:
        password = unquote(parts.password or "")
        token = base64.b64encode(f"{user}:{password}".encode("utf-8")).decode("ascii")
        authorization = f"Basic {token}"
    return EgressProxy(parts.hostname, port, mode, user, authorization)


def _connect_mode(raw: str) -> ConnectMode:
    try:
        return ConnectMode(raw or ConnectMode.ADDRESS.value)
    except ValueError:
        raise ConfigError("WEBHOOKS_EGRESS_PROXY_CONNECT must be `address` or `name`, "
                          f"got {raw!r}") from None


def _malformed(why: str) -> str:
    return f"WEBHOOKS_EGRESS_PROXY must be http://[user:password@]host:port: {why}"
