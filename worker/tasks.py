"""Thin Celery tasks: load, call the core, record. All logic lives in webhooks.delivery."""

from __future__ import annotations

from sqlalchemy.exc import OperationalError

from webhooks.delivery import run_attempt
from webhooks.sweep import run_sweep
from webhooks.queue import DELIVER_TASK, SWEEP_TASK, get_app

celery_app = get_app()  # the worker's entry point: the app is built here

__all__ = ["deliver", "sweep"]


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


@celery_app.task(name=SWEEP_TASK, autoretry_for=(OperationalError,),
                 retry_kwargs={"max_retries": 1, "countdown": 1})
def sweep() -> None:
    """Send due parked deliveries and recover lost messages and dead workers' claims."""
    run_sweep()
