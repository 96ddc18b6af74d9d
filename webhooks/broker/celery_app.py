"""The Celery app and publishing: the one place the core touches Celery.

Messages carry only ``(delivery_id, attempt_count)``; the database holds the
rest. Publishing never raises: a broker that is down costs the caller at most
about ``WEBHOOKS_PUBLISH_TIMEOUT`` seconds once, then publishing is skipped
for ``BROKER_DOWN_BACKOFF_S`` seconds, and the returned failures are parked
for the sweep by the caller (see outbox.py).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Iterable

from pathlib import Path

from celery import Celery
from celery.beat import PersistentScheduler
from kombu.utils.uuid import uuid

from webhooks.config import get_settings
from webhooks.config.datadir import private_dir, private_file, private_umask

__all__ = ["celery_app", "get_app", "DELIVER_TASK", "SWEEP_TASK", "PURGE_TASK", "DELIVERY_QUEUE",
           "MAINTENANCE_QUEUE", "publish", "request_sweep", "PrivateScheduler"]

log = logging.getLogger("webhooks.queue")  # its name from before the move: log searches use it

DELIVER_TASK = "webhooks.deliver"
SWEEP_TASK = "webhooks.sweep"
PURGE_TASK = "webhooks.purge"
# Deliveries and the sweep go through the first queue; the purge through the second, so a
# backlog of deliveries never holds the purge back. Every worker takes both (worker/__init__.py).
DELIVERY_QUEUE = "webhooks"
MAINTENANCE_QUEUE = "webhooks.maintenance"
BROKER_DOWN_BACKOFF_S = 5.0


_app_lock = threading.Lock()


def get_app() -> Celery:
    """This process's Celery app, configured from celeryconfig (the settings) on first use.

    ``queue.celery_app`` is the same object; nothing is built, and no folder
    made, until something publishes or a worker starts.
    """
    app = globals().get("celery_app")  # set once built, or replaced by a test
    if app is None:
        with _app_lock:
            app = globals().get("celery_app")
            if app is None:
                app = globals()["celery_app"] = _make_app()
    return app


def __getattr__(name: str):
    if name == "celery_app":
        return get_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _make_app() -> Celery:
    settings = get_settings()
    if settings.is_embedded_broker:
        for folder in (settings.data_dir, settings.broker_folder, settings.broker_folder / "control"):
            private_dir(folder)
    app = Celery("webhooks")
    app.config_from_object("celeryconfig")
    return app


class PrivateScheduler(PersistentScheduler):
    """beat's shelve schedule, created mode 0600 in a folder of mode 0700 (webhooks/config/datadir.py).

    shelve offers no mode argument, so the file is opened under umask 077
    (beat opens it once, at start, before it sends anything).
    """

    def _open_schedule(self):
        path = Path(self.schedule_filename)
        private_dir(path.parent)
        for suffix in self.known_suffixes:  # a schedule made by an older version
            private_file(path.with_name(path.name + suffix))
        with private_umask():
            return super()._open_schedule()


_state_lock = threading.Lock()
_broker_down_until = 0.0


def _broker_marked_down() -> bool:
    return time.monotonic() < _broker_down_until


def _mark_broker_down() -> None:
    global _broker_down_until
    with _state_lock:
        _broker_down_until = time.monotonic() + BROKER_DOWN_BACKOFF_S


PUBLISH_BATCH = 500  # messages sent to the broker in one round trip


def publish(dispatches: Iterable) -> list:
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
        app = get_app()
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


def _send_deliver(app: Celery, producer, item) -> None:
    """Publish one deliver message, as ``app.send_task`` would, for about 60 % of its CPU.

    send_task also routes the task through the settings, binds and declares
    the queue again (a copy of the Queue object), and builds a result object
    that nobody reads: 0.15-0.3 ms of the 0.45-0.6 ms a publish took (docs/
    performance.md). The deliver task always goes to DELIVERY_QUEUE, by the
    default exchange (the queue's name is the routing key), which needs no
    declaring on Redis or the file broker; every worker declares its queues as
    it starts. The message is Celery's own (create_task_message), and the
    settings' publish retry policy applies, as with send_task.
    """
    task_id = uuid()
    message = app.amqp.create_task_message(
        task_id, DELIVER_TASK, (item.delivery_id, item.attempt_count), {},
        countdown=item.countdown, ignore_result=None)
    app.amqp.send_task_message(producer, DELIVER_TASK, message,
                               queue=app.amqp.queues[DELIVERY_QUEUE], declare=())


def request_sweep() -> bool:
    """Ask a worker to sweep now (after a resume); False if the broker is unreachable."""
    if _broker_marked_down():
        return False
    try:
        get_app().send_task(SWEEP_TASK)
        return True
    except Exception as exc:  # noqa: BLE001
        log.warning("broker publish of a sweep failed: %s", type(exc).__name__)
        _mark_broker_down()
        return False
