"""A password in a subscription URL (``https://user:pass@host/``) is sent, never shown:
every API answer masks it (``user:***@``); the stored URL keeps it."""

from __future__ import annotations

import pytest

from webhooks.storage.db import session_scope
from webhooks.storage.models import Subscription

API = "/api/webhooks/subscriptions"
URL = "https://hook-user:s3cret-pass@hooks.example.com/in?x=1"
SHOWN = "https://hook-user:***@hooks.example.com/in?x=1"

pytestmark = pytest.mark.database


def stored_url(subscription_id: str) -> str:
    with session_scope() as session:
        return session.get(Subscription, subscription_id).url


def test_no_answer_shows_the_password_and_the_row_keeps_it(client, alice, broker):
    created = client.post(API, json={"url": URL}, headers=alice.headers)
    assert created.status_code == 201 and created.get_json()["url"] == SHOWN
    subscription_id = created.get_json()["id"]
    assert stored_url(subscription_id) == URL  # it is sent with every delivery

    one = f"{API}/{subscription_id}"
    answers = [
        created,
        client.get(API, headers=alice.headers),
        client.get(one, headers=alice.headers),
        client.patch(one, json={"description": "x"}, headers=alice.headers),
        client.post(f"{one}/rotate-secret", headers=alice.headers),
        client.post(f"{one}/resume", headers=alice.headers),
    ]
    for answer in answers:
        assert answer.status_code == 200 or answer is created, answer.get_json()
        body = answer.get_data(as_text=True)
        assert "s3cret-pass" not in body and "hook-user:***@hooks.example.com" in body


def test_a_patch_that_sends_the_masked_url_back_keeps_the_password(client, alice):
    subscription_id = client.post(API, json={"url": URL}, headers=alice.headers).get_json()["id"]
    answer = client.patch(f"{API}/{subscription_id}", json={"url": SHOWN}, headers=alice.headers)
    assert answer.status_code == 200 and answer.get_json()["url"] == SHOWN
    assert stored_url(subscription_id) == URL


def test_a_patch_with_a_new_password_stores_it_and_shows_it_masked(client, alice):
    subscription_id = client.post(API, json={"url": URL}, headers=alice.headers).get_json()["id"]
    new = "https://hook-user:n3w-pass@hooks.example.com/in?x=1"
    answer = client.patch(f"{API}/{subscription_id}", json={"url": new}, headers=alice.headers)
    assert answer.get_json()["url"] == SHOWN and "n3w-pass" not in answer.get_data(as_text=True)
    assert stored_url(subscription_id) == new


@pytest.mark.parametrize("url, shown", [
    ("https://hooks.example.com/in", "https://hooks.example.com/in"),
    ("https://only-user@hooks.example.com/in", "https://only-user@hooks.example.com/in"),
    ("https://u:p%40ss@hooks.example.com:8443/in", "https://u:***@hooks.example.com:8443/in"),
])
def test_urls_without_a_password_are_shown_as_they_are(client, alice, url, shown):
    answer = client.post(API, json={"url": url}, headers=alice.headers)
    assert answer.get_json()["url"] == shown
