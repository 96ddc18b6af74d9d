"""outbox.send_to_broker writes the deliver message Celery's send_task writes (outbox._send_deliver)."""

from __future__ import annotations

import base64
import datetime as dt
import json

import pytest

from webhooks.broker import celery_app, outbox
from webhooks.lifecycle.dispatch import Dispatch

# Different in every message, whoever sends it.
PER_MESSAGE_HEADERS = {"id", "root_id", "eta", "origin"}
PER_MESSAGE_PROPERTIES = {"correlation_id", "delivery_tag", "reply_to"}


@pytest.fixture
def broker(redis_broker, monkeypatch):
    monkeypatch.setattr(outbox, "_broker_down_until", 0.0)
    return redis_broker


def _sent(broker, queue: str = celery_app.DELIVERY_QUEUE) -> list[dict]:
    """The messages on ``queue``, oldest first, with their bodies decoded."""
    messages = [json.loads(raw) for raw in reversed(broker.lrange(queue, 0, -1))]
    for message in messages:
        message["body"] = json.loads(base64.b64decode(message["body"]))
    return messages


def _without(mapping: dict, keys: set) -> dict:
    return {k: v for k, v in mapping.items() if k not in keys}


@pytest.mark.parametrize("countdown", [None, 30.0])
def test_the_message_is_the_one_send_task_writes(broker, countdown):
    app = celery_app.get_app()
    # A message that waits a countdown travels on the countdown queue (celery_app).
    queue = celery_app.DELIVERY_QUEUE if countdown is None else celery_app.COUNTDOWN_QUEUE
    assert outbox.send_to_broker([Dispatch("d-1", 2, countdown)]) == []
    app.send_task(celery_app.DELIVER_TASK, args=("d-1", 2), countdown=countdown, queue=queue)
    ours, celerys = _sent(broker, queue)
    assert _without(ours["headers"], PER_MESSAGE_HEADERS) == _without(
        celerys["headers"], PER_MESSAGE_HEADERS)
    assert _without(ours["properties"], PER_MESSAGE_PROPERTIES) == _without(
        celerys["properties"], PER_MESSAGE_PROPERTIES)
    assert ours["properties"]["delivery_info"] == {"exchange": "", "routing_key": queue}
    assert ours["body"] == celerys["body"]
    assert ours["body"][0] == ["d-1", 2]
    assert _without(ours, {"headers", "properties", "body"}) == _without(
        celerys, {"headers", "properties", "body"})
    if countdown is None:
        assert ours["headers"]["eta"] is None
    else:
        eta = dt.datetime.fromisoformat(ours["headers"]["eta"])
        assert abs((eta - dt.datetime.now(dt.timezone.utc)).total_seconds() - countdown) < 5


def test_each_message_has_its_own_task_id(broker):
    outbox.send_to_broker([Dispatch(f"d-{n}", 0) for n in range(3)])
    ids = [m["headers"]["id"] for m in _sent(broker)]
    assert len(set(ids)) == 3
    assert [m["properties"]["correlation_id"] for m in _sent(broker)] == ids
