"""Sign and verify deliveries (docs/events.md, "Headers and signature").

A receiver may copy this one module into its own code base: the HMAC schemes
need the standard library only, Ed25519 (``v1a``) the ``cryptography``
package, imported when first used. Three schemes, one per subscription (its
``signature_scheme``):

- ``service`` (SPEC 5): the signed message is ``f"{timestamp}.".encode() +
  body`` where ``body`` is the exact raw request body; the key is the
  subscription's secret encoded as UTF-8; the ``X-<Service>-Signature``
  header value is ``sha256=<lowercase hex>,t=<unix seconds>``.
- ``standard`` (Standard Webhooks, https://www.standardwebhooks.com/): the
  signed message is ``f"{webhook-id}.{webhook-timestamp}.".encode() + body``;
  the key is the base64-decoded part of the ``whsec_…`` secret; the
  ``webhook-signature`` header is ``v1,<base64 digest>``, several of them
  space-separated while a rotation is staged.
- ``standard-ed25519`` (Standard Webhooks' asymmetric ``v1a``): the same
  headers and signed message; the service signs with the subscription's
  private key (``whsk_`` and the standard base64 of its 32-byte seed, never
  shown), the ``webhook-signature`` entry is ``v1a,<base64 of the 64-byte
  Ed25519 signature>``, and receivers verify with the public key, ``whpk_`` and
  the standard base64 of its 32 bytes. :func:`public_jwk` is that key as a JSON
  Web Key, with its ``kid``.

:func:`verify` takes the service header's value, or the request's headers
(any mapping), and then checks whichever scheme they carry.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import json
import time
from typing import Mapping, Sequence

__all__ = ["sign", "sign_standard", "standard_headers", "verify", "InvalidSignature",
           "public_key_of", "public_jwk", "key_id", "DEFAULT_TOLERANCE",
           "STANDARD_SECRET_PREFIX", "PRIVATE_KEY_PREFIX", "PUBLIC_KEY_PREFIX",
           "ED25519_KEY_BYTES"]

STANDARD_SECRET_PREFIX = "whsec_"
PRIVATE_KEY_PREFIX = "whsk_"  # an Ed25519 private key: the service's, never shown
PUBLIC_KEY_PREFIX = "whpk_"  # an Ed25519 public key: the receiver's, shown everywhere
ED25519_KEY_BYTES = 32  # a private key's seed, and a public key

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
    while a rotation is staged, docs/secret-rotation.md). A ``whpk_…`` public
    key among them checks the ``v1a`` (Ed25519) signatures of a Standard
    Webhooks delivery, so ``header`` must then be the headers. ``now`` (unix
    seconds, default the current time) and ``tolerance`` (seconds) bound how
    far the signed timestamp may be from the receiver's clock, in the past or
    the future. HMAC digests are compared in constant time, each one.
    """
    secrets = _secrets(secret)
    # Any object with items(): Flask's and Django's header objects are no Mapping.
    if not isinstance(header, str) and hasattr(header, "items"):
        headers = {str(name).lower(): value for name, value in header.items()}
        if "webhook-signature" in headers:
            _verify_standard(secrets, body, headers, tolerance, now)
            return
        header = _service_header(headers)
        secrets = _shared_secrets(secrets, "this delivery has no webhook-signature header")
    else:
        secrets = _shared_secrets(secrets, "pass the request's headers, not this header's value")
    digest, timestamp = _parse(header)
    _check_time(timestamp, tolerance, now)
    # Every secret is tried (no early exit), so the time taken says nothing about which matched.
    matched = [hmac.compare_digest(_digest(key, body, timestamp), digest) for key in secrets]
    if not any(matched):
        raise InvalidSignature(f"signature does not match the body and {_which(secrets)}")


def _shared_secrets(secrets: list[str], why_not: str) -> list[str]:
    """The HMAC secrets among ``secrets``, for an ``X-<Service>-Signature``; a public key
    checks only ``v1a`` signatures, which that header never holds (``why_not`` says so)."""
    shared = [key for key in secrets if not key.startswith(PUBLIC_KEY_PREFIX)]
    if not shared:
        raise InvalidSignature("a whpk_ public key checks the v1a signatures of webhook-signature "
                               f"only: {why_not}")
    return shared


def _which(secrets: list[str]) -> str:
    """What the delivery was checked against, as the error says it."""
    noun = "public key" if all(key.startswith(PUBLIC_KEY_PREFIX) for key in secrets) else (
        "secret" if not any(key.startswith(PUBLIC_KEY_PREFIX) for key in secrets) else "key")
    return noun if len(secrets) == 1 else f"any of the {len(secrets)} {noun}s"


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


def _standard_message(message_id: str, body: bytes, timestamp: int) -> bytes:
    """What both Standard Webhooks signatures sign: ``{webhook-id}.{webhook-timestamp}.{body}``."""
    return f"{message_id}.{timestamp}.".encode("utf-8") + bytes(body)


def _standard_digest(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


def sign_standard(secret: str, message_id: str, body: bytes, timestamp: int) -> str:
    """One ``webhook-signature`` entry for ``body`` sent at ``timestamp`` (unix seconds) as
    message ``message_id``: ``v1,<base64 HMAC-SHA256>`` keyed with a ``whsec_…`` secret, or
    ``v1a,<base64 Ed25519 signature>`` made with a ``whsk_…`` private key."""
    if isinstance(timestamp, bool) or not isinstance(timestamp, int):
        raise TypeError("timestamp must be whole unix seconds (int)")
    message = _standard_message(message_id, body, timestamp)
    if secret.startswith(PRIVATE_KEY_PREFIX):
        signature = _private_key(secret).sign(message)
        return "v1a," + base64.b64encode(signature).decode("ascii")
    digest = _standard_digest(_standard_key(secret), message)
    return "v1," + base64.b64encode(digest).decode("ascii")


def standard_headers(secrets: Sequence[str], message_id: str, body: bytes,
                     timestamp: int) -> dict[str, str]:
    """The three Standard Webhooks headers, signed with each of ``secrets`` (``whsec_``
    secrets or ``whsk_`` private keys; two while a rotation is staged: both signatures,
    space-separated, in that order)."""
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
    public = [key for key in secrets if key.startswith(PUBLIC_KEY_PREFIX)]
    shared = [key for key in secrets if not key.startswith(PUBLIC_KEY_PREFIX)]
    offered = _offered(headers["webhook-signature"])
    wanted = [version for version, keys in (("v1", shared), ("v1a", public)) if keys]
    if not any(offered[version] for version in wanted):
        raise InvalidSignature(f"webhook-signature holds no {' or '.join(wanted)} signature")
    message = _standard_message(message_id, body, timestamp)
    # Every HMAC is compared (no early exit), so the time taken says nothing about which
    # secret matched; a public key is no secret, and its check is cryptography's.
    expected = [_standard_digest(_standard_key(key), message) for key in shared]
    matched = [hmac.compare_digest(e, o) for e in expected for o in offered["v1"]]
    matched += [_ed25519_valid(key, o, message) for key in public for o in offered["v1a"]]
    if not any(matched):
        raise InvalidSignature(f"signature does not match the body and {_which(secrets)}")


def _offered(header: str) -> dict[str, list[bytes]]:
    """The decodable signatures of a ``webhook-signature`` value, by version (``v1``,
    ``v1a``); entries of other versions, or not base64, are left out."""
    offered: dict[str, list[bytes]] = {"v1": [], "v1a": []}
    for entry in header.split(" "):
        version, _, encoded = entry.partition(",")
        if version in offered:
            try:
                offered[version].append(base64.b64decode(encoded, validate=True))
            except (binascii.Error, ValueError):
                continue
    return offered


# ---------------------------------------------------------------- Ed25519 key pairs


def _ed25519():
    """cryptography's Ed25519 module and its mismatch exception, imported when first
    needed: the HMAC schemes need only the standard library (a receiver may copy this
    module without cryptography)."""
    try:
        from cryptography.exceptions import InvalidSignature as Mismatch
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as exc:  # pragma: no cover - cryptography is a dependency of the service
        raise ImportError("Ed25519 (v1a) signatures need the cryptography package: "
                          "pip install cryptography") from exc
    return ed25519, Mismatch


def _key_bytes(key: str, prefix: str) -> bytes:
    """The 32 bytes of a ``whsk_…`` or ``whpk_…`` key (ValueError if it is not one)."""
    problem = f"an Ed25519 key is {prefix} and the standard base64 of {ED25519_KEY_BYTES} bytes"
    if not key.startswith(prefix):
        raise ValueError(problem)
    try:
        raw = base64.b64decode(key[len(prefix):], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(problem) from exc
    if len(raw) != ED25519_KEY_BYTES:
        raise ValueError(f"{problem}, not {len(raw)}")
    return raw


@functools.lru_cache(maxsize=1024)
def _private_key(private_key: str):
    """The signing key of a ``whsk_…`` private key. Cached: loading one derives its public
    key (about as long as a signature), and a worker signs with the same few keys."""
    ed25519, _ = _ed25519()
    return ed25519.Ed25519PrivateKey.from_private_bytes(
        _key_bytes(private_key, PRIVATE_KEY_PREFIX))


def _ed25519_valid(public_key: str, signature: bytes, message: bytes) -> bool:
    ed25519, mismatch = _ed25519()
    key = ed25519.Ed25519PublicKey.from_public_bytes(_key_bytes(public_key, PUBLIC_KEY_PREFIX))
    try:
        key.verify(signature, message)
    except mismatch:
        return False
    return True


def public_key_of(private_key: str) -> str:
    """The ``whpk_…`` public key of a ``whsk_…`` private key."""
    raw = _private_key(private_key).public_key().public_bytes_raw()
    return PUBLIC_KEY_PREFIX + base64.b64encode(raw).decode("ascii")


def _base64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def public_jwk(public_key: str) -> dict[str, str]:
    """A ``whpk_…`` public key as a JSON Web Key (RFC 8037: ``kty`` OKP, ``crv`` Ed25519,
    ``x`` the base64url of its 32 bytes), for signatures (``use`` sig, ``alg`` EdDSA), with
    its ``kid``: the key's RFC 7638 thumbprint, the same for the same key wherever it is
    computed."""
    x = _base64url(_key_bytes(public_key, PUBLIC_KEY_PREFIX))
    members = json.dumps({"crv": "Ed25519", "kty": "OKP", "x": x}, separators=(",", ":"),
                         sort_keys=True)
    kid = _base64url(hashlib.sha256(members.encode("ascii")).digest())
    return {"kty": "OKP", "crv": "Ed25519", "x": x, "kid": kid, "use": "sig", "alg": "EdDSA"}


def key_id(public_key: str) -> str:
    """The ``kid`` of a ``whpk_…`` public key (:func:`public_jwk`)."""
    return public_jwk(public_key)["kid"]


def _secrets(secret: str | Sequence[str]) -> list[str]:
    """One secret or several as a list; a TypeError or ValueError for anything else."""
    keys = [secret] if isinstance(secret, str) else list(secret)
    if not keys:
        raise ValueError("verify needs at least one secret")
    if not all(isinstance(key, str) for key in keys):
        raise TypeError("each secret must be a str")
    return keys
