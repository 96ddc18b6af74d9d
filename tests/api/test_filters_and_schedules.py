"""``filter`` and ``retry_schedule`` on the subscription API (CONTRACT 10.4): set on create
and PATCH, shown in answers (with the schedule in force), null back to the defaults, each
malformed filter refused with 400 ``invalid_filter`` naming where, and a filter applied to
what the account emits afterwards."""

from __future__ import annotations

import pytest

from webhooks.config import get_settings
from webhooks.emit import emit_event
from webhooks.events.samples import sample_data

BASE = "/api/webhooks/subscriptions"
URL = "https://hooks.example.com/in"
ANN_ONLY = {"data.to_email": {"$prefix": "ann@"}}


def _create(client, caller, **body):
    response = client.post(BASE, json={"url": URL, **body}, headers=caller.headers)
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def _error(response, status, code) -> str:
    assert response.status_code == status, response.get_json()
    error = response.get_json()["error"]
    assert error["code"] == code, error
    return error["message"]


def test_defaults_show_every_event_and_the_ladder_in_force(client, alice):
    created = _create(client, alice)
    assert created["filter"] is None and created["retry_schedule"] is None
    assert created["retry_schedule_in_force"] == list(get_settings().retry_delays)


def test_set_on_create_changed_by_patch_and_removed_by_null(client, alice):
    created = _create(client, alice, filter=ANN_ONLY, retry_schedule=[1, 1])
    assert created["filter"] == ANN_ONLY
    assert created["retry_schedule"] == created["retry_schedule_in_force"] == [1, 1]
    path = f"{BASE}/{created['id']}"
    changed = client.patch(path, json={"filter": {"type": "email.sent"},
                                       "retry_schedule": [10, 600, 3600]},
                           headers=alice.headers).get_json()
    assert changed["filter"] == {"type": "email.sent"}
    assert changed["retry_schedule_in_force"] == [10, 600, 3600]
    assert client.get(path, headers=alice.headers).get_json()["filter"] == {"type": "email.sent"}
    removed = client.patch(path, json={"filter": None, "retry_schedule": None},
                           headers=alice.headers).get_json()
    assert removed["filter"] is None and removed["retry_schedule"] is None
    assert removed["retry_schedule_in_force"] == list(get_settings().retry_delays)


@pytest.mark.parametrize("bad, where", [
    ([1], 'filter'),
    ({"data.amount": {"$gt": [1]}}, 'filter["data.amount"]["$gt"]'),
    ({"data.amount": {"$gt": 1, "$lt": 2}}, 'filter["data.amount"]'),
    ({"$or": [{"type": "a"}, {"data.x": {"$regex": "a"}}]}, 'filter["$or"][1]["data.x"]["$regex"]'),
    ({"body.x": 1}, 'filter["body.x"]'),
    ({"$not": {"$not": {"$not": {"$not": {"$not": {}}}}}},
     'filter["$not"]["$not"]["$not"]["$not"]["$not"]'),
    ({"data.x": {"$in": ["y" * 100] * 50}}, 'filter'),
])
def test_a_malformed_filter_is_refused_naming_where_on_create_and_patch(client, alice, bad,
                                                                        where):
    message = _error(client.post(BASE, json={"url": URL, "filter": bad},
                                 headers=alice.headers), 400, "invalid_filter")
    assert message.startswith(where + ": ")
    created = _create(client, alice, filter=ANN_ONLY)
    message = _error(client.patch(f"{BASE}/{created['id']}", json={"filter": bad},
                                  headers=alice.headers), 400, "invalid_filter")
    assert message.startswith(where + ": ")
    shown = client.get(f"{BASE}/{created['id']}", headers=alice.headers).get_json()
    assert shown["filter"] == ANN_ONLY  # a refused PATCH changes nothing


@pytest.mark.parametrize("bad", [[], [0], [604801], [1.5], ["1"], [True], [1] * 21, 5])
def test_a_malformed_retry_schedule_is_refused(client, alice, bad):
    response = client.post(BASE, json={"url": URL, "retry_schedule": bad}, headers=alice.headers)
    message = _error(response, 400, "validation_error")
    assert "retry_schedule" in message


def test_the_filter_decides_what_the_subscription_receives(client, alice, broker):
    ann = _create(client, alice, filter=ANN_ONLY)["id"]
    every = _create(client, alice)["id"]
    data = {**sample_data("email.sent"), "to_email": "bob@example.com"}
    emitted = emit_event(alice.account_id, "email.sent", data)
    listed = client.get(f"/api/webhooks/deliveries?subscription_id={ann}",
                        headers=alice.headers).get_json()["data"]
    assert listed == [] and len(emitted.delivery_ids) == 1
    broker.settle()
    assert [delivery_id for delivery_id, _ in broker.published] == list(emitted.delivery_ids)
    assert every  # the unfiltered one got the one delivery
