"""Parsing Retry-After (webhooks/lifecycle/retry_after.py): seconds, HTTP dates, and junk ignored."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, strategies as st

from webhooks.lifecycle.retry_after import retry_after_seconds

NOW = dt.datetime(2026, 11, 25, 18, 0, 0, tzinfo=dt.timezone.utc)


@pytest.mark.parametrize("value, seconds", [
    ("120", 120.0), (" 0 ", 0.0), ("86400", 86400.0),
    ("Wed, 25 Nov 2026 18:02:00 GMT", 120.0),
    ("Wednesday, 25-Nov-26 18:00:30 GMT", 30.0),  # RFC 850, still an HTTP date
    ("Wed, 25 Nov 2026 17:00:00 GMT", 0.0),  # in the past: no wait
])
def test_values_that_parse(value, seconds):
    assert retry_after_seconds(value, NOW) == seconds


@pytest.mark.parametrize("value", [None, "", "-5", "1.5", "soon", "12 s", "٣", "9" * 13,
                                   "Wed, 25 Nov 2026 18:02:00", "2026-11-25T18:02:00Z"])
def test_values_that_do_not_parse_are_ignored(value):
    assert retry_after_seconds(value, NOW) is None


@given(st.text(max_size=60))
def test_any_text_gives_none_or_a_wait_of_zero_or_more(value):
    seconds = retry_after_seconds(value, NOW)
    assert seconds is None or seconds >= 0
