"""Per-account quotas on stored objects: how many live subscriptions an account may have.

Checked inside the transaction that creates the object, by the core
function every caller (API, dashboard) goes through, so no path skips it.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from webhooks.config import get_settings
from webhooks.errors import Conflict
from webhooks.storage.models import Account, Subscription

__all__ = ["SUBSCRIPTION_LIMIT_CODE", "reserve_subscription_slot"]

SUBSCRIPTION_LIMIT_CODE = "subscription_limit"


def reserve_subscription_slot(session: Session, account_id: str, limit: int | None = None) -> None:
    """Raise Conflict ``subscription_limit`` if the account has ``limit`` live subscriptions.

    ``limit`` defaults to WEBHOOKS_MAX_SUBSCRIPTIONS; 0 means no limit.
    Deleted subscriptions do not count. The account's row stays locked until
    the caller's transaction ends, so two concurrent creates count one after
    the other and the limit is exact on PostgreSQL (on SQLite, ``BEGIN
    IMMEDIATE`` already runs one writer at a time).
    """
    limit = get_settings().max_subscriptions if limit is None else limit
    if not limit:
        return
    session.execute(select(Account.id).where(Account.id == account_id).with_for_update())
    live = session.scalar(
        select(func.count())
        .select_from(Subscription)
        .where(Subscription.account_id == account_id, Subscription.deleted_at.is_(None))
    )
    if live >= limit:
        raise Conflict(
            SUBSCRIPTION_LIMIT_CODE,
            f"this account already has {live} subscriptions, the most it may have; "
            "delete one it no longer needs before creating another",
        )
