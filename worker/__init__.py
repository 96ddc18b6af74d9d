"""The Celery worker entry point: ``celery -A worker worker`` / ``celery -A worker beat``."""

from celery.signals import setup_logging

from webhooks.logs import configure_logging
from webhooks.queue import celery_app as app

from . import tasks  # noqa: F401  (registers the tasks on the app)

__all__ = ["app"]


@setup_logging.connect
def _json_logs(loglevel=None, **_):
    """Worker and beat log JSON lines with delivery ids (webhooks/logs.py), never secrets."""
    configure_logging(loglevel or None)
