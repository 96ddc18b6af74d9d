"""The Celery worker entry point: ``celery -A worker worker`` / ``celery -A worker beat``."""

import logging
import os
import sys

from celery.signals import celeryd_after_setup, setup_logging

from webhooks.broker.celery_app import COUNTDOWN_QUEUE, MAINTENANCE_QUEUE, get_app
from webhooks.composition import compose
from webhooks.config import get_settings
from webhooks.config.logs import RoutineToDebug, configure_logging
from webhooks.errors import ConfigError


def _settings_or_exit() -> None:
    """A WEBHOOKS_* variable the worker cannot use stops it with one ``error:`` line (exit
    status 1), as the CLI and the web process do: read while Celery imports this module,
    the settings' ConfigError was a traceback through Celery's loader."""
    try:
        get_settings()
    except ConfigError as error:
        sys.exit(f"error: {error}")


_settings_or_exit()
compose()  # the lifecycle's listeners: the broker, operational webhooks (composition.py)

from . import tasks  # noqa: E402,F401  (registers the tasks on the app)

app = get_app()  # `celery -A worker` finds the app here

__all__ = ["app"]

# Celery logs two INFO lines per task (received, succeeded) that carry no
# delivery, event or subscription id; webhooks.delivery logs one line per
# attempt that does. Formatting them costs CPU every delivery needs
# (docs/performance.md), so they are shown at DEBUG only. A task that raised
# is still logged (ERROR).
PER_TASK_LOGGERS = ("celery.worker.strategy", "celery.app.trace")


# beat logs "Scheduler: Sending due task webhooks-sweep (webhooks.sweep)" at
# INFO every WEBHOOKS_SWEEP_INTERVAL (5 s) and each purge: routine, so DEBUG.
BEAT_ROUTINE = RoutineToDebug("Scheduler: Sending due task")


@setup_logging.connect
def _json_logs(loglevel=None, **_):
    """Worker and beat log JSON lines with delivery ids (webhooks/config/logs.py), never secrets.

    The level is WEBHOOKS_LOG_LEVEL when it is set, else celery's --loglevel
    (INFO in the Procfile and under ``webhooks dev``).
    """
    explicit = os.environ.get("WEBHOOKS_LOG_LEVEL", "").strip()
    handler = configure_logging(None if explicit else (loglevel or None))
    quiet = logging.DEBUG if logging.getLogger().level <= logging.DEBUG else logging.WARNING
    for name in PER_TASK_LOGGERS:
        logging.getLogger(name).setLevel(quiet)
    beat = logging.getLogger("celery.beat")
    if BEAT_ROUTINE not in beat.filters:
        beat.addFilter(BEAT_ROUTINE)
    return handler


@celeryd_after_setup.connect
def _take_maintenance_tasks(sender=None, instance=None, **_):
    """Every worker also takes the maintenance queue (the purge), even one started with
    ``--queues webhooks`` as the Procfile said before the purge had a queue of its own:
    otherwise nothing would ever purge. The same for the countdown queue (retries and
    waits for a rate's slot), added later still. Runs before the worker starts consuming."""
    queues = instance.app.amqp.queues
    for name in (MAINTENANCE_QUEUE, COUNTDOWN_QUEUE):
        if name not in queues.consume_from:
            queues.select_add(name)
