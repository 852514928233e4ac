"""Loopback ports for servers started (and restarted) on a port chosen in advance.

A port the kernel picks for ``bind(0)`` comes from its ephemeral range, the same range every
outgoing connection's local port comes from. Released and handed to a server that binds it a
moment later (or a node restarted on its old port), it may meanwhile have become the local end
of some client's connection, and the server fails with EADDRINUSE. :func:`free_port` therefore
picks ports outside the ephemeral range (``/proc/sys/net/ipv4/ip_local_port_range``), which no
outgoing connection uses, checks each is free, and never hands the same port out twice in one
process until it has cycled through the pool. Where the ephemeral range leaves no room, it falls
back to the kernel's choice.
"""

from __future__ import annotations

import os
import socket
import threading

#: The lowest port handed out: below it live the well-known services (ZooKeeper's 2181,
#: Kafka's 9092, web servers' 8080...).
POOL_LOW = 20000

_lock = threading.Lock()
_given: set[int] = set()
_cursor: int | None = None


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range for outgoing connections' local ports (Linux's default if unknown)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def _pool() -> list[int]:
    low, high = ephemeral_range()
    return [p for p in range(POOL_LOW, 65536) if not low <= p <= high]


def _is_free(host: str, port: int) -> bool:
    # Without SO_REUSEADDR, so a port with connections still in TIME_WAIT counts as taken.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _kernel_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def free_port(host: str = "127.0.0.1") -> int:
    """A port on ``host`` that is free now and outside the ephemeral range (see module docs)."""
    global _cursor
    pool = _pool()
    if not pool:
        return _kernel_port(host)
    with _lock:
        if _cursor is None:
            # Processes starting servers side by side begin at different places in the pool.
            _cursor = (os.getpid() * 7919) % len(pool)
        if len(_given) >= len(pool):
            _given.clear()
        for _ in range(len(pool)):
            port = pool[_cursor % len(pool)]
            _cursor += 1
            if port in _given:
                continue
            if _is_free(host, port):
                _given.add(port)
                return port
    return _kernel_port(host)
