"""A receiver host's endpoint: ``python -m cluster.receiver ADDRESS PORT LOG``.

Each path is a kind of receiver: ``/ok`` answers 200 at once, ``/flaky``
answers 500 to the first attempt of one delivery in three (chosen by the
delivery id, so every run picks the same), ``/slow`` answers 200 after 0.5
to 1.5 s, ``/fail`` always answers 500. Every request is one JSON line in
LOG (written before the answer is sent, flushed at once): what the checker
reads as "the receiver got it".
"""

from __future__ import annotations

import http.server
import json
import sys
import threading
import time
import zlib

SERVICE = "Service"  # WEBHOOKS_SERVICE_NAME's default: headers X-Service-*


def answer(path: str, delivery_id: str, attempt: int) -> tuple[int, float]:
    """(status, seconds to wait first) for a request on ``path``."""
    spread = zlib.crc32(delivery_id.encode()) % 1000
    if path == "/flaky":
        return (500 if attempt == 1 and spread % 3 == 0 else 200), 0.0
    if path == "/slow":
        return 200, 0.5 + spread / 1000
    if path == "/fail":
        return 500, 0.0
    return 200, 0.0


def serve(address: str, port: int, log_path: str) -> None:
    log = open(log_path, "a", buffering=1)
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            delivery = self.headers.get(f"X-{SERVICE}-Delivery-Id", "")
            attempt = int(self.headers.get(f"X-{SERVICE}-Attempt") or 0)
            status, wait = answer(self.path, delivery, attempt)
            if wait:
                time.sleep(wait)
            line = json.dumps({"t": time.time(), "path": self.path, "delivery": delivery,
                               "event": self.headers.get(f"X-{SERVICE}-Event-Id", ""),
                               "attempt": attempt, "status": status})
            with lock:
                log.write(line + "\n")
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer((address, port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]), sys.argv[3])
