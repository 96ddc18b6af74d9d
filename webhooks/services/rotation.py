"""Signing secrets and key pairs: rotate now or staged, activate or cancel a staged one, and
what answers and pages may show of them (the secrets of an HMAC scheme; of a key pair, its
public keys only: tenants/keypairs.py)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from webhooks.storage.models import Subscription, utcnow
from webhooks.tenants import rotation
from webhooks.tenants.keypairs import PublicKeys, public_keys_at, shown_secrets
from webhooks.tenants.rotation import ACTIVATE_IN_MAX, Secrets

# No secrets_at here: web code shows secrets through shown_secrets, which holds back keys.
__all__ = ["ACTIVATE_IN_MAX", "Secrets", "PublicKeys", "public_keys_at", "shown_secrets",
           "rotate", "activate_now", "cancel"]


def rotate(session: Session, subscription: Subscription, activate_in: int | None = None) -> Subscription:
    """A new secret: signing at once, or staged to take over in ``activate_in`` seconds."""
    rotation.rotate(session, subscription.id, utcnow(), activate_in)
    session.refresh(subscription)
    return subscription


def activate_now(session: Session, subscription: Subscription) -> bool:
    """The staged secret signs from now on; False if none was staged."""
    return rotation.activate_now(session, subscription.id, utcnow())


def cancel(session: Session, subscription: Subscription) -> bool:
    """Drop the staged secret; False if none was staged."""
    return rotation.cancel(session, subscription.id, utcnow())
