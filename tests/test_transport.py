"""One POST against real local sockets: every way a receiver can misbehave ends cleanly."""

import socket
import time

import pytest

from tests.support.deadlines import ANSWER_DEADLINE_S, SHORT_DEADLINE_S, SLACK_S, trickle_interval
from tests.support.rawserver import RawServer
from webhooks.lifecycle.failure_kinds import ErrorKind
from webhooks.sender.post import EXCERPT_BYTES, HttpSender

HEADERS = {"Content-Type": "application/json"}
BODY = b'{"hello":"world"}'


@pytest.fixture
def sender():
    return HttpSender(timeout=ANSWER_DEADLINE_S, allow_private=True)


@pytest.fixture
def hasty():
    """A sender for receivers that never finish: any deadline shows the attempt ends at it."""
    return HttpSender(timeout=SHORT_DEADLINE_S, allow_private=True)


def serve(behaviour):
    server = RawServer(behaviour)
    return server, f"http://127.0.0.1:{server.port}/hook"


def answer(status: int, body: bytes = b"ok", extra: bytes = b""):
    def behaviour(conn):
        conn.sendall(
            b"HTTP/1.1 %d X\r\nContent-Length: %d\r\n%s\r\n" % (status, len(body), extra) + body
        )
    return behaviour


@pytest.mark.parametrize("status", [200, 204, 400, 410, 429, 500, 503])
def test_status_code_is_reported(sender, status):
    server, url = serve(answer(status, b"" if status == 204 else b"ok"))
    result = sender.post(url, BODY, HEADERS)
    assert result.status_code == status and result.error is None
    server.close()


def test_redirect_is_not_followed(sender):
    target, target_url = serve(answer(200))
    server, url = serve(answer(302, b"", b"Location: " + target_url.encode() + b"\r\n"))
    result = sender.post(url, BODY, HEADERS)
    assert result.status_code == 302
    assert target.requests == 0
    server.close(), target.close()


def test_response_excerpt_is_the_first_kib(sender):
    server, url = serve(answer(500, b"e" * 5000))
    result = sender.post(url, BODY, HEADERS)
    assert result.status_code == 500 and result.excerpt == "e" * EXCERPT_BYTES
    server.close()


def test_hanging_receiver_ends_at_the_timeout(hasty):
    server, url = serve(lambda conn: time.sleep(SHORT_DEADLINE_S + 5))
    started = time.monotonic()
    result = hasty.post(url, BODY, HEADERS)
    elapsed = time.monotonic() - started
    assert result.status_code is None and result.error.startswith("timeout")
    assert SHORT_DEADLINE_S - 0.1 < elapsed < SHORT_DEADLINE_S + SLACK_S
    server.close()


def test_trickling_headers_end_at_the_timeout(hasty):
    def trickle(conn):
        for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 100:
            conn.sendall(bytes([byte]))
            time.sleep(trickle_interval())  # each read is quick; the whole response never ends in time

    server, url = serve(trickle)
    started = time.monotonic()
    result = hasty.post(url, BODY, HEADERS)
    assert result.status_code is None and result.error.startswith("timeout")
    assert time.monotonic() - started < SHORT_DEADLINE_S + SLACK_S
    server.close()


def test_trickling_body_ends_at_the_timeout(hasty):
    def trickle(conn):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
        for _ in range(1000):
            conn.sendall(b"x")
            time.sleep(trickle_interval())

    server, url = serve(trickle)
    started = time.monotonic()
    result = hasty.post(url, BODY, HEADERS)
    assert result.status_code is None and result.error.startswith("timeout")
    assert time.monotonic() - started < SHORT_DEADLINE_S + SLACK_S
    server.close()


def test_ten_megabyte_answer_is_not_read_whole(sender):
    big = b"y" * (10 * 1024 * 1024)
    server, url = serve(answer(200, big))
    result = sender.post(url, BODY, HEADERS)
    assert result.status_code == 200 and len(result.excerpt) == EXCERPT_BYTES
    server.close()


def test_garbage_that_is_not_http(sender):
    server, url = serve(lambda conn: conn.sendall(b"SSH-2.0-OpenSSH\r\n\x00\x01garbage\r\n\r\n"))
    result = sender.post(url, BODY, HEADERS)
    assert result.status_code is None and result.error.startswith("protocol error")
    server.close()


def test_connection_closed_mid_response(sender):
    server, url = serve(lambda conn: conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc"))
    result = sender.post(url, BODY, HEADERS)
    assert result.status_code is None and result.error.startswith("connection error")
    server.close()


def test_refused_connection(sender):
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    result = sender.post(f"http://127.0.0.1:{port}/", BODY, HEADERS)
    assert (result.status_code, result.error, result.error_kind) == (None, "connection refused", ErrorKind.REFUSED)


def test_keep_alive_connection_is_reused(sender):
    connections = []

    def two_answers(conn):
        connections.append(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        # keep serving requests on the same connection
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        conn.sendall(b"HTTP/1.1 201 OK\r\nContent-Length: 2\r\n\r\nok")
        time.sleep(0.2)

    server, url = serve(two_answers)
    assert sender.post(url, BODY, HEADERS).status_code == 200
    assert sender.post(url, BODY, HEADERS).status_code == 201
    assert len(connections) == 1
    server.close()


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "2130706433", "0x7f.1", "127.1"])
def test_guard_refuses_loopback_in_every_spelling(host):
    """An address the URL spells is refused as such; a name whose addresses are all private
    fails as a name that does not resolve (the tenant must not learn which names resolve)."""
    server, _ = serve(answer(200))
    guarded = HttpSender(timeout=ANSWER_DEADLINE_S, allow_private=False)
    result = guarded.post(f"http://{host}:{server.port}/hook", BODY, HEADERS)
    assert result.status_code is None
    assert result.error_kind.value == ("dns" if host == "localhost" else "destination_refused")
    assert server.requests == 0
    server.close()


def test_guard_refuses_ipv6_loopback():
    try:
        server = RawServer(answer(200), host="::1")
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    guarded = HttpSender(timeout=ANSWER_DEADLINE_S, allow_private=False)
    result = guarded.post(f"http://[::1]:{server.port}/hook", BODY, HEADERS)
    assert result.error.startswith("refused") and server.requests == 0
    server.close()


def test_guard_checks_the_address_on_every_new_connection():
    """A kept-alive pool must not let a refused host through on a later attempt."""
    server, _ = serve(answer(200))
    guarded = HttpSender(timeout=ANSWER_DEADLINE_S, allow_private=False)
    for _ in range(2):
        result = guarded.post(f"http://127.0.0.1:{server.port}/", BODY, HEADERS)
        assert result.error.startswith("refused")
    assert server.requests == 0
    server.close()


@pytest.mark.parametrize("status, kept", [(429, "120"), (503, "120"), (500, None), (200, None)])
def test_retry_after_is_kept_from_a_429_or_503(sender, status, kept):
    server = RawServer(lambda conn: conn.sendall(
        b"HTTP/1.1 %d X\r\nRetry-After: 120\r\nContent-Length: 0\r\n\r\n" % status))
    try:
        assert sender.post(f"http://127.0.0.1:{server.port}/", b"{}", {}).retry_after == kept
    finally:
        server.close()
