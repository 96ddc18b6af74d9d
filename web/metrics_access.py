"""Who may scrape ``GET /metrics`` (README, "Operations"; issue 36, finding 7).

The metrics describe every tenant's activity together (how many subscriptions
are paused, how many deliveries wait), so by default only this host may read
them. Two settings open them further:

- ``WEBHOOKS_METRICS_TOKEN`` (webhooks/config/values.py): a scrape must send
  ``Authorization: Bearer <token>``, from any address.
- ``WEBHOOKS_METRICS_ALLOWED_NETWORKS``: addresses or networks in CIDR form
  (``10.0.0.0/8``, ``192.0.2.7``, ``2001:db8::/32``), separated by spaces or
  commas, whose clients may scrape; it replaces the default of this host
  (list ``127.0.0.1`` to keep it).

So: neither set, loopback clients only (``127.0.0.0/8``, ``::1``); a token, any
client that sends it; a list, the clients in it; both, a client in the list
that sends the token. The client's address is ``request.remote_addr``: behind a
reverse proxy it is the proxy's unless ``WEBHOOKS_TRUSTED_PROXIES`` says to
believe the proxy's ``X-Forwarded-For`` (web/security.py).

The list is read once when the app is made; a malformed entry raises
ConfigError naming the variable, so the web process stops at start.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import re
from dataclasses import dataclass
from typing import Mapping

from webhooks.errors import ConfigError

__all__ = ["LOOPBACK", "ScrapeRule", "load_scrape_rule", "Refusal"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

#: Where a scrape may come from when nothing else is configured: this host.
LOOPBACK: tuple[Network, ...] = (ipaddress.ip_network("127.0.0.0/8"),
                                 ipaddress.ip_network("::1/128"))
_VARIABLE = "WEBHOOKS_METRICS_ALLOWED_NETWORKS"


@dataclass(frozen=True)
class Refusal:
    """Why a scrape is refused: the HTTP status (401 or 403) and a sentence for people."""

    status: int
    message: str


@dataclass(frozen=True)
class ScrapeRule:
    """The configured rule; :meth:`refusal` applies it to one request."""

    #: The networks WEBHOOKS_METRICS_ALLOWED_NETWORKS lists; None when it is unset.
    allowed: tuple[Network, ...] | None = None

    def networks(self, token: str | None) -> tuple[Network, ...] | None:
        """The networks a scrape may come from (None: any), given the token in force."""
        if self.allowed is not None:
            return self.allowed
        return None if token else LOOPBACK

    def refusal(self, remote_addr: str | None, authorization: str,
                token: str | None) -> Refusal | None:
        """None when a client at ``remote_addr`` sending ``authorization`` (the header's
        value) may scrape, given the configured ``token``; else why not."""
        networks = self.networks(token)
        if networks is not None and not _within(remote_addr, networks):
            return Refusal(403, "GET /metrics answers only the clients allowed to scrape it "
                           "(by default, this host): set WEBHOOKS_METRICS_TOKEN or "
                           "WEBHOOKS_METRICS_ALLOWED_NETWORKS to scrape from elsewhere.")
        if token and not _bearer_is(authorization, token):
            return Refusal(401, "A metrics token is required: send "
                           "'Authorization: Bearer <token>'.")
        return None


def _within(remote_addr: str | None, networks: tuple[Network, ...]) -> bool:
    try:
        address = ipaddress.ip_address((remote_addr or "").split("%", 1)[0])
    except ValueError:
        return False  # no address (a unix socket), or not one: not known to be allowed
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
    return any(address in network for network in networks)


def _bearer_is(authorization: str, token: str) -> bool:
    """True when ``authorization`` is ``Bearer <token>`` (compared in constant time)."""
    scheme, _, given = authorization.strip().partition(" ")
    given_bytes = given.strip().encode("utf-8", "surrogateescape")
    # compare_digest takes as long for a wrong token as for a right one of the same length.
    return scheme.lower() == "bearer" and hmac.compare_digest(given_bytes, token.encode("ascii"))


def _networks(raw: str) -> tuple[Network, ...] | None:
    entries = [entry for entry in re.split(r"[\s,]+", raw) if entry]
    if not entries:
        return None
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ConfigError(
                f"{_VARIABLE} must list IP addresses or networks such as 10.0.0.0/8 or "
                f"192.0.2.7, separated by spaces or commas; got {entry!r}") from None
    return tuple(networks)


def load_scrape_rule(env: Mapping[str, str] | None = None) -> ScrapeRule:
    """Read WEBHOOKS_METRICS_ALLOWED_NETWORKS from ``env`` (default ``os.environ``)."""
    env = os.environ if env is None else env
    return ScrapeRule(allowed=_networks(env.get(_VARIABLE) or ""))
