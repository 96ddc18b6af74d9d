"""The dashboard blueprint: sign-in state, CSRF, HTML errors, security headers.

Sign-in keeps the account's id and a session token in Flask's signed session
cookie (never the API key); the session itself is a row on the server
(sessions.py), so signing out ends it for every copy of the cookie. Every
request checks that row and loads the account again, so a page always
belongs to one account and every query is scoped to it. Every POST must
carry the form's CSRF token (Flask-WTF), checked here before any view runs;
the JSON API elsewhere in the app uses Bearer keys and is not affected.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
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

from webhooks.logs import mask_url_passwords
from webhooks.models import Account, utcnow

from ..errors import rate_limit_exceeded
from ..transaction import db_session
from . import sessions
from .plain_http import plain_http_advice
from .url_breaks import breakable_url

__all__ = ["bp", "csrf", "current_account", "signed_in_account_id", "start_session",
           "end_session", "safe_next", "PUBLIC_ENDPOINTS"]

log = logging.getLogger("web.dashboard")

bp = Blueprint("dashboard", __name__, url_prefix="/dashboard")
csrf = CSRFProtect()

_ACCOUNT_KEY = "account_id"
_TOKEN_KEY = "session"  # the token of the session's row (sessions.py)
# Endpoints that answer without a signed-in account.
PUBLIC_ENDPOINTS = {"dashboard.index", "dashboard.sign_in", "dashboard.sign_out"}

_SECURITY_HEADERS = {
    # The pages are forms that act: never framed (clickjacking), no script at all.
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    # Pages can show a signing secret: keep them out of every cache.
    "Cache-Control": "no-store",
}


def current_account() -> Account | None:
    """The signed-in account of this request, or None."""
    return g.get("dashboard_account")


def signed_in_account_id() -> str | None:
    """The account id the signed session cookie names (before it is checked against the database)."""
    account_id = session.get(_ACCOUNT_KEY)
    return account_id if isinstance(account_id, str) else None


def start_session(account: Account) -> None:
    """Start a fresh session for ``account`` (the old one, CSRF token included, is dropped),
    stored on the server until PERMANENT_SESSION_LIFETIME from now."""
    sessions.close_session(db_session(), session.get(_TOKEN_KEY))
    token = sessions.open_session(db_session(), account.id, utcnow(),
                                  current_app.permanent_session_lifetime)
    session.clear()
    session[_ACCOUNT_KEY] = account.id
    session[_TOKEN_KEY] = token
    session.permanent = True  # the cookie expires with the row


def end_session() -> None:
    """End the session on the server (every copy of the cookie) and clear this cookie."""
    sessions.close_session(db_session(), session.get(_TOKEN_KEY))
    session.clear()


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


@bp.before_request
def _check_csrf() -> None:
    # Raises CSRFError (400) for a POST without a valid token for this session.
    csrf.protect()


def _signed_in_account() -> Account | None:
    """The account of this request's session if the session is live on the server."""
    account_id = session.get(_ACCOUNT_KEY)
    if not isinstance(account_id, str):
        return None
    live = sessions.live_session(db_session(), session.get(_TOKEN_KEY), utcnow())
    if live is None or live.account_id != account_id:
        return None  # signed out, expired, or a cookie from before sessions were stored
    return db_session().get(Account, account_id)


@bp.before_request
def _load_account():
    account = _signed_in_account()
    if account is None and session.get(_ACCOUNT_KEY) is not None:
        session.clear()  # the session ended, or the account is gone
    g.dashboard_account = account
    if account is None and request.endpoint not in PUBLIC_ENDPOINTS:
        if request.method == "GET":
            return redirect(url_for("dashboard.sign_in", next=request.full_path.rstrip("?")))
        flash("Sign in to continue.", "error")
        return redirect(url_for("dashboard.sign_in"))
    return None


@bp.after_request
def _security_headers(response: Response) -> Response:
    for name, value in _SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response


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
