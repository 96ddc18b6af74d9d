"""A subscription's custom headers: which ones may be set, and how they join a delivery's.

A customer may add up to :data:`MAX_HEADERS` request headers to every
delivery of a subscription (an ``Authorization`` their gateway wants, a
routing key). Names are HTTP tokens and values printable ASCII. The service's
own headers cannot be set, nor anything that describes the body or the
connection rather than the request: the whole ``X-<service>-`` family
(the delivery headers, docs/events.md), ``Content-Type``, ``Content-Length``,
``Content-Encoding``, ``Accept-Encoding``, ``Host``, ``User-Agent`` and the
hop-by-hop headers (``Connection``, ``Keep-Alive``, ``Proxy-*``, ``TE``,
``Trailer``, ``Transfer-Encoding``, ``Upgrade``), compared case-insensitively.

Values are the customer's own: answers show them as they are. They are never
logged: no message of the service quotes a value (the problems below name
the header, never its value), and the log formatter keeps only ids.
"""

from __future__ import annotations

import re
from typing import Mapping

__all__ = ["MAX_HEADERS", "MAX_NAME_LENGTH", "MAX_VALUE_LENGTH", "reserved", "problems",
           "merged"]

MAX_HEADERS = 20
MAX_NAME_LENGTH = 256
MAX_VALUE_LENGTH = 1000

_RESERVED = frozenset({
    "content-type", "content-length", "content-encoding", "accept-encoding", "host",
    "user-agent",
    # the Standard Webhooks signature headers (tenants/schemes.py)
    "webhook-id", "webhook-timestamp", "webhook-signature",
    # hop-by-hop (RFC 9110 7.6.1, RFC 2616 13.5.1)
    "connection", "keep-alive", "te", "trailer", "trailers", "transfer-encoding", "upgrade",
})
_RESERVED_PREFIXES = ("proxy-",)
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 5.6.2
_PRINTABLE = re.compile(r"[\x20-\x7e]*")


def _is_reserved(name: str, service_name: str) -> bool:
    lowered = name.lower()
    prefixes = (*_RESERVED_PREFIXES, f"x-{service_name.lower()}-")
    return lowered in _RESERVED or lowered.startswith(prefixes)


def reserved(names, service_name: str) -> list[str]:
    """The names among ``names`` that only the service may set (for WEBHOOKS_SERVICE_NAME
    ``service_name``), as given."""
    return [name for name in names if _is_reserved(name, service_name)]


def problems(headers: Mapping) -> list[str]:
    """What is wrong with ``headers`` besides reserved names, one sentence each; never
    quoting a value."""
    found = []
    if len(headers) > MAX_HEADERS:
        found.append(f"at most {MAX_HEADERS} headers, got {len(headers)}")
    seen: dict[str, str] = {}
    for name, value in headers.items():
        if not isinstance(name, str) or not _TOKEN.fullmatch(name) or len(name) > MAX_NAME_LENGTH:
            found.append(f"{name!r} is not a header name (letters, digits and !#$%&'*+-.^_`|~, "
                         f"at most {MAX_NAME_LENGTH} characters)")
            continue
        if name.lower() in seen:
            found.append(f"{seen[name.lower()]!r} and {name!r} name the same header")
        seen[name.lower()] = name
        if not isinstance(value, str):
            found.append(f"the value of {name} must be a string")
        elif len(value) > MAX_VALUE_LENGTH:
            found.append(f"the value of {name} is over {MAX_VALUE_LENGTH} characters")
        elif not _PRINTABLE.fullmatch(value):
            found.append(f"the value of {name} must be printable ASCII (no control characters)")
        elif value != value.strip():
            found.append(f"the value of {name} must not begin or end with a space")
    return found


def merged(ours: dict[str, str], custom: Mapping[str, str] | None,
           service_name: str) -> dict[str, str]:
    """The request headers of a delivery: ``ours`` and the custom ones. A custom header
    that became reserved since it was saved (WEBHOOKS_SERVICE_NAME changed) or that names
    one of ours is left out: ours always win."""
    if not custom:
        return ours
    taken = {name.lower() for name in ours}
    extra = {name: value for name, value in custom.items()
             if name.lower() not in taken and not _is_reserved(name, service_name)}
    return {**ours, **extra}
