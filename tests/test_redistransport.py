"""The Redis transport with one redis-py client per channel (webhooks/broker/redis_transport.py)."""

from __future__ import annotations

import threading

import pytest
import redis as redis_py
from kombu import Connection, Queue

from tests.support.celeryconf import transport_for
from tests.support.services import REDIS_URL
from webhooks.broker.redis_transport import Transport, uses_this_transport

TRANSPORT = "webhooks.broker.redis_transport:Transport"
SENTINEL_TRANSPORT = "webhooks.broker.redis_transport:SentinelTransport"


@pytest.fixture
def clients_built(monkeypatch):
    """How many redis.Redis objects are built (the transport's client class is redis.Redis)."""
    built = []
    original = redis_py.Redis.__init__

    def counting(self, *args, **kwargs):
        built.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(redis_py.Redis, "__init__", counting)
    return built


@pytest.mark.parametrize("url, ours", [
    ("redis://127.0.0.1:6379/0", True),
    ("rediss://:secret@cache.example:6380/2?ssl_cert_reqs=required", True),
    ("REDIS://127.0.0.1/0", True),
    ("sentinel://127.0.0.1:26379", False),
    ("redis+socket:///run/redis.sock", False),
    ("filesystem://", False),
])
def test_it_serves_kombus_redis_schemes_only(url, ours):
    assert uses_this_transport(url) is ours


@pytest.mark.process
def test_celery_uses_it_for_redis_urls(tmp_path):
    """Read in a fresh interpreter, as each worker and web process reads celeryconfig."""
    assert transport_for("redis://127.0.0.1:6379/0", tmp_path) == TRANSPORT
    assert transport_for("sentinel://127.0.0.1:26379", tmp_path) == SENTINEL_TRANSPORT


def test_a_rediss_url_connects_as_with_kombus_transport():
    """TLS, host, port, db and password come from the URL as they do for kombu's own."""
    url = "rediss://:secret@cache.example:6380/2?ssl_cert_reqs=required"
    ours, theirs = Connection(url, transport=TRANSPORT), Connection(url)
    fields = ("hostname", "port", "password", "virtual_host", "ssl")
    assert [getattr(ours, f) for f in fields] == [getattr(theirs, f) for f in fields]
    assert ours.ssl  # the rediss scheme's TLS is kept
    assert ours.transport_cls == TRANSPORT


def test_a_channel_reuses_its_client_for_every_publish(redis_broker, clients_built):
    with Connection(REDIS_URL, transport=TRANSPORT) as connection:
        producer = connection.Producer()
        producer.publish({"n": 0}, routing_key="webhooks-transport-test", serializer="json")
        clients_built.clear()  # the channel, made by the first publish, built its clients
        for n in range(1, 6):
            producer.publish({"n": n}, routing_key="webhooks-transport-test", serializer="json")
        assert clients_built == []
        assert redis_broker.llen("webhooks-transport-test") == 6


def test_kombus_own_transport_builds_one_per_publish(redis_broker, clients_built):
    """What the transport saves, and the check that the count above can fail."""
    with Connection(REDIS_URL) as connection:
        producer = connection.Producer()
        producer.publish({"n": 0}, routing_key="webhooks-transport-test", serializer="json")
        clients_built.clear()
        for n in range(1, 6):
            producer.publish({"n": n}, routing_key="webhooks-transport-test", serializer="json")
        assert len(clients_built) == 5


def test_messages_round_trip_with_acknowledgement(redis_broker):
    """Published, consumed and acknowledged through the channel's one client."""
    queue = Queue("webhooks-transport-roundtrip")
    with Connection(REDIS_URL, transport=TRANSPORT) as connection:
        with connection.Producer() as producer:
            for n in range(40):
                producer.publish({"n": n}, routing_key=queue.name, declare=[queue],
                                 serializer="json")
        received = []
        with connection.SimpleQueue(queue) as simple:
            for _ in range(40):
                message = simple.get(timeout=30)
                received.append(message.payload["n"])
                message.ack()
    assert sorted(received) == list(range(40))
    assert redis_broker.llen(queue.name) == 0


def test_threads_share_the_channels_client(redis_broker):
    """kombu's channels are not for threads to share, but the client may be: redis-py
    takes a pooled connection for each command."""
    with Connection(REDIS_URL, transport=TRANSPORT) as connection:
        channel = connection.default_channel
        # Built before the threads start, as the channel's first command does in the worker
        # (two threads building the first one at once would each build one: harmless).
        clients = [channel._create_client()]

        def push(first):
            client = channel._create_client()
            clients.append(client)
            for n in range(first, first + 50):
                client.lpush("webhooks-transport-threads", n)

        threads = [threading.Thread(target=push, args=(i * 50,)) for i in range(4)]
        [t.start() for t in threads]
        [t.join(timeout=30) for t in threads]
        assert len({id(client) for client in clients}) == 1
    pushed = sorted(int(v) for v in redis_broker.lrange("webhooks-transport-threads", 0, -1))
    assert pushed == list(range(200))


def test_a_replaced_pool_gets_a_new_client(redis_broker):
    with Connection(REDIS_URL, transport=TRANSPORT) as connection:
        channel = connection.default_channel
        first = channel._create_client()
        assert channel._create_client() is first
        channel._pool = redis_py.ConnectionPool.from_url(REDIS_URL)
        second = channel._create_client()
        assert second is not first and second.connection_pool is channel._pool
        assert second.ping()
        channel._pool.disconnect()


def test_the_polling_client_is_kombus_own(redis_broker):
    with Connection(REDIS_URL, transport=TRANSPORT) as connection:
        channel = connection.default_channel
        assert isinstance(connection.transport, Transport)
        assert channel._create_client(asynchronous=True) is not channel._create_client()
        assert channel._create_client(asynchronous=True).connection_pool is channel.async_pool
