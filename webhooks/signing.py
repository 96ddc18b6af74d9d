"""Sign and verify deliveries (docs/events.md, "Headers and signature"). Standard library only.

A receiver may copy this one module into its own code base. Two schemes, one
per subscription (its ``signature_scheme``):

- ``service`` (SPEC 5): the signed message is ``f"{timestamp}.".encode() +
  body`` where ``body`` is the exact raw request body; the key is the
  subscription's secret encoded as UTF-8; the ``X-<Service>-Signature``
  header value is ``sha256=<lowercase hex>,t=<unix seconds>``.
- ``standard`` (Standard Webhooks, https://www.standardwebhooks.com/): the
  signed message is ``f"{webhook-id}.{webhook-timestamp}.".encode() + body``;
  the key is the base64-decoded part of the ``whsec_…`` secret; the
  ``webhook-signature`` header is ``v1,<base64 digest>``, several of them
  space-separated while a rotation is staged.

:func:`verify` takes the service header's value, or the request's headers
(any mapping), and then checks whichever scheme they carry.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from typing import Mapping, Sequence

__all__ = ["sign", "sign_standard", "standard_headers", "verify", "InvalidSignature",
           "DEFAULT_TOLERANCE", "STANDARD_SECRET_PREFIX"]

STANDARD_SECRET_PREFIX = "whsec_"

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


def verify(secret: str | Sequence[str], body: bytes, header: str | Mapping[str, str], *,
           tolerance: int = DEFAULT_TOLERANCE, now=None) -> None:
    """Check a delivery's signature against ``body``; return None or raise InvalidSignature
    saying why.

    ``header`` is the ``X-<Service>-Signature`` value, or the request's headers
    (any mapping; names in any case): with ``webhook-signature`` among them the
    delivery is checked as Standard Webhooks, else by the ``X-…-Signature``
    header. ``secret`` is one secret or several: the signature verifies when it
    matches any of them (a receiver holding the current and the next secret
    while a rotation is staged, docs/secret-rotation.md). ``now`` (unix
    seconds, default the current time) and ``tolerance`` (seconds) bound how
    far the signed timestamp may be from the receiver's clock, in the past or
    the future. Digests are compared in constant time, each one.
    """
    secrets = _secrets(secret)
    # Any object with items(): Flask's and Django's header objects are no Mapping.
    if not isinstance(header, str) and hasattr(header, "items"):
        headers = {str(name).lower(): value for name, value in header.items()}
        if "webhook-signature" in headers:
            _verify_standard(secrets, body, headers, tolerance, now)
            return
        header = _service_header(headers)
    digest, timestamp = _parse(header)
    _check_time(timestamp, tolerance, now)
    # Every secret is tried (no early exit), so the time taken says nothing about which matched.
    matched = [hmac.compare_digest(_digest(key, body, timestamp), digest) for key in secrets]
    if not any(matched):
        raise InvalidSignature(f"signature does not match the body and {_which(secrets)}")


def _which(secrets: list[str]) -> str:
    return "secret" if len(secrets) == 1 else f"any of the {len(secrets)} secrets"


def _check_time(timestamp: int, tolerance: int, now) -> None:
    current = int(time.time()) if now is None else int(now)
    if timestamp < current - tolerance:
        raise InvalidSignature(f"signature timestamp is more than {tolerance} s in the past")
    if timestamp > current + tolerance:
        raise InvalidSignature(f"signature timestamp is more than {tolerance} s in the future")


def _service_header(headers: dict[str, str]) -> str:
    """The one ``X-<Service>-Signature`` value among lower-cased ``headers``."""
    found = [value for name, value in headers.items()
             if name.startswith("x-") and name.endswith("-signature")]
    if len(found) != 1:
        raise InvalidSignature("signature header is missing: expected X-<Service>-Signature "
                               "or webhook-signature")
    return found[0]


# ---------------------------------------------------------------- Standard Webhooks


def _standard_key(secret: str) -> bytes:
    """The HMAC key of a ``whsec_<base64>`` secret: its base64 part, decoded."""
    encoded = secret[len(STANDARD_SECRET_PREFIX):] if secret.startswith(
        STANDARD_SECRET_PREFIX) else secret
    try:
        key = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError("a Standard Webhooks secret is whsec_ and standard base64") from exc
    if not key:
        raise ValueError("a Standard Webhooks secret may not be empty")
    return key


def _standard_digest(key: bytes, message_id: str, body: bytes, timestamp: int) -> bytes:
    message = f"{message_id}.{timestamp}.".encode("utf-8") + bytes(body)
    return hmac.new(key, message, hashlib.sha256).digest()


def sign_standard(secret: str, message_id: str, body: bytes, timestamp: int) -> str:
    """One ``webhook-signature`` entry, ``v1,<base64>``, for ``body`` sent at ``timestamp``
    (unix seconds) as message ``message_id``, keyed with the ``whsec_…`` ``secret``."""
    if isinstance(timestamp, bool) or not isinstance(timestamp, int):
        raise TypeError("timestamp must be whole unix seconds (int)")
    digest = _standard_digest(_standard_key(secret), message_id, body, timestamp)
    return "v1," + base64.b64encode(digest).decode("ascii")


def standard_headers(secrets: Sequence[str], message_id: str, body: bytes,
                     timestamp: int) -> dict[str, str]:
    """The three Standard Webhooks headers, signed with each of ``secrets`` (two while a
    rotation is staged: both signatures, space-separated)."""
    signatures = " ".join(sign_standard(key, message_id, body, timestamp) for key in secrets)
    return {"webhook-id": message_id, "webhook-timestamp": str(timestamp),
            "webhook-signature": signatures}


def _verify_standard(secrets: list[str], body: bytes, headers: dict[str, str], tolerance: int,
                     now) -> None:
    message_id, stamp = headers.get("webhook-id"), headers.get("webhook-timestamp")
    if not message_id or not stamp:
        raise InvalidSignature("webhook-id and webhook-timestamp headers are required")
    if not stamp.isascii() or not stamp.isdigit() or len(stamp) > 15:
        raise InvalidSignature("webhook-timestamp is not whole unix seconds")
    timestamp = int(stamp)
    _check_time(timestamp, tolerance, now)
    offered = []
    for entry in headers["webhook-signature"].split(" "):
        version, _, encoded = entry.partition(",")
        if version == "v1":
            try:
                offered.append(base64.b64decode(encoded, validate=True))
            except (binascii.Error, ValueError):
                continue
    if not offered:
        raise InvalidSignature("webhook-signature holds no v1 signature")
    expected = [_standard_digest(_standard_key(key), message_id, body, timestamp) for key in secrets]
    matched = [hmac.compare_digest(e, o) for e in expected for o in offered]
    if not any(matched):
        raise InvalidSignature(f"signature does not match the body and {_which(secrets)}")


def _secrets(secret: str | Sequence[str]) -> list[str]:
    """One secret or several as a list; a TypeError or ValueError for anything else."""
    keys = [secret] if isinstance(secret, str) else list(secret)
    if not keys:
        raise ValueError("verify needs at least one secret")
    if not all(isinstance(key, str) for key in keys):
        raise TypeError("each secret must be a str")
    return keys
