"""The dashboard's subscription list in pages, with the delivery list's "Older" link."""

from __future__ import annotations

import re
from html import unescape

import pytest

from .rows import make_subscription, pause_subscription

pytestmark = pytest.mark.database

ROW = re.compile(r'<td class="url"[^>]*><a href="/dashboard/subscriptions/([0-9a-f-]{36})"')
OLDER = re.compile(r'<a href="([^"]*)">Older &raquo;</a>')


@pytest.fixture
def page_size(monkeypatch):
    monkeypatch.setattr("web.dashboard.views_subscriptions.PAGE_SIZE", 2)


def listed(client, url: str) -> tuple[list[str], str | None, str]:
    """The subscription ids a page shows, the target of its "Older" link, and its HTML."""
    response = client.get(url)
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    older = OLDER.search(html)
    return ROW.findall(html), unescape(older.group(1)) if older else None, html


def test_the_list_pages_newest_first_with_an_older_link(alice_client, alice, page_size):
    ids = [make_subscription(alice.account_id) for _ in range(5)]
    shown, url = [], "/dashboard/subscriptions"
    while url:
        rows, url, html = listed(alice_client, url)
        shown.append(rows)
        if len(shown) > 1:
            assert "&laquo; Newest" in html
    assert shown == [ids[:2:-1], ids[2:0:-1], ids[:1]]


def test_a_cursor_that_is_not_ours_starts_from_the_newest(alice_client, alice, page_size):
    ids = [make_subscription(alice.account_id) for _ in range(3)]
    rows, older, _ = listed(alice_client, "/dashboard/subscriptions?cursor=garbage!")
    assert rows == ids[:0:-1] and older


def test_paused_subscriptions_are_counted_and_can_be_listed_alone(alice_client, alice, page_size):
    make_subscription(alice.account_id)  # active, and older than every paused one
    paused = [make_subscription(alice.account_id) for _ in range(3)]
    for subscription_id in paused:
        pause_subscription(subscription_id)
    _, _, html = listed(alice_client, "/dashboard/subscriptions")
    assert "3 paused subscriptions" in html
    shown, url = [], "/dashboard/subscriptions?status=paused"
    while url:
        rows, url, _ = listed(alice_client, url)
        shown += rows
    assert shown == paused[::-1]  # the filter is kept on the next page
