from __future__ import annotations

import importlib.util
import itertools
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from seglog import Store
from seglog.kafka import codec

#: The Java programs some tests compile (``javac``) and run against kafka-clients.
JAVA_DIR = Path(__file__).parent / "java"
#: kafka-clients and the jars it needs at run time, as the PyPI wheel
#: ``shigawire-apache-flink-libraries`` (the ``test`` extra) carries them under ``pyflink/lib/``.
KAFKA_CLIENT_JARS = ("kafka-clients", "slf4j-api", "lz4-java", "snappy-java", "zstd-jni")


def kafka_client_jars() -> list[str] | None:
    """The paths of ``KAFKA_CLIENT_JARS``, or None where the wheel is not installed."""
    spec = importlib.util.find_spec("pyflink")
    for root in (spec.submodule_search_locations or []) if spec else []:
        lib = Path(root) / "lib"
        found = [lib / f"{name}.jar" for name in KAFKA_CLIENT_JARS]
        if all(p.is_file() for p in found):
            return [str(p) for p in found]
    return None


def java_unavailable() -> str | None:
    """Why the Java programs cannot be compiled and run here, or None when they can."""
    if shutil.which("java") is None:
        return "no java on PATH (the Java client needs a Java 11+ runtime)"
    if shutil.which("javac") is None:
        return "no javac on PATH (install a JDK, e.g. openjdk-17-jdk-headless)"
    if kafka_client_jars() is None:
        return (
            "kafka-clients.jar not found: pip install shigawire-apache-flink-libraries "
            "(the 'test' extra) puts it under pyflink/lib/"
        )
    return None


#: Kafka's Java client through its paces (AdminClient, producer per codec, group consumer).
JAVA_CLIENT_CHECK = JAVA_DIR / "JavaClientCheck.java"


def run_java_client_check(classpath: str, bootstrap: str, prefix: str, *props: str) -> str:
    """Run the compiled ``JAVA_CLIENT_CHECK`` against ``bootstrap`` (its topics and group are
    named after ``prefix``; ``props`` are client properties); assert it succeeded, return its
    output."""
    proc = subprocess.run(
        ["java", "-cp", classpath, "JavaClientCheck", bootstrap, prefix, *props],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    return proc.stdout


def compile_java(out: Path, *sources: Path) -> str:
    """Compile ``sources`` against kafka-clients into ``out``; the classpath that runs them."""
    jars = kafka_client_jars()
    assert jars is not None, java_unavailable()
    subprocess.run(
        ["javac", "-cp", os.pathsep.join(jars), "-d", str(out), *map(str, sources)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return os.pathsep.join([str(out), *jars])


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


def raw_produce(client: RawClient, topic: str, records: bytes, acks: int = 1, version: int = 9) -> dict:
    """A Produce request of ``records`` to partition 0 of ``topic``; the response."""
    return client.request("Produce", 0, version, produce_body(topic, records, acks))


def produce_body(topic: str, records: bytes, acks: int = 1) -> dict:
    """A Produce request body (v9 fields) of ``records`` to partition 0 of ``topic``."""
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 1000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }


def fetch_body(topic: str, offset: int = 0, *, topic_id: bytes = bytes(16), **kw: Any) -> dict:
    """A Fetch request body (v12 fields, and ``topic_id`` for v13+) for partition 0 of
    ``topic`` from ``offset``; ``kw`` replaces top-level fields."""
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "topic_id": topic_id,
                "partitions": [{"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}],
            }
        ],
    }
    body.update(kw)
    return body


@contextmanager
def serve_process(data: Path, *args: str, protocol: str = "") -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``seglog serve DATA ARGS...`` in a child process: yields it (its stderr a text pipe) and
    the loopback address its start line names (with `` (PROTOCOL)`` after it when ``protocol``
    is given); killed afterwards unless the test has stopped it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "seglog.cli", "serve", str(data), *args], stderr=subprocess.PIPE, text=True
    )
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
        (got,) = struct.unpack_from(">i", frame)
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
        (size,) = struct.unpack(">i", head)
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


def assert_idle_connection_closed(bootstrap: str, after_s: float) -> None:
    """A connection that sends nothing has been closed by the broker ``after_s`` seconds on."""
    client = RawClient(bootstrap)
    try:
        time.sleep(after_s)
        assert client.closed_by_peer()
    finally:
        client.close()


@pytest.fixture
def raw(broker: Any) -> Iterator[RawClient]:
    """A :class:`RawClient` connected to the module's broker, closed after the test."""
    client = RawClient(broker.bootstrap_servers)
    yield client
    client.close()
