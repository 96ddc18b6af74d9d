"""The prepared dump of a schema (web/schema_dump.py) answers what ``schema.dump`` answers."""

from __future__ import annotations

import datetime as dt
import inspect
import uuid
from types import SimpleNamespace

from marshmallow import Schema, fields, post_dump

from web import schemas
from web.schema_dump import dumper

T = dt.datetime(2026, 11, 28, 9, 30, 1, 123456, tzinfo=dt.timezone.utc)


def _attempt(number: int, **changes) -> SimpleNamespace:
    fields_ = dict(number=number, started_at=T, duration_ms=41, status_code=503,
                   error=None, error_kind=None, outcome="retry", response_excerpt="busy",
                   location=None)
    return SimpleNamespace(**{**fields_, **changes})


def _delivery(attempts: list, **changes) -> dict:
    resource = dict(id=str(uuid.uuid4()), event_id=str(uuid.uuid4()), event_type="email.sent",
                    subscription_id=str(uuid.uuid4()), status="pending", attempt_count=2,
                    next_attempt_at=T + dt.timedelta(minutes=5), replay_of=None,
                    ordering_key=None, created_at=T, attempts=attempts)
    return {**resource, **changes}


def test_a_page_of_deliveries_dumps_as_the_schema_dumps_it():
    """Objects (the attempts) and dicts (the deliveries), None values, a missing key, nested
    lists: the same JSON-ready data, key for key."""
    page = {"data": [
        _delivery([_attempt(1), _attempt(2, status_code=None, error="timed out",
                                         error_kind="timeout", response_excerpt=None)]),
        _delivery([], status="dead", next_attempt_at=None, replay_of=str(uuid.uuid4()),
                  ordering_key="order-7"),
        {key: value for key, value in _delivery([_attempt(1)]).items() if key != "ordering_key"},
    ], "next_cursor": None}
    schema = schemas.DeliveryListSchema()
    assert dumper(schema)(page) == schema.dump(page)
    assert dumper(schema) is not schema.dump  # prepared, not the fallback
    one = schemas.DeliverySchema()
    assert dumper(one)(page["data"][0]) == one.dump(page["data"][0])


def test_every_api_schema_dumps_an_empty_object_as_the_schema_does():
    """Missing keys are left out or take the field's dump default, as marshmallow does."""
    for name, kind in inspect.getmembers(schemas, inspect.isclass):
        if issubclass(kind, Schema) and kind is not Schema:
            schema = kind()
            assert dumper(schema)(SimpleNamespace()) == schema.dump(SimpleNamespace()), name


class _Hooked(Schema):
    name = fields.String()

    @post_dump
    def shout(self, data, **_kwargs):
        return {key: value.upper() for key, value in data.items()}


class _Computed(Schema):
    name = fields.String()
    length = fields.Method("name_length")

    def name_length(self, obj):
        return len(obj["name"])


class _Renamed(Schema):
    name = fields.String(data_key="label")
    size = fields.Integer(attribute="bytes", dump_default=0)
    many = fields.Nested(lambda: _Renamed(), many=True, allow_none=True)


def test_what_it_cannot_reproduce_is_dumped_by_marshmallow_itself():
    for schema in (_Hooked(), _Computed()):
        assert dumper(schema) == schema.dump
        assert dumper(schema)({"name": "ada"}) == schema.dump({"name": "ada"})


def test_data_keys_attributes_defaults_and_nested_lists_as_marshmallow():
    schema = _Renamed()
    value = {"name": "a", "many": [{"name": "b", "bytes": 3, "many": None}, {}]}
    assert dumper(schema) != schema.dump
    assert dumper(schema)(value) == schema.dump(value)
