"""Add, list, resume and remove the operational endpoints (``webhooks operational ...``).

A use case of the CLI (services layer): an endpoint is a subscription of the
operator account (operational/operator.py) to some of the four operational
types (operational/catalogue.py), every one if none is named. Its URL
is judged by the rule subscription URLs are (sender/target_urls.py: well-formed http(s),
no private address unless WEBHOOKS_ALLOW_PRIVATE_TARGETS); a refused URL or an
unknown type changes nothing. Each endpoint may have at most
WEBHOOKS_OPERATIONAL_MAX_IN_FLIGHT attempts in flight (its ``max_in_flight``,
set when it is added), so a hanging one holds that many worker threads at most
and customers' deliveries keep flowing.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from webhooks.config import get_settings
from webhooks.errors import NotFound, WebhooksError
from webhooks.lifecycle import changes
from webhooks.operational.catalogue import OPERATIONAL_TYPES, unknown_types
from webhooks.operational.operator import operator_account
from webhooks.reserved import OPERATOR_ACCOUNT_ID
from webhooks.sender.target_urls import target_refusal, url_problem
from webhooks.services import audit
from webhooks.services.audit import Action, Actor, Target, TargetKind, created
from webhooks.services.pausing import resume as resume_subscription
from webhooks.services.subscriptions import owned
from webhooks.states import PUBLIC_STATUSES, SubscriptionStatus, public_status
from webhooks.storage.models import Delivery, Subscription, utcnow

__all__ = ["InvalidEndpoint", "add", "listing", "resume", "remove", "parse_types"]

DESCRIPTION = "operational endpoint"


class InvalidEndpoint(WebhooksError, ValueError):
    """An operational endpoint that cannot be added: the message says why."""


def parse_types(text: str | None) -> list[str]:
    """``--types`` (comma-separated) as a list; all four when not given.
    InvalidEndpoint names each unknown type and the valid ones."""
    if text is None:
        return list(OPERATIONAL_TYPES)
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise InvalidEndpoint("--types names no type; give one or more of: "
                              + ", ".join(OPERATIONAL_TYPES))
    unknown = unknown_types(names)
    if unknown:
        raise InvalidEndpoint(f"unknown operational event type(s): {', '.join(unknown)}; "
                              f"expected one or more of: {', '.join(OPERATIONAL_TYPES)}")
    return list(dict.fromkeys(names))  # in the order given, once each


def url_refusal(url: str) -> str | None:
    """Why ``url`` cannot be an operational endpoint, or None: the subscriptions' rule."""
    problem = url_problem(url)
    if problem:
        return f"the url is refused: {problem}"
    return target_refusal(url)


def add(session: Session, url: str, event_types: list[str], *, actor: Actor,
        **credentials) -> Subscription:
    """A new operational endpoint, in the caller's transaction (the operator account is
    created with the first), with its ``subscription.created`` entry by ``actor`` in the
    operator account's log. InvalidEndpoint for a refused URL or an unknown type.
    ``credentials`` are its ``client_certificate`` and ``oauth2`` as stored, already checked
    (services/credentials.py)."""
    refusal = url_refusal(url)
    if refusal:
        raise InvalidEndpoint(refusal)
    unknown = unknown_types(event_types)
    if unknown:
        raise InvalidEndpoint(f"unknown operational event type(s): {', '.join(unknown)}")
    operator_account(session)
    endpoint = changes.create_subscription(
        session, OPERATOR_ACCOUNT_ID, url, now=utcnow(), event_types=list(event_types),
        description=DESCRIPTION, max_in_flight=get_settings().operational_max_in_flight,
        **credentials)
    audit.subscription_created(session, endpoint, actor)
    return endpoint


def shown(endpoint: Subscription, counts: dict[str, int] | None = None) -> dict:
    """An endpoint as the command line prints it (no secret: ``add`` prints it once)."""
    row = {"id": endpoint.id, "url": endpoint.url, "event_types": endpoint.event_types,
           "status": endpoint.status, "created_at": endpoint.created_at.isoformat()}
    if counts is not None:
        row["deliveries"] = counts
    return row


def listing(session: Session) -> list[dict]:
    """Every live operational endpoint, oldest first, with how many of its deliveries are
    in each public status (pending, paused, done, failed, dead): the operator's view of
    whether the notices arrive."""
    endpoints = session.scalars(
        select(Subscription)
        .where(Subscription.account_id == OPERATOR_ACCOUNT_ID, Subscription.deleted_at.is_(None))
        .order_by(Subscription.created_at, Subscription.id)).all()
    counted = session.execute(
        select(Delivery.subscription_id, Delivery.status, func.count())
        .where(Delivery.account_id == OPERATOR_ACCOUNT_ID)
        .group_by(Delivery.subscription_id, Delivery.status)).all()
    counts = {endpoint.id: dict.fromkeys(PUBLIC_STATUSES, 0) for endpoint in endpoints}
    for subscription_id, status, number in counted:
        if subscription_id in counts:
            counts[subscription_id][public_status(status)] += number
    return [shown(endpoint, counts[endpoint.id]) for endpoint in endpoints]


def _endpoint(session: Session, endpoint_id: str) -> Subscription:
    """The live operational endpoint ``endpoint_id``; NotFound otherwise."""
    endpoint = owned(session, OPERATOR_ACCOUNT_ID, endpoint_id)
    if endpoint is None:
        raise NotFound(f"no operational endpoint {endpoint_id}: `webhooks operational list` "
                       "shows their ids")
    return endpoint


def resume(session: Session, endpoint_id: str, *, actor: Actor) -> int:
    """Resume an endpoint the pause rule paused (its ``subscription.resumed`` entry by
    ``actor``); returns how many notices it released."""
    endpoint = _endpoint(session, endpoint_id)
    if endpoint.status != SubscriptionStatus.PAUSED.value:
        return 0
    return resume_subscription(session, endpoint, actor=actor)


def remove(session: Session, endpoint_id: str, *, actor: Actor) -> None:
    """Delete an endpoint: no further notice goes to it; those waiting end ``failed``. Its
    ``subscription.deleted`` entry by ``actor``."""
    endpoint = _endpoint(session, endpoint_id)
    now = utcnow()
    changes.delete_subscription(session, endpoint.id, now)
    audit.write(session, OPERATOR_ACCOUNT_ID, actor, Action.SUBSCRIPTION_DELETED,
                Target(TargetKind.SUBSCRIPTION, endpoint.id), created({"deleted_at": now}),
                at=now)
