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

__all__ = ["app", "post", "QUEUE", "TASK", "send"]

QUEUE = "bench-ceiling"
TASK = "bench.ceiling.post"
SECRET = "whsec_bench-ceiling-not-a-real-secret"
# Set (to anything) to lend the ceiling the service's Redis transport, for comparison.
SERVICE_TRANSPORT_ENV = "BENCH_CEILING_SERVICE_TRANSPORT"

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


def _body() -> bytes:
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


@app.task(name=TASK)
def post(delivery_id: str, attempt_count: int) -> None:
    """Sign the prebuilt body with this moment's timestamp and POST it; nothing else."""
    settings = get_settings()
    body = _body()
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


_body()  # build it in the worker's main process, before the pool forks
