"""Per-tenant request limits: WEBHOOKS_API_RATE_LIMIT per caller, WEBHOOKS_TEST_RATE_LIMIT per
subscription; 429 ``rate_limited`` with ``Retry-After`` over them.

Counted in the real Redis the suite's broker URL names (the default storage:
the broker's Redis), and in memory where a test says so. The limits here
have minute-long windows, so no count expires while a test runs.
"""

from __future__ import annotations

import time

import pytest
from sqlalchemy import func, select

from web.errors import too_many_requests
from webhooks.config import reset_settings_cache
from webhooks.storage.db import session_scope
from webhooks.storage.models import Delivery

from .helpers import make_subscription, new_caller, settle_publisher

EVENT_TYPES = "/api/webhooks/event-types"
SUBSCRIPTIONS = "/api/webhooks/subscriptions"


@pytest.fixture
def make_app(db, redis_broker, monkeypatch):
    """``make_app(**env)``: a new app (one more web process) with these WEBHOOKS_* variables."""
    from web import create_app

    def make(config: dict | None = None, **env):
        for name, value in env.items():
            monkeypatch.setenv(f"WEBHOOKS_{name}", value)
        reset_settings_cache()
        return create_app({"TESTING": True, **(config or {})})

    return make


def assert_rate_limited(response, window_s: int):
    assert response.status_code == 429
    assert response.get_json()["error"]["code"] == "rate_limited"
    assert response.get_json()["error"]["message"].startswith("Too many")
    assert 1 <= int(response.headers["Retry-After"]) <= window_s


def statuses(client, path, n, **kwargs) -> list[int]:
    return [client.get(path, **kwargs).status_code for _ in range(n)]


def test_an_api_key_over_its_limit_gets_429_and_other_accounts_do_not(make_app):
    client = make_app(API_RATE_LIMIT="3 per minute").test_client()
    alice, bob = new_caller("alice"), new_caller("bob")
    assert statuses(client, SUBSCRIPTIONS, 3, headers=alice.headers) == [200] * 3
    assert_rate_limited(client.get(SUBSCRIPTIONS, headers=alice.headers), 60)
    # Every route of the API shares the account's one budget.
    assert_rate_limited(client.get("/api/webhooks/deliveries", headers=alice.headers), 60)
    assert statuses(client, SUBSCRIPTIONS, 3, headers=bob.headers) == [200] * 3


def test_the_key_is_the_account_not_the_address(make_app):
    client = make_app(API_RATE_LIMIT="2 per minute").test_client()
    alice = new_caller("alice")
    for address in ("10.0.0.1", "10.0.0.2"):
        response = client.get(SUBSCRIPTIONS, headers=alice.headers,
                              environ_base={"REMOTE_ADDR": address})
        assert response.status_code == 200
    assert_rate_limited(client.get(SUBSCRIPTIONS, headers=alice.headers,
                                   environ_base={"REMOTE_ADDR": "10.0.0.3"}), 60)


def test_the_count_is_shared_by_every_web_process_through_redis(make_app, redis_broker):
    first = make_app(API_RATE_LIMIT="2 per minute").test_client()
    second = make_app().test_client()  # another process: its own app, the same storage
    alice = new_caller("alice")
    assert first.get(SUBSCRIPTIONS, headers=alice.headers).status_code == 200
    assert second.get(SUBSCRIPTIONS, headers=alice.headers).status_code == 200
    assert_rate_limited(first.get(SUBSCRIPTIONS, headers=alice.headers), 60)
    assert_rate_limited(second.get(SUBSCRIPTIONS, headers=alice.headers), 60)
    assert redis_broker.keys(f"*account:{alice.account_id}*")


def test_memory_storage_counts_in_each_process_alone(make_app, redis_broker):
    first = make_app(API_RATE_LIMIT="2 per minute", RATE_LIMIT_STORAGE_URL="memory://")
    second = make_app()
    alice = new_caller("alice")
    client = first.test_client()
    assert statuses(client, SUBSCRIPTIONS, 2, headers=alice.headers) == [200, 200]
    assert_rate_limited(client.get(SUBSCRIPTIONS, headers=alice.headers), 60)
    assert second.test_client().get(SUBSCRIPTIONS, headers=alice.headers).status_code == 200
    assert not redis_broker.keys("*account*")


def test_routes_without_a_key_count_per_address(make_app):
    client = make_app(API_RATE_LIMIT="2 per minute").test_client()
    here, there = {"REMOTE_ADDR": "192.0.2.1"}, {"REMOTE_ADDR": "192.0.2.2"}
    assert statuses(client, EVENT_TYPES, 2, environ_base=here) == [200, 200]
    assert_rate_limited(client.get("/api/webhooks/events/samples", environ_base=here), 60)
    assert client.get(EVENT_TYPES, environ_base=there).status_code == 200


def test_invalid_keys_count_against_their_address(make_app):
    """Spraying made-up keys does not give each one a fresh budget."""
    client = make_app(API_RATE_LIMIT="2 per minute").test_client()
    here = {"REMOTE_ADDR": "192.0.2.7"}
    codes = [
        client.get(SUBSCRIPTIONS, headers={"Authorization": f"Bearer whk_made_up_{n}"},
                   environ_base=here).status_code
        for n in range(3)
    ]
    assert codes == [401, 401, 429]


def test_probes_and_scrapes_are_never_limited(make_app):
    client = make_app(API_RATE_LIMIT="1 per minute").test_client()
    assert statuses(client, "/metrics", 3) == [200] * 3
    assert all(code in (200, 503) for code in statuses(client, "/healthz", 3))


@pytest.mark.parametrize("value", ["0", "off"])
def test_the_limit_can_be_turned_off(make_app, value):
    client = make_app(API_RATE_LIMIT=value).test_client()
    assert set(statuses(client, EVENT_TYPES, 120)) == {200}


def test_the_app_config_can_turn_every_limit_off(make_app):
    """RATELIMIT_ENABLED = False (Flask-Limiter's setting), for tests that are about
    something else and send fast."""
    app = make_app({"RATELIMIT_ENABLED": False}, API_RATE_LIMIT="1 per minute",
                   TEST_RATE_LIMIT="1 per minute")
    client = app.test_client()
    alice = new_caller("alice")
    subscription_id = make_subscription(alice.account_id)
    assert statuses(client, SUBSCRIPTIONS, 3, headers=alice.headers) == [200] * 3
    for _ in range(2):
        sent = client.post(f"{SUBSCRIPTIONS}/{subscription_id}/test", headers=alice.headers)
        assert sent.status_code == 202
    settle_publisher()


def test_an_unreachable_storage_lets_requests_through(make_app):
    """Limits protect the service; their storage's outage must not take it down."""
    app = make_app(API_RATE_LIMIT="1 per minute", TEST_RATE_LIMIT="1 per minute",
                   RATE_LIMIT_STORAGE_URL="redis://127.0.0.1:1/0")
    client = app.test_client()
    alice = new_caller("alice")
    subscription_id = make_subscription(alice.account_id)
    assert statuses(client, SUBSCRIPTIONS, 3, headers=alice.headers) == [200] * 3
    for _ in range(2):
        sent = client.post(f"{SUBSCRIPTIONS}/{subscription_id}/test", headers=alice.headers)
        assert sent.status_code == 202
    settle_publisher()


# --- Send test --------------------------------------------------------------------------


def _deliveries() -> int:
    with session_scope() as session:
        return session.scalar(select(func.count()).select_from(Delivery))


def test_send_test_is_limited_per_subscription(make_app):
    client = make_app(TEST_RATE_LIMIT="2 per minute").test_client()
    alice = new_caller("alice")
    busy, other = make_subscription(alice.account_id), make_subscription(alice.account_id)
    for _ in range(2):
        assert client.post(f"{SUBSCRIPTIONS}/{busy}/test", headers=alice.headers).status_code == 202
    settle_publisher()
    refused = client.post(f"{SUBSCRIPTIONS}/{busy}/test", headers=alice.headers)
    assert_rate_limited(refused, 60)
    assert "test events for this subscription" in refused.get_json()["error"]["message"]
    assert _deliveries() == 2  # the refused one made no event and no delivery
    assert client.post(f"{SUBSCRIPTIONS}/{other}/test", headers=alice.headers).status_code == 202
    settle_publisher()


def test_another_account_cannot_spend_a_subscriptions_test_budget(make_app):
    client = make_app(TEST_RATE_LIMIT="1 per minute").test_client()
    alice, mallory = new_caller("alice"), new_caller("mallory")
    subscription_id = make_subscription(alice.account_id)
    for _ in range(3):
        probe = client.post(f"{SUBSCRIPTIONS}/{subscription_id}/test", headers=mallory.headers)
        assert probe.status_code == 404
    sent = client.post(f"{SUBSCRIPTIONS}/{subscription_id}/test", headers=alice.headers)
    assert sent.status_code == 202
    settle_publisher()


class Clock:
    """Stands in for the ``time`` module of the memory storage: time moves when told."""

    def __init__(self):
        self.now = time.time()

    def time(self) -> float:
        return self.now


def test_the_default_send_test_limit_is_5_in_any_5_seconds(make_app, monkeypatch):
    clock = Clock()
    monkeypatch.setattr("limits.storage.memory.time", clock)
    monkeypatch.setattr("web.errors.time", clock)
    client = make_app(RATE_LIMIT_STORAGE_URL="memory://").test_client()
    alice = new_caller("alice")
    test = f"{SUBSCRIPTIONS}/{make_subscription(alice.account_id)}/test"

    def send() -> int:
        return client.post(test, headers=alice.headers).status_code

    assert [send() for _ in range(5)] == [202] * 5  # a burst of 5
    refused = client.post(test, headers=alice.headers)
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "5"
    clock.now += 4.9
    assert send() == 429
    clock.now += 0.2  # 5 seconds after the burst: 5 more, 1 per second on average
    assert [send() for _ in range(6)] == [202] * 5 + [429]
    settle_publisher()


# --- Retry-After ------------------------------------------------------------------------


@pytest.mark.parametrize("wait, expected", [(-3.0, 1), (0.0, 1), (0.2, 1), (1.0, 1),
                                            (2.5, 3), (59.9, 60)])
def test_retry_after_is_whole_seconds_and_at_least_1(wait, expected):
    error = too_many_requests(time.time() + wait, "requests")
    assert error.status == 429 and error.code == "rate_limited"
    assert error.headers["Retry-After"] == str(expected)


# --- Subscriptions per account ------------------------------------------------------------


def test_one_subscription_over_the_accounts_limit_answers_409(make_app, allow_private):
    client = make_app(MAX_SUBSCRIPTIONS="2").test_client()
    alice, bob = new_caller("alice"), new_caller("bob")

    def create(caller):
        return client.post(SUBSCRIPTIONS, json={"url": "https://hooks.example.com/in"},
                           headers=caller.headers)

    first, second = create(alice), create(alice)
    assert (first.status_code, second.status_code) == (201, 201)
    refused = create(alice)
    assert refused.status_code == 409
    assert refused.get_json()["error"]["code"] == "subscription_limit"
    assert "already has 2 subscriptions" in refused.get_json()["error"]["message"]
    assert len(client.get(SUBSCRIPTIONS, headers=alice.headers).get_json()["data"]) == 2
    assert create(bob).status_code == 201  # every account has its own limit
    # A deleted subscription frees its place.
    assert client.delete(f"{SUBSCRIPTIONS}/{first.get_json()['id']}",
                         headers=alice.headers).status_code == 204
    assert create(alice).status_code == 201
