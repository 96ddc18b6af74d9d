"""Recover in the dashboard: replay a subscription's failed and dead deliveries of a time
window (webhooks/lifecycle/recover.py, the same function as the API)."""

from __future__ import annotations

import datetime as dt
import logging

from flask import flash, redirect, url_for

from webhooks.errors import InvalidWindow
from webhooks.services import recovery

from ..transaction import db_session
from .blueprint import bp, current_actor
from .forms import RecoverForm
from .views_subscriptions import _ids, _own

log = logging.getLogger("web.dashboard")


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    """A time from the form (UTC, without an offset) as an aware datetime."""
    return None if value is None else value.replace(tzinfo=dt.timezone.utc)


@bp.post("/subscriptions/<subscription_id>/recover")
def recover_deliveries(subscription_id: str):
    subscription = _own(subscription_id)
    page = url_for("dashboard.subscription", subscription_id=subscription.id)
    form = RecoverForm()
    if not form.validate():
        problems = [error for field in (form.since, form.until) for error in field.errors]
        flash(f"Nothing recovered: {' '.join(problems) or 'enter the window.'}", "error")
        return redirect(page)
    ids = _ids(subscription)
    try:
        # Commits the request's session after each batch (only reads were made so far).
        recovered = recovery.recover(db_session(), subscription, _utc(form.since.data),
                                     _utc(form.until.data), actor=current_actor())
    except InvalidWindow as refused:
        flash(f"Nothing recovered: {refused}.", "error")
        return redirect(page)
    log.info("deliveries recovered in the dashboard", extra=ids)
    count = recovered.replayed
    replayed = f"{count} failed or dead deliver{'y' if count == 1 else 'ies'} replayed"
    held = (f" The subscription is paused: {recovered.held} of them wait until you resume it."
            if recovered.held else "")
    more = (" The window holds more: press Recover again to continue." if recovered.more
            else "")
    flash(f"{replayed}; a delivery is never replayed twice.{held}{more}", "success")
    return redirect(page)
