"""``signature_scheme`` on create and PATCH (CONTRACT 9.3): its secrets, a PATCH that
changes it (a new secret of the new format, a staged rotation dropped), rotate-secret
in the scheme's format, and bad input answering 400 with nothing changed."""

from __future__ import annotations

import base64

import pytest
from sqlalchemy import select

from webhooks.storage.db import session_scope
from webhooks.storage.models import Subscription

BASE = "/api/webhooks/subscriptions"
URL = "https://hooks.example.com/in"


def _row(subscription_id: str) -> Subscription:
    with session_scope() as session:
        return session.get(Subscription, subscription_id)


def assert_standard_secret(secret: str) -> None:
    """``whsec_`` and standard base64 (no URL-safe characters) of at least 24 bytes."""
    assert secret.startswith("whsec_"), secret
    key = base64.b64decode(secret[len("whsec_"):], validate=True)
    assert len(key) >= 24


def assert_service_secret(secret: str) -> None:
    """``whsec_`` and URL-safe base64 of 32 bytes, unpadded (tenants/accounts.py)."""
    assert secret.startswith("whsec_") and len(secret) == len("whsec_") + 43


def _create(client, alice, **body):
    response = client.post(BASE, json={"url": URL, **body}, headers=alice.headers)
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def test_the_default_scheme_is_service(client, alice):
    body = _create(client, alice)
    assert body["signature_scheme"] == "service"
    assert_service_secret(body["secret"])
    listed = client.get(BASE, headers=alice.headers).get_json()["data"]
    assert listed[0]["signature_scheme"] == "service"


def test_a_standard_subscription_gets_a_standard_secret(client, alice):
    body = _create(client, alice, signature_scheme="standard")
    assert body["signature_scheme"] == "standard"
    assert_standard_secret(body["secret"])
    assert _row(body["id"]).signature_scheme == "standard"
    shown = client.get(f"{BASE}/{body['id']}", headers=alice.headers).get_json()
    assert (shown["signature_scheme"], shown["secret"]) == ("standard", body["secret"])


@pytest.mark.parametrize("scheme", ["Standard", "svix", "", None, 1, ["standard"]])
def test_an_unknown_scheme_is_refused_and_nothing_is_created(client, alice, scheme):
    response = client.post(BASE, json={"url": URL, "signature_scheme": scheme},
                           headers=alice.headers)
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert error["code"] == "validation_error" and "signature_scheme" in error["message"]
    with session_scope() as session:
        assert session.scalars(select(Subscription)).all() == []


def test_patch_to_standard_answers_a_new_secret_that_replaces_a_staged_one(client, alice):
    created = _create(client, alice)
    staged = client.post(f"{BASE}/{created['id']}/rotate-secret", json={"activate_in": 3600},
                         headers=alice.headers).get_json()
    assert staged["next_secret"] is not None

    response = client.patch(f"{BASE}/{created['id']}", json={"signature_scheme": "standard"},
                            headers=alice.headers)
    assert response.status_code == 200
    body = response.get_json()
    assert body["signature_scheme"] == "standard"
    assert_standard_secret(body["secret"])
    assert body["secret"] not in (created["secret"], staged["next_secret"])
    assert (body["next_secret"], body["next_secret_active_at"]) == (None, None)
    row = _row(created["id"])
    assert (row.secret, row.next_secret, row.signature_scheme) == (body["secret"], None, "standard")

    back = client.patch(f"{BASE}/{created['id']}", json={"signature_scheme": "service"},
                        headers=alice.headers).get_json()
    assert back["signature_scheme"] == "service"
    assert_service_secret(back["secret"])


def test_the_documented_answer_of_a_patch_allows_the_new_secret(client, alice):
    """A PATCH that changes the scheme answers with ``secret``: the OpenAPI document says so
    (its answer schema refuses any other field, and did refuse these two)."""
    created = _create(client, alice)
    body = client.patch(f"{BASE}/{created['id']}", json={"signature_scheme": "standard"},
                        headers=alice.headers).get_json()
    document = client.get("/api/webhooks/openapi.json").get_json()
    answer = document["paths"]["/api/webhooks/subscriptions/{subscription_id}"]["patch"][
        "responses"]["200"]["content"]["application/json"]["schema"]["$ref"].rpartition("/")[2]
    schema = document["components"]["schemas"][answer]
    assert {"secret", "next_secret"} <= set(body)
    assert set(body) <= set(schema["properties"]) and set(schema["required"]) <= set(body)


def test_patch_to_the_same_scheme_keeps_the_secret_and_shows_none(client, alice):
    created = _create(client, alice, signature_scheme="standard")
    response = client.patch(f"{BASE}/{created['id']}",
                            json={"signature_scheme": "standard", "description": "same"},
                            headers=alice.headers)
    assert response.status_code == 200
    assert "secret" not in response.get_json()
    assert response.get_json()["description"] == "same"
    assert _row(created["id"]).secret == created["secret"]


def test_patch_with_an_unknown_scheme_changes_nothing(client, alice):
    created = _create(client, alice)
    response = client.patch(f"{BASE}/{created['id']}",
                            json={"signature_scheme": "hmac", "description": "lost"},
                            headers=alice.headers)
    assert response.status_code == 400
    assert "signature_scheme" in response.get_json()["error"]["message"]
    row = _row(created["id"])
    assert (row.signature_scheme, row.secret, row.description) == (
        "service", created["secret"], None)


@pytest.mark.parametrize("body", [None, {"activate_in": 60}])
def test_rotate_secret_of_a_standard_subscription_makes_a_standard_secret(client, alice, body):
    created = _create(client, alice, signature_scheme="standard")
    rotated = client.post(f"{BASE}/{created['id']}/rotate-secret", json=body,
                          headers=alice.headers).get_json()
    new = rotated["next_secret"] if body else rotated["secret"]
    assert new != created["secret"]
    assert_standard_secret(new)
