"""TLS contexts that present a subscription's client certificate (CONTRACT 10.3).

One ``ssl.SSLContext`` per certificate and key, made once per process and
kept (at most ``CONTEXTS_KEPT``, least recently used first out): urllib3
keys its connection pools by the context too, so connections that present
one certificate are never reused for another endpoint's attempt, nor for
one without a certificate. The context is urllib3's own default
(``create_urllib3_context``) with the chain and key loaded: the server's
certificate is checked exactly as on an attempt without one (the same CAs,
``WEBHOOKS_CA_BUNDLE``, loaded by urllib3 per connection; the same host name).

Python's ``ssl`` loads a key only from a file: the PEM goes to an anonymous
in-memory file (``memfd_create``), never to disk, and is closed at once.
"""

from __future__ import annotations

import hashlib
import os
import ssl
import tempfile
import threading
from collections import OrderedDict
from typing import Mapping

from urllib3.util.ssl_ import create_urllib3_context

__all__ = ["context_for", "CONTEXTS_KEPT"]

CONTEXTS_KEPT = 256

_lock = threading.Lock()
_contexts: OrderedDict[bytes, ssl.SSLContext] = OrderedDict()


def context_for(certificate: Mapping[str, str]) -> ssl.SSLContext:
    """The context presenting ``certificate`` (its stored form: ``certificate``, the chain
    leaf first, and ``private_key``, both PEM)."""
    pem = f"{certificate['certificate'].strip()}\n{certificate['private_key'].strip()}\n"
    key = hashlib.sha256(pem.encode("utf-8")).digest()
    with _lock:
        context = _contexts.get(key)
        if context is not None:
            _contexts.move_to_end(key)
            return context
    context = create_urllib3_context()
    _load_chain(context, pem.encode("utf-8"))
    with _lock:
        context = _contexts.setdefault(key, context)
        while len(_contexts) > CONTEXTS_KEPT:
            _contexts.popitem(last=False)
    return context


def _load_chain(context: ssl.SSLContext, pem: bytes) -> None:
    """``load_cert_chain`` from ``pem`` (chain and key) without writing the key to disk where
    the system allows it."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("webhooks-client-certificate", os.MFD_CLOEXEC)
        try:
            os.write(fd, pem)
            context.load_cert_chain(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
        return
    with tempfile.NamedTemporaryFile(prefix="webhooks-cert-") as handle:  # mode 0600
        handle.write(pem)
        handle.flush()
        context.load_cert_chain(handle.name)
