"""The dashboard blueprint: sign-in state, CSRF, HTML errors, security headers.

Sign-in keeps the account's id and a session token in Flask's signed session
cookie (never the API key); the session itself is a row on the server
(sessions.py), so signing out ends it for every copy of the cookie. Every
request checks that row and loads the account again, so a page always
belongs to one account and every query is scoped to it. Every POST must
carry the form's CSRF token (Flask-WTF), checked here before any view runs;
the JSON API elsewhere in the app uses Bearer keys and is not affected.
A portal link (portal.py, views_portal.py) starts a session that ends at the
link's expiry and may be read-only: a read-only session is refused every
state-changing request (403) here, before CSRF or any view.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
from urllib.parse import urlsplit

from flask import (
    Blueprint,
    Response,
    current_app,
    flash,
    g,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask_limiter import RateLimitExceeded
from flask_wtf.csrf import CSRFError, CSRFProtect
from werkzeug.exceptions import HTTPException

from webhooks.config.redaction import mask_url_passwords
from webhooks.services.audit import Actor
from webhooks.storage.models import Account, utcnow

from ..errors import rate_limit_exceeded
from ..transaction import db_session
from . import portal, sessions
from .plain_http import plain_http_advice
from .secrets_shown import view_shows_secrets
from .url_breaks import breakable_url

__all__ = ["bp", "csrf", "current_account", "current_actor", "signed_in_account_id", "start_session",
           "end_session", "is_read_only", "allow_portal_framing", "safe_next",
           "PUBLIC_ENDPOINTS"]

log = logging.getLogger("web.dashboard")

bp = Blueprint("dashboard", __name__, url_prefix="/dashboard")
csrf = CSRFProtect()

_ACCOUNT_KEY = "account_id"
_TOKEN_KEY = "session"  # the token of the session's row (sessions.py)
# Endpoints that answer without a signed-in account.
PUBLIC_ENDPOINTS = {"dashboard.index", "dashboard.sign_in", "dashboard.sign_out",
                    "dashboard.open_portal_link", "dashboard.switch_to_portal_link"}

_SECURITY_HEADERS = {
    # The pages are forms that act: never framed (clickjacking), no script at all; a portal
    # session's pages may be framed by WEBHOOKS_PORTAL_FRAME_ANCESTORS only (_framing_headers).
    "Content-Security-Policy": portal.content_security_policy(()),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    # Pages can show a signing secret: keep them out of every cache.
    "Cache-Control": "no-store",
}


def current_account() -> Account | None:
    """The signed-in account of this request, or None."""
    return g.get("dashboard_account")


def current_actor() -> Actor:
    """Who makes this request's changes, for the audit log: this dashboard session, or the
    portal link's session (kind ``portal``), named by a reference to its stored digest."""
    live = _live_session()
    return Actor.session(live.id, portal=bool(session.get(portal.PORTAL_KEY)))


def signed_in_account_id() -> str | None:
    """The account of this request's live session (checked on the server), or None.

    The rate limiter counts a dashboard request against this account: a cookie of a session
    that ended (signed out, expired, a spent portal link's) names an account too, but counts
    against the client's address, never against the account's own people.
    """
    live = _live_session()
    return live.account_id if live is not None else None


def start_session(account: Account, *, expires_at: dt.datetime | None = None,
                  read_only: bool = False, portal_link: bool = False) -> None:
    """Start a fresh session for ``account`` (the old one, CSRF token included, is dropped),
    stored on the server until ``expires_at`` (default: PERMANENT_SESSION_LIFETIME from now).

    ``portal_link``: opened by a portal link (its pages may be framed, portal.py); ``read_only``:
    the session may look but not act.
    """
    sessions.close_session(db_session(), session.get(_TOKEN_KEY))
    now = utcnow()
    lifetime = (current_app.permanent_session_lifetime if expires_at is None
                else expires_at - now)
    token = sessions.open_session(db_session(), account.id, now, lifetime, read_only=read_only)
    session.clear()
    session[_ACCOUNT_KEY] = account.id
    session[_TOKEN_KEY] = token
    if portal_link:
        session[portal.PORTAL_KEY] = True
    # The cookie expires with the row (portal.py), rounded up to a whole second: a browser
    # keeps it no longer than the server honours it (the server checks the row regardless).
    session[portal.ENDS_AT_KEY] = math.ceil((now + lifetime).timestamp())
    session.permanent = True


def end_session() -> None:
    """End the session on the server (every copy of the cookie) and clear this cookie."""
    sessions.close_session(db_session(), session.get(_TOKEN_KEY))
    session.clear()
    g.dashboard_live_session = g.dashboard_account = None  # the rest of this request too


def is_read_only() -> bool:
    """True when this request's session may look but not act (a read-only portal link)."""
    live = _live_session()
    return live is not None and live.read_only


def allow_portal_framing() -> None:
    """Let this answer be framed by WEBHOOKS_PORTAL_FRAME_ANCESTORS (a portal link's own pages)."""
    g.portal_framing = True


def safe_next(target: str | None) -> str:
    """``target`` if it is a dashboard path on this site, else the overview (no open redirect)."""
    default = url_for("dashboard.index")
    if not target:
        return default
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not parts.path.startswith("/dashboard/"):
        return default
    if "\\" in target or target.startswith("//"):
        return default
    if any(ord(character) < 32 or ord(character) == 127 for character in target):
        # CR/LF would split the Location header (Werkzeug refuses it: a 500); a path never
        # holds a control character unencoded.
        return default
    return target


def _live_session():
    """This request's session row if it is live and names the cookie's account (once a request)."""
    if "dashboard_live_session" not in g:
        account_id = session.get(_ACCOUNT_KEY)
        live = None
        if isinstance(account_id, str):
            live = sessions.live_session(db_session(), session.get(_TOKEN_KEY), utcnow())
            if live is not None and live.account_id != account_id:
                live = None
        g.dashboard_live_session = live
    return g.dashboard_live_session


@bp.before_request
def _refuse_changes_when_read_only():
    # First of the hooks: a read-only session is refused whatever the form holds (even
    # without a CSRF token), on every route with a state-changing method, present or future,
    # and on every page that shows secrets (secrets_shown.py), whatever its method.
    if not is_read_only():
        return None
    if portal.refused_when_read_only(request.method, request.endpoint):
        message = "This session can look at every page but cannot change anything."
    elif view_shows_secrets(request.endpoint):
        message = ("This page shows secrets (signing secrets, header values), which a "
                   "read-only session is never shown.")
    else:
        return None
    # Never the path: it may hold a portal link's token.
    log.info("read-only dashboard session refused %s %s", request.method, request.endpoint)
    g.dashboard_account = _signed_in_account()  # the page's header shows who is signed in
    return _error_page(403, "Read-only session", message)


@bp.before_request
def _check_csrf() -> None:
    # Raises CSRFError (400) for a POST without a valid token for this session.
    csrf.protect()


def _signed_in_account() -> Account | None:
    """The account of this request's session if the session is live on the server."""
    live = _live_session()
    if live is None:
        return None  # signed out, expired, or a cookie from before sessions were stored
    return db_session().get(Account, live.account_id)


@bp.before_request
def _load_account():
    account = _signed_in_account()
    if account is None and session.get(_ACCOUNT_KEY) is not None:
        was_portal = bool(session.get(portal.PORTAL_KEY))
        session.clear()  # the session ended, or the account is gone
        if was_portal:
            # Its next pages (sign-in) stay framable by the allowed origins: the frame shows
            # why, not a blocked page.
            session[portal.PORTAL_KEY] = True
            flash("Your session has ended. Ask for a new link to continue.", "info")
    g.dashboard_account = account
    if account is None and request.endpoint not in PUBLIC_ENDPOINTS:
        if request.method == "GET":
            return redirect(url_for("dashboard.sign_in", next=request.full_path.rstrip("?")))
        flash("Sign in to continue.", "error")
        return redirect(url_for("dashboard.sign_in"))
    return None


def _framing_headers() -> dict[str, str]:
    """The security headers of this answer: framable by the allowed origins on a portal
    session's pages (and a portal link's own), else never."""
    ancestors = portal.frame_ancestors()
    if not ancestors or not (g.get("portal_framing") or session.get(portal.PORTAL_KEY)):
        return _SECURITY_HEADERS
    headers = {name: value for name, value in _SECURITY_HEADERS.items()
               if name != "X-Frame-Options"}  # XFO cannot name several origins; CSP does
    headers["Content-Security-Policy"] = portal.content_security_policy(ancestors)
    return headers


@bp.after_request
def _security_headers(response: Response) -> Response:
    for name, value in _framing_headers().items():
        response.headers.setdefault(name, value)
    return response


@bp.app_template_global("read_only_session")
def _read_only_session() -> bool:
    """Templates hide every action (button, form, link to a form) when this is true."""
    return g.get("dashboard_account") is not None and is_read_only()


@bp.app_template_filter("when")
def _when(value: dt.datetime | None) -> str:
    """A timestamp as people read it, always in UTC."""
    if value is None:
        return "—"
    return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


@bp.app_template_filter("masked_url")
def _masked_url(url: str | None) -> str:
    """A subscription URL as pages show it: ``https://user:***@host/path`` (never its password)."""
    return mask_url_passwords(url or "")


@bp.app_template_filter("breakable_url")
def _breakable_url(url: str | None):
    """A URL (already masked) that wraps at its slashes and dots, never mid-word (url_breaks.py)."""
    return breakable_url(url)


@bp.app_template_filter("pretty_json")
def _pretty_json(body: bytes | None) -> str:
    if not body:
        return ""
    try:
        return json.dumps(json.loads(body), indent=2, ensure_ascii=False)
    except ValueError:
        return body.decode("utf-8", "replace")


def _error_page(status: int, title: str, message: str, advice: str | None = None) -> Response:
    return Response(
        render_template("dashboard/error.html", status=status, title=title, message=message,
                        advice=advice),
        status=status,
        mimetype="text/html",
    )


@bp.errorhandler(CSRFError)
def _csrf_error(error: CSRFError):
    log.info("dashboard form refused: %s", error.description)
    return _error_page(
        400,
        "The form could not be accepted",
        "It was missing its security token, or the token has expired. Go back, reload the "
        "page and try again.",
        # Over plain http with Secure cookies, reloading never helps: say why (plain_http.py).
        plain_http_advice(),
    )


@bp.errorhandler(RateLimitExceeded)
def _rate_limited(error: RateLimitExceeded):
    answer = rate_limit_exceeded(error)
    page = _error_page(429, "Too many requests", answer.message)
    page.headers["Retry-After"] = answer.headers["Retry-After"]
    return page


@bp.errorhandler(HTTPException)
def _http_error(error: HTTPException):
    status = error.code or 500
    if status == 404:
        return _error_page(404, "Not found", "There is nothing here, or it belongs to another account.")
    if status == 405:
        return _error_page(405, "Not allowed", "This page cannot be used that way.")
    if status >= 500:
        return _unexpected(error)
    return _error_page(status, error.name, error.description or error.name)


@bp.errorhandler(Exception)
def _unexpected(error: BaseException):
    log.error("unhandled error in a dashboard request", exc_info=error)
    return _error_page(500, "Something went wrong", "The page could not be shown. Try again later.")
