"""The fast local receiver: an asyncio HTTP/1.1 server in its own process.

It answers every POST at once (200 by default), records the arrival time
(``time.time()``, seconds) and the delivery headers of each request in
memory, and can be told per path to answer 500 (``fail``) or to hang until
the client gives up (``hang``), and to answer only after a delay (a slow
endpoint: the connection's coroutine sleeps, the others go on). It is driven
over HTTP on the same port through ``/_bench/...`` paths, never recorded:

- ``POST /_bench/mode``     body ``{"path": "/x", "mode": "ok"|"fail"|"hang"}``
- ``POST /_bench/delay``    body ``{"delays": {"/x": 0.2, ...}}``: seconds before answering
- ``POST /_bench/reset``    forget every record, mode and delay
- ``GET  /_bench/count``    ``{"total": n, "paths": {path: n}, "hanging": n}``
- ``GET  /_bench/records``  one line per request: ``at path delivery_id event_id attempt``

Run as ``python -m benchmarks.receiver --port 0``; it prints ``PORT <n>``
on its first line of output once it listens. Parsing is minimal on purpose:
one ``readuntil`` for the head, one ``readexactly`` for the body.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

__all__ = ["Arrival", "ReceiverClient", "start_receiver", "serve"]

OK, FAIL, HANG = "ok", "fail", "hang"
MODES = (OK, FAIL, HANG)
MAX_HANG_S = 600.0  # a hung request is dropped after this long even if the client stays
_RESPONSES = {
    OK: b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n"
        b'{"ok":true}',
    FAIL: b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
          b'Content-Length: 12\r\n\r\n{"ok":false}',
}


@dataclass(frozen=True)
class Arrival:
    """One request as the receiver saw it; ``at`` is ``time.time()`` seconds."""

    at: float
    path: str
    delivery_id: str
    event_id: str
    attempt: int


class _Server:
    """The receiver's state and connection handler (runs inside the receiver process)."""

    def __init__(self, service_name: str):
        prefix = f"x-{service_name.lower()}-".encode()
        self.header_delivery = prefix + b"delivery-id"
        self.header_event = prefix + b"event-id"
        self.header_attempt = prefix + b"attempt"
        self.modes: dict[str, str] = {}
        self.delays: dict[str, float] = {}  # path -> seconds to wait before answering
        self.records: list[tuple] = []
        self.counts: Counter = Counter()
        self.hanging = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                at = time.time()
                method, target, headers = _parse_head(head)
                length = int(headers.get(b"content-length", b"0") or 0)
                body = await reader.readexactly(length) if length else b""
                if target.startswith("/_bench/"):
                    writer.write(self.control(method, target, body))
                    continue
                path = target.split("?", 1)[0]
                self.records.append((
                    at, path,
                    headers.get(self.header_delivery, b"").decode(),
                    headers.get(self.header_event, b"").decode(),
                    headers.get(self.header_attempt, b"0").decode(),
                ))
                self.counts[path] += 1
                mode = self.modes.get(path, OK)
                if mode == HANG:
                    await self._hang(reader)
                    return
                delay = self.delays.get(path)
                if delay:
                    await asyncio.sleep(delay)  # only this connection waits
                writer.write(_RESPONSES[mode])
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    async def _hang(self, reader: asyncio.StreamReader) -> None:
        """Answer nothing until the client closes the connection (its time-out)."""
        self.hanging += 1
        try:
            await asyncio.wait_for(reader.read(), timeout=MAX_HANG_S)
        except (asyncio.TimeoutError, ConnectionError):
            pass
        finally:
            self.hanging -= 1

    def control(self, method: str, target: str, body: bytes) -> bytes:
        url = urlsplit(target)
        if url.path == "/_bench/mode" and method == "POST":
            request = json.loads(body)
            if request["mode"] not in MODES:
                return _reply(400, {"error": f"mode must be one of {MODES}"})
            self.modes[request["path"]] = request["mode"]
            return _reply(200, {"modes": self.modes})
        if url.path == "/_bench/delay" and method == "POST":
            delays = {path: float(secs) for path, secs in json.loads(body)["delays"].items()}
            if any(not 0 <= secs <= MAX_HANG_S for secs in delays.values()):
                return _reply(400, {"error": f"a delay is 0 to {MAX_HANG_S} s"})
            self.delays.update(delays)
            return _reply(200, {"delays": len(self.delays)})
        if url.path == "/_bench/reset" and method == "POST":
            self.records.clear()
            self.counts.clear()
            self.modes.clear()
            self.delays.clear()
            return _reply(200, {"ok": True})
        if url.path == "/_bench/count":
            return _reply(200, {"total": len(self.records), "paths": dict(self.counts),
                                "hanging": self.hanging})
        if url.path == "/_bench/records":
            query = parse_qs(url.query)
            since = int(query.get("since", ["0"])[0])
            lines = "".join(
                f"{r[0]:.6f} {r[1]} {r[2] or '-'} {r[3] or '-'} {r[4] or '0'}\n"
                for r in self.records[since:]
            )
            return _reply(200, lines.encode(), content_type="text/plain")
        return _reply(404, {"error": "unknown control path"})


def _parse_head(head: bytes) -> tuple[str, str, dict[bytes, bytes]]:
    lines = head.split(b"\r\n")
    method, target, _ = lines[0].split(b" ", 2)
    headers = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
    return method.decode(), target.decode(), headers


def _reply(status: int, payload, content_type: str = "application/json") -> bytes:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[status]
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


async def serve(host: str, port: int, service_name: str) -> None:
    """Listen on ``host:port`` (0: any free port), print ``PORT <n>``, serve until killed."""
    server_state = _Server(service_name)
    server = await asyncio.start_server(server_state.handle, host, port, backlog=2048,
                                        limit=1 << 20)
    bound = server.sockets[0].getsockname()[1]
    print(f"PORT {bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with server:
        await stop.wait()


class ReceiverClient:
    """Drives a running receiver over its control paths (from the harness process)."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.port}{path}"

    def _call(self, method: str, path: str, payload=None, timeout: float = 30.0) -> bytes:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            body = None if payload is None else json.dumps(payload).encode()
            connection.request(method, path, body=body,
                               headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            data = response.read()
            if response.status != 200:
                raise RuntimeError(f"receiver {method} {path}: {response.status} {data[:200]!r}")
            return data
        finally:
            connection.close()

    def set_mode(self, path: str, mode: str) -> None:
        """Make ``path`` answer 200 (``ok``), 500 (``fail``) or never (``hang``)."""
        self._call("POST", "/_bench/mode", {"path": path, "mode": mode})

    def set_delays(self, delays: dict[str, float]) -> None:
        """Make each path answer after that many seconds (0: at once), without blocking others."""
        self._call("POST", "/_bench/delay", {"delays": delays})

    def reset(self) -> None:
        """Forget every record, mode and delay."""
        self._call("POST", "/_bench/reset", {})

    def counts(self) -> dict:
        return json.loads(self._call("GET", "/_bench/count"))

    def count(self, path: str | None = None) -> int:
        counts = self.counts()
        return counts["total"] if path is None else counts["paths"].get(path, 0)

    def records(self, path: str | None = None) -> list[Arrival]:
        """Every recorded request (to ``path``), in arrival order."""
        text = self._call("GET", "/_bench/records", timeout=120.0).decode()
        arrivals = []
        for line in text.splitlines():
            at, rpath, delivery_id, event_id, attempt = line.split(" ")
            if path is None or rpath == path:
                arrivals.append(Arrival(float(at), rpath, delivery_id, event_id, int(attempt)))
        return arrivals

    def wait_for(self, count: int, path: str | None = None, *, timeout: float,
                 interval: float = 0.05) -> int:
        """Wait until ``count`` requests (to ``path``) arrived or ``timeout`` s passed; the count."""
        deadline = time.monotonic() + timeout
        seen = self.count(path)
        while seen < count and time.monotonic() < deadline:
            time.sleep(interval)
            seen = self.count(path)
        return seen


def start_receiver(registry, *, service_name: str, log_dir: Path,
                   host: str = "127.0.0.1") -> ReceiverClient:
    """Start the receiver process, register it for clean-up, and return a client for it."""
    from .processes import ManagedProcess

    log_path = log_dir / "receiver.log"
    process = ManagedProcess.spawn(
        "receiver",
        [sys.executable, "-m", "benchmarks.receiver", "--host", host, "--port", "0",
         "--service-name", service_name],
        env=dict(os.environ), log_path=log_path, stdout=subprocess.PIPE,
    )
    registry.add(process)
    line = process.popen.stdout.readline().decode().strip()
    if not line.startswith("PORT "):
        raise RuntimeError(f"the receiver did not start: {line!r}; see {log_path}")
    client = ReceiverClient(host, int(line.split()[1]))
    client.counts()  # answers: it is ready
    return client


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--service-name", default=os.environ.get("WEBHOOKS_SERVICE_NAME", "Service"))
    args = parser.parse_args(argv)
    asyncio.run(serve(args.host, args.port, args.service_name))


if __name__ == "__main__":
    main()
