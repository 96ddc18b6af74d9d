"""A WSGI app for the web worker's tests: holds its thread ``HOLD_S`` seconds, then answers
the pid of the process that served the request (which gunicorn worker took the connection)."""

from __future__ import annotations

import os
import time

HOLD_S = 1.0  # long enough for every client of a test to connect while the first are held


def app(environ, start_response):
    time.sleep(HOLD_S)
    body = str(os.getpid()).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
