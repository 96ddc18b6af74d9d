"""Sign and verify deliveries (docs/events.md, "Headers and signature"). Standard library only.

A receiver may copy this one module into its own code base. The signed
message is ``f"{timestamp}.".encode() + body`` where ``body`` is the exact
raw request body; the key is the subscription's secret encoded as UTF-8;
the header value is ``sha256=<lowercase hex>,t=<unix seconds>``.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Sequence

__all__ = ["sign", "verify", "InvalidSignature", "DEFAULT_TOLERANCE"]

DEFAULT_TOLERANCE = 300  # seconds, either side of the receiver's clock 


class InvalidSignature(ValueError):
    """The signature header is malformed, stale, from the future, or does not match."""


def _digest(secret: str, body: bytes, timestamp: int) -> str:
    message = str(timestamp).encode("ascii") + b"." + bytes(body)
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def sign(secret: str, body: bytes, timestamp: int) -> str:
    """Return the signature header value for ``body`` sent at ``timestamp`` (unix seconds)."""
    if isinstance(timestamp, bool) or not isinstance(timestamp, int):
        raise TypeError("timestamp must be whole unix seconds (int)")
    return f"sha256={_digest(secret, body, timestamp)},t={timestamp}"


def _parse(header: str) -> tuple[str, int]:
    """Split ``sha256=<hex>,t=<seconds>`` (parts in either order) into digest and timestamp."""
    if not isinstance(header, str) or not header:
        raise InvalidSignature("signature header is missing")
    parts: dict[str, str] = {}
    for part in header.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep or key in parts:
            raise InvalidSignature("signature header is malformed: expected sha256=<hex>,t=<seconds>")
        parts[key] = value
    digest, stamp = parts.get("sha256"), parts.get("t")
    if digest is None or stamp is None or set(parts) != {"sha256", "t"}:
        raise InvalidSignature("signature header is malformed: expected sha256=<hex>,t=<seconds>")
    if not stamp.isascii() or not stamp.isdigit() or len(stamp) > 15:
        raise InvalidSignature("signature timestamp is not whole unix seconds")
    if len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
        raise InvalidSignature("signature digest is not 64 lowercase hex characters")
    return digest, int(stamp)


def verify(secret: str | Sequence[str], body: bytes, header: str, *,
           tolerance: int = DEFAULT_TOLERANCE, now=None) -> None:
    """Check ``header`` against ``body``; return None or raise InvalidSignature saying why.

    ``secret`` is one secret or several: the signature verifies when it matches
    any of them (a receiver holding the current and the next secret while a
    rotation is staged, docs/secret-rotation.md). ``now`` (unix seconds,
    default the current time) and ``tolerance`` (seconds) bound how far the
    signed timestamp may be from the receiver's clock, in the past or the
    future. Digests are compared in constant time, each one.
    """
    secrets = _secrets(secret)
    digest, timestamp = _parse(header)
    current = int(time.time()) if now is None else int(now)
    if timestamp < current - tolerance:
        raise InvalidSignature(f"signature timestamp is more than {tolerance} s in the past")
    if timestamp > current + tolerance:
        raise InvalidSignature(f"signature timestamp is more than {tolerance} s in the future")
    # Every secret is tried (no early exit), so the time taken says nothing about which matched.
    matched = [hmac.compare_digest(_digest(key, body, timestamp), digest) for key in secrets]
    if not any(matched):
        which = "secret" if len(secrets) == 1 else f"any of the {len(secrets)} secrets"
        raise InvalidSignature(f"signature does not match the body and {which}")


def _secrets(secret: str | Sequence[str]) -> list[str]:
    """One secret or several as a list; a TypeError or ValueError for anything else."""
    keys = [secret] if isinstance(secret, str) else list(secret)
    if not keys:
        raise ValueError("verify needs at least one secret")
    if not all(isinstance(key, str) for key in keys):
        raise TypeError("each secret must be a str")
    return keys
