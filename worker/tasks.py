"""Thin Celery tasks: load, call the core, record. All logic lives in webhooks.services.attempt."""

from __future__ import annotations

from sqlalchemy.exc import OperationalError

from webhooks.broker.celery_app import (DELIVER_TASK, PARTITIONS_TASK, PURGE_TASK, RELEASE_TASK,
                                        SWEEP_TASK, get_app)
from webhooks.config import get_settings
from webhooks.lifecycle.retention import run_scheduled
from webhooks.services.attempt import run_attempt
from webhooks.services.pausing import send_next_batch
from webhooks.services.sweep import run_sweep
from webhooks.storage import partition_runs
from webhooks.storage.db import get_engine
from webhooks.storage.scheduled_runs import Slot

celery_app = get_app()  # the worker's entry point: the app is built here

__all__ = ["deliver", "sweep", "purge", "release", "partitions"]


# A database connection lost mid-task (restart, pg_terminate_backend) is retried
# after a second; if even that publish fails, the sweep recovers the delivery.
@celery_app.task(
    name=DELIVER_TASK,
    autoretry_for=(OperationalError,),
    retry_kwargs={"max_retries": 3, "countdown": 1},
)
def deliver(delivery_id: str, attempt_count: int) -> None:
    """Make attempt ``attempt_count + 1`` of the delivery, if it is still ours to make."""
    run_attempt(delivery_id, attempt_count)


# ``slot``: beat's runs name the slot of their interval and run once per slot, however
# often beat sends it (webhooks/storage/scheduled_runs.py); a recover's sweep names none.
@celery_app.task(name=SWEEP_TASK, bind=True, autoretry_for=(OperationalError,),
                 retry_kwargs={"max_retries": 1, "countdown": 1})
def sweep(self, slot: str | None = None) -> None:
    """Send due parked deliveries and recover lost messages and dead workers' claims."""
    settings = get_settings()
    run_sweep(settings, slot=Slot.sent(SWEEP_TASK, slot, self.request.id, settings.sweep_interval))


# One run per batch; a lost connection is retried once, and what it did not send the
# sweep does (webhooks/lifecycle/release.py).
@celery_app.task(name=RELEASE_TASK, autoretry_for=(OperationalError,),
                 retry_kwargs={"max_retries": 1, "countdown": 1})
def release(subscription_id: str) -> None:
    """Send the next batch of what a resume of this subscription released."""
    send_next_batch(subscription_id)


# A deadlock with a replay of a row being purged is retried; the next run would anyway.
@celery_app.task(name=PURGE_TASK, bind=True, autoretry_for=(OperationalError,),
                 retry_kwargs={"max_retries": 1, "countdown": 5})
def purge(self, slot: str | None = None) -> None:
    """Apply retention for at most WEBHOOKS_PURGE_SECONDS (webhooks.lifecycle.retention)."""
    settings = get_settings()
    run_scheduled(get_engine(), retention_days=settings.retention_days,
                  audit_retention_days=settings.audit_retention_days,
                  batch=settings.purge_batch, seconds=settings.purge_seconds,
                  slot=Slot.sent(PURGE_TASK, slot, self.request.id, settings.purge_interval))


# A lock not granted in time is retried once; the next hour's run would anyway.
@celery_app.task(name=PARTITIONS_TASK, bind=True, autoretry_for=(OperationalError,),
                 retry_kwargs={"max_retries": 1, "countdown": 30})
def partitions(self, slot: str | None = None) -> None:
    """Create the attempts' day partitions of today and WEBHOOKS_PARTITION_DAYS_AHEAD days."""
    partition_runs.create_ahead(
        get_engine(), days_ahead=get_settings().partition_days_ahead,
        slot=Slot.sent(PARTITIONS_TASK, slot, self.request.id, partition_runs.INTERVAL_S))
