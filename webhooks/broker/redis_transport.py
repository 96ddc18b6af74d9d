"""kombu's Redis transport, with one redis-py client per channel instead of one per command.

kombu builds a new ``redis.Redis`` object for every synchronous command a
channel sends (``Channel._create_client``): every publish, every
acknowledgement of a late-acked task. Building one copies redis-py's table of
about 170 response callbacks, which cost more than the command itself: with
kombu 5.7 and redis-py 8, 0.37 ms of the 0.85 ms of CPU that one
``send_task`` takes (docs/performance.md, "One Redis client per channel").

A ``redis.Redis`` object holds no connection of its own: each command takes
one from the channel's connection pool and gives it back, so one object is
safe to share between threads. This channel keeps the one it built, and
builds another only if the channel's pool was replaced. The asynchronous
client (the worker's polling loop) is kombu's as it was.

celeryconfig.py selects this transport for ``redis://`` and ``rediss://``
URLs (``REDIS_SCHEMES``), and :class:`SentinelTransport` for ``sentinel://``
(kombu's, with a fix for a lost master); others (``redis+socket://``) keep
kombu's own.
"""

from __future__ import annotations

from kombu.transport import redis

__all__ = ["Transport", "Channel", "SentinelTransport", "SentinelChannel", "REDIS_SCHEMES",
           "uses_this_transport"]

REDIS_SCHEMES = ("redis", "rediss")


def uses_this_transport(broker_url: str) -> bool:
    """True for a broker URL this transport serves (kombu's own Redis schemes)."""
    return broker_url.partition("://")[0].lower() in REDIS_SCHEMES


class Channel(redis.Channel):
    """A Redis channel that reuses its synchronous client."""

    _sync_client = None

    def _create_client(self, asynchronous: bool = False):
        if asynchronous:
            return super()._create_client(asynchronous=True)
        client = self._sync_client
        if client is None or client.connection_pool is not self.pool:
            client = self._sync_client = super()._create_client()
        return client


class Transport(redis.Transport):
    """kombu's Redis transport with :class:`Channel`."""

    Channel = Channel


class SentinelChannel(redis.SentinelChannel):
    """kombu's Sentinel channel, surviving the close that follows a lost master.

    When the master goes away, Celery closes the worker's broker connection;
    kombu first detaches that connection from its transport, then closes the
    channel, which rebuilds its pool to give the unacknowledged messages back
    and needs the connection's address to do so: with kombu 5.7 the worker
    died there (AttributeError: 'NoneType' object has no attribute 'hostname')
    instead of reconnecting to the promoted replica, as the cluster's
    ``redis-primary-kill`` fault showed (docs/reliability.md). This channel
    keeps the connection it was opened with and uses it then.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._opened_with = self.connection.client

    def _get_pool(self, asynchronous=False):
        transport = self.connection
        if transport.client is not None or self._opened_with is None:
            return super()._get_pool(asynchronous)
        transport.client = self._opened_with  # read by _connparams and for the Sentinels
        try:
            return super()._get_pool(asynchronous)
        finally:
            transport.client = None


class SentinelTransport(redis.SentinelTransport):
    """kombu's Sentinel transport with :class:`SentinelChannel` (``sentinel://`` URLs)."""

    Channel = SentinelChannel
