"""``webhooks listen``: verifies against the raw body, prints one line, answers 2xx/401/--status."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
import requests

from webhooks.cli.listen import Listener
from webhooks.signing import public_key_of, sign, standard_headers
from webhooks.tenants.schemes import new_secret

SECRET = "whsec_test-listener-secret"
WEBHOOKS = str(Path(sys.executable).parent / "webhooks")


def _headers(body: bytes, *, secret: str = SECRET, timestamp: int | None = None,
             service: str = "Service", attempt: int = 1, event_type: str = "email.sent"):
    ids = {"event": str(uuid.uuid4()), "delivery": str(uuid.uuid4())}
    headers = {
        "Content-Type": "application/json",
        f"X-{service}-Signature": sign(secret, body, int(time.time()) if timestamp is None else timestamp),
        f"X-{service}-Event": event_type,
        f"X-{service}-Event-Id": ids["event"],
        f"X-{service}-Delivery-Id": ids["delivery"],
        f"X-{service}-Attempt": str(attempt),
        f"X-{service}-Version": "2026-07-30",
        f"X-{service}-Mode": "live",
    }
    return headers, ids


# Not the JSON the service would produce byte for byte: a receiver must verify the raw bytes.
BODY = b'{"version":"2026-07-30",  "type":"email.sent", "data": {"x": "\\u00e9"}}'


@pytest.fixture
def listener():
    """An in-process listener on a free port, printing into a StringIO."""
    made = []

    def start(**kwargs):
        out = io.StringIO()
        server = Listener(**{"secret": SECRET, **kwargs}, port=0, out=out)
        # A short poll: shutdown() at teardown waits up to one poll interval (0.2 s in serve_forever).
        threading.Thread(target=server.server.serve_forever, kwargs={"poll_interval": 0.01},
                         daemon=True).start()
        made.append(server)
        return server, out

    yield start
    for server in made:
        server.server.shutdown()
        server.close()


def test_a_signed_delivery_is_verified_printed_and_answered_200(listener):
    server, out = listener()
    headers, ids = _headers(BODY, attempt=3)
    response = requests.post(server.url + "hooks/anything", data=BODY, headers=headers, timeout=5)
    assert response.status_code == 200
    (line,) = out.getvalue().splitlines()
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ  email\.sent ", line)
    assert f"event={ids['event']}" in line and f"delivery={ids['delivery']}" in line
    assert "attempt=3" in line and "  verified  -> 200" in line


@pytest.mark.parametrize(
    "case, reason",
    [
        ("wrong secret", "signature does not match the body and secret"),
        ("re-encoded body", "signature does not match the body and secret"),
        ("stale timestamp", "signature timestamp is more than 300 s in the past"),
        ("missing header", "signature header is missing"),
    ],
)
def test_a_delivery_that_does_not_verify_is_answered_401_with_the_reason(listener, case, reason):
    server, out = listener()
    body = BODY
    if case == "wrong secret":
        headers, _ = _headers(BODY, secret="whsec_someone-else")
    elif case == "re-encoded body":
        headers, _ = _headers(BODY)
        body = json.dumps(json.loads(BODY)).encode()  # parsed and re-serialised: breaks the MAC
    elif case == "stale timestamp":
        headers, _ = _headers(BODY, timestamp=int(time.time()) - 301)
    else:
        headers, _ = _headers(BODY)
        del headers["X-Service-Signature"]
    response = requests.post(server.url, data=body, headers=headers, timeout=5)
    assert response.status_code == 401
    (line,) = out.getvalue().splitlines()
    assert f"NOT verified: {reason}  -> 401" in line


def test_status_overrides_the_answer_and_still_reports_verification(listener):
    server, out = listener(status=500)
    good, _ = _headers(BODY)
    bad, _ = _headers(BODY, secret="whsec_wrong")
    assert requests.post(server.url, data=BODY, headers=good, timeout=5).status_code == 500
    assert requests.post(server.url, data=BODY, headers=bad, timeout=5).status_code == 500
    first, second = out.getvalue().splitlines()
    assert "  verified  -> 500" in first
    assert "NOT verified: signature does not match" in second and second.endswith("-> 500")


def test_header_names_follow_the_service_name(listener):
    server, out = listener(service_name="Acme")
    headers, ids = _headers(BODY, service="Acme")
    assert requests.post(server.url, data=BODY, headers=headers, timeout=5).status_code == 200
    assert f"delivery={ids['delivery']}" in out.getvalue()


def test_a_chunked_body_is_verified_over_its_raw_bytes(listener):
    server, out = listener()
    headers, _ = _headers(BODY)
    response = requests.post(server.url, data=iter([BODY[:10], BODY[10:]]), headers=headers,
                             timeout=5)
    assert response.status_code == 200
    assert "  verified  -> 200" in out.getvalue()


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("WEBHOOKS_")}


@contextlib.contextmanager
def _listen_command(tmp_path, *arguments: str):
    """``webhooks listen --port 0 <arguments>`` as a process: yields it (its output a text
    pipe) and the URL its first line says it is ready on; on leaving, stops it with SIGTERM
    and checks it exits 0 (killed if anything failed first)."""
    process = subprocess.Popen(
        [WEBHOOKS, "listen", "--port", "0", *arguments], cwd=tmp_path, env=_clean_env(),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    try:
        ready = process.stdout.readline()
        match = re.search(r"ready on (http://127\.0\.0\.1:\d+/)", ready)
        assert match, ready
        yield process, match.group(1), ready
        process.send_signal(signal.SIGTERM)
        assert process.wait(10) == 0
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.mark.process
def test_the_command_prints_a_line_per_delivery_and_stops_on_sigterm(tmp_path):
    command = _listen_command(tmp_path, "--secret", SECRET, "--status", "503")
    with command as (process, url, ready):
        assert "answering 503 to every delivery" in ready
        assert SECRET not in ready  # only a prefix of the secret is shown
        headers, ids = _headers(BODY)
        response = requests.post(url + "webhooks", data=BODY, headers=headers, timeout=5)
        assert response.status_code == 503
        line = process.stdout.readline()
        assert f"delivery={ids['delivery']}" in line and "verified  -> 503" in line


@pytest.mark.process
def test_the_command_needs_a_secret_and_a_free_port(tmp_path):
    missing = subprocess.run([WEBHOOKS, "listen"], cwd=tmp_path, env=_clean_env(),
                             capture_output=True, text=True, timeout=30)
    assert missing.returncode == 2 and "--secret" in missing.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = subprocess.run([WEBHOOKS, "listen", "--port", str(port), "--secret", SECRET],
                              cwd=tmp_path, env=_clean_env(), capture_output=True, text=True,
                              timeout=30)
    assert busy.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in busy.stderr


@pytest.mark.process
def test_the_command_verifies_with_either_of_two_secrets_during_a_rotation(tmp_path):
    old, new = SECRET, "whsec_the-next-secret-of-the-rotation"
    with _listen_command(tmp_path, "--secret", old, "--secret", new) as (process, url, ready):
        assert old not in ready and new not in ready and " or " in ready
        for secret, expected in ((old, 200), (new, 200), ("whsec_neither-of-them", 401)):
            headers, ids = _headers(BODY, secret=secret)
            response = requests.post(url, data=BODY, headers=headers, timeout=5)
            assert response.status_code == expected, secret
            line = process.stdout.readline()
            assert f"delivery={ids['delivery']}" in line and line.rstrip().endswith(f"-> {expected}")
        assert "any of the 2 secrets" in line


def test_a_standard_webhooks_delivery_is_verified_too(listener):
    """A subscription on the ``standard`` scheme (CONTRACT 9.3) sends webhook-* headers in
    place of X-Service-Signature; listen verifies them with the whsec_ secret."""
    secret = "whsec_" + base64.b64encode(os.urandom(32)).decode()
    server, out = listener(secret=[secret])
    headers, ids = _headers(BODY)
    del headers["X-Service-Signature"]
    signed = {**headers, **standard_headers([secret], ids["event"], BODY, int(time.time()))}
    response = requests.post(server.url, data=BODY, headers=signed, timeout=5)
    assert response.status_code == 200
    other = "whsec_" + base64.b64encode(os.urandom(32)).decode()
    forged = {**headers, **standard_headers([other], ids["event"], BODY, int(time.time()))}
    assert requests.post(server.url, data=BODY, headers=forged, timeout=5).status_code == 401
    first, second = out.getvalue().splitlines()
    assert f"event={ids['event']}" in first and "  verified  -> 200" in first
    assert "NOT verified: signature does not match the body and secret  -> 401" in second


@pytest.mark.process
def test_the_command_verifies_ed25519_deliveries_with_the_public_key(tmp_path):
    """``webhooks listen --secret whpk_…`` (CONTRACT 10.2): a ``standard-ed25519`` delivery
    verifies with the subscription's public key, either of two during a rotation; a changed
    body or another key's signature does not, nor a delivery signed with a secret."""
    current, following = new_secret("standard-ed25519"), new_secret("standard-ed25519")
    with _listen_command(tmp_path, "--secret", public_key_of(current)) as (process, url, _):

        def answer(keys: list[str], body: bytes = BODY, signed: bytes = BODY) -> tuple[int, str]:
            headers, ids = _headers(body)
            del headers["X-Service-Signature"]
            headers.update(standard_headers(keys, ids["event"], signed, int(time.time())))
            status = requests.post(url, data=body, headers=headers, timeout=5)
            line = process.stdout.readline()
            assert f"delivery={ids['delivery']}" in line
            return status.status_code, line

        assert answer([current])[0] == 200
        assert answer([current, following])[0] == 200  # a staged rotation: both signatures
        status, line = answer([current], body=BODY + b" ")
        assert status == 401 and "does not match the body and public key" in line
        assert answer([following])[0] == 401
        headers, _ = _headers(BODY)  # a service-scheme delivery: no v1a to check
        assert requests.post(url, data=BODY, headers=headers, timeout=5).status_code == 401
        assert "has no webhook-signature header" in process.stdout.readline()
