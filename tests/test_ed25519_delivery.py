"""``standard-ed25519`` deliveries (CONTRACT 10.2) through a real worker process on the real
Redis and PostgreSQL, checked at the receiver by ``cryptography``'s ``Ed25519PublicKey`` alone,
from the subscription's ``public_key``: every attempt of the ladder, a staged rotation (two
signatures, each valid under its own key), a replay; a changed body or timestamp fails; and
the account's key set holds the same keys, so that picking each signature's key by the
``kid`` its delivery names verifies every delivery."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.exceptions import InvalidSignature as Mismatch
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from tests.factories import make_subscription
from tests.support.ed25519 import v1a_results
from tests.support.pipeline import PIPELINE_ENV, delivery_status, fail_then_replay, worker_fixtures
from tests.support.stack import wait_until
from webhooks import emit_event
from webhooks.events.samples import sample_data
from webhooks.signing import key_id, public_key_of, verify
from webhooks.storage.db import session_scope
from webhooks.storage.models import Subscription, utcnow

pytestmark = pytest.mark.integration

ED25519 = "standard-ed25519"


worker, account = worker_fixtures(PIPELINE_ENV)


def _headers(request) -> dict[str, str]:
    return {name.lower(): value for name, value in request.headers.items()}


def assert_tampering_fails(public_key: str, request) -> None:
    headers = _headers(request)
    changed_body = request.body.replace(b'"type"', b'"typo"', 1)
    assert changed_body != request.body
    assert not any(v1a_results(public_key, headers, changed_body))
    later = {**headers, "webhook-timestamp": str(int(headers["webhook-timestamp"]) + 1)}
    assert not any(v1a_results(public_key, later, request.body))


def _public_key(subscription_id: str, staged: bool = False) -> str:
    with session_scope() as session:
        row = session.get(Subscription, subscription_id)
        return public_key_of(row.next_secret if staged else row.secret)


def test_every_attempt_of_the_ladder_verifies_with_the_public_key(account, receiver):
    receiver.script("/ed", 500, 500, 200)
    subscription = make_subscription(account, receiver.url("/ed"), signature_scheme=ED25519)
    public_key = _public_key(subscription.id)
    event = emit_event(account, "email.sent", sample_data("email.sent"))
    delivery_id = event.delivery_ids[0]
    wait_until(lambda: delivery_status(delivery_id) == "done", what="done")
    requests = receiver.received("/ed")
    assert [r.headers["X-Service-Attempt"] for r in requests] == ["1", "2", "3"]
    for request in requests:
        headers = _headers(request)
        assert headers["webhook-signature"].startswith("v1a,")
        assert v1a_results(public_key, headers, request.body) == [True]
        verify(public_key, request.body, request.headers)  # webhooks.verify agrees
        assert headers["webhook-id"] == event.id == json.loads(request.body)["id"]
        assert abs(int(headers["webhook-timestamp"]) - request.at) <= 2  # signed when sent
        assert headers["x-service-key-id"] == key_id(public_key)
        assert "x-service-signature" not in headers
        assert_tampering_fails(public_key, request)
    assert len({r.headers["webhook-signature"] for r in requests}) == 3  # signed anew each time


def test_a_staged_rotation_signs_twice_each_valid_under_its_own_key(account, receiver):
    from webhooks.tenants import rotation

    subscription = make_subscription(account, receiver.url("/staged"), signature_scheme=ED25519)
    with session_scope() as session:
        rotation.rotate(session, subscription.id, utcnow(), activate_in=3600)
    current, following = _public_key(subscription.id), _public_key(subscription.id, staged=True)
    assert current != following
    emit_event(account, "email.sent", sample_data("email.sent"))
    (staged,) = receiver.wait_for(1, "/staged")
    headers = _headers(staged)
    assert v1a_results(current, headers, staged.body) == [True, False]
    assert v1a_results(following, headers, staged.body) == [False, True]
    assert headers["x-service-key-id"] == f"{key_id(current)} {key_id(following)}"
    assert_tampering_fails(current, staged)
    assert_tampering_fails(following, staged)

    with session_scope() as session:
        assert rotation.activate_now(session, subscription.id, utcnow())
    emit_event(account, "email.sent", sample_data("email.sent"))
    after = receiver.wait_for(2, "/staged")[1]
    assert v1a_results(following, _headers(after), after.body) == [True]
    assert v1a_results(current, _headers(after), after.body) == [False]


def test_a_replay_is_signed_and_verifies(account, receiver):
    subscription = make_subscription(account, receiver.url("/replayed"), signature_scheme=ED25519)
    public_key = _public_key(subscription.id)
    replayed = fail_then_replay(account, receiver, "/replayed")
    for request in (replayed.first, replayed.again):
        assert v1a_results(public_key, _headers(request), request.body) == [True]
        assert_tampering_fails(public_key, request)


def _whpk(jwk: dict) -> str:
    """The ``whpk_…`` form of a JSON Web Key's ``x``."""
    raw = base64.urlsafe_b64decode(jwk["x"] + "=")
    assert len(raw) == 32
    return "whpk_" + base64.b64encode(raw).decode()


def _key_set(account_id: str) -> list[dict]:
    from web import create_app

    response = create_app({"TESTING": True}).test_client().get(
        f"/api/webhooks/public-keys/{account_id}")
    assert response.status_code == 200
    return response.get_json()["keys"]


class KeySetReceiver:
    """A receiver that knows only the account's key set URL and its subscription: it picks
    each signature's key by the kid the delivery names, fetching the set again on a kid it
    does not know (the first delivery, a rotation)."""

    def __init__(self, account_id: str, subscription_id: str):
        self.account_id, self.subscription_id = account_id, subscription_id
        self.keys: dict[str, Ed25519PublicKey] = {}

    def key_for(self, kid: str) -> Ed25519PublicKey | None:
        if kid not in self.keys:
            for jwk in _key_set(self.account_id):
                if jwk["subscription_id"] == self.subscription_id:
                    raw = base64.urlsafe_b64decode(jwk["x"] + "=")
                    self.keys[jwk["kid"]] = Ed25519PublicKey.from_public_bytes(raw)
        return self.keys.get(kid)

    def verifies(self, request) -> bool:
        headers = _headers(request)
        signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + request.body
        kids = headers["x-service-key-id"].split(" ")
        signatures = [entry[len("v1a,"):] for entry in headers["webhook-signature"].split(" ")]
        assert len(kids) == len(signatures)
        for kid, signature in zip(kids, signatures):
            key = self.key_for(kid)
            try:
                if key is not None:
                    key.verify(base64.b64decode(signature), signed)
                    return True
            except Mismatch:
                continue
        return False


def test_a_receiver_picking_keys_by_kid_from_the_key_set_verifies_every_delivery(
        account, receiver):
    from webhooks.tenants import rotation

    receiver.script("/jwks", 503, 200)
    subscription = make_subscription(account, receiver.url("/jwks"), signature_scheme=ED25519)
    other = make_subscription(account, receiver.url("/other"), signature_scheme=ED25519)
    key_set_receiver = KeySetReceiver(account, subscription.id)

    verdicts: list[bool] = []

    def deliver_and_check(count: int) -> None:
        """Emit one event; check each request as it arrives, until ``count`` have."""
        emit_event(account, "email.sent", sample_data("email.sent"))
        arrived = receiver.wait_for(count, "/jwks")
        verdicts.extend(key_set_receiver.verifies(request) for request in arrived[len(verdicts):])
        assert verdicts == [True] * count

    deliver_and_check(2)  # the ladder: a 503, then a 200, each verified as it arrives
    first_key = _public_key(subscription.id)
    with session_scope() as session:
        rotation.rotate(session, subscription.id, utcnow(), activate_in=3600)
    staged_key = _public_key(subscription.id, staged=True)
    staged_set = _key_set(account)
    deliver_and_check(3)  # both signatures: the known kid verifies
    with session_scope() as session:
        assert rotation.activate_now(session, subscription.id, utcnow())
    deliver_and_check(4)  # the staged key's kid, unknown until the set is fetched again

    # The set's keys are the subscriptions' public keys: x is the base64url of the 32 bytes.
    assert {_whpk(jwk) for jwk in staged_set} == {_public_key(other.id), first_key, staged_key}
    assert all(jwk["kid"] == key_id(_whpk(jwk)) for jwk in staged_set)
    assert set(key_set_receiver.keys) == {key_id(first_key), key_id(staged_key)}
