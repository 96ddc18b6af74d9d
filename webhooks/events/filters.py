"""A subscription's payload filter (CONTRACT 10.4): parsed once into a small expression
tree, evaluated against an event's envelope at emit time. Pure code: no I/O.

A filter is a JSON object. Each key is either a dotted path into the envelope
(``type``, ``data.to_email``, ``data.records.0.found``: a segment that is a
whole number indexes a list) whose value is a condition, or a combinator:
``$and`` and ``$or`` (non-empty lists of filters) and ``$not`` (a filter). All
keys of one object must hold; ``{}`` holds for every event.

A condition is a literal (a string, number, boolean or null: equal to it) or an
object with exactly one operator:

- ``$eq``, ``$ne``: a literal; ``$in``, ``$nin``: a list of literals;
- ``$gt``, ``$gte``, ``$lt``, ``$lte``: a number or a string; a number compares with
  numbers only, a string with strings only (by code point);
- ``$exists``: a boolean; ``$prefix``: a string (the value is a string that starts
  with it).

Values compare as JSON does: ``true`` is not ``1``, ``1`` is ``1.0``. A value
that cannot be compared (a string against ``$gt: 5``) does not hold: the
event is refused, nothing fails. A path that is missing holds only for
``$exists: false``, ``$ne`` and ``$nin`` (MongoDB's rule: a missing value
is not equal to anything).

At most :data:`MAX_BYTES` bytes as compact JSON and :data:`MAX_DEPTH` filter
objects deep (the top object is level 1; each ``$and``/``$or`` item or
``$not`` one level more). Anything else raises :class:`InvalidFilter`, whose
message names where in the filter it is (``filter["$or"][1]["data.amount"]``).
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from typing import Any, Mapping

from webhooks.errors import InvalidFilter

__all__ = ["MAX_BYTES", "MAX_DEPTH", "OPERATORS", "COMBINATORS", "ENVELOPE_FIELDS", "Filter",
           "Condition", "AllOf", "AnyOf", "NotOf", "parse_filter", "parse_stored",
           "InvalidFilter"]

MAX_BYTES = 4096  # the filter as compact JSON (UTF-8)
MAX_DEPTH = 5  # filter objects nested, the top one included
ENVELOPE_FIELDS = ("version", "id", "type", "mode", "created_at", "data")  # envelope.py

_SCALAR_OPERATORS = ("$eq", "$ne")
_LIST_OPERATORS = ("$in", "$nin")
_ORDER_OPERATORS = ("$gt", "$gte", "$lt", "$lte")
OPERATORS = (*_SCALAR_OPERATORS, *_ORDER_OPERATORS, *_LIST_OPERATORS, "$exists", "$prefix")
COMBINATORS = ("$and", "$or", "$not")
MAX_LIST = 100  # literals in one $in or $nin list (the 4 KiB bound holds them anyway)

_MISSING = object()  # a path that leads nowhere


# --- the tree ---------------------------------------------------------------------------
class Filter:
    """A parsed filter: :meth:`accepts` says whether an envelope passes it."""

    def accepts(self, envelope: Mapping) -> bool:  # pragma: no cover - overridden
        raise NotImplementedError


@dataclass(frozen=True)
class Condition(Filter):
    """The value at ``path`` (segments) against ``operator`` and its ``operand``."""

    path: tuple[str, ...]
    operator: str
    operand: Any

    def accepts(self, envelope: Mapping) -> bool:
        return _holds(self.operator, self.operand, _value_at(envelope, self.path))


@dataclass(frozen=True)
class AllOf(Filter):
    parts: tuple[Filter, ...]

    def accepts(self, envelope: Mapping) -> bool:
        return all(part.accepts(envelope) for part in self.parts)


@dataclass(frozen=True)
class AnyOf(Filter):
    parts: tuple[Filter, ...]

    def accepts(self, envelope: Mapping) -> bool:
        return any(part.accepts(envelope) for part in self.parts)


@dataclass(frozen=True)
class NotOf(Filter):
    part: Filter

    def accepts(self, envelope: Mapping) -> bool:
        return not self.part.accepts(envelope)


# --- evaluation -------------------------------------------------------------------------
def _value_at(envelope: Any, path: tuple[str, ...]) -> Any:
    """The value at ``path`` in ``envelope``, or _MISSING."""
    value = envelope
    for segment in path:
        if isinstance(value, Mapping):
            value = value.get(segment, _MISSING)
        elif isinstance(value, list) and segment.isdigit() and int(segment) < len(value):
            value = value[int(segment)]
        else:
            return _MISSING
        if value is _MISSING:
            return _MISSING
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _equal(value: Any, literal: Any) -> bool:
    """JSON equality of a value with a literal (a scalar): a boolean equals only a boolean,
    a number any equal number."""
    if isinstance(literal, bool) or isinstance(value, bool):
        return isinstance(literal, bool) and isinstance(value, bool) and value is literal
    if _is_number(literal):
        return _is_number(value) and value == literal
    if literal is None:
        return value is None
    return isinstance(value, str) and value == literal


def _ordered(operator: str, value: Any, operand: Any) -> bool:
    same_kind = (_is_number(value) and _is_number(operand)) or (
        isinstance(value, str) and isinstance(operand, str))
    if not same_kind:
        return False
    if operator == "$gt":
        return value > operand
    if operator == "$gte":
        return value >= operand
    if operator == "$lt":
        return value < operand
    return value <= operand


def _holds(operator: str, operand: Any, value: Any) -> bool:
    missing = value is _MISSING
    if operator == "$exists":
        return operand is not missing
    if operator == "$ne":
        return missing or not _equal(value, operand)
    if operator == "$nin":
        return missing or not any(_equal(value, one) for one in operand)
    if missing:
        return False
    if operator == "$eq":
        return _equal(value, operand)
    if operator == "$in":
        return any(_equal(value, one) for one in operand)
    if operator == "$prefix":
        return isinstance(value, str) and value.startswith(operand)
    return _ordered(operator, value, operand)


# --- parsing ----------------------------------------------------------------------------
def _where(trail: tuple) -> str:
    """``filter["$or"][1]["data.amount"]``: where in the filter a refusal is."""
    return "filter" + "".join(f"[{step}]" if isinstance(step, int) else f"[{json.dumps(step)}]"
                              for step in trail)


def _refuse(trail: tuple, reason: str) -> InvalidFilter:
    return InvalidFilter(f"{_where(trail)}: {reason}", _where(trail))


def _is_literal(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, (str, int, bool))


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


def _path(key: str, trail: tuple) -> tuple[str, ...]:
    segments = tuple(key.split("."))
    if any(not segment for segment in segments):
        raise _refuse(trail, "a path is dot-separated names, none of them empty")
    if segments[0] not in ENVELOPE_FIELDS:
        raise _refuse(trail, "a path starts at a field of the envelope: "
                             + ", ".join(ENVELOPE_FIELDS) + " (data.<field> for the data)")
    return segments


def _condition(path: tuple[str, ...], value: Any, trail: tuple) -> Condition:
    if not isinstance(value, dict):
        if not _is_literal(value):
            raise _refuse(trail, f"a condition is a literal (string, number, boolean, null) or "
                                 f"an object with one operator, not {_kind(value)}")
        return Condition(path, "$eq", value)
    if len(value) != 1:
        raise _refuse(trail, "a condition object holds exactly one operator of "
                             + ", ".join(OPERATORS))
    (operator, operand), = value.items()
    here = (*trail, operator)
    if operator not in OPERATORS:
        raise _refuse(here, "unknown operator; the operators are " + ", ".join(OPERATORS))
    if operator in _SCALAR_OPERATORS and not _is_literal(operand):
        raise _refuse(here, f"takes a literal (string, number, boolean, null), not "
                            f"{_kind(operand)}")
    if operator in _ORDER_OPERATORS and not (
            isinstance(operand, str) or (_is_number(operand) and _is_literal(operand))):
        raise _refuse(here, f"takes a number or a string, not {_kind(operand)}")
    if operator in _LIST_OPERATORS:
        if not isinstance(operand, list) or not operand or len(operand) > MAX_LIST:
            raise _refuse(here, f"takes a list of 1 to {MAX_LIST} literals")
        for index, one in enumerate(operand):
            if not _is_literal(one):
                raise _refuse((*here, index), f"a literal (string, number, boolean, null), "
                                              f"not {_kind(one)}")
        operand = tuple(operand)
    if operator == "$exists" and not isinstance(operand, bool):
        raise _refuse(here, f"takes true or false, not {_kind(operand)}")
    if operator == "$prefix" and not isinstance(operand, str):
        raise _refuse(here, f"takes a string, not {_kind(operand)}")
    return Condition(path, operator, operand)


def _combined(key: str, value: Any, trail: tuple, depth: int) -> Filter:
    here = (*trail, key)
    if key == "$not":
        return NotOf(_parsed(value, here, depth + 1))
    if not isinstance(value, list) or not value:
        raise _refuse(here, "takes a non-empty list of filters")
    parts = tuple(_parsed(one, (*here, index), depth + 1) for index, one in enumerate(value))
    return AllOf(parts) if key == "$and" else AnyOf(parts)


def _parsed(value: Any, trail: tuple, depth: int) -> Filter:
    if not isinstance(value, dict):
        raise _refuse(trail, f"a filter is a JSON object, not {_kind(value)}")
    if depth > MAX_DEPTH:
        raise _refuse(trail, f"filters nest at most {MAX_DEPTH} levels deep")
    parts = []
    for key, condition in value.items():
        if not isinstance(key, str):
            raise _refuse(trail, "keys are strings")
        if key.startswith("$"):
            if key not in COMBINATORS:
                raise _refuse((*trail, key), "unknown combinator; a filter's keys are paths "
                                             "or one of " + ", ".join(COMBINATORS))
            parts.append(_combined(key, condition, trail, depth))
        else:
            parts.append(_condition(_path(key, (*trail, key)), condition, (*trail, key)))
    return parts[0] if len(parts) == 1 else AllOf(tuple(parts))  # {}: AllOf(()), every event


def parse_filter(value: Any) -> Filter:
    """``value`` (a filter as JSON gives it) as a tree; InvalidFilter naming where not."""
    tree = _parsed(value, (), 1)  # depth is bounded first: the size is measured on a shallow tree
    size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    if size > MAX_BYTES:
        raise _refuse((), f"is {size} bytes as JSON; at most {MAX_BYTES}")
    return tree


@functools.lru_cache(maxsize=4096)
def _parsed_text(text: str) -> Filter:
    return parse_filter(json.loads(text))


def parse_stored(value: Any) -> Filter:
    """A stored filter (valid: checked when it was set) as a tree, parsed once per process
    per distinct filter: emit evaluates the same filters again and again."""
    return _parsed_text(json.dumps(value, sort_keys=True, separators=(",", ":")))
