"""The web app on a real WSGI server in a thread, for the browser tests."""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator


@contextlib.contextmanager
def serving_app() -> Iterator[str]:
    """Serve ``web.create_app()`` on a free loopback port until the block ends; yields its
    base URL. The settings (environment) must be in place before it is entered."""
    from werkzeug.serving import make_server

    from web import create_app

    server = make_server("127.0.0.1", 0, create_app({"TESTING": True}), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(10)
