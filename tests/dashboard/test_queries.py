"""The chart's query groups by hour in the database, on PostgreSQL and on SQLite alike."""

from __future__ import annotations

import datetime as dt

from webhooks.db import session_scope
from webhooks.models import utcnow
from web.dashboard import queries
from web.dashboard.chart import floor_hour, hourly_buckets

from tests.factories import make_account, make_subscription
from tests.api.helpers import emit

from .rows import add_attempts


def test_hourly_outcomes_counts_the_accounts_attempts_per_hour(any_db, monkeypatch):
    from webhooks import publisher

    monkeypatch.setattr(publisher, "submit", lambda items: None)  # no broker needed
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
