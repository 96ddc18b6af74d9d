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
