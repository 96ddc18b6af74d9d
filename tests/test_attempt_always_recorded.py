"""Whatever the sender, the receiver or the record does, ``run_attempt`` ends with the
attempt recorded and the delivery out of ``sending``: never an abandoned claim.

On both databases (PostgreSQL refuses NUL in text; SQLite does not).
"""

from __future__ import annotations

import socket

import pytest
from hypothesis import HealthCheck, given, settings as hypothesis_settings, strategies as st
from sqlalchemy import select

from tests.factories import make_account, make_subscription
from tests.support.rawserver import RawServer
from webhooks.config import get_settings
from webhooks.emit import emit_event
from webhooks.events.samples import sample_data
from webhooks.sender.post import AttemptResult, HttpSender
from webhooks.services import attempt as delivery_module
from webhooks.services.attempt import run_attempt
from webhooks.storage.db import session_scope
from webhooks.storage.models import Attempt, Delivery


@pytest.fixture
def quiet_publish(monkeypatch):
    """No broker here: what the attempt would publish is dropped (the rows tell everything)."""
    monkeypatch.setattr("webhooks.broker.outbox.send_to_broker", lambda items: [])


def _delivery_to(url: str) -> str:
    account_id, _ = make_account("always-recorded")
    make_subscription(account_id, url)
    (delivery_id,) = emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids
    return delivery_id


def _state(delivery_id: str):
    with session_scope() as session:
        delivery = session.get(Delivery, delivery_id)
        rows = session.scalars(select(Attempt).where(Attempt.delivery_id == delivery_id)
                               .order_by(Attempt.number)).all()
        return delivery.status, [(a.number, a.status_code, a.error, a.outcome,
                                  a.response_excerpt) for a in rows]


def _raising_sender(url, body, headers):
    raise KeyError("a bug in a sender")


def test_a_sender_that_raises_is_recorded_as_an_internal_error(any_db, quiet_publish):
    delivery_id = _delivery_to("http://127.0.0.1:9/never-reached")
    assert run_attempt(delivery_id, 0, sender=_raising_sender) == "pending"
    status, rows = _state(delivery_id)
    assert status == "pending"
    assert rows == [(1, None, "internal error: KeyError", "retry", None)]


def test_a_record_that_raises_is_recorded_again_as_an_internal_error(any_db, quiet_publish,
                                                                     monkeypatch):
    """The first record fails (here: injected); the attempt is still recorded, as ours."""
    real_record = delivery_module.record
    calls = []

    def record_that_fails_once(connection, claim, **fields):
        calls.append(fields["status_code"])
        if len(calls) == 1:
            raise ValueError("the record failed")
        return real_record(connection, claim, **fields)

    monkeypatch.setattr(delivery_module, "record", record_that_fails_once)
    delivery_id = _delivery_to("http://127.0.0.1:9/x")
    ok = lambda url, body, headers: AttemptResult(200, None, 5, "fine")  # noqa: E731
    assert run_attempt(delivery_id, 0, sender=ok) == "pending"
    assert calls == [200, None]
    status, rows = _state(delivery_id)
    assert (status, rows) == ("pending", [(1, None, "internal error: ValueError", "retry", None)])


def test_a_record_whose_connection_is_lost_is_recorded_again_as_it_was(any_db, quiet_publish,
                                                                         monkeypatch):
    """Lost twice in a row (the one retry of _in_transaction included), the record is run
    once more as it was: its 200 is recorded, not a false internal error that would send
    the receiver the delivery again."""
    from sqlalchemy.exc import OperationalError

    real_record = delivery_module.record
    calls = []

    def record_that_loses_its_connection_twice(connection, claim, **fields):
        calls.append(fields["status_code"])
        if len(calls) <= 2:
            raise OperationalError("PREPARE", {}, Exception("server closed the connection"),
                                   connection_invalidated=True)
        return real_record(connection, claim, **fields)

    monkeypatch.setattr(delivery_module, "record", record_that_loses_its_connection_twice)
    delivery_id = _delivery_to("http://127.0.0.1:9/x")
    ok = lambda url, body, headers: AttemptResult(200, None, 5, "fine")  # noqa: E731
    assert run_attempt(delivery_id, 0, sender=ok) == "done"
    assert calls == [200, 200, 200]
    assert _state(delivery_id) == ("done", [(1, 200, None, "success", "fine")])


def test_a_body_with_nul_and_junk_is_stored_as_text(any_db, quiet_publish):
    """The sender hands over text that PostgreSQL would refuse; the record cleans it."""
    delivery_id = _delivery_to("http://127.0.0.1:9/x")
    junk = AttemptResult(500, None, 5, "a\x00b \ud800 c")
    assert run_attempt(delivery_id, 0, sender=lambda *_: junk) == "pending"
    _, [(_, status_code, error, _, excerpt)] = _state(delivery_id)
    assert status_code == 500 and error is None
    assert "\x00" not in excerpt and excerpt.startswith("a\ufffdb ") and excerpt.endswith(" c")


def test_an_error_text_with_nul_is_stored_as_text(any_db, quiet_publish):
    delivery_id = _delivery_to("http://127.0.0.1:9/x")
    odd = AttemptResult(None, "connection error (\x00)", 5)
    run_attempt(delivery_id, 0, sender=lambda *_: odd)
    _, [(_, _, error, _, _)] = _state(delivery_id)
    assert error == "connection error (\ufffd)"


# ---------------------------------------------------------------- the property

STATUS_LINES = st.one_of(
    st.binary(max_size=40),
    st.builds(lambda code, reason: b"HTTP/1.1 %d %s" % (code, reason),
              st.integers(0, 999), st.binary(max_size=12)),
)
HEADERS = st.lists(st.one_of(st.binary(max_size=60),
                             st.sampled_from([b"Content-Length: 5", b"Content-Length: -1",
                                              b"Transfer-Encoding: chunked", b"Content-Length: 99"])),
                   max_size=6)


@st.composite
def responses(draw) -> bytes:
    """Random bytes shaped like an HTTP answer (or not), cut at a random point."""
    whole = draw(STATUS_LINES) + b"\r\n" + b"\r\n".join(draw(HEADERS)) + b"\r\n\r\n" + draw(
        st.binary(max_size=300))
    return whole[:draw(st.integers(0, len(whole)))]


@pytest.fixture
def random_receiver():
    answer = {"bytes": b""}

    def behaviour(conn: socket.socket):
        conn.sendall(answer["bytes"])  # then the server closes the connection

    server = RawServer(behaviour)
    yield server, answer
    server.close()


@pytest.mark.database
@hypothesis_settings(max_examples=40, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=responses())
def test_any_bytes_from_a_receiver_end_in_a_recorded_attempt(db, quiet_publish, random_receiver, raw):
    server, answer = random_receiver
    answer["bytes"] = raw
    delivery_id = _delivery_to(f"http://127.0.0.1:{server.port}/random")
    sender = HttpSender(timeout=0.5, allow_private=True)
    run_attempt(delivery_id, 0, sender=sender, settings=get_settings())
    status, rows = _state(delivery_id)
    assert status != "sending", raw
    assert len(rows) == 1 and rows[0][0] == 1, (raw, rows)
    number, status_code, error, outcome, excerpt = rows[0]
    assert (status_code is None) != (error is None), (raw, rows)
