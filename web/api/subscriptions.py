"""``/api/webhooks/subscriptions``: register endpoints, change them, test, resume, rotate.

Every query is scoped to the calling account and skips deleted
subscriptions, so another account's id, a deleted one and one that never
existed all answer the same 404.
"""

from __future__ import annotations

from flask import Blueprint, Response, url_for
from sqlalchemy import select

from webhooks import queue, store
from webhooks.accounts import new_signing_secret
from webhooks.emit import send_test
from webhooks.models import Subscription, utcnow

from ..apidoc import documented
from ..auth import authenticate, current_account_id
from ..errors import ApiError
from ..pagination import keyset_page
from ..params import canonical_id, load_body, load_query, require_known_event_types
from ..ratelimit import check_send_test
from ..responses import json_response
from ..schemas import (
    SubscriptionCreateSchema,
    SubscriptionListSchema,
    SubscriptionQuerySchema,
    SubscriptionSchema,
    SubscriptionUpdateSchema,
    SubscriptionWithSecretSchema,
    TestSentSchema,
)
from ..targets import check_target_allowed, url_to_store
from ..transaction import after_commit, db_session
from .prefix import API_PREFIX

__all__ = ["bp"]

bp = Blueprint("subscriptions", __name__, url_prefix=f"{API_PREFIX}/subscriptions")
bp.before_request(authenticate)

_PUBLIC = SubscriptionSchema()
_WITH_SECRET = SubscriptionWithSecretSchema()
_LIST = SubscriptionListSchema()
_TEST_SENT = TestSentSchema()

_EVENT_TYPE_ERROR = {400: "`unknown_event_type`: event_types names a type not in the catalogue; "
                          "`target_not_allowed`: the url's host is local or not public"}


def _own(subscription_id: str) -> Subscription:
    """The caller's live subscription with this id, or 404."""
    found = None
    canonical = canonical_id(subscription_id)
    if canonical is not None:
        found = db_session().scalars(
            select(Subscription).where(
                Subscription.id == canonical,
                Subscription.account_id == current_account_id(),
                Subscription.deleted_at.is_(None),
            )
        ).first()
    if found is None:
        raise ApiError(404, "not_found", "Subscription not found.")
    return found


@bp.post("")
@documented(
    "Create a subscription",
    description="Registers an endpoint. Without `event_types` (or with null) it receives "
    "every event type. The answer holds the signing secret. Deleted subscriptions do not "
    "count toward the account's limit.",
    body=SubscriptionCreateSchema,
    responses={201: ("The new subscription, with its secret", SubscriptionWithSecretSchema)},
    errors={**_EVENT_TYPE_ERROR,
            409: "`subscription_limit`: the account already has WEBHOOKS_MAX_SUBSCRIPTIONS "
                 "(by default 100) subscriptions; delete one first"},
)
def create() -> Response:
    body = load_body(SubscriptionCreateSchema())
    require_known_event_types(body["event_types"])
    check_target_allowed(body["url"])
    subscription = store.create_subscription(
        db_session(),
        current_account_id(),
        body["url"],
        event_types=body["event_types"],
        description=body["description"],
        now=utcnow(),
    )
    location = url_for(".get", subscription_id=subscription.id)
    return json_response(_WITH_SECRET, subscription, 201, {"Location": location})


@bp.get("")
@documented(
    "List subscriptions",
    description="The caller's subscriptions, newest first by (created_at, id), without their "
    "secrets. Pass `next_cursor` as `cursor` for the next page; it is null on the last page.",
    query=SubscriptionQuerySchema,
    responses={200: ("A page of subscriptions", SubscriptionListSchema)},
    errors={400: "`invalid_cursor`: the cursor is not one this API gave out"},
)
def list_all() -> Response:
    query = load_query(SubscriptionQuerySchema())
    statement = select(Subscription).where(
        Subscription.account_id == current_account_id(),
        Subscription.deleted_at.is_(None),
    )
    page, next_cursor = keyset_page(
        db_session(), statement, Subscription, query.get("cursor"), query["limit"]
    )
    return json_response(_LIST, {"data": page, "next_cursor": next_cursor})


@bp.get("/<subscription_id>")
@documented(
    "Get a subscription",
    responses={200: ("The subscription, with its secret", SubscriptionWithSecretSchema)},
)
def get(subscription_id: str) -> Response:
    return json_response(_WITH_SECRET, _own(subscription_id))


@bp.patch("/<subscription_id>")
@documented(
    "Change a subscription",
    description="Changes the fields given (`url`, `event_types`, `description`); "
    "the others stay. `event_types: null` means every type; `description: null` clears it.",
    body=SubscriptionUpdateSchema,
    responses={200: ("The changed subscription", SubscriptionSchema)},
    errors=_EVENT_TYPE_ERROR,
)
def update(subscription_id: str) -> Response:
    subscription = _own(subscription_id)
    body = load_body(SubscriptionUpdateSchema())
    if "event_types" in body:
        require_known_event_types(body["event_types"])
        subscription.event_types = body["event_types"]
    if "url" in body:
        check_target_allowed(body["url"])
        subscription.url = url_to_store(body["url"], subscription.url)
    if "description" in body:
        subscription.description = body["description"]
    db_session().flush()
    return json_response(_PUBLIC, subscription)


@bp.delete("/<subscription_id>")
@documented(
    "Delete a subscription",
    description="No further attempts are made to it; its waiting deliveries end `failed`. "
    "Its delivery history stays readable.",
    responses={204: ("Deleted", None)},
)
def delete(subscription_id: str) -> Response:
    subscription = _own(subscription_id)
    store.delete_subscription(db_session(), subscription.id, utcnow())
    return Response(status=204)


@bp.post("/<subscription_id>/rotate-secret")
@documented(
    "Rotate the signing secret",
    description="Replaces the secret at once: the next attempt is signed with the new one.",
    responses={200: ("The subscription, with its new secret", SubscriptionWithSecretSchema)},
)
def rotate_secret(subscription_id: str) -> Response:
    subscription = _own(subscription_id)
    subscription.secret = new_signing_secret()
    db_session().flush()
    return json_response(_WITH_SECRET, subscription)


@bp.post("/<subscription_id>/test")
@documented(
    "Send a test event",
    description="Emits a `test.ping` event to this subscription only, even while it is paused. "
    "At most WEBHOOKS_TEST_RATE_LIMIT (by default 5 in any 5 seconds) per subscription.",
    responses={202: ("The test event and its delivery", TestSentSchema)},
    errors={429: "`rate_limited`: this subscription's test events are over their limit; "
                 "`Retry-After` says when to try again"},
)
def send_test_event(subscription_id: str) -> Response:
    subscription = _own(subscription_id)
    check_send_test(subscription.account_id, subscription.id)
    # send_test publishes when the request's transaction commits.
    emitted = send_test(db_session(), subscription)
    sent = {"event_id": emitted.id, "delivery_id": emitted.delivery_ids[0]}
    return json_response(_TEST_SENT, sent, 202)


@bp.post("/<subscription_id>/resume")
@documented(
    "Resume a subscription",
    description="Sets it active with its failure counter at 0; its held (`paused`) "
    "deliveries become pending and go out at once. Resuming an active one only resets "
    "the counter.",
    responses={200: ("The resumed subscription", SubscriptionSchema)},
)
def resume(subscription_id: str) -> Response:
    subscription = _own(subscription_id)
    session = db_session()
    store.resume_subscription(session, subscription.id, utcnow())
    session.refresh(subscription)
    # The released deliveries are parked and due: one sweep sends them all.
    after_commit(lambda: queue.request_sweep())
    return json_response(_PUBLIC, subscription)
