"""``standard-ed25519`` subscriptions over the API (CONTRACT 10.2): ``public_key`` (and
``next_public_key`` while staged) in every answer, no ``secret`` in any; rotate, activate,
cancel and PATCH of the scheme as for secrets; the account's key set
(``GET /public-keys/<account_id>``): no API key, cacheable, rate-limited, the same keys,
and an unknown account indistinguishable from one without such keys."""

from __future__ import annotations

import base64
import datetime as dt

import pytest
from sqlalchemy import update

from webhooks.config import reset_settings_cache
from webhooks.signing import key_id, public_key_of
from webhooks.storage.db import session_scope
from webhooks.storage.models import Subscription, utcnow

from .helpers import new_caller

BASE = "/api/webhooks/subscriptions"
KEYS = "/api/webhooks/public-keys"
URL = "https://hooks.example.com/in"
ED25519 = "standard-ed25519"


def _row(subscription_id: str) -> Subscription:
    with session_scope() as session:
        return session.get(Subscription, subscription_id)


def _private_keys(subscription_id: str) -> list[str]:
    row = _row(subscription_id)
    return [key for key in (row.secret, row.next_secret) if key]


def assert_no_private_key(response, subscription_id: str) -> dict:
    """The answer names no secret field and holds none of the subscription's private keys
    (nor their base64 alone)."""
    text = response.get_data(as_text=True)
    for private_key in _private_keys(subscription_id):
        assert private_key[len("whsk_"):] not in text
    body = response.get_json()
    for item in body["data"] if "data" in body else [body]:
        assert "secret" not in item and "next_secret" not in item
    return body


def assert_public_key(value: str) -> None:
    assert value.startswith("whpk_")
    assert len(base64.b64decode(value[len("whpk_"):], validate=True)) == 32


def _create(client, caller, **body) -> dict:
    response = client.post(BASE, json={"url": URL, "signature_scheme": ED25519, **body},
                           headers=caller.headers)
    assert response.status_code == 201, response.get_json()
    return assert_no_private_key(response, response.get_json()["id"])


def _call(client, caller, method: str, path: str, subscription_id: str, **kwargs) -> dict:
    response = client.open(path, method=method, headers=caller.headers, **kwargs)
    assert response.status_code < 300, response.get_json()
    return assert_no_private_key(response, subscription_id)


def test_every_answer_shows_the_public_key_and_no_secret(client, alice):
    created = _create(client, alice)
    sid = created["id"]
    assert created["signature_scheme"] == ED25519
    assert_public_key(created["public_key"])
    assert created["public_key"] == public_key_of(_row(sid).secret)
    assert (created["next_public_key"], created["next_secret_active_at"]) == (None, None)
    for method, path in (("GET", f"{BASE}/{sid}"), ("GET", BASE),
                         ("PATCH", f"{BASE}/{sid}"), ("POST", f"{BASE}/{sid}/pause"),
                         ("POST", f"{BASE}/{sid}/resume")):
        body = _call(client, alice, method, path, sid,
                     json={"description": "x"} if method == "PATCH" else None)
        shown = body["data"][0] if "data" in body else body
        assert shown["public_key"] == created["public_key"]


def test_hmac_subscriptions_show_a_null_public_key(client, alice):
    body = client.post(BASE, json={"url": URL, "signature_scheme": "standard"},
                       headers=alice.headers).get_json()
    assert body["secret"].startswith("whsec_")
    assert (body["public_key"], body["next_public_key"]) == (None, None)


def test_a_staged_rotation_shows_the_next_public_key_then_activate(client, alice):
    created = _create(client, alice)
    sid = created["id"]
    staged = _call(client, alice, "POST", f"{BASE}/{sid}/rotate-secret", sid,
                   json={"activate_in": 3600})
    assert staged["public_key"] == created["public_key"]
    assert_public_key(staged["next_public_key"])
    assert staged["next_public_key"] != created["public_key"]
    assert staged["next_secret_active_at"] is not None
    row = _row(sid)
    assert staged["next_public_key"] == public_key_of(row.next_secret)
    listed = _call(client, alice, "GET", BASE, sid)["data"][0]
    assert listed["next_public_key"] == staged["next_public_key"]

    activated = _call(client, alice, "POST", f"{BASE}/{sid}/rotate-secret/activate", sid)
    assert activated["public_key"] == staged["next_public_key"]
    assert (activated["next_public_key"], activated["next_secret_active_at"]) == (None, None)


def test_cancel_drops_the_staged_key_and_a_rotation_at_once_replaces_the_key(client, alice):
    created = _create(client, alice)
    sid = created["id"]
    _call(client, alice, "POST", f"{BASE}/{sid}/rotate-secret", sid, json={"activate_in": 60})
    cancelled = _call(client, alice, "POST", f"{BASE}/{sid}/rotate-secret/cancel", sid)
    assert (cancelled["public_key"], cancelled["next_public_key"]) == (created["public_key"], None)
    assert _row(sid).next_secret is None

    rotated = _call(client, alice, "POST", f"{BASE}/{sid}/rotate-secret", sid)
    assert_public_key(rotated["public_key"])
    assert rotated["public_key"] != created["public_key"]
    assert rotated["public_key"] == public_key_of(_row(sid).secret)


def test_the_staged_time_passing_makes_the_next_key_the_key(client, alice):
    sid = _create(client, alice)["id"]
    staged = _call(client, alice, "POST", f"{BASE}/{sid}/rotate-secret", sid,
                   json={"activate_in": 60})
    with session_scope() as session:
        session.execute(update(Subscription).where(Subscription.id == sid)
                        .values(next_secret_active_at=utcnow() - dt.timedelta(seconds=1)))
    got = _call(client, alice, "GET", f"{BASE}/{sid}", sid)
    assert (got["public_key"], got["next_public_key"]) == (staged["next_public_key"], None)
    conflict = client.post(f"{BASE}/{sid}/rotate-secret/activate", headers=alice.headers)
    assert conflict.status_code == 409 and conflict.get_json()["error"]["code"] == "nothing_staged"


def test_patch_to_and_from_ed25519_gives_a_new_key_pair_or_secret(client, alice):
    created = client.post(BASE, json={"url": URL}, headers=alice.headers).get_json()
    sid = created["id"]
    client.post(f"{BASE}/{sid}/rotate-secret", json={"activate_in": 3600}, headers=alice.headers)

    switched = _call(client, alice, "PATCH", f"{BASE}/{sid}", sid,
                     json={"signature_scheme": ED25519})
    assert switched["signature_scheme"] == ED25519
    assert_public_key(switched["public_key"])
    assert (switched["next_public_key"], switched["next_secret_active_at"]) == (None, None)
    row = _row(sid)
    assert row.secret.startswith("whsk_") and row.next_secret is None

    same = _call(client, alice, "PATCH", f"{BASE}/{sid}", sid,
                 json={"signature_scheme": ED25519})
    assert same["public_key"] == switched["public_key"]  # the same scheme: nothing new

    back = client.patch(f"{BASE}/{sid}", json={"signature_scheme": "standard"},
                        headers=alice.headers).get_json()
    assert back["secret"].startswith("whsec_") and back["public_key"] is None
    again = _call(client, alice, "PATCH", f"{BASE}/{sid}", sid,
                  json={"signature_scheme": ED25519})
    assert again["public_key"] not in (switched["public_key"], None)


# ----------------------------------------------------------------------- the key set


def _x(public_key: str) -> str:
    raw = base64.b64decode(public_key[len("whpk_"):])
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def test_the_key_set_holds_the_accounts_current_and_staged_public_keys(client, alice, bob):
    first = _create(client, alice)
    second = _create(client, alice)
    staged = client.post(f"{BASE}/{second['id']}/rotate-secret", json={"activate_in": 3600},
                         headers=alice.headers).get_json()
    client.post(BASE, json={"url": URL, "signature_scheme": "standard"}, headers=alice.headers)
    deleted = _create(client, alice)
    client.delete(f"{BASE}/{deleted['id']}", headers=alice.headers)
    _create(client, bob)

    response = client.get(f"{KEYS}/{alice.account_id}")  # no API key
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "public, max-age=300"
    keys = response.get_json()["keys"]
    expected = [(first["id"], first["public_key"]), (second["id"], second["public_key"]),
                (second["id"], staged["next_public_key"])]
    assert [(k["subscription_id"], k["x"]) for k in keys] == [
        (sid, _x(public_key)) for sid, public_key in expected]
    for key, (_, public_key) in zip(keys, expected):
        assert {name: key[name] for name in ("kty", "crv", "use", "alg")} == {
            "kty": "OKP", "crv": "Ed25519", "use": "sig", "alg": "EdDSA"}
        assert key["kid"] == key_id(public_key)
    assert client.get(f"{KEYS}/{alice.account_id}").get_json() == {"keys": keys}  # kid stable
    text = response.get_data(as_text=True)
    for sid in (first["id"], second["id"]):
        assert all(private[len("whsk_"):] not in text for private in _private_keys(sid))


def test_after_the_staged_key_takes_over_the_key_set_follows(client, alice):
    created = _create(client, alice)
    sid = created["id"]
    staged = client.post(f"{BASE}/{sid}/rotate-secret", json={"activate_in": 3600},
                         headers=alice.headers).get_json()
    client.post(f"{BASE}/{sid}/rotate-secret/activate", headers=alice.headers)
    keys = client.get(f"{KEYS}/{alice.account_id}").get_json()["keys"]
    assert [key["x"] for key in keys] == [_x(staged["next_public_key"])]


@pytest.mark.parametrize("who", ["unknown", "not-a-uuid", "hmac-only", "no-subscription"])
def test_an_unknown_account_answers_as_an_account_without_keys(client, alice, who):
    if who == "hmac-only":
        client.post(BASE, json={"url": URL}, headers=alice.headers)
    account_id = {"unknown": "0b9a1c4e-5d6f-4a7b-8c9d-0e1f2a3b4c5d", "not-a-uuid": "acme",
                  "hmac-only": alice.account_id,
                  "no-subscription": new_caller("empty").account_id}[who]
    response = client.get(f"{KEYS}/{account_id}")
    assert (response.status_code, response.get_json()) == (200, {"keys": []})
    reference = client.get(f"{KEYS}/{new_caller('reference').account_id}")
    assert response.get_data() == reference.get_data()
    assert dict(response.headers) == dict(reference.headers)


def test_the_key_set_counts_against_the_callers_address(db, redis_broker, monkeypatch, alice):
    from web import create_app

    monkeypatch.setenv("WEBHOOKS_API_RATE_LIMIT", "2 per minute")
    reset_settings_cache()
    client = create_app({"TESTING": True}).test_client()
    here, there = {"REMOTE_ADDR": "192.0.2.31"}, {"REMOTE_ADDR": "192.0.2.32"}
    path = f"{KEYS}/{alice.account_id}"
    assert [client.get(path, environ_base=here).status_code for _ in range(2)] == [200, 200]
    refused = client.get(path, environ_base=here)
    assert refused.status_code == 429 and refused.get_json()["error"]["code"] == "rate_limited"
    # The same budget as the other routes without a key; another address has its own.
    assert client.get("/api/webhooks/event-types", environ_base=here).status_code == 429
    assert client.get(path, environ_base=there).status_code == 200
