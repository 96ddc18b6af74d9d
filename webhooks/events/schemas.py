"""Marshmallow schemas for the event envelope and the ``data`` of each event type.

The service delivers the emitter's ``data`` as it was passed in: it validates,
and rewrites nothing but the suffix of a timestamp given with ``Z``. So these
schemas are strict, and every field loads to the very value it was given
(``schema.load(data) == data``), timestamps given with ``+00:00`` included:

- unknown fields are refused, and every field must be present; a nullable
  field is present with ``null``, so each type has one shape on the wire;
- strings must be ``str``; integers real ``int`` (not ``bool``, ``1.0``, ``"1"``);
  numbers ``int`` or finite ``float`` (not ``bool``, NaN, Infinity); booleans
  real ``bool`` (not ``"true"``, ``1``); lists real ``list``;
- UUIDs are canonical: lowercase, hyphenated, 36 characters;
- data timestamps are ISO 8601 in UTC, given with the ``Z`` or the ``+00:00``
  suffix and written with ``+00:00`` (``2026-07-30T12:00:00+00:00``, optional
  fraction of up to 6 digits); the envelope's ``created_at`` uses the ``Z``
  suffix instead (docs/events.md, "Timestamps").

Fields and their bounds are documented per type in ``docs/events.md``.
"""

from __future__ import annotations

from datetime import date

from marshmallow import RAISE, Schema, ValidationError, fields, validate, validates_schema

from webhooks.events.envelope import MODE

from webhooks.events.fields import (  # noqa: F401 - the field types are re-exported for callers
    StrictString, StrictInteger, StrictNumber, StrictBoolean, StrictList, CanonicalUUID, Timestamp, NAME_MAX, SUBJECT_MAX, URL_MAX, USER_AGENT_MAX, DIAGNOSTIC_MAX, DNS_VALUE_MAX, MAX_ITEMS, text, pattern, label, one_of, email, url, phone, hostname, integer, unique, DATE_RE, CURRENCY_RE,
)

__all__ = [
    "StrictString", "StrictInteger", "StrictNumber", "StrictBoolean", "StrictList",
    "CanonicalUUID", "Timestamp",
    "ReplyReceivedSchema", "EmailSentSchema", "EmailOpenedSchema", "EmailClickedSchema",
    "EmailBouncedSchema", "ConversionRecordedSchema", "SuppressionCreatedSchema",
    "DomainVerifiedSchema", "DomainFailedSchema", "DomainDriftSchema", "DnsRecordSchema",
    "MailboxConnectedSchema", "ChatappReceivedSchema", "SmsReceivedSchema",
    "AutomationFiredSchema", "TestPingSchema", "EnvelopeSchema", "DATA_SCHEMAS",
]

class _DataSchema(Schema):
    """Base of every schema here: unknown fields are an error, never dropped."""

    class Meta:
        unknown = RAISE


class ReplyReceivedSchema(_DataSchema):
    """reply.received (docs/events.md): a reply arrived on any channel and was classified."""

    reply_id = CanonicalUUID()
    channel = one_of("email", "chat", "sms", "webhook")
    from_email = email(allow_none=True)
    from_name = text(NAME_MAX)
    phone = phone(allow_none=True)
    subject = text(SUBJECT_MAX)
    party_type = label()
    category = label()
    intent = label()
    sentiment = one_of("positive", "neutral", "negative", "mixed")
    urgency = one_of("low", "medium", "high", "critical")
    intensity = integer(0, 10)
    priority_score = integer(0, 100)
    risk_flags = StrictList(label(), validate=[validate.Length(max=MAX_ITEMS), unique])
    needs_review = StrictBoolean()
    confidence = StrictNumber(validate=validate.Range(min=0, max=1))
    received_at = Timestamp()
    contact_id = CanonicalUUID()

    # _check_channel's rule as JSON Schema (json_schemas.py): keep the two together.
    json_schema_rules = [
        {"if": {"properties": {"channel": {"const": "email"}}, "required": ["channel"]},
         "then": {"properties": {"from_email": {"type": "string"}, "phone": {"type": "null"}}}},
        {"if": {"properties": {"channel": {"enum": ["sms", "chat"]}}, "required": ["channel"]},
         "then": {"properties": {"phone": {"type": "string"}}}},
    ]

    @validates_schema
    def _check_channel(self, data, **kwargs):
        # The sender's address follows from the channel: an email reply has an
        # address and no phone (docs/events.md); SMS and chat replies come from a number.
        if data["channel"] == "email":
            if data["from_email"] is None:
                raise ValidationError("Required when channel is 'email'.", "from_email")
            if data["phone"] is not None:
                raise ValidationError("Must be null when channel is 'email'.", "phone")
        elif data["channel"] in ("sms", "chat") and data["phone"] is None:
            raise ValidationError("Required when channel is 'sms' or 'chat'.", "phone")


class EmailSentSchema(_DataSchema):
    message_id = CanonicalUUID()
    contact_id = CanonicalUUID()
    from_email = email()
    to_email = email()
    subject = text(SUBJECT_MAX)
    sent_at = Timestamp()


class EmailOpenedSchema(_DataSchema):
    message_id = CanonicalUUID()
    contact_id = CanonicalUUID()
    user_agent = text(USER_AGENT_MAX, allow_none=True)  # lets subscribers spot image pre-fetch
    opened_at = Timestamp()


class EmailClickedSchema(_DataSchema):
    message_id = CanonicalUUID()
    contact_id = CanonicalUUID()
    url = url()
    user_agent = text(USER_AGENT_MAX, allow_none=True)
    clicked_at = Timestamp()


class EmailBouncedSchema(_DataSchema):
    message_id = CanonicalUUID()
    contact_id = CanonicalUUID()
    to_email = email()
    bounce_type = one_of("hard", "soft")
    smtp_code = integer(400, 599, allow_none=True)  # null: no SMTP reply (e.g. DNS failure)
    diagnostic = text(DIAGNOSTIC_MAX)
    bounced_at = Timestamp()


class ConversionRecordedSchema(_DataSchema):
    conversion_id = CanonicalUUID()
    contact_id = CanonicalUUID(allow_none=True)  # null: not matched to a contact
    message_id = CanonicalUUID(allow_none=True)  # null: no email to attribute it to
    name = text(NAME_MAX, min_length=1)
    external_id = text(255, min_length=1, allow_none=True)
    # Money as an integer of minor units (cents), never a float.
    amount_minor = integer(0, 10**15, allow_none=True)
    currency = pattern(CURRENCY_RE, 3, "Must be an ISO 4217 code such as USD.", allow_none=True)
    converted_at = Timestamp()

    # _check_amount's rule as JSON Schema (json_schemas.py): keep the two together.
    json_schema_rules = [
        {"if": {"properties": {"amount_minor": {"type": "null"}}, "required": ["amount_minor"]},
         "then": {"properties": {"currency": {"type": "null"}}},
         "else": {"properties": {"currency": {"type": "string"}}}},
    ]

    @validates_schema
    def _check_amount(self, data, **kwargs):
        # An amount without its currency (or the reverse) cannot be interpreted.
        if (data["amount_minor"] is None) != (data["currency"] is None):
            field = "currency" if data["currency"] is None else "amount_minor"
            raise ValidationError("amount_minor and currency are both set or both null.", field)


class SuppressionCreatedSchema(_DataSchema):
    email = email()
    reason = one_of("hard_bounce", "complaint", "unsubscribe", "manual")
    contact_id = CanonicalUUID(allow_none=True)
    message_id = CanonicalUUID(allow_none=True)  # the email that caused it, if any
    suppressed_at = Timestamp()


class DnsRecordSchema(_DataSchema):
    """One DNS record of a sending domain: what it must hold and what it holds."""

    purpose = one_of("spf", "dkim", "dmarc", "return_path", "tracking")
    type = one_of("TXT", "CNAME", "MX")
    name = text(253, min_length=1)  # not a hostname check: DKIM names contain '_'
    expected = text(DNS_VALUE_MAX, min_length=1)
    found = text(DNS_VALUE_MAX, allow_none=True)  # null: the record is missing


def _records() -> StrictList:
    return StrictList(
        fields.Nested(DnsRecordSchema), validate=validate.Length(min=1, max=MAX_ITEMS)
    )


class DomainVerifiedSchema(_DataSchema):
    domain_id = CanonicalUUID()
    domain = hostname()
    verified_at = Timestamp()


class DomainFailedSchema(_DataSchema):
    domain_id = CanonicalUUID()
    domain = hostname()
    records = _records()  # the records that no longer verify
    failed_at = Timestamp()


class DomainDriftSchema(_DataSchema):
    domain_id = CanonicalUUID()
    domain = hostname()
    records = _records()  # the records whose value changed
    detected_at = Timestamp()


class MailboxConnectedSchema(_DataSchema):
    mailbox_id = CanonicalUUID()
    email = email()
    provider = one_of("google", "microsoft", "imap")
    connected_at = Timestamp()


class ChatappReceivedSchema(_DataSchema):
    message_id = CanonicalUUID()
    reply_id = CanonicalUUID()  # the reply.received fired for the same message
    contact_id = CanonicalUUID()
    from_phone = phone()
    from_name = text(NAME_MAX)
    to_phone = phone()
    text = text(4096)
    received_at = Timestamp()


class SmsReceivedSchema(_DataSchema):
    message_id = CanonicalUUID()
    reply_id = CanonicalUUID()
    contact_id = CanonicalUUID()
    from_phone = phone()
    to_phone = phone()
    text = text(1600)  # 10 concatenated segments
    received_at = Timestamp()


class AutomationFiredSchema(_DataSchema):
    automation_id = CanonicalUUID()
    automation_name = text(NAME_MAX, min_length=1)
    action = label()
    contact_id = CanonicalUUID(allow_none=True)  # null: the action is not about one contact
    fired_at = Timestamp()


class TestPingSchema(_DataSchema):
    __test__ = False  # not a pytest test class, despite the name
    message = text(NAME_MAX, min_length=1)
    subscription_id = CanonicalUUID()


#: Each event type's data schema, in the catalogue's order (docs/events.md).
DATA_SCHEMAS: dict[str, type[Schema]] = {
    "reply.received": ReplyReceivedSchema,
    "email.sent": EmailSentSchema,
    "email.opened": EmailOpenedSchema,
    "email.clicked": EmailClickedSchema,
    "email.bounced": EmailBouncedSchema,
    "conversion.recorded": ConversionRecordedSchema,
    "suppression.created": SuppressionCreatedSchema,
    "domain.verified": DomainVerifiedSchema,
    "domain.failed": DomainFailedSchema,
    "domain.drift": DomainDriftSchema,
    "mailbox.connected": MailboxConnectedSchema,
    "chatapp.received": ChatappReceivedSchema,
    "sms.received": SmsReceivedSchema,
    "automation.fired": AutomationFiredSchema,
    "test.ping": TestPingSchema,
}


def _calendar_date(value: str) -> None:
    try:
        date.fromisoformat(value)
    except ValueError as error:
        raise ValidationError("Not a valid calendar date.") from error


class EnvelopeSchema(_DataSchema):
    """The envelope (docs/events.md): the request body of every delivery; ``data`` is checked by type.

    The one description of the envelope: the OpenAPI document's per-type
    envelopes (web/schemas/events.py) are subclasses that narrow ``type`` and
    nest ``data``, so a field added here appears there too.
    """

    version = StrictString(
        validate=[validate.Regexp(DATE_RE, error="Must be YYYY-MM-DD."), _calendar_date],
        metadata={"description": "YYYY-MM-DD; equals the version header"},
    )
    id = CanonicalUUID()
    type = one_of(*DATA_SCHEMAS)
    mode = one_of(MODE)  # the only mode the service sends (docs/events.md)
    created_at = Timestamp(
        suffix="Z", accepts=("Z",),
        metadata={"description": "UTC, ISO 8601, milliseconds, Z suffix"},
    )
    data = fields.Dict(required=True)

    @validates_schema
    def _check_data(self, envelope, **kwargs):
        errors = DATA_SCHEMAS[envelope["type"]]().validate(envelope["data"])
        if errors:
            raise ValidationError(errors, "data")
