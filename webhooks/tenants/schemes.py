"""Signature schemes: how a subscription's deliveries are signed, and the secrets of each.

- ``service`` (the default, SPEC 2.4): the ``X-<Service>-Signature`` header;
  its secret is ``whsec_`` and URL-safe base64 of 32 random bytes, used as
  UTF-8 text (tenants/accounts.py).
- ``standard`` (Standard Webhooks, https://www.standardwebhooks.com/): the
  ``webhook-id``, ``webhook-timestamp`` and ``webhook-signature`` headers
  (signing.standard_headers); its secret is ``whsec_`` and standard base64 of
  32 random bytes, whose decoded bytes are the HMAC key, as the reference
  ``standardwebhooks`` libraries expect.
- ``standard-ed25519`` (Standard Webhooks' asymmetric ``v1a``): the same
  headers, signed with Ed25519. Its "secret" is a private key, ``whsk_`` and
  standard base64 of a 32-byte random seed (RFC 8032), kept in the secret's
  column and rotated, staged, activated and cancelled exactly as a secret
  (rotation.py); it never leaves the service: answers and pages show its
  public key instead (keypairs.py).

A secret belongs to its scheme: changing a subscription's scheme gives it a
new secret, or key pair (rotation.switch_scheme).
"""

from __future__ import annotations

import base64
import enum
import secrets

from webhooks.signing import ED25519_KEY_BYTES, PRIVATE_KEY_PREFIX, STANDARD_SECRET_PREFIX
from webhooks.tenants.accounts import new_signing_secret

__all__ = ["SignatureScheme", "SCHEMES", "DEFAULT_SCHEME", "STANDARD_KEY_BYTES", "new_secret",
           "scheme_problem", "sends_standard_headers", "signs_with_key_pair"]


class SignatureScheme(str, enum.Enum):
    SERVICE = "service"
    STANDARD = "standard"
    STANDARD_ED25519 = "standard-ed25519"


SCHEMES = tuple(scheme.value for scheme in SignatureScheme)
DEFAULT_SCHEME = SignatureScheme.SERVICE.value
STANDARD_KEY_BYTES = 32  # Standard Webhooks asks for at least 24 random bytes


def sends_standard_headers(scheme: str | None) -> bool:
    """Whether deliveries under ``scheme`` carry the Standard Webhooks headers."""
    return scheme in (SignatureScheme.STANDARD.value, SignatureScheme.STANDARD_ED25519.value)


def signs_with_key_pair(scheme: str | None) -> bool:
    """Whether ``scheme`` signs with a private key (whose public key alone is shown)."""
    return scheme == SignatureScheme.STANDARD_ED25519.value


def new_secret(scheme: str = DEFAULT_SCHEME) -> str:
    """A fresh signing secret, or private key, in the format of ``scheme`` (ValueError for
    an unknown one)."""
    chosen = SignatureScheme(scheme)
    if chosen is SignatureScheme.STANDARD:
        return STANDARD_SECRET_PREFIX + _random_base64(STANDARD_KEY_BYTES)
    if chosen is SignatureScheme.STANDARD_ED25519:
        return PRIVATE_KEY_PREFIX + _random_base64(ED25519_KEY_BYTES)  # any 32 bytes are a seed
    return new_signing_secret()


def _random_base64(size: int) -> str:
    return base64.b64encode(secrets.token_bytes(size)).decode("ascii")


def scheme_problem(value) -> str | None:
    """Why ``value`` is not a signature scheme, or None when it is one."""
    if value in SCHEMES:
        return None
    return f"signature_scheme must be one of {', '.join(SCHEMES)}, not {value!r}"
