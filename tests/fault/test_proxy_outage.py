"""The egress proxy goes down (CONTRACT 10.1): every attempt meanwhile fails with
``error_kind`` ``proxy`` and waits on the ladder; once the proxy is back every delivery
arrives, none twice, and the fault suite's accounting finds nothing lost."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from tests.support.egress import TinyProxy
from tests.support.ledger import account, missing_arrivals, report
from tests.support.stack import wait_until, worker_env
from webhooks.storage.db import get_engine

from .helpers import Clock, emit_many, make_account, make_subscription, status_counts

pytestmark = [pytest.mark.fault, pytest.mark.integration]


def _proxy_failures() -> dict[str, int]:
    """delivery id -> attempts that failed at the proxy."""
    with get_engine().connect() as connection:
        rows = connection.execute(text(
            "SELECT delivery_id, count(*) FROM attempts WHERE error_kind = 'proxy' "
            "GROUP BY delivery_id")).all()
    return dict(rows)


def test_deliveries_wait_while_the_proxy_is_down_and_all_arrive_once_it_is_back(
        workers, db, redis_broker, fault_receiver, monkeypatch):
    from tests.support.stack import use_env

    proxy = TinyProxy().start()
    try:
        env = worker_env(EGRESS_PROXY=proxy.url, RETRY_DELAYS="3,3,3,3")
        use_env(monkeypatch, env)
        workers.use(env)
        clock = Clock()
        account_id, _ = make_account()
        make_subscription(account_id, fault_receiver.url("/behind-proxy"))
        before = emit_many(account_id, 5)
        wait_until(lambda: status_counts(before) == {"done": 5}, what="5 through the proxy")

        proxy.stop()
        during = emit_many(account_id, 20)
        wait_until(lambda: len(_proxy_failures()) == 20, timeout=30,
                   what="a proxy failure recorded for each of the 20")
        # On the ladder (or in a retry just now): none done, dead, failed or lost.
        assert set(status_counts(during)) <= {"pending", "sending"}
        assert sum(status_counts(during).values()) == 20
        proxy.start()  # the same port, as a restarted proxy
        wait_until(lambda: status_counts() == {"done": 25}, timeout=60,
                   what="all 25 done once the proxy is back")

        arrivals = fault_receiver.arrivals()
        result = report(account("egress proxy down, then back", arrivals, seconds=clock(),
                                notes={"proxy failures": sum(_proxy_failures().values())}))
        assert result.problems == [] and not missing_arrivals(arrivals)
        assert result.duplicates == 0
        assert sorted(a.delivery_id for a in arrivals) == sorted(before + during)
        assert proxy.connects().count(f"127.0.0.1:{fault_receiver.port}") >= 1
    finally:
        proxy.stop()
