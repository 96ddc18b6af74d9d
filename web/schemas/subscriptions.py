"""Subscription resources: the request bodies of create and update, and the responses.

A subscription is shown without its ``secret`` except where docs/api.md says
so (create, get one, rotate-secret): lists and other answers leave it out.
"""

from __future__ import annotations

from marshmallow import Schema, ValidationError, fields, validate

from webhooks.catalogue import EVENT_TYPE_NAMES
from webhooks.models import SubscriptionStatus

from ..targets import MAX_URL_LENGTH, shown_url, url_problem
from .common import PageQuerySchema, Text, UTCTimestamp, next_cursor_field

__all__ = [
    "MAX_DESCRIPTION_LENGTH",
    "SubscriptionCreateSchema",
    "SubscriptionUpdateSchema",
    "SubscriptionSchema",
    "SubscriptionWithSecretSchema",
    "SubscriptionListSchema",
    "TestSentSchema",
]

MAX_DESCRIPTION_LENGTH = 1000


class TargetURL(Text):
    """The endpoint: http or https, with a host, at most 2,048 characters."""

    def __init__(self, **kwargs):
        kwargs.setdefault(
            "metadata",
            {"format": "uri", "minLength": 1, "maxLength": MAX_URL_LENGTH,
             "description": "http or https URL with a host; at most 2,048 characters"},
        )
        super().__init__(**kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        value = super()._deserialize(value, attr, data, **kwargs)
        problem = url_problem(value)
        if problem:
            raise ValidationError(problem)
        return value


class ShownURL(fields.String):
    """The endpoint as answers show it: a password in it is masked (``user:***@host``)."""

    def _serialize(self, value, attr, obj, **kwargs):
        return None if value is None else shown_url(value)


def _no_duplicates(names: list) -> None:
    if len(set(names)) != len(names):
        raise ValidationError("Must not name an event type twice.")


def _event_types(**kwargs) -> fields.List:
    """null (every type) or a non-empty list of distinct catalogue names.

    Whether each name is in the catalogue is checked by the view, which
    answers ``unknown_event_type``; the enum here documents the names.
    """
    item = Text(metadata={"enum": list(EVENT_TYPE_NAMES)})
    return fields.List(
        item,
        allow_none=True,
        validate=[validate.Length(min=1), _no_duplicates],
        metadata={
            "uniqueItems": True,
            "maxItems": len(EVENT_TYPE_NAMES),
            "description": "event types to receive; null (or left out on create) means all",
        },
        **kwargs,
    )


def _description(**kwargs) -> Text:
    return Text(allow_none=True, validate=validate.Length(max=MAX_DESCRIPTION_LENGTH), **kwargs)


class SubscriptionCreateSchema(Schema):
    """Body of ``POST /subscriptions``; unknown fields are refused."""

    url = TargetURL(required=True)
    event_types = _event_types(load_default=None)
    description = _description(load_default=None)


class SubscriptionUpdateSchema(Schema):
    """Body of ``PATCH /subscriptions/<id>``: only the fields given change."""

    url = TargetURL()
    event_types = _event_types()
    description = _description()


class SubscriptionSchema(Schema):
    """A subscription as the API shows it (docs/api.md), without its secret."""

    id = fields.UUID(required=True)
    url = ShownURL(
        required=True,
        metadata={"description": "the endpoint; a password in it is shown as `***` (sending it "
                                 "back unchanged in a PATCH keeps the stored one)"},
    )
    event_types = fields.List(fields.String(), required=True, allow_none=True)
    description = fields.String(required=True, allow_none=True)
    status = fields.String(
        required=True, validate=validate.OneOf([status.value for status in SubscriptionStatus])
    )
    consecutive_failures = fields.Integer(required=True)
    paused_at = UTCTimestamp(required=True, allow_none=True)
    created_at = UTCTimestamp(required=True)


class SubscriptionWithSecretSchema(SubscriptionSchema):
    """A subscription with its signing ``secret``: the HMAC key, used as UTF-8."""

    secret = fields.String(required=True)


class SubscriptionQuerySchema(PageQuerySchema):
    """Query string of ``GET /subscriptions``: ``limit`` and ``cursor``."""


class SubscriptionListSchema(Schema):
    data = fields.List(fields.Nested(SubscriptionSchema), required=True)
    next_cursor = next_cursor_field()


class TestSentSchema(Schema):
    """Answer of ``POST /subscriptions/<id>/test``: the test.ping event and its delivery."""

    __test__ = False  # not a pytest test class, despite the name
    event_id = fields.UUID(required=True)
    delivery_id = fields.UUID(required=True)
