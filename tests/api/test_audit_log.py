"""``GET /api/webhooks/audit-log`` (CONTRACT 10.5): the API's changes are entries of the
actor ``api_key``; filters and cursor pages; another account's key sees none of them; and
no route alters an entry."""

from __future__ import annotations

import hashlib

import pytest

from webhooks.storage.db import session_scope
from webhooks.storage.models import AuditEntry

from .helpers import make_subscription

BASE = "/api/webhooks"
LOG = f"{BASE}/audit-log"


def _log(client, caller, **query) -> dict:
    response = client.get(LOG, headers=caller.headers, query_string=query)
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def _create(client, caller, **body) -> dict:
    response = client.post(f"{BASE}/subscriptions", headers=caller.headers,
                           json={"url": "https://hooks.example.com/in", **body})
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def test_the_api_s_changes_are_listed_newest_first_by_their_key(client, alice, broker):
    created = _create(client, alice, headers={"X-Token": "HEADER-VALUE"})
    subscription = f"{BASE}/subscriptions/{created['id']}"
    assert client.patch(subscription, headers=alice.headers,
                        json={"description": "billing"}).status_code == 200
    assert client.post(f"{subscription}/pause", headers=alice.headers).status_code == 200
    assert client.post(f"{subscription}/resume", headers=alice.headers).status_code == 200
    rotated = client.post(f"{subscription}/rotate-secret", headers=alice.headers).get_json()
    assert client.post(f"{BASE}/portal-links", headers=alice.headers).status_code == 201
    assert client.delete(subscription, headers=alice.headers).status_code == 204

    page = _log(client, alice)
    assert page["next_cursor"] is None
    assert [entry["action"] for entry in page["data"]] == [
        "subscription.deleted", "portal_link.created", "secret.rotated",
        "subscription.resumed", "subscription.paused", "subscription.updated",
        "subscription.created"]
    key_reference = hashlib.sha256(alice.api_key.encode()).hexdigest()[:16]
    assert {(e["actor"]["kind"], e["actor"]["id"]) for e in page["data"]} == {
        ("api_key", key_reference)}
    assert page["data"][5]["changes"] == {"description": {"from": None, "to": "billing"}}
    assert page["data"][0]["at"].endswith("Z")
    shown = str(page)
    for secret in (created["secret"], rotated["secret"], "HEADER-VALUE", alice.api_key):
        assert secret not in shown


def test_filters_and_cursor_pages(client, alice, broker):
    first, second = _create(client, alice), _create(client, alice)
    for created in (first, second):
        client.post(f"{BASE}/subscriptions/{created['id']}/pause", headers=alice.headers)
    only_first = _log(client, alice, target_id=first["id"])["data"]
    assert [(e["action"], e["target"]["id"]) for e in only_first] == [
        ("subscription.paused", first["id"]), ("subscription.created", first["id"])]
    assert len(_log(client, alice, action="subscription.paused")["data"]) == 2

    seen, cursor = [], None
    while True:
        page = _log(client, alice, limit=3, **({"cursor": cursor} if cursor else {}))
        seen += [entry["id"] for entry in page["data"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 4
    assert seen == [entry["id"] for entry in _log(client, alice)["data"]]

    newest = _log(client, alice)["data"][0]["at"]
    assert [e["at"] for e in _log(client, alice, since=newest)["data"]] == [newest]
    assert newest not in [e["at"] for e in _log(client, alice, until=newest)["data"]]
    refused = client.get(LOG, headers=alice.headers, query_string={"action": "nothing.done"})
    assert refused.status_code == 400


def test_another_account_s_key_sees_none_of_them(client, alice, bob, broker):
    created = _create(client, alice)
    client.post(f"{BASE}/subscriptions/{created['id']}/pause", headers=alice.headers)
    assert len(_log(client, alice)["data"]) == 2
    assert _log(client, bob) == {"data": [], "next_cursor": None}
    assert _log(client, bob, target_id=created["id"])["data"] == []
    assert client.get(LOG).status_code == 401


def test_a_refused_change_leaves_no_entry(client, alice, broker):
    subscription_id = make_subscription(alice.account_id)
    refused = client.patch(f"{BASE}/subscriptions/{subscription_id}", headers=alice.headers,
                           json={"event_types": ["no.such.type"]})
    assert refused.status_code == 400
    nothing_staged = client.post(f"{BASE}/subscriptions/{subscription_id}/rotate-secret/cancel",
                                 headers=alice.headers)
    assert nothing_staged.status_code == 409
    assert _log(client, alice)["data"] == []


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_no_route_alters_an_entry(app, client, alice, broker, method):
    _create(client, alice)
    (entry,) = _log(client, alice)["data"]
    for path in (LOG, f"{LOG}/{entry['id']}"):
        answer = getattr(client, method)(path, headers=alice.headers,
                                         json={"action": "subscription.deleted"})
        assert answer.status_code in (404, 405)
    assert _log(client, alice)["data"] == [entry]
    with session_scope() as session:
        assert session.query(AuditEntry).count() == 1
    # The API's route and the dashboard's Activity page: every route that reaches the log.
    audit_rules = [rule for rule in app.url_map.iter_rules()
                   if "audit" in rule.rule or "activity" in rule.rule]
    assert len(audit_rules) == 2 and all(rule.methods <= {"GET", "HEAD", "OPTIONS"}
                               for rule in audit_rules)
