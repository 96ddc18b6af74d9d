"""Subscription pages: list, create, view (secret on request), edit, delete, and the
actions Send test, Pause and Resume, on the same core functions as the API (rotation in
views_rotation.py, recover in views_recover.py)."""

from __future__ import annotations

import datetime as dt
import json
import logging

from flask import abort, flash, redirect, render_template, request, url_for
from markupsafe import Markup

from webhooks.config import get_settings
from webhooks.errors import Conflict, InvalidCredential
from webhooks.services import pausing, subscriptions as subscription_service, testing
from webhooks.events.envelope import build_envelope
from webhooks.events.samples import sample_data
from webhooks.services.reads import utcnow
from webhooks.services.rotation import public_keys_at, shown_secrets
from webhooks.storage.models import Subscription, SubscriptionStatus, new_id

from ..errors import ApiError
from ..public_url import public_url_for
from ..ratelimit import check_send_test
from ..targets import check_target_allowed, shown_url, url_to_store
from ..transaction import db_session
from . import queries
from .blueprint import bp, current_account, current_actor, is_read_only
from .forms import TYPE_DESCRIPTIONS, FilterTestForm, RecoverForm, RotateForm, SubscriptionForm
from .options import facts
from .secrets_shown import show_once, shows_secrets, take_show_once
from .views_overview import chart_since, hourly_chart

log = logging.getLogger("web.dashboard")

RECENT_DELIVERIES = 20
RECOVER_DEFAULT_WINDOW = dt.timedelta(hours=24)  # what the recover form offers at first
PAGE_SIZE = 50
SUBSCRIPTION_STATUSES = tuple(status.value for status in SubscriptionStatus)


def _own(subscription_id: str) -> Subscription:
    found = queries.own_subscription(db_session(), current_account().id, subscription_id)
    if found is None:
        abort(404)
    return found


def _ids(subscription: Subscription) -> dict:
    return {"account_id": subscription.account_id, "subscription_id": subscription.id}


def _target_refused(form: SubscriptionForm) -> bool:
    """Apply the API's target rule (private addresses) to the form; True if refused."""
    try:
        check_target_allowed(form.url.data)
    except ApiError as error:
        form.url.errors = [*form.url.errors, error.message]
        return True
    return False


def _credentials_refused(form: SubscriptionForm, subscription: Subscription) -> bool:
    """Apply the API's credential rules to the form's url and headers (an http url beside a
    client certificate, an Authorization header beside oauth2); True if refused."""
    try:
        subscription_service.credential_changes(
            {"url": form.url.data, **form.chosen_settings(subscription.headers)}, subscription)
    except InvalidCredential as error:
        form.url.errors = [*form.url.errors, str(error)]
        return True
    return False


@bp.get("/subscriptions")
def subscriptions():
    session = db_session()
    account_id = current_account().id
    status = request.args.get("status") or None
    status = status if status in SUBSCRIPTION_STATUSES else None
    cursor = request.args.get("cursor") or None
    try:
        rows, next_cursor = queries.subscription_page(session, account_id, status, cursor, PAGE_SIZE)
    except ApiError:  # a cursor that is not ours: start from the newest again
        cursor = None
        rows, next_cursor = queries.subscription_page(session, account_id, status, None, PAGE_SIZE)
    return render_template(
        "dashboard/subscriptions.html",
        subscriptions=rows,
        status=status,
        statuses=SUBSCRIPTION_STATUSES,
        paused=queries.paused_count(session, account_id),
        next_cursor=next_cursor,
        first_page=cursor is None,
    )


@bp.route("/subscriptions/new", methods=["GET", "POST"])
def new_subscription():
    form = SubscriptionForm()
    if form.validate_on_submit() and not _target_refused(form):
        try:
            subscription = subscription_service.create(
                db_session(), current_account().id, form.url.data, actor=current_actor(),
                **form.chosen_settings())
        except Conflict as refused:  # WEBHOOKS_MAX_SUBSCRIPTIONS reached
            flash(f"Subscription not created: {refused}.", "error")
            return _form_page(form, None, 409)
        log.info("subscription created in the dashboard", extra=_ids(subscription))
        flash("Subscription created. Its signing secret is shown below, this once: give it "
              "to your endpoint so it can verify every delivery.", "success")
        show_once(subscription.id)
        return redirect(url_for("dashboard.subscription_secret", subscription_id=subscription.id))
    return _form_page(form, None, 400 if form.is_submitted() else 200)


def _form_page(form: SubscriptionForm, subscription: Subscription | None, status: int):
    return render_template("dashboard/subscription_form.html", form=form,
                           subscription=subscription, descriptions=TYPE_DESCRIPTIONS), status


def _from_now(moment: dt.datetime | None, now: dt.datetime) -> str:
    """``in 3 hours``: how far ``moment`` is from ``now``, in its largest whole unit."""
    if moment is None or moment <= now:
        return "now"
    seconds = int((moment - now).total_seconds())
    if seconds >= 60:  # to the nearest minute: a page shown a second after "in 24 hours" says so
        seconds = round(seconds / 60) * 60
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = seconds // size
            return f"in {count} {unit}{'' if count == 1 else 's'}"
    return f"in {seconds} second{'' if seconds == 1 else 's'}"


def _sample_envelope(subscription: Subscription) -> str:
    """A sample event of the first type it takes, as the tester's starting text."""
    event_type = (subscription.event_types or ["email.sent"])[0]
    envelope = build_envelope(event_id=new_id(), event_type=event_type,
                              data=sample_data(event_type), created_at=utcnow(),
                              version=get_settings().version)
    return json.dumps(envelope, indent=2, ensure_ascii=False)


def _subscription_page(subscription: Subscription, show_secret: bool,
                       filter_form: FilterTestForm | None = None, verdict=None):
    """The subscription's page; with ``show_secret``, its secrets too (secrets_shown.py);
    with ``verdict``, the filter tester's answer to ``filter_form``'s sample."""
    if show_secret and is_read_only():
        abort(403)  # the views refuse first (blueprint.py); this is the last line
    session = db_session()
    account_id = current_account().id
    recent, _ = queries.delivery_page(
        session, account_id, queries.DeliveryFilters(subscription_id=subscription.id),
        limit=RECENT_DELIVERIES,
    )
    now = utcnow()
    since = chart_since(now)
    # One read of the rollup for the counts and the chart, which cover the same hours.
    outcomes = queries.hourly_outcomes(session, account_id, since, subscription.id)
    return render_template(
        "dashboard/subscription.html",
        subscription=subscription,
        # A key pair's secrets are private keys: None, and its public keys (not secrets) instead.
        secrets=shown_secrets(subscription, now),
        public_keys=public_keys_at(subscription, now),
        key_set_url=public_url_for("public_keys.key_set", account_id=account_id),
        takes_over_in=_from_now(subscription.next_secret_active_at, now),
        option_facts=facts(subscription),
        filter_json=(None if subscription.filter is None
                     else json.dumps(subscription.filter, indent=2, ensure_ascii=False)),
        retry_schedule=subscription_service.retry_schedule_in_force(subscription),
        filter_form=filter_form or FilterTestForm(event=_sample_envelope(subscription)),
        verdict=verdict,
        credentials=subscription_service.shown_credentials(subscription),
        certificate_expires_soon=subscription_service.certificate_expires_soon(subscription, now),
        warning_days=subscription_service.EXPIRY_WARNING_DAYS,
        in_flight_limit=subscription_service.in_flight_limit(subscription),
        adaptive_pace=get_settings().adaptive_pace,
        rotate_form=RotateForm(),
        # The form offers the last 24 hours, to the minute; its fields are UTC without an offset.
        recover_form=RecoverForm(since=(now - RECOVER_DEFAULT_WINDOW).replace(
            tzinfo=None, second=0, microsecond=0)),
        show_secret=show_secret,
        recent=recent,
        replayed=queries.replayed_among(session, account_id, [d.id for d in recent]),
        counts=queries.status_counts(session, account_id, since, subscription.id,
                                     outcomes=outcomes),
        count_cap=queries.COUNT_CAP,
        chart_svg=hourly_chart(
            account_id, subscription.id, "Attempts to this endpoint per hour, last 24 hours",
            rows=outcomes, now=now,
        ),
    )


@bp.get("/subscriptions/<subscription_id>")
def subscription(subscription_id: str):
    return _subscription_page(_own(subscription_id), show_secret=False)


@bp.post("/subscriptions/<subscription_id>/filter-test")
def test_filter(subscription_id: str):
    """Would this sample event be delivered? The subscription's page with the answer; nothing
    is emitted or changed (a read-only session sees no tester: every POST is refused it)."""
    subscription = _own(subscription_id)
    form = FilterTestForm()
    verdict = (subscription_service.filter_verdict(subscription, form.event.data)
               if form.validate_on_submit() else None)
    return _subscription_page(subscription, show_secret=False, filter_form=form, verdict=verdict)


@bp.route("/subscriptions/<subscription_id>/secret", methods=["GET", "POST"])
@shows_secrets
def subscription_secret(subscription_id: str):
    """POST ("Show secret", CSRF-checked): the page with its secrets. GET: the page with them
    only right after this session made them, once; else hidden (secrets_shown.py)."""
    subscription = _own(subscription_id)
    show_secret = request.method == "POST" or take_show_once(subscription.id)
    if show_secret:
        log.info("signing secret shown in the dashboard", extra=_ids(subscription))
    return _subscription_page(subscription, show_secret=show_secret)


@bp.route("/subscriptions/<subscription_id>/edit", methods=["GET", "POST"])
@shows_secrets  # the form of the subscription's credentials (values masked, but a form to act)
def edit_subscription(subscription_id: str):
    subscription = _own(subscription_id)
    form = SubscriptionForm()
    if not form.is_submitted():
        form.url.data = shown_url(subscription.url)  # saved back unchanged, it keeps the password
        form.show(subscription)
    elif (form.validate() and not _target_refused(form)
          and not _credentials_refused(form, subscription)):
        subscription_service.change(db_session(), subscription, actor=current_actor(),
                                    url=url_to_store(form.url.data, subscription.url),
                                    **form.chosen_settings(subscription.headers))
        log.info("subscription changed in the dashboard", extra=_ids(subscription))
        flash("Subscription saved.", "success")
        return redirect(url_for("dashboard.subscription", subscription_id=subscription.id))
    return _form_page(form, subscription, 400 if form.is_submitted() else 200)


@bp.post("/subscriptions/<subscription_id>/test")
def send_test_event(subscription_id: str):
    subscription = _own(subscription_id)
    try:
        check_send_test(subscription.account_id, subscription.id)
    except ApiError as refused:
        flash(f"Test event not sent: {refused.message}", "error")
        return redirect(url_for("dashboard.subscription", subscription_id=subscription.id))
    # Published when the request's transaction commits.
    emitted = testing.send_test_event(db_session(), subscription)
    delivery_id = emitted.delivery_ids[0]
    log.info("test event sent from the dashboard",
             extra={**_ids(subscription), "event_id": emitted.id, "delivery_id": delivery_id})
    link = url_for("dashboard.delivery", delivery_id=delivery_id)
    flash(Markup('Test event sent: <a href="{}">delivery {}</a>.').format(link, delivery_id[:8]),
          "success")
    return redirect(url_for("dashboard.subscription", subscription_id=subscription.id))


@bp.post("/subscriptions/<subscription_id>/pause")
def pause_subscription(subscription_id: str):
    subscription = _own(subscription_id)
    if pausing.pause(db_session(), subscription, actor=current_actor()):
        log.info("subscription paused from the dashboard", extra=_ids(subscription))
        flash("Subscription paused: its deliveries wait, held, until you resume it.", "success")
    else:
        flash("The subscription was already paused.", "success")
    return redirect(url_for("dashboard.subscription", subscription_id=subscription.id))


@bp.post("/subscriptions/<subscription_id>/resume")
def resume_subscription(subscription_id: str):
    subscription = _own(subscription_id)
    released = pausing.resume(db_session(), subscription, actor=current_actor())  # sent after commit, in batches
    log.info("subscription resumed from the dashboard", extra=_ids(subscription))
    held = f" {released} held deliver{'y goes' if released == 1 else 'ies go'} out now." if released else ""
    flash(f"Subscription resumed.{held}", "success")
    return redirect(url_for("dashboard.subscription", subscription_id=subscription.id))


@bp.route("/subscriptions/<subscription_id>/delete", methods=["GET", "POST"])
def delete_subscription(subscription_id: str):
    subscription = _own(subscription_id)
    if request.method == "GET":
        return render_template("dashboard/subscription_delete.html", subscription=subscription)
    subscription_service.delete(db_session(), subscription, actor=current_actor())
    log.info("subscription deleted in the dashboard", extra=_ids(subscription))
    # Flash messages travel in the session cookie: never a password there.
    flash(f"Subscription to {shown_url(subscription.url)} deleted. Its delivery history stays listed.",
          "success")
    return redirect(url_for("dashboard.subscriptions"))
