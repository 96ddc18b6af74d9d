"""The cluster's checker (cluster/checker.py), on rows and log lines made here: what it
counts as lost, stuck and duplicated, and which fault explains a duplicate."""

from __future__ import annotations

from cluster.checker import sweep_runs, verdict

NOW = 1000.0
SUBSCRIPTIONS = [{"id": "s-ok", "url": "/ok", "event_types": None, "consecutive_failures": 0},
                 {"id": "s-fail", "url": "/fail", "event_types": None, "consecutive_failures": 2}]


def _delivery(delivery_id, event, subscription, status, attempts=1, due=None):
    return {"id": delivery_id, "event_id": event, "subscription_id": subscription,
            "status": status, "attempt_count": attempts, "due": due}


def _primary(deliveries, attempts=()):
    return {"now": NOW, "events": {d["event_id"] for d in deliveries},
            "subscriptions": SUBSCRIPTIONS, "deliveries": deliveries, "attempts": list(attempts)}


def _check(primary, emitted, received, faults=()):
    return verdict(primary, emitted, received, list(faults), max_attempts=4, explain_after=10,
                   stuck_slack=5)


def test_a_clean_run_counts_no_loss_and_exact_counters():
    primary = _primary(
        [_delivery("d1", "e1", "s-ok", "done"), _delivery("d2", "e1", "s-fail", "dead", 4)],
        [{"id": 1, "subscription_id": "s-fail", "outcome": "retry"},
         {"id": 2, "subscription_id": "s-ok", "outcome": "success"},
         {"id": 3, "subscription_id": "s-fail", "outcome": "dead"}])
    result = _check(primary, [{"key": "k1", "event": "e1"}],
                    [{"t": 1, "delivery": "d1", "status": 200, "path": "/ok"}])
    assert (result.events, result.delivered, result.lost, result.stuck) == (1, 1, 0, 0)
    assert result.counters == {"/ok": (0, 0), "/fail": (2, 2)}
    assert result.line() == ("cluster: events 1, delivered 1, lost 0, stuck 0, duplicates 0, "
                             "faults 0")


def test_what_counts_as_lost():
    primary = _primary([
        _delivery("d1", "e1", "s-ok", "done"),        # no 2xx at any receiver
        _delivery("d2", "e1", "s-fail", "dead", 2),   # dead before the ladder's end
    ])
    emitted = [{"key": "k1", "event": "e1"}, {"key": "k2", "event": None},  # never emitted
               {"key": "k3", "event": "e-missing"}]                         # not stored
    result = _check(primary, emitted, [])
    assert result.lost == 4
    assert {why for why, _ in result.lost_detail} == {
        "delivered but no 2xx at a receiver", "dead before the ladder's end",
        "emit never succeeded", "event not stored"}


def test_a_subscription_without_its_delivery_is_a_loss():
    result = _check(_primary([_delivery("d1", "e1", "s-ok", "done")]),
                    [{"key": "k1", "event": "e1"}],
                    [{"t": 1, "delivery": "d1", "status": 200, "path": "/ok"}])
    assert result.lost == 1 and result.lost_detail[0][0] == "no delivery for a subscription"


def test_sending_and_overdue_pending_are_stuck_but_a_pending_not_yet_due_is_not():
    primary = _primary([
        _delivery("d1", "e1", "s-ok", "sending"),
        _delivery("d2", "e1", "s-fail", "pending", due=NOW - 60),
        _delivery("d3", "e2", "s-ok", "pending", due=NOW + 1),
        _delivery("d4", "e2", "s-fail", "pending", due=NOW - 60),
    ])
    assert _check(primary, [], []).stuck == 3


def test_a_duplicate_is_explained_by_the_latest_fault_whose_window_holds_it():
    faults = [{"name": "first", "start": 0, "end": 30}, {"name": "second", "start": 35, "end": 40},
              {"name": "third", "start": 100, "end": 110}]
    received = [{"t": t, "delivery": d, "status": 200, "path": "/ok"}
                for t, d in [(1, "a"), (20, "a"), (36, "b"), (38, "b"), (60, "c"), (90, "c")]]
    primary = _primary([_delivery(d, "e", "s-ok", "done") for d in "abc"])
    result = _check(primary, [], received, faults)
    assert result.duplicates == 3
    assert result.explained == {"first": 1, "second": 1}
    assert result.unexplained == ["c"]


def test_the_sweep_runs_per_interval_with_misses_and_refusals_put_down_to_faults():
    # Slots of 5 s from 100 to 130: 100 and 105 ran (105 with two sends refused), 110 and
    # 115 missed within a fault, 120 missed outside every fault, 125 and 130 ran.
    rows = [{"slot": 100.0, "refused": 0}, {"slot": 105.0, "refused": 2},
            {"slot": 125.0, "refused": 0}, {"slot": 130.0, "refused": 1},
            {"slot": 50.0, "refused": 3}]  # before the load: in the whole run's total only
    faults = [{"name": "beat-restart", "start": 104.0, "end": 106.0},
              {"name": "redis-primary-kill", "start": 111.0, "end": 117.0}]
    logs = ("webhooks.sweep: the run of slot x was made already (by a); this one (b)\n" * 6
            + "webhooks.sweep: the run of slot x starts 6.6 s after its slot ended; it does\n")
    runs = sweep_runs(rows, 5, start=98.0, end=131.0, faults=faults, worker_log_text=logs)
    assert (runs.slots, runs.once) == (7, 4)
    assert runs.missed == {"redis-primary-kill": 2, "none": 1}
    assert (runs.refused, runs.refused_in) == (3, {"beat-restart": 2, "none": 1})
    assert (runs.refused_total, runs.logged_refusals, runs.late) == (6, 6, 1)
    assert runs.line().startswith("cluster: sweep runs per 5 s interval: 7 intervals, 4 run "
                                  "exactly once, none twice, missed redis-primary-kill 2, none 1")
