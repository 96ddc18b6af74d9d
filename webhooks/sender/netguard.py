"""Which IP addresses a delivery may connect to (WEBHOOKS_ALLOW_PRIVATE_TARGETS).

It judges an address that has already been resolved. webhooks/sender/post.py calls it
on every address it is about to connect to, so a host name that resolves to
127.0.0.1, or a DNS answer that changes between check and use, is caught.

The verdict is pure. Only :func:`describe_refusal` has a side effect: the
refused address goes to the operators' log, never into the text that the
tenant sees (an attempt's ``error``), so a tenant cannot map internal host
names to addresses by subscribing to them. A host *name* whose addresses are
all refused does not even read as refused: it fails as a name that does not
resolve (connections.py), so that a tenant cannot tell which internal names exist.
"""

from __future__ import annotations

import ipaddress
import logging

__all__ = ["is_public_address", "describe_refusal", "REFUSAL_MESSAGE"]

log = logging.getLogger("webhooks.netguard")  # its name from before the move: log searches use it

# What the tenant reads (after "refused: " in the attempt's error): no address.
REFUSAL_MESSAGE = "destination is not a public address; deliveries go only to public addresses"

# NAT64 (RFC 6052) embeds an IPv4 address in its last 32 bits.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

# IPv6 ranges that Python (3.11) counts as global but that no public endpoint
# lives in: refused whatever they carry.
_NOT_PUBLIC_V6 = tuple(ipaddress.ip_network(n) for n in (
    "fec0::/10",         # site-local (RFC 3879, deprecated): routed inside a site
    "::/96",             # IPv4-compatible (RFC 4291, deprecated); also holds :: and ::1
    "::ffff:0:0:0/96",   # IPv4-translated (SIIT, RFC 2765): an IPv4 host behind a translator
    "64:ff9b:1::/48",    # local-use NAT64 (RFC 8215): a translator inside a network
    "3fff::/20",         # documentation (RFC 9637)
    "5f00::/16",         # SRv6 segment identifiers (RFC 9602)
))


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses carried inside an IPv6 one (mapped, 6to4, Teredo, NAT64)."""
    found = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    if address in _NAT64:
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found


def is_public_address(address: str | ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """True only for globally routable unicast addresses.

    Loopback, private, link-local (including the cloud metadata address
    169.254.169.254), shared (100.64/10), unspecified (0.0.0.0, ::),
    multicast, reserved and documentation ranges are not public, nor are
    the IPv6 ranges of ``_NOT_PUBLIC_V6``; an IPv6 address that embeds an
    IPv4 one (IPv4-mapped ``::ffff:0:0/96``, 6to4, Teredo, NAT64) is judged
    by the embedded address too, since that is where a connect ends up.
    """
    if isinstance(address, str):
        # Strip an IPv6 zone id ("fe80::1%eth0").
        address = ipaddress.ip_address(address.split("%", 1)[0])
    if not address.is_global or address.is_multicast:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        if any(address in network for network in _NOT_PUBLIC_V6):
            return False
        return all(is_public_address(v4) for v4 in _embedded_ipv4(address))
    return True


def describe_refusal(address: str) -> str:
    """The error text recorded when the guard refuses ``address``: the same for every address.

    The address itself is logged here (WARNING, logger ``webhooks.netguard``)
    for the operators, who alone can allow it.
    """
    log.warning(
        "refused to connect to %s: not a public address "
        "(WEBHOOKS_ALLOW_PRIVATE_TARGETS=true allows it)", address,
    )
    return REFUSAL_MESSAGE
