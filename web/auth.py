"""API-key authentication: ``Authorization: Bearer <api_key>`` names the calling account.

Blueprints that need a caller install :func:`authenticate` as their
``before_request``; views then read :func:`current_account_id` and scope
every query with it, so one account can never see or change another's
objects.
"""

from __future__ import annotations

from flask import g, request

from webhooks.services.accounts import account_for_key
from webhooks.services.audit import Actor

from .errors import ApiError
from .transaction import db_session

__all__ = ["authenticate", "current_account_id", "current_actor", "key_account_id"]

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="webhooks"'}


def _unauthorized(message: str) -> ApiError:
    return ApiError(401, "unauthorized", message, _CHALLENGE)


def _api_key() -> str:
    """The key of the request's ``Authorization: Bearer`` header; 401 if missing or malformed."""
    header = request.headers.get("Authorization", "").strip()
    if not header:
        raise _unauthorized("An API key is required: send 'Authorization: Bearer <api_key>'.")
    scheme, _, api_key = header.partition(" ")
    api_key = api_key.strip()
    if scheme.lower() != "bearer" or not api_key:
        raise _unauthorized("The Authorization header must have the form 'Bearer <api_key>'.")
    return api_key


def key_account_id() -> str | None:
    """The id of the account whose valid API key this request carries, else None.

    Looked up once per request: the rate limiter (web/ratelimit.py) asks
    before :func:`authenticate` runs, and both get the same answer.
    """
    if "key_account_id" not in g:
        try:
            account = account_for_key(db_session(), _api_key())
        except ApiError:
            account = None
        g.key_account_id = account.id if account is not None else None
        g.key_actor = Actor.api_key(account.api_key_hash) if account is not None else None
    return g.key_account_id


def authenticate() -> None:
    """Resolve the request's API key to its account, or answer 401."""
    _api_key()  # a missing or malformed header gets its own message
    account_id = key_account_id()
    if account_id is None:
        raise _unauthorized("The API key is not valid.")
    g.account_id = account_id


def current_account_id() -> str:
    """The id of the account that made this request (after :func:`authenticate`)."""
    return g.account_id


def current_actor() -> Actor:
    """Who makes this request's changes, for the audit log: the API key (named by a
    reference to its SHA-256, never the key), after :func:`authenticate`."""
    return g.key_actor
