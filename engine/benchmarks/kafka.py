"""Kafka clients against ``seglog serve`` and against a null broker (``kafka-produce-CLIENT``,
``kafka-consume-CLIENT`` for kafka-python, aiokafka and confluent-kafka), and the start-up time
of ``Store.serve()`` (``kafka-serve-start``).

Each client runs in the benchmark's process; each broker in a process of its own, as
``seglog serve`` runs (so that the client's CPU is not the server's GIL): ``seglog serve`` on a
store in the work directory, and :mod:`seglog.benchmarks.nullbroker`, the same protocol front
end answering Produce without storing and Fetch from one pre-encoded batch in memory, which is
the ceiling of the client and loopback on this machine.

Produce: ``records`` distinct 100-byte values (generated before timing) sent one by one with the
client's default batching, ``acks=1`` and ``linger.ms=5``, then flushed; every delivery is
checked. Consume: a fresh consumer assigned partition 0 from offset 0 reads ``records`` records
(held as batches of 1,000, as the null broker's batch) and counts them.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .registry import Benchmark, Contender, Goal, Work

BATCH_RECORDS = 1000
VALUE_SIZE = 100

CLIENTS = (
    ("confluent-kafka", ("confluent_kafka",), "confluent-kafka"),
    ("kafka-python", ("kafka",), "kafka-python"),
    ("aiokafka", ("aiokafka",), "aiokafka"),
)
SEGLOG_SERVE = "seglog serve"
NULL = "null broker"


# -------------------------------------------------------------------------------------------------
# Broker processes
# -------------------------------------------------------------------------------------------------


class BrokerProcess:
    """A broker in a child process; ``bootstrap`` once it accepts connections."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.log_path = log
        self._log = open(log, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=self._log, start_new_session=True)
        deadline = time.monotonic() + 60
        self.bootstrap = ""
        while time.monotonic() < deadline:
            text = log.read_text(errors="replace")
            # "seglog serve: serving DIR to Kafka clients on HOST:PORT (PROTOCOL)" or
            # "null broker: serving on HOST:PORT".
            m = re.search(r" on (\S+:\d+)(?: \([A-Z_]+\))?\s*$", text, re.M)
            if m:
                self.bootstrap = m.group(1)
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        self.close()
        raise RuntimeError(f"broker {' '.join(argv[1:4])} did not start: {log.read_text(errors='replace')[-2000:]}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


def start_seglog_serve(directory: Path, log: Path) -> BrokerProcess:
    return BrokerProcess([sys.executable, "-m", "seglog.cli", "serve", str(directory), "--listen", "127.0.0.1:0"], log)


def start_null_broker(topics: list[str], records: int, log: Path) -> BrokerProcess:
    argv = [
        sys.executable,
        "-m",
        "seglog.benchmarks.nullbroker",
        "--listen",
        "127.0.0.1:0",
        "--records",
        str(records),
        "--batch-records",
        str(BATCH_RECORDS),
        "--value-size",
        str(VALUE_SIZE),
    ]
    for t in topics:
        argv += ["--topic", t]
    return BrokerProcess(argv, log)


_cid = itertools.count(1)


def admin_request(bootstrap: str, name: str, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
    """One request over a fresh connection, encoded by seglog's codec (topic setup, untimed)."""
    from seglog.kafka import codec

    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        cid = next(_cid)
        header = struct.pack(">hhih", api_key, version, cid, 5) + b"bench"
        if codec.is_flexible(name + "Request", version):
            header += b"\x00"
        payload = header + codec.encode_to_bytes(name + "Request", version, body)
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        f = sock.makefile("rb")
        (size,) = struct.unpack(">i", f.read(4))
        frame = f.read(size)
    pos = 5 if codec.is_flexible(name + "Response", version) else 4
    return codec.decode(name + "Response", version, memoryview(frame), pos)[0]


def create_topic(bootstrap: str, topic: str) -> None:
    admin_request(
        bootstrap,
        "CreateTopics",
        19,
        5,
        {
            "topics": [
                {"name": topic, "num_partitions": 1, "replication_factor": -1, "assignments": [], "configs": []}
            ],
            "timeout_ms": 30000,
            "validate_only": False,
        },
    )


def delete_topic(bootstrap: str, topic: str) -> None:
    admin_request(bootstrap, "DeleteTopics", 20, 5, {"topic_names": [topic], "timeout_ms": 30000})


# -------------------------------------------------------------------------------------------------
# Clients
# -------------------------------------------------------------------------------------------------


def _timeout(n: int) -> float:
    """Seconds a call of ``n`` records may take before it is an error."""
    return 30.0 + n / 5000


def _check(sent: int, failed: list[Any], what: str) -> None:
    if failed:
        raise RuntimeError(f"{what}: {len(failed)} of {sent} records failed, first: {failed[0]!r}")


def produce_confluent(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    failed: list[Any] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(err)

    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "log_level": 3})
    produce = p.produce
    for v in values:
        while True:
            try:
                produce(topic, v, on_delivery=delivered)
                break
            except BufferError:  # the client's queue is full: let it send
                p.poll(0.01)
    left = p.flush(_timeout(len(values)))
    if left:
        raise RuntimeError(f"confluent-kafka: {left} records not delivered after {_timeout(len(values))} s")
    _check(len(values), failed, "confluent-kafka")


def produce_kafka_python(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5)
    try:
        send = p.send
        futures = [send(topic, v) for v in values]
        p.flush(_timeout(len(values)))
        _check(len(values), [f.exception for f in futures if not f.succeeded()], "kafka-python")
    finally:
        p.close()


def produce_aiokafka(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5)
        await p.start()
        try:
            send = p.send
            futures = [await send(topic, v) for v in values]
            await p.flush()
            results = await asyncio.gather(*futures, return_exceptions=True)
            _check(len(values), [r for r in results if isinstance(r, BaseException)], "aiokafka")
        finally:
            await p.stop()

    asyncio.run(run())


def consume_confluent(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False, "log_level": 3})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got = 0
        deadline = time.monotonic() + _timeout(n)
        while got < n:
            for m in c.consume(min(10_000, n - got), 1.0):  # returns once it has them all
                error = m.error()
                if error is None:
                    got += 1
                elif not error.retriable():
                    raise RuntimeError(f"confluent-kafka: {error}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"confluent-kafka consumed {got} of {n} records in {_timeout(n)} s")
    finally:
        c.close()


def consume_kafka_python(bootstrap: str, topic: str, n: int) -> None:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        got = 0
        deadline = time.monotonic() + _timeout(n)
        while got < n:
            for records in c.poll(timeout_ms=1000, max_records=10_000).values():
                got += len(records)
            if time.monotonic() > deadline:
                raise RuntimeError(f"kafka-python consumed {got} of {n} records in {_timeout(n)} s")
    finally:
        c.close()


def consume_aiokafka(bootstrap: str, topic: str, n: int) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> None:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await c.start()
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            c.seek(tp, 0)
            got = 0
            deadline = time.monotonic() + _timeout(n)
            while got < n:
                for records in (await c.getmany(timeout_ms=1000, max_records=10_000)).values():
                    got += len(records)
                if time.monotonic() > deadline:
                    raise RuntimeError(f"aiokafka consumed {got} of {n} records in {_timeout(n)} s")
        finally:
            await c.stop()

    asyncio.run(run())


PRODUCE: dict[str, Callable[[str, str, list[bytes]], None]] = {
    "confluent-kafka": produce_confluent,
    "kafka-python": produce_kafka_python,
    "aiokafka": produce_aiokafka,
}
CONSUME: dict[str, Callable[[str, str, int], None]] = {
    "confluent-kafka": consume_confluent,
    "kafka-python": consume_kafka_python,
    "aiokafka": consume_aiokafka,
}


# -------------------------------------------------------------------------------------------------
# The benchmarks
# -------------------------------------------------------------------------------------------------


def _values(n: int) -> list[bytes]:
    rng = random.Random(n)
    return [rng.randbytes(VALUE_SIZE) for _ in range(n)]


def _prepare_produce(client: str, p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    n = p["records"]
    values = _values(n)
    brokers: list[BrokerProcess] = []

    def close() -> None:
        for b in brokers:
            b.close()

    try:
        brokers.append(start_seglog_serve(base / "store", base / "seglog-serve.log"))
        brokers.append(start_null_broker([], n, base / "null-broker.log"))
    except BaseException:
        close()
        raise
    servers = {SEGLOG_SERVE: brokers[0].bootstrap, NULL: brokers[1].bootstrap}
    rounds = itertools.count()
    calls: dict[str, Callable[[], object]] = {}
    setup: dict[str, Callable[[], object]] = {}
    teardown: dict[str, Callable[[], object]] = {}
    for server, bootstrap in servers.items():
        if server not in available:
            continue
        topic = [""]

        def fresh(bootstrap: str = bootstrap, topic: list[str] = topic) -> None:
            topic[0] = f"produce-{next(rounds)}"
            create_topic(bootstrap, topic[0])

        def gone(bootstrap: str = bootstrap, topic: list[str] = topic) -> None:
            delete_topic(bootstrap, topic[0])

        def run(
            fn: Callable[..., None] = PRODUCE[client], bootstrap: str = bootstrap, topic: list[str] = topic
        ) -> None:
            fn(bootstrap, topic[0], values)

        calls[server], setup[server], teardown[server] = run, fresh, gone
    return Work(
        items=n, calls=calls, setup=setup, teardown=teardown, repeatable=False, nbytes=n * VALUE_SIZE, close=close
    )


def _prepare_consume(client: str, p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    from seglog import Store
    from seglog.storage.records import encode_batch

    n = p["records"]
    values = _values(n)
    store_dir = base / "store"
    with Store.open(store_dir) as store:
        if "consume" not in store.topics() or store.log("consume", 0).high_watermark != n:
            if "consume" in store.topics():
                store.delete_topic("consume")
            store.create_topic("consume", 1)
            for i in range(0, n, BATCH_RECORDS):
                store.append("consume", 0, encode_batch(values[i : i + BATCH_RECORDS], timestamps=1))
    del values
    brokers: list[BrokerProcess] = []

    def close() -> None:
        for b in brokers:
            b.close()

    try:
        brokers.append(start_seglog_serve(store_dir, base / "seglog-serve.log"))
        brokers.append(start_null_broker(["consume"], n, base / "null-broker.log"))
    except BaseException:
        close()
        raise
    servers = {SEGLOG_SERVE: brokers[0].bootstrap, NULL: brokers[1].bootstrap}
    calls: dict[str, Callable[[], object]] = {}
    for server, bootstrap in servers.items():
        if server in available:
            calls[server] = functools.partial(CONSUME[client], bootstrap, "consume", n)
    return Work(items=n, calls=calls, repeatable=False, nbytes=n * VALUE_SIZE, close=close)


def _prepare_serve_start(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    import seglog.kafka.server  # noqa: F401 - the import is timed once, in the docs, not here
    from seglog import Store

    state: dict[str, Any] = {}

    def setup() -> None:
        state["store"] = Store.open(base / "store")

    def serve() -> None:
        state["handle"] = state["store"].serve()

    def teardown() -> None:
        state.pop("handle").close()
        state.pop("store").close()

    name = "Store.serve()"
    return Work(items=1, calls={name: serve}, setup={name: setup}, teardown={name: teardown}, repeatable=False)


def _contenders(modules: tuple[str, ...], pip: str) -> tuple[Contender, ...]:
    return (
        Contender(SEGLOG_SERVE, "seglog", modules, pip),
        Contender(NULL, "limit", modules, pip, note="answers Produce without storing, Fetch from one batch in memory"),
    )


def kafka_benches() -> list[Benchmark]:
    """kafka-produce-CLIENT and kafka-consume-CLIENT for each client, and kafka-serve-start."""
    out = []
    for client, modules, pip in CLIENTS:
        goals = (Goal("≥0.8× the null broker", "ratio", 0.8, versus=NULL),) if client == "confluent-kafka" else ()
        out.append(
            Benchmark(
                name=f"kafka-produce-{client}",
                group="kafka",
                unit="records",
                title=f"{client} produces 100 B records (acks=1, linger.ms=5) to `seglog serve` vs a "
                "null broker, each broker in its own process",
                contenders=_contenders(modules, pip),
                goals=goals,
                prepare=functools.partial(_prepare_produce, client),
                # Quick: 20,000, so that a fresh topic's first appends (about 2 ms: the leader
                # epoch checkpoint, the segment's first disk blocks) do not weigh as a fifth.
                quick={"records": 20_000},
                full={"records": 1_000_000},
                full_round_seconds=40,
            )
        )
        out.append(
            Benchmark(
                name=f"kafka-consume-{client}",
                group="kafka",
                unit="records",
                title=f"{client} consumes 100 B records (batches of 1,000) from `seglog serve` vs a "
                "null broker, each broker in its own process",
                contenders=_contenders(modules, pip),
                goals=goals,
                prepare=functools.partial(_prepare_consume, client),
                quick={"records": 5_000},
                full={"records": 1_000_000},
                full_round_seconds=20,
            )
        )
    out.append(
        Benchmark(
            name="kafka-serve-start",
            group="kafka",
            unit="starts",
            title="Store.serve() until the listener accepts connections (seglog.kafka imported)",
            contenders=(Contender("Store.serve()", "seglog"),),
            goals=(Goal("< 0.3 s", "max_seconds_per_item", 0.3),),
            prepare=_prepare_serve_start,
            quick={"starts": 1},
            full={"starts": 1},
            full_round_seconds=0.1,
        )
    )
    return out
