"""A client generated from the served OpenAPI document installs and runs the README walkthrough.

Once per module: the app is served, ``openapi-python-client`` generates a
client package from ``GET /api/webhooks/openapi.json`` into a temporary
folder, and pip installs it (``--target``, a folder of its own: the test
venv is left as it was) like any package, so its packaging must accept the
document's ``info.version``. Then, against a live app, a real worker and a
local receiver, the generated code subscribes, sends a test event, waits for
it to be delivered (its signature verified with the secret the client got)
and lists the deliveries and the subscriptions; and it drives the staged
rotation's activate and cancel routes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support import services
from tests.support.live_app import serving_app
from tests.support.worker import WorkerProcess
from webhooks.signing import verify
from webhooks.storage.db import session_scope

from tests.dashboard.test_browser import ENV

pytestmark = [pytest.mark.integration, pytest.mark.process]

_BIN = Path(sys.executable).parent
PACKAGE = "webhooks_api_client"


def _run(command: list[str], cwd: Path) -> None:
    # The generator runs ruff (one of its dependencies) from PATH on what it wrote.
    env = {**os.environ, "PATH": f"{_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"{' '.join(command)}\n{done.stdout}\n{done.stderr}"


@pytest.fixture(scope="module")
def generated_client(tmp_path_factory):
    """The generated package, installed into a folder of its own and put on sys.path."""
    generator = _BIN / "openapi-python-client"
    if not generator.exists():
        services.unavailable("openapi-python-client (the test extra)",
                             FileNotFoundError(str(generator)))
    folder = tmp_path_factory.mktemp("generated-client")
    # The document as the app serves it (it needs no database or broker).
    with serving_app() as url:
        with urllib.request.urlopen(f"{url}/api/webhooks/openapi.json", timeout=30) as answer:
            document = json.load(answer)
    (folder / "openapi.json").write_text(json.dumps(document), encoding="utf-8")
    _run([str(generator), "generate", "--path", "openapi.json", "--meta", "setup",
          "--output-path", "client"], folder)
    # A package like any other: pip builds it (its setup.py carries info.version) and installs
    # it; the client's own dependencies (httpx, attrs) are the test extra's already.
    _run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
          str(folder / "site"), str(folder / "client")], folder)
    sys.path.insert(0, str(folder / "site"))
    try:
        import importlib

        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(folder / "site"))
        for name in [name for name in sys.modules if name.split(".")[0] == PACKAGE]:
            del sys.modules[name]


@pytest.fixture
def worker(postgres):
    services.check_redis()
    import redis

    from tests.support.services import REDIS_URL

    redis.Redis.from_url(REDIS_URL).flushdb()
    process = WorkerProcess(ENV).start()
    yield process
    process.stop()


@pytest.fixture
def live_app(worker, db, tmp_path, monkeypatch):
    from webhooks.config import reset_settings_cache

    for name, value in {**ENV, "WEBHOOKS_DATA_DIR": str(tmp_path)}.items():
        monkeypatch.setenv(name, value)
    reset_settings_cache()
    with serving_app() as url:
        yield url


def _until(condition, what: str, timeout: float = 60.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def test_the_generated_client_runs_the_readme_walkthrough(
        generated_client, live_app, receiver, worker):
    from tests.factories import make_account

    client_module = generated_client
    from webhooks_api_client import AuthenticatedClient
    from webhooks_api_client.api.deliveries import deliveries_get, deliveries_list_page
    from webhooks_api_client.api.subscriptions import (
        subscriptions_activate_staged_secret,
        subscriptions_cancel_staged_secret,
        subscriptions_create,
        subscriptions_list_all,
        subscriptions_rotate_secret,
        subscriptions_send_test_event,
    )
    from webhooks_api_client.models import (
        DeliveryStatus,
        RotateSecret,
        SubscriptionCreate,
        SubscriptionWithSecret,
        TestSent,
    )

    assert client_module.__name__ == PACKAGE
    _, api_key = make_account("Acme")
    client = AuthenticatedClient(base_url=live_app, token=api_key,
                                 raise_on_unexpected_status=True)

    # 1. Subscribe the local receiver.
    created = subscriptions_create.sync_detailed(
        client=client, body=SubscriptionCreate(url=receiver.url("/walkthrough")))
    assert created.status_code == 201
    subscription = created.parsed
    assert isinstance(subscription, SubscriptionWithSecret)
    assert subscription.secret.startswith("whsec_")
    assert created.headers["Location"] == f"/api/webhooks/subscriptions/{subscription.id}"

    # 2. Send a test event; it arrives, signed with the secret the client was given.
    sent = subscriptions_send_test_event.sync(subscription.id, client=client)
    assert isinstance(sent, TestSent)
    delivery = _until(
        lambda: (found := deliveries_get.sync(sent.delivery_id, client=client))
        and found.status == DeliveryStatus.DONE and found,
        f"the test delivery to be done\n{worker.log()}")
    assert delivery.attempt_count == 1 and delivery.attempts[0].status_code == 200
    (arrived,) = receiver.received("/walkthrough")
    verify(subscription.secret, arrived.body, arrived.headers["X-Service-Signature"])
    assert json.loads(arrived.body)["type"] == "test.ping"

    # 3. List the deliveries and the subscriptions.
    page = deliveries_list_page.sync(client=client, subscription_id=subscription.id)
    assert [d.id for d in page.data] == [sent.delivery_id]
    listed = subscriptions_list_all.sync(client=client)
    assert [s.id for s in listed.data] == [subscription.id]

    # The staged rotation's routes (CONTRACT 9.3) through the same client.
    staged = subscriptions_rotate_secret.sync(subscription.id, client=client,
                                              body=RotateSecret(activate_in=3600))
    activated = subscriptions_activate_staged_secret.sync(subscription.id, client=client)
    assert activated.secret == staged.next_secret and activated.next_secret is None
    subscriptions_rotate_secret.sync(subscription.id, client=client,
                                     body=RotateSecret(activate_in=3600))
    cancelled = subscriptions_cancel_staged_secret.sync_detailed(subscription.id, client=client)
    assert cancelled.status_code == 200
    refused = subscriptions_cancel_staged_secret.sync_detailed(subscription.id, client=client)
    assert refused.status_code == 409 and refused.parsed.error.code == "nothing_staged"


def test_the_generated_client_drives_the_publisher_api(generated_client, live_app, receiver,
                                                       worker):
    """Issue 38: the publisher routes, under their own tag and security scheme, through the
    generated client: an account is made, subscribed, sent an event and a batch (one of them
    repeated under its idempotency key), its key rotated, and the account deleted."""
    from webhooks.events.samples import sample_data
    from webhooks.services import publishers
    from webhooks_api_client import AuthenticatedClient
    from webhooks_api_client.api.publisher import (
        publisher_create,
        publisher_delete,
        publisher_emit,
        publisher_emit_batch,
        publisher_get,
        publisher_list_all,
        publisher_rotate_key,
    )
    from webhooks_api_client.api.subscriptions import subscriptions_create
    from webhooks_api_client.models import (
        AccountCreate,
        EventBatch,
        EventIn,
        EventInData,
        EventInType,
        SubscriptionCreate,
    )

    with session_scope() as session:
        _, key = publishers.create(session, "generated client")
    client = AuthenticatedClient(base_url=live_app, token=key, raise_on_unexpected_status=True)

    made = publisher_create.sync_detailed(client=client, body=AccountCreate(name="Acme"))
    assert made.status_code == 201 and made.parsed.api_key.startswith("whk_")
    account = made.parsed
    customer = AuthenticatedClient(base_url=live_app, token=account.api_key,
                                   raise_on_unexpected_status=True)
    subscription = subscriptions_create.sync(
        client=customer, body=SubscriptionCreate(url=receiver.url("/publisher")))

    def event(key=None):
        return EventIn(type_=EventInType.EMAIL_SENT,
                       data=EventInData.from_dict(sample_data("email.sent")),
                       **({"idempotency_key": key} if key else {}))

    first = publisher_emit.sync_detailed(account.id, client=client, body=event("order-1"))
    assert first.status_code == 202 and first.parsed.deliveries == 1
    again = publisher_emit.sync_detailed(account.id, client=client, body=event("order-1"))
    assert again.status_code == 200
    assert (again.parsed.event_id, again.parsed.deliveries) == (first.parsed.event_id, 0)
    batch = publisher_emit_batch.sync(account.id, client=client,
                                      body=EventBatch(events=[event(), event()]))
    assert len(batch.event_ids) == 2
    _until(lambda: len(receiver.received("/publisher")) == 3, f"3 deliveries\n{worker.log()}")
    for arrived in receiver.received("/publisher"):
        verify(subscription.secret, arrived.body, arrived.headers["X-Service-Signature"])

    assert publisher_get.sync(account.id, client=client).subscriptions == 1
    assert [a.id for a in publisher_list_all.sync(client=client).data] == [account.id]
    rotated = publisher_rotate_key.sync(account.id, client=client)
    assert rotated.api_key != account.api_key
    assert publisher_delete.sync_detailed(account.id, client=client).status_code == 204
    gone = publisher_get.sync_detailed(account.id, client=client)
    assert gone.status_code == 404
