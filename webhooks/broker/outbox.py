"""The one way to the broker: what goes to it, when, and how.

Messages carry only ``(delivery_id, attempt_count)``; the database holds the
rest. A change that makes deliveries sendable returns
:class:`~webhooks.lifecycle.dispatch.Dispatch` items; the caller hands them
here, never to Celery:

- :func:`publish_now`: the worker, after its record committed: publish in
  this thread; what the broker refuses is parked for the sweep.
- :func:`publish`: ``emit_event()`` after its commit: the process's publisher
  thread sends whatever its callers submitted meanwhile in one pipelined
  batch; the caller waits until the broker took them or they were parked
  (CONTRACT 9.1: a script that emits and exits at once must not leave its
  publish to the interpreter's shutdown, when kombu's lazy imports fail).
- :func:`publish_after_commit`: ``emit_event(session=…)`` and the web app:
  published by the publisher once the session's transaction commits, the
  commit returning after the broker took them or they were parked; forgotten
  if it rolls back (a worker must never look for a row it cannot see yet).
- :func:`request_sweep` and :func:`request_sweep_after_commit`: ask a worker
  to sweep now (a recover).
- :func:`request_release` and :func:`request_release_after_commit`: ask a
  worker for the next batch of what a resume released (lifecycle/release.py).

Publishing never raises: a broker that is down costs the caller at most about
``WEBHOOKS_PUBLISH_TIMEOUT`` seconds once (:func:`publish_wait` when it cannot
be reached at all), then publishing is skipped for ``BROKER_DOWN_BACKOFF_S``
seconds, and what was not sent is parked for the sweep. What a crash loses
before it is published is still pending in the database, and the sweep
re-sends it after WEBHOOKS_RECOVER_AFTER seconds.

:func:`on_commit` is the one after-commit mechanism, on SQLAlchemy's session
events, for the core and the web app alike. The Celery app itself is in
webhooks/broker/celery_app.py.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue as queue_module
import threading
import time
from typing import Callable, Iterable, Sequence

from kombu.utils.uuid import uuid
from sqlalchemy import event as sa_event
from sqlalchemy.orm import Session, scoped_session

from webhooks.broker import celery_app as broker_app
from webhooks.config import get_settings
from webhooks.lifecycle import transitions
from webhooks.lifecycle.dispatch import Dispatch
from webhooks.storage.db import session_scope
from webhooks.storage.models import utcnow

__all__ = ["send_to_broker", "request_sweep", "request_release", "publish_now", "park",
           "publish", "submit", "wait_published", "submit_unless_down", "publish_wait", "flush",
           "BackgroundPublisher", "on_commit", "publish_after_commit", "request_sweep_after_commit",
           "request_release_after_commit"]

log = logging.getLogger("webhooks.outbox")  # its name from before the move: log searches use it

BROKER_DOWN_BACKOFF_S = 5.0
_ACTIONS = "webhooks_after_commit"
_HOOKED = "webhooks_after_commit_hooked"


# --- Sending: one pipelined round trip per batch, skipped while the broker is down.

_state_lock = threading.Lock()
_broker_down_until = 0.0


def _broker_marked_down() -> bool:
    return time.monotonic() < _broker_down_until


def _mark_broker_down() -> None:
    global _broker_down_until
    with _state_lock:
        _broker_down_until = time.monotonic() + BROKER_DOWN_BACKOFF_S


PUBLISH_BATCH = 500  # messages sent to the broker in one round trip


def send_to_broker(dispatches: Iterable) -> list:
    """Send one deliver message per Dispatch; return those that could not be sent.

    Messages go out in pipelined batches (one round trip per batch on
    Redis). On a failure the whole batch counts as not sent, and so does
    everything after it: when the broker is down, every further publish
    would wait out the same time-out. A message of a failed batch that did
    reach the broker is harmless: the claim makes its second copy a no-op.
    """
    pending = list(dispatches)
    if not pending or _broker_marked_down():
        return pending
    sent = 0
    try:
        app = broker_app.get_app()
        with app.producer_or_acquire() as producer:
            for start in range(0, len(pending), PUBLISH_BATCH):
                batch = pending[start:start + PUBLISH_BATCH]
                with producer.batch(max_size=len(batch)):
                    for item in batch:
                        _send_deliver(app, producer, item)
                sent += len(batch)
    except Exception as exc:  # noqa: BLE001 - any broker failure means "park it"
        log.warning("broker publish failed, parking %d deliveries: %s",
                    len(pending) - sent, type(exc).__name__)
        _mark_broker_down()
        return pending[sent:]
    return []


def _send_deliver(app, producer, item) -> None:
    """Publish one deliver message, as ``app.send_task`` would, for less CPU.

    send_task also routes the task through the settings, binds and declares
    the queue again (a copy of the Queue object), and builds a result object
    that nobody reads (docs/performance.md has what that cost). The seam is
    Celery's ``app.amqp`` (celery>=5.4,<6 in setup.cfg), checked against
    send_task's message by tests/test_publish_message.py. The deliver task goes to
    DELIVERY_QUEUE, or COUNTDOWN_QUEUE if it waits a countdown, by the default exchange (the queue's name is the routing key), which needs no
    declaring on Redis or the file broker; every worker declares its queues as
    it starts. The message is Celery's own (create_task_message), and the
    settings' publish retry policy applies, as with send_task.
    """
    task_id = uuid()
    message = app.amqp.create_task_message(
        task_id, broker_app.DELIVER_TASK, (item.delivery_id, item.attempt_count), {},
        countdown=item.countdown, ignore_result=None)
    app.amqp.send_task_message(producer, broker_app.DELIVER_TASK, message,
                               queue=app.amqp.queues[_queue_of(item)], declare=())


def _queue_of(item: Dispatch) -> str:
    """The queue of a deliver message: one that waits a countdown goes apart, so that a
    backlog of due deliveries does not hold it past its time (celery_app.COUNTDOWN_QUEUE)."""
    return broker_app.COUNTDOWN_QUEUE if item.countdown else broker_app.DELIVERY_QUEUE


def request_sweep() -> bool:
    """Ask a worker to sweep now (after a recover); False if the broker is unreachable."""
    return _request(broker_app.SWEEP_TASK, (), "a sweep")


def request_release(subscription_id: str) -> bool:
    """Ask a worker for the next batch of what a resume of this subscription released
    (lifecycle/release.py); False if the broker is unreachable (the sweep sends them)."""
    return _request(broker_app.RELEASE_TASK, (subscription_id,), "a release")


def _request(task: str, args: tuple, what: str) -> bool:
    """Send one message of ``task``; False if the broker is unreachable."""
    if _broker_marked_down():
        return False
    try:
        broker_app.get_app().send_task(task, args=args)
        return True
    except Exception as exc:  # noqa: BLE001
        log.warning("broker publish of %s failed: %s", what, type(exc).__name__)
        _mark_broker_down()
        return False


def park(session: Session, delivery_ids: list[str]) -> None:
    """Hand pending deliveries whose message could not be published to the sweep."""
    transitions.park(session, delivery_ids, utcnow())


def publish_now(dispatches: Sequence[Dispatch]) -> int:
    """Publish each Dispatch in this thread; returns how many were parked (refused)."""
    if not dispatches:
        return 0
    failed = send_to_broker(dispatches)
    if failed:
        with session_scope() as session:
            park(session, [item.delivery_id for item in failed])
    return len(failed)


# --- The process's publisher thread, shared by emit_event's callers.

EXIT_FLUSH_S = 5.0  # how long a finishing process waits for its messages to go out
MAX_BATCH = 5000


def publish_wait() -> float:
    """Seconds a caller of publish() waits at most for its messages: the connection's
    ``WEBHOOKS_PUBLISH_TIMEOUT`` plus the time a broker that accepts but never answers is
    given (celeryconfig's socket time-out, at least 5 s). A broker cut off behind
    Sentinels can hold the publisher far longer (a connection time-out per Sentinel, per
    try): the caller parks its deliveries then instead of waiting for it."""
    timeout = get_settings().publish_timeout
    return timeout + max(timeout, 5.0)


def _park_here(dispatches: Sequence[Dispatch]) -> None:
    """Park ``dispatches`` from the calling thread. Never raises (publishing never does): if
    the database refuses too, they stay pending and the sweep recovers them after
    WEBHOOKS_RECOVER_AFTER."""
    try:
        with session_scope() as session:
            park(session, [item.delivery_id for item in dispatches])
    except Exception:  # noqa: BLE001
        log.exception("parking %d deliveries failed; the sweep will recover them",
                      len(dispatches))


def publish_batch(batch: Sequence) -> int:
    """Publish a batch now, parking what the broker refuses (publish_now)."""
    return publish_now(batch)


class BackgroundPublisher:
    """One daemon thread per process that drains submitted Dispatch items to the broker."""

    def __init__(self):
        self._queue: queue_module.SimpleQueue = queue_module.SimpleQueue()
        self._pid: int | None = None
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._outstanding = 0

    def submit(self, dispatches: Sequence) -> threading.Event:
        """Queue messages for publishing; returns at once, with an event that is set once
        they were published or parked."""
        done = threading.Event()
        if not dispatches:
            done.set()
            return done
        self._ensure_thread()
        with self._lock:
            self._outstanding += len(dispatches)
        self._queue.put((list(dispatches), done))
        return done

    def publish(self, dispatches: Sequence, timeout: float | None = None) -> bool:
        """Publish with whatever other threads submitted meanwhile; return once these were
        published or parked (True), or after ``timeout`` seconds (default
        :func:`publish_wait`; False): then the broker is taken for down and the caller
        parks them itself (:func:`wait_published`). While the broker is taken for down,
        they are parked at once, not queued behind a publish that hangs."""
        return wait_published(self.submit_unless_down(dispatches), dispatches, timeout)

    def submit_unless_down(self, dispatches: Sequence) -> threading.Event | None:
        """:meth:`submit`; or, while the broker is taken for down, park ``dispatches`` here
        at once (None), rather than queue them behind a publish that may hang."""
        if dispatches and _broker_marked_down():
            _park_here(dispatches)
            return None
        return self.submit(dispatches)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything submitted so far was published or parked; False on time-out."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            while self._outstanding:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._idle.wait(remaining)
        return True

    def _ensure_thread(self) -> None:
        # Threads do not survive fork: each process starts its own publisher.
        if self._pid == os.getpid():
            return
        with self._lock:
            if self._pid != os.getpid():
                self._pid = os.getpid()
                self._queue = queue_module.SimpleQueue()
                self._outstanding = 0
                threading.Thread(target=self._run, name="webhooks-publisher", daemon=True).start()

    def _run(self) -> None:
        while True:
            items, done = self._queue.get()
            batch, waiting = list(items), [done]
            while len(batch) < MAX_BATCH:
                try:
                    items, done = self._queue.get_nowait()
                except queue_module.Empty:
                    break
                batch.extend(items)
                waiting.append(done)
            try:
                publish_batch(batch)
            except Exception:  # noqa: BLE001 - the rows are pending; the sweep re-sends them
                log.exception("publishing %d deliveries failed; the sweep will send them", len(batch))
            for done in waiting:
                done.set()
            with self._idle:
                self._outstanding -= len(batch)
                if not self._outstanding:
                    self._idle.notify_all()


def wait_published(submitted: threading.Event | None, dispatches: Sequence[Dispatch],
                   timeout: float | None = None) -> bool:
    """Wait until ``dispatches``, which ``submitted`` (BackgroundPublisher.submit_unless_down's
    answer; None: parked already) stands for, were published or parked (True), or
    ``timeout`` seconds (default :func:`publish_wait`; False): then take the broker for
    down and park them here, so the sweep sends them within its interval. emit_event's
    callers whose events were stored in one batch wait so on the one submission that
    carried all their messages (emit.py), each parking its own.

    If the publisher sends them after all, the sweep's message for them is a duplicate,
    and a duplicate message claims nothing."""
    if submitted is None:
        return True
    timeout = publish_wait() if timeout is None else timeout
    published = submitted.wait(timeout)
    if not published:
        log.warning("%d deliveries not published within %g s; parked for the sweep",
                    len(dispatches), timeout)
        _mark_broker_down()
        _park_here(dispatches)
    return published


_publisher = BackgroundPublisher()
submit = _publisher.submit
submit_unless_down = _publisher.submit_unless_down
publish = _publisher.publish
flush = _publisher.flush


@atexit.register
def _flush_at_exit() -> None:
    if _publisher._pid == os.getpid() and not _publisher.flush(EXIT_FLUSH_S):
        log.warning("exited with deliveries not yet published; the sweep will send them")


# --- After commit.

def on_commit(session: Session, action: Callable[[], object]) -> None:
    """Run ``action`` after ``session``'s transaction commits; never if it rolls back.

    An action that raises is logged, not raised: the change is committed, and
    the sweep recovers a delivery whose message was not sent. ``session`` may be
    a ``scoped_session`` (Flask-SQLAlchemy's ``db.session``): the hook goes on
    the Session it stands for now.
    """
    if isinstance(session, scoped_session):
        # Events listened for on a scoped_session go to its Session class, i.e. to every
        # session it will ever make: one more listener per request, for the life of the app.
        session = session()
    if not session.info.get(_HOOKED):
        # Once per session, kept for its life: listeners cannot be removed while
        # the event that would remove them is being dispatched.
        sa_event.listen(session, "after_commit", _run_actions)
        sa_event.listen(session, "after_rollback", _forget_actions)
        session.info[_HOOKED] = True
    session.info.setdefault(_ACTIONS, []).append(action)


def _run_actions(session: Session) -> None:
    for action in session.info.pop(_ACTIONS, []):
        try:
            action()
        except Exception:  # noqa: BLE001 - committed already; the sweep covers a lost message
            log.exception("an after-commit action failed; the sweep will recover")


def _forget_actions(session: Session) -> None:
    session.info.pop(_ACTIONS, None)


def publish_after_commit(session: Session, dispatches: Sequence[Dispatch]) -> None:
    """Publish through the process's publisher (below) once ``session`` commits (the commit waits)."""
    if dispatches:
        items = list(dispatches)
        on_commit(session, lambda: publish(items))


def request_sweep_after_commit(session: Session) -> None:
    """Ask a worker to sweep as soon as ``session`` commits (False from the broker: the
    scheduler's next sweep does it)."""
    on_commit(session, lambda: request_sweep())


def request_release_after_commit(session: Session, subscription_id: str) -> None:
    """:func:`request_release` as soon as ``session`` commits (False from the broker: the
    scheduler's next sweeps send them)."""
    on_commit(session, lambda: request_release(subscription_id))
