"""Publisher API resources (CONTRACT 10.7): accounts as a publisher sees them, and the
bodies and answers of the event routes.

The event bodies are documented here but not loaded with marshmallow: the
routes hand them to ``emit_event``/``emit_events`` as they are, so that every
refusal is theirs, with their message (web/api/publisher.py).
"""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from webhooks.events.catalogue import EVENT_TYPE_NAMES

from .common import PageQuerySchema, Text, UTCTimestamp, next_cursor_field

__all__ = ["AccountCreateSchema", "AccountCreatedSchema", "AccountSchema",
           "AccountSummarySchema", "AccountListSchema", "AccountQuerySchema", "AccountKeySchema",
           "EventInSchema", "EventAcceptedSchema", "EventBatchSchema", "EventBatchAcceptedSchema"]

NAME_LENGTH = validate.Length(min=1, max=200)


class AccountCreateSchema(Schema):
    """Body of ``POST /accounts``."""

    name = Text(required=True, validate=NAME_LENGTH,
                metadata={"description": "the customer's name, 1 to 200 characters"})


class AccountSummarySchema(Schema):
    """An account in a list."""

    id = fields.String(required=True, metadata={"format": "uuid"})
    name = fields.String(required=True)
    created_at = UTCTimestamp(required=True)


class AccountCreatedSchema(AccountSummarySchema):
    """Answer of ``POST /accounts``: the account with its API key, shown only this once."""

    api_key = fields.String(required=True, metadata={
        "description": "the account's API key (`whk_…`): hand it to the customer's systems; "
                       "it is shown only this once"})


class AccountSchema(AccountSummarySchema):
    """Answer of ``GET /accounts/<id>``."""

    subscriptions = fields.Integer(required=True, metadata={
        "description": "how many subscriptions the account has"})


class AccountListSchema(Schema):
    data = fields.List(fields.Nested(AccountSummarySchema), required=True)
    next_cursor = next_cursor_field()


class AccountQuerySchema(PageQuerySchema):
    """Query string of ``GET /accounts``: ``limit``, ``cursor``."""


class AccountKeySchema(Schema):
    """Answer of ``POST /accounts/<id>/rotate-key``."""

    id = fields.String(required=True, metadata={"format": "uuid"})
    api_key = fields.String(required=True, metadata={
        "description": "the new API key; the old one stopped working, and the account's "
                       "dashboard sessions ended"})


class EventInSchema(Schema):
    """One event, as ``emit_event`` takes it."""

    type = fields.String(required=True, validate=validate.OneOf(EVENT_TYPE_NAMES))
    data = fields.Dict(required=True, metadata={
        "description": "the type's data (GET /api/webhooks/event-types gives its JSON Schema)"})
    idempotency_key = fields.String(required=False, metadata={
        "description": "the same key again (a retried request) answers the first event and "
                       "creates nothing"})
    ordering_key = fields.String(required=False, metadata={
        "description": "1 to 200 printable ASCII characters: each subscription receives the "
                       "account's events with this key one at a time, in emit order"})


class EventAcceptedSchema(Schema):
    """Answer of ``POST /accounts/<id>/events``."""

    event_id = fields.String(required=True, metadata={"format": "uuid"})
    deliveries = fields.Integer(required=True, metadata={
        "description": "deliveries created (0 for a repeated idempotency key)"})


class EventBatchSchema(Schema):
    """Body of ``POST /accounts/<id>/events/batch``."""

    events = fields.List(fields.Nested(EventInSchema), required=True,
                         validate=validate.Length(min=1, max=100))


class EventBatchAcceptedSchema(Schema):
    """Answer of ``POST /accounts/<id>/events/batch``: the event ids, in the order given."""

    event_ids = fields.List(fields.String(metadata={"format": "uuid"}), required=True)
