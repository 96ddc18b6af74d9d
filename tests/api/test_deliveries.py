"""The delivery routes: shape, attempts, filters, pagination, replay."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import insert, select

from webhooks.storage.db import session_scope
from webhooks.storage.models import Attempt, Delivery, Subscription, utcnow

from .helpers import emit, insert_deliveries, make_subscription, set_delivery

BASE = "/api/webhooks/deliveries"
DELIVERY_KEYS = {
    "id", "event_id", "event_type", "subscription_id", "status", "attempt_count",
    "next_attempt_at", "replay_of", "ordering_key", "created_at", "attempts",
}
ATTEMPT_KEYS = {"number", "started_at", "duration_ms", "status_code", "error", "outcome"}


def _add_attempt(delivery_id: str, number: int, **values) -> None:
    row = dict(
        delivery_id=delivery_id, number=number, started_at=utcnow(), duration_ms=120,
        status_code=500, error=None, outcome="retry", response_excerpt="oops",
    )
    row.update(values)
    with session_scope() as session:
        session.execute(insert(Attempt).values(**row))


def _ids(response) -> list[str]:
    assert response.status_code == 200, response.get_json()
    return [delivery["id"] for delivery in response.get_json()["data"]]


# --- shape ------------------------------------------------------------------------------


def test_get_answers_the_delivery_with_its_attempts_in_order(client, alice):
    subscription_id = make_subscription(alice.account_id)
    event_id, (delivery_id,) = emit(alice.account_id, "reply.received")
    _add_attempt(
        delivery_id, 2, status_code=None, error="connection refused", response_excerpt=None
    )
    _add_attempt(delivery_id, 1, status_code=503)
    set_delivery(delivery_id, attempt_count=2)

    response = client.get(f"{BASE}/{delivery_id}", headers=alice.headers)
    assert response.status_code == 200
    body = response.get_json()
    assert set(body) == DELIVERY_KEYS
    assert body["id"] == delivery_id and body["event_id"] == event_id
    assert body["event_type"] == "reply.received"
    assert body["subscription_id"] == subscription_id
    assert (body["status"], body["attempt_count"], body["replay_of"]) == ("pending", 2, None)
    assert body["created_at"].endswith("Z") and body["next_attempt_at"].endswith("Z")
    assert [a["number"] for a in body["attempts"]] == [1, 2]
    first, second = body["attempts"]
    assert ATTEMPT_KEYS <= set(first)
    assert (first["status_code"], first["error"], first["outcome"]) == (503, None, "retry")
    assert first["duration_ms"] == 120 and first["started_at"].endswith("Z")
    assert (second["status_code"], second["error"]) == (None, "connection refused")


def test_an_attempt_in_flight_shows_as_pending(client, alice):
    make_subscription(alice.account_id)
    _, (delivery_id,) = emit(alice.account_id)
    set_delivery(delivery_id, status="sending", attempt_count=1, claimed_at=utcnow())
    shown = client.get(f"{BASE}/{delivery_id}", headers=alice.headers).get_json()
    assert shown["status"] == "pending"
    listed = client.get(f"{BASE}?status=pending", headers=alice.headers)
    assert _ids(listed) == [delivery_id]


def test_list_items_have_the_delivery_shape(client, alice):
    make_subscription(alice.account_id)
    _, (delivery_id,) = emit(alice.account_id)
    _add_attempt(delivery_id, 1)
    body = client.get(BASE, headers=alice.headers).get_json()
    assert set(body) == {"data", "next_cursor"}
    assert body["next_cursor"] is None
    (item,) = body["data"]
    assert set(item) == DELIVERY_KEYS
    assert [a["number"] for a in item["attempts"]] == [1]


def test_get_unknown_is_404(client, alice):
    for bad in ("00000000-0000-4000-8000-000000000000", "nope"):
        response = client.get(f"{BASE}/{bad}", headers=alice.headers)
        assert response.status_code == 404
        assert response.get_json()["error"]["code"] == "not_found"


# --- filters ----------------------------------------------------------------------------


@pytest.fixture
def mixed(alice):
    """Two subscriptions and deliveries of two types in every status; returns the ids by name."""
    first = make_subscription(alice.account_id)
    second = make_subscription(alice.account_id, event_types=["email.sent"])
    sent_event, _ = emit(alice.account_id, "email.sent")           # to both
    reply_event, _ = emit(alice.account_id, "reply.received")      # to first only
    with session_scope() as session:
        rows = {
            (d.event_type, d.subscription_id): d.id
            for d in session.scalars(select(Delivery)).all()
        }
    ids = {
        "sent_first": rows[("email.sent", first)],
        "sent_second": rows[("email.sent", second)],
        "reply_first": rows[("reply.received", first)],
    }
    set_delivery(ids["sent_first"], status="done", attempt_count=1)
    set_delivery(ids["sent_second"], status="dead", attempt_count=6)
    return dict(ids, first=first, second=second, sent_event=sent_event, reply_event=reply_event)


def test_each_filter(client, alice, mixed):
    def query(q):
        return set(_ids(client.get(f"{BASE}?{q}", headers=alice.headers)))

    everything = {mixed["sent_first"], mixed["sent_second"], mixed["reply_first"]}
    assert query("") == everything
    assert query(f"subscription_id={mixed['first']}") == {mixed["sent_first"], mixed["reply_first"]}
    assert query(f"subscription_id={mixed['second']}") == {mixed["sent_second"]}
    assert query("event_type=email.sent") == {mixed["sent_first"], mixed["sent_second"]}
    assert query("event_type=test.ping") == set()
    assert query(f"event_id={mixed['reply_event']}") == {mixed["reply_first"]}
    assert query("status=done") == {mixed["sent_first"]}
    assert query("status=dead") == {mixed["sent_second"]}
    assert query("status=pending") == {mixed["reply_first"]}
    assert query("status=failed") == set()
    assert query("status=paused") == set()
    assert query(f"status=done&event_type=email.sent&subscription_id={mixed['first']}") == {
        mixed["sent_first"]
    }
    assert query("subscription_id=00000000-0000-4000-8000-000000000000") == set()
    assert query("unknown_parameter=1") == everything


@pytest.mark.parametrize(
    "q, code",
    [
        ("limit=0", "invalid_parameter"),
        ("limit=201", "invalid_parameter"),
        ("limit=-1", "invalid_parameter"),
        ("limit=abc", "invalid_parameter"),
        ("limit=1.5", "invalid_parameter"),
        ("status=sending", "invalid_parameter"),
        ("status=PENDING", "invalid_parameter"),
        ("event_type=email.exploded", "invalid_parameter"),
        ("subscription_id=123", "invalid_parameter"),
        ("event_id=xyz", "invalid_parameter"),
        ("error_kind=nope", "invalid_parameter"),
        ("cursor=garbage!", "invalid_cursor"),
        ("cursor=MXxub3QgYSBkYXRlfHg", "invalid_cursor"),  # base64 of "1|not a date|x"
        ("cursor=", "invalid_parameter"),
    ],
)
def test_bad_query_values_are_400(client, alice, q, code):
    response = client.get(f"{BASE}?{q}", headers=alice.headers)
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == code


def test_limit_bounds_are_accepted(client, alice):
    assert client.get(f"{BASE}?limit=1", headers=alice.headers).status_code == 200
    assert client.get(f"{BASE}?limit=200", headers=alice.headers).status_code == 200


# --- pagination -------------------------------------------------------------------------


def _walk(client, caller, limit: int, between=None) -> list[list[str]]:
    """Every page, following next_cursor; ``between(page_number)`` runs after each page."""
    pages, cursor = [], None
    while True:
        url = f"{BASE}?limit={limit}" + (f"&cursor={cursor}" if cursor else "")
        body = client.get(url, headers=caller.headers).get_json()
        pages.append([d["id"] for d in body["data"]])
        if between:
            between(len(pages))
        cursor = body["next_cursor"]
        if cursor is None:
            return pages
        assert len(pages) < 20, "pagination does not end"


def test_three_pages_newest_first_without_duplicates_or_gaps(client, alice):
    subscription_id = make_subscription(alice.account_id)
    base = utcnow() - dt.timedelta(hours=1)
    # Five rows share one created_at: the id breaks the tie, across a page boundary too.
    created = [base + dt.timedelta(seconds=i) for i in range(7)]
    created += [base + dt.timedelta(seconds=3)] * 5
    ids = insert_deliveries(alice.account_id, subscription_id, created)
    expected = [i for _, i in sorted(zip(created, ids), reverse=True)]

    pages = _walk(client, alice, limit=5)
    assert [len(page) for page in pages] == [5, 5, 2]
    assert sum(pages, []) == expected


def test_a_full_last_page_has_a_null_cursor(client, alice):
    subscription_id = make_subscription(alice.account_id)
    insert_deliveries(alice.account_id, subscription_id, [utcnow()] * 4)
    pages = _walk(client, alice, limit=2)
    assert [len(page) for page in pages] == [2, 2]


def test_pagination_is_stable_when_rows_are_inserted_between_pages(client, alice):
    subscription_id = make_subscription(alice.account_id)
    base = utcnow() - dt.timedelta(hours=1)
    ids = insert_deliveries(
        alice.account_id, subscription_id, [base + dt.timedelta(seconds=i) for i in range(9)]
    )
    expected = list(reversed(ids))

    def insert_newer(_page_number):
        insert_deliveries(alice.account_id, subscription_id, [utcnow(), utcnow()])

    pages = _walk(client, alice, limit=3, between=insert_newer)
    assert sum(pages, []) == expected
    assert [len(page) for page in pages] == [3, 3, 3]


def test_pagination_with_a_filter(client, alice):
    first = make_subscription(alice.account_id)
    second = make_subscription(alice.account_id)
    base = utcnow() - dt.timedelta(hours=1)
    moments = [base + dt.timedelta(seconds=i) for i in range(5)]
    mine = insert_deliveries(alice.account_id, first, moments)
    insert_deliveries(alice.account_id, second, moments)
    pages, cursor = [], None
    while True:
        url = f"{BASE}?limit=2&subscription_id={first}" + (f"&cursor={cursor}" if cursor else "")
        body = client.get(url, headers=alice.headers).get_json()
        pages.append([d["id"] for d in body["data"]])
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert sum(pages, []) == list(reversed(mine))


# --- replay -----------------------------------------------------------------------------


@pytest.mark.parametrize("status", ["failed", "dead"])
def test_replay_creates_a_new_delivery_and_publishes_it_after_commit(client, alice, broker, status):
    subscription_id = make_subscription(alice.account_id)
    event_id, (original,) = emit(alice.account_id)
    set_delivery(original, status=status, attempt_count=6 if status == "dead" else 1)
    _add_attempt(original, 1, status_code=410, outcome="permanent_failure")
    broker.clear()
    broker.probe = lambda session: [d.id for d in session.scalars(select(Delivery)).all()]

    response = client.post(f"{BASE}/{original}/replay", headers=alice.headers)
    assert response.status_code == 202
    broker.settle()
    body = response.get_json()
    assert set(body) == DELIVERY_KEYS
    assert body["id"] != original
    assert body["replay_of"] == original
    assert (body["event_id"], body["subscription_id"]) == (event_id, subscription_id)
    assert (body["status"], body["attempt_count"], body["attempts"]) == ("pending", 0, [])
    assert response.headers["Location"].endswith(f"{BASE}/{body['id']}")
    # The original is left as it was.
    again = client.get(f"{BASE}/{original}", headers=alice.headers).get_json()
    assert (again["status"], len(again["attempts"])) == (status, 1)
    # Published once, after the commit (a fresh session saw the new row then).
    assert broker.published == [(body["id"], 0)]
    assert body["id"] in broker.seen[0]
    assert client.get(f"{BASE}/{body['id']}", headers=alice.headers).get_json() == body


@pytest.mark.parametrize("status", ["done", "pending", "paused", "sending"])
def test_replay_of_a_delivery_that_is_not_failed_or_dead_is_409(client, alice, broker, status):
    make_subscription(alice.account_id)
    _, (original,) = emit(alice.account_id)
    set_delivery(original, status=status)
    broker.clear()
    response = client.post(f"{BASE}/{original}/replay", headers=alice.headers)
    assert response.status_code == 409
    error = response.get_json()["error"]
    assert error["code"] == "not_replayable"
    assert error["message"].endswith(f"is {'pending' if status == 'sending' else status}.")
    with session_scope() as session:
        assert session.scalars(select(Delivery.id)).all() == [original]
    assert broker.published == []


def test_replay_while_the_subscription_is_paused_waits_unpublished(client, alice, broker):
    subscription_id = make_subscription(alice.account_id)
    _, (original,) = emit(alice.account_id)
    set_delivery(original, status="failed", attempt_count=1)
    with session_scope() as session:
        session.get(Subscription, subscription_id).status = "paused"
    broker.clear()
    response = client.post(f"{BASE}/{original}/replay", headers=alice.headers)
    assert response.status_code == 202
    broker.settle()
    assert response.get_json()["status"] == "paused"
    assert broker.published == []


def test_replay_of_a_deleted_subscriptions_delivery_is_409(client, alice, broker):
    subscription_id = make_subscription(alice.account_id)
    _, (original,) = emit(alice.account_id)
    set_delivery(original, status="dead", attempt_count=6)
    assert client.delete(
        f"/api/webhooks/subscriptions/{subscription_id}", headers=alice.headers
    ).status_code == 204
    response = client.post(f"{BASE}/{original}/replay", headers=alice.headers)
    assert response.status_code == 409
    assert response.get_json()["error"]["code"] == "not_replayable"


def test_replay_of_an_unknown_delivery_is_404(client, alice):
    missing = "00000000-0000-4000-8000-000000000000"
    response = client.post(f"{BASE}/{missing}/replay", headers=alice.headers)
    assert response.status_code == 404


def test_the_error_kind_is_shown_and_filters_the_list(client, alice):
    """An attempt's error_kind (migration 0011) is in its shape, and ?error_kind= keeps the
    deliveries with an attempt that failed for that reason."""
    make_subscription(alice.account_id)
    _, (timed_out,) = emit(alice.account_id)
    _, (unresolved,) = emit(alice.account_id)
    _, (answered,) = emit(alice.account_id)
    _add_attempt(timed_out, 1, status_code=None, error="timed out", error_kind="timeout")
    _add_attempt(unresolved, 1, status_code=None, error="no such host", error_kind="dns")
    _add_attempt(answered, 1, status_code=503)
    assert _ids(client.get(f"{BASE}?error_kind=timeout", headers=alice.headers)) == [timed_out]
    assert _ids(client.get(f"{BASE}?error_kind=dns", headers=alice.headers)) == [unresolved]
    assert _ids(client.get(f"{BASE}?error_kind=tls", headers=alice.headers)) == []
    shown = client.get(f"{BASE}/{answered}", headers=alice.headers).get_json()["attempts"][0]
    assert shown["error_kind"] is None
    shown = client.get(f"{BASE}/{timed_out}", headers=alice.headers).get_json()["attempts"][0]
    assert shown["error_kind"] == "timeout"
