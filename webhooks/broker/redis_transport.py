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
URLs (``REDIS_SCHEMES``); others (``sentinel://``, ``redis+socket://``) keep
kombu's own.
"""

from __future__ import annotations

from kombu.transport import redis

__all__ = ["Transport", "Channel", "REDIS_SCHEMES", "uses_this_transport"]

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
