"""API-key authentication: ``Authorization: Bearer <api_key>`` names the calling account;
on the publisher API, ``Bearer <publisher key>`` names the calling publisher.

Blueprints that need a caller install :func:`authenticate` as their
``before_request``; views then read :func:`current_account_id` and scope
every query with it, so one account can never see or change another's
objects.
"""

from __future__ import annotations

from flask import g, request

from webhooks.services.accounts import account_for_key
from webhooks.services.audit import Actor
from webhooks.services.publishers import PUBLISHER_KEY_PREFIX, verified_publisher_id

from .errors import ApiError
from .transaction import db_session

__all__ = ["authenticate", "current_account_id", "current_actor", "key_account_id", "bearer_key",
           "authenticate_publisher", "current_publisher_id"]

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="webhooks"'}


def _unauthorized(message: str) -> ApiError:
    return ApiError(401, "unauthorized", message, _CHALLENGE)


def bearer_key() -> str:
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
            account = account_for_key(db_session(), bearer_key())
        except ApiError:
            account = None
        g.key_account_id = account.id if account is not None else None
        g.key_actor = Actor.api_key(account.api_key_hash) if account is not None else None
    return g.key_account_id


def authenticate() -> None:
    """Resolve the request's API key to its account, or answer 401 (403 for a publisher
    key: it acts on accounts, not as one)."""
    key = bearer_key()  # a missing or malformed header gets its own message
    account_id = key_account_id()
    if account_id is None:
        if key.startswith(PUBLISHER_KEY_PREFIX) and verified_publisher_id(key) is not None:
            raise ApiError(403, "account_key_required",
                           "This route needs an account's API key; a publisher key acts on "
                           "accounts through /api/webhooks/accounts, not as one.")
        raise _unauthorized("The API key is not valid.")
    g.account_id = account_id


def authenticate_publisher() -> None:
    """Resolve the request's publisher key (CONTRACT 10.7), or answer 401; an account's API
    key answers 403 ``publisher_key_required``. Verified keys are cached per process
    (services/publishers.py), so this usually costs no database query."""
    key = bearer_key()
    publisher_id = verified_publisher_id(key)
    if publisher_id is None:
        if key_account_id() is not None:
            raise ApiError(403, "publisher_key_required",
                           "This route needs a publisher key (webhooks publishers create); an "
                           "account's API key cannot use it.")
        raise _unauthorized("The publisher key is not valid.")
    g.publisher_id = publisher_id


def current_publisher_id() -> str:
    """The id of the publisher that made this request (after :func:`authenticate_publisher`)."""
    return g.publisher_id


def current_account_id() -> str:
    """The id of the account that made this request (after :func:`authenticate`)."""
    return g.account_id


def current_actor() -> Actor:
    """Who makes this request's changes, for the audit log: the API key (named by a
    reference to its SHA-256, never the key), after :func:`authenticate`."""
    return g.key_actor
