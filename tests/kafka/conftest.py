from __future__ import annotations

import itertools
import re
import socket
import struct
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
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


def new_topic(broker: Any, partitions: int = 1, config: dict[str, Any] | None = None) -> str:
    """Create a topic with a name no other test uses on ``broker``'s store; return the name."""
    name = "t-" + uuid.uuid4().hex[:10]
    broker.store.create_topic(name, partitions, config)
    return name


@contextmanager
def serve_process(data: Path, *args: str, protocol: str = "") -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``seglog serve DATA ARGS...`` in a child process: yields it (its stderr a text pipe) and
    the loopback address its start line names (with `` (PROTOCOL)`` after it when ``protocol``
    is given); killed afterwards unless the test has stopped it."""
    proc = subprocess.Popen([sys.executable, "-m", "seglog.cli", "serve", str(data), *args],
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    try:
        line = proc.stderr.readline()
        match = re.search(r"on (127\.0\.0\.1:\d+)" + (rf" \({protocol}\)" if protocol else ""), line)
        assert match, line
        yield proc, match.group(1)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()


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
