"""``client_certificate`` and ``oauth2`` on the API (CONTRACT 10.3): write-only options, each
refusal a 400 naming the field, no key or secret in any answer."""

from __future__ import annotations

import datetime as dt
import json

import pytest
import trustme

from webhooks.storage.db import session_scope
from webhooks.storage.models import Subscription

BASE = "/api/webhooks/subscriptions"
URL = "https://hooks.example.com/in"
TOKEN_URL = "https://id.example.com/oauth/token"
CLIENT_SECRET = "cs_live_9hG2-never-in-an-answer"


def _certificate(ca: trustme.CA | None = None, **options) -> tuple[dict, trustme.LeafCert]:
    leaf = (ca or trustme.CA()).issue_cert("client.example.com", **options)
    return ({"certificate": "".join(b.bytes().decode() for b in leaf.cert_chain_pems),
             "private_key": leaf.private_key_pem.bytes().decode()}, leaf)


def _oauth2(**changes) -> dict:
    return {"token_url": TOKEN_URL, "client_id": "webhooks", "client_secret": CLIENT_SECRET,
            "scope": "deliveries", **changes}


def _refused(response, code: str, *words: str) -> None:
    assert response.status_code == 400, response.get_json()
    error = response.get_json()["error"]
    assert error["code"] == code
    for word in words:
        assert word in error["message"]


def _no_secret_in(text: str, certificate: dict) -> None:
    key_body = certificate["private_key"].splitlines()[1]
    assert key_body not in text and "PRIVATE KEY" not in text
    assert CLIENT_SECRET not in text


def test_create_stores_both_and_answers_only_what_identifies_them(client, alice):
    certificate, leaf = _certificate()
    response = client.post(BASE, json={"url": URL, "client_certificate": certificate,
                                       "oauth2": _oauth2()}, headers=alice.headers)
    assert response.status_code == 201, response.get_json()
    body = response.get_json()

    shown = body["client_certificate"]
    assert set(shown) == {"fingerprint_sha256", "subject", "not_after"}
    assert len(shown["fingerprint_sha256"]) == 64 and shown["not_after"].endswith("Z")
    assert "client.example.com" in shown["subject"] or shown["subject"]
    assert body["oauth2"] == {"token_url": TOKEN_URL, "client_id": "webhooks",
                              "scope": "deliveries"}
    _no_secret_in(response.get_data(as_text=True), certificate)
    for answer in (client.get(f"{BASE}/{body['id']}", headers=alice.headers),
                   client.get(BASE, headers=alice.headers)):
        assert answer.status_code == 200
        _no_secret_in(answer.get_data(as_text=True), certificate)
    with session_scope() as session:  # stored as the signing secret is
        row = session.get(Subscription, body["id"])
        assert row.client_certificate["private_key"] == certificate["private_key"]
        assert row.oauth2["client_secret"] == CLIENT_SECRET


def test_null_removes_them_and_a_patch_without_them_keeps_them(client, alice):
    certificate, _ = _certificate()
    created = client.post(BASE, json={"url": URL, "client_certificate": certificate,
                                      "oauth2": _oauth2()}, headers=alice.headers).get_json()
    path = f"{BASE}/{created['id']}"

    kept = client.patch(path, json={"description": "x"}, headers=alice.headers).get_json()
    assert kept["client_certificate"] == created["client_certificate"]
    assert kept["oauth2"] == created["oauth2"]
    removed = client.patch(path, json={"client_certificate": None, "oauth2": None},
                           headers=alice.headers).get_json()
    assert removed["client_certificate"] is None and removed["oauth2"] is None


@pytest.mark.parametrize("value, words", [
    ({"certificate": "not pem", "private_key": "x"}, ["client_certificate.certificate"]),
    ({"certificate": "x"}, ["client_certificate", "private_key"]),
    ("PEM", ["client_certificate must be an object"]),
])
def test_a_bad_certificate_is_a_400_naming_the_field(client, alice, value, words):
    response = client.post(BASE, json={"url": URL, "client_certificate": value},
                           headers=alice.headers)
    _refused(response, "invalid_client_certificate", *words)


def test_a_key_that_does_not_match_is_refused(client, alice):
    certificate, _ = _certificate()
    other, _ = _certificate()
    response = client.post(BASE, json={"url": URL, "client_certificate": {
        "certificate": certificate["certificate"], "private_key": other["private_key"]}},
        headers=alice.headers)
    _refused(response, "invalid_client_certificate", "client_certificate.private_key",
             "does not match")
    _no_secret_in(response.get_data(as_text=True), other)


def test_an_encrypted_or_malformed_key_is_refused(client, alice):
    certificate, _ = _certificate()
    broken = certificate["private_key"].replace("\n", "\nzz", 2)
    response = client.post(BASE, json={"url": URL, "client_certificate": {
        **certificate, "private_key": broken}}, headers=alice.headers)
    _refused(response, "invalid_client_certificate", "client_certificate.private_key")


def test_an_http_endpoint_cannot_have_a_certificate_on_create_or_patch(client, alice):
    certificate, _ = _certificate()
    _refused(client.post(BASE, json={"url": "http://hooks.example.com/in",
                                     "client_certificate": certificate}, headers=alice.headers),
             "invalid_client_certificate", "https")
    created = client.post(BASE, json={"url": URL, "client_certificate": certificate},
                          headers=alice.headers).get_json()
    _refused(client.patch(f"{BASE}/{created['id']}", json={"url": "http://hooks.example.com/in"},
                          headers=alice.headers), "invalid_client_certificate", "https")


@pytest.mark.parametrize("value, words", [
    ({"client_id": "a", "client_secret": "b"}, ["oauth2 needs token_url"]),
    (_oauth2(client_secret=7), ["oauth2.client_secret"]),
    (_oauth2(extra="x"), ["unknown fields: extra"]),
    (_oauth2(token_url="http://id.example.com/token"), ["oauth2.token_url", "https"]),
    (_oauth2(token_url="https://127.0.0.1/token"), ["oauth2.token_url", "not a public address"]),
    (_oauth2(token_url="ftp://id.example.com/"), ["oauth2.token_url"]),
    ([], ["oauth2 must be an object"]),
])
def test_bad_oauth2_settings_are_a_400_naming_the_field(client, alice, value, words):
    response = client.post(BASE, json={"url": URL, "oauth2": value}, headers=alice.headers)
    _refused(response, "invalid_oauth2", *words)
    assert CLIENT_SECRET not in response.get_data(as_text=True)


def test_an_authorization_header_beside_oauth2_is_refused_both_ways(client, alice):
    _refused(client.post(BASE, json={"url": URL, "oauth2": _oauth2(),
                                     "headers": {"authorization": "Bearer static"}},
                         headers=alice.headers), "invalid_oauth2", "headers.Authorization")
    created = client.post(BASE, json={"url": URL, "headers": {"Authorization": "Bearer s"}},
                          headers=alice.headers).get_json()
    _refused(client.patch(f"{BASE}/{created['id']}", json={"oauth2": _oauth2()},
                          headers=alice.headers), "invalid_oauth2", "headers.Authorization")


def test_the_openapi_document_describes_both_without_secrets_in_answers(client):
    document = client.get("/api/webhooks/openapi.json").get_json()
    schemas = document["components"]["schemas"]
    create = json.dumps(schemas["SubscriptionCreate"]["properties"]["client_certificate"])
    assert "private_key" in create
    answer = schemas["Subscription"]["properties"]
    assert "fingerprint_sha256" in answer["client_certificate"]["description"]
    assert "client_secret" in answer["oauth2"]["description"]  # "without `client_secret`"
