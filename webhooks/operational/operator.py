"""The reserved operator account whose subscriptions are the operational endpoints.

Its id is reserved (webhooks/reserved.py). Created on demand by the first
``webhooks operational add``. It has no API key (its stored key hash is no
SHA-256 hex digest, so no key can ever match it), so neither the API nor the
dashboard can act as it; nothing lists accounts. Its deliveries count against
its own in-flight caps, never a customer's.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from webhooks.reserved import OPERATOR_ACCOUNT_ID
from webhooks.storage.models import Account, utcnow

__all__ = ["operator_account"]

_NAME = "operator (operational webhooks)"
_NO_API_KEY = "none: the operator account has no API key"  # not hex: matches no key's hash


def operator_account(session: Session) -> Account:
    """The operator account, created in the caller's transaction if it is not there yet."""
    account = session.get(Account, OPERATOR_ACCOUNT_ID)
    if account is None:
        account = Account(id=OPERATOR_ACCOUNT_ID, name=_NAME, api_key_hash=_NO_API_KEY,
                          created_at=utcnow())
        session.add(account)
        session.flush()
    return account
