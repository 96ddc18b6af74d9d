"""Group commit of emit_event on PostgreSQL (emit.py's ``_emits``, emit_statement.py's
batched statement): calls of one process that come together share one statement and one
commit, and each caller gets exactly what it would get alone.

Each scenario is built twice (two accounts alike), stored once as one batch and once
call by call, and the two must give the same answers and leave the same rows.
"""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError

from tests.factories import make_account, make_subscription
from tests.test_emit_statement import _account_with_every_kind_of_subscription, _deliveries_of
from tests.support.threads import started_thread, wait_for
from webhooks import emit as emit_module
from webhooks.broker import outbox
from webhooks.config import get_settings
from webhooks.errors import InvalidEvent, NotFound
from webhooks.events.samples import sample_data
from webhooks.lifecycle.group_commit import Group
from webhooks.lifecycle.sweep import sweep
from webhooks.storage.db import session_scope
from webhooks.storage.models import Delivery, Event, utcnow

pytestmark = pytest.mark.database

UNKNOWN = "00000000-0000-4000-8000-000000000000"


def _calls(account_id: str) -> list[tuple]:
    """(account, type, idempotency key) of each call of the scenario: each rule of emit,
    an unknown account, a key used before the batch, and a key used twice in it."""
    return [
        (account_id, "email.sent", None),
        (account_id, "test.ping", None),
        (UNKNOWN, "email.sent", None),
        (account_id, "email.sent", "used-before"),
        (account_id, "email.bounced", "twice"),
        (account_id, "email.sent", None),
        (account_id, "email.bounced", "twice"),
    ]


def _values(calls: list[tuple]) -> list[dict]:
    settings = get_settings()
    return [emit_module._statement_values(account, kind, sample_data(kind), key, settings)
            for account, kind, key in calls]


def _scenario() -> tuple[str, dict[str, str], list[dict]]:
    """An account with every kind of subscription and an event with the key ``used-before``;
    the scenario's calls, checked (not stored yet)."""
    account_id, names = _account_with_every_kind_of_subscription()
    emit_module.emit_event(account_id, "email.sent", sample_data("email.sent"),
                           idempotency_key="used-before")
    return account_id, names, _values(_calls(account_id))


def _what(answer, values: dict, all_values: list[dict], names: dict[str, str]) -> tuple:
    """An answer, told without its random ids: which call's event it is (or the event
    stored before the batch), its deliveries' rows, and its messages by subscription."""
    if isinstance(answer, Exception):
        return type(answer).__name__, str(answer).replace(values["account_id"], "ACCOUNT")
    emitted, dispatches = answer[0], answer[1]
    whose = [i for i, v in enumerate(all_values) if v["event_id"] == emitted.id]
    by_id = {v: k for k, v in names.items()}
    with session_scope() as session:
        subscription_of = dict(session.execute(select(Delivery.id, Delivery.subscription_id)
                                               .where(Delivery.event_id == emitted.id)).all())
    assert set(subscription_of) == set(emitted.delivery_ids)
    return (whose or "stored before", emitted.type, emitted.duplicate,
            emitted.created_at.tzinfo is not None,
            [row[:-1] for row in _deliveries_of(emitted.id, names)],  # but the account's id
            sorted((by_id[subscription_of[d.delivery_id]], d.attempt_count) for d in dispatches))


def _counts() -> tuple[int, int]:
    with session_scope() as session:
        return (session.scalar(select(func.count()).select_from(Event)),
                session.scalar(select(func.count()).select_from(Delivery)))


def test_a_batch_gives_each_call_what_it_would_get_alone(db, published):
    alone_account, alone_names, alone_values = _scenario()
    batch_account, batch_names, batch_values = _scenario()
    before = _counts()

    def run_alone(values):
        try:
            return emit_module._emit_alone(values)
        except NotFound as exc:
            return exc

    alone = [run_alone(values) for values in alone_values]
    stored_alone = _counts()
    batch = emit_module._emit_batch(batch_values)
    published.settled()

    assert ([_what(a, v, alone_values, alone_names) for a, v in zip(alone, alone_values)]
            == [_what(a, v, batch_values, batch_names) for a, v in zip(batch, batch_values)])
    # The same rows were added both ways.
    after = _counts()
    assert (after[0] - stored_alone[0], after[1] - stored_alone[1]) == (
        stored_alone[0] - before[0], stored_alone[1] - before[1])
    # The scenario exercised what it means to: an unknown account, a duplicate of an
    # earlier event, and, within the batch, the second call with a key given the first's event.
    assert isinstance(batch[2], NotFound)
    assert batch[3][0].duplicate and batch[3][1] == []
    first, second = batch[4][0], batch[6][0]
    assert (second.id, second.delivery_ids, second.duplicate) == (first.id, first.delivery_ids, True)
    assert first.duplicate is False and first.id == batch_values[4]["event_id"] and first.delivery_ids
    assert batch[6][1] == [] and batch[4][1]
    # Every message of the batch went in one submission to the publisher, once committed.
    submitted = {answer[2] for answer in batch if not isinstance(answer, Exception)}
    assert len(submitted) == 1 and submitted.pop().is_set()
    assert sorted(d.delivery_id for d in published.settled()[-_sent(batch):]) == sorted(
        d.delivery_id for a in batch if not isinstance(a, Exception) for d in a[1])


def _sent(answers) -> int:
    return sum(len(a[1]) for a in answers if not isinstance(a, Exception))


# ------------------------------------------------------------------ through the Group

class _Together:
    """A fresh group of emits whose first call, alone, blocks until let go, so that the
    calls made meanwhile come together; and the sizes of the batches stored."""

    def __init__(self, monkeypatch, fail=None):
        self.first_in, self.let_go, self.batches = threading.Event(), threading.Event(), []
        self.group = Group("emits", emit_module._emit_batch, self._alone, lambda: 32)
        monkeypatch.setattr(emit_module, "_emits", lambda: self.group)
        real = emit_module.store_many_in_one_statement

        def store_many(connection, items):
            self.batches.append(len(items))
            if fail is not None:
                return fail(connection, items, real)
            return real(connection, items)

        monkeypatch.setattr(emit_module, "store_many_in_one_statement", store_many)

    def _alone(self, values):
        if not self.first_in.is_set():
            self.first_in.set()
            self.let_go.wait(10)
        return emit_module._emit_alone(values)

    def emit(self, calls: list[tuple]) -> list:
        """Make the first call, then the others while it blocks; each one's answer (the
        EmittedEvent, or the exception it raised), in order."""
        answers: list = [None] * len(calls)

        def call(i):
            account, kind, key = calls[i]
            try:
                answers[i] = emit_module.emit_event(account, kind, sample_data(kind),
                                                    idempotency_key=key)
            except Exception as exc:  # noqa: BLE001 - the caller's own error is its answer
                answers[i] = exc

        threads = [started_thread(lambda: call(0))]
        self.first_in.wait(10)
        threads += [started_thread(lambda i=i: call(i)) for i in range(1, len(calls))]
        wait_for(lambda: len(self.group._waiting) == len(calls) - 1, "the others waiting")
        self.let_go.set()
        for thread in threads:
            thread.join(20)
        return answers


def _told(answers, account_id) -> list:
    """Answers without their random ids: the error, or (type, duplicate, deliveries). The
    last two calls share an idempotency key: whichever came first to the group is
    stored, the other is its duplicate (their order, as alone, is their arrival's)."""
    told = [(type(a).__name__, str(a).replace(account_id, "A")) if isinstance(a, Exception)
            else (a.type, a.duplicate, len(a.delivery_ids)) for a in answers]
    assert answers[-1].id == answers[-2].id
    assert answers[-1].delivery_ids == answers[-2].delivery_ids
    return told[:-2] + sorted(told[-2:])


def test_calls_that_come_together_share_one_statement(db, published, monkeypatch):
    account_id, _ = make_account("together")
    make_subscription(account_id, "https://example.com/a")
    make_subscription(account_id, "https://example.com/b")
    together = _Together(monkeypatch)
    calls = [(account_id, "email.sent", None)] * 6 + [(UNKNOWN, "email.sent", None),
                                                      (account_id, "email.sent", "k"),
                                                      (account_id, "email.sent", "k")]
    answers = together.emit(calls)
    assert together.batches == [8]  # the first alone, the eight that came meanwhile together
    assert _told(answers, account_id) == (
        [("email.sent", False, 2)] * 6
        + [("NotFound", f"account {UNKNOWN} does not exist")]
        + [("email.sent", False, 2), ("email.sent", True, 2)])
    assert _counts() == (7, 14)
    # Each caller returned once its own messages were published: two each, none twice.
    sent = [d.delivery_id for d in published.settled()]
    assert sorted(sent) == sorted(d for a in answers if not isinstance(a, Exception)
                                  and not a.duplicate for d in a.delivery_ids)


@pytest.mark.parametrize("failure", ["fails", "commits, then loses its connection"])
def test_a_failed_batch_stores_each_call_alone(db, published, monkeypatch, failure):
    """A batch that fails runs each call alone, each with its own answer; one whose
    commit went through before its connection was lost stores nothing twice: each call
    alone finds its event by id, and its messages are still published."""
    account_id, _ = make_account("fallback")
    make_subscription(account_id, "https://example.com/a")

    def fail(connection, items, real):
        if failure != "fails":
            real(connection, items)
            connection.invalidate()
            raise OperationalError("SELECT webhooks_emits", {}, Exception("connection lost"),
                                   connection_invalidated=True)
        raise RuntimeError("the batch failed")

    together = _Together(monkeypatch, fail=fail)
    calls = [(account_id, "email.sent", None)] * 3 + [(UNKNOWN, "email.sent", None),
                                                      (account_id, "email.sent", "k"),
                                                      (account_id, "email.sent", "k")]
    answers = together.emit(calls)
    assert together.batches == [5]
    assert _told(answers, account_id) == (
        [("email.sent", False, 1)] * 3 + [("NotFound", f"account {UNKNOWN} does not exist")]
        + [("email.sent", False, 1), ("email.sent", True, 1)])
    assert _counts() == (4, 4)
    assert sorted(d.delivery_id for d in published.settled()) == sorted(
        a.delivery_ids[0] for a in answers if not isinstance(a, Exception) and not a.duplicate)


def test_a_bad_call_is_refused_before_it_joins_a_batch(db, published, monkeypatch):
    """Its InvalidEvent is raised in its caller's thread at once, even while a batch runs."""
    account_id, _ = make_account("refused")
    together = _Together(monkeypatch)
    first = started_thread(lambda: emit_module.emit_event(account_id, "email.sent",
                                                   sample_data("email.sent")))
    together.first_in.wait(10)
    try:
        with pytest.raises(InvalidEvent):
            emit_module.emit_event(account_id, "no.such.type", {})
        assert together.group._waiting == []
    finally:
        together.let_go.set()
        first.join(10)
    assert together.batches == []


def test_a_call_alone_runs_at_once_as_before(db, monkeypatch):
    """No batch is running: the call stores alone, at once, in the one statement it always
    used, and publishes its own messages itself."""
    account_id, _ = make_account("alone")
    make_subscription(account_id, "https://example.com/a")
    group = Group("emits", emit_module._emit_batch, emit_module._emit_alone, lambda: 32,
                  lambda: 10.0)  # a linger that a call alone would feel, if it waited
    monkeypatch.setattr(emit_module, "_emits", lambda: group)
    statements = []
    real_one = emit_module.store_in_one_statement
    monkeypatch.setattr(emit_module, "store_in_one_statement",
                        lambda connection, **v: statements.append("one") or real_one(connection, **v))
    monkeypatch.setattr(emit_module, "store_many_in_one_statement",
                        lambda *a: statements.append("many"))
    published = []
    monkeypatch.setattr(outbox, "publish",
                        lambda items, timeout=None: published.extend(items) or True)
    for _ in range(3):
        started = dt.datetime.now()
        emitted = emit_module.emit_event(account_id, "email.sent", sample_data("email.sent"))
        assert (dt.datetime.now() - started).total_seconds() < 2
        assert [d.delivery_id for d in published[-1:]] == list(emitted.delivery_ids)
    assert statements == ["one"] * 3


def test_many_threads_emitting_at_once_share_statements(db, published, monkeypatch):
    """Free-running: 8 threads emitting 25 events each store them in fewer statements than
    calls, and every event is stored once with its delivery, its message published once."""
    account_id, _ = make_account("many-threads")
    make_subscription(account_id, "https://example.com/a")
    sizes = []  # the process's own group (_emits), as emit_event uses it
    real = emit_module.store_many_in_one_statement
    monkeypatch.setattr(emit_module, "store_many_in_one_statement",
                        lambda connection, items: sizes.append(len(items)) or real(connection, items))
    start, ids, lock = threading.Barrier(8), [], threading.Lock()

    def emitter():
        start.wait(10)
        for _ in range(25):
            emitted = emit_module.emit_event(account_id, "email.sent", sample_data("email.sent"))
            with lock:
                ids.extend(emitted.delivery_ids)

    threads = [started_thread(emitter) for _ in range(8)]
    for thread in threads:
        thread.join(60)
    assert len(ids) == len(set(ids)) == 200 and _counts() == (200, 200)
    assert sorted(d.delivery_id for d in published.settled()) == sorted(ids)
    assert sizes and max(sizes) > 1 and sum(sizes) > len(sizes)


def test_a_batch_committed_but_never_published_is_sent_by_the_sweep(db, published, monkeypatch):
    """The process dies after its batch committed, before publishing: the deliveries are
    pending and due, and the sweep sends each once WEBHOOKS_RECOVER_AFTER has passed."""
    account_id, _ = make_account("died")
    make_subscription(account_id, "https://example.com/a")
    monkeypatch.setattr(outbox, "submit_unless_down", lambda items: threading.Event())  # never published
    answers = emit_module._emit_batch(_values([(account_id, "email.sent", None)] * 3))
    ids = sorted(a[0].delivery_ids[0] for a in answers)
    assert published.settled() == []
    later = utcnow() + dt.timedelta(seconds=get_settings().recover_after + 1)
    with session_scope() as session:
        assert sweep(session, utcnow(), timeout=15, recover_after=120, batch=100) == []
        found = sweep(session, later, timeout=15, recover_after=get_settings().recover_after,
                      batch=100)
    assert sorted(d.delivery_id for d in found) == ids


def test_keyed_calls_do_not_join_the_group(db, published, monkeypatch):
    """An ordering key takes the session's path, as before (its sequence is one more
    statement): the group never sees it."""
    account_id, _ = make_account("keyed")
    make_subscription(account_id, "https://example.com/a")
    seen = []
    monkeypatch.setattr(emit_module, "_emits", lambda: seen.append(1))
    emitted = emit_module.emit_event(account_id, "email.sent", sample_data("email.sent"),
                                     ordering_key="order-1")
    assert seen == [] and len(emitted.delivery_ids) == 1
