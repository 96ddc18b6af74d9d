"""Subscription filters (CONTRACT 10.4, webhooks/events/filters.py): every operator and
combination, nested and missing paths, values that do not compare, each malformed form
refused naming where it is; and a property test against a naive evaluator that reads the
filter as JSON directly."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhooks.errors import InvalidFilter
from webhooks.events.filters import MAX_BYTES, parse_filter, parse_stored

ENVELOPE = {
    "version": "1", "id": "e1", "type": "email.sent", "mode": "live",
    "created_at": "2026-11-28T06:00:00.000Z",
    "data": {"to_email": "ann@example.com", "amount": 42, "ratio": 0.5, "ok": True,
             "none": None, "a": {"b": {"c": "deep"}}, "tags": ["x", "y"],
             "records": [{"found": True}, {"found": False}]},
}


def accepts(filter_value, envelope=ENVELOPE) -> bool:
    return parse_filter(filter_value).accepts(envelope)


@pytest.mark.parametrize("filter_value, expected", [
    ({}, True),
    ({"type": "email.sent"}, True),
    ({"type": "email.opened"}, False),
    ({"data.to_email": {"$eq": "ann@example.com"}}, True),
    ({"data.to_email": {"$ne": "ann@example.com"}}, False),
    ({"data.amount": {"$gt": 41}}, True),
    ({"data.amount": {"$gt": 42}}, False),
    ({"data.amount": {"$gte": 42}}, True),
    ({"data.amount": {"$lt": 42.5}}, True),
    ({"data.amount": {"$lte": 41.9}}, False),
    ({"data.amount": 42.0}, True),  # JSON numbers: 42 is 42.0
    ({"data.ok": 1}, False),  # a boolean is not a number
    ({"data.amount": True}, False),
    ({"data.ok": True}, True),
    ({"data.none": None}, True),
    ({"data.to_email": {"$gt": 5}}, False),  # a string against a number: refused, no error
    ({"data.amount": {"$gt": "5"}}, False),
    ({"data.to_email": {"$gt": "ann"}}, True),  # strings compare with strings
    ({"data.to_email": {"$in": ["bob@example.com", "ann@example.com"]}}, True),
    ({"data.to_email": {"$nin": ["bob@example.com", "ann@example.com"]}}, False),
    ({"data.amount": {"$in": [1, 2]}}, False),
    ({"data.to_email": {"$prefix": "ann@"}}, True),
    ({"data.to_email": {"$prefix": "bob@"}}, False),
    ({"data.amount": {"$prefix": "4"}}, False),
    ({"data.to_email": {"$exists": True}}, True),
    ({"data.to_email": {"$exists": False}}, False),
    # nested paths, into objects and lists
    ({"data.a.b.c": "deep"}, True),
    ({"data.a.b": {"$exists": True}}, True),
    ({"data.tags.1": "y"}, True),
    ({"data.records.0.found": True}, True),
    ({"data.records.1.found": True}, False),
    ({"data.records.2.found": {"$exists": False}}, True),
    # missing paths: only $exists false, $ne and $nin hold
    ({"data.nope": {"$exists": False}}, True),
    ({"data.nope": {"$exists": True}}, False),
    ({"data.nope": {"$ne": 1}}, True),
    ({"data.nope": {"$nin": [1]}}, True),
    ({"data.nope": None}, False),
    ({"data.nope": {"$gt": 0}}, False),
    ({"data.to_email.x": {"$exists": False}}, True),  # through a string: missing
    # combinations
    ({"type": "email.sent", "data.amount": {"$gt": 100}}, False),  # all keys must hold
    ({"type": "email.sent", "data.amount": {"$gt": 1}}, True),
    ({"$and": [{"type": "email.sent"}, {"data.ok": True}]}, True),
    ({"$and": [{"type": "email.sent"}, {"data.ok": False}]}, False),
    ({"$or": [{"type": "email.opened"}, {"data.ok": True}]}, True),
    ({"$or": [{"type": "email.opened"}, {"data.ok": False}]}, False),
    ({"$not": {"type": "email.sent"}}, False),
    ({"$not": {"$or": [{"data.amount": {"$lt": 0}}, {"data.nope": {"$exists": True}}]}}, True),
    ({"$or": [{"$and": [{"data.amount": {"$gte": 40}}, {"data.amount": {"$lte": 50}}]},
              {"data.to_email": {"$prefix": "zed"}}]}, True),
])
def test_each_operator_and_combination(filter_value, expected):
    assert accepts(filter_value) is expected


@pytest.mark.parametrize("filter_value, where", [
    ([], 'filter'),
    ("type", 'filter'),
    ({"data.amount": {"$gt": 1, "$lt": 2}}, 'filter["data.amount"]'),
    ({"data.amount": {}}, 'filter["data.amount"]'),
    ({"data.amount": {"$between": [1, 2]}}, 'filter["data.amount"]["$between"]'),
    ({"data.amount": {"$gt": [1]}}, 'filter["data.amount"]["$gt"]'),
    ({"data.amount": {"$gt": True}}, 'filter["data.amount"]["$gt"]'),
    ({"data.amount": {"$in": 1}}, 'filter["data.amount"]["$in"]'),
    ({"data.amount": {"$in": []}}, 'filter["data.amount"]["$in"]'),
    ({"data.amount": {"$nin": [1, {"a": 1}]}}, 'filter["data.amount"]["$nin"][1]'),
    ({"data.amount": {"$exists": "yes"}}, 'filter["data.amount"]["$exists"]'),
    ({"data.amount": {"$prefix": 4}}, 'filter["data.amount"]["$prefix"]'),
    ({"data.amount": {"$eq": [1]}}, 'filter["data.amount"]["$eq"]'),
    ({"data.amount": [1, 2]}, 'filter["data.amount"]'),
    ({"data..amount": 1}, 'filter["data..amount"]'),
    ({"payload.amount": 1}, 'filter["payload.amount"]'),
    ({"$xor": []}, 'filter["$xor"]'),
    ({"$and": []}, 'filter["$and"]'),
    ({"$or": {"type": "x"}}, 'filter["$or"]'),
    ({"$or": [{"type": "x"}, 3]}, 'filter["$or"][1]'),
    ({"$or": [{"type": "x"}, {"data.amount": {"$gt": None}}]},
     'filter["$or"][1]["data.amount"]["$gt"]'),
    ({"$not": [{"type": "x"}]}, 'filter["$not"]'),
    ({"$not": {"$not": {"$not": {"$not": {"$not": {"type": "x"}}}}}},
     'filter["$not"]["$not"]["$not"]["$not"]["$not"]'),
])
def test_each_malformed_form_is_refused_naming_where(filter_value, where):
    with pytest.raises(InvalidFilter) as refused:
        parse_filter(filter_value)
    assert refused.value.path == where
    assert str(refused.value).startswith(where + ": ")


def test_five_levels_deep_is_accepted():
    assert accepts({"$not": {"$not": {"$not": {"$not": {"type": "email.sent"}}}}}) is True


def test_size_limit_in_bytes():
    fits = {"data.to_email": {"$in": ["x" * 38] * 98}}
    assert len(json.dumps(fits, separators=(",", ":"))) <= MAX_BYTES
    parse_filter(fits)
    too_big = {"data.to_email": {"$in": ["x" * 50] * 90}}
    with pytest.raises(InvalidFilter, match=r"^filter: is \d+ bytes as JSON; at most 4096"):
        parse_filter(too_big)


def test_parse_stored_reuses_the_tree_of_an_equal_filter():
    assert parse_stored({"type": "a", "data.x": 1}) is parse_stored({"data.x": 1, "type": "a"})


# --- the property: the tree agrees with a naive reading of the JSON ------------------------
_MISSING = object()


def _naive_lookup(envelope, dotted):
    value = envelope
    for segment in dotted.split("."):
        if type(value) is dict and segment in value:
            value = value[segment]
        elif type(value) is list and segment.isdigit() and int(segment) < len(value):
            value = value[int(segment)]
        else:
            return _MISSING
    return value


def _naive_same(a, b):
    # JSON values by type: booleans, numbers, strings and null are four kinds apart.
    def kind(v):
        if v is None:
            return "null"
        if isinstance(v, bool):
            return "bool"
        if isinstance(v, (int, float)):
            return "number"
        if isinstance(v, str):
            return "string"
        return "other"

    return kind(a) == kind(b) != "other" and a == b


def _naive(filter_value, envelope) -> bool:
    results = []
    for key, condition in filter_value.items():
        if key == "$and":
            results.append(all(_naive(one, envelope) for one in condition))
        elif key == "$or":
            results.append(any(_naive(one, envelope) for one in condition))
        elif key == "$not":
            results.append(not _naive(condition, envelope))
        else:
            results.append(_naive_condition(condition, _naive_lookup(envelope, key)))
    return all(results)


def _naive_condition(condition, value) -> bool:
    if not isinstance(condition, dict):
        condition = {"$eq": condition}
    [(operator, operand)] = condition.items()
    here = value is not _MISSING
    if operator == "$exists":
        return here == operand
    if operator == "$eq":
        return here and _naive_same(value, operand)
    if operator == "$ne":
        return not (here and _naive_same(value, operand))
    if operator == "$in":
        return here and any(_naive_same(value, one) for one in operand)
    if operator == "$nin":
        return not (here and any(_naive_same(value, one) for one in operand))
    if operator == "$prefix":
        return here and isinstance(value, str) and value[:len(operand)] == operand
    comparable = here and (
        (isinstance(value, str) and isinstance(operand, str))
        or (type(value) in (int, float) and type(operand) in (int, float)))
    if not comparable:
        return False
    return {"$gt": value > operand, "$gte": value >= operand,
            "$lt": value < operand, "$lte": value <= operand}[operator]


_names = st.sampled_from(["a", "b", "c", "0", "1"])
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([0.0, 1.5, -2.0]),
                     st.sampled_from(["", "a", "ab", "b", "abc"]))
_json = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(_names, inner, max_size=3)), max_leaves=8)
_envelopes = st.fixed_dictionaries({"type": st.sampled_from(["email.sent", "email.opened"]),
                                    "data": st.dictionaries(_names, _json, max_size=4)})
_paths = st.one_of(st.just("type"), st.lists(_names, min_size=1, max_size=3).map(
    lambda names: "data." + ".".join(names)))
_conditions = st.one_of(
    _scalars,
    st.builds(lambda op, v: {op: v}, st.sampled_from(["$eq", "$ne"]), _scalars),
    st.builds(lambda op, v: {op: v}, st.sampled_from(["$gt", "$gte", "$lt", "$lte"]),
              st.one_of(st.integers(-3, 3), st.sampled_from([0.5, "a", "ab", "b", ""]))),
    st.builds(lambda op, v: {op: v}, st.sampled_from(["$in", "$nin"]),
              st.lists(_scalars, min_size=1, max_size=4)),
    st.builds(lambda v: {"$exists": v}, st.booleans()),
    st.builds(lambda v: {"$prefix": v}, st.sampled_from(["", "a", "ab", "x"])),
)
_leaf_filters = st.dictionaries(_paths, _conditions, max_size=3)


def _combine(inner):
    return st.one_of(
        st.builds(lambda parts: {"$and": parts}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda parts: {"$or": parts}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda part: {"$not": part}, inner),
        st.builds(lambda a, b: {**a, **b}, _leaf_filters, st.builds(
            lambda parts: {"$or": parts}, st.lists(inner, min_size=1, max_size=2))),
    )


def _depth(filter_value) -> int:
    nested = [1]
    for key, value in filter_value.items():
        if key in ("$and", "$or"):
            nested += [1 + _depth(one) for one in value]
        elif key == "$not":
            nested.append(1 + _depth(value))
    return max(nested)


_filters = st.recursive(_leaf_filters, _combine, max_leaves=6).filter(lambda f: _depth(f) <= 5)


@settings(max_examples=400, deadline=None)
@given(filter_value=_filters, envelope=_envelopes)
def test_the_tree_agrees_with_a_naive_evaluator(filter_value, envelope):
    assert parse_filter(filter_value).accepts(envelope) is _naive(filter_value, envelope)


@settings(max_examples=200, deadline=None)
@given(value=_json)
def test_anything_else_is_refused_or_parsed_never_an_error(value):
    try:
        parse_filter({"data.a": value} if not isinstance(value, dict) else value)
    except InvalidFilter as refused:
        assert str(refused).startswith("filter")
