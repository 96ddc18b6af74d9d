"""``GET /metrics``: Prometheus text format, every metric named ``webhooks_…``.

The database is the source of truth, so the web process reads the numbers
from it when it is scraped (a custom collector; nothing is kept in memory,
so every gunicorn worker answers the same). Each scrape is a handful of
small queries, none of which reads history:

========================================  =====================================================
``webhooks_database_up``                  1 when the queries below could run, else 0 (and the
                                          others are left out)
``webhooks_deliveries_waiting{status}``   deliveries not finished, exactly: ``pending`` (waiting
                                          for an attempt), ``sending`` (attempt in flight),
                                          ``paused`` (held while their subscription is paused)
``webhooks_queue_lag_seconds``            age of the oldest pending delivery that is due (0 when
                                          none is): how far the workers are behind
``webhooks_subscriptions``                live (not deleted) subscriptions of the customers
``webhooks_subscriptions_paused``         of those, the paused ones
``webhooks_operational_endpoints``        live operational endpoints (the operator account's
                                          subscriptions, README "Operational webhooks"),
                                          counted apart from the customers'
``webhooks_operational_endpoints_paused`` of those, the paused ones
``webhooks_attempts_total{outcome}``      counter: delivery attempts recorded since the
                                          database was created, by outcome: ``success``
                                          (delivery done), ``retry``, ``permanent_failure``
                                          (delivery failed), ``dead``
``webhooks_attempt_duration_seconds``     histogram of those attempts' durations
========================================  =====================================================

The two attempt families are counters kept as attempts are recorded
(``attempt_totals``, webhooks/storage/rollup.py: at most 4 x 12 x 16 rows), so a
scrape costs the same after a year as on the first day; retention does not
lower them. Use them as counters: ``rate(webhooks_attempts_total[5m])`` is
attempts per second, ``increase(webhooks_attempts_total[5m])`` what
``webhooks_attempts_recent`` showed before. The waiting gauges are the
counts of the unfinished deliveries as the last sweep made them, one row of
``waiting_counts`` (webhooks/storage/waiting_counts.py; until issue 43
triggers kept them exact in every emit, claim and record, which cost the
primary more than the scrapes they saved). The queue lag reads the first
entry of the pending index. So no query of a scrape grows with history or
with the backlog.

Who may scrape is web/metrics_access.py's rule: by default clients on this
host only (403 for others); with ``WEBHOOKS_METRICS_TOKEN`` set, a scrape must
send ``Authorization: Bearer <token>`` (Prometheus: ``authorization:
{credentials: <token>}``), else 401; ``WEBHOOKS_METRICS_ALLOWED_NETWORKS``
lists the networks that may.
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging

from flask import Blueprint, Response, current_app, request
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from webhooks.config import get_settings
from webhooks.reserved import OPERATOR_ACCOUNT_ID
from webhooks.storage import clock
from webhooks.storage import waiting_counts as waiting
from webhooks.storage.backends import backend_of
from webhooks.storage.db import get_engine
from webhooks.storage.models import (AttemptTotal, Delivery, DeliveryStatus, Subscription,
                             SubscriptionStatus)
from webhooks.storage.rollup import DURATION_BUCKETS_MS

from .errors import ApiError
from .metrics_access import ScrapeRule, load_scrape_rule
from .replica import usable as replica_usable

__all__ = ["bp", "DURATION_BUCKETS_S", "DatabaseCollector", "registry", "init_app"]

log = logging.getLogger(__name__)

bp = Blueprint("metrics", __name__)

# Upper bounds in seconds (the rollup's, in ms); an attempt ends by WEBHOOKS_TIMEOUT.
DURATION_BUCKETS_S = tuple(bound / 1000 for bound in DURATION_BUCKETS_MS)
OUTCOMES = ("success", "retry", "permanent_failure", "dead")
STATEMENT_TIMEOUT_MS = 5000
# The classic text format, read by every Prometheus version (generate_latest writes it).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

PENDING = DeliveryStatus.PENDING.value
SENDING = DeliveryStatus.SENDING.value
PAUSED = DeliveryStatus.PAUSED.value


def _waiting(connection: Connection) -> dict[str, int]:
    # As the last sweep counted them (webhooks/storage/waiting_counts.py): one row.
    return waiting.read(connection)


def _queue_lag(connection: Connection, now: dt.datetime) -> float:
    oldest_due = connection.scalar(
        select(func.min(Delivery.next_attempt_at)).where(
            Delivery.status == PENDING, Delivery.next_attempt_at <= now
        )
    )
    if oldest_due is None:
        return 0.0
    return max((now - oldest_due).total_seconds(), 0.0)


def _subscriptions(connection: Connection) -> dict[str, dict[str, int]]:
    """Live subscriptions by status, ``customers`` apart from the operator account's
    ``operational`` endpoints: a customer's pause must not look like the operator's."""
    operational = (Subscription.account_id == OPERATOR_ACCOUNT_ID).label("operational")
    rows = connection.execute(
        select(operational, Subscription.status, func.count())
        .where(Subscription.deleted_at.is_(None))
        .group_by(operational, Subscription.status)
    )
    counts: dict[str, dict[str, int]] = {"customers": {}, "operational": {}}
    for is_operational, status, count in rows:
        counts["operational" if is_operational else "customers"][status] = count
    return counts


def _attempt_totals(connection: Connection) -> dict[str, tuple[int, int, list[int]]]:
    """Per outcome: (attempts, sum of ms, attempts in each duration bucket, not cumulative)."""
    rows = connection.execute(
        select(AttemptTotal.outcome, AttemptTotal.duration_bucket,
               func.sum(AttemptTotal.attempts), func.sum(AttemptTotal.duration_ms))
        .group_by(AttemptTotal.outcome, AttemptTotal.duration_bucket)
    )
    totals: dict[str, tuple[int, int, list[int]]] = {}
    for outcome, bucket, count, sum_ms in rows:
        attempts, total_ms, buckets = totals.get(outcome, (0, 0, [0] * (len(DURATION_BUCKETS_S) + 1)))
        buckets[min(bucket, len(DURATION_BUCKETS_S))] += int(count)
        totals[outcome] = (attempts + int(count), total_ms + int(sum_ms or 0), buckets)
    return totals


def read_snapshot(connection: Connection, now: dt.datetime) -> dict:
    """Every number /metrics shows, read in one short transaction."""
    # A slow database makes the scrape fail fast instead of piling up scrapes (PostgreSQL).
    backend_of(connection).limit_statement_time(connection, STATEMENT_TIMEOUT_MS)
    return {
        "waiting": _waiting(connection),
        "lag": _queue_lag(connection, now),
        "subscriptions": _subscriptions(connection),
        "attempts": _attempt_totals(connection),
    }


class DatabaseCollector:
    """A prometheus-client collector that reads the database at scrape time."""

    def describe(self):
        # Not described up front: registering must not query the database.
        return []

    def collect(self):
        try:
            # The replica when one is set and answering: a scrape writes nothing.
            settings = get_settings()
            url = settings.read_database_url if replica_usable() else settings.database_url
            with get_engine(url).begin() as connection:
                # The database's time: the queue's lag is measured against due times it wrote.
                snapshot = read_snapshot(connection, clock.now())
        except Exception as error:  # noqa: BLE001 - the scrape still answers, saying so
            log.warning("metrics: the database could not be read: %s", type(error).__name__)
            yield GaugeMetricFamily(
                "webhooks_database_up", "1 if the database answered this scrape, else 0", value=0
            )
            return
        yield GaugeMetricFamily(
            "webhooks_database_up", "1 if the database answered this scrape, else 0", value=1
        )

        waiting = GaugeMetricFamily(
            "webhooks_deliveries_waiting",
            "Deliveries not finished: pending (waiting for an attempt), sending (attempt in "
            "flight), paused (held while their subscription is paused)",
            labels=["status"],
        )
        for status in (PENDING, SENDING, PAUSED):
            waiting.add_metric([status], snapshot["waiting"].get(status) or 0)
        yield waiting

        yield GaugeMetricFamily(
            "webhooks_queue_lag_seconds",
            "Age of the oldest pending delivery that is due, in seconds (0 when none is due)",
            value=snapshot["lag"],
        )

        subscriptions = snapshot["subscriptions"]["customers"]
        operational = snapshot["subscriptions"]["operational"]
        yield GaugeMetricFamily(
            "webhooks_subscriptions", "Live (not deleted) subscriptions of the customers",
            value=sum(subscriptions.values()),
        )
        yield GaugeMetricFamily(
            "webhooks_subscriptions_paused",
            "Customers' subscriptions paused (by failures, a 410 or by hand), waiting to be "
            "resumed",
            value=subscriptions.get(SubscriptionStatus.PAUSED.value, 0),
        )
        yield GaugeMetricFamily(
            "webhooks_operational_endpoints",
            "Live operational endpoints (the operator's own, apart from the customers')",
            value=sum(operational.values()),
        )
        yield GaugeMetricFamily(
            "webhooks_operational_endpoints_paused",
            "Operational endpoints paused, waiting for webhooks operational resume",
            value=operational.get(SubscriptionStatus.PAUSED.value, 0),
        )

        attempts = snapshot["attempts"]
        total = CounterMetricFamily(
            "webhooks_attempts",
            "Delivery attempts recorded, by outcome: success (delivery done), retry, "
            "permanent_failure (delivery failed), dead (delivery dead)",
            labels=["outcome"],
        )
        for outcome in OUTCOMES:
            total.add_metric([outcome], attempts.get(outcome, (0, 0, None))[0])
        yield total

        per_bucket = [0] * (len(DURATION_BUCKETS_S) + 1)
        total_ms = 0
        for _count, sum_ms, buckets in attempts.values():
            total_ms += sum_ms
            per_bucket = [a + b for a, b in zip(per_bucket, buckets)]
        cumulative = list(itertools.accumulate(per_bucket))
        yield HistogramMetricFamily(
            "webhooks_attempt_duration_seconds",
            "Duration of the delivery attempts recorded, in seconds",
            buckets=[(_bound(b), c) for b, c in zip(DURATION_BUCKETS_S, cumulative)]
            + [("+Inf", cumulative[-1])],
            sum_value=total_ms / 1000.0,
        )


def _bound(seconds: float) -> str:
    return repr(float(seconds))


registry = CollectorRegistry(auto_describe=False)
registry.register(DatabaseCollector())


_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="metrics"'}
_RULE = "metrics_scrape_rule"


def init_app(app) -> None:
    """Read who may scrape (WEBHOOKS_METRICS_ALLOWED_NETWORKS) now, and serve /metrics."""
    app.extensions[_RULE] = load_scrape_rule()
    app.register_blueprint(bp)


@bp.get("/metrics")
def metrics() -> Response:
    rule: ScrapeRule = current_app.extensions[_RULE]
    refusal = rule.refusal(request.remote_addr, request.headers.get("Authorization", ""),
                           get_settings().metrics_token)
    if refusal is not None:
        if refusal.status == 401:
            raise ApiError(401, "unauthorized", refusal.message, _CHALLENGE)
        log.info("metrics: scrape refused to a client not allowed to scrape")
        raise ApiError(403, "forbidden", refusal.message)
    response = Response(generate_latest(registry), status=200)
    response.headers["Content-Type"] = CONTENT_TYPE
    response.headers["Cache-Control"] = "no-store"
    return response
