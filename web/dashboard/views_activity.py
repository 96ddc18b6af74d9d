"""The Activity page: the account's audit log, newest first (CONTRACT 10.5).

The same entries as ``GET /api/webhooks/audit-log``, read through the same use case,
filtered by action. Entries hold no secret (their changes are redacted when written),
so a read-only portal session sees this page whole. It only reads: nothing here, nor
anywhere, changes an entry.
"""

from __future__ import annotations

from flask import render_template, request

from webhooks.services import audit

from ..errors import ApiError
from ..pagination import keyset_page
from ..transaction import db_session
from .blueprint import bp, current_account

PAGE_SIZE = 50


def _page(account_id: str, action: str | None, cursor: str | None):
    statement = audit.entries_of(account_id, action=action)
    return keyset_page(db_session(), statement, audit.AuditEntry, cursor, PAGE_SIZE)


@bp.get("/activity")
def activity():
    account_id = current_account().id
    action = request.args.get("action") or None
    if action not in audit.ACTIONS:
        action = None  # a value that names no action is dropped, as the other lists do
    cursor = request.args.get("cursor") or None
    try:
        rows, next_cursor = _page(account_id, action, cursor)
    except ApiError:  # a cursor that is not ours: start from the newest again
        cursor = None
        rows, next_cursor = _page(account_id, action, None)
    return render_template(
        "dashboard/activity.html",
        entries=[audit.resource(row) for row in rows],
        actions=audit.ACTIONS,
        action=action,
        next_cursor=next_cursor,
        first_page=cursor is None,
    )
