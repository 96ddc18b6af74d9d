"""Two test runs on one machine never share a database or a Redis db (issue 36, item 17): the
suite always used webhooks_test_gw0/gw1 and Redis dbs 13 and 12, and dropped and flushed them
at start, so a second run wrecked the first. The names now come from the run
(tests/support/services.py), and Redis dbs are leased (tests/support/redis_lease.py).

The lease tests use database numbers above 15, which no Redis has (made from the process
id): their keys never meet a real run's lease, nor another test process's."""

from __future__ import annotations

import os
import subprocess

import pytest
import redis

from tests.support import redis_lease, services
from tests.support.redis_lease import DbTaken, Lease, lease_exactly, lease_one_of, parse_pool

# This process's own (xdist workers, and other runs, run at once), cleared around each test.
FAKE_DBS = range(100 + 10 * os.getpid(), 108 + 10 * os.getpid())
A, B, C, D = FAKE_DBS[:4]


def test_a_run_without_given_names_gets_databases_of_its_own():
    name, own = services.pg_database_name({}, "r1a2b3c4d", "gw1")
    assert (name, own) == ("webhooks_test_r1a2b3c4d_gw1", True)
    other, _ = services.pg_database_name({}, "r5e6f7a8b", "gw1")
    assert other != name


def test_a_given_database_name_is_honoured_and_kept():
    environ = {"WEBHOOKS_TEST_PG_DATABASE": "webhooks_h3"}
    assert services.pg_database_name(environ, "r1a2b3c4d", "gw0") == ("webhooks_h3_gw0", False)
    assert services.pg_database_name(environ, "r1a2b3c4d", "") == ("webhooks_h3", False)


def test_this_run_is_named_and_its_workers_share_the_name():
    assert os.environ["WEBHOOKS_TEST_RUN"] == services.RUN
    if services.PER_RUN_DATABASE:
        assert services.RUN in services.PG_TEST_DB


def test_a_pool_is_read_as_ranges_and_numbers():
    assert parse_pool("1-3, 7,9-10") == [1, 2, 3, 7, 9, 10]
    with pytest.raises(ValueError):
        parse_pool("12-16")


@pytest.fixture
def registry(redis_broker):
    """A client of the leases' registry (db 0); the fake dbs' leases are removed after."""
    client = redis.Redis.from_url(services.REDIS_URL.rpartition("/")[0] + "/0")
    keys = [redis_lease.KEY.format(db=db) for db in FAKE_DBS]
    client.delete(*keys)
    yield client
    client.delete(*keys)
    client.close()


def test_a_db_is_leased_to_one_process_at_a_time(registry):
    first = lease_exactly(registry, A, "run=a worker=gw0")
    with pytest.raises(DbTaken, match=f"Redis db {A} is in use by another test run .*run=a"):
        lease_exactly(registry, A, "run=b worker=gw0")
    assert 0 < registry.ttl(first.key) <= redis_lease.LEASE_SECONDS
    first.release()
    lease_exactly(registry, A, "run=b worker=gw0").release()


def test_a_run_takes_the_first_free_db_of_its_pool(registry):
    held = lease_exactly(registry, A, "run=a worker=gw0")
    mine = lease_one_of(registry, [A, B, C], "run=b worker=gw0")
    assert mine.db == B
    with pytest.raises(DbTaken, match="every Redis db"):
        lease_one_of(registry, [A, B], "run=c worker=gw0")
    held.release(), mine.release()


def test_renewing_extends_the_lease_and_notices_it_was_lost(registry, capsys):
    lease = lease_exactly(registry, A, "run=a worker=gw0")
    registry.expire(lease.key, 5)
    assert lease.renew() and registry.ttl(lease.key) > 5
    registry.delete(lease.key)  # expired while the process stalled: taken again if free
    assert lease.renew() and registry.get(lease.key) == lease.value.encode()
    registry.set(lease.key, "run=b worker=gw0 host=elsewhere pid=1")
    assert not lease.renew()
    assert "lost to run=b" in capsys.readouterr().err
    lease.release()
    assert registry.get(lease.key) == b"run=b worker=gw0 host=elsewhere pid=1"  # not ours


def test_a_lease_whose_process_died_is_taken_at_once(registry):
    """A run killed with SIGKILL does not hold its dbs until the leases expire."""
    dead = f"run=a worker=gw0 host={redis_lease.HOST} pid={_ended_pid()}"
    registry.set(redis_lease.KEY.format(db=A), dead, ex=redis_lease.LEASE_SECONDS)
    taken = lease_exactly(registry, A, "run=b worker=gw0")
    assert registry.get(taken.key) == taken.value.encode()
    taken.release()


def _ended_pid() -> int:
    """The pid of a process that ran and ended (reaped: nothing runs under it now)."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_a_forked_child_does_not_release_its_parents_lease(registry):
    lease = lease_exactly(registry, A, "run=a worker=gw0")
    pid = os.fork()
    if pid == 0:  # the child: what an atexit handler inherited from the parent would do
        lease.release()
        os._exit(0)
    os.waitpid(pid, 0)
    assert registry.get(lease.key) == lease.value.encode()
    lease.release()
