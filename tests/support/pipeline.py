"""A real worker for a test module, and what its tests read of a delivery: written once here.

The test modules that send deliveries through a real Celery worker process on the
real PostgreSQL and Redis (test_pipeline.py, test_operational.py,
test_standard_delivery.py, test_ed25519_delivery.py, ...) each had the same two
fixtures and the same look-ups. They take them from here::

    WORKER_ENV = pipeline_env(RETRY_DELAYS="1,1")
    worker, account = worker_fixtures(WORKER_ENV)

``worker`` is module-scoped: one worker process (and its embedded beat) for the
module's tests, on a broker emptied first. ``account`` (or the name given) makes
this test process read the worker's settings too (it emits with them), starts the
worker again if a test before killed it, and returns a new account's id.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from sqlalchemy import select

from tests.factories import make_account
from tests.support.services import PG_URL, REDIS_URL
from tests.support.stack import wait_until
from tests.support.worker import emit_with, running_worker
from webhooks import emit_event
from webhooks.events.samples import sample_data
from webhooks.lifecycle import changes
from webhooks.storage.db import session_scope
from webhooks.storage.models import Attempt, Delivery, utcnow

__all__ = ["pipeline_env", "PIPELINE_ENV", "worker_fixtures", "delivery_status", "attempts_of"]


def pipeline_env(**overrides: str) -> dict[str, str]:
    """The worker's settings of these tests: the tests' PostgreSQL and Redis, a sweep every
    second, lost messages recovered after 2 s, 5 s attempts, private targets allowed (the
    receivers are on 127.0.0.1); with ``overrides`` (names without the WEBHOOKS_ prefix,
    e.g. RETRY_DELAYS="1,1"; None leaves a setting out)."""
    env = {
        "WEBHOOKS_DATABASE_URL": PG_URL,
        "WEBHOOKS_BROKER_URL": REDIS_URL,
        "WEBHOOKS_SWEEP_INTERVAL": "1",
        "WEBHOOKS_RECOVER_AFTER": "2",
        "WEBHOOKS_TIMEOUT": "5",
        "WEBHOOKS_ALLOW_PRIVATE_TARGETS": "true",
    }
    for name, value in overrides.items():
        if value is None:
            env.pop(f"WEBHOOKS_{name}", None)
        else:
            env[f"WEBHOOKS_{name}"] = str(value)
    return env


# The pipeline's own (test_pipeline.py), which several modules share: a short ladder of
# 1 s steps, and a pause rule far beyond it.
PIPELINE_ENV = pipeline_env(RETRY_DELAYS="1,1,1,1,1", PAUSE_AFTER="25")


def worker_fixtures(env: dict[str, str], *, account_name: str = "account", **options):
    """The two fixtures of a module that runs a real worker with ``env`` (and WorkerProcess
    ``options``): ``worker`` and ``account`` (named ``account_name``), as the module's
    text says. Assign both in the module: ``worker, account = worker_fixtures(ENV)``."""

    @pytest.fixture(scope="module")
    def worker(postgres):
        yield from running_worker(env, **options)

    @pytest.fixture(name=account_name)
    def account(worker, db, monkeypatch):
        emit_with(monkeypatch, env)
        if worker.process.poll() is not None:  # a test before killed it
            worker.start()
        return make_account()[0]

    return worker, account


def delivery_status(delivery_id: str) -> str:
    """The delivery's stored status."""
    with session_scope() as session:
        return session.get(Delivery, delivery_id).status


def attempts_of(delivery_id: str) -> list[tuple[int, int | None, str]]:
    """The delivery's attempts as (number, status code, outcome), in order."""
    with session_scope() as session:
        rows = session.scalars(
            select(Attempt).where(Attempt.delivery_id == delivery_id).order_by(Attempt.number)
        ).all()
        return [(a.number, a.status_code, a.outcome) for a in rows]


@dataclass(frozen=True)
class Replayed:
    """A delivery that failed once and its replay, as the receiver saw them."""

    event_id: str
    replay_id: str
    first: object  # the original attempt's request at the receiver
    again: object  # the replay's


def fail_then_replay(account_id: str, receiver, path: str) -> Replayed:
    """Emit one ``email.sent`` to the subscription at ``receiver.url(path)`` (made by the
    caller, with the scheme under test), answer it 404 so that it fails, replay it, and
    wait for the replay's 200. Checks what every scheme's replay must show: the replay's
    own delivery id, the event's ``webhook-id`` on both, one successful attempt."""
    receiver.script(path, 404, 200)
    event = emit_event(account_id, "email.sent", sample_data("email.sent"))
    original = event.delivery_ids[0]
    wait_until(lambda: delivery_status(original) == "failed", what="failed")
    with session_scope() as session:
        replay_id = changes.replay_delivery(session, session.get(Delivery, original), utcnow()).id
    wait_until(lambda: delivery_status(replay_id) == "done", what="replay done")
    first, again = receiver.received(path)
    assert again.headers["X-Service-Delivery-Id"] == replay_id
    assert again.headers["webhook-id"] == first.headers["webhook-id"] == event.id
    assert attempts_of(replay_id) == [(1, 200, "success")]
    return Replayed(event.id, replay_id, first, again)
