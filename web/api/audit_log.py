"""``GET /api/webhooks/audit-log``: the calling account's audit log, newest first (CONTRACT
10.5). Read-only: the blueprint has no other route, so no request changes an entry."""

from __future__ import annotations

from flask import Blueprint, Response

from webhooks.services import audit

from ..apidoc import documented
from ..auth import authenticate, current_account_id
from ..pagination import keyset_page
from ..params import load_query
from ..responses import json_response
from ..schemas.audit import AuditListSchema, AuditQuerySchema
from ..transaction import db_session
from .prefix import API_PREFIX

__all__ = ["bp"]

bp = Blueprint("audit_log", __name__, url_prefix=f"{API_PREFIX}/audit-log")
bp.before_request(authenticate)

_PAGE = AuditListSchema()


@bp.get("")
@documented(
    "List audit log entries",
    description="Who changed what in the caller's account: each subscription created, "
    "changed, deleted, paused (by hand, or by the service: actor `service`) or resumed, "
    "each secret rotation, its activation or cancellation, each replay and recover, each "
    "portal link. Newest first by (at, id); pass `next_cursor` as `cursor` for the next "
    "page. Entries are written with their change and never altered; they are kept "
    "WEBHOOKS_AUDIT_RETENTION_DAYS (365) days.",
    query=AuditQuerySchema,
    responses={200: ("A page of entries", AuditListSchema)},
    errors={400: "`invalid_cursor`: the cursor is not one this API gave out"},
)
def list_page() -> Response:
    query = load_query(AuditQuerySchema())
    statement = audit.entries_of(current_account_id(), action=query.get("action"),
                                 target_id=query.get("target_id"), since=query.get("since"),
                                 until=query.get("until"))
    page, next_cursor = keyset_page(db_session(), statement, audit.AuditEntry,
                                    query.get("cursor"), query["limit"])
    return json_response(_PAGE, {"data": [audit.resource(entry) for entry in page],
                                 "next_cursor": next_cursor})
