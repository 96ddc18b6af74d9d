"""The answer of ``GET /public-keys/<account_id>`` (CONTRACT 10.2): a JSON Web Key Set
(RFC 7517) of Ed25519 public keys (RFC 8037), one per current or staged key of the
account's ``standard-ed25519`` subscriptions."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

__all__ = ["PublicKeySchema", "KeySetSchema"]


class PublicKeySchema(Schema):
    """One public key as a JSON Web Key, with the subscription whose deliveries it verifies."""

    kty = fields.String(required=True, validate=validate.Equal("OKP"),
                        metadata={"enum": ["OKP"], "description": "octet key pair (RFC 8037)"})
    crv = fields.String(required=True, validate=validate.Equal("Ed25519"),
                        metadata={"enum": ["Ed25519"]})
    x = fields.String(required=True, metadata={
        "pattern": "^[A-Za-z0-9_-]{43}$",
        "description": "the 32 bytes of the public key, base64url without padding: the same "
                       "bytes as the subscription's `public_key` (`whpk_` and standard base64)"})
    kid = fields.String(required=True, metadata={
        "pattern": "^[A-Za-z0-9_-]{43}$",
        "description": "the key's RFC 7638 thumbprint (base64url of SHA-256): the same for "
                       "the same key, always; each delivery names the kids of the keys that "
                       "signed it in `X-Service-Key-Id`"})
    use = fields.String(required=True, validate=validate.Equal("sig"), metadata={"enum": ["sig"]})
    alg = fields.String(required=True, validate=validate.Equal("EdDSA"),
                        metadata={"enum": ["EdDSA"]})
    subscription_id = fields.UUID(required=True, metadata={
        "description": "the subscription whose deliveries this key verifies"})


class KeySetSchema(Schema):
    """The account's key set; `{"keys": []}` for an account without such keys, and for any
    id that names no account."""

    keys = fields.List(fields.Nested(PublicKeySchema), required=True, metadata={
        "description": "every current key and every staged key (while a rotation is staged) "
                       "of the account's `standard-ed25519` subscriptions"})
