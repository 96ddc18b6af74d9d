"""``GET /subscriptions`` in pages: ``limit`` and ``cursor`` exactly as ``GET /deliveries``."""

from __future__ import annotations

import pytest

from .helpers import make_subscription, new_caller

BASE = "/api/webhooks/subscriptions"


def all_pages(client, caller, limit: int, between=None) -> list[list[str]]:
    """The ids of every page, following next_cursor; ``between()`` runs after each page."""
    pages, cursor = [], None
    while True:
        url = f"{BASE}?limit={limit}" + (f"&cursor={cursor}" if cursor else "")
        response = client.get(url, headers=caller.headers)
        assert response.status_code == 200
        body = response.get_json()
        assert set(body) == {"data", "next_cursor"}
        pages.append([s["id"] for s in body["data"]])
        cursor = body["next_cursor"]
        if cursor is None:
            return pages
        if between:
            between()


def test_pages_are_newest_first_without_repeats_or_gaps(client, alice):
    ids = [make_subscription(alice.account_id) for _ in range(5)]
    pages = all_pages(client, alice, limit=2)
    assert [len(page) for page in pages] == [2, 2, 1]
    assert sum(pages, []) == ids[::-1]


def test_a_full_last_page_has_a_null_cursor(client, alice):
    ids = [make_subscription(alice.account_id) for _ in range(4)]
    assert all_pages(client, alice, limit=2) == [ids[:1:-1], ids[1::-1]]


def test_the_default_page_is_50(client, alice):
    for _ in range(51):
        make_subscription(alice.account_id)
    body = client.get(BASE, headers=alice.headers).get_json()
    assert len(body["data"]) == 50 and body["next_cursor"]


def test_subscriptions_created_while_paging_are_neither_repeated_nor_skipped(client, alice):
    old = [make_subscription(alice.account_id) for _ in range(4)]
    added = []
    pages = all_pages(client, alice, limit=2,
                      between=lambda: added.append(make_subscription(alice.account_id)))
    assert sum(pages, []) == old[::-1]  # the new ones sort before the first page
    assert added


def test_only_the_callers_live_subscriptions_are_listed(client, alice):
    bob = new_caller("bob")
    make_subscription(bob.account_id)
    kept = make_subscription(alice.account_id)
    deleted = make_subscription(alice.account_id)
    assert client.delete(f"{BASE}/{deleted}", headers=alice.headers).status_code == 204
    assert all_pages(client, alice, limit=1) == [[kept]]


@pytest.mark.parametrize(
    "query, code",
    [
        ("limit=0", "invalid_parameter"),
        ("limit=201", "invalid_parameter"),
        ("limit=ten", "invalid_parameter"),
        ("cursor=", "invalid_parameter"),
        ("cursor=garbage!", "invalid_cursor"),
        ("cursor=MXxub3QgYSBkYXRlfHg", "invalid_cursor"),  # base64 of "1|not a date|x"
    ],
)
def test_bad_parameters_answer_400(client, alice, query, code):
    response = client.get(f"{BASE}?{query}", headers=alice.headers)
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == code


def test_the_openapi_document_shows_the_parameters_and_the_cursor(client):
    document = client.get("/api/webhooks/openapi.json").get_json()
    operation = document["paths"][BASE]["get"]
    assert {p["name"] for p in operation["parameters"]} == {"limit", "cursor"}
    page = document["components"]["schemas"]["SubscriptionList"]
    assert set(page["required"]) == {"data", "next_cursor"}
    assert "400" in operation["responses"] and "429" in operation["responses"]
    assert operation["responses"]["429"]["headers"]["Retry-After"]["required"] is True
