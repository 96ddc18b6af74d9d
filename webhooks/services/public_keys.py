"""The public keys an account's receivers fetch: its key set (JWKS, RFC 7517), no API key.

Every live ``standard-ed25519`` subscription of the account gives its current
key and, while a rotation is staged, its next one (tenants/keypairs.py). An
account that does not exist, an id that is not one, and an account without
such a subscription all answer the same empty set, so the answer tells no
account from another.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select
from sqlalchemy.orm import Session

from webhooks.services.subscriptions import canonical_id
from webhooks.storage.models import Subscription
from webhooks.tenants.keypairs import key_set_entries
from webhooks.tenants.schemes import SignatureScheme

__all__ = ["account_key_set"]

# Only what the public keys are derived from: never a whole row (it holds secrets too).
_KEY_COLUMNS = (Subscription.id, Subscription.signature_scheme, Subscription.secret,
                Subscription.next_secret, Subscription.next_secret_active_at)


def account_key_set(session: Session, account_id: str, now: dt.datetime) -> list[dict[str, str]]:
    """The JSON Web Keys of the account's live key-pair subscriptions at ``now``, oldest
    subscription first, its current key before its staged one; [] for anything else."""
    canonical = canonical_id(account_id)
    if canonical is None:
        return []
    rows = session.execute(
        select(*_KEY_COLUMNS)
        .where(Subscription.account_id == canonical,
               Subscription.deleted_at.is_(None),
               Subscription.signature_scheme == SignatureScheme.STANDARD_ED25519.value)
        .order_by(Subscription.created_at, Subscription.id)
    )
    return [key for row in rows for key in key_set_entries(row, now)]
