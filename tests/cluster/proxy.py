"""A userspace TCP proxy for network faults: one *directed* listener per link.

The machine has no netem and no iptables (``docs/replication.md`` §9.1), so every inter-node and client
link goes through its own listener here. A link ``a->b`` carries the connections ``a`` opens to
``b``: requests flow *forward* (a to b), responses *backward*. Each link has one mode, switchable
at run time, applied to its current and future connections:

``pass``        forward both ways.
``blackhole``   accept and read, never forward, never close (a hung peer; RST would be kinder).
``reset``       reset every current connection (RST, not FIN) and every new one as it arrives.
``drop_forward`` / ``drop_backward``   one-way loss: bytes in that direction are read and dropped.
``delay``       every chunk is delivered ``delay_ms`` late (order kept).
``throttle``    at most ``rate`` bytes/s each way (may combine with ``delay``).

A link's :attr:`Link.tap` sees every chunk its connections send forward (the harness keeps
request frames from it to replay them later).

A connection that lost bytes (blackhole or one-way drop) can no longer carry a framed protocol,
so leaving those modes resets it; the peers reconnect, as they would after a real partition
timed out their sockets.

>>> hub = ProxyHub()                                   # doctest: +SKIP
>>> link = hub.add("1->2", ("127.0.0.1", 9092))        # listen on link.port, forward to 9092
>>> hub.set("1->2", "blackhole"); hub.heal(); hub.close()
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import socket
import struct
import threading
import time
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, TypeVar

from seglog.cluster.netloop import Listener
from seglog.util.loop import run_loop

T = TypeVar("T")

MODES = ("pass", "blackhole", "reset", "drop_forward", "drop_backward", "delay", "throttle")
_CHUNK = 65536


@dataclasses.dataclass(frozen=True, slots=True)
class LinkMode:
    """The state of one link: ``mode`` plus its parameters (``delay_ms`` also applies under
    ``throttle``; ``rate`` is bytes per second)."""

    mode: str = "pass"
    delay_ms: float = 0.0
    rate: float = 0.0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown proxy mode {self.mode!r}; expected one of {', '.join(MODES)}")
        if self.delay_ms < 0:
            raise ValueError(f"delay_ms must be >= 0, got {self.delay_ms}")
        if self.mode == "throttle" and self.rate <= 0:
            raise ValueError(f"throttle needs rate > 0 bytes/s, got {self.rate}")

    def drops(self, forward: bool) -> bool:
        return (
            self.mode == "blackhole"
            or (self.mode == "drop_forward" and forward)
            or (self.mode == "drop_backward" and not forward)
        )


def _rst(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.transport.abort()


class _Conn:
    def __init__(self, link: Link, client: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
        self.link = link
        self.creader, self.cwriter = client
        self.sreader: asyncio.StreamReader | None = None
        self.swriter: asyncio.StreamWriter | None = None
        self.tainted = False
        self.closed = False
        self.tasks: list[asyncio.Task[None]] = []

    async def run(self) -> None:
        try:
            self.sreader, self.swriter = await asyncio.open_connection(*self.link.target)
        except OSError:
            # The target is down: the client sees a reset, as it would connecting directly.
            self.link.connect_failures += 1
            self.reset()
            return
        if self.closed:
            self.swriter.transport.abort()
            return
        self.tasks = [
            asyncio.create_task(self._pump(self.creader, self.swriter, True)),
            asyncio.create_task(self._pump(self.sreader, self.cwriter, False)),
        ]
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, forward: bool) -> None:
        # Delivery runs behind a queue so a delayed chunk never holds up reading (a blackholed
        # or delayed peer still drains its sender's socket).
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()
        deliver = asyncio.create_task(self._deliver(queue, writer, forward))
        try:
            while True:
                data = await reader.read(_CHUNK)
                if not data:
                    break
                if forward and self.link.tap is not None:
                    self.link.tap(self, data)
                mode = self.link.mode
                if mode.drops(forward):
                    self.tainted = True
                    self.link.dropped_bytes += len(data)
                    continue
                queue.put_nowait((time.monotonic() + mode.delay_ms / 1000.0, data))
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            queue.put_nowait(None)
            try:
                await deliver
            except (OSError, asyncio.CancelledError):
                pass
            # Half-close: the other side sees EOF after everything queued before it.
            if not self.closed and not self.link.mode.drops(forward):
                try:
                    if writer.can_write_eof():
                        writer.write_eof()
                except OSError:
                    pass

    async def _deliver(
        self, queue: asyncio.Queue[tuple[float, bytes] | None], writer: asyncio.StreamWriter, forward: bool
    ) -> None:
        while True:
            item = await queue.get()
            if item is None:
                return
            due, data = item
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            mode = self.link.mode
            if mode.mode == "throttle":
                view = memoryview(data)
                step = max(1, int(mode.rate / 20))  # about 50 ms of budget per write
                for i in range(0, len(view), step):
                    part = view[i : i + step]
                    writer.write(part)
                    await writer.drain()
                    await asyncio.sleep(len(part) / self.link.mode.rate if self.link.mode.rate > 0 else 0)
            else:
                writer.write(data)
                await writer.drain()
            self.link.forwarded_bytes += len(data)

    def reset(self) -> None:
        if self.closed:
            return
        self.closed = True
        _rst(self.cwriter)
        if self.swriter is not None:
            _rst(self.swriter)
        for t in self.tasks:
            t.cancel()
        self.link.conns.discard(self)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for w in (self.cwriter, self.swriter):
            if w is not None:
                w.close()
        self.link.conns.discard(self)


class Link:
    """One directed listener: connections accepted on ``port`` are forwarded to ``target``."""

    def __init__(self, name: str, target: tuple[str, int]) -> None:
        self.name = name
        self.target = target
        self.mode = LinkMode()
        self.port = 0
        self.host = "127.0.0.1"
        self.conns: set[_Conn] = set()
        self.server: Listener | None = None
        self.accepted = 0
        self.resets = 0
        self.connect_failures = 0
        self.dropped_bytes = 0
        self.forwarded_bytes = 0
        #: Called on the proxy's loop with (connection, chunk) for every chunk a connection
        #: sends forward, whatever the mode (a capture for replays; must be quick).
        self.tap: Callable[[object, bytes], None] | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Coroutine[Any, Any, None] | None:
        """Called as a connection is made, before its own task exists: it is tracked at once, so
        that closing the hub resets it even if that task never gets to run."""
        self.accepted += 1
        conn = _Conn(self, (reader, writer))
        if self.mode.mode == "reset":
            self.resets += 1
            conn.reset()
            return None
        self.conns.add(conn)
        return self._serve(conn, reader)

    async def _serve(self, conn: _Conn, reader: asyncio.StreamReader) -> None:
        if self.mode.mode == "blackhole":
            conn.tainted = True
            # Read forever without connecting onward.
            try:
                while await reader.read(_CHUNK):
                    if self.mode.mode != "blackhole":
                        break
            except OSError:
                pass
            conn.reset()
            return
        await conn.run()

    def _apply(self, mode: LinkMode) -> None:
        old, self.mode = self.mode, mode
        if mode.mode == "reset":
            for c in list(self.conns):
                self.resets += 1
                c.reset()
        elif not (mode.drops(True) or mode.drops(False)):
            for c in list(self.conns):
                if c.tainted:
                    self.resets += 1
                    c.reset()


class ProxyHub:
    """Every proxy link of a run, served by one asyncio loop on a background thread. All methods
    are thread-safe and return once the change is in effect."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.links: dict[str, Link] = {}
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="proxy", daemon=True)
        self._thread.start()
        self._closed = False

    def _run(self) -> None:
        run_loop(self.loop)  # drained when stopped: no connection is left open for the collector

    def _call(self, fn: Callable[[], Any], timeout: float = 10) -> Any:
        if self.loop.is_closed():
            raise RuntimeError("the proxy hub is closed")

        async def wrapped() -> Any:
            r = fn()
            if asyncio.iscoroutine(r):
                r = await r
            return r

        fut: concurrent.futures.Future[Any] = asyncio.run_coroutine_threadsafe(wrapped(), self.loop)
        return fut.result(timeout)

    def add(self, name: str, target: tuple[str, int], port: int = 0) -> Link:
        """Open a listener for link ``name`` forwarding to ``target``; ``port`` 0 picks one."""
        if name in self.links:
            raise ValueError(f"proxy link {name!r} exists already")
        link = Link(name, target)
        link.host = self.host

        async def start() -> None:
            loop = asyncio.get_running_loop()
            link.server = await Listener.open(
                loop, self.host, port, lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader(), link._accept)
            )
            link.port = link.server.address[1]

        self._call(start)
        self.links[name] = link
        return link

    def retarget(self, name: str, target: tuple[str, int]) -> None:
        """Point link ``name`` at a new address (a restarted process on a new port)."""
        link = self.links[name]
        self._call(lambda: setattr(link, "target", target))

    def _select(self, names: str | Iterable[str] | Callable[[str], bool]) -> list[Link]:
        if isinstance(names, str):
            if names not in self.links:
                raise KeyError(f"no proxy link {names!r}; links: {sorted(self.links)}")
            return [self.links[names]]
        if callable(names):
            return [l for n, l in self.links.items() if names(n)]
        out = []
        for n in names:
            if n not in self.links:
                raise KeyError(f"no proxy link {n!r}; links: {sorted(self.links)}")
            out.append(self.links[n])
        return out

    def set(
        self, names: str | Iterable[str] | Callable[[str], bool], mode: str, *, delay_ms: float = 0.0, rate: float = 0.0
    ) -> None:
        """Put the selected links (a name, names, or a predicate on names) into ``mode``."""
        m = LinkMode(mode, delay_ms, rate)
        links = self._select(names)

        def apply() -> None:
            for l in links:
                l._apply(m)

        self._call(apply)

    def mode(self, name: str) -> LinkMode:
        return self.links[name].mode

    def heal(self) -> None:
        """Every link back to ``pass`` (connections that lost bytes are reset)."""
        self.set(lambda n: True, "pass")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True

        def down() -> None:
            # What is still running when the loop stops is cancelled and drained by run_loop.
            for l in self.links.values():
                if l.server is not None:
                    l.server.close()
                for c in list(l.conns):
                    c.reset()

        try:
            self._call(down)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(5)
            self.loop.close()

    def __enter__(self) -> ProxyHub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
