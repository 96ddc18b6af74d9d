"""Celery settings for the webhook workload (lower-case names only).

Why each setting is what it is (the README repeats this for operators):

- task_acks_late + task_reject_on_worker_lost: a message is acknowledged
  only after its attempt is recorded, and goes back to the queue if the
  worker process dies; the claim in the database makes a second run a no-op.
- worker_prefetch_multiplier = 1: a worker holds no more ready messages than
  it can run, so a slow endpoint cannot trap a queue of others behind it.
- task_ignore_result: nobody reads task results; the database is the record.
- visibility_timeout: Redis redelivers a message left unacknowledged longer
  than this. Countdown retries stay unacknowledged until they are due, so it
  must exceed WEBHOOKS_COUNTDOWN_LIMIT plus WEBHOOKS_TIMEOUT; waits longer
  than the countdown limit are parked in the database instead.
- The publish retry policy is short: when the broker is down a caller of
  emit_event() waits at most a few seconds; the sweep sends what was parked.
- Redis URLs use kombu's transport with one client per channel
  (webhooks/broker/redis_transport.py): kombu's builds one per command.
- A ``sentinel://`` URL (several joined by ``;``) reaches Redis through its
  Sentinels, with WEBHOOKS_BROKER_MASTER_NAME as the master's name.
- Two queues: ``webhooks`` carries the deliveries and the sweep,
  ``webhooks.maintenance`` the retention purge, so a backlog of deliveries
  does not hold the purge back for hours. The sweep stays behind the
  deliveries on purpose: during a backlog, deliveries merely waiting in the
  queue look overdue, and a sweep run among them would send them all again.
  A third, ``webhooks.countdown``, carries the deliver messages that wait a
  countdown (retries, and deliveries waiting for a rate's slot): behind a
  backlog of fresh deliveries they would arrive late, and a rate's slots
  would then go out in one burst.
"""

from kombu import Queue

from webhooks.broker.celery_app import (COUNTDOWN_QUEUE, DELIVERY_QUEUE, MAINTENANCE_QUEUE,
                                        PARTITIONS_TASK, PURGE_TASK)
from webhooks.broker.redis_transport import uses_this_transport
from webhooks.broker.slots import SlotSchedule
from webhooks.config import get_settings
from webhooks.storage.partition_runs import INTERVAL_S

_settings = get_settings()

broker_url = _settings.broker_url
broker_connection_retry_on_startup = True
broker_connection_timeout = _settings.publish_timeout

task_acks_late = True
task_reject_on_worker_lost = True
worker_prefetch_multiplier = 1
task_ignore_result = True
result_backend = None
task_serializer = "json"
accept_content = ["json"]
task_default_queue = DELIVERY_QUEUE
# A worker started without --queues takes both; one started with --queues webhooks
# takes the maintenance queue too (worker/__init__.py).
task_queues = (Queue(DELIVERY_QUEUE), Queue(MAINTENANCE_QUEUE), Queue(COUNTDOWN_QUEUE))
task_routes = {PURGE_TASK: {"queue": MAINTENANCE_QUEUE},
               PARTITIONS_TASK: {"queue": MAINTENANCE_QUEUE}}
timezone = "UTC"
enable_utc = True
# Attempts end at WEBHOOKS_TIMEOUT by their own deadline; this only stops a task
# stuck elsewhere (a hung database call), after which the sweep recovers it.
task_time_limit = int(_settings.timeout + 120)

task_publish_retry = True
task_publish_retry_policy = {
    "max_retries": 1,
    "interval_start": 0,
    "interval_step": 0.25,
    "interval_max": 0.5,
}

if _settings.is_embedded_broker:
    # kombu's filesystem transport, whose writes a worker could read half-done
    # (webhooks/broker/filebroker.py says how that stopped a worker).
    broker_transport = "webhooks.broker.filebroker:Transport"
    _folder = str(_settings.broker_folder)
    broker_transport_options = {
        "data_folder_in": _folder,
        "data_folder_out": _folder,
        "control_folder": str(_settings.broker_folder / "control"),
        "store_processed": False,
        # kombu's default of 1 s starves throughput; 50 ms measured to keep up.
        "polling_interval": 0.05,
    }
else:
    if uses_this_transport(broker_url):
        # kombu's, with one redis-py client per channel (webhooks/broker/redis_transport.py says why).
        broker_transport = "webhooks.broker.redis_transport:Transport"
    broker_transport_options = {
        "visibility_timeout": int(_settings.countdown_limit + _settings.timeout + 600),
        "socket_connect_timeout": _settings.publish_timeout,
        "socket_timeout": max(_settings.publish_timeout, 5.0),
        "retry_on_timeout": False,
    }
    if _settings.is_sentinel_broker:
        # kombu's Sentinel transport: asks the Sentinels of the URL
        # ("sentinel://h1:26379;sentinel://h2:26379") where the master is, again on
        # every reconnection, so a failover costs a reconnect (docs/scaling.md).
        broker_transport = "webhooks.broker.redis_transport:SentinelTransport"
        broker_transport_options["master_name"] = _settings.broker_master_name
        broker_transport_options["sentinel_kwargs"] = {
            "socket_connect_timeout": _settings.publish_timeout,
            "socket_timeout": max(_settings.publish_timeout, 5.0),
        }

# Once per slot of each interval, by the database's clock, each run naming its slot: a
# restarted or second beat cannot run a task twice in one interval (webhooks/broker/slots.py).
# A run that could not start within its slot is superseded by the next one: it does nothing
# (webhooks/storage/scheduled_runs.py). Not Celery's ``expires``, which each worker judges by
# its own clock: a worker 90 s ahead dropped every sweep it took.
beat_schedule = {
    "webhooks-sweep": {
        "task": "webhooks.sweep",
        "schedule": SlotSchedule(_settings.sweep_interval),
    }
}
if _settings.retention_days or _settings.audit_retention_days:
    # Retention (webhooks/lifecycle/retention.py): a few seconds of small batches per interval.
    beat_schedule["webhooks-purge"] = {
        "task": PURGE_TASK,
        "schedule": SlotSchedule(_settings.purge_interval),
        "options": {"queue": MAINTENANCE_QUEUE},
    }
# The attempts' day partitions, created days ahead (webhooks/storage/partition_runs.py).
beat_schedule["webhooks-partitions"] = {
    "task": PARTITIONS_TASK,
    "schedule": SlotSchedule(INTERVAL_S),
    "options": {"queue": MAINTENANCE_QUEUE},
}
beat_schedule_filename = str(_settings.data_dir / "celerybeat-schedule")
# The schedule file is created mode 0600 in a folder of mode 0700.
beat_scheduler = "webhooks.broker.celery_app:PrivateScheduler"
