"""Accounts and their API keys. A key is shown once; only its SHA-256 is stored."""

from __future__ import annotations

import hashlib
import secrets

from sqlalchemy import select
from sqlalchemy.orm import Session

from webhooks.storage.models import Account, new_id, utcnow

__all__ = [
    "API_KEY_PREFIX",
    "SECRET_PREFIX",
    "create_account",
    "account_for_key",
    "hash_api_key",
    "new_signing_secret",
    "new_api_key",
]

API_KEY_PREFIX = "whk_"
SECRET_PREFIX = "whsec_"
_RANDOM_BYTES = 32  # 256 bits of entropy in every key and secret


def hash_api_key(api_key: str) -> str:
    """The stored form of an API key (hex SHA-256; keys are random, so no salt is needed)."""
    return hashlib.sha256(api_key.encode("utf-8")).hexdigest()


def new_signing_secret() -> str:
    """A fresh subscription signing secret, prefixed so people recognise it."""
    return SECRET_PREFIX + secrets.token_urlsafe(_RANDOM_BYTES)


def new_api_key() -> tuple[str, str]:
    """A fresh API key and its stored form (the key is shown once, never stored)."""
    api_key = API_KEY_PREFIX + secrets.token_urlsafe(_RANDOM_BYTES)
    return api_key, hash_api_key(api_key)


def create_account(session: Session, name: str) -> tuple[Account, str]:
    """Create an account; returns it with its API key, which is not stored anywhere."""
    name = (name or "").strip()
    if not name or len(name) > 200:
        raise ValueError(f"account name must be 1 to 200 characters (without the spaces around "
                         f"it), not {len(name)}")
    api_key, key_hash = new_api_key()
    account = Account(id=new_id(), name=name, api_key_hash=key_hash, created_at=utcnow())
    session.add(account)
    session.flush()
    return account, api_key


def account_for_key(session: Session, api_key: str) -> Account | None:
    """The account owning ``api_key``, or None (also when the account was deleted)."""
    if not api_key or not api_key.startswith(API_KEY_PREFIX):
        return None
    return session.scalars(
        select(Account).where(Account.api_key_hash == hash_api_key(api_key),
                              Account.deleted_at.is_(None))
    ).first()
