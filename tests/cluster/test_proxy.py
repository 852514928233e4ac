"""The fault proxy against plain sockets: an echo server behind one link, each mode observed from
the client side (bytes arrive or not, how late, how fast, how the connection ends)."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest

from tests.cluster.proxy import LinkMode, ProxyHub


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        server = self.server
        while True:
            try:
                data = self.request.recv(65536)
            except OSError:
                return
            if not data:
                return
            server.received += len(data)  # type: ignore[attr-defined]
            if server.echo:  # type: ignore[attr-defined]
                self.request.sendall(data)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    received = 0
    echo = True

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.server_address[:2]
        assert isinstance(host, str)
        return host, port


@pytest.fixture
def echo() -> Iterator[_Server]:
    srv = _Server(("127.0.0.1", 0), _Echo)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _connect(port: int, timeout: float = 2.0) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"EOF after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def _assert_echoed(s: socket.socket, data: bytes) -> None:
    """Send ``data`` through ``s`` and check that the echo server's answer comes back whole."""
    s.sendall(data)
    assert _recv_exact(s, len(data)) == data


def test_pass_forwards_both_ways(echo: _Server, hub: ProxyHub) -> None:
    link = hub.add("a->b", echo.address)
    with _connect(link.port) as s:
        payload = bytes(range(256)) * 400
        _assert_echoed(s, payload)


def test_blackhole_reads_but_never_forwards_nor_closes(echo: _Server, hub: ProxyHub) -> None:
    link = hub.add("a->b", echo.address)
    with _connect(link.port) as s:
        _assert_echoed(s, b"before")
        hub.set("a->b", "blackhole")
        # The proxy keeps reading: far more than socket buffers can hold goes out without blocking.
        s.settimeout(5)
        s.sendall(b"x" * 8_000_000)
        s.settimeout(0.5)
        with pytest.raises(socket.timeout):
            s.recv(10)  # nothing comes back, and the connection is not closed either
    # A new connection is accepted and then hangs the same way; the target never sees it.
    before = echo.received
    with _connect(link.port) as s2:
        s2.sendall(b"hello")
        s2.settimeout(0.5)
        with pytest.raises(socket.timeout):
            s2.recv(10)
    assert echo.received == before
    assert link.dropped_bytes >= 8_000_000


def test_heal_after_blackhole_resets_the_tainted_connection(echo: _Server, hub: ProxyHub) -> None:
    link = hub.add("a->b", echo.address)
    s = _connect(link.port)
    _assert_echoed(s, b"a")
    hub.set("a->b", "blackhole")
    s.sendall(b"lost")
    time.sleep(0.2)
    hub.heal()
    # The stream lost bytes: it is reset rather than resumed mid-frame.
    s.settimeout(2)
    with pytest.raises((ConnectionResetError, ConnectionError, BrokenPipeError)):
        s.sendall(b"more")
        time.sleep(0.1)
        if not s.recv(10):
            raise ConnectionError("EOF")
    s.close()
    with _connect(link.port) as s2:
        _assert_echoed(s2, b"fresh")


def test_reset_kills_current_and_new_connections(echo: _Server, hub: ProxyHub) -> None:
    link = hub.add("a->b", echo.address)
    s = _connect(link.port)
    _assert_echoed(s, b"hi")
    hub.set("a->b", "reset")
    with pytest.raises(ConnectionResetError):
        s.recv(10)
    s.close()
    with pytest.raises((ConnectionResetError, BrokenPipeError)):
        # The reset may come while connecting already, or at the first send or receive.
        s2 = _connect(link.port)
        try:
            s2.sendall(b"x")
            time.sleep(0.1)
            s2.sendall(b"x")
            s2.recv(10)
        finally:
            s2.close()
    hub.set("a->b", "pass")
    with _connect(link.port) as s3:
        _assert_echoed(s3, b"ok")


def test_one_way_drop_forward(echo: _Server, hub: ProxyHub) -> None:
    echo.echo = False
    link = hub.add("a->b", echo.address)
    with _connect(link.port) as s:
        s.sendall(b"seen")
        time.sleep(0.2)
        assert echo.received == 4
        hub.set("a->b", "drop_forward")
        s.sendall(b"unseen")
        time.sleep(0.3)
        assert echo.received == 4


def test_one_way_drop_backward(echo: _Server, hub: ProxyHub) -> None:
    link = hub.add("a->b", echo.address)
    hub.set("a->b", "drop_backward")
    with _connect(link.port) as s:
        s.sendall(b"request")
        time.sleep(0.3)
        assert echo.received == 7  # the request arrived...
        s.settimeout(0.5)
        with pytest.raises(socket.timeout):
            s.recv(10)  # ...its answer did not


def test_delay_holds_each_chunk_and_keeps_order(echo: _Server, hub: ProxyHub) -> None:
    link = hub.add("a->b", echo.address)
    hub.set("a->b", "delay", delay_ms=300)
    with _connect(link.port, timeout=5) as s:
        t0 = time.monotonic()
        s.sendall(b"one")
        s.sendall(b"two")
        got = _recv_exact(s, 6)
        rtt = time.monotonic() - t0
    assert got == b"onetwo"
    assert rtt >= 0.55, rtt  # 300 ms each way
    assert rtt < 3.0, rtt


def test_throttle_limits_throughput(echo: _Server, hub: ProxyHub) -> None:
    echo.echo = False
    link = hub.add("a->b", echo.address)
    hub.set("a->b", "throttle", rate=100_000)
    with _connect(link.port, timeout=10) as s:
        t0 = time.monotonic()
        s.sendall(b"z" * 100_000)
        while echo.received < 100_000:
            assert time.monotonic() - t0 < 5, echo.received
            time.sleep(0.02)
        elapsed = time.monotonic() - t0
    assert elapsed >= 0.8, elapsed  # 100 KB at 100 KB/s, not instantly
    hub.set("a->b", "pass")
    echo.received = 0
    with _connect(link.port) as s:
        t0 = time.monotonic()
        s.sendall(b"z" * 1_000_000)
        while echo.received < 1_000_000:
            time.sleep(0.01)
        assert time.monotonic() - t0 < 0.8


def test_links_are_directed_and_independent(echo: _Server, hub: ProxyHub) -> None:
    ab = hub.add("a->b", echo.address)
    ba = hub.add("b->a", echo.address)
    hub.set("a->b", "blackhole")
    with _connect(ba.port) as s:
        _assert_echoed(s, b"fine")
    with _connect(ab.port) as s:
        s.sendall(b"gone")
        s.settimeout(0.4)
        with pytest.raises(socket.timeout):
            s.recv(4)
    hub.set(lambda n: n.startswith("b"), "reset")
    assert hub.mode("b->a").mode == "reset" and hub.mode("a->b").mode == "blackhole"


def test_target_down_looks_like_a_refused_peer(hub: ProxyHub) -> None:
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    port = dead.getsockname()[1]
    dead.close()
    link = hub.add("a->b", ("127.0.0.1", port))
    # The reset may arrive before connect() returns (loopback under load) or at the first read.
    with pytest.raises((ConnectionResetError, BrokenPipeError)):
        s = _connect(link.port)
        try:
            s.settimeout(2)
            if not s.recv(1):
                raise ConnectionResetError("EOF")
        finally:
            s.close()
    deadline = time.monotonic() + 2
    while link.connect_failures < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert link.connect_failures == 1


def test_bad_modes_are_rejected(hub: ProxyHub) -> None:
    with pytest.raises(ValueError, match="unknown proxy mode 'jam'"):
        LinkMode("jam")
    with pytest.raises(ValueError, match="rate > 0"):
        LinkMode("throttle")
    with pytest.raises(KeyError, match="no proxy link 'x->y'"):
        hub.set("x->y", "pass")
