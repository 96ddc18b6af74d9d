"""The ceiling: a bare Celery task that only signs a prebuilt body and POSTs it.

No database, no policy, no recording: what is left is the cost of the stack
itself (broker round trips, Celery's task machinery, signing and one HTTP
POST with a kept-alive ``requests.Session``). Its app is configured from the
service's own ``celeryconfig`` (same broker, late acks, prefetch 1, results
ignored), on a queue of its own::

    celery -A benchmarks.ceiling_app worker --queues bench-ceiling --pool prefork --concurrency 2

It runs on kombu's own Redis transport, not the service's
(``BENCH_CEILING_SERVICE_TRANSPORT=1`` lends it the service's). The receiver's
URL comes from ``BENCH_CEILING_URL``. Each request carries
the service's delivery headers, so the receiver records it like a delivery.

The durable ceiling (``BENCH_CEILING_DATABASE_URL`` set, a libpq URL; the
shared scenario's ``durable_ceiling`` leg) adds the least a delivery
service that loses nothing must write, and nothing more: its publisher
stores each message's row (id and body) and commits it durably before
publishing, as ``emit_event`` must; the task, after its POST, marks the row
delivered in one statement that commits without waiting for the flush, as
the service's records do. No claim, no attempt history, no indexes but the
primary key, no rules: the floor that the service's own PostgreSQL work
stands on.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

import requests
from celery import Celery

from webhooks.config import get_settings
from webhooks.signing import sign

__all__ = ["app", "post", "QUEUE", "TASK", "send", "prebuilt_body", "DATABASE_ENV", "ROWS_TABLE",
           "create_rows_table", "store_row", "mark_delivered"]

QUEUE = "bench-ceiling"
TASK = "bench.ceiling.post"
SECRET = "whsec_bench-ceiling-not-a-real-secret"
# Set (to anything) to lend the ceiling the service's Redis transport, for comparison.
SERVICE_TRANSPORT_ENV = "BENCH_CEILING_SERVICE_TRANSPORT"
# Set to a libpq URL to make the ceiling durable (module docstring).
DATABASE_ENV = "BENCH_CEILING_DATABASE_URL"
ROWS_TABLE = "bench_ceiling_rows"

app = Celery("bench_ceiling")
app.config_from_object("celeryconfig")
app.conf.task_default_queue = QUEUE
if not os.environ.get(SERVICE_TRANSPORT_ENV):
    # Bare Celery on kombu's own transport: the service's Redis transport
    # (webhooks/broker/redis_transport.py) is part of what the service does, not of the stack.
    app.conf.broker_transport = None
app.conf.beat_schedule = {}

_local = threading.local()
_prebuilt: dict = {}


def prebuilt_body() -> bytes:
    """One real envelope, built once per process."""
    if "body" not in _prebuilt:
        from .seed import sample_body

        _prebuilt["body"] = sample_body()
    return _prebuilt["body"]


def _session() -> requests.Session:
    """One kept-alive session per thread (each prefork child has its own thread)."""
    session = getattr(_local, "session", None)
    if session is None:
        session = requests.Session()
        session.trust_env = False
        _local.session = session
    return session


def create_rows_table(connection) -> None:
    """(Re)create the durable ceiling's table, empty, on a psycopg2 connection; commits."""
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {ROWS_TABLE}")
        cursor.execute(f"CREATE TABLE {ROWS_TABLE} (id uuid PRIMARY KEY, body bytea NOT NULL, "
                       "created_at timestamptz NOT NULL DEFAULT now(), delivered_at timestamptz)")
    connection.commit()


def store_row(connection, delivery_id: str, body: bytes) -> None:
    """Store one message's row and commit it durably (the publisher, before it publishes)."""
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {ROWS_TABLE} (id, body) VALUES (%s, %s)",
                       (delivery_id, body))
    connection.commit()


def mark_delivered(connection, delivery_id: str) -> None:
    """Mark the row delivered and commit (the task, after its POST)."""
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {ROWS_TABLE} SET delivered_at = now() WHERE id = %s",
                       (delivery_id,))
    connection.commit()


def _rows_connection():
    """This thread's connection to the durable ceiling's database, or None if not durable.
    Its commits do not wait for the flush (as the service's attempt records)."""
    url = os.environ.get(DATABASE_ENV)
    if not url:
        return None
    connection = getattr(_local, "rows", None)
    if connection is None:
        import psycopg2

        connection = _local.rows = psycopg2.connect(url, options="-c synchronous_commit=off")
    return connection


@app.task(name=TASK)
def post(delivery_id: str, attempt_count: int) -> None:
    """Sign the prebuilt body with this moment's timestamp and POST it; nothing else."""
    settings = get_settings()
    body = prebuilt_body()
    header = settings.header
    headers = {
        "Content-Type": "application/json",
        header("Version"): settings.version,
        header("Signature"): sign(SECRET, body, int(time.time())),
        header("Event"): "reply.received",
        header("Mode"): "live",
        header("Event-Id"): delivery_id,
        header("Delivery-Id"): delivery_id,
        header("Attempt"): str(attempt_count + 1),
    }
    response = _session().post(os.environ["BENCH_CEILING_URL"], data=body, headers=headers,
                               timeout=settings.timeout, allow_redirects=False)
    response.content  # noqa: B018 - read the body so the connection is reused
    rows = _rows_connection()
    if rows is not None:
        mark_delivered(rows, delivery_id)


def send(delivery_id: str, producer=None) -> None:
    """Publish one ceiling message (from the harness)."""
    app.send_task(TASK, args=(delivery_id, 0), queue=QUEUE, producer=producer)


def send_many(n: int) -> float:
    """Publish ``n`` ceiling messages on one producer; returns messages published per second."""
    started = time.perf_counter()
    with app.producer_or_acquire() as producer:
        for _ in range(n):
            send(str(uuid.uuid4()), producer=producer)
    return n / (time.perf_counter() - started)


prebuilt_body()  # build it in the worker's main process, before the pool forks
