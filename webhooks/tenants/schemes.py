"""Signature schemes: how a subscription's deliveries are signed, and the secrets of each.

- ``service`` (the default, SPEC 2.4): the ``X-<Service>-Signature`` header;
  its secret is ``whsec_`` and URL-safe base64 of 32 random bytes, used as
  UTF-8 text (tenants/accounts.py).
- ``standard`` (Standard Webhooks, https://www.standardwebhooks.com/): the
  ``webhook-id``, ``webhook-timestamp`` and ``webhook-signature`` headers
  (signing.standard_headers); its secret is ``whsec_`` and standard base64 of
  32 random bytes, whose decoded bytes are the HMAC key, as the reference
  ``standardwebhooks`` libraries expect.

A secret belongs to its scheme: changing a subscription's scheme gives it a
new secret (rotation.switch_scheme).
"""

from __future__ import annotations

import base64
import enum
import secrets

from webhooks.signing import STANDARD_SECRET_PREFIX
from webhooks.tenants.accounts import new_signing_secret

__all__ = ["SignatureScheme", "SCHEMES", "DEFAULT_SCHEME", "STANDARD_KEY_BYTES", "new_secret",
           "scheme_problem"]


class SignatureScheme(str, enum.Enum):
    SERVICE = "service"
    STANDARD = "standard"


SCHEMES = tuple(scheme.value for scheme in SignatureScheme)
DEFAULT_SCHEME = SignatureScheme.SERVICE.value
STANDARD_KEY_BYTES = 32  # Standard Webhooks asks for at least 24 random bytes


def new_secret(scheme: str = DEFAULT_SCHEME) -> str:
    """A fresh signing secret in the format of ``scheme`` (ValueError for an unknown one)."""
    if SignatureScheme(scheme) is SignatureScheme.STANDARD:
        key = secrets.token_bytes(STANDARD_KEY_BYTES)
        return STANDARD_SECRET_PREFIX + base64.b64encode(key).decode("ascii")
    return new_signing_secret()


def scheme_problem(value) -> str | None:
    """Why ``value`` is not a signature scheme, or None when it is one."""
    if value in SCHEMES:
        return None
    return f"signature_scheme must be one of {', '.join(SCHEMES)}, not {value!r}"
