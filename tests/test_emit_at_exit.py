"""A process that emits and exits at once, with the broker up, parks nothing (CONTRACT 9.1).

The publisher used to start its thread's first publish while the interpreter
was shutting down: kombu's lazy imports then failed ("can't register atexit
after shutdown") and every delivery was parked for the sweep. emit_event now
returns only once its messages were accepted by the broker (or parked).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from sqlalchemy import select

from tests.factories import make_account, make_subscription
from tests.support.services import REDIS_URL
from webhooks.broker.celery_app import DELIVERY_QUEUE
from webhooks.storage.db import session_scope
from webhooks.storage.models import Delivery

pytestmark = pytest.mark.integration

SCRIPT = """
import sys
from webhooks import emit_event
from webhooks.events.samples import sample_data
for _ in range(3):
    emit_event(sys.argv[1], "email.sent", sample_data("email.sent"))
"""


def test_a_script_that_emits_and_exits_parks_nothing(db, redis_broker):
    account_id, _ = make_account()
    make_subscription(account_id, "https://hooks.example.com/in")
    env = {**os.environ, "WEBHOOKS_DATABASE_URL": db, "WEBHOOKS_BROKER_URL": REDIS_URL}
    done = subprocess.run([sys.executable, "-c", SCRIPT, account_id], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "failed" not in done.stderr and "parking" not in done.stderr, done.stderr
    with session_scope() as session:
        parked = session.scalars(select(Delivery.parked)).all()
    assert parked == [False, False, False]
    assert redis_broker.llen(DELIVERY_QUEUE) == 3  # three deliver messages, none lost
