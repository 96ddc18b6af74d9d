"""``/api/webhooks/deliveries``: the delivery log, one delivery with its attempts, replay.

Deliveries of a deleted subscription stay listed and readable: they are
history. Every query is scoped to the calling account.
"""

from __future__ import annotations

from flask import Blueprint, Response, url_for

from webhooks.services import reads
from webhooks.services import replay as replay_service
from webhooks.storage.models import Attempt, Delivery

from ..apidoc import documented
from ..auth import authenticate, current_account_id, current_actor
from ..delivery_list import DeliveryFilters, delivery_page
from ..errors import ApiError
from ..params import load_query
from ..responses import json_response
from ..schemas import DeliveryListSchema, DeliveryQuerySchema, DeliverySchema, delivery_resource
from ..transaction import db_session, read_snapshot
from .prefix import API_PREFIX

__all__ = ["bp"]

bp = Blueprint("deliveries", __name__, url_prefix=f"{API_PREFIX}/deliveries")
bp.before_request(authenticate)

_ONE = DeliverySchema()
_PAGE = DeliveryListSchema()


def _attempts_of(deliveries: list[Delivery]) -> dict[str, list[Attempt]]:
    """The attempts of these deliveries, in one query, by delivery id."""
    return reads.attempts_by_delivery(db_session(), deliveries)


def _own(delivery_id: str) -> Delivery:
    """The caller's delivery with this id, or 404."""
    found = reads.owned_delivery(db_session(), current_account_id(), delivery_id)
    if found is None:
        raise ApiError(404, "not_found", "Delivery not found.")
    return found


@bp.get("")
@documented(
    "List deliveries",
    description="Newest first, ordered by (created_at, id). Pass `next_cursor` as `cursor` "
    "for the next page; it is null on the last page. Filters combine with AND.",
    query=DeliveryQuerySchema,
    responses={200: ("A page of deliveries", DeliveryListSchema)},
    errors={400: "`invalid_cursor`: the cursor is not one this API gave out"},
)
def list_page() -> Response:
    query = load_query(DeliveryQuerySchema())
    read_snapshot()  # the page and its attempts as of one moment
    filters = DeliveryFilters(
        status=query.get("status"),
        event_type=query.get("event_type"),
        subscription_id=str(query["subscription_id"]) if "subscription_id" in query else None,
        event_id=str(query["event_id"]) if "event_id" in query else None,
        cursor=query.get("cursor"),
        error_kind=query.get("error_kind"),
    )
    page, next_cursor = delivery_page(db_session(), current_account_id(), filters, query["limit"])
    attempts = _attempts_of(page)
    return json_response(
        _PAGE,
        {
            "data": [delivery_resource(d, attempts[d.id]) for d in page],
            "next_cursor": next_cursor,
        },
    )


@bp.get("/<delivery_id>")
@documented("Get a delivery", responses={200: ("The delivery with its attempts", DeliverySchema)})
def get(delivery_id: str) -> Response:
    read_snapshot()  # the row and its attempts as of one moment
    delivery = _own(delivery_id)
    attempts = _attempts_of([delivery])[delivery.id]
    return json_response(_ONE, delivery_resource(delivery, attempts))


@bp.post("/<delivery_id>/replay")
@documented(
    "Replay a delivery",
    description="A new delivery of the same event to the same subscription (attempts from 1, "
    "`replay_of` set); the original stays as it was. Only a `failed` or `dead` delivery can "
    "be replayed, and only once: a delivery replayed before (here, from the dashboard or by "
    "`recover`) answers 409 `already_replayed`, whose message names the earlier replay's id. "
    "While the subscription is paused the replay waits as `paused`.",
    responses={202: ("The new delivery", DeliverySchema)},
    headers={202: {"Location": "the new delivery's path, `/api/webhooks/deliveries/{id}`"}},
    errors={409: "`not_replayable`: the delivery is not failed or dead, "
                 "or its subscription was deleted; `already_replayed`: it was replayed before"},
)
def replay(delivery_id: str) -> Response:
    original = _own(delivery_id)
    # Conflict (409 not_replayable, naming the public status) unless failed or dead.
    # Published after commit.
    replayed = replay_service.replay(db_session(), original, actor=current_actor())
    location = url_for(".get", delivery_id=replayed.id)
    return json_response(_ONE, delivery_resource(replayed, []), 202, {"Location": location})
