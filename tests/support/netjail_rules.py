"""The network jail's rule, for worker processes (netjail/sitecustomize.py) and in-process tests."""

from __future__ import annotations

import errno
import ipaddress
import os
import socket

__all__ = ["on_this_machine", "install", "JailedConnect"]

_original_connect = socket.socket.connect
_original_connect_ex = socket.socket.connect_ex


def on_this_machine(address) -> bool:
    """True for addresses whose traffic never leaves this machine."""
    host = address[0] if isinstance(address, tuple) else address
    try:
        ip = ipaddress.ip_address(str(host).split("%", 1)[0])
    except ValueError:
        return False  # a name: connect() would resolve it itself; refuse to be safe
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_unspecified


class JailedConnect(PermissionError):
    pass


def _check(sock, address) -> None:
    if sock.family in (socket.AF_INET, socket.AF_INET6) and not on_this_machine(address):
        log = os.environ.get("WEBHOOKS_TEST_NETJAIL_LOG")
        if log:
            with open(log, "a", encoding="utf-8") as out:
                out.write(f"{address!r}\n")
        raise JailedConnect(errno.EACCES, f"test network jail: no connection to {address!r}")


def _connect(self, address):
    _check(self, address)
    return _original_connect(self, address)


def _connect_ex(self, address):
    _check(self, address)
    return _original_connect_ex(self, address)


def install() -> None:
    socket.socket.connect = _connect
    socket.socket.connect_ex = _connect_ex


def uninstall() -> None:
    socket.socket.connect = _original_connect
    socket.socket.connect_ex = _original_connect_ex
