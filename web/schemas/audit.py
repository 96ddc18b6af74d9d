"""Audit log resources (CONTRACT 10.5): the query of ``GET /audit-log`` and its entries."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from webhooks.services.audit import ACTIONS, ActorKind, TargetKind

from .common import PageQuerySchema, Text, UTCMoment, UTCTimestamp, next_cursor_field

__all__ = ["AuditQuerySchema", "AuditEntrySchema", "AuditListSchema"]


class AuditQuerySchema(PageQuerySchema):
    """Query string of ``GET /audit-log``; filters combine with AND."""

    action = fields.String(validate=validate.OneOf(ACTIONS),
                           metadata={"description": "only entries of this action"})
    target_id = Text(validate=validate.Length(min=1, max=64),
                     metadata={"description": "only entries about this subscription, delivery, "
                                              "portal link or account"})
    since = UTCMoment(metadata={"description": "ISO 8601; entries at or after this moment "
                                               "(without an offset: UTC)"})
    until = UTCMoment(metadata={"description": "ISO 8601; entries before this moment"})


class ActorSchema(Schema):
    kind = fields.String(required=True, validate=validate.OneOf([k.value for k in ActorKind]),
                         metadata={"description": "`api_key`, `dashboard`, `portal` (a portal "
                                                  "link's session), `cli` (the operator's "
                                                  "command line) or `service` (a pause by the "
                                                  "failure rule or a 410)"})
    id = fields.String(required=True, allow_none=True,
                       metadata={"description": "the first 16 hex characters of the API key's, "
                                                "or the session's, SHA-256 (never usable as "
                                                "one); the operating system's user for `cli`; "
                                                "null for `service`"})


class TargetSchema(Schema):
    kind = fields.String(required=True, validate=validate.OneOf([k.value for k in TargetKind]))
    id = fields.String(required=True, metadata={
        "description": "its id (a portal link's: the first 16 hex characters of its stored "
                       "SHA-256, never its token)"})


class AuditEntrySchema(Schema):
    """One entry: who did what to what, and what it changed."""

    id = fields.String(required=True)
    at = UTCTimestamp(required=True)
    actor = fields.Nested(ActorSchema, required=True)
    action = fields.String(required=True, validate=validate.OneOf(ACTIONS))
    target = fields.Nested(TargetSchema, required=True)
    changes = fields.Dict(
        keys=fields.String(), values=fields.Dict(), required=True,
        metadata={"description": "for each field changed, `{\"from\", \"to\"}`; secrets, "
                                 "private keys, client secrets, custom header values and URL "
                                 "passwords are `\"[redacted]\"`"})


class AuditListSchema(Schema):
    data = fields.List(fields.Nested(AuditEntrySchema), required=True)
    next_cursor = next_cursor_field()
