"""Sample payloads and the event-type catalogue: public, generated, valid."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from webhooks.events.catalogue import CATALOGUE, EVENT_TYPE_NAMES, validate_data

SAMPLES = "/api/webhooks/events/samples"
ENVELOPE_KEYS = ["version", "id", "type", "mode", "created_at", "data"]  # SPEC 2.2, in order


def _check_envelope(envelope: dict, event_type: str) -> None:
    assert list(envelope) == ENVELOPE_KEYS
    assert envelope["type"] == event_type
    assert envelope["version"] == "2026-07-30"
    assert envelope["mode"] == "live"
    assert str(uuid.UUID(envelope["id"])) == envelope["id"]
    assert envelope["created_at"].endswith("Z")
    created = dt.datetime.fromisoformat(envelope["created_at"])
    assert abs(dt.datetime.now(dt.timezone.utc) - created) < dt.timedelta(minutes=1)
    assert validate_data(event_type, envelope["data"]) == {}


def test_all_samples_in_catalogue_order_without_a_key(client):
    response = client.get(SAMPLES)
    assert response.status_code == 200
    body = response.get_json()
    assert list(body) == ["samples"]
    assert [s["type"] for s in body["samples"]] == list(EVENT_TYPE_NAMES)
    assert len(body["samples"]) == 15
    for envelope in body["samples"]:
        _check_envelope(envelope, envelope["type"])
    assert len({s["id"] for s in body["samples"]}) == 15


@pytest.mark.parametrize("event_type", EVENT_TYPE_NAMES)
def test_one_sample_is_the_envelope_itself(client, event_type):
    response = client.get(SAMPLES, query_string={"type": event_type})
    assert response.status_code == 200
    _check_envelope(response.get_json(), event_type)


def test_samples_are_fresh_on_every_call(client):
    first = client.get(SAMPLES, query_string={"type": "email.sent"}).get_json()
    second = client.get(SAMPLES, query_string={"type": "email.sent"}).get_json()
    assert first["id"] != second["id"]


def test_the_version_comes_from_the_settings(client, monkeypatch):
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_VERSION", "2027-01-15")
    reset_settings_cache()
    assert client.get(SAMPLES, query_string={"type": "test.ping"}).get_json()["version"] == (
        "2027-01-15"
    )


@pytest.mark.parametrize("bad", ["email.exploded", "", "EMAIL.SENT", "reply.received "])
def test_an_unknown_type_is_400_unknown_event_type(client, bad):
    response = client.get(SAMPLES, query_string={"type": bad})
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert error["code"] == "unknown_event_type"
    assert error["message"]


def test_a_key_is_accepted_but_not_needed(client, alice):
    assert client.get(SAMPLES, headers=alice.headers).status_code == 200
    assert client.get(SAMPLES, headers={"Authorization": "Bearer nonsense"}).status_code == 200


def test_event_types_list_the_catalogue(client):
    response = client.get("/api/webhooks/event-types")
    assert response.status_code == 200
    body = response.get_json()
    assert list(body) == ["event_types"]
    assert [{"type": item["type"], "description": item["description"]}
            for item in body["event_types"]] == [
        {"type": t.name, "description": t.description} for t in CATALOGUE
    ]
    assert all(set(item) == {"type", "description", "schema"} for item in body["event_types"])
    assert len(body["event_types"]) == 15


def test_each_event_type_carries_its_json_schema_and_every_sample_validates(client):
    """CONTRACT 10.4: `schema` on each item of GET /event-types, draft 2020-12; every sample of
    GET /events/samples validates against its type's; the OpenAPI document lists them."""
    from jsonschema import Draft202012Validator

    listed = client.get("/api/webhooks/event-types").get_json()["event_types"]
    schemas = {item["type"]: item["schema"] for item in listed}
    assert len(schemas) == 15
    for schema in schemas.values():
        Draft202012Validator.check_schema(schema)
    for sample in client.get("/api/webhooks/events/samples").get_json()["samples"]:
        Draft202012Validator(schemas[sample["type"]]).validate(sample["data"])
    document = client.get("/api/webhooks/openapi.json").get_json()
    assert document["x-event-schemas"] == schemas
