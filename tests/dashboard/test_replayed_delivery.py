"""A delivery page after a replay: it points to the replay, and offers no Replay of its own."""

from __future__ import annotations

import pytest

from .helpers import post_form
from .rows import dead_delivery, make_subscription, set_delivery

pytestmark = pytest.mark.database


def text(response) -> str:
    return response.get_data(as_text=True).replace("<wbr>", "")


@pytest.mark.parametrize("status", ["dead", "failed"])
def test_a_delivery_already_replayed_points_to_its_replay_instead_of_offering_replay(
        alice_client, alice, monkeypatch, status):
    from webhooks.broker import outbox

    monkeypatch.setattr(outbox, "publish", lambda items, timeout=None: True)
    subscription_id = make_subscription(alice.account_id)
    original = dead_delivery(alice.account_id, subscription_id)
    set_delivery(original, status=status)
    page = f"/dashboard/deliveries/{original}"
    before = text(alice_client.get(page))
    assert "Replay</button>" in before and "Fix the endpoint, then replay it." in before
    assert "attention danger" in before

    replay_id = post_form(alice_client, page, f"{page}/replay").headers["Location"].rsplit("/", 1)[1]
    after = text(alice_client.get(page))
    assert "Replay</button>" not in after and "Fix the endpoint" not in after
    assert "attention danger" not in after
    assert "Already replayed as" in after and f'/dashboard/deliveries/{replay_id}"' in after
    # The replay itself is pending, so it offers no Replay either; once it fails, it does.
    set_delivery(replay_id, status="dead", attempt_count=6)
    assert "Replay</button>" in text(alice_client.get(f"/dashboard/deliveries/{replay_id}"))


def test_replay_from_a_stale_page_is_refused_naming_the_earlier_replay(alice_client, alice,
                                                                       monkeypatch):
    """The page hides the button once replayed, but a tab opened before (or a second click)
    still posts: the server refuses it too (issue 22)."""
    from sqlalchemy import select

    from webhooks.broker import outbox
    from webhooks.storage.db import session_scope
    from webhooks.storage.models import Delivery

    monkeypatch.setattr(outbox, "submit", lambda items: None)
    subscription_id = make_subscription(alice.account_id)
    original = dead_delivery(alice.account_id, subscription_id)
    page = f"/dashboard/deliveries/{original}"
    first = post_form(alice_client, page, f"{page}/replay")
    replay_id = first.headers["Location"].rsplit("/", 1)[1]
    again = post_form(alice_client, page, f"{page}/replay", follow_redirects=True)
    shown = text(again)
    assert "Not replayed: this delivery was replayed before, as" in shown
    assert replay_id in shown
    with session_scope() as session:
        replays = session.scalars(select(Delivery.id).where(Delivery.replay_of == original)).all()
    assert replays == [replay_id]
