"""The publisher API (CONTRACT 10.7): accounts and their events over HTTP, with a
publisher key (``Authorization: Bearer whpub_…``), from any language.

Thin routes: the account rules are services/accounts.py's, the event rules
``emit_event``'s and ``emit_events``' themselves (services/events.py), so a rule
is never written twice and an event sent here is stored exactly as one
emitted from Python. Each refusal of an event is a 400 whose message is the
one ``emit_event`` raised. The event routes take bodies of up to 256 KiB
(WEBHOOKS_MAX_PAYLOAD_BYTES); the others keep the API's 64 KiB.

The key check and the rate limit (WEBHOOKS_PUBLISHER_RATE_LIMIT per key) run
before every route; neither needs the database in the usual case
(services/publishers.py), and the event routes open no request transaction:
each event is committed in emit_event's own, shared with concurrent requests.
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from webhooks.config import get_settings
from webhooks.errors import InvalidEvent
from webhooks.services import accounts
from webhooks.services.audit import Actor
from webhooks.services.events import emit_many, emit_one
from webhooks.storage.models import Account

from ..apidoc import PUBLISHER_SECURITY, documented
from ..auth import authenticate_publisher, current_publisher_id
from ..body_limit import accepts_body_up_to
from ..errors import ApiError
from ..pagination import keyset_page
from ..params import canonical_id, json_object, load_body, load_query
from ..ratelimit import check_publisher
from ..responses import json_response
from ..schemas import (AccountCreatedSchema, AccountCreateSchema, AccountKeySchema,
                       AccountListSchema, AccountQuerySchema, AccountSchema, EventAcceptedSchema,
                       EventBatchAcceptedSchema, EventBatchSchema, EventInSchema)
from ..transaction import db_session
from .prefix import API_PREFIX

__all__ = ["bp", "BATCH_LIMIT"]

bp = Blueprint("publisher", __name__, url_prefix=f"{API_PREFIX}/accounts")

BATCH_LIMIT = 100  # events in one batch request

_CREATED, _ACCOUNT, _LIST, _KEY = (AccountCreatedSchema(), AccountSchema(), AccountListSchema(),
                                   AccountKeySchema())


@bp.before_request
def _publisher_only() -> None:
    authenticate_publisher()
    check_publisher(current_publisher_id())


def _event_body_limit() -> int:
    # The data may be as large as emit_event takes, with room for the other fields.
    return get_settings().max_payload_bytes


def _actor() -> Actor:
    """The audit log's actor of this request: its publisher key (by id)."""
    return Actor.publisher(current_publisher_id())


def _account(account_id: str) -> Account:
    """The live account ``account_id`` names, or 404."""
    canonical = canonical_id(account_id)
    found = accounts.live_account(db_session(), canonical) if canonical else None
    if found is None:
        raise ApiError(404, "not_found", "No such account.")
    return found


def _refused(error: InvalidEvent) -> ApiError:
    """emit_event's refusal, its message as it raised it."""
    return ApiError(400, "validation_error", str(error))


def _event_account_id(account_id: str) -> str:
    canonical = canonical_id(account_id)
    if canonical is None:
        raise ApiError(404, "not_found", "No such account.")
    return canonical


@bp.post("")
@documented(
    security=PUBLISHER_SECURITY,
    summary="Create an account",
    description="A new account (a customer of the product) and its API key, which is shown "
    "only in this answer. Needs a publisher key.",
    body=AccountCreateSchema,
    responses={201: ("The account, with its API key", AccountCreatedSchema)},
)
def create() -> Response:
    body = load_body(AccountCreateSchema())
    try:
        account, api_key = accounts.create(db_session(), body["name"], actor=_actor())
    except ValueError as exc:
        raise ApiError(400, "validation_error", str(exc)) from None
    return json_response(_CREATED, {"id": account.id, "name": account.name,
                                     "api_key": api_key, "created_at": account.created_at}, 201)


@bp.get("")
@documented(
    security=PUBLISHER_SECURITY,
    summary="List accounts",
    description="Every account, newest first, a page at a time.",
    query=AccountQuerySchema,
    responses={200: ("A page of accounts", AccountListSchema)},
)
def list_all() -> Response:
    query = load_query(AccountQuerySchema())
    page, next_cursor = keyset_page(db_session(), accounts.live_accounts(), Account,
                                    query.get("cursor"), query["limit"])
    return json_response(_LIST, {"data": page, "next_cursor": next_cursor})


@bp.get("/<account_id>")
@documented(
    security=PUBLISHER_SECURITY,
    summary="Get an account",
    responses={200: ("The account, with its subscriptions counted", AccountSchema)},
)
def get(account_id: str) -> Response:
    account = _account(account_id)
    return json_response(_ACCOUNT, {
        "id": account.id, "name": account.name, "created_at": account.created_at,
        "subscriptions": accounts.subscription_count(db_session(), account.id)})


@bp.post("/<account_id>/rotate-key")
@documented(
    security=PUBLISHER_SECURITY,
    summary="Rotate an account's API key",
    description="A new API key, shown only in this answer. The old key stops working at "
    "once, every dashboard session of the account ends and its unopened portal links stop "
    "working (a leaked key could have made them).",
    responses={200: ("The account id and its new API key", AccountKeySchema)},
)
def rotate_key(account_id: str) -> Response:
    account = _account(account_id)
    api_key = accounts.rotate_key(db_session(), account, actor=_actor())
    return json_response(_KEY, {"id": account.id, "api_key": api_key})


@bp.delete("/<account_id>")
@documented(
    security=PUBLISHER_SECURITY,
    summary="Delete an account",
    description="The account is gone at once for every route and its subscriptions stop "
    "(no further attempt); its data is deleted, in batches, within the next retention run.",
    responses={204: ("Deleted", None)},
)
def delete(account_id: str) -> Response:
    accounts.delete_account(db_session(), _account(account_id), actor=_actor())
    return Response(status=204)


@bp.post("/<account_id>/events")
@accepts_body_up_to(_event_body_limit)
@documented(
    security=PUBLISHER_SECURITY,
    summary="Emit an event",
    description="Exactly `emit_event`: the same checks (each refusal a 400 whose message is "
    "emit_event's), the same rows, messages and deliveries. The 202 means the event and its "
    "deliveries are committed and their messages were accepted by the broker or parked for "
    "the sweep: they will be attempted. A repeated `idempotency_key` answers 200 with the "
    "first event's id and `deliveries: 0`. Bodies up to 256 KiB.",
    body=EventInSchema,
    responses={202: ("Stored; its deliveries will be attempted", EventAcceptedSchema),
               200: ("The idempotency key was used before: the first event", EventAcceptedSchema)},
)
def emit(account_id: str) -> Response:
    account_id = _event_account_id(account_id)
    body = json_object()
    try:
        emitted = emit_one(account_id, body)
    except InvalidEvent as exc:
        raise _refused(exc) from None
    response = jsonify(event_id=emitted.id,
                       deliveries=0 if emitted.duplicate else len(emitted.delivery_ids))
    response.status_code = 200 if emitted.duplicate else 202
    return response


@bp.post("/<account_id>/events/batch")
@accepts_body_up_to(_event_body_limit)
@documented(
    security=PUBLISHER_SECURITY,
    summary="Emit a batch of events",
    description="Exactly `emit_events`: 1 to 100 events, all checked before anything is "
    "stored (a bad one refuses the whole batch with a 400 naming its index), stored "
    "together; their ids in the order given (a repeated idempotency key gives the first "
    "event's id). Bodies up to 256 KiB.",
    body=EventBatchSchema,
    responses={202: ("Stored; their deliveries will be attempted", EventBatchAcceptedSchema)},
)
def emit_batch(account_id: str) -> Response:
    account_id = _event_account_id(account_id)
    events = json_object().get("events")
    if not isinstance(events, list) or not 0 < len(events) <= BATCH_LIMIT:
        raise ApiError(400, "validation_error",
                       f"events must be a list of 1 to {BATCH_LIMIT} events.")
    try:
        ids = emit_many(account_id, events)
    except InvalidEvent as exc:
        raise _refused(exc) from None
    response = jsonify(event_ids=ids)
    response.status_code = 202
    return response
