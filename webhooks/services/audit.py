"""The audit log as the use cases write it and the API and the dashboard read it.

Each use case that changes something (subscriptions, pausing, rotation, replay,
recovery, portal_links, accounts, and the operational endpoints) takes the
``actor`` its entrance names (the API key, the dashboard or portal session, the
command line) and writes its entry here, in the caller's transaction, when and
only when something changed. Entrances import :class:`Actor` from here.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy.orm import Session

from webhooks.audit import log
from webhooks.audit.entries import (REDACTED, Action, Actor, ActorKind, Target, TargetKind,
                                    changes_between, created, reference,
                                    subscription_fields)
from webhooks.storage.models import AuditEntry, Subscription
from webhooks.tenants.options import SETTABLE

__all__ = ["REDACTED", "Action", "Actor", "ActorKind", "Target", "TargetKind", "created",
           "changes_between", "reference",
           "ACTIONS", "snapshot", "subscription_created",
           "subscription_changed", "write", "entries_of", "resource", "AuditEntry"]

ACTIONS = tuple(action.value for action in Action)  # the API's `action` filter accepts these
_OPTIONS = tuple(SETTABLE)  # the options a subscription's owner sets, reported as fields
write = log.write
entries_of = log.entries_of
resource = log.resource


def snapshot(subscription: Subscription) -> dict[str, object]:
    """The reported fields of ``subscription`` as loaded now (before a change)."""
    return subscription_fields(subscription, _OPTIONS)


def _target(subscription: Subscription) -> Target:
    return Target(TargetKind.SUBSCRIPTION, subscription.id)


def subscription_created(session: Session, subscription: Subscription, actor: Actor) -> None:
    """The entry of a new subscription: every field it was made with (its secret redacted)."""
    write(session, subscription.account_id, actor, Action.SUBSCRIPTION_CREATED,
          _target(subscription), created(snapshot(subscription)), at=subscription.created_at)


def subscription_changed(session: Session, subscription: Subscription,
                         before: dict[str, object], action: Action, actor: Actor,
                         *, at: dt.datetime | None = None) -> bool:
    """The entry of a change of ``subscription`` from ``before`` to its state as stored now
    (it is refreshed first); nothing when no reported field changed. True if written."""
    session.refresh(subscription)
    changes = changes_between(before, snapshot(subscription))
    if not changes:
        return False
    write(session, subscription.account_id, actor, action, _target(subscription), changes, at=at)
    return True
