"""Attempts through the operator's egress proxy (CONTRACT 10.1), on a real tinyproxy.

Each test starts Debian's tinyproxy on loopback (tests/support/egress.py)
and sends with the real ``HttpSender``: the tunnel names the address the
guard approved (or the host name in ``name`` mode), the request inside is
what a direct attempt sends, TLS is checked against the endpoint's name,
and every way the proxy fails is an attempt with ``error_kind`` ``proxy``
whose error never holds the proxy's credentials.
"""

from __future__ import annotations

import socket
import threading

import pytest
import trustme

from tests.support.egress import (TinyProxy, client_certificate, free_port, localhost_resolver,
                                  tls_receiver_context)
from tests.support.fastreceiver import FastReceiver
from webhooks.config.egress import egress_proxy
from webhooks.errors import ConfigError
from webhooks.sender.post import HttpSender, ReceiverCredentials

TIMEOUT_S = 5.0
BODY = b'{"type":"email.sent"}'
HEADERS = {"Content-Type": "application/json", "X-Service-Delivery-Id": "d-1"}



def _sender(proxy_url: str | None, *, mode: str = "address", allow_private: bool = True,
            ca: trustme.CA | None = None, tmp_path=None, timeout: float = TIMEOUT_S):
    env = {"WEBHOOKS_EGRESS_PROXY": proxy_url or "", "WEBHOOKS_EGRESS_PROXY_CONNECT": mode}
    bundle = None
    if ca is not None:
        bundle = str(tmp_path / "ca.pem")
        ca.cert_pem.write_to_path(bundle)
    return HttpSender(timeout=timeout, allow_private=allow_private, ca_bundle=bundle,
                      resolver=localhost_resolver, proxy=egress_proxy(env))


@pytest.fixture
def proxy():
    server = TinyProxy().start()
    yield server
    server.stop()


@pytest.fixture
def receiver():
    server = FastReceiver().start()
    yield server
    server.stop()


@pytest.fixture
def ca():
    return trustme.CA()


@pytest.fixture
def tls_receiver(ca):
    server = FastReceiver(tls=tls_receiver_context(ca)).start()
    yield server
    server.stop()



def test_an_http_endpoint_is_reached_through_a_tunnel_to_the_approved_address(proxy, receiver):
    result = _sender(proxy.url)(receiver.url("/hook"), BODY, HEADERS)

    assert (result.status_code, result.error) == (200, None)
    assert proxy.connects() == [f"127.0.0.1:{receiver.port}"]
    assert [a.body for a in receiver.arrivals("/hook")] == [BODY]


def test_an_https_endpoint_is_checked_against_its_name_inside_the_tunnel(
        proxy, tls_receiver, ca, tmp_path):
    sender = _sender(proxy.url, ca=ca, tmp_path=tmp_path)
    credentials = ReceiverCredentials("s-1", client_certificate=client_certificate(ca))

    result = sender(tls_receiver.url("/secure"), BODY, HEADERS, credentials=credentials)

    assert (result.status_code, result.error) == (200, None)
    # The URL names localhost; the tunnel the address the guard checked.
    assert tls_receiver.url("/secure").startswith("https://localhost:")
    assert proxy.connects() == [f"127.0.0.1:{tls_receiver.port}"]


def test_a_certificate_for_another_name_still_fails_inside_the_tunnel(proxy, ca, tmp_path):
    other = FastReceiver(tls=tls_receiver_context(ca, "other.example")).start()
    try:
        sender = _sender(proxy.url, ca=ca, tmp_path=tmp_path)
        credentials = ReceiverCredentials("s-1", client_certificate=client_certificate(ca))
        result = sender(other.url("/x").replace("other.example", "localhost"), BODY, HEADERS,
                        credentials=credentials)
    finally:
        other.stop()
    assert result.status_code is None and result.error_kind.value == "tls_hostname"


def test_name_mode_asks_the_proxy_for_the_host_name(proxy, tls_receiver, ca, tmp_path):
    sender = _sender(proxy.url, mode="name", ca=ca, tmp_path=tmp_path)
    credentials = ReceiverCredentials("s-1", client_certificate=client_certificate(ca))

    result = sender(tls_receiver.url("/named"), BODY, HEADERS, credentials=credentials)

    assert result.status_code == 200
    assert proxy.connects() == [f"localhost:{tls_receiver.port}"]


def test_the_guard_holds_behind_the_proxy(proxy, receiver):
    result = _sender(proxy.url, allow_private=False)(receiver.url("/inside"), BODY, HEADERS)

    assert result.status_code is None and result.error_kind.value == "destination_refused"
    assert proxy.connects() == [] and receiver.count() == 0


def test_the_request_inside_the_tunnel_is_byte_for_byte_the_direct_one(proxy):
    requests_seen: list[bytes] = []
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve(count: int) -> None:
        for _ in range(count):
            connection, _ = listener.accept()
            with connection:
                data = b""
                while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < len(BODY):
                    data += connection.recv(65536)
                requests_seen.append(data)
                connection.sendall(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")

    server = threading.Thread(target=serve, args=(2,), daemon=True)
    server.start()
    url = f"http://localhost:{port}/same"
    direct = _sender(None)(url, BODY, HEADERS)
    tunnelled = _sender(proxy.url)(url, BODY, HEADERS)
    server.join(10)
    listener.close()

    assert direct.status_code == tunnelled.status_code == 204
    assert len(requests_seen) == 2 and requests_seen[0] == requests_seen[1]
    assert f"Host: localhost:{port}\r\n".encode() in requests_seen[1]


def test_a_proxy_that_is_down_is_a_proxy_failure(receiver):
    down = f"http://127.0.0.1:{free_port()}"

    result = _sender(down)(receiver.url("/hook"), BODY, HEADERS)

    assert result.status_code is None
    assert result.error_kind.value == "proxy"
    assert result.error == "proxy error: the egress proxy could not be reached (connection refused)"
    assert receiver.count() == 0


def test_a_proxy_refusing_the_credentials_is_named_without_them(receiver):
    guarded = TinyProxy(user="relay", password="pw-Zq81-never-shown").start()
    try:
        wrong = guarded.url.replace("pw-Zq81-never-shown", "wrong-Pw-77")
        refused = _sender(wrong)(receiver.url("/hook"), BODY, HEADERS)
        accepted = _sender(guarded.url)(receiver.url("/hook"), BODY, HEADERS)
    finally:
        guarded.stop()

    assert refused.error_kind.value == "proxy"
    # tinyproxy answers 401 to wrong credentials (407 to none): the error quotes its answer.
    assert "the egress proxy answered CONNECT with 401 Unauthorized" in refused.error
    assert "wrong-Pw-77" not in refused.error and "relay" not in refused.error
    assert accepted.status_code == 200 and receiver.count() == 1


def test_a_proxy_that_never_answers_fails_within_the_attempts_deadline(receiver):
    silent = socket.create_server(("127.0.0.1", 0))  # accepts (backlog), never answers
    try:
        result = _sender(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout=1.0)(
            receiver.url("/hook"), BODY, HEADERS)
    finally:
        silent.close()
    assert result.error_kind.value == "proxy"
    assert "no answer to CONNECT within 1 s" in result.error
    assert receiver.count() == 0


def test_an_endpoint_the_proxy_cannot_reach_names_the_proxys_answer(proxy):
    closed = free_port()

    result = _sender(proxy.url)(f"http://127.0.0.1:{closed}/gone", BODY, HEADERS)

    assert result.error_kind.value == "proxy"
    assert "answered CONNECT with 500" in result.error


@pytest.mark.parametrize("value, problem", [
    ("socks5://127.0.0.1:1080", "only an http:// proxy"),
    ("http://127.0.0.1", "names no port"),
    ("http://u:secret-pw@127.0.0.1:99999", "port"),
    ("http://127.0.0.1:3128/path", "alone"),
])
def test_a_malformed_proxy_setting_is_refused_without_its_password(value, problem):
    with pytest.raises(ConfigError) as refused:
        egress_proxy({"WEBHOOKS_EGRESS_PROXY": value})
    assert problem in str(refused.value) and "secret-pw" not in str(refused.value)


def test_the_proxys_password_is_never_in_its_repr():
    proxy = egress_proxy({"WEBHOOKS_EGRESS_PROXY": "http://relay:pa%40ss-9@proxy.internal:3128",
                          "WEBHOOKS_EGRESS_PROXY_CONNECT": "name"})
    assert proxy.host == "proxy.internal" and proxy.port == 3128 and proxy.mode.value == "name"
    assert "pa@ss-9" not in repr(proxy) and "pa%40ss-9" not in repr(proxy)
    assert proxy.shown == "http://relay:***@proxy.internal:3128"
    with pytest.raises(ConfigError):
        egress_proxy({"WEBHOOKS_EGRESS_PROXY": "", "WEBHOOKS_EGRESS_PROXY_CONNECT": "dns"})
