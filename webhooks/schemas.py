"""Marshmallow schemas for the event envelope and the ``data`` of each event type.

The service delivers the emitter's ``data`` exactly as it was passed in: it
validates, it never rewrites. So these schemas are strict, and every field
loads to the very value it was given (``schema.load(data) == data``):

- unknown fields are refused, and every field must be present; a nullable
  field is present with ``null``, so each type has one shape on the wire;
- strings must be ``str``; integers real ``int`` (not ``bool``, ``1.0``, ``"1"``);
  numbers ``int`` or finite ``float`` (not ``bool``, NaN, Infinity); booleans
  real ``bool`` (not ``"true"``, ``1``); lists real ``list``;
- UUIDs are canonical: lowercase, hyphenated, 36 characters;
- data timestamps are ISO 8601 in UTC with the ``+00:00`` suffix
  (``2026-07-30T12:00:00+00:00``, optional fraction of up to 6 digits);
  the envelope's ``created_at`` uses the ``Z`` suffix instead (docs/events.md).

Fields and their bounds are documented per type in ``docs/events.md``.
"""

from __future__ import annotations

import re
from datetime import date, datetime

from marshmallow import RAISE, Schema, ValidationError, fields, validate, validates_schema

__all__ = [
    "StrictString", "StrictInteger", "StrictNumber", "StrictBoolean", "StrictList",
    "CanonicalUUID", "Timestamp",
    "ReplyReceivedSchema", "EmailSentSchema", "EmailOpenedSchema", "EmailClickedSchema",
    "EmailBouncedSchema", "ConversionRecordedSchema", "SuppressionCreatedSchema",
    "DomainVerifiedSchema", "DomainFailedSchema", "DomainDriftSchema", "DnsRecordSchema",
    "MailboxConnectedSchema", "ChatappReceivedSchema", "SmsReceivedSchema",
    "AutomationFiredSchema", "TestPingSchema", "EnvelopeSchema", "DATA_SCHEMAS",
]

# Bounds shared by several types; documented in docs/events.md.
NAME_MAX = 200        # person, automation and conversion names
SUBJECT_MAX = 998     # RFC 5322 line-length limit, the longest a subject header can be
EMAIL_MAX = 254       # RFC 5321 path limit
LABEL_MAX = 64        # classifier labels and other snake_case tokens
URL_MAX = 2048
USER_AGENT_MAX = 512
DIAGNOSTIC_MAX = 1000
DNS_VALUE_MAX = 4096  # long enough for a 4096-bit DKIM key
MAX_ITEMS = 20        # risk_flags, DNS records

_UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# [0-9], not \d: \d also matches non-ASCII digits, which no ISO 8601 parser should see.
_TIMESTAMP_RE = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"  # date T time
    r"(\.[0-9]{1,6})?"                                       # fraction, microseconds at most
    r"(Z|[+-][0-9]{2}:[0-9]{2})"                             # the offset, never left out
)
# validate.Regexp only anchors at the start, hence the \Z on each pattern it uses.
_DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")
_LABEL_RE = re.compile(r"[a-z][a-z0-9_]*\Z")
_PHONE_RE = re.compile(r"\+[1-9][0-9]{6,14}\Z")  # E.164
_CURRENCY_RE = re.compile(r"[A-Z]{3}\Z")         # ISO 4217 alphabetic code
_HOSTNAME_RE = re.compile(
    r"(?=.{4,253}\Z)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?\Z"
)


class _Required:
    """Mixin: a field is required unless told otherwise (one shape per type)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("required", True)
        super().__init__(*args, **kwargs)


class StrictString(_Required, fields.String):
    """A ``str``, nothing else (marshmallow's String also decodes ``bytes``)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, str):
            raise self.make_error("invalid")
        return value


class StrictInteger(_Required, fields.Integer):
    """A real ``int``: ``Integer(strict=True)`` still lets ``True`` through."""

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.make_error("invalid")
        return value


class StrictNumber(_Required, fields.Float):
    """An ``int`` or finite ``float``, returned unchanged (``1`` stays ``1``)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.make_error("invalid")
        if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
            raise self.make_error("special")
        return value


class StrictBoolean(_Required, fields.Boolean):
    """``true`` or ``false``; not ``"true"``, ``1`` or ``"yes"``."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, bool):
            raise self.make_error("invalid")
        return value


class StrictList(_Required, fields.List):
    """A JSON array (a ``list``), not any other iterable."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, list):
            raise self.make_error("invalid")
        return super()._deserialize(value, attr, data, **kwargs)


class CanonicalUUID(StrictString):
    """A UUID string in canonical form: lowercase, hyphenated, 36 characters."""

    default_error_messages = {"invalid_uuid": "Not a canonical UUID (lowercase, hyphenated)."}

    def _deserialize(self, value, attr, data, **kwargs):
        value = super()._deserialize(value, attr, data, **kwargs)
        if not _UUID_RE.fullmatch(value):
            raise self.make_error("invalid_uuid")
        return value


class Timestamp(StrictString):
    """An ISO 8601 date-time string with an explicit offset that ends in ``suffix``.

    ``suffix="+00:00"`` for the data of every type; ``"Z"`` for the envelope.
    """

    default_error_messages = {
        "invalid_timestamp": "Not a valid ISO 8601 timestamp with a UTC offset.",
        "wrong_suffix": "Timestamp must be in UTC and end with '{suffix}'.",
    }

    def __init__(self, *, suffix: str = "+00:00", **kwargs):
        super().__init__(**kwargs)
        self.suffix = suffix

    def _deserialize(self, value, attr, data, **kwargs):
        value = super()._deserialize(value, attr, data, **kwargs)
        if not _TIMESTAMP_RE.fullmatch(value):
            raise self.make_error("invalid_timestamp")
        try:
            datetime.fromisoformat(value)  # catches month 13, 25:00, Feb 30 ...
        except ValueError as error:
            raise self.make_error("invalid_timestamp") from error
        if not value.endswith(self.suffix):
            raise self.make_error("wrong_suffix", suffix=self.suffix)
        return value


# Small constructors, so each schema line says only what is special about a field.

def _text(max_length: int, *, min_length: int = 0, **kw) -> StrictString:
    return StrictString(validate=validate.Length(min=min_length, max=max_length), **kw)


def _pattern(regex: re.Pattern, max_length: int, message: str, **kw) -> StrictString:
    return StrictString(
        validate=[validate.Length(max=max_length), validate.Regexp(regex, error=message)], **kw
    )


def _label(**kw) -> StrictString:
    return _pattern(_LABEL_RE, LABEL_MAX, "Must be a lowercase snake_case label.", **kw)


def _one_of(*choices: str, **kw) -> StrictString:
    return StrictString(validate=validate.OneOf(choices), **kw)


def _email(**kw) -> StrictString:
    return StrictString(validate=[validate.Length(max=EMAIL_MAX), validate.Email()], **kw)


def _phone(**kw) -> StrictString:
    return _pattern(_PHONE_RE, 16, "Must be an E.164 phone number such as +14155550123.", **kw)


def _hostname(**kw) -> StrictString:
    return _pattern(_HOSTNAME_RE, 253, "Must be a lowercase domain name.", **kw)


def _integer(low: int, high: int, **kw) -> StrictInteger:
    return StrictInteger(validate=validate.Range(min=low, max=high), **kw)


def _unique(items: list) -> None:
    if len(set(items)) != len(items):
        raise ValidationError("Items must be unique.")


class _DataSchema(Schema):
    """Base of every schema here: unknown fields are an error, never dropped."""

    class Meta:
        unknown = RAISE


class ReplyReceivedSchema(_DataSchema):
    """reply.received (docs/events.md): a reply arrived on any channel and was classified."""

    reply_id = CanonicalUUID()
    channel = _one_of("email", "chat", "sms", "webhook")
    from_email = _email(allow_none=True)
    from_name = _text(NAME_MAX)
    phone = _phone(allow_none=True)
    subject = _text(SUBJECT_MAX)
    party_type = _label()
    category = _label()
    intent = _label()
    sentiment = _one_of("positive", "neutral", "negative", "mixed")
    urgency = _one_of("low", "medium", "high", "critical")
    intensity = _integer(0, 10)
    priority_score = _integer(0, 100)
    risk_flags = StrictList(_label(), validate=[validate.Length(max=MAX_ITEMS), _unique])
    needs_review = StrictBoolean()
    confidence = StrictNumber(validate=validate.Range(min=0, max=1))
    received_at = Timestamp()
    contact_id = CanonicalUUID()

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
    from_email = _email()
    to_email = _email()
    subject = _text(SUBJECT_MAX)
    sent_at = Timestamp()


class EmailOpenedSchema(_DataSchema):
    message_id = CanonicalUUID()
    contact_id = CanonicalUUID()
    user_agent = _text(USER_AGENT_MAX, allow_none=True)  # lets subscribers spot image pre-fetch
    opened_at = Timestamp()


class EmailClickedSchema(_DataSchema):
    message_id = CanonicalUUID()
    contact_id = CanonicalUUID()
    url = StrictString(
        validate=[validate.Length(max=URL_MAX), validate.URL(schemes={"http", "https"})]
    )
    user_agent = _text(USER_AGENT_MAX, allow_none=True)
    clicked_at = Timestamp()


class EmailBouncedSchema(_DataSchema):
    message_id = CanonicalUUID()
    contact_id = CanonicalUUID()
    to_email = _email()
    bounce_type = _one_of("hard", "soft")
    smtp_code = _integer(400, 599, allow_none=True)  # null: no SMTP reply (e.g. DNS failure)
    diagnostic = _text(DIAGNOSTIC_MAX)
    bounced_at = Timestamp()


class ConversionRecordedSchema(_DataSchema):
    conversion_id = CanonicalUUID()
    contact_id = CanonicalUUID(allow_none=True)  # null: not matched to a contact
    message_id = CanonicalUUID(allow_none=True)  # null: no email to attribute it to
    name = _text(NAME_MAX, min_length=1)
    external_id = _text(255, min_length=1, allow_none=True)
    # Money as an integer of minor units (cents), never a float.
    amount_minor = _integer(0, 10**15, allow_none=True)
    currency = _pattern(_CURRENCY_RE, 3, "Must be an ISO 4217 code such as USD.", allow_none=True)
    converted_at = Timestamp()

    @validates_schema
    def _check_amount(self, data, **kwargs):
        # An amount without its currency (or the reverse) cannot be interpreted.
        if (data["amount_minor"] is None) != (data["currency"] is None):
            field = "currency" if data["currency"] is None else "amount_minor"
            raise ValidationError("amount_minor and currency are both set or both null.", field)


class SuppressionCreatedSchema(_DataSchema):
    email = _email()
    reason = _one_of("hard_bounce", "complaint", "unsubscribe", "manual")
    contact_id = CanonicalUUID(allow_none=True)
    message_id = CanonicalUUID(allow_none=True)  # the email that caused it, if any
    suppressed_at = Timestamp()


class DnsRecordSchema(_DataSchema):
    """One DNS record of a sending domain: what it must hold and what it holds."""

    purpose = _one_of("spf", "dkim", "dmarc", "return_path", "tracking")
    type = _one_of("TXT", "CNAME", "MX")
    name = _text(253, min_length=1)  # not a hostname check: DKIM names contain '_'
    expected = _text(DNS_VALUE_MAX, min_length=1)
    found = _text(DNS_VALUE_MAX, allow_none=True)  # null: the record is missing


def _records() -> StrictList:
    return StrictList(
        fields.Nested(DnsRecordSchema), validate=validate.Length(min=1, max=MAX_ITEMS)
    )


class DomainVerifiedSchema(_DataSchema):
    domain_id = CanonicalUUID()
    domain = _hostname()
    verified_at = Timestamp()


class DomainFailedSchema(_DataSchema):
    domain_id = CanonicalUUID()
    domain = _hostname()
    records = _records()  # the records that no longer verify
    failed_at = Timestamp()


class DomainDriftSchema(_DataSchema):
    domain_id = CanonicalUUID()
    domain = _hostname()
    records = _records()  # the records whose value changed
    detected_at = Timestamp()


class MailboxConnectedSchema(_DataSchema):
    mailbox_id = CanonicalUUID()
    email = _email()
    provider = _one_of("google", "microsoft", "imap")
    connected_at = Timestamp()


class ChatappReceivedSchema(_DataSchema):
    message_id = CanonicalUUID()
    reply_id = CanonicalUUID()  # the reply.received fired for the same message
    contact_id = CanonicalUUID()
    from_phone = _phone()
    from_name = _text(NAME_MAX)
    to_phone = _phone()
    text = _text(4096)
    received_at = Timestamp()


class SmsReceivedSchema(_DataSchema):
    message_id = CanonicalUUID()
    reply_id = CanonicalUUID()
    contact_id = CanonicalUUID()
    from_phone = _phone()
    to_phone = _phone()
    text = _text(1600)  # 10 concatenated segments
    received_at = Timestamp()


class AutomationFiredSchema(_DataSchema):
    automation_id = CanonicalUUID()
    automation_name = _text(NAME_MAX, min_length=1)
    action = _label()
    contact_id = CanonicalUUID(allow_none=True)  # null: the action is not about one contact
    fired_at = Timestamp()


class TestPingSchema(_DataSchema):
    __test__ = False  # not a pytest test class, despite the name
    message = _text(NAME_MAX, min_length=1)
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
    """The envelope (docs/events.md): the request body of every delivery; ``data`` is checked by type."""

    version = StrictString(
        validate=[validate.Regexp(_DATE_RE, error="Must be YYYY-MM-DD."), _calendar_date]
    )
    id = CanonicalUUID()
    type = _one_of(*DATA_SCHEMAS)
    mode = _one_of("live", "test")
    created_at = Timestamp(suffix="Z")
    data = fields.Dict(required=True)

    @validates_schema
    def _check_data(self, envelope, **kwargs):
        errors = DATA_SCHEMAS[envelope["type"]]().validate(envelope["data"])
        if errors:
            raise ValidationError(errors, "data")
