"""A receiver's Ed25519 check with ``cryptography`` alone (no package of this project), for
the tests of ``standard-ed25519`` signatures."""

from __future__ import annotations

import base64

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

__all__ = ["v1a_results"]


def v1a_results(public_key: str, headers: dict[str, str], body: bytes) -> list[bool]:
    """For each ``v1a`` entry of the ``webhook-signature`` header (lower-case names), whether
    the ``whpk_…`` public key verifies it over ``{webhook-id}.{webhook-timestamp}.{body}``.
    Entries of another version are left out."""
    raw = base64.b64decode(public_key.removeprefix("whpk_"), validate=True)
    key = Ed25519PublicKey.from_public_bytes(raw)
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    results = []
    for entry in headers["webhook-signature"].split(" "):
        version, _, encoded = entry.partition(",")
        if version != "v1a":
            continue
        try:
            key.verify(base64.b64decode(encoded), signed)
            results.append(True)
        except InvalidSignature:
            results.append(False)
    return results
