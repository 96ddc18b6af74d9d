"""Opening a portal link (CONTRACT 9.3): ``GET /dashboard/portal/<token>``.

The first open spends the link (webhooks/services/portal_links.py) and signs this
browser in to the link's account until the link's ``expires_at``, read-only
if the link is, then redirects to the overview (the token leaves the address
bar). A HEAD request spends nothing. Every answer may be framed by the allowed
origins (WEBHOOKS_PORTAL_FRAME_ANCESTORS), so an embedding page shows it.

Two rules keep a link from being turned against the browser that opens it
(issue 36, findings 4 and 5):

- A browser signed in to another account is asked first, and the link is not
  spent until it says yes: otherwise any page could open an attacker's link in
  a victim's browser (login CSRF), who would then work in the attacker's
  account unawares. The yes is a POST to the same address with the form's CSRF
  token, which no other site can send. A browser signed in to the link's own
  account, or to none, is signed in at once, as before.
- An unknown, used or expired link answers 410 with a page that says so and
  changes nothing: the session the browser holds stays (any page could
  otherwise end it with a made-up link: logout CSRF).
"""

from __future__ import annotations

import logging

from flask import Response, redirect, render_template, request, url_for

from webhooks.services.portal_links import OpenedLink, consume_link, find_link
from webhooks.storage.models import Account, utcnow

from ..transaction import db_session
from .blueprint import allow_portal_framing, bp, current_account, start_session

log = logging.getLogger("web.dashboard")


def _spent_link_page():
    """410: the link was used, has expired or never was; the browser's session is untouched."""
    log.info("portal link refused: unknown, used or expired")  # never the token
    return render_template("dashboard/link_spent.html"), 410


@bp.get("/portal/<token>")
def open_portal_link(token: str):
    allow_portal_framing()
    if request.method == "HEAD":
        # A link checker or a preview asking about the URL must not spend it.
        return Response(status=200, mimetype="text/html")
    signed_in = current_account()
    if signed_in is not None:
        waiting = find_link(db_session(), token, utcnow())
        if waiting is None:
            return _spent_link_page()
        if waiting.account_id != signed_in.id:
            return _ask_before_switching(token, waiting)
    return _sign_in_with(token)


@bp.post("/portal/<token>")
def switch_to_portal_link(token: str):
    """The question's yes: spend the link and replace the browser's session (CSRF-checked)."""
    allow_portal_framing()
    return _sign_in_with(token)


def _ask_before_switching(token: str, waiting: OpenedLink):
    """The page that asks a browser signed in to another account before the link replaces
    its session; spends nothing."""
    account = db_session().get(Account, waiting.account_id)
    if account is None:
        return _spent_link_page()
    log.info("portal link waits for the browser's yes: it is signed in to another account",
             extra={"account_id": waiting.account_id})
    return render_template("dashboard/portal_switch.html", token=token, link_account=account,
                           read_only=waiting.read_only)


def _sign_in_with(token: str):
    opened = consume_link(db_session(), token, utcnow())
    account = db_session().get(Account, opened.account_id) if opened is not None else None
    if account is None:
        return _spent_link_page()
    start_session(account, expires_at=opened.expires_at, read_only=opened.read_only,
                  portal_link=True)
    log.info("dashboard portal sign-in",
             extra={"account_id": account.id, "read_only": opened.read_only})
    return redirect(url_for("dashboard.index"))
