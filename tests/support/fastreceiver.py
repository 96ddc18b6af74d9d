"""A fast asyncio HTTP/1.1 receiver in a background thread, able to misbehave on purpose.

The stdlib ThreadingHTTPServer of receiver.py spends a thread per
connection; this one serves thousands of deliveries a second on one event
loop, which the soak needs, and it can answer in every way a hostile or
broken endpoint does (the fault suite): hang, close mid-response, send 10 MB,
send garbage that is not HTTP, or trickle one byte a second.

Each path has a *rule*: a callable ``rule(arrival) -> action`` (or a fixed
action). Actions are the small classes below; a bare ``int`` means "answer
this status at once". Every request is recorded as an :class:`Arrival`
(delivery id, attempt number, event id, signature, body), so a test can
count what arrived per ``(delivery, attempt)`` and report duplicates.
Connections are kept alive between requests, as a real endpoint does.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import ssl
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Union

__all__ = [
    "Arrival", "FastReceiver", "Status", "Hang", "CloseMidResponse", "Huge", "Garbage",
    "Trickle", "Redirect", "first_attempt", "duplicates", "ReceiverProcess",
]


@dataclass(frozen=True)
class Arrival:
    """One request as the receiver read it; ``at`` is ``time.time()`` seconds."""

    at: float
    path: str
    delivery_id: str
    attempt: int
    event_id: str
    signature: str
    body: bytes
    authorization: str = ""  # the Authorization header (an OAuth2 Bearer token), if any


@dataclass(frozen=True)
class Status:
    """Answer ``code`` after ``delay`` seconds."""

    code: int
    delay: float = 0.0


@dataclass(frozen=True)
class Hang:
    """Read the request, answer nothing for ``seconds``, then close."""

    seconds: float = 60.0


@dataclass(frozen=True)
class CloseMidResponse:
    """Promise a 100-byte body, send 3 bytes of it, close the connection."""


@dataclass(frozen=True)
class Huge:
    """Answer 200 with a body of ``size`` bytes (10 MB by default), streamed."""

    size: int = 10 * 1024 * 1024


@dataclass(frozen=True)
class Garbage:
    """Answer bytes that are not HTTP at all, then close."""


@dataclass(frozen=True)
class Trickle:
    """Send a 200 response one byte every ``interval`` seconds, status line included."""

    interval: float = 1.0


@dataclass(frozen=True)
class Redirect:
    """Answer ``code`` with ``Location: location``."""

    location: str
    code: int = 302


Action = Union[int, Status, Hang, CloseMidResponse, Huge, Garbage, Trickle, Redirect]
Rule = Union[Action, Callable[[Arrival], Action]]

_REASONS = {200: "OK", 201: "Created", 204: "No Content", 302: "Found", 307: "Temporary Redirect",
            308: "Permanent Redirect", 401: "Unauthorized", 410: "Gone", 429: "Too Many Requests",
            500: "Internal Server Error", 503: "Service Unavailable"}


def first_attempt(bad: Action, then: Action = 200) -> Callable[[Arrival], Action]:
    """A rule: attempt 1 of every delivery gets ``bad``, later attempts get ``then``."""
    return lambda arrival: bad if arrival.attempt == 1 else then


def duplicates(arrivals) -> int:
    """Requests beyond the first for the same (delivery id, attempt number)."""
    seen = Counter((a.delivery_id, a.attempt) for a in arrivals)
    return sum(n - 1 for n in seen.values() if n > 1)


class _Closed(Exception):
    pass


class FastReceiver:
    """Serve on ``host`` (a loopback address) in a daemon thread; ``start()`` then ``url(path)``."""

    def __init__(self, host: str = "127.0.0.1", service_name: str = "Service",
                 tls: "ssl.SSLContext | None" = None, tls_name: str = "localhost"):
        """``tls``: serve https with this server context (its URL then names ``tls_name``,
        which the certificate must be for)."""
        self.host = host
        self.tls = tls
        self.tls_name = tls_name
        prefix = f"x-{service_name.lower()}-"
        self._h_delivery = prefix + "delivery-id"
        self._h_attempt = prefix + "attempt"
        self._h_event = prefix + "event-id"
        self._h_signature = prefix + "signature"
        self.rules: dict[str, Rule] = {}
        self.default: Rule = 200
        self._arrivals: list[Arrival] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server = None
        self._writers: set = set()
        self.port = 0

    # ------------------------------------------------------------ control

    def start(self) -> "FastReceiver":
        ready = threading.Event()
        failure: list[BaseException] = []

        def run():
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(self._handle, self.host, 0, backlog=1024,
                                         ssl=self.tls)
                )
                self.port = self._server.sockets[0].getsockname()[1]
            except BaseException as exc:  # noqa: BLE001 - reported to start()
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="fast-receiver", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        if self._loop is None:
            return

        async def shutdown():
            self._server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)
            await self._server.wait_closed()

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        except Exception:  # noqa: BLE001 - stopping a test helper must not fail the test
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop = None

    def url(self, path: str) -> str:
        if self.tls is not None:
            return f"https://{self.tls_name}:{self.port}{path}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{path}"

    def rule(self, path: str, rule: Rule) -> None:
        """How to answer requests to ``path`` from now on."""
        self.rules[path] = rule

    # ------------------------------------------------------------ records

    def arrivals(self, path: str | None = None) -> list[Arrival]:
        with self._lock:
            return [a for a in self._arrivals if path is None or a.path == path]

    def count(self, path: str | None = None) -> int:
        with self._lock:
            if path is None:
                return len(self._arrivals)
            return sum(1 for a in self._arrivals if a.path == path)

    def clear(self) -> None:
        with self._lock:
            self._arrivals.clear()

    def wait_for(self, count: int, path: str | None = None, timeout: float = 30.0) -> list[Arrival]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.count(path) >= count:
                return self.arrivals(path)
            time.sleep(0.02)
        raise AssertionError(f"expected {count} requests to {path}, got {self.count(path)}")

    # ------------------------------------------------------------ serving

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1] if len(lines[0].split(" ")) > 1 else "/"
                headers = {}
                for line in lines[1:]:
                    name, sep, value = line.partition(":")
                    if sep:
                        headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length") or 0)
                body = await reader.readexactly(length) if length else b""
                try:
                    attempt = int(headers.get(self._h_attempt, "0"))
                except ValueError:
                    attempt = 0
                arrival = Arrival(
                    at=time.time(), path=path, delivery_id=headers.get(self._h_delivery, ""),
                    attempt=attempt, event_id=headers.get(self._h_event, ""),
                    signature=headers.get(self._h_signature, ""), body=body,
                    authorization=headers.get("authorization", ""),
                )
                with self._lock:
                    self._arrivals.append(arrival)
                rule = self.rules.get(path, self.default)
                action = rule(arrival) if callable(rule) else rule
                if not await self._answer(action, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError, _Closed):
            return
        except asyncio.CancelledError:
            return  # stop(): end quietly, so asyncio has nothing to report
        finally:
            self._writers.discard(writer)
            try:
                writer.close()
            except Exception:  # noqa: BLE001
                pass

    async def _answer(self, action: Action, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; True if the connection may serve another."""
        if isinstance(action, int):
            action = Status(action)
        if isinstance(action, Status):
            if action.delay:
                await asyncio.sleep(action.delay)
            writer.write(_response(action.code, b'{"ok":true}'))
            await writer.drain()
            return True
        if isinstance(action, Redirect):
            writer.write(_response(action.code, b"", f"Location: {action.location}\r\n"))
            await writer.drain()
            return True
        if isinstance(action, Hang):
            await asyncio.sleep(action.seconds)
            return False
        if isinstance(action, CloseMidResponse):
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc")
            await writer.drain()
            return False
        if isinstance(action, Garbage):
            writer.write(b"SSH-2.0-OpenSSH_9.6\r\n\x00\x01\x02\xff garbage \xfe\r\n\r\n")
            await writer.drain()
            return False
        if isinstance(action, Huge):
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % action.size)
            chunk = b"y" * 65536
            sent = 0
            while sent < action.size:
                piece = chunk[: action.size - sent]
                writer.write(piece)
                await writer.drain()  # raises once the client has closed
                sent += len(piece)
            return False
        if isinstance(action, Trickle):
            for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 1000:
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(action.interval)
                if writer.transport.is_closing():
                    raise _Closed()
            return False
        raise TypeError(f"unknown receiver action {action!r}")


def _response(code: int, body: bytes, extra: str = "") -> bytes:
    reason = _REASONS.get(code, "Status")
    return (
        f"HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n{extra}\r\n"
    ).encode("latin-1") + body


class ReceiverProcess:
    """A FastReceiver in a process of its own, so that it never waits for this process's GIL.

    For the soak: the test process emits thousands of events while the
    workers post to the receiver, and a receiver starved by the emitting
    threads would slow every worker down. ``rules`` maps paths to rules that
    pickle (module-level functions or actions); records come back on request.
    """

    def __init__(self, host: str = "127.0.0.1", rules: dict | None = None, default: Rule = 200):
        self.host = host
        self._rules = dict(rules or {})
        self._default = default

    def start(self) -> "ReceiverProcess":
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(
            target=_serve_in_child, args=(self.host, self._rules, self._default, child), daemon=True
        )
        self._process.start()
        if not self._conn.poll(30):
            raise RuntimeError("the receiver process did not start in 30 s")
        self.port = self._conn.recv()
        return self

    def _ask(self, *command):
        self._conn.send(command)
        return self._conn.recv()

    def url(self, path: str) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{path}"

    def count(self, path: str | None = None) -> int:
        return self._ask("count", path)

    def arrivals(self, path: str | None = None) -> list[Arrival]:
        return self._ask("arrivals", path)

    def stop(self) -> None:
        try:
            self._ask("stop")
        except (EOFError, OSError):
            pass
        self._process.join(10)
        if self._process.is_alive():
            self._process.kill()


def _serve_in_child(host, rules, default, conn) -> None:
    receiver = FastReceiver(host).start()
    receiver.rules.update(rules)
    receiver.default = default
    conn.send(receiver.port)
    while True:
        try:
            command, *args = conn.recv()
        except EOFError:
            break
        if command == "count":
            conn.send(receiver.count(*args))
        elif command == "arrivals":
            conn.send(receiver.arrivals(*args))
        elif command == "stop":
            receiver.stop()
            conn.send(None)
            break
