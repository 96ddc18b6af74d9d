"""Opening a portal link (CONTRACT 9.3): ``GET /dashboard/portal/<token>``.

The first open spends the link (webhooks/services/portal_links.py) and signs this
browser in to the link's account until the link's ``expires_at``, read-only
if the link is, then redirects to the overview (the token leaves the address
bar). Any later open, or an unknown or expired token, answers 410 with a page
that says the link was used or expired, and leaves no session behind: a
session this browser held is ended too, so the page is never shown beside a
signed-in account. A HEAD request spends nothing. Both answers may be framed by the allowed origins
(WEBHOOKS_PORTAL_FRAME_ANCESTORS), so an embedding page shows them.
"""

from __future__ import annotations

import logging

from flask import Response, redirect, render_template, request, url_for

from webhooks.storage.models import Account, utcnow
from webhooks.services.portal_links import consume_link

from ..transaction import db_session
from .blueprint import allow_portal_framing, bp, current_account, end_session, start_session

log = logging.getLogger("web.dashboard")


def _spent_link_page():
    if current_account() is not None:
        end_session()
        # Answers of 400 and up roll the request's transaction back (web/transaction.py):
        # the ended session must stay ended.
        db_session().commit()
    return render_template("dashboard/link_spent.html"), 410


@bp.get("/portal/<token>")
def open_portal_link(token: str):
    allow_portal_framing()
    if request.method == "HEAD":
        # A link checker or a preview asking about the URL must not spend it.
        return Response(status=200, mimetype="text/html")
    opened = consume_link(db_session(), token, utcnow())
    account = db_session().get(Account, opened.account_id) if opened is not None else None
    if account is None:
        log.info("portal link refused: unknown, used or expired")  # never the token
        return _spent_link_page()
    start_session(account, expires_at=opened.expires_at, read_only=opened.read_only,
                  portal_link=True)
    log.info("dashboard portal sign-in",
             extra={"account_id": account.id, "read_only": opened.read_only})
    return redirect(url_for("dashboard.index"))
