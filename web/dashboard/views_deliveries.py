"""Delivery pages: the filtered list, one delivery with every attempt, and Replay."""

from __future__ import annotations

import logging

from flask import abort, flash, redirect, render_template, request, url_for

from webhooks.errors import Conflict
from webhooks.events.catalogue import EVENT_TYPE_NAMES
from webhooks.services import replay as replay_service
from webhooks.storage.models import Delivery

from ..errors import ApiError
from ..params import canonical_id
from ..transaction import db_session, read_snapshot
from . import queries
from .blueprint import bp, current_account, current_actor

log = logging.getLogger("web.dashboard")

PAGE_SIZE = 50


def _own(delivery_id: str) -> Delivery:
    found = queries.own_delivery(db_session(), current_account().id, delivery_id)
    if found is None:
        abort(404)
    return found


def _ids(delivery: Delivery) -> dict:
    return {
        "account_id": delivery.account_id,
        "delivery_id": delivery.id,
        "event_id": delivery.event_id,
        "subscription_id": delivery.subscription_id,
    }


def _filters() -> queries.DeliveryFilters:
    """The list's filters from the query string; a value that names nothing is dropped."""
    status = request.args.get("status") or None
    event_type = request.args.get("event_type") or None
    subscription_id = canonical_id(request.args.get("subscription_id") or "")
    return queries.DeliveryFilters(
        status=status if status in queries.PUBLIC_STATUSES else None,
        event_type=event_type if event_type in EVENT_TYPE_NAMES else None,
        subscription_id=subscription_id,
        cursor=request.args.get("cursor") or None,
    )


@bp.get("/deliveries")
def deliveries():
    account_id = current_account().id
    session = db_session()
    filters = _filters()
    try:
        rows, next_cursor = queries.delivery_page(session, account_id, filters, PAGE_SIZE)
    except ApiError:  # a cursor that is not ours: start from the newest again
        filters = queries.DeliveryFilters(filters.status, filters.event_type, filters.subscription_id)
        rows, next_cursor = queries.delivery_page(session, account_id, filters, PAGE_SIZE)
    subscriptions = queries.subscriptions_of(session, account_id)
    labels = queries.subscription_labels(session, account_id, [d.subscription_id for d in rows])
    if filters.subscription_id and filters.subscription_id not in labels:
        labels.update(queries.subscription_labels(session, account_id, [filters.subscription_id]))
    next_args = None
    if next_cursor:
        next_args = {k: v for k, v in (("status", filters.status), ("event_type", filters.event_type),
                                       ("subscription_id", filters.subscription_id)) if v}
        next_args["cursor"] = next_cursor
    return render_template(
        "dashboard/deliveries.html",
        deliveries=rows,
        replayed=queries.replayed_among(session, account_id, [d.id for d in rows]),
        filters=filters,
        statuses=queries.PUBLIC_STATUSES,
        event_types=EVENT_TYPE_NAMES,
        subscriptions=subscriptions,
        labels=labels,
        next_args=next_args,
        first_page=filters.cursor is None,
    )


@bp.get("/deliveries/<delivery_id>")
def delivery(delivery_id: str):
    read_snapshot()  # the delivery and its attempts as of one moment
    found = _own(delivery_id)
    session = db_session()
    account_id = current_account().id
    labels = queries.subscription_labels(session, account_id, [found.subscription_id])
    url, deleted = labels.get(found.subscription_id, ("(unknown)", True))
    shown = queries.public_status(found.status)
    replays = queries.replays_of(session, account_id, found.id)
    return render_template(
        "dashboard/delivery.html",
        delivery=found,
        status=shown,
        attempts=queries.attempts_of(session, found),
        replays=replays,
        public_status=queries.public_status,
        subscription_url=url,
        subscription_deleted=deleted,
        # Once replayed, the page points to the replay instead (README, "Dashboard").
        replayable=replay_service.is_replayable(found) and not deleted and not replays,
        body=queries.event_body(session, account_id, found.event_id),
    )


@bp.post("/deliveries/<delivery_id>/replay")
def replay_delivery(delivery_id: str):
    original = _own(delivery_id)
    try:
        replayed = replay_service.replay(db_session(), original, actor=current_actor())
    except Conflict as error:  # not failed or dead, or its subscription deleted: the message says
        flash(f"Not replayed: {error}.", "error")
        return redirect(url_for("dashboard.delivery", delivery_id=original.id))
    if replay_service.was_published(replayed):  # published after commit
        flash("Replay sent as a new delivery.", "success")
    else:
        flash("Replay created; it waits while the subscription is paused.", "info")
    log.info("delivery %s replayed from the dashboard as %s", original.id, replayed.id,
             extra={**_ids(original), "delivery_id": replayed.id})
    return redirect(url_for("dashboard.delivery", delivery_id=replayed.id))
