"""Key pairs of ``standard-ed25519`` subscriptions: what is shown of them, and their JWKS.

A key-pair subscription keeps its private key (``whsk_…``) where any other
subscription keeps its secret, and a staged one where a staged secret waits
(rotation.py), so rotating, staging, activating, cancelling and the staged
time's swap are the secrets' own transitions. The private key never leaves
the service: what answers and pages may show is decided here, once, for
every scheme (:func:`shown_secrets`, :func:`public_keys_at`), and the key set
that receivers fetch holds public keys only (:func:`key_set_entries`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from webhooks.signing import key_id, public_jwk, public_key_of
from webhooks.tenants.rotation import Secrets, secrets_at
from webhooks.tenants.schemes import signs_with_key_pair

__all__ = ["PublicKeys", "public_keys_at", "shown_secrets", "key_set_entries"]


@dataclass(frozen=True)
class PublicKeys:
    """A key-pair subscription's public keys as of one moment: the one whose private key
    signs, and the staged one with the moment it takes over (both None when none is
    staged)."""

    public_key: str
    next_public_key: str | None
    next_public_key_active_at: dt.datetime | None

    @property
    def key_id(self) -> str:
        """The ``kid`` of :attr:`public_key` (its JWK thumbprint, signing.public_jwk)."""
        return key_id(self.public_key)

    @property
    def next_key_id(self) -> str | None:
        """The ``kid`` of :attr:`next_public_key`, if one is staged."""
        return key_id(self.next_public_key) if self.next_public_key else None


def public_keys_at(subscription, now: dt.datetime) -> PublicKeys | None:
    """The public keys of ``subscription`` at ``now``; None when its scheme signs with a
    secret instead."""
    if not signs_with_key_pair(subscription.signature_scheme):
        return None
    private = secrets_at(subscription, now)
    staged = private.next_secret
    return PublicKeys(public_key_of(private.secret),
                      public_key_of(staged) if staged is not None else None,
                      private.next_secret_active_at)


def shown_secrets(subscription, now: dt.datetime) -> Secrets | None:
    """The secrets of ``subscription`` at ``now`` that an answer or a page may show (to
    whoever may see secrets at all); None when they are private keys, which nothing shows."""
    if signs_with_key_pair(subscription.signature_scheme):
        return None
    return secrets_at(subscription, now)


def key_set_entries(subscription, now: dt.datetime) -> list[dict[str, str]]:
    """The JSON Web Keys of ``subscription``'s current and staged public keys at ``now``
    (none for a subscription signed with a secret), each naming its subscription."""
    keys = public_keys_at(subscription, now)
    if keys is None:
        return []
    shown = [keys.public_key] + ([keys.next_public_key] if keys.next_public_key else [])
    return [{**public_jwk(key), "subscription_id": subscription.id} for key in shown]
