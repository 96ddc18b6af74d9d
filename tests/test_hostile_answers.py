"""The property over hostile answers (issue 22): whatever status, headers and body an
endpoint answers, compressed or not, its attempt ends recorded, the memory the attempt
takes stays bounded, and nothing it set reaches the next request.

Answers are well-formed HTTP here (tests/test_attempt_always_recorded.py draws
malformed bytes): the attack is in what they say, a 3xx with a Location, cookies
by the dozen, a gzip or deflate body that inflates a thousandfold, a body that
claims more than it sends. Each example runs the real sender through
``run_attempt`` on SQLite, measuring the Python memory the attempt allocates at
its peak with tracemalloc.
"""

from __future__ import annotations

import functools
import gzip
import socket
import tracemalloc
import zlib

import pytest
from hypothesis import HealthCheck, given, settings as hypothesis_settings, strategies as st
from sqlalchemy import select

from tests.factories import make_account, make_subscription
from tests.support.examples import examples
from tests.support.rawserver import RawServer
from webhooks.config import get_settings
from webhooks.emit import emit_event
from webhooks.events.samples import sample_data
from webhooks.sender.post import HttpSender
from webhooks.services.attempt import run_attempt
from webhooks.storage.db import session_scope
from webhooks.storage.models import Attempt, Delivery

# What one attempt may allocate at its peak, whatever the answer: the 64 KiB read, its
# chunks and the excerpt, with room for the interpreter's own (the bodies drawn below
# inflate to up to 64 MiB, and send up to 4 MiB).
PEAK_BYTES = 2 * 1024 * 1024

STATUSES = st.one_of(st.sampled_from([301, 302, 303, 307, 308]),
                     st.sampled_from([200, 204, 400, 410, 429, 500, 503]), st.integers(100, 599))
ENCODINGS = st.sampled_from([None, "gzip", "gzip", "deflate", "br", "identity", "gzip, gzip"])
COOKIE_SCOPES = st.sampled_from([b"", b"; Path=/", b"; Path=/; Domain=shared.test"])


@st.composite
def bodies(draw) -> bytes:
    """Plain bytes, or a run of one byte up to 4 MiB (compressible), or nothing."""
    kind = draw(st.sampled_from(["plain", "run", "empty"]))
    if kind == "plain":
        return draw(st.binary(max_size=2000))
    if kind == "run":
        return bytes([draw(st.integers(0, 255))]) * draw(st.integers(1, 4 * 1024 * 1024))
    return b""


def _compressed(raw: bytes, gzipped: bool) -> bytes:
    return gzip.compress(raw, 9) if gzipped else zlib.compress(raw, 9)


@functools.lru_cache(maxsize=None)
def _bomb(mib: int, gzipped: bool) -> bytes:
    """``mib`` MiB of zeros, gzip- or zlib-compressed. Made once each: compressing 64 MiB
    costs about 0.1 s of CPU, and the examples draw the same few bombs again and again."""
    return _compressed(bytes(mib * 1024 * 1024), gzipped)


def _encoded(body: bytes, encoding: str | None, bomb_mib: int) -> bytes:
    """``body`` compressed as ``encoding`` says; a bomb of ``bomb_mib`` MiB of zeros if > 0."""
    if encoding not in ("gzip", "deflate", "gzip, gzip"):
        return body
    gzipped = encoding.startswith("gzip")
    return _bomb(bomb_mib, gzipped) if bomb_mib else _compressed(body, gzipped)


@st.composite
def answers(draw) -> bytes:
    """A well-formed HTTP/1.1 answer whose status, headers and body are hostile."""
    status = draw(STATUSES)
    encoding = draw(ENCODINGS)
    body = _encoded(draw(bodies()), encoding, draw(st.sampled_from([0, 1, 64])))
    headers = [b"HTTP/1.1 %d Hostile" % status]
    if 300 <= status < 400 or draw(st.booleans()):
        headers.append(b"Location: " + b"/" + b"l" * draw(st.integers(0, 3000)))
    scope = draw(COOKIE_SCOPES)
    for index in range(draw(st.integers(0, 40))):
        headers.append(b"Set-Cookie: c%d=%s%s" % (index, b"v" * draw(st.integers(0, 4000)), scope))
    if encoding:
        headers.append(b"Content-Encoding: " + encoding.encode())
    claimed = len(body) + draw(st.sampled_from([0, 0, 0, 10, 1 << 30]))  # a short body, at times
    headers.append(b"Content-Length: %d" % claimed)
    return b"\r\n".join(headers) + b"\r\n\r\n" + body


@pytest.fixture
def hostile():
    """An endpoint that answers what the example says, then closes; it keeps request heads."""
    answer = {"bytes": b""}

    def behaviour(conn: socket.socket):
        conn.sendall(answer["bytes"])

    server = RawServer(behaviour)
    yield server, answer
    server.close()


def _delivery_to(url: str) -> str:
    account_id, _ = make_account("hostile")
    make_subscription(account_id, url)
    (delivery_id,) = emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids
    return delivery_id


def _recorded(delivery_id: str):
    with session_scope() as session:
        status = session.get(Delivery, delivery_id).status
        rows = session.scalars(select(Attempt).where(Attempt.delivery_id == delivery_id)).all()
        return status, [(a.status_code, a.error, a.response_excerpt, a.location) for a in rows]


@hypothesis_settings(max_examples=examples(60), deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture,
                                            HealthCheck.too_slow, HealthCheck.data_too_large])
@given(raw=answers())
def test_a_hostile_answer_ends_recorded_in_bounded_memory(sqlite_db, hostile, monkeypatch, raw):
    monkeypatch.setattr("webhooks.broker.outbox.send_to_broker", lambda items: [])
    server, answer = hostile
    answer["bytes"] = raw
    delivery_id = _delivery_to(f"http://127.0.0.1:{server.port}/hostile")
    sender = HttpSender(timeout=2.0, allow_private=True)
    tracemalloc.start()
    try:
        run_attempt(delivery_id, 0, sender=sender, settings=get_settings())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    status, rows = _recorded(delivery_id)
    assert status != "sending" and len(rows) == 1, (raw[:200], rows)
    status_code, error, excerpt, location = rows[0]
    assert (status_code is None) != (error is None), rows
    assert excerpt is None or len(excerpt) <= 1024
    assert location is None or (300 <= status_code < 400 and len(location) <= 1000), location
    assert peak < PEAK_BYTES, f"the attempt allocated {peak} bytes at its peak"
    # A second request to the same endpoint carries none of the cookies it set.
    sender.post(f"http://127.0.0.1:{server.port}/again", b"{}", {})
    assert all(b"\r\ncookie:" not in head.lower() for head in server.heads), server.heads[-1]
