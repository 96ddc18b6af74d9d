"""The address guard with WEBHOOKS_ALLOW_PRIVATE_TARGETS=false, through the whole stack:
no endpoint on a loopback, private, link-local, metadata or otherwise non-public
address ever receives a request, however its address is spelled or resolved,
and a public endpoint that redirects to a private one leads nowhere.

Only addresses on this machine are ever connected to: the loopback targets
have a local receiver listening behind them (which must see nothing), the
other literal addresses are refused before any connect, and a network jail
(tests/support/netjail) refuses, in the workers and in this process, any
connect that would leave the machine, so that a broken guard fails the test
instead of sending traffic. Names that resolve to private addresses come from
a resolver override in this process (never from DNS).
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.factories import Published, make_account, make_subscription
from tests.support import netjail_rules
from tests.support.fastreceiver import FastReceiver, Redirect
from tests.support.stack import Workers, use_env, wait_until, worker_env
from webhooks import emit_event
from webhooks.broker import outbox
from webhooks.events.samples import sample_data
from webhooks.storage.db import get_engine

pytestmark = pytest.mark.integration

GUARD_ENV = worker_env(RETRY_DELAYS="1", ALLOW_PRIVATE_TARGETS="false", TIMEOUT="2")
JAIL = Path(__file__).parent / "support" / "netjail"


def _loopback_targets(v4: int, v6: int | None) -> list[str]:
    """Spellings of this machine, each on a port where the receiver listens."""
    targets = [
        f"http://127.0.0.1:{v4}/", f"http://127.1:{v4}/", f"http://2130706433:{v4}/",
        f"http://0177.0.0.1:{v4}/", f"http://0x7f000001:{v4}/", f"http://0x7f.1:{v4}/",
        f"http://0.0.0.0:{v4}/", f"http://0:{v4}/", f"http://localhost:{v4}/",
        f"http://LOCALHOST:{v4}/", f"http://localhost.:{v4}/", f"http://[::ffff:127.0.0.1]:{v4}/",
        f"http://[::ffff:7f00:1]:{v4}/",
    ]
    if v6 is not None:
        targets += [f"http://[::1]:{v6}/", f"http://[0:0:0:0:0:0:0:1]:{v6}/", f"http://[::]:{v6}/"]
    return targets


# Nothing listens at these; the guard must refuse them before any connect.
PRIVATE_LITERALS = [
    "http://10.0.0.1/", "http://172.16.0.1/", "http://192.168.1.1/",
    "http://169.254.169.254/latest/meta-data/",
    "http://100.64.0.1/", "http://[fe80::1]/", "http://[fd00::1]/", "http://[fc00::1]/",
    "http://[::ffff:169.254.169.254]/", "http://[::ffff:10.0.0.1]/", "http://[64:ff9b::a9fe:a9fe]/",
    "http://[2002:a9fe:a9fe::1]/", "http://2852039166/", "http://0251.0376.0251.0376/",
    "http://0xa9fea9fe/", "http://224.0.0.1/", "http://255.255.255.255/", "http://198.18.0.1/",
]


@pytest.fixture(scope="module")
def receivers():
    v4 = FastReceiver("127.0.0.1").start()
    try:
        v6 = FastReceiver("::1").start()
    except OSError:
        v6 = None
    yield v4, v6
    v4.stop()
    if v6:
        v6.stop()


@pytest.fixture
def jailed_workers(postgres, db, redis_broker, monkeypatch, tmp_path):
    from tests.support import services

    services.check_redis()
    jail_log = tmp_path / "jail.log"
    env = dict(GUARD_ENV, WEBHOOKS_TEST_NETJAIL_LOG=str(jail_log),
               PYTHONPATH=os.pathsep.join([str(JAIL), os.environ.get("PYTHONPATH", "")]))
    use_env(monkeypatch, GUARD_ENV)
    workers = Workers().use(env, concurrency=4)
    yield workers, jail_log
    workers.stop()


def test_no_private_target_receives_a_request_through_the_workers(jailed_workers, receivers):
    from web import create_app

    workers, jail_log = jailed_workers
    v4, v6 = receivers
    v4.clear()
    if v6:
        v6.clear()
    urls = _loopback_targets(v4.port, v6.port if v6 else None) + PRIVATE_LITERALS

    # The API refuses every one of them at once, with a clear error.
    client = create_app({"TESTING": True}).test_client()
    from tests.api.helpers import new_caller

    caller = new_caller("guard")
    for url in urls:
        response = client.post("/api/webhooks/subscriptions", json={"url": url}, headers=caller.headers)
        assert response.status_code == 400, (url, response.get_json())
        assert response.get_json()["error"]["code"] == "target_not_allowed", url

    # Rows made without the API (an old row, a changed setting): the transport refuses them.
    account_id, _ = make_account()
    for url in urls:
        make_subscription(account_id, url)
    event = emit_event(account_id, "email.sent", sample_data("email.sent"))
    assert outbox.flush(10)
    assert len(event.delivery_ids) == len(urls)
    wait_until(lambda: _statuses() == {"dead"}, timeout=40, what=f"every delivery dead ({_statuses()})")

    with get_engine().connect() as connection:
        rows = connection.execute(text(
            "SELECT s.url, a.number, a.status_code, a.error FROM attempts a "
            "JOIN deliveries d ON d.id = a.delivery_id JOIN subscriptions s ON s.id = d.subscription_id "
            "ORDER BY s.url, a.number")).all()
    assert len(rows) == 2 * len(urls)  # the whole (one-step) ladder, each attempt refused
    # An address the URL spells is refused as such; one a name (or a spelling getaddrinfo
    # reads, such as 127.1) resolves to fails as a name that does not resolve (issue 36).
    wrong = [(url, error) for url, _, status_code, error in rows
             if status_code is not None or not (
                 error.startswith("refused: destination")
                 or error == "DNS lookup failed: the endpoint's host name does not resolve to "
                             "a public address")]
    assert wrong == []
    assert v4.count() == 0 and (v6 is None or v6.count() == 0), "a private target received a request"
    assert not jail_log.exists(), f"the guard let connects through: {jail_log.read_text()}"


# ---------------------------------------------------------------- in-process: names and redirects

FAKE_DNS = {
    "internal.corp.test": ["10.1.2.3"],
    "metadata.google.internal": ["169.254.169.254"],
    "v6-private.test": ["fd00::5"],
    "mapped.test": ["::ffff:127.0.0.1"],
    "loopback.test": ["127.0.0.1"],
    "unspecified.test": ["0.0.0.0"],
    "many.test": ["10.0.0.7", "192.168.0.9", "127.0.0.1", "::1"],
    "hooks.public-looking.test": ["127.0.0.2"],  # stands in for a public address (see below)
}
NO_SUCH_NAME = "no-such-name.test"  # the resolver answers that it does not exist


@pytest.fixture
def resolver(monkeypatch):
    """getaddrinfo answers FAKE_DNS for the names above and delegates everything else."""
    real = socket.getaddrinfo

    def getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):
        name = host.decode() if isinstance(host, bytes) else host
        if name == NO_SUCH_NAME:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        if name in FAKE_DNS:
            answers = []
            for address in FAKE_DNS[name]:
                af = socket.AF_INET6 if ":" in address else socket.AF_INET
                if family not in (0, socket.AF_UNSPEC, af):
                    continue
                sockaddr = (address, port, 0, 0) if af == socket.AF_INET6 else (address, port)
                answers.append((af, socket.SOCK_STREAM, 6, "", sockaddr))
            return answers
        return real(host, port, family, type, proto, flags)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture
def jail(monkeypatch):
    """The network jail in this process: a connect off this machine fails the test."""
    netjail_rules.install()
    yield
    netjail_rules.uninstall()


@pytest.fixture
def guarded(db, monkeypatch):
    """This process delivers itself (webhooks.services.attempt.run_attempt: claim, sign, POST, record)."""
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_ALLOW_PRIVATE_TARGETS", "false")
    monkeypatch.setenv("WEBHOOKS_TIMEOUT", "2")
    reset_settings_cache()
    published = Published()
    monkeypatch.setattr("webhooks.broker.outbox.send_to_broker", lambda items: published.extend(items) or [])
    return make_account()[0]


def _deliver_once(account_id: str, url: str):
    """One subscription and one event; run attempt 1 here; returns the recorded attempt.
    The account's earlier subscriptions are left out (they take test.ping alone)."""
    from sqlalchemy import update

    from webhooks.services.attempt import run_attempt
    from webhooks.storage.models import Subscription

    with get_engine().begin() as connection:
        connection.execute(update(Subscription).values(event_types=["test.ping"]))
    make_subscription(account_id, url, ["email.sent"])
    (delivery_id,) = emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids
    assert run_attempt(delivery_id, 0) == "pending"  # retried: refused is "any other outcome"
    with get_engine().connect() as connection:
        return connection.execute(
            text("SELECT status_code, error, error_kind, outcome FROM attempts "
                 "WHERE delivery_id = :d"), {"d": delivery_id}).one()


@pytest.mark.parametrize("name", sorted(set(FAKE_DNS) - {"hooks.public-looking.test"}))
def test_a_name_with_only_private_addresses_fails_as_a_name_that_does_not_resolve(
        guarded, resolver, jail, receivers, name, caplog):
    """The tenant reads the attempt's error and kind: the same for a name whose addresses
    are all private as for a name that does not exist, so subscribing to internal names
    cannot tell which of them resolve (issue 36). The operators' log has the addresses."""
    v4, v6 = receivers
    v4.clear()
    caplog.set_level(logging.INFO, logger="webhooks.netguard")
    private = _deliver_once(guarded, f"http://{name}:{v4.port}/hook")
    unknown = _deliver_once(guarded, f"http://{NO_SUCH_NAME}:{v4.port}/hook")
    assert (private.status_code, private.error_kind, private.error, private.outcome) == (
        unknown.status_code, unknown.error_kind, unknown.error, unknown.outcome) == (
        None, "dns", "DNS lookup failed: the endpoint's host name does not resolve to a "
                     "public address", "retry")
    logged = [r.getMessage() for r in caplog.records if r.name == "webhooks.netguard"]
    assert any(name in line and all(address in line for address in FAKE_DNS[name])
               for line in logged), "operators lost the addresses"
    assert any(NO_SUCH_NAME in line and "Name or service not known" in line for line in logged)
    assert v4.count() == 0 and (v6 is None or v6.count() == 0)


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_a_public_looking_endpoint_that_redirects_to_a_private_one(guarded, resolver, jail, receivers,
                                                                   monkeypatch, code):
    """127.0.0.2 plays a public host (the guard is told so); it redirects to the private receiver.

    Redirects are never followed: the 3xx is recorded and retried like a 5xx,
    and the private target receives nothing.
    """
    from webhooks.sender import connections
    from webhooks.sender import netguard

    v4, _ = receivers
    v4.clear()
    monkeypatch.setattr(connections, "is_public_address",
                        lambda address: address == "127.0.0.2" or netguard.is_public_address(address))
    public = FastReceiver("127.0.0.2").start()
    try:
        public.rule("/in", Redirect(v4.url("/private"), code))
        attempt = _deliver_once(guarded, f"http://hooks.public-looking.test:{public.port}/in")
        assert (attempt.status_code, attempt.error, attempt.outcome) == (code, None, "retry")
        assert public.count("/in") == 1
        assert v4.count() == 0, "the redirect was followed to the private target"
    finally:
        public.stop()


def _statuses() -> set[str]:
    with get_engine().connect() as connection:
        return set(connection.execute(text("SELECT status FROM deliveries")).scalars())
