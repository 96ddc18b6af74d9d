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
    # 115 had none within a fault, 120 none outside every fault, 125 and 130 ran: 130 by a
    # late run sent for 120, which started 6.6 s after its slot ended (logged twice: the
    # run and its retry); a late run sent for 115 found the sweep of 125 started.
    rows = [{"slot": 100.0, "run_id": "a", "refused": 0, "into": 0.1},
            {"slot": 105.0, "run_id": "b", "refused": 2, "into": 0.3},
            {"slot": 125.0, "run_id": "c", "refused": 0, "into": 0.2},
            {"slot": 130.0, "run_id": "late-120", "refused": 1, "into": 1.6},
            {"slot": 50.0, "run_id": "d", "refused": 3, "into": 4.0}]  # before the load: in the
    # total of refusals only
    faults = [{"name": "beat-restart", "start": 104.0, "end": 106.0},
              {"name": "redis-primary-kill", "start": 111.0, "end": 117.0}]
    logs = ("webhooks.sweep: the run of slot x was made already (by a); this one (b)\n" * 6
            + "webhooks.sweep: the run of slot 120 (late-120) starts 6.6 s after its slot "
              "ended; it claims the slot of now, 130, instead\n" * 2
            + "webhooks.sweep: the run of slot 115 (late-115) starts 9 s after its slot "
              "ended; it claims the slot of now, 125, instead\n")
    runs = sweep_runs(rows, 5, start=98.0, end=131.0, faults=faults, worker_log_text=logs)
    assert (runs.slots, runs.once, runs.by_late) == (7, 4, 1)
    assert runs.missed == {"redis-primary-kill": 2, "none": 1}
    assert (runs.refused, runs.refused_in) == (3, {"beat-restart": 2, "none": 1})
    assert (runs.refused_total, runs.logged_refusals) == (6, 6)
    assert (runs.late, runs.late_swept, runs.latest_s) == (2, 1, 9.0)
    assert runs.line() == (
        "cluster: sweep runs per 5 s interval: 7 intervals, 4 with one sweep started in it "
        "(1 of them by a late run; started 0.25 s into it at the median, 1.6 s at most), none with two, 3 with none (redis-primary-kill 2, none 1); "
        "3 sends refused (beat-restart 2, none 1); over the whole run 6 refused, 6 in the "
        "workers' logs; 2 runs started after their interval ended (the latest 9 s after): "
        "1 swept in the interval they started in, 1 refused (a sweep had started in it)")


def test_every_interval_swept_says_none_without_one():
    rows = [{"slot": float(slot), "run_id": f"r{slot}", "refused": 0, "into": 0.5}
            for slot in (100, 105)]
    line = sweep_runs(rows, 5, start=99.0, end=106.0, faults=[]).line()
    assert "2 intervals, 2 with one sweep started in it (0 of them by a late run; started 0.5 s " \
           "into it at the median, 0.5 s at most), none with two, 0 with none; 0 sends refused " \
           "(none in a fault)" in line
