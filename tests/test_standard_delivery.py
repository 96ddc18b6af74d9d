"""Standard Webhooks deliveries (CONTRACT 9.3) through a real worker process on the real
Redis and PostgreSQL, verified at the receiver by the reference ``standardwebhooks``
package: every attempt of the ladder (each re-signed when sent), a staged rotation (both
secrets verify), a replay, and a PATCH of the scheme taking effect on the next delivery."""

from __future__ import annotations

import json

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from tests.factories import AUDIT_ACTOR, make_subscription
from tests.support.pipeline import PIPELINE_ENV, delivery_status, fail_then_replay, worker_fixtures
from tests.support.stack import wait_until
from webhooks import emit_event
from webhooks.events.samples import sample_data
from webhooks.signing import verify
from webhooks.storage.db import session_scope
from webhooks.storage.models import Subscription, utcnow

pytestmark = pytest.mark.integration


worker, account = worker_fixtures(PIPELINE_ENV)


def reference_verifies(secret: str, request) -> bool:
    try:
        Webhook(secret).verify(request.body, request.headers, json_parse=False)
        return True
    except WebhookVerificationError:
        return False


def _standard(account_id: str, url: str) -> Subscription:
    return make_subscription(account_id, url, signature_scheme="standard")


def test_every_attempt_of_the_ladder_is_signed_when_sent(account, receiver):
    receiver.script("/std", 500, 500, 200)
    subscription = _standard(account, receiver.url("/std"))
    event = emit_event(account, "email.sent", sample_data("email.sent"))
    delivery_id = event.delivery_ids[0]
    wait_until(lambda: delivery_status(delivery_id) == "done", what="done")
    requests = receiver.received("/std")
    assert [r.headers["X-Service-Attempt"] for r in requests] == ["1", "2", "3"]
    for request in requests:
        headers = {name.lower(): value for name, value in request.headers.items()}
        assert reference_verifies(subscription.secret, request)
        verify(subscription.secret, request.body, request.headers)  # ours agrees
        assert headers["webhook-id"] == event.id == json.loads(request.body)["id"]
        assert abs(int(headers["webhook-timestamp"]) - request.at) <= 2  # signed when sent
        assert "x-service-signature" not in headers
        assert headers["x-service-delivery-id"] == delivery_id  # the other headers stay
    stamps = [int(r.headers["webhook-timestamp"]) for r in requests]
    assert stamps == sorted(stamps) and stamps[-1] > stamps[0]
    assert len({r.headers["webhook-signature"] for r in requests}) == 3  # re-signed each time
    assert not reference_verifies(make_subscription(account, "https://x.example/",
                                                    signature_scheme="standard").secret,
                                  requests[0])


def test_a_staged_rotation_sends_both_signatures(account, receiver):
    from webhooks.tenants import rotation

    subscription = _standard(account, receiver.url("/staged"))
    with session_scope() as session:
        rotation.rotate(session, subscription.id, utcnow(), activate_in=3600)
    with session_scope() as session:
        row = session.get(Subscription, subscription.id)
        current, following = row.secret, row.next_secret
    assert following.startswith("whsec_") and following != current
    emit_event(account, "email.sent", sample_data("email.sent"))
    (request,) = receiver.wait_for(1, "/staged")
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    assert reference_verifies(current, request) and reference_verifies(following, request)


def test_a_replay_is_signed_and_verifies(account, receiver):
    subscription = _standard(account, receiver.url("/replayed"))
    replayed = fail_then_replay(account, receiver, "/replayed")
    assert reference_verifies(subscription.secret, replayed.again)


def test_a_scheme_changed_by_patch_signs_the_next_delivery(account, receiver):
    from webhooks.services import subscriptions

    subscription = make_subscription(account, receiver.url("/switch"))
    emit_event(account, "email.sent", sample_data("email.sent"))
    (service,) = receiver.wait_for(1, "/switch")
    verify(subscription.secret, service.body, service.headers["X-Service-Signature"])
    assert "webhook-signature" not in service.headers
    with session_scope() as session:
        row = session.get(Subscription, subscription.id)
        assert subscriptions.change_scheme(session, row, "standard", actor=AUDIT_ACTOR)
        new_secret = row.secret
    emit_event(account, "email.sent", sample_data("email.sent"))
    standard = receiver.wait_for(2, "/switch")[1]
    assert reference_verifies(new_secret, standard)
    assert "X-Service-Signature" not in standard.headers
