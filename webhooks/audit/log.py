"""Write an audit entry in the caller's transaction; read an account's entries.

:func:`write` is one INSERT on the caller's session or connection and never commits:
the entry commits with the change it records, or rolls back with it. Callers write
only when something changed (:func:`~webhooks.audit.entries.changes_between` not
empty, a transition that returned True), so there is no entry without its change.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Select, insert, select

from webhooks.audit.entries import Action, Actor, Target
from webhooks.storage.models import AuditEntry, new_id, utcnow

__all__ = ["write", "entries_of", "resource"]

_entries = AuditEntry.__table__


def write(executor, account_id: str, actor: Actor, action: Action, target: Target,
          changes: dict, *, at: dt.datetime | None = None) -> str:
    """Add one entry of ``account_id``'s log (``executor``: a Session or a Connection, in the
    transaction of the change); returns its id. ``changes`` are already redacted."""
    entry_id = new_id()
    executor.execute(insert(_entries).values(
        id=entry_id, account_id=account_id, created_at=at or utcnow(),
        actor_kind=actor.kind.value, actor_id=actor.id, action=Action(action).value,
        target_kind=target.kind.value, target_id=target.id, changes=changes))
    return entry_id


def entries_of(account_id: str, *, action: str | None = None, target_id: str | None = None,
               since: dt.datetime | None = None, until: dt.datetime | None = None) -> Select:
    """The statement of the account's entries that match the filters (``since`` included,
    ``until`` excluded), unordered: a keyset page orders it newest first."""
    statement = select(AuditEntry).where(AuditEntry.account_id == account_id)
    if action is not None:
        statement = statement.where(AuditEntry.action == action)
    if target_id is not None:
        statement = statement.where(AuditEntry.target_id == target_id)
    if since is not None:
        statement = statement.where(AuditEntry.created_at >= since)
    if until is not None:
        statement = statement.where(AuditEntry.created_at < until)
    return statement


def resource(entry: AuditEntry) -> dict:
    """An entry as the API answers it and the Activity page lists it (CONTRACT 10.5)."""
    return {"id": entry.id, "at": entry.created_at,
            "actor": {"kind": entry.actor_kind, "id": entry.actor_id},
            "action": entry.action,
            "target": {"kind": entry.target_kind, "id": entry.target_id},
            "changes": entry.changes}
