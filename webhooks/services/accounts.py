"""Accounts: who an API key belongs to (the key's SHA-256 is what is stored), and creating
one with its audit entry (``webhooks accounts create``)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from webhooks.services.audit import Action, Actor, Target, TargetKind, created, write
from webhooks.storage.models import Account
from webhooks.tenants.accounts import account_for_key, create_account

__all__ = ["account_for_key", "create"]


def create(session: Session, name: str, *, actor: Actor) -> tuple[Account, str]:
    """A new account and its API key (shown once), with the ``account.created`` entry by
    ``actor`` in the account's own log. ValueError for a name of no or too many characters."""
    account, api_key = create_account(session, name)
    write(session, account.id, actor, Action.ACCOUNT_CREATED,
          Target(TargetKind.ACCOUNT, account.id), created({"name": account.name}),
          at=account.created_at)
    return account, api_key
