"""Secret rotation in the dashboard: rotate at once or staged, and for a staged secret
"Activate now" and "Cancel" (webhooks/tenants/rotation.py, the same functions as the API)."""

from __future__ import annotations

import logging

from flask import flash, redirect, url_for

from webhooks.services import rotation

from ..transaction import db_session
from .blueprint import bp, current_actor
from .forms import RotateForm
from .secrets_shown import show_once
from .views_subscriptions import _ids, _own

log = logging.getLogger("web.dashboard")


@bp.post("/subscriptions/<subscription_id>/rotate-secret")
def rotate_secret(subscription_id: str):
    subscription = _own(subscription_id)
    form = RotateForm()
    if not form.validate():
        flash("Secret not rotated: choose when the new secret signs.", "error")
        return redirect(url_for("dashboard.subscription", subscription_id=subscription.id))
    activate_in = form.chosen_activate_in()
    rotation.rotate(db_session(), subscription, activate_in, actor=current_actor())
    log.info("signing secret rotated in the dashboard", extra=_ids(subscription))
    show_once(subscription.id)  # the page it is sent to shows the new secret, once
    if activate_in is None:
        flash("New signing secret made. The old one no longer verifies: update your endpoint.",
              "success")
    else:
        flash("New signing secret staged. The current one signs until the time shown; let your "
              "endpoint accept both until then.", "success")
    return redirect(url_for("dashboard.subscription_secret", subscription_id=subscription.id))


@bp.post("/subscriptions/<subscription_id>/next-secret/activate")
def activate_next_secret(subscription_id: str):
    subscription = _own(subscription_id)
    if rotation.activate_now(db_session(), subscription, actor=current_actor()):
        log.info("staged signing secret activated in the dashboard", extra=_ids(subscription))
        flash("The staged secret signs from now on; the old one no longer verifies.", "success")
    else:
        flash("No staged secret to activate: it took over already, or was cancelled.", "error")
    return redirect(url_for("dashboard.subscription", subscription_id=subscription.id))


@bp.post("/subscriptions/<subscription_id>/next-secret/cancel")
def cancel_next_secret(subscription_id: str):
    subscription = _own(subscription_id)
    if rotation.cancel(db_session(), subscription, actor=current_actor()):
        log.info("staged signing secret cancelled in the dashboard", extra=_ids(subscription))
        flash("Staged secret cancelled: the current secret keeps signing.", "success")
    else:
        flash("No staged secret to cancel: it took over already, or was cancelled.", "error")
    return redirect(url_for("dashboard.subscription", subscription_id=subscription.id))
