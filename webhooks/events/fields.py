"""Strict marshmallow fields, and the small constructors the event schemas are made of.

Every field loads to the very value it was given (``schema.load(data) ==
data``): strings must be ``str``, integers ``int`` (not ``bool`` or ``"1"``;
nor ``1.0`` in the HTTP API), numbers ``int`` or finite ``float``, booleans
real ``bool``, lists real ``list``; UUIDs canonical; email addresses and URLs
as their patterns below say. Two values of event data are rewritten to one
form: timestamps ISO 8601 in UTC, given with ``Z`` or ``+00:00``, load with
``+00:00`` (:class:`Timestamp`); an integer given as a float with no fraction
(``1.0``, which JSON Schema counts as an integer) loads as the ``int``
(:class:`DataInteger`). The schemas of each type are in schemas.py.

Each rule a field checks is also its JSON Schema (json_schemas.py), so that
a schema validator and ``emit_event`` agree both ways: the patterns are
written once, in the subset of regular expressions that Python's ``re`` and
ECMA 262 read alike.
"""

from __future__ import annotations

import re
from datetime import datetime

from marshmallow import ValidationError, fields, validate

__all__ = [
    "StrictString", "StrictInteger", "DataInteger", "StrictNumber", "StrictBoolean", "StrictList",
    "CanonicalUUID", "Timestamp", "text", "pattern", "label", "one_of", "email", "url", "phone",
    "hostname", "integer", "unique", "PATTERN_END",
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

# The end of the string in a JSON Schema pattern, read alike by ECMA 262 (where ``$`` is
# the end) and by Python's ``re.search``, which jsonschema uses (where ``$`` also matches
# before a final newline).
PATTERN_END = r"$(?!\n)"
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# [0-9], not \d: \d also matches non-ASCII digits, which no ISO 8601 parser should see.
TIMESTAMP_RE = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"  # date T time
    r"(\.[0-9]{1,6})?"                                       # fraction, microseconds at most
    r"(Z|[+-][0-9]{2}:[0-9]{2})"                             # the offset, never left out
)
UTC_SUFFIXES = ("Z", "+00:00")  # what a Timestamp accepts; it writes one of them
# validate.Regexp only anchors at the start, hence the \Z on each pattern it uses.
DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")
LABEL_RE = re.compile(r"[a-z][a-z0-9_]*\Z")
PHONE_RE = re.compile(r"\+[1-9][0-9]{6,14}\Z")  # E.164
CURRENCY_RE = re.compile(r"[A-Z]{3}\Z")         # ISO 4217 alphabetic code
# The same rules as JSON Schema patterns (ECMA 262: anchored here, as fullmatch is), for the
# event schemas (json_schemas.py): a calendar date (leap years included; year 0 is not one,
# as for Python's date), a UTC time of day, a canonical UUID.
_YEAR = r"(?!0000)[0-9]{4}"
_LEAP_YEAR = r"(?!0000)(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)"
CALENDAR_DATE_PATTERN = (
    rf"(?:{_YEAR}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|"
    rf"[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))|{_LEAP_YEAR}-02-29)")
_TIME_OF_DAY = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?"
# Email addresses: the dot-atom local part of RFC 5322 and a domain of LDH labels whose last
# label starts with a letter, in ASCII (HTML's "valid e-mail address", with a dotted
# domain). An internationalised domain is given in its A-label form (xn--...).
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_TOP_LABEL = r"[A-Za-z](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
EMAIL_RE = re.compile(rf"{_ATOM}(?:\.{_ATOM})*@(?:{_LABEL}\.)+{_TOP_LABEL}\Z")
# http(s) URLs: a domain name (with a dotted top label), an IPv4 address or a bracketed IPv6
# one, an optional port, then a path, query or fragment of printable ASCII (RFC 3986
# percent-encodes the rest). No user:password@ part: a tracked link never carries one.
URL_RE = re.compile(
    r"[Hh][Tt][Tt][Pp][Ss]?://"
    rf"(?:(?:{_LABEL}\.)+{_TOP_LABEL}\.?|[0-9]{{1,3}}(?:\.[0-9]{{1,3}}){{3}}|\[[0-9A-Fa-f:.]+\])"
    r"(?::[0-9]{1,5})?(?:[/?#][!-~]*)?\Z"
)
HOSTNAME_RE = re.compile(
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
    """A real ``int``: ``Integer(strict=True)`` still lets ``True`` through; no ``1.0``, no
    ``"1"`` (the HTTP API's integers)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.make_error("invalid")
        return value


class DataInteger(StrictInteger):
    """An event's integer as JSON Schema counts one: an ``int``, or a ``float`` with no
    fraction, which loads as the ``int`` (``3.0`` is written ``3``, which a receiver's
    integer type can read; Go's refuses ``3.0``). So the event schemas, which cannot tell
    ``3.0`` from ``3``, and ``emit_event`` agree (json_schemas.py)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return super()._deserialize(value, attr, data, **kwargs)


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

    json_schema = {"format": "uuid", "pattern": f"^{UUID_RE.pattern}{PATTERN_END}"}

    default_error_messages = {"invalid_uuid": "Not a canonical UUID (lowercase, hyphenated)."}

    def _deserialize(self, value, attr, data, **kwargs):
        value = super()._deserialize(value, attr, data, **kwargs)
        if not UUID_RE.fullmatch(value):
            raise self.make_error("invalid_uuid")
        return value


class Timestamp(StrictString):
    """An ISO 8601 date-time string in UTC, ending in one of ``accepts``; it loads to the
    form written, ending in ``suffix``.

    The data of every type accepts ``Z`` and ``+00:00`` (issue 36) and is written with
    ``+00:00`` (SPEC 2.3's form): only the suffix is rewritten, the same digits, the same
    instant. The envelope, which the service alone writes, has ``Z`` (SPEC 2.2) and
    accepts nothing else. Any other offset is refused.
    """

    default_error_messages = {
        "invalid_timestamp": "Not a valid ISO 8601 timestamp with a UTC offset.",
        "wrong_suffix": "Timestamp must be in UTC and end with {accepted}.",
    }

    def __init__(self, *, suffix: str = "+00:00", accepts: tuple[str, ...] = UTC_SUFFIXES,
                 **kwargs):
        super().__init__(**kwargs)
        self.suffix, self.accepts = suffix, accepts
        offsets = "|".join(re.escape(utc) for utc in accepts)
        self.json_schema = {  # json_schemas.py: the same rule, as a pattern
            "format": "date-time",
            "pattern": f"^{CALENDAR_DATE_PATTERN}T{_TIME_OF_DAY}(?:{offsets}){PATTERN_END}"}

    def _deserialize(self, value, attr, data, **kwargs):
        value = super()._deserialize(value, attr, data, **kwargs)
        if not TIMESTAMP_RE.fullmatch(value):
            raise self.make_error("invalid_timestamp")
        try:
            datetime.fromisoformat(value)  # catches month 13, 25:00, Feb 30 ...
        except ValueError as error:
            raise self.make_error("invalid_timestamp") from error
        for utc in self.accepts:
            if value.endswith(utc):
                return value[:-len(utc)] + self.suffix
        raise self.make_error("wrong_suffix",
                              accepted=" or ".join(f"'{utc}'" for utc in self.accepts))


# Small constructors, so each schema line says only what is special about a field.

def text(max_length: int, *, min_length: int = 0, **kw) -> StrictString:
    return StrictString(validate=validate.Length(min=min_length, max=max_length), **kw)


def pattern(regex: re.Pattern, max_length: int, message: str, *, json_format: str = "",
            **kw) -> StrictString:
    """A string of at most ``max_length`` characters matching ``regex`` from its start
    (``regex`` ends in ``\\Z``); ``json_format`` is the JSON Schema ``format`` it is (a
    note for readers and code generators: the pattern is the rule)."""
    field = StrictString(
        validate=[validate.Length(max=max_length), validate.Regexp(regex, error=message)], **kw
    )
    if json_format:
        field.json_schema = {"format": json_format}  # json_schemas.py
    return field


def label(**kw) -> StrictString:
    return pattern(LABEL_RE, LABEL_MAX, "Must be a lowercase snake_case label.", **kw)


def one_of(*choices: str, **kw) -> StrictString:
    return StrictString(validate=validate.OneOf(choices), **kw)


def email(**kw) -> StrictString:
    return pattern(EMAIL_RE, EMAIL_MAX, "Not a valid email address.", json_format="email", **kw)


def url(**kw) -> StrictString:
    """An http or https URL (URL_RE)."""
    return pattern(URL_RE, URL_MAX, "Not a valid URL.", json_format="uri", **kw)


def phone(**kw) -> StrictString:
    return pattern(PHONE_RE, 16, "Must be an E.164 phone number such as +14155550123.", **kw)


def hostname(**kw) -> StrictString:
    return pattern(HOSTNAME_RE, 253, "Must be a lowercase domain name.", **kw)


def integer(low: int, high: int, **kw) -> DataInteger:
    return DataInteger(validate=validate.Range(min=low, max=high), **kw)


def unique(items: list) -> None:
    if len(set(items)) != len(items):
        raise ValidationError("Items must be unique.")
