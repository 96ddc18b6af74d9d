"""A real local HTTP receiver for tests: records every request, answers as scripted."""

from __future__ import annotations

import http.server
import threading
import time
from dataclasses import dataclass, field


@dataclass
class Received:
    path: str
    headers: dict
    body: bytes
    at: float  # time.time() when the request was read


@dataclass
class Receiver:
    """Answers each path with its script: a list of statuses (the last one repeats).

    A script item may also be ("hang", seconds, status) to sleep before answering, or
    ("headers", status, {name: value}) to answer with those headers too.
    """

    host: str = "127.0.0.1"
    requests: list = field(default_factory=list)
    scripts: dict = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> "Receiver":
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                item = receiver._record_and_script(self.path, dict(self.headers), body)
                extra = {}
                if isinstance(item, tuple) and item[0] == "headers":
                    _, status, extra = item
                elif isinstance(item, tuple):
                    _, seconds, status = item
                    time.sleep(seconds)
                else:
                    status = item
                payload = b'{"ok": true}'
                try:
                    self.send_response(status)
                    for name, value in extra.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the sender gave up (time-out): nothing to answer

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer((self.host, 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.port}{path}"

    def script(self, path: str, *items) -> None:
        with self._lock:
            self.scripts[path] = list(items)

    def _record_and_script(self, path, headers, body):
        with self._lock:
            self.requests.append(Received(path, headers, body, time.time()))
            script = self.scripts.get(path) or [200]
            return script.pop(0) if len(script) > 1 else script[0]

    def received(self, path: str | None = None) -> list[Received]:
        with self._lock:
            return [r for r in self.requests if path is None or r.path == path]

    def wait_for(self, count: int, path: str | None = None, timeout: float = 30.0) -> list[Received]:
        """Wait until ``count`` requests (to ``path``) arrived; fail the test on time-out."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            got = self.received(path)
            if len(got) >= count:
                return got
            time.sleep(0.05)
        raise AssertionError(f"expected {count} requests to {path}, got {len(self.received(path))}")
