"""A Redis database number leased by one test process, so that two test runs on one machine
never use (and flush) the same one.

Redis has 16 numbered databases and no names, so a run cannot make one of its own as it
makes a PostgreSQL database. Instead each test process takes a lease on one: the key
``webhooks:test-lease:<n>`` in database ``REGISTRY_DB``, set with ``SET NX EX`` (only if
no one holds it, expiring after ``LEASE_SECONDS``). A thread renews it every
``RENEW_EVERY_S`` while the process lives, and the process deletes it when it ends (only
if it still holds it: a compare-and-delete script). A run killed with SIGKILL leaves its
leases behind until they expire, unless the next process on the same host finds their
holder dead and takes them at once.

The leases live apart from the leased databases because the tests flush those.
"""

from __future__ import annotations

import os
import socket
import sys
import threading

__all__ = ["Lease", "DbTaken", "lease_one_of", "lease_exactly", "parse_pool"]

REGISTRY_DB = 0
LEASE_SECONDS = 120
RENEW_EVERY_S = 30
KEY = "webhooks:test-lease:{db}"
HOST = socket.gethostname()

# Extends the lease only while its value is still ours; 0 if someone else holds it now.
_RENEW = ("if redis.call('get', KEYS[1]) == ARGV[1] then "
          "return redis.call('expire', KEYS[1], ARGV[2]) else return 0 end")
# Deletes the lease only while its value is still ours.
_RELEASE = ("if redis.call('get', KEYS[1]) == ARGV[1] then "
            "return redis.call('del', KEYS[1]) else return 0 end")
# Replaces a lease whose holder is known dead (the value read before), and no other.
_TAKE_OVER = ("if redis.call('get', KEYS[1]) == ARGV[1] then "
              "return redis.call('set', KEYS[1], ARGV[2], 'EX', ARGV[3]) else return false end")


class DbTaken(RuntimeError):
    """The Redis database asked for is leased by another test process that is alive."""


def parse_pool(text: str) -> list[int]:
    """``"1-13"`` or ``"8,9,12"`` (or both, comma-separated) as database numbers, 0 to 15."""
    numbers: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        low, _, high = part.partition("-")
        numbers += range(int(low), int(high or low) + 1)
    if not numbers or any(not 0 <= n <= 15 for n in numbers):
        raise ValueError(f"Redis database numbers 0 to 15 are expected, got {text!r}")
    return numbers


def _holder_is_dead(value: bytes | None) -> bool:
    """True when a lease's value names a process of this host that no longer runs."""
    if not value:
        return False
    fields = dict(item.split("=", 1) for item in value.decode().split() if "=" in item)
    if fields.get("host") != HOST or not fields.get("pid", "").isdigit():
        return False
    try:
        os.kill(int(fields["pid"]), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class Lease:
    """This process's lease on Redis database ``db`` (of the server ``client`` reaches)."""

    def __init__(self, client, db: int, holder: str):
        self.client, self.db = client, db
        self.key = KEY.format(db=db)
        self.value = f"{holder} host={HOST} pid={os.getpid()}"
        self.owner_pid = os.getpid()
        self._stop = threading.Event()

    def take(self) -> bool:
        """Take the lease if it is free or its holder is dead; True if this process holds it."""
        if self.client.set(self.key, self.value, nx=True, ex=LEASE_SECONDS):
            return True
        held_by = self.client.get(self.key)
        if _holder_is_dead(held_by):
            return bool(self.client.eval(_TAKE_OVER, 1, self.key, held_by, self.value,
                                         LEASE_SECONDS))
        return False

    def holder(self) -> str:
        value = self.client.get(self.key)
        return value.decode() if value else "nobody"

    def renew(self) -> bool:
        """Extend the lease; if it expired meanwhile (a stalled process, a flushed registry),
        take it again if still free. False, and a warning, if another process has it now."""
        if self.client.eval(_RENEW, 1, self.key, self.value, LEASE_SECONDS) or self.take():
            return True
        print(f"warning: the lease on Redis db {self.db} was lost to {self.holder()}: this "
              "test run and that one now share it", file=sys.stderr)
        return False

    def keep(self) -> "Lease":
        """Renew every RENEW_EVERY_S in a daemon thread until release()."""
        def renew_until_released() -> None:
            while not self._stop.wait(RENEW_EVERY_S):
                try:
                    self.renew()
                except Exception as error:  # noqa: BLE001 - Redis down: the next try may work
                    print(f"warning: could not renew the lease on Redis db {self.db}: {error}",
                          file=sys.stderr)

        threading.Thread(target=renew_until_released, name=f"redis-lease-{self.db}",
                         daemon=True).start()
        return self

    def release(self) -> None:
        """Give the lease back (only the process that took it; a forked child does nothing)."""
        self._stop.set()
        if os.getpid() != self.owner_pid:
            return
        try:
            self.client.eval(_RELEASE, 1, self.key, self.value)
        except Exception:  # noqa: BLE001 - Redis gone: the lease expires by itself
            pass


def lease_exactly(client, db: int, holder: str) -> Lease:
    """The lease on ``db``; DbTaken naming the holder if another live process has it."""
    lease = Lease(client, db, holder)
    if not lease.take():
        raise DbTaken(f"Redis db {db} is in use by another test run ({lease.holder()}): give "
                      "this run another WEBHOOKS_TEST_REDIS_URL, or leave it unset to lease a "
                      "free db")
    return lease


def lease_one_of(client, pool: list[int], holder: str) -> Lease:
    """The lease on the first free database of ``pool``; DbTaken if every one is held."""
    for db in pool:
        lease = Lease(client, db, holder)
        if lease.take():
            return lease
    raise DbTaken(f"every Redis db this test run may lease ({pool}) is in use by another run: "
                  "wait for one to end, widen WEBHOOKS_TEST_REDIS_DBS, or set "
                  "WEBHOOKS_TEST_REDIS_URL")
