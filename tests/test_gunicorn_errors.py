"""CONTRACT 9.2 through the real server: the Procfile's `web:` command answers in the JSON
error shape also where gunicorn answers by itself (issue 22, finding 1: a 5,000-character
cursor got an HTML 414, a 9 KB header an HTML 431), and refuses a body over 64 KiB, declared
or chunked, with a JSON 413."""

from __future__ import annotations

import http.client
import json
import re
import secrets
import socket
from pathlib import Path

import pytest

from tests.support.devprocess import Processes, clean_env, free_port, wait_until
from tests.support.services import PG_URL, REDIS_URL

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[1]
EVENT_TYPES = "/api/webhooks/event-types"
ID = "00000000-0000-4000-8000-000000000000"


def procfile_web_command() -> str:
    """The Procfile's `web:` command, bound to loopback only (the rest as written)."""
    line = next(line for line in (ROOT / "Procfile").read_text().splitlines()
                if line.startswith("web:"))
    command = line.split(":", 1)[1].strip()
    assert "--bind 0.0.0.0:" in command
    return command.replace("--bind 0.0.0.0:", "--bind 127.0.0.1:")


@pytest.fixture
def server(db, redis_broker, tmp_path):
    """The Procfile's web process on a free port; its base (host, port)."""
    port = free_port()
    # XDG_RUNTIME_DIR: where gunicorn >= 25 puts its control socket unless told not to
    # (~/.gunicorn/gunicorn.ctl otherwise), which two runs at once would fight over.
    env = clean_env(PORT=str(port), WEBHOOKS_DATABASE_URL=PG_URL, WEBHOOKS_BROKER_URL=REDIS_URL,
                    WEBHOOKS_DATA_DIR=str(tmp_path / "data"),
                    WEBHOOKS_SECRET_KEY=secrets.token_urlsafe(48),
                    XDG_RUNTIME_DIR=str(tmp_path))
    processes = Processes(tmp_path)
    processes.start(["sh", "-c", procfile_web_command()], cwd=ROOT, env=env, name="web")
    try:
        wait_until(lambda: _answers(port), 60, "the web process to answer")
        yield port
    finally:
        processes.kill_all()


def _answers(port: int) -> bool:
    try:
        return _request(port, "GET", EVENT_TYPES)[0] == 200
    except OSError:
        return False


def _request(port: int, method: str, path: str, headers: dict | None = None,
             body: bytes | None = None, *, chunked: bool = False) -> tuple[int, str, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        if chunked:
            connection.putrequest(method, path)
            for name, value in (headers or {}).items():
                connection.putheader(name, value)
            connection.putheader("Transfer-Encoding", "chunked")
            connection.endheaders()
            for start in range(0, len(body), 8192):
                piece = body[start:start + 8192]
                try:
                    connection.send(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    break  # refused before the end: the answer is waiting
            else:
                connection.send(b"0\r\n\r\n")
        else:
            connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type", ""), response.read()
    finally:
        connection.close()


def _raw(port: int, data: bytes) -> tuple[int, str, bytes]:
    """Send ``data`` as it is; the status, content type and body of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    content_type = re.search(rb"(?im)^content-type:\s*(\S+)", head)
    return status, content_type.group(1).decode() if content_type else "", body


def _error_shape(answer: tuple[int, str, bytes], status: int, code: str) -> str:
    got, content_type, body = answer
    assert (got, content_type) == (status, "application/json"), answer
    error = json.loads(body)
    assert set(error) == {"error"} and set(error["error"]) == {"code", "message"}
    assert error["error"]["code"] == code
    message = error["error"]["message"]
    assert message[0].isupper() and message.endswith(".")
    return message


def test_a_request_line_over_the_limit_is_a_json_414(server):
    cursor = "A" * 5000
    message = _error_shape(_request(server, "GET", f"/api/webhooks/deliveries?cursor={cursor}"),
                           414, "request_line_too_long")
    assert "4094 bytes" in message


def test_a_header_over_the_limit_is_a_json_431(server):
    message = _error_shape(_request(server, "GET", EVENT_TYPES, {"X-Big": "x" * 9000}),
                           431, "headers_too_large")
    assert "8190 bytes" in message


def test_too_many_headers_is_a_json_431(server):
    headers = {f"X-Header-{number}": "1" for number in range(150)}
    _error_shape(_request(server, "GET", EVENT_TYPES, headers), 431, "headers_too_large")


def test_a_request_that_is_not_http_is_a_json_400(server):
    _error_shape(_raw(server, b"GARBAGE\x01 /api/webhooks/event-types HTTP/1.1\r\n\r\n"),
                 400, "bad_request")


def test_a_malformed_chunked_body_is_a_json_400(server, alice):
    head = (f"POST /api/webhooks/subscriptions/{ID}/test HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: {alice.headers['Authorization']}\r\n"
            "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
    _error_shape(_raw(server, head.encode() + b"zz\r\nhello\r\n0\r\n\r\n"),
                 400, "bad_request")


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_over_64_kib_is_a_json_413(server, alice, chunked):
    answer = _request(server, "POST", f"/api/webhooks/subscriptions/{ID}/test",
                      {**alice.headers, "Content-Type": "application/json"},
                      b"x" * 70_000, chunked=chunked)
    _error_shape(answer, 413, "payload_too_large")


def test_ordinary_requests_still_pass(server, alice):
    status, content_type, body = _request(server, "GET", "/api/webhooks/deliveries",
                                          alice.headers)
    assert (status, content_type) == (200, "application/json")
    assert json.loads(body) == {"data": [], "next_cursor": None}
