"""Signing secrets and key pairs: rotate now or staged, activate or cancel a staged one, and
what answers and pages may show of them (the secrets of an HMAC scheme; of a key pair, its
public keys only: tenants/keypairs.py)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from webhooks.services import audit
from webhooks.services.audit import Action, Actor
from webhooks.storage.models import Subscription, utcnow
from webhooks.tenants import rotation
from webhooks.tenants.keypairs import PublicKeys, public_keys_at, shown_secrets
from webhooks.tenants.rotation import ACTIVATE_IN_MAX, Secrets

# No secrets_at here: web code shows secrets through shown_secrets, which holds back keys.
__all__ = ["ACTIVATE_IN_MAX", "Secrets", "PublicKeys", "public_keys_at", "shown_secrets",
           "rotate", "activate_now", "cancel"]


def rotate(session: Session, subscription: Subscription, activate_in: int | None = None, *,
           actor: Actor) -> Subscription:
    """A new secret: signing at once, or staged to take over in ``activate_in`` seconds;
    its ``secret.rotated`` entry by ``actor`` (the secrets redacted, the moment shown)."""
    before = audit.snapshot(subscription)
    rotation.rotate(session, subscription.id, utcnow(), activate_in)
    audit.subscription_changed(session, subscription, before, Action.SECRET_ROTATED, actor)
    return subscription


def activate_now(session: Session, subscription: Subscription, *, actor: Actor) -> bool:
    """The staged secret signs from now on (a ``secret.rotation_activated`` entry by
    ``actor``); False if none was staged (no entry)."""
    return _staged_change(session, subscription, rotation.activate_now,
                          Action.SECRET_ROTATION_ACTIVATED, actor)


def cancel(session: Session, subscription: Subscription, *, actor: Actor) -> bool:
    """Drop the staged secret (a ``secret.rotation_cancelled`` entry by ``actor``); False if
    none was staged (no entry)."""
    return _staged_change(session, subscription, rotation.cancel,
                          Action.SECRET_ROTATION_CANCELLED, actor)


def _staged_change(session: Session, subscription: Subscription, transition, action: Action,
                   actor: Actor) -> bool:
    before = audit.snapshot(subscription)
    if not transition(session, subscription.id, utcnow()):
        return False
    audit.subscription_changed(session, subscription, before, action, actor)
    return True
