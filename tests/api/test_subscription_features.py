"""The second wave's subscription API: staged rotate-secret, recover, and the fields headers,
max_in_flight, rate_limit and next_secret_active_at, each with its refusals."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import select, update

from webhooks.storage.db import session_scope
from webhooks.storage.models import Delivery, Subscription, utcnow

from .helpers import emit, make_subscription, set_delivery

BASE = "/api/webhooks/subscriptions"
URL = "https://hooks.example.com/in"


def _create(client, caller, **body):
    response = client.post(BASE, json={"url": URL, **body}, headers=caller.headers)
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def _error(response, status, code):
    assert response.status_code == status, response.get_json()
    error = response.get_json()["error"]
    assert error["code"] == code, error
    return error["message"]


def _parse(timestamp: str) -> dt.datetime:
    return dt.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))


# --- the new fields: defaults, and every answer carries them ------------------------------


def test_a_new_subscription_has_the_defaults(client, alice):
    body = _create(client, alice)
    assert body["headers"] == {}
    assert body["max_in_flight"] is None and body["rate_limit"] is None
    assert body["next_secret_active_at"] is None and body["next_secret"] is None


def test_every_answer_carries_the_new_fields_and_only_secret_answers_the_secrets(client, alice):
    created = _create(client, alice, headers={"X-Tenant": "acme"}, max_in_flight=3,
                      rate_limit=2.5)
    fields = {"headers": {"X-Tenant": "acme"}, "max_in_flight": 3, "rate_limit": 2.5,
              "next_secret_active_at": None}
    one = client.get(f"{BASE}/{created['id']}", headers=alice.headers).get_json()
    listed = client.get(BASE, headers=alice.headers).get_json()["data"][0]
    patched = client.patch(f"{BASE}/{created['id']}", json={}, headers=alice.headers).get_json()
    resumed = client.post(f"{BASE}/{created['id']}/resume", headers=alice.headers).get_json()
    for answer in (created, one, listed, patched, resumed):
        assert {k: answer[k] for k in fields} == fields
    for answer in (listed, patched, resumed):
        assert "secret" not in answer and "next_secret" not in answer
    for answer in (created, one):
        assert "secret" in answer and "next_secret" in answer


# --- headers -------------------------------------------------------------------------------


def test_headers_are_stored_replaced_and_removed_and_shown_unmasked(client, alice):
    created = _create(client, alice, headers={"Authorization": "Bearer s3cr3t", "X-A": ""})
    assert created["headers"] == {"Authorization": "Bearer s3cr3t", "X-A": ""}
    path = f"{BASE}/{created['id']}"
    replaced = client.patch(path, json={"headers": {"X-B": "b"}}, headers=alice.headers)
    assert replaced.get_json()["headers"] == {"X-B": "b"}
    kept = client.patch(path, json={"description": "x"}, headers=alice.headers)
    assert kept.get_json()["headers"] == {"X-B": "b"}
    removed = client.patch(path, json={"headers": {}}, headers=alice.headers)
    assert removed.get_json()["headers"] == {}


def test_twenty_headers_of_1000_characters_are_accepted(client, alice):
    headers = {f"X-Custom-{i}": "v" * 1000 for i in range(20)}
    assert _create(client, alice, headers=headers)["headers"] == headers


@pytest.mark.parametrize("name", [
    "X-Service-Signature", "x-service-event-id", "X-Service-Delivery-Id", "X-Service-Attempt",
    "X-Service-Version", "X-Service-Event", "X-Service-Mode", "Content-Type", "content-length",
    "Host", "User-Agent", "Connection", "Transfer-Encoding", "Keep-Alive", "Proxy-Authorization",
    "TE", "Trailer", "Upgrade",
])
def test_a_reserved_header_is_refused_with_its_name(client, alice, name):
    response = client.post(BASE, json={"url": URL, "headers": {name: "x", "X-Fine": "y"}},
                           headers=alice.headers)
    message = _error(response, 400, "reserved_header")
    assert name in message and "X-Fine" not in message


def test_patch_refuses_reserved_headers_too_and_names_each(client, alice):
    created = _create(client, alice)
    response = client.patch(f"{BASE}/{created['id']}",
                            json={"headers": {"Host": "a", "X-Service-Mode": "b"}},
                            headers=alice.headers)
    message = _error(response, 400, "reserved_header")
    assert "Host" in message and "X-Service-Mode" in message


def test_the_delivery_headers_are_reserved_under_the_configured_service_name(
        client, alice, monkeypatch):
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_SERVICE_NAME", "Acme")
    reset_settings_cache()
    response = client.post(BASE, json={"url": URL, "headers": {"X-Acme-Signature": "x"}},
                           headers=alice.headers)
    assert "X-Acme-Signature" in _error(response, 400, "reserved_header")


@pytest.mark.parametrize("headers", [
    {f"X-H{i}": "v" for i in range(21)},
    {"X-A": "v" * 1001},
    {"X-A": "tab\there"},
    {"X-A": "caf\u00e9"},
    {"Bad Name": "v"},
    {"X-A": 1},
    {"X-A": None},
    {"X-A": "a", "x-a": "b"},
    ["X-A", "v"],
    "X-A: v",
])
def test_malformed_headers_are_refused(client, alice, headers):
    response = client.post(BASE, json={"url": URL, "headers": headers}, headers=alice.headers)
    message = _error(response, 400, "validation_error")
    assert "headers" in message


def test_a_refused_header_value_is_never_quoted_back(client, alice):
    response = client.post(BASE, json={"url": URL, "headers": {"X-A": "s3cr3t\u00e9value"}},
                           headers=alice.headers)
    assert "s3cr3t" not in _error(response, 400, "validation_error")


# --- max_in_flight and rate_limit ----------------------------------------------------------


@pytest.mark.parametrize("field, value", [
    ("max_in_flight", 1), ("max_in_flight", 1000), ("max_in_flight", None),
    ("rate_limit", 0.01), ("rate_limit", 10000), ("rate_limit", 2), ("rate_limit", None),
])
def test_limits_within_their_range_are_stored(client, alice, field, value):
    assert _create(client, alice, **{field: value})[field] == value
    created = _create(client, alice)
    patched = client.patch(f"{BASE}/{created['id']}", json={field: value}, headers=alice.headers)
    assert patched.status_code == 200 and patched.get_json()[field] == value


@pytest.mark.parametrize("field, value", [
    ("max_in_flight", 0), ("max_in_flight", 1001), ("max_in_flight", -1),
    ("max_in_flight", 1.5), ("max_in_flight", "5"), ("max_in_flight", True),
    ("rate_limit", 0), ("rate_limit", 0.001), ("rate_limit", 10000.5), ("rate_limit", -2),
    ("rate_limit", "2"), ("rate_limit", True),
])
def test_limits_out_of_range_or_of_the_wrong_type_are_refused(client, alice, field, value):
    response = client.post(BASE, json={"url": URL, field: value}, headers=alice.headers)
    assert field in _error(response, 400, "validation_error")
    created = _create(client, alice)
    response = client.patch(f"{BASE}/{created['id']}", json={field: value}, headers=alice.headers)
    assert field in _error(response, 400, "validation_error")


def test_null_sets_a_limit_back_to_its_default(client, alice):
    created = _create(client, alice, max_in_flight=5, rate_limit=1)
    patched = client.patch(f"{BASE}/{created['id']}", json={"max_in_flight": None,
                                                             "rate_limit": None},
                           headers=alice.headers).get_json()
    assert (patched["max_in_flight"], patched["rate_limit"]) == (None, None)


# --- rotate-secret -------------------------------------------------------------------------


def _rotate(client, caller, subscription_id, **kwargs):
    return client.post(f"{BASE}/{subscription_id}/rotate-secret", headers=caller.headers,
                       **kwargs)


@pytest.mark.parametrize("kwargs", [{}, {"json": {}}, {"data": "  "}])
def test_rotate_without_activate_in_replaces_the_secret_at_once(client, alice, kwargs):
    created = _create(client, alice)
    response = _rotate(client, alice, created["id"], **kwargs)
    assert response.status_code == 200
    body = response.get_json()
    assert body["secret"] != created["secret"] and body["secret"].startswith("whsec_")
    assert body["next_secret"] is None and body["next_secret_active_at"] is None


def test_a_staged_rotation_keeps_the_secret_and_shows_the_next_one(client, alice):
    created = _create(client, alice)
    before = utcnow()
    body = _rotate(client, alice, created["id"], json={"activate_in": 3600}).get_json()
    assert body["secret"] == created["secret"]
    assert body["next_secret"].startswith("whsec_") and body["next_secret"] != body["secret"]
    takes_over = _parse(body["next_secret_active_at"])
    assert before + dt.timedelta(seconds=3600) <= takes_over <= utcnow() + dt.timedelta(seconds=3600)
    got = client.get(f"{BASE}/{created['id']}", headers=alice.headers).get_json()
    assert (got["secret"], got["next_secret"], got["next_secret_active_at"]) == (
        body["secret"], body["next_secret"], body["next_secret_active_at"])
    listed = client.get(BASE, headers=alice.headers).get_json()["data"][0]
    assert listed["next_secret_active_at"] == body["next_secret_active_at"]


def test_a_second_staged_rotation_replaces_the_staged_secret(client, alice):
    created = _create(client, alice)
    first = _rotate(client, alice, created["id"], json={"activate_in": 3600}).get_json()
    second = _rotate(client, alice, created["id"], json={"activate_in": 60}).get_json()
    assert second["secret"] == created["secret"]
    assert second["next_secret"] != first["next_secret"]
    assert _parse(second["next_secret_active_at"]) < _parse(first["next_secret_active_at"])


def test_from_its_time_on_the_next_secret_is_the_secret(client, alice):
    created = _create(client, alice)
    staged = _rotate(client, alice, created["id"], json={"activate_in": 3600}).get_json()
    with session_scope() as session:  # as if the hour had passed
        session.execute(update(Subscription).where(Subscription.id == created["id"])
                        .values(next_secret_active_at=utcnow() - dt.timedelta(seconds=1)))
    got = client.get(f"{BASE}/{created['id']}", headers=alice.headers).get_json()
    assert got["secret"] == staged["next_secret"]
    assert got["next_secret"] is None and got["next_secret_active_at"] is None


@pytest.mark.parametrize("seconds", [1, 604800])
def test_activate_in_takes_1_second_to_7_days(client, alice, seconds):
    created = _create(client, alice)
    response = _rotate(client, alice, created["id"], json={"activate_in": seconds})
    assert response.status_code == 200 and response.get_json()["next_secret"]


@pytest.mark.parametrize("body", [
    {"activate_in": 0}, {"activate_in": 604801}, {"activate_in": -5}, {"activate_in": 1.5},
    {"activate_in": "60"}, {"activate_in": True}, {"activate_in": None}, {"other": 1},
])
def test_a_bad_activate_in_is_refused_and_changes_nothing(client, alice, body):
    created = _create(client, alice)
    response = _rotate(client, alice, created["id"], json=body)
    _error(response, 400, "validation_error")
    got = client.get(f"{BASE}/{created['id']}", headers=alice.headers).get_json()
    assert got["secret"] == created["secret"] and got["next_secret"] is None


def test_rotate_refuses_a_body_that_is_not_json(client, alice):
    created = _create(client, alice)
    _error(_rotate(client, alice, created["id"], data="activate_in=5",
                   content_type="application/json"), 400, "invalid_json")


# --- rotate-secret/activate and rotate-secret/cancel (CONTRACT 9.3) ---------------------


def _staged_action(client, caller, subscription_id, action):
    return client.post(f"{BASE}/{subscription_id}/rotate-secret/{action}", headers=caller.headers)


def test_activate_lets_the_staged_secret_sign_from_now_on(client, alice):
    created = _create(client, alice)
    staged = _rotate(client, alice, created["id"], json={"activate_in": 3600}).get_json()
    response = _staged_action(client, alice, created["id"], "activate")
    assert response.status_code == 200, response.get_json()
    body = response.get_json()
    assert body["secret"] == staged["next_secret"]
    assert body["next_secret"] is None and body["next_secret_active_at"] is None
    got = client.get(f"{BASE}/{created['id']}", headers=alice.headers).get_json()
    assert got["secret"] == staged["next_secret"]


def test_cancel_drops_the_staged_secret_and_keeps_the_secret(client, alice):
    created = _create(client, alice)
    _rotate(client, alice, created["id"], json={"activate_in": 3600})
    response = _staged_action(client, alice, created["id"], "cancel")
    assert response.status_code == 200, response.get_json()
    body = response.get_json()
    assert "secret" not in body  # a subscription without its secrets, as PATCH answers
    assert body["next_secret_active_at"] is None
    got = client.get(f"{BASE}/{created['id']}", headers=alice.headers).get_json()
    assert got["secret"] == created["secret"] and got["next_secret"] is None


@pytest.mark.parametrize("action", ["activate", "cancel"])
def test_with_nothing_staged_activate_and_cancel_answer_409_and_change_nothing(
        client, alice, action):
    created = _create(client, alice)
    _error(_staged_action(client, alice, created["id"], action), 409, "nothing_staged")
    _rotate(client, alice, created["id"], json={"activate_in": 3600})
    _staged_action(client, alice, created["id"], "cancel")
    _error(_staged_action(client, alice, created["id"], action), 409, "nothing_staged")
    got = client.get(f"{BASE}/{created['id']}", headers=alice.headers).get_json()
    assert got["secret"] == created["secret"] and got["next_secret"] is None


@pytest.mark.parametrize("action", ["activate", "cancel"])
def test_a_staged_secret_whose_time_came_is_no_longer_staged(client, alice, action):
    created = _create(client, alice)
    staged = _rotate(client, alice, created["id"], json={"activate_in": 3600}).get_json()
    with session_scope() as session:  # as if the hour had passed
        session.execute(update(Subscription).where(Subscription.id == created["id"])
                        .values(next_secret_active_at=utcnow() - dt.timedelta(seconds=1)))
    _error(_staged_action(client, alice, created["id"], action), 409, "nothing_staged")
    got = client.get(f"{BASE}/{created['id']}", headers=alice.headers).get_json()
    assert got["secret"] == staged["next_secret"]


def test_rotate_and_recover_another_account_s_subscription_is_404(client, alice, bob):
    created = _create(client, alice)
    _error(_rotate(client, bob, created["id"], json={"activate_in": 60}), 404, "not_found")
    _rotate(client, alice, created["id"], json={"activate_in": 60})
    for action in ("activate", "cancel"):
        _error(_staged_action(client, bob, created["id"], action), 404, "not_found")
    response = client.post(f"{BASE}/{created['id']}/recover", headers=bob.headers,
                           json={"since": "2026-01-01T00:00:00Z"})
    _error(response, 404, "not_found")


# --- recover -------------------------------------------------------------------------------


def _failed_deliveries(caller, subscription_id, statuses):
    """One delivery per status, to this subscription."""
    ids = []
    for status in statuses:
        (delivery_id,) = [d for d in emit(caller.account_id)[1]
                          if _subscription_of(d) == subscription_id]
        set_delivery(delivery_id, status=status, attempt_count=1)
        ids.append(delivery_id)
    return ids


def _subscription_of(delivery_id):
    with session_scope() as session:
        return session.get(Delivery, delivery_id).subscription_id


def _recover(client, caller, subscription_id, **body):
    return client.post(f"{BASE}/{subscription_id}/recover", json=body, headers=caller.headers)


def _iso(moment: dt.datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def test_recover_replays_failed_and_dead_deliveries_once(client, alice, broker):
    subscription_id = make_subscription(alice.account_id)
    other = make_subscription(alice.account_id)
    since = _iso(utcnow() - dt.timedelta(minutes=5))
    failed, dead, done = _failed_deliveries(alice, subscription_id, ["failed", "dead", "done"])
    _failed_deliveries(alice, other, ["failed"])  # another subscription's: not recovered
    broker.clear()

    response = _recover(client, alice, subscription_id, since=since)
    assert response.status_code == 202
    assert response.get_json() == {"replayed": 2, "more": False, "held": 0}
    broker.settle()
    assert broker.sweeps >= 1  # the parked replays go out through the sweep
    with session_scope() as session:
        replays = session.query(Delivery).filter(Delivery.replay_of.is_not(None)).all()
        assert sorted(r.replay_of for r in replays) == sorted([failed, dead])
        assert all(r.subscription_id == subscription_id for r in replays)

    again = _recover(client, alice, subscription_id, since=since)
    assert again.status_code == 202 and again.get_json() == {"replayed": 0, "more": False, "held": 0}


def test_recover_honours_until(client, alice, broker):
    subscription_id = make_subscription(alice.account_id)
    (old,) = _failed_deliveries(alice, subscription_id, ["failed"])
    set_delivery(old, created_at=utcnow() - dt.timedelta(hours=2))
    _failed_deliveries(alice, subscription_id, ["dead"])
    response = _recover(client, alice, subscription_id,
                        since=_iso(utcnow() - dt.timedelta(hours=3)),
                        until=_iso(utcnow() - dt.timedelta(hours=1)))
    assert response.get_json() == {"replayed": 1, "more": False, "held": 0}


def test_recover_on_a_paused_subscription_counts_the_held_replays(client, alice, broker):
    subscription_id = make_subscription(alice.account_id, status="paused")
    _failed_deliveries(alice, subscription_id, ["failed", "dead"])
    response = _recover(client, alice, subscription_id,
                        since=_iso(utcnow() - dt.timedelta(minutes=5)))
    assert response.get_json() == {"replayed": 2, "more": False, "held": 2}
    with session_scope() as session:
        statuses = session.scalars(select(Delivery.status).where(
            Delivery.replay_of.is_not(None))).all()
    assert statuses == ["paused", "paused"]


def test_recover_says_when_the_window_holds_more_than_one_call_replays(
        client, alice, broker, monkeypatch):
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_RECOVER_MAX", "2")
    monkeypatch.setenv("WEBHOOKS_RECOVER_BATCH", "1")
    reset_settings_cache()
    subscription_id = make_subscription(alice.account_id)
    _failed_deliveries(alice, subscription_id, ["failed", "dead", "failed"])
    since = _iso(utcnow() - dt.timedelta(minutes=5))
    assert _recover(client, alice, subscription_id, since=since).get_json() == {
        "replayed": 2, "more": True, "held": 0}
    assert _recover(client, alice, subscription_id, since=since).get_json() == {
        "replayed": 1, "more": False, "held": 0}


@pytest.mark.parametrize("window, message", [
    ({"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "after until"),
    ({"since": "2999-01-01T00:00:00Z"}, "in the future"),
])
def test_recover_refuses_a_window_that_ends_first_or_starts_in_the_future(
        client, alice, window, message):
    subscription_id = make_subscription(alice.account_id)
    assert message in _error(_recover(client, alice, subscription_id, **window), 400,
                             "invalid_window")


@pytest.mark.parametrize("body", [
    {}, {"until": "2026-01-01T00:00:00Z"}, {"since": "yesterday"}, {"since": 1700000000},
    {"since": "2026-01-01T00:00:00Z", "extra": 1},
])
def test_recover_refuses_a_malformed_body(client, alice, body):
    subscription_id = make_subscription(alice.account_id)
    _error(_recover(client, alice, subscription_id, **body), 400, "validation_error")


def test_recover_needs_a_body(client, alice):
    subscription_id = make_subscription(alice.account_id)
    response = client.post(f"{BASE}/{subscription_id}/recover", headers=alice.headers)
    _error(response, 400, "invalid_json")
