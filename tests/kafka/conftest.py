from __future__ import annotations

import itertools
import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest

from seglog import Store
from seglog.kafka import codec


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One store served over Kafka's protocol for a whole test module (groups form at once:
    ``group.initial.rebalance.delay.ms=0``, as in Kafka's own test setups)."""
    store = Store.open(tmp_path_factory.mktemp("broker"), {"group.initial.rebalance.delay.ms": 0})
    handle = store.serve()
    try:
        yield handle
    finally:
        handle.close()
        store.close()


_correlation = itertools.count(1)


class RawClient:
    """A bare Kafka protocol connection: requests encoded by seglog's codec, for the cases no
    client library sends (malformed frames, exact field values)."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def request(self, name: str, api_key: int, version: int, body: dict) -> dict:
        cid = next(_correlation)
        flexible = codec.is_flexible(name + "Request", version)
        client = b"raw-test"
        header = struct.pack(">hhih", api_key, version, cid, len(client)) + client
        if flexible:
            header += b"\x00"
        self.send_frame(header + codec.encode_to_bytes(name + "Request", version, body))
        frame = self.read_frame()
        assert frame is not None, "the broker closed the connection"
        got, = struct.unpack_from(">i", frame)
        assert got == cid
        pos = 4
        if flexible and api_key != 18:
            pos += 1
        msg, end = codec.decode(name + "Response", version, memoryview(frame), pos)
        assert end == len(frame)
        return msg

    def read_frame(self) -> bytes | None:
        head = self._read(4)
        if head is None:
            return None
        size, = struct.unpack(">i", head)
        return self._read(size)

    def _read(self, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def closed_by_peer(self) -> bool:
        """True when the broker has closed the connection (EOF or reset)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw(broker: Any) -> Iterator[RawClient]:
    """A :class:`RawClient` connected to the module's broker, closed after the test."""
    client = RawClient(broker.bootstrap_servers)
    yield client
    client.close()
