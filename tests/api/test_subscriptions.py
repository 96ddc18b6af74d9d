"""The subscription routes: shapes, validation, and the actions (test, resume, rotate, delete)."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import select

from webhooks.storage.db import session_scope
from webhooks.storage.models import Delivery, Subscription
from webhooks.tenants.options import OPTIONS

from .helpers import emit, make_subscription, set_delivery

BASE = "/api/webhooks/subscriptions"
URL = "https://hooks.example.com/in"
# The contract's fields, and one more for each option declared since (tenants/options.py).
SUBSCRIPTION_KEYS = {
    "id", "url", "event_types", "description", "status", "consecutive_failures", "paused_at",
    "created_at", "headers", "max_in_flight", "in_flight_limit", "rate_limit",
    "next_secret_active_at", "paused_reason", "signature_scheme", "public_key", "next_public_key",
    "client_certificate", "oauth2",  # CONTRACT 10.3, write-only: shown without key or secret
    "filter", "retry_schedule", "retry_schedule_in_force",  # CONTRACT 10.4
} | {option.name for option in OPTIONS}
SECRET_KEYS = {"secret", "next_secret"}


def _is_utc_timestamp(value: str) -> bool:
    return value.endswith("Z") and dt.datetime.fromisoformat(value).utcoffset() == dt.timedelta(0)


def _create(client, caller, **body):
    body.setdefault("url", URL)
    response = client.post(BASE, json=body, headers=caller.headers)
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def _row(subscription_id: str) -> Subscription:
    with session_scope() as session:
        return session.get(Subscription, subscription_id)


# --- create -----------------------------------------------------------------------------


def test_create_answers_the_subscription_with_its_secret(client, alice):
    response = client.post(
        BASE,
        json={"url": URL, "event_types": ["email.sent", "reply.received"], "description": "CRM"},
        headers=alice.headers,
    )
    assert response.status_code == 201
    body = response.get_json()
    assert set(body) == SUBSCRIPTION_KEYS | SECRET_KEYS
    assert body["url"] == URL
    assert body["event_types"] == ["email.sent", "reply.received"]
    assert body["description"] == "CRM"
    assert body["status"] == "active"
    assert body["consecutive_failures"] == 0
    assert body["paused_at"] is None
    assert _is_utc_timestamp(body["created_at"])
    assert body["secret"].startswith("whsec_") and len(body["secret"]) > 40
    assert response.headers["Location"].endswith(f"{BASE}/{body['id']}")
    row = _row(body["id"])
    assert row.account_id == alice.account_id and row.secret == body["secret"]


def test_create_without_event_types_means_all(client, alice):
    body = _create(client, alice)
    assert body["event_types"] is None and body["description"] is None
    assert _create(client, alice, event_types=None)["event_types"] is None


def test_each_subscription_gets_its_own_secret(client, alice):
    assert _create(client, alice)["secret"] != _create(client, alice)["secret"]


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "url"),
        ({"url": None}, "url"),
        ({"url": 42}, "url"),
        ({"url": ""}, "url"),
        ({"url": "ftp://example.com/in"}, "url"),
        ({"url": "example.com/in"}, "url"),
        ({"url": "https:///no-host"}, "url"),
        ({"url": "https://exa mple.com/"}, "url"),
        ({"url": "https://example.com:99999/"}, "url"),
        ({"url": "https://example.com/" + "a" * 2030}, "url"),
        ({"url": URL, "event_types": []}, "event_types"),
        ({"url": URL, "event_types": "email.sent"}, "event_types"),
        ({"url": URL, "event_types": [1]}, "event_types"),
        ({"url": URL, "event_types": ["email.sent", "email.sent"]}, "event_types"),
        ({"url": URL, "description": "x" * 1001}, "description"),
        ({"url": URL, "description": 5}, "description"),
        ({"url": URL, "description": "nul \u0000 byte"}, "description"),
        ({"url": URL, "secret": "mine"}, "secret"),
        ({"url": URL, "status": "paused"}, "status"),
    ],
)
def test_create_refuses_bad_fields(client, alice, body, field):
    response = client.post(BASE, json=body, headers=alice.headers)
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert error["code"] == "validation_error"
    assert field in error["message"]
    with session_scope() as session:
        assert session.scalars(select(Subscription)).all() == []


def test_create_accepts_the_longest_url_and_description(client, alice):
    url = "https://example.com/" + "a" * (2048 - len("https://example.com/"))
    body = _create(client, alice, url=url, description="d" * 1000)
    assert body["url"] == url and len(body["description"]) == 1000


def test_unknown_event_type_is_its_own_error(client, alice):
    response = client.post(
        BASE, json={"url": URL, "event_types": ["email.sent", "email.exploded"]},
        headers=alice.headers,
    )
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert error["code"] == "unknown_event_type"
    assert "email.exploded" in error["message"]


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/hook",
        "http://127.1/hook",
        "http://10.0.0.5/hook",
        "http://192.168.1.10:8080/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/hook",
        "http://[::ffff:10.0.0.1]/hook",
        "http://0.0.0.0/hook",
        "http://localhost:5000/hook",
        "http://LOCALHOST/hook",
        "http://api.localhost/hook",
    ],
)
def test_private_targets_are_refused(client, alice, url):
    response = client.post(BASE, json={"url": url}, headers=alice.headers)
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert error["code"] == "target_not_allowed"
    assert "WEBHOOKS_ALLOW_PRIVATE_TARGETS" in error["message"]


def test_private_targets_are_accepted_when_allowed(client, alice, allow_private):
    assert _create(client, alice, url="http://127.0.0.1:8000/hook")["url"] == (
        "http://127.0.0.1:8000/hook"
    )


def test_public_ip_and_host_names_are_accepted(client, alice):
    _create(client, alice, url="https://93.184.215.14/hook")
    _create(client, alice, url="https://hooks.example.com:8443/in?token=abc")


# --- list and get -----------------------------------------------------------------------


def test_list_is_newest_first_and_without_secrets(client, alice):
    first = _create(client, alice, description="first")
    second = _create(client, alice, description="second")
    response = client.get(BASE, headers=alice.headers)
    assert response.status_code == 200
    body = response.get_json()
    assert list(body) == ["data", "next_cursor"] and body["next_cursor"] is None
    assert [s["id"] for s in body["data"]] == [second["id"], first["id"]]
    assert all(set(s) == SUBSCRIPTION_KEYS for s in body["data"])


def test_list_is_empty_for_a_new_account(client, alice):
    assert client.get(BASE, headers=alice.headers).get_json() == {"data": [], "next_cursor": None}


def test_get_answers_the_subscription_with_its_secret(client, alice):
    created = _create(client, alice)
    response = client.get(f"{BASE}/{created['id']}", headers=alice.headers)
    assert response.status_code == 200
    assert response.get_json() == created


def test_get_accepts_an_uppercase_id(client, alice):
    created = _create(client, alice)
    response = client.get(f"{BASE}/{created['id'].upper()}", headers=alice.headers)
    assert response.status_code == 200 and response.get_json()["id"] == created["id"]


@pytest.mark.parametrize("bad_id", ["00000000-0000-4000-8000-000000000000", "not-a-uuid", "1"])
def test_get_unknown_is_404(client, alice, bad_id):
    response = client.get(f"{BASE}/{bad_id}", headers=alice.headers)
    assert response.status_code == 404
    assert response.get_json()["error"]["code"] == "not_found"


# --- update -----------------------------------------------------------------------------


def test_patch_changes_only_the_fields_given(client, alice):
    created = _create(client, alice, event_types=["email.sent"], description="old")
    path = f"{BASE}/{created['id']}"

    response = client.patch(path, json={"description": "new"}, headers=alice.headers)
    assert response.status_code == 200
    body = response.get_json()
    assert set(body) == SUBSCRIPTION_KEYS  # no secret
    assert body["description"] == "new"
    assert body["url"] == URL and body["event_types"] == ["email.sent"]

    body = client.patch(
        path, json={"url": "https://other.example.com/x", "event_types": ["test.ping"]},
        headers=alice.headers,
    ).get_json()
    assert body["url"] == "https://other.example.com/x" and body["event_types"] == ["test.ping"]

    body = client.patch(
        path, json={"event_types": None, "description": None}, headers=alice.headers
    ).get_json()
    assert body["event_types"] is None and body["description"] is None
    row = _row(created["id"])
    assert (row.url, row.event_types, row.description) == (
        "https://other.example.com/x", None, None
    )
    assert row.secret == created["secret"]


def test_patch_with_an_empty_body_changes_nothing(client, alice):
    created = _create(client, alice, description="same")
    response = client.patch(f"{BASE}/{created['id']}", json={}, headers=alice.headers)
    assert response.status_code == 200
    assert response.get_json()["description"] == "same"


@pytest.mark.parametrize(
    "body, code",
    [
        ({"url": None}, "validation_error"),
        ({"url": "gopher://example.com"}, "validation_error"),
        ({"url": "http://10.1.2.3/"}, "target_not_allowed"),
        ({"event_types": []}, "validation_error"),
        ({"event_types": ["nope"]}, "unknown_event_type"),
        ({"description": "x" * 1001}, "validation_error"),
        ({"secret": "mine"}, "validation_error"),
        ({"status": "paused"}, "validation_error"),
    ],
)
def test_patch_refuses_bad_fields_and_changes_nothing(client, alice, body, code):
    created = _create(client, alice, description="kept")
    response = client.patch(f"{BASE}/{created['id']}", json=body, headers=alice.headers)
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == code
    row = _row(created["id"])
    assert (row.url, row.event_types, row.description, row.status) == (URL, None, "kept", "active")


# --- delete -----------------------------------------------------------------------------


def test_delete_hides_the_subscription_and_ends_its_waiting_deliveries(client, alice, broker):
    created = _create(client, alice)
    other = _create(client, alice)
    waiting_event, _ = emit(alice.account_id)
    done_event, _ = emit(alice.account_id)
    waiting = _delivery_of(waiting_event, created["id"])
    untouched = _delivery_of(waiting_event, other["id"])
    done = _delivery_of(done_event, created["id"])
    set_delivery(done, status="done", attempt_count=1)

    response = client.delete(f"{BASE}/{created['id']}", headers=alice.headers)
    assert response.status_code == 204
    assert response.data == b""

    assert client.get(f"{BASE}/{created['id']}", headers=alice.headers).status_code == 404
    listed = client.get(BASE, headers=alice.headers).get_json()["data"]
    assert [s["id"] for s in listed] == [other["id"]]
    assert client.delete(f"{BASE}/{created['id']}", headers=alice.headers).status_code == 404
    patched = client.patch(f"{BASE}/{created['id']}", json={}, headers=alice.headers)
    assert patched.status_code == 404
    for action in ("test", "resume", "rotate-secret"):
        path = f"{BASE}/{created['id']}/{action}"
        assert client.post(path, headers=alice.headers).status_code == 404
    assert _row(created["id"]).deleted_at is not None  # soft delete: history stays
    assert _delivery(waiting).status == "failed"
    assert _delivery(done).status == "done"
    assert _delivery(untouched).status == "pending"
    # The history of the deleted subscription stays readable.
    shown = client.get(f"/api/webhooks/deliveries/{waiting}", headers=alice.headers)
    assert shown.status_code == 200 and shown.get_json()["status"] == "failed"


def _delivery_of(event_id: str, subscription_id: str) -> str:
    with session_scope() as session:
        return session.scalars(
            select(Delivery.id).where(
                Delivery.event_id == event_id, Delivery.subscription_id == subscription_id
            )
        ).one()


def _delivery(delivery_id: str) -> Delivery:
    with session_scope() as session:
        return session.get(Delivery, delivery_id)


# --- rotate-secret ----------------------------------------------------------------------


def test_rotate_secret_answers_and_stores_a_new_secret(client, alice):
    created = _create(client, alice)
    response = client.post(f"{BASE}/{created['id']}/rotate-secret", headers=alice.headers)
    assert response.status_code == 200
    body = response.get_json()
    assert set(body) == SUBSCRIPTION_KEYS | SECRET_KEYS
    assert body["secret"] != created["secret"] and body["secret"].startswith("whsec_")
    assert _row(created["id"]).secret == body["secret"]
    assert client.get(f"{BASE}/{created['id']}", headers=alice.headers).get_json()["secret"] == (
        body["secret"]
    )


# --- test -------------------------------------------------------------------------------


@pytest.mark.parametrize("status", ["active", "paused"])
def test_send_test_creates_one_test_ping_for_this_subscription(client, alice, broker, status):
    target = make_subscription(alice.account_id, status=status)
    bystander = make_subscription(alice.account_id)
    broker.clear()
    broker.probe = lambda session: [
        (d.id, d.status) for d in session.scalars(select(Delivery)).all()
    ]

    response = client.post(f"{BASE}/{target}/test", headers=alice.headers)
    assert response.status_code == 202
    broker.settle()
    body = response.get_json()
    assert set(body) == {"event_id", "delivery_id"}
    with session_scope() as session:
        deliveries = session.scalars(select(Delivery)).all()
    assert [(d.id, d.event_id, d.subscription_id, d.event_type, d.status) for d in deliveries] == [
        (body["delivery_id"], body["event_id"], target, "test.ping", "pending")
    ]
    assert bystander not in {d.subscription_id for d in deliveries}
    # Published once, after the commit: the row was already visible to a worker then.
    assert broker.published == [(body["delivery_id"], 0)]
    assert broker.seen == [[(body["delivery_id"], "pending")]]

    shown = client.get(f"/api/webhooks/deliveries/{body['delivery_id']}", headers=alice.headers)
    assert shown.get_json()["event_type"] == "test.ping"


# --- resume -----------------------------------------------------------------------------


def test_resume_activates_resets_and_releases_held_deliveries(client, alice, broker):
    subscription_id = make_subscription(alice.account_id, status="paused")
    with session_scope() as session:
        session.get(Subscription, subscription_id).consecutive_failures = 25
    _, (held,) = emit(alice.account_id)
    _, (finished,) = emit(alice.account_id)
    set_delivery(finished, status="dead", attempt_count=6)
    assert _delivery(held).status == "paused"
    broker.clear()
    broker.probe = lambda session: session.get(Delivery, held).status

    response = client.post(f"{BASE}/{subscription_id}/resume", headers=alice.headers)
    assert response.status_code == 200
    broker.settle()
    body = response.get_json()
    assert set(body) == SUBSCRIPTION_KEYS
    assert (body["status"], body["consecutive_failures"], body["paused_at"]) == ("active", 0, None)
    row = _row(subscription_id)
    assert (row.status, row.consecutive_failures, row.paused_at) == ("active", 0, None)
    assert _delivery(held).status == "pending"
    assert _delivery(finished).status == "dead"
    # The held delivery itself was published after the commit (it was pending by then),
    # and no sweep was asked for (issue 36: each resume queued one).
    assert broker.published == [(held, 0)] and broker.seen == ["pending"]
    assert broker.sweeps == 0
    listed = client.get(
        f"/api/webhooks/deliveries?subscription_id={subscription_id}&status=pending",
        headers=alice.headers,
    ).get_json()["data"]
    assert [d["id"] for d in listed] == [held]


def test_resume_of_an_active_subscription_resets_its_counter_and_sends_nothing(
        client, alice, broker):
    subscription_id = make_subscription(alice.account_id)
    with session_scope() as session:
        session.get(Subscription, subscription_id).consecutive_failures = 3
    _, (pending,) = emit(alice.account_id)
    set_delivery(pending, parked=True)  # due and parked: the sweep's, not a resume's
    broker.clear()
    response = client.post(f"{BASE}/{subscription_id}/resume", headers=alice.headers)
    assert response.status_code == 200
    assert response.get_json()["consecutive_failures"] == 0
    broker.settle()
    # Nothing was held, so nothing is sent: no message, no sweep (issue 36).
    assert broker.published == [] and broker.sweeps == 0
