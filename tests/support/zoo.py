"""The endpoint zoo: local receivers that fail the way real ones do, all on 127.0.0.1.

Every endpoint is a real socket server of its own (``ZooEndpoint``). The
HTTPS ones use certificates made by ``trustme`` (a local CA, no network):
``Certificates.ca_bundle`` is the PEM file a sender trusts, and each
certificate is broken in exactly one way. ``SLOW_DNS_SUFFIX`` names hosts
whose look-up hangs (tests/support/slowdns injects it into worker processes;
in-process tests pass ``slow_resolver`` to ``HttpSender``).

``zoo(certificates)`` builds every endpoint with what its attempt must end
as: the end status of a delivery that gets it every time, the start of the
recorded ``error`` (or the status code recorded), and the kind of error.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import ipaddress
import socket
import ssl
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.support.rawserver import RawServer

__all__ = ["Certificates", "ZooEndpoint", "Expect", "zoo", "SLOW_DNS_SUFFIX", "slow_resolver",
           "slow_lookups_held", "bomb", "REDIRECT_STATUSES", "HUGE_BODY_BYTES", "SHARED_DOMAIN",
           "answer"]

SLOW_DNS_SUFFIX = ".slow-dns.test"
SHARED_DOMAIN = "shared.test"  # tenants' hosts under one cookie domain: *.shared.test is 127.0.0.1
SLOW_DNS_SECONDS = 30.0  # far past any attempt's deadline in the tests


_lookups_released = threading.Event()


def slow_resolver(host: str, port: int) -> list:
    """A resolver (the sender's seam) whose look-up of a SLOW_DNS_SUFFIX host hangs
    (SLOW_DNS_SECONDS, or until ``slow_lookups_held`` ends), and for which every host
    under SHARED_DOMAIN is 127.0.0.1."""
    if host.endswith(SLOW_DNS_SUFFIX):
        _lookups_released.wait(SLOW_DNS_SECONDS)
        host = "127.0.0.1"
    elif host.endswith("." + SHARED_DOMAIN):
        host = "127.0.0.1"
    return socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)


@contextlib.contextmanager
def slow_lookups_held() -> Iterator[None]:
    """Slow look-ups hang inside the block; leaving it ends those still hanging.

    The sender looks names up on a thread pool, and Python joins its threads
    when the process exits: a look-up left hanging held the exit of a pytest
    worker up to SLOW_DNS_SECONDS after the test that started it.
    """
    _lookups_released.clear()
    try:
        yield
    finally:
        _lookups_released.set()


class Certificates:
    """A trusted local CA and server certificates for 127.0.0.1, each broken in one way."""

    def __init__(self):
        self.folder = Path(tempfile.mkdtemp(prefix="webhooks-zoo-"))
        self.ca = trustme.CA()
        self.ca_bundle = self.folder / "ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_bundle))
        now = dt.datetime.now(dt.timezone.utc)
        self.valid = self._context(self.ca.issue_cert("127.0.0.1", "localhost"))
        self.expired = self._context(self.ca.issue_cert(
            "127.0.0.1", not_before=now - dt.timedelta(days=30), not_after=now - dt.timedelta(days=1)))
        self.other_host = self._context(self.ca.issue_cert("other-host.example"))
        self.self_signed = self._self_signed_context()

    @staticmethod
    def _context(leaf) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        leaf.configure_cert(context)
        return context

    def _self_signed_context(self) -> ssl.SSLContext:
        """A certificate for 127.0.0.1 signed by its own key: no CA vouches for it."""
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "self-signed zoo endpoint")])
        now = dt.datetime.now(dt.timezone.utc)
        certificate = (
            x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256())
        )
        pem = self.folder / "self-signed.pem"
        pem.write_bytes(certificate.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()))
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(pem))
        return context


class ZooEndpoint(RawServer):
    """A zoo endpoint: a RawServer on 127.0.0.1 that knows its URL. Stop with ``close()``."""

    def __init__(self, behaviour: Callable[[socket.socket], None], *,
                 tls: ssl.SSLContext | None = None, read_first: bool = True):
        super().__init__(behaviour, tls=tls, read_first=read_first)

    def url(self, path: str = "/hook", host: str = "127.0.0.1") -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{host}:{self.port}{path}"


class ConnectHangs:
    """A port whose TCP connect never completes: a listener with a backlog of 0 that never
    accepts, already filled by one connection, so the kernel drops every further SYN."""

    def __init__(self):
        self.tls = None
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(0)
        self.port = self._sock.getsockname()[1]
        self._filler = socket.create_connection(("127.0.0.1", self.port), timeout=2)

    def url(self, path: str = "/hook", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def close(self):
        self._filler.close()
        self._sock.close()


# ---------------------------------------------------------------- behaviours


def answer(status: int, body: bytes = b"ok", headers: bytes = b"") -> Callable:
    def behaviour(conn):
        conn.sendall(b"HTTP/1.1 %d X\r\nContent-Length: %d\r\n%s\r\n" % (status, len(body), headers)
                     + body)
    return behaviour


def silent(conn):
    """Accept and say nothing until the client gives up."""
    while conn.recv(65536):
        pass


def continue_then(status: int) -> Callable:
    def behaviour(conn):
        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        answer(status)(conn)
    return behaviour


def header_flood(count: int = 10_000) -> Callable:
    def behaviour(conn):
        conn.sendall(b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-Flood-%d: x\r\n" % i for i in range(count))
                     + b"Content-Length: 0\r\n\r\n")
    return behaviour


def one_huge_header(size: int = 1024 * 1024) -> Callable:
    def behaviour(conn):
        conn.sendall(b"HTTP/1.1 200 OK\r\nX-Huge: " + b"h" * size + b"\r\nContent-Length: 0\r\n\r\n")
    return behaviour


REDIRECT_STATUSES = (301, 302, 303, 307, 308)
HUGE_BODY_BYTES = 200 * 1024 * 1024  # what a hostile answer claims and starts to send
_MEMBER_ZEROS = 64 * 1024 * 1024  # zeros in one gzip member of a bomb
_GZIP_MEMBERS = 16  # a gzip bomb: 16 members, 1 GiB of zeros in about 1 MB


@functools.lru_cache(maxsize=None)
def bomb(encoding: str) -> bytes:
    """A compression bomb: ``gzip`` inflates to 1 GiB of zeros (16 concatenated members,
    which decoders read as one body), ``deflate`` (zlib) to 64 MiB; each about 1 MB or
    65 KB on the wire. Made once per process (about 0.4 s each)."""
    wbits = 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS
    compressor = zlib.compressobj(9, zlib.DEFLATED, wbits)
    zeros = bytes(1024 * 1024)
    member = b"".join([compressor.compress(zeros) for _ in range(_MEMBER_ZEROS // len(zeros))]
                      + [compressor.flush()])
    return member * (_GZIP_MEMBERS if encoding == "gzip" else 1)


def streaming(status: int, size: int, headers: bytes = b"", chunk: bytes = b"z" * 65536) -> Callable:
    """An answer that claims ``size`` bytes of body and sends them until the client leaves."""
    def behaviour(conn):
        conn.sendall(b"HTTP/1.1 %d X\r\nContent-Length: %d\r\n%s\r\n" % (status, size, headers))
        for _ in range(size // len(chunk)):
            conn.sendall(chunk)
    return behaviour


def redirect(status: int, body: bytes | None = None, encoding: str | None = None,
             location: bytes = b"/x") -> Callable:
    """A 3xx to ``location``; with a huge streamed body, or ``body`` sent with ``encoding``."""
    headers = b"Location: " + location + b"\r\n"
    if body is None:
        return streaming(status, HUGE_BODY_BYTES, headers)
    if encoding:
        headers += b"Content-Encoding: " + encoding.encode() + b"\r\n"
    return answer(status, body, headers)


def cookie_flood(count: int = 90, size: int = 8 * 1024, domain: str | None = None) -> Callable:
    """A 200 that sets ``count`` cookies of ``size`` bytes each (for ``domain``, if given)."""
    scope = b"; Path=/" + (b"; Domain=" + domain.encode() if domain else b"")
    cookies = b"".join(b"Set-Cookie: planted%d=%s%s\r\n" % (i, b"c" * size, scope)
                       for i in range(count))
    # The server closes after each answer: saying so keeps a client from reusing the
    # connection in the moment before the close reaches it (tests post here repeatedly).
    return answer(200, b"ok", cookies + b"Connection: close\r\n")


def garbage_status(conn):
    conn.sendall(b"HTTP/1.1 TWO HUNDRED\r\n\x00\xff\r\n\r\n")


def endless_chunks(conn):
    """A 200 whose chunked body never ends: a small chunk every 0.2 s."""
    conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    while True:
        conn.sendall(b"1\r\nx\r\n")
        time.sleep(0.2)


@dataclass(frozen=True)
class Expect:
    """How an attempt to an endpoint must end: ``error`` prefix (None: a response with
    ``status_code``), the error kind's value, and the delivery's end status when every
    attempt gets the same."""

    end: str
    error: str | None = None
    kind: str | None = None
    status_code: int | None = None
    excerpt_has: str | None = None
    location: str | None = None  # the Location recorded with a 3xx answer


def zoo(certificates: Certificates) -> dict[str, tuple[ZooEndpoint, Expect]]:
    """Every zoo endpoint, by name, with what its attempts must record."""
    c = certificates
    retry_body = 500  # answered with junk bodies so the delivery walks the ladder to dead
    return {
        "https-valid": (ZooEndpoint(answer(200), tls=c.valid), Expect("done", status_code=200)),
        "https-self-signed": (ZooEndpoint(answer(200), tls=c.self_signed),
                              Expect("dead", "TLS error: certificate not trusted", "tls_untrusted")),
        "https-expired": (ZooEndpoint(answer(200), tls=c.expired),
                          Expect("dead", "TLS error: certificate expired", "tls_expired")),
        "https-other-host": (ZooEndpoint(answer(200), tls=c.other_host),
                             Expect("dead", "TLS error: certificate is for another host name",
                                    "tls_hostname")),
        "https-handshake-hangs": (ZooEndpoint(silent, tls=c.valid, read_first=False),
                                  Expect("dead", "timeout: the TLS handshake", "timeout")),
        "tcp-connect-hangs": (ConnectHangs(),
                              Expect("dead", "timeout: no TCP connection", "timeout")),
        "tcp-silent": (ZooEndpoint(silent, read_first=False),
                       Expect("dead", "timeout: no complete response", "timeout")),
        "body-nul": (ZooEndpoint(answer(retry_body, b"before\x00after")),
                     Expect("dead", status_code=500, excerpt_has="before\ufffdafter")),
        "body-binary": (ZooEndpoint(answer(retry_body, bytes(range(256)) * 8)),
                        Expect("dead", status_code=500, excerpt_has="\ufffd")),
        "body-invalid-utf8": (ZooEndpoint(answer(retry_body, b"caf\xc3 \xff\xfe ok")),
                              Expect("dead", status_code=500, excerpt_has="caf\ufffd")),
        "body-utf16": (ZooEndpoint(answer(retry_body, "h\u00e9llo".encode("utf-16"))),
                       Expect("dead", status_code=500, excerpt_has="\ufffd")),
        "continue-then-status": (ZooEndpoint(continue_then(503)), Expect("dead", status_code=503)),
        "header-flood": (ZooEndpoint(header_flood()),
                         Expect("dead", "protocol error", "protocol")),
        "header-megabyte": (ZooEndpoint(one_huge_header()),
                            Expect("dead", "protocol error", "protocol")),
        "garbage-status-line": (ZooEndpoint(garbage_status),
                                Expect("dead", "protocol error", "protocol")),
        "chunked-never-ends": (ZooEndpoint(endless_chunks),
                               Expect("dead", "timeout: no complete response", "timeout")),
        "dns-slow": (ZooEndpoint(answer(200)),
                     Expect("dead", "timeout: the DNS look-up", "timeout")),
        **_redirects(),
        "redirect-location-megabyte": (ZooEndpoint(redirect(302, b"", location=b"/" + b"l" * 2**20)),
                                       Expect("dead", "protocol error", "protocol")),
        "redirect-location-long": (ZooEndpoint(redirect(302, b"moved", location=b"/" + b"l" * 5000)),
                                   Expect("dead", status_code=302, excerpt_has="moved",
                                          location="/" + "l" * 999)),
        "cookie-flood": (ZooEndpoint(cookie_flood()), Expect("done", status_code=200)),
        "cookie-domain": (ZooEndpoint(cookie_flood(1, 16, domain=SHARED_DOMAIN)),
                          Expect("done", status_code=200)),
        **_bombs(),
    }


def _redirects() -> dict[str, tuple[ZooEndpoint, Expect]]:
    """Each redirect status with a 200 MB body, and with a gzip bomb: a 3xx is retried, its
    Location kept, its body read no further than 64 KiB."""
    endpoints = {}
    for status in REDIRECT_STATUSES:
        endpoints[f"redirect-{status}-huge"] = (
            ZooEndpoint(redirect(status)),
            Expect("dead", status_code=status, excerpt_has="zzz", location="/x"))
        endpoints[f"redirect-{status}-gzip-bomb"] = (
            ZooEndpoint(redirect(status, bomb("gzip"), "gzip")),
            Expect("dead", status_code=status, excerpt_has="\ufffd", location="/x"))
    return endpoints


def _bombs() -> dict[str, tuple[ZooEndpoint, Expect]]:
    """gzip and deflate bombs on a 200 (done) and a 500 (retried to dead)."""
    endpoints = {}
    for encoding in ("gzip", "deflate"):
        body, headers = bomb(encoding), b"Content-Encoding: " + encoding.encode() + b"\r\n"
        for status, end in ((200, "done"), (500, "dead")):
            endpoints[f"{encoding}-bomb-{status}"] = (
                ZooEndpoint(answer(status, body, headers)),
                Expect(end, status_code=status, excerpt_has="\ufffd"))
    return endpoints


def url_of(name: str, endpoint: ZooEndpoint) -> str:
    """The URL a subscription uses for a zoo endpoint (the slow-DNS one goes through a name)."""
    if name == "dns-slow":
        return endpoint.url(host="zoo" + SLOW_DNS_SUFFIX)
    if name.startswith("cookie-"):
        return endpoint.url(host="tenant-a." + SHARED_DOMAIN)
    return endpoint.url()
