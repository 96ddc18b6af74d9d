"""Sign in, sign out, and the overview page with its chart."""

from __future__ import annotations

import datetime as dt
import logging

from flask import abort, flash, redirect, render_template, request, url_for
from markupsafe import Markup
from sqlalchemy import bindparam, select

from webhooks.services.accounts import account_for_key
from webhooks.storage.models import Delivery, DeliveryStatus, utcnow

from ..transaction import db_session
from . import chart, queries
from .blueprint import bp, current_account, end_session, safe_next, start_session
from .forms import SignInForm
from .plain_http import plain_http_advice

log = logging.getLogger("web.dashboard")

HOURS = 24
# The overview lists the dead deliveries of the last week (newest ten).
DEAD_LISTED_FOR = dt.timedelta(days=7)
# Built once, the account and the week's start bound per request.
_RECENT_DEAD = (
    select(Delivery)
    .where(Delivery.account_id == bindparam("account_id"),
           Delivery.status == DeliveryStatus.DEAD.value,
           Delivery.created_at >= bindparam("since"))
    .order_by(Delivery.created_at.desc(), Delivery.id.desc())
    .limit(10)
)


def chart_since(now: dt.datetime) -> dt.datetime:
    """The start of the chart's first hour: HOURS hours, the current one included."""
    return chart.floor_hour(now) - dt.timedelta(hours=HOURS - 1)


def hourly_chart(account_id: str, subscription_id: str | None = None, title: str | None = None,
                 *, rows: list | None = None, now: dt.datetime | None = None) -> Markup:
    """The last 24 hours of attempts by outcome, as inline SVG, and its legend as HTML.

    ``rows``: queries.hourly_outcomes from chart_since(``now``), when the page has read
    them already (for its status counts); else they are read here."""
    now = now or utcnow()
    if rows is None:
        rows = queries.hourly_outcomes(db_session(), account_id, chart_since(now), subscription_id)
    buckets = chart.hourly_buckets(rows, now, HOURS)
    svg = chart.render_chart(
        buckets,
        title=title or "Delivery attempts per hour, last 24 hours",
        id_prefix="chart-" + (subscription_id or "all")[:8],
    )
    # render_chart and render_legend escape every text they write; the rest is their markup.
    return Markup(svg + chart.render_legend(buckets))


def _sign_in_page(form: SignInForm, status: int = 200):
    return render_template("dashboard/sign_in.html", form=form,
                           plain_http_advice=plain_http_advice()), status


@bp.get("/")
def index():
    account = current_account()
    if account is None:
        form = SignInForm(next=request.args.get("next", ""))
        return _sign_in_page(form)
    session = db_session()
    subscriptions = queries.subscriptions_of(session, account.id)
    paused = [s for s in subscriptions if s.status == "paused"]
    now = utcnow()
    dead = list(session.scalars(_RECENT_DEAD, {"account_id": account.id,
                                               "since": now - DEAD_LISTED_FOR}))
    labels = queries.subscription_labels(session, account.id, [d.subscription_id for d in dead])
    # One read of the rollup for the counts and the chart, which cover the same hours.
    outcomes = queries.hourly_outcomes(session, account.id, chart_since(now))
    return render_template(
        "dashboard/overview.html",
        subscriptions=subscriptions,
        paused=paused,
        dead=dead,
        labels=labels,
        counts=queries.status_counts(session, account.id, chart_since(now), outcomes=outcomes),
        count_cap=queries.COUNT_CAP,
        chart_svg=hourly_chart(account.id, rows=outcomes, now=now),
    )


@bp.route("/sign-in", methods=["GET", "POST"])
def sign_in():
    form = SignInForm()
    if request.method == "GET":
        if current_account() is not None:
            return redirect(safe_next(request.args.get("next")))
        form.next.data = request.args.get("next", "")
        return _sign_in_page(form)
    if not form.validate_on_submit():
        return _sign_in_page(form, 400)
    account = account_for_key(db_session(), form.api_key.data.strip())
    if account is None:
        log.info("dashboard sign-in refused: unknown API key")  # never the key itself
        form.api_key.errors.append("That API key is not valid.")
        return _sign_in_page(form, 401)
    start_session(account)
    log.info("dashboard sign-in", extra={"account_id": account.id})
    return redirect(safe_next(form.next.data))


@bp.route("/<path:_unknown>", methods=["GET", "POST"])
def unknown(_unknown: str):
    """Any other path under /dashboard/: the dashboard's own 404 page, not the API's JSON."""
    abort(404)


@bp.post("/sign-out")
def sign_out():
    account = current_account()
    end_session()
    if account is not None:
        log.info("dashboard sign-out", extra={"account_id": account.id})
    flash("You are signed out.", "info")
    return redirect(url_for("dashboard.index"))
