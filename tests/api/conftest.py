"""Fixtures for the HTTP API tests: the app, its test client, accounts with API keys.

Built on the root fixtures: ``db`` (a clean migrated PostgreSQL database per
test) and ``redis_broker`` (the real Redis, emptied), because the routes that
send (test, resume, replay) publish to the broker after their commit. No
worker runs: deliveries stay as the API left them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from webhooks.storage.db import session_scope

from .helpers import settle_publisher
from .schemathesis_ids import use_own_ids


def pytest_configure(config):
    # Registered here too, so this folder runs under --strict-markers before
    # setup.cfg lists the marker.
    config.addinivalue_line("markers", "schemathesis: generated requests over the OpenAPI document")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_pycollect_makeitem(collector, name, obj):
    # Outside schemathesis's own wrapper (tryfirst): by now it has answered with
    # its collector, which this replaces so each generated check has its own
    # node id, and so runs under xdist (schemathesis_ids.py says why).
    outcome = yield
    if outcome.exception is not None:
        return  # pytest reports it
    collected = outcome.get_result()
    replaced = use_own_ids(collector, name, obj, collected)
    if replaced is not collected:
        outcome.force_result(replaced)


@pytest.fixture
def app(db, redis_broker):
    from web import create_app

    return create_app({"TESTING": True})


@pytest.fixture
def allow_private(monkeypatch):
    """WEBHOOKS_ALLOW_PRIVATE_TARGETS=true for this test."""
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_ALLOW_PRIVATE_TARGETS", "true")
    reset_settings_cache()


@dataclass
class BrokerSpy:
    """What the app handed to the broker, and what a fresh session saw at that moment.

    ``probe`` (set by a test) runs at each publish or sweep request in its own
    session: it shows whether the request's transaction had committed by then.
    """

    published: list = field(default_factory=list)   # [(delivery_id, attempt_count)]
    sweeps: int = 0
    seen: list = field(default_factory=list)        # probe results, in call order
    probe: object = None

    def clear(self) -> None:
        """Forget what was published so far (by the test's own set-up)."""
        settle_publisher()
        self.published.clear()
        self.seen.clear()
        self.sweeps = 0

    def settle(self) -> None:
        """Wait until what was handed to the background publisher is out."""
        settle_publisher()


@pytest.fixture
def broker(monkeypatch, redis_broker) -> BrokerSpy:
    """Record every publish and sweep request; each still goes to the real Redis."""
    from webhooks.broker import outbox

    spy = BrokerSpy()
    real_publish, real_sweep = outbox.send_to_broker, outbox.request_sweep

    def look():
        if spy.probe is not None:
            with session_scope() as session:
                spy.seen.append(spy.probe(session))

    def publish(dispatches):
        dispatches = list(dispatches)
        spy.published += [(d.delivery_id, d.attempt_count) for d in dispatches]
        look()
        return real_publish(dispatches)

    def request_sweep():
        spy.sweeps += 1
        look()
        return real_sweep()

    monkeypatch.setattr(outbox, "send_to_broker", publish)
    monkeypatch.setattr(outbox, "request_sweep", request_sweep)
    return spy
