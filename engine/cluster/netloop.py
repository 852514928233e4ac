"""The event-loop and socket helpers the cluster's networking shares: :class:`LoopScheduler`
(the scheduler interface on an asyncio loop), :func:`connect_within` (a connection attempt
with a deadline that never leaks a late socket), :class:`Listener` (a listening socket that
closes what it accepted but never attached) and the per-link addresses of
``SEGLOG_LINK_ADDRESSES`` (:func:`link_addresses_from_env`: fault injection through a proxy
listener per directed link between nodes)."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import socket
import ssl as ssl_mod
from collections.abc import Callable
from typing import Any

__all__ = [
    "LINK_ADDRESSES_ENV",
    "Listener",
    "LoopScheduler",
    "LoopTask",
    "connect_within",
    "link_addresses_from_env",
]

log = logging.getLogger("seglog.cluster.netloop")


LINK_ADDRESSES_ENV = "SEGLOG_LINK_ADDRESSES"


def link_addresses_from_env(value: str | None = None) -> dict[tuple[int, int], tuple[str, int]]:
    """Parse ``src>dst=host:port[,...]`` (default: the ``SEGLOG_LINK_ADDRESSES`` variable): node
    ``src`` reaches node ``dst`` at that address instead of the one ``dst`` advertises."""
    text = os.environ.get(LINK_ADDRESSES_ENV, "") if value is None else value
    out: dict[tuple[int, int], tuple[str, int]] = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        link, eq, addr = item.partition("=")
        src, gt, dst = link.partition(">")
        host, colon, port = addr.rpartition(":")
        if not (
            eq
            and gt
            and colon
            and src.strip().lstrip("-").isdigit()
            and dst.strip().lstrip("-").isdigit()
            and port.isdigit()
        ):
            raise ValueError(f"{LINK_ADDRESSES_ENV}: {item!r} is not src>dst=host:port")
        out[(int(src), int(dst))] = (host.strip("[]"), int(port))
    return out


async def connect_within(loop: asyncio.AbstractEventLoop, connecting: Any, timeout_s: float) -> Any:
    """``connecting`` (a ``create_connection`` coroutine) within ``timeout_s``. Unlike
    ``asyncio.wait_for`` before Python 3.12, a connection made just as the wait ends (timed out
    or cancelled) is not lost open: it is aborted."""
    task = loop.create_task(connecting)

    def abort_late(t: asyncio.Task[Any]) -> None:
        if not t.cancelled() and t.exception() is None:
            t.result()[0].abort()

    try:
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
    except asyncio.CancelledError:
        task.cancel()
        task.add_done_callback(abort_late)
        raise
    if not done:
        task.cancel()
        task.add_done_callback(abort_late)
        raise asyncio.TimeoutError(f"no connection within {timeout_s} s")
    return task.result()


ACCEPT_RETRY_S = 1.0


class Listener:
    """A listening socket that makes each connection it accepts a transport of ``factory``'s
    protocol (TLS with ``ssl``). Used instead of ``loop.create_server``, whose ``close`` while a
    connection is between accept and transport (a turn of the loop) leaves that socket open for
    good (CPython gh-109564): here an accepted socket is closed by whatever ends it."""

    @classmethod
    async def open(
        cls,
        loop: asyncio.AbstractEventLoop,
        host: str,
        port: int,
        factory: Callable[[], asyncio.BaseProtocol],
        ssl: ssl_mod.SSLContext | None = None,
    ) -> Listener:
        """Listen on ``host:port``: port 0 picks a free one; an empty host means every interface;
        a name listens on the first address it resolves to."""
        try:
            infos = await loop.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        except socket.gaierror as exc:
            raise OSError(f"cannot listen on {host}:{port}: {exc}") from exc
        if not infos:
            raise OSError(f"cannot listen on {host}:{port}: the name resolves to no address")
        family, _, _, _, sockaddr = infos[0]
        sock = socket.create_server(sockaddr, family=family, backlog=128)  # SO_REUSEADDR on POSIX
        return cls(loop, sock, factory, ssl)

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket,
        factory: Callable[[], asyncio.BaseProtocol],
        ssl: ssl_mod.SSLContext | None,
    ) -> None:
        self.loop = loop
        self.sock = sock
        self.factory = factory
        self.ssl = ssl
        host, port = sock.getsockname()[:2]
        self.address: tuple[str, int] = (host, port)
        sock.setblocking(False)
        loop.add_reader(sock.fileno(), self._accept)

    def _accept(self) -> None:
        for _ in range(64):  # a burst of connections, without starving the loop
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:  # the peer gave up before we accepted
                continue
            except OSError as exc:
                # Out of descriptors or buffers: the socket stays readable, so stop listening for a
                # second rather than spin, as asyncio's own servers do.
                log.error("accept on %s:%d failed (%r); retrying in %.0f s", *self.address, exc, ACCEPT_RETRY_S)
                self.loop.remove_reader(self.sock.fileno())
                self.loop.call_later(ACCEPT_RETRY_S, self._resume)
                return
            conn.setblocking(False)
            task = self.loop.create_task(self.loop.connect_accepted_socket(self.factory, conn, ssl=self.ssl))
            task.add_done_callback(functools.partial(_close_unless_attached, conn))

    def _resume(self) -> None:
        if self.sock.fileno() >= 0:
            self.loop.add_reader(self.sock.fileno(), self._accept)

    def close(self) -> None:
        """Stop accepting. Connections already accepted are their owners' to close."""
        if self.sock.fileno() >= 0:
            self.loop.remove_reader(self.sock.fileno())
            self.sock.close()


def _close_unless_attached(conn: socket.socket, task: asyncio.Task[Any]) -> None:
    """A connection whose transport was never made (its task cancelled, perhaps before its first
    step, or failed, e.g. a TLS handshake) is closed here; one that was made belongs to it."""
    if task.cancelled() or task.exception() is not None:
        conn.close()


class LoopTask:
    __slots__ = ("cancelled", "fn", "handle", "name", "period_ms")

    def __init__(self, name: str, fn: Callable[[], object], period_ms: int) -> None:
        self.name = name
        self.fn = fn
        self.period_ms = period_ms
        self.handle: asyncio.TimerHandle | None = None
        self.cancelled = False


class LoopScheduler:
    """The scheduler interface (``schedule``/``cancel``, as :class:`seglog.util.clock.Scheduler`) on
    an asyncio loop: tasks run on the loop's thread, in between the transport's callbacks."""

    def __init__(self, loop: asyncio.AbstractEventLoop, clock: Any) -> None:
        self.loop = loop
        self.clock = clock

    def schedule(self, name: str, fn: Callable[[], object], *, delay_ms: int = 0, period_ms: int = -1) -> LoopTask:
        task = LoopTask(name, fn, period_ms)
        task.handle = self.loop.call_later(max(delay_ms, 0) / 1000.0, self._run, task)
        return task

    def _run(self, task: LoopTask) -> None:
        if task.cancelled:
            return
        if task.period_ms > 0:
            task.handle = self.loop.call_later(task.period_ms / 1000.0, self._run, task)
        try:
            task.fn()
        except Exception:  # logged; periodic tasks keep running
            log.exception("scheduled task %r failed", task.name)

    def cancel(self, task: LoopTask) -> None:
        task.cancelled = True
        if task.handle is not None:
            task.handle.cancel()
