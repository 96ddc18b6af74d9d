"""Accounts as the publisher API and the CLI manage them (CONTRACT 10.7): create, list,
read, rotate the API key, delete, each change with its audit entry in its own transaction.
Who an API key belongs to (its SHA-256 is what is stored).

A deleted account is gone at once for every route (its key, its id, emitting
to it) and its subscriptions stop (no further attempt: as DELETE of each);
its rows go afterwards, in retention's bounded batches (storage/retention.py).
"""

from __future__ import annotations

from sqlalchemy import Select, delete, func, select
from sqlalchemy.orm import Session

from webhooks.lifecycle import changes
from webhooks.services.audit import (REDACTED, Action, Actor, Target, TargetKind,
                                     changes_between, created, write)
from webhooks.operational.operator import OPERATOR_ACCOUNT_ID
from webhooks.storage.models import Account, DashboardSession, PortalLink, Subscription, utcnow
from webhooks.tenants.accounts import account_for_key, create_account, new_api_key

__all__ = ["account_for_key", "create", "every_account", "live_accounts", "live_account",
           "subscription_count", "rotate_key", "delete_account"]


def create(session: Session, name: str, *, actor: Actor) -> tuple[Account, str]:
    """A new account and its API key (shown once), with the ``account.created`` entry by
    ``actor`` in the account's own log. ValueError for a name of no or too many characters."""
    account, api_key = create_account(session, name)
    write(session, account.id, actor, Action.ACCOUNT_CREATED,
          Target(TargetKind.ACCOUNT, account.id), created({"name": account.name}),
          at=account.created_at)
    return account, api_key


def live_accounts() -> Select:
    """The statement selecting every customer account that is not deleted (unordered): the
    operator account of the operational webhooks is not one (its endpoints are managed by
    ``webhooks operational``)."""
    return select(Account).where(Account.deleted_at.is_(None), Account.id != OPERATOR_ACCOUNT_ID)


def every_account(session: Session) -> list[Account]:
    """Every account that is not deleted, oldest first (``webhooks accounts list``)."""
    return list(session.scalars(live_accounts().order_by(Account.created_at, Account.id)))


def live_account(session: Session, account_id: str) -> Account | None:
    """The account ``account_id`` names unless it is deleted, else None."""
    return session.scalars(live_accounts().where(Account.id == account_id)).first()


def subscription_count(session: Session, account_id: str) -> int:
    """How many subscriptions the account has (deleted ones not counted)."""
    return session.scalar(select(func.count()).select_from(Subscription).where(
        Subscription.account_id == account_id, Subscription.deleted_at.is_(None)))


def rotate_key(session: Session, account: Account, *, actor: Actor) -> str:
    """Give the account a new API key, returned (shown once): the old one stops working
    with this transaction's commit, and so does every dashboard session of the account and
    every portal link not opened yet, since a leaked key could have opened or made them.
    The ``account.key_rotated`` entry by ``actor`` says so (the keys themselves redacted)."""
    api_key, account.api_key_hash = new_api_key()
    write(session, account.id, actor, Action.ACCOUNT_KEY_ROTATED,
          Target(TargetKind.ACCOUNT, account.id),
          {"api_key": {"from": REDACTED, "to": REDACTED}})
    session.execute(delete(DashboardSession).where(DashboardSession.account_id == account.id))
    session.execute(delete(PortalLink).where(PortalLink.account_id == account.id))
    session.flush()
    return api_key


def delete_account(session: Session, account: Account, *, actor: Actor) -> None:
    """Delete the account: gone at once for every route; each subscription stops as its own
    DELETE stops it (waiting deliveries end ``failed``, no further attempt). Its rows are
    deleted by the next retention runs, in batches."""
    now = utcnow()
    account.deleted_at = now
    write(session, account.id, actor, Action.ACCOUNT_DELETED,
          Target(TargetKind.ACCOUNT, account.id), changes_between({"deleted_at": None}, {"deleted_at": now}),
          at=now)
    live = session.scalars(select(Subscription.id).where(
        Subscription.account_id == account.id, Subscription.deleted_at.is_(None))).all()
    for subscription_id in live:
        changes.delete_subscription(session, subscription_id, now)
    session.execute(delete(DashboardSession).where(DashboardSession.account_id == account.id))
    session.execute(delete(PortalLink).where(PortalLink.account_id == account.id))
    session.flush()
