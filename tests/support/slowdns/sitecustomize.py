"""Loaded by worker processes of the endpoint-zoo tests (PYTHONPATH): a resolver that hangs.

The look-up of any host under tests/support/zoo.py's SLOW_DNS_SUFFIX sleeps
far past the attempt's deadline, then answers 127.0.0.1; a host under
SHARED_DOMAIN (two tenants' endpoints under one cookie domain) answers
127.0.0.1 at once; every other look-up is the system's. This is the resolver seam of a real worker process, which
the service's default sender reaches through ``socket.getaddrinfo``.
"""

import socket
import time

_SUFFIX = ".slow-dns.test"
SHARED_DOMAIN = ".shared.test"
_system_getaddrinfo = socket.getaddrinfo


def _getaddrinfo(host, port, *args, **kwargs):
    if isinstance(host, str) and host.endswith(_SUFFIX):
        time.sleep(30)
        host = "127.0.0.1"
    elif isinstance(host, str) and host.endswith(SHARED_DOMAIN):
        host = "127.0.0.1"
    return _system_getaddrinfo(host, port, *args, **kwargs)


socket.getaddrinfo = _getaddrinfo
