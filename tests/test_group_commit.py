"""Group commit (lifecycle/group_commit.py, storage/batched.py): the claims, and the records
of plain successes, of concurrent attempts run as one statement and one commit, each
exactly as it would run alone.

The rules are checked through the real engines (``any_db``: SQLite in the fast tier,
PostgreSQL in the full suite): each scenario is built twice, run once as one batch and
once one by one, and the two must leave the same answers and the same rows.
"""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from sqlalchemy import select, update

from tests.factories import make_account, make_subscription
from tests.support.threads import started_thread, wait_for
from webhooks.emit import emit_event
from webhooks.events.samples import sample_data
from webhooks.lifecycle.claim import Caps, claim, claim_many
from webhooks.lifecycle.group_commit import Group
from webhooks.lifecycle.policy import Rules, next_step
from webhooks.lifecycle.record import groups, record, record_many
from webhooks.sender.post import AttemptResult
from webhooks.services import attempt as attempt_module
from webhooks.storage.backends import backend_of
from webhooks.storage.db import attempt_transaction, get_attempt_engine, session_scope
from webhooks.storage.models import Attempt, Delivery, Subscription, utcnow

RULES = Rules((60, 300), countdown_limit=300, pause_after=25)
NO_CAPS = Caps(0, 0, 0)


# ------------------------------------------------------------------ the Group itself

class _Blocking:
    """run_one and run_batch of a Group; the first item alone blocks until released, so
    that the callers after it wait, and come together."""

    def __init__(self, fail_batch: bool = False, fail_item=None):
        self.calls, self.release, self.started = [], threading.Event(), threading.Event()
        self.fail_batch, self.fail_item = fail_batch, fail_item

    def one(self, item):
        self.calls.append(("one", item))
        if item == 0:
            self.started.set()
            self.release.wait(10)
        if item == self.fail_item:
            raise LookupError(f"item {item}")
        return item * 10

    def batch(self, items):
        self.calls.append(("batch", tuple(sorted(items))))
        if self.fail_batch:
            raise RuntimeError("the batch failed")
        return [item * 10 for item in items]


def _run_together(group: Group, runner: _Blocking, count: int) -> dict:
    """Call ``group`` with 0 (which blocks), then 1..count-1 while it blocks; every answer
    (or the exception raised) by item."""
    answers: dict = {}

    def call(item):
        try:
            answers[item] = group(item)
        except Exception as exc:  # noqa: BLE001 - the caller's own error is the answer
            answers[item] = exc
        except BaseException:  # noqa: BLE001 - an interruption ends only its own caller
            pass

    threads = [started_thread(lambda: call(0))]
    runner.started.wait(10)
    threads += [started_thread(lambda i=i: call(i)) for i in range(1, count)]
    wait_for(lambda: len(group._waiting) == count - 1, "the others waiting")
    runner.release.set()
    for thread in threads:
        thread.join(10)
    return answers


def test_an_item_alone_runs_at_once_and_those_that_came_meanwhile_run_together():
    runner = _Blocking()
    group = Group("things", runner.batch, runner.one, lambda: 32)
    answers = _run_together(group, runner, 5)
    assert answers == {i: i * 10 for i in range(5)}
    assert runner.calls == [("one", 0), ("batch", (1, 2, 3, 4))]
    assert group._busy is False and group._waiting == []


def test_a_batch_holds_at_most_the_limit():
    runner = _Blocking()
    group = Group("things", runner.batch, runner.one, lambda: 2)
    answers = _run_together(group, runner, 6)
    assert answers == {i: i * 10 for i in range(6)}
    batches = [items for kind, items in runner.calls if kind == "batch"]
    alone = [item for kind, item in runner.calls if kind == "one"]
    # 0 alone; then the five that waited: two, two, and the last one alone.
    assert sorted(len(items) for items in batches) == [2, 2] and len(alone) == 2
    assert sorted([*alone, *(i for items in batches for i in items)]) == list(range(6))


def test_a_failed_batch_runs_each_item_alone_and_each_caller_gets_its_own_answer():
    runner = _Blocking(fail_batch=True, fail_item=3)
    group = Group("things", runner.batch, runner.one, lambda: 32)
    answers = _run_together(group, runner, 5)
    assert [answers[i] for i in (0, 1, 2, 4)] == [0, 10, 20, 40]
    assert isinstance(answers[3], LookupError) and str(answers[3]) == "item 3"
    assert runner.calls[:2] == [("one", 0), ("batch", (1, 2, 3, 4))]
    assert sorted(item for kind, item in runner.calls[2:]) == [1, 2, 3, 4]


def test_an_interrupted_batch_leaves_no_caller_waiting_and_the_group_goes_on():
    class Interrupted(BaseException):
        pass

    runner = _Blocking()

    def batch(items):
        raise Interrupted()

    group = Group("things", batch, runner.one, lambda: 32)
    answers = _run_together(group, runner, 4)
    assert answers[0] == 0
    interrupted = [item for item in (1, 2, 3) if item not in answers]  # the leader's own
    assert len(interrupted) == 1
    assert all(isinstance(answers[i], RuntimeError) for i in (1, 2, 3) if i in answers)
    assert group(7) == 70 and group._busy is False  # not stuck


def test_a_batch_that_forms_behind_another_lingers_for_more_up_to_the_limit():
    """The lead handed on after a batch waits (up to its linger) until the limit is
    reached: here 1 waits for 2 and 3, and the three run together."""
    runner = _Blocking()
    group = Group("things", runner.batch, runner.one, lambda: 3, lambda: 30.0)
    answers: dict = {}
    threads = [started_thread(lambda: answers.__setitem__(0, group(0)))]
    runner.started.wait(10)
    threads.append(started_thread(lambda: answers.__setitem__(1, group(1))))
    wait_for(lambda: len(group._waiting) == 1, "1 waiting")
    runner.release.set()
    threads[0].join(10)
    assert 1 not in answers  # lingering for more
    threads += [started_thread(lambda i=i: answers.__setitem__(i, group(i))) for i in (2, 3)]
    for thread in threads:
        thread.join(10)
    assert answers == {0: 0, 1: 10, 2: 20, 3: 30}
    assert runner.calls == [("one", 0), ("batch", (1, 2, 3))]


def test_a_limit_of_one_runs_every_item_alone():
    runner = _Blocking()
    group = Group("things", runner.batch, runner.one, lambda: 1)
    answers = _run_together(group, runner, 4)
    assert answers == {i: i * 10 for i in range(4)}
    assert all(kind == "one" for kind, _ in runner.calls)


# ------------------------------------------------------------------ claims, through the engines

@pytest.fixture
def engines(any_db, published):
    return any_db


def _emit(account_id, **options) -> str:
    (delivery_id,) = emit_event(account_id, "email.sent", sample_data("email.sent"),
                                **options).delivery_ids
    return delivery_id


def _set(table, row_id, **values) -> None:
    with session_scope() as session:
        session.execute(update(table).where(table.id == row_id).values(**values))


def _state(delivery_id) -> tuple:
    with session_scope() as session:
        d = session.get(Delivery, delivery_id)
        return d.status, d.attempt_count, d.parked, d.behind_key, d.next_attempt_at is None


def _claims_scenario():
    """Deliveries that meet every rule of the claim; (what to claim, caps, ids)."""
    account_id, _ = make_account("claims")
    capped = make_subscription(account_id, "https://example.com/capped", event_types=["email.sent"])
    _set(Subscription, capped.id, max_in_flight=2)
    paused = make_subscription(account_id, "https://example.com/paused", event_types=["email.opened"])
    deleted = make_subscription(account_id, "https://example.com/deleted",
                                event_types=["email.clicked"])
    keyed_account, _ = make_account("keyed")
    make_subscription(keyed_account, "https://example.com/keyed")
    capped_ids = [_emit(account_id) for _ in range(4)]  # the cap is 2
    held = emit_event(account_id, "email.opened", sample_data("email.opened")).delivery_ids[0]
    gone = emit_event(account_id, "email.clicked", sample_data("email.clicked")).delivery_ids[0]
    _set(Subscription, paused.id, status="paused")  # after emit: its delivery is pending
    _set(Subscription, deleted.id, deleted_at=utcnow())
    keyed = [_emit(keyed_account, ordering_key="order-7") for _ in range(3)]
    wanted = [(d, 0) for d in capped_ids[:3]] + [(held, 0), (gone, 0)] + [(d, 0) for d in keyed]
    wanted += [(capped_ids[0], 0), (capped_ids[3], 4)]  # a duplicate message, a stale count
    return wanted, Caps(0, 0, 0), [*capped_ids, held, gone, *keyed]


def _account_cap_scenario():
    account_id, _ = make_account("account-cap")
    ids = []
    for n in range(3):
        make_subscription(account_id, f"https://example.com/{n}")
    for _ in range(2):
        ids += emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids
    return [(d, 0) for d in ids], Caps(0, 0, 4), ids


def _answers(claims) -> list:
    return [None if c is None else (c.attempt_number, c.ordering_key, c.key_sequence)
            for c in claims]


def _claim_alone(wanted, caps, now):
    claimed = []
    for delivery_id, count in wanted:
        with attempt_transaction(get_attempt_engine()) as connection:
            claimed.append(claim(connection, delivery_id, count, now, caps))
    return claimed


def _claim_together(wanted, caps, now):
    with attempt_transaction(get_attempt_engine()) as connection:
        return claim_many(connection, [(d, count, caps) for d, count in wanted], now)


@pytest.mark.parametrize("scenario", [_claims_scenario, _account_cap_scenario])
def test_a_batch_of_claims_gives_each_what_it_would_get_alone(engines, scenario):
    """Limits on attempts in flight (a subscription's own and an account's), a paused and
    a deleted subscription, an ordering key, a duplicate message and a stale count: the
    batch claims, turns away and leaves alone exactly what one claim after another does."""
    results = []
    for run in (_claim_alone, _claim_together):
        wanted, caps, ids = scenario()
        claimed = run(wanted, caps, utcnow())  # after the scenario: every delivery is due
        results.append((_answers(claimed), [_state(d) for d in ids]))
    assert results[0] == results[1]
    answers, _ = results[1]
    assert any(a is None for a in answers) and any(a is not None for a in answers)


def test_the_claims_scenario_is_what_the_rules_say(engines):
    """The expected outcome itself, so that both paths cannot be wrong together."""
    wanted, caps, ids = _claims_scenario()
    claimed = _claim_together(wanted, caps, utcnow())
    assert [c is not None for c in claimed] == [
        True, True, False,  # the subscription's cap of 2
        False, False,  # paused, deleted
        True, False, False,  # one key: the first, the others behind it
        False, False]  # the duplicate message, the stale count
    states = [_state(d)[:4] for d in ids]
    assert states[:4] == [("sending", 1, False, False)] * 2 + [("pending", 0, True, False),
                                                                ("pending", 0, False, False)]
    assert states[4][0] == "paused" and states[5][0] == "failed"
    assert states[6][0] == "sending" and states[7][3] is True and states[8][3] is True


# ------------------------------------------------------------------ records, through the engines

def _records_scenario():
    """A subscription with a failure counted and three attempts in flight, two deliveries
    waiting for a free slot; the successes of the three attempts (one recorded twice)."""
    account_id, _ = make_account("records")
    subscription = make_subscription(account_id, "https://example.com/records")
    _set(Subscription, subscription.id, max_in_flight=3, consecutive_failures=1)
    ids = [_emit(account_id) for _ in range(5)]
    now = utcnow()
    claimed = [c for c in _claim_alone([(d, 0) for d in ids], NO_CAPS, now)
               if c is not None]
    assert len(claimed) == 3
    attempts = []
    # In the order a batch runs them (by subscription, then delivery: every batch takes a
    # subscription's rows in one order), so that one by one runs them in the same order.
    for c in sorted([*claimed, claimed[1]], key=lambda c: c.delivery_id):
        step = next_step(c.attempt_number, 200, c.event_type, RULES)
        assert groups(c, step)
        attempts.append(dict(claim=c, step=step, rules=RULES, started_at=now, now=now,
                             duration_ms=5, status_code=200, error=None, excerpt="ok"))
    return attempts, ids, subscription.id


def _record_alone(attempts):
    done = []
    for one in attempts:
        with attempt_transaction(get_attempt_engine()) as connection:
            done.append(record(connection, **one))
    return done


def _record_together(attempts):
    with attempt_transaction(get_attempt_engine()) as connection:
        return record_many(connection, attempts)


def _record_state(ids, subscription_id) -> tuple:
    with session_scope() as session:
        attempts = session.scalars(select(Attempt.status_code)
                                   .where(Attempt.delivery_id.in_(ids))).all()
        failures = session.get(Subscription, subscription_id).consecutive_failures
    return [_state(d)[:4] for d in ids], sorted(attempts), failures


def test_a_batch_of_records_gives_each_what_it_would_get_alone(engines):
    """Each success releases one delivery waiting for the slot it frees, the counter of
    failures is reset once, and a record whose claim was recorded already changes
    nothing: the same as one record after another."""
    results = []
    for run in (_record_alone, _record_together):
        attempts, ids, subscription_id = _records_scenario()
        done = run(attempts)
        # Which record released which waiting delivery follows the ids' order, which differs
        # between the two runs: compare what each run did as a whole.
        results.append((sorted(str(r and r.status) for r in done),
                        sorted(str(r and len(r.released)) for r in done),
                        _record_state(ids, subscription_id)))
    assert results[0] == results[1]
    statuses, released, (states, attempts, failures) = results[1]
    assert statuses == ["None", "done", "done", "done"] and released == ["0", "1", "1", "None"]
    assert attempts == [200, 200, 200] and failures == 0
    assert [s[0] for s in states[3:]] == ["pending", "pending"]  # released: due now


def _keyed_records_scenario():
    """Two keys of one subscription, two deliveries each: the heads in flight, the second of
    each turned away behind its head; the successes of the heads."""
    account_id, _ = make_account("keyed-records")
    make_subscription(account_id, "https://example.com/keyed")
    ids = [_emit(account_id, ordering_key=key) for key in ("a", "b", "a", "b")]
    now = utcnow()
    claimed = _claim_alone([(d, 0) for d in ids], NO_CAPS, now)
    assert [c is not None for c in claimed] == [True, True, False, False]
    attempts = []
    for c in sorted(claimed[:2], key=lambda c: c.delivery_id):
        step = next_step(c.attempt_number, 200, c.event_type, RULES)
        assert groups(c, step)  # a keyed success groups: its release is in its statement
        attempts.append(dict(claim=c, step=step, rules=RULES, started_at=now, now=now,
                             duration_ms=5, status_code=200, error=None, excerpt="ok"))
    return attempts, ids


def test_a_batch_of_keyed_successes_releases_each_key_as_alone(engines):
    results = []
    for run in (_record_alone, _record_together):
        attempts, ids = _keyed_records_scenario()
        done = run(attempts)
        results.append(([r.status for r in done],
                         sorted(ids.index(d.delivery_id) for r in done for d in r.released),
                         [_state(d)[:4] for d in ids]))
    assert results[0] == results[1]
    statuses, released, states = results[1]
    assert statuses == ["done", "done"]
    assert released == [2, 3]  # each head's record sent the next of its key
    assert states[2:] == [("pending", 0, False, False)] * 2  # due now, no longer behind


def test_a_record_that_is_not_a_plain_success_is_refused_by_the_batch(engines):
    attempts, _, _ = _records_scenario()
    failed = dict(attempts[0], step=next_step(1, 500, "email.sent", RULES), status_code=500)
    assert not groups(failed["claim"], failed["step"])
    with pytest.raises(ValueError, match="runs alone"):
        _record_together([attempts[1], failed])


# ------------------------------------------------------------------ the attempt path

class _Sender:
    def __init__(self):
        self.sent = []

    def __call__(self, url, body, headers):
        self.sent.append(url)
        return AttemptResult(status_code=200, error=None, duration_ms=1)


def test_concurrent_attempts_claim_together_and_a_failed_batch_falls_back(engines, monkeypatch):
    """Five attempts come while a first one claims: the five claim in one batch. When a
    batch fails, each of its attempts claims alone: every delivery is sent once and
    recorded once either way."""
    monkeypatch.setattr(attempt_module, "_claims", lambda: group)
    account_id, _ = make_account("concurrent")
    make_subscription(account_id, "https://example.com/concurrent")
    backend = backend_of(get_attempt_engine())
    batches, real_claim_many = [], backend.claim_many
    first_in, let_go = threading.Event(), threading.Event()
    real_alone = attempt_module._claim_alone

    def alone(item):
        if not first_in.is_set():
            first_in.set()
            let_go.wait(10)
        return real_alone(item)

    for fail in (False, True):
        first_in.clear(), let_go.clear()
        group = Group("claims", attempt_module._claim_batch, alone, lambda: 32)
        ids = [_emit(account_id) for _ in range(6)]

        def claim_many_spy(connection, items, statements, fail=fail):
            batches.append(len(items))
            if fail:
                raise RuntimeError("the batch failed")
            return real_claim_many(connection, items, statements)

        monkeypatch.setattr(backend, "claim_many", claim_many_spy)
        sender = _Sender()
        threads = [started_thread(lambda d=d: attempt_module.run_attempt(d, 0, sender=sender))
                   for d in ids[:1]]
        first_in.wait(10)
        threads += [started_thread(lambda d=d: attempt_module.run_attempt(d, 0, sender=sender))
                    for d in ids[1:]]
        wait_for(lambda: len(group._waiting) == 5, "five claims waiting")
        let_go.set()
        for thread in threads:
            thread.join(20)
        assert batches[-1] == 5
        assert len(sender.sent) == 6
        assert [_state(d)[:2] for d in ids] == [("done", 1)] * 6
    with session_scope() as session:
        assert len(session.scalars(select(Attempt.id)).all()) == 12


def test_the_batch_limit_is_a_setting(monkeypatch):
    from webhooks.config import get_settings, reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_BATCH_MAX", "7")
    reset_settings_cache()
    assert get_settings().batch_max == 7
    monkeypatch.setenv("WEBHOOKS_BATCH_MAX", "0")
    reset_settings_cache()
    with pytest.raises(Exception, match="WEBHOOKS_BATCH_MAX"):
        get_settings()


def test_a_stale_batch_does_not_claim_twice(engines):
    """A batch whose every message is a duplicate of one already claimed claims nothing."""
    account_id, _ = make_account("stale")
    make_subscription(account_id, "https://example.com/stale")
    ids = [_emit(account_id) for _ in range(3)]
    now = utcnow()
    assert all(_claim_together([(d, 0) for d in ids], NO_CAPS, now))
    later = now + dt.timedelta(seconds=1)
    assert _claim_together([(d, 0) for d in ids], NO_CAPS, later) == [None, None, None]
    assert [_state(d)[:2] for d in ids] == [("sending", 1)] * 3
