"""The chart's query groups by hour in the database, on PostgreSQL and on SQLite alike."""

from __future__ import annotations

import datetime as dt

from webhooks.storage.db import session_scope
from webhooks.storage.models import utcnow
from web.dashboard import queries
from web.dashboard.chart import floor_hour, hourly_buckets

from tests.factories import make_account, make_subscription
from tests.api.helpers import emit

from .rows import add_attempts


def test_hourly_outcomes_counts_the_accounts_attempts_per_hour(any_db, monkeypatch):
    from webhooks.broker import outbox

    monkeypatch.setattr(outbox, "publish", lambda items, timeout=None: True)  # no broker needed
    account_id, _ = make_account("alice")
    other_id, _ = make_account("bob")
    subscription = make_subscription(account_id, "https://one.example.com/in")
    make_subscription(other_id, "https://two.example.com/in")
    now = utcnow()
    this_hour = floor_hour(now)
    _, (recent,) = emit(account_id)
    _, (older,) = emit(account_id)
    _, (foreign,) = emit(other_id)
    add_attempts(recent, [(500, "retry"), (200, "success")], started=this_hour)
    add_attempts(older, [(None, "retry"), (404, "permanent_failure")],
                 started=this_hour - dt.timedelta(hours=3))
    add_attempts(foreign, [(200, "success")], started=this_hour)

    since = this_hour - dt.timedelta(hours=23)
    with session_scope() as session:
        rows = queries.hourly_outcomes(session, account_id, since)
        only = queries.hourly_outcomes(session, account_id, since, subscription.id)
        nothing = queries.hourly_outcomes(session, account_id, this_hour + dt.timedelta(hours=1))
    assert sorted(rows) == sorted([
        (this_hour, "retry", 1), (this_hour, "success", 1),
        (this_hour - dt.timedelta(hours=3), "retry", 1),
        (this_hour - dt.timedelta(hours=3), "permanent_failure", 1),
    ])
    assert sorted(only) == sorted(rows)
    assert nothing == []
    buckets = hourly_buckets(rows, now)
    assert buckets[-1].counts == {"retried": 1, "done": 1}
    assert buckets[-4].counts == {"retried": 1, "failed": 1}


def test_status_counts_take_finished_deliveries_from_the_rollup_and_count_waiting_ones(
        any_db, monkeypatch):
    from webhooks.broker import outbox

    from .rows import set_delivery

    monkeypatch.setattr(outbox, "publish", lambda items, timeout=None: True)
    account_id, _ = make_account("alice")
    other_id, _ = make_account("bob")
    subscription = make_subscription(account_id, "https://one.example.com/in")
    make_subscription(other_id, "https://two.example.com/in")
    this_hour = floor_hour(utcnow())
    done, dead, waiting, held, long_ago = (emit(account_id)[1][0] for _ in range(5))
    _, (foreign,) = emit(other_id)
    add_attempts(done, [(500, "retry"), (200, "success")], started=this_hour)
    add_attempts(dead, [(500, "retry")] * 5 + [(500, "dead")], started=this_hour)
    add_attempts(long_ago, [(410, "permanent_failure")], started=this_hour - dt.timedelta(hours=30))
    add_attempts(foreign, [(200, "success")], started=this_hour)
    for delivery_id, status in ((done, "done"), (dead, "dead"), (held, "paused"),
                                (long_ago, "failed"), (foreign, "done")):
        set_delivery(delivery_id, status=status)
    set_delivery(waiting, status="sending")  # an attempt in flight is still pending

    since = this_hour - dt.timedelta(hours=23)
    with session_scope() as session:
        counts = queries.status_counts(session, account_id, since)
        only = queries.status_counts(session, account_id, since, subscription.id)
        foreign_subscription = queries.status_counts(session, other_id, since, subscription.id)
    assert counts == {"pending": 1, "paused": 1, "done": 1, "failed": 0, "dead": 1}
    assert only == counts
    assert foreign_subscription == {"pending": 0, "paused": 0, "done": 0, "failed": 0, "dead": 0}

    monkeypatch.setattr(queries, "COUNT_CAP", 0)  # waiting ones are counted up to the cap + 1
    set_delivery(done, status="pending")
    with session_scope() as session:
        assert queries.status_counts(session, account_id, since)["pending"] == 1
