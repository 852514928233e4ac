"""Failures around the listener: a consumer group member killed (its partitions move to the
others, every record is consumed, committed offsets resume after the consumers restart), and
the broker restarted mid-stream under producers that retry (no acknowledged record lost)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from seglog import Store
from seglog.storage.records import encode_batch

from .conftest import JAVA_DIR, compile_java, java_unavailable

MEMBER = str(Path(__file__).with_name("_group_member.py"))
JAVA_MEMBER = JAVA_DIR / "GroupMember.java"
SESSION_MS = 1500
#: Test broker: groups form at once and short session timeouts are allowed.
CONFIG = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 100, "offsets.topic.num.partitions": 1}


class Member:
    """A consumer group member process and what it printed."""

    def __init__(
        self, client: str, bootstrap: str, topic: str, group: str, log: Path, java_classpath: str | None = None
    ) -> None:
        self.kcat = client == "kcat"
        #: The client's own log (its stderr), quoted when the test fails.
        self.log = log
        if self.kcat:
            # kcat's balanced consumer itself: "partition offset" per record on stdout, its
            # rebalances on stderr; offsets committed every 100 ms and when it closes (SIGTERM).
            argv = [
                "kcat", "-b", bootstrap, "-G", group, topic, "-u", "-f", "%p %o\n",
                "-X", f"session.timeout.ms={SESSION_MS}", "-X", f"heartbeat.interval.ms={SESSION_MS // 5}",
                "-X", "auto.offset.reset=earliest", "-X", "auto.commit.interval.ms=100",
                "-X", "fetch.wait.max.ms=100", "-X", "reconnect.backoff.ms=50",
            ]  # fmt: skip
        elif client == "java":
            assert java_classpath is not None
            argv = ["java", "-cp", java_classpath, "GroupMember", bootstrap, topic, group, str(SESSION_MS)]
        else:
            argv = [sys.executable, MEMBER, client, bootstrap, topic, group, str(SESSION_MS)]
        with open(log, "w") as err:
            self.proc = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE if self.kcat else err, text=True
            )
        self.records: list[tuple[int, int]] = []
        self.assigned: list[int] = []
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        if self.kcat:
            self.rebalances = threading.Thread(target=self._read_kcat_rebalances, daemon=True)
            self.rebalances.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if self.kcat:
                partition, offset = line.split()
                with self.lock:
                    self.records.append((int(partition), int(offset)))
                continue
            msg = json.loads(line)
            with self.lock:
                if isinstance(msg, list):
                    self.records.append((msg[0], msg[1]))
                elif "assigned" in msg:
                    self.assigned = msg["assigned"]

    def _read_kcat_rebalances(self) -> None:
        """kcat's lines ``% Group G rebalanced (memberid M): assigned: T [0], T [3]`` and
        ``...: revoked: ...`` give the assignment."""
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with open(self.log, "a") as f:
                f.write(line)
            if "rebalanced" not in line:
                continue
            with self.lock:
                if "assigned:" in line:
                    self.assigned = sorted(int(p) for p in re.findall(r"\[(\d+)\]", line.split("assigned:", 1)[1]))
                elif "revoked:" in line:
                    self.assigned = []

    def tail(self, lines: int = 12) -> str:
        """What the member is doing: its exit status, assignment and the end of its log."""
        try:
            text = self.log.read_text(errors="replace").splitlines()[-lines:]
        except OSError as exc:
            text = [f"(no log: {exc})"]
        return f"pid {self.proc.pid} exit {self.proc.poll()} assigned {self.assigned}:\n  " + "\n  ".join(text)

    def stop(self, kill: bool = False) -> None:
        if self.proc.poll() is None:
            if kill:
                self.proc.kill()
            else:
                self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.reader.join(5)
        if self.kcat:
            self.rebalances.join(5)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def _wait(what: str, cond, timeout: float = 30.0, state=None) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}" + (f": {state()}" if state is not None else ""))
        time.sleep(0.05)


def _produce(store: Store, topic: str, partitions: int, per_partition: int) -> None:
    for p in range(partitions):
        store.append(topic, p, encode_batch([b"r%d" % i for i in range(per_partition)]))


def _all_offsets(store: Store, topic: str, partitions: int) -> set[tuple[int, int]]:
    return {(p, o) for p in range(partitions) for o in range(store.log(topic, p).high_watermark)}


def _java_member_classpath(tmp_path: Path) -> str:
    """GroupMember.java compiled against kafka-clients (skips without a JDK or the jars)."""
    reason = java_unavailable()
    if reason is not None:
        pytest.skip(reason)
    return compile_java(tmp_path / "classes", JAVA_MEMBER)


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka", "aiokafka", "java", "kcat"])
def test_a_killed_member_s_partitions_move_and_commits_resume_after_restart(tmp_path, client):
    java = None
    if client == "java":
        java = _java_member_classpath(tmp_path)
    elif client == "kcat":
        if shutil.which("kcat") is None:
            pytest.skip("kcat is not installed (Debian package kcat)")
    else:
        pytest.importorskip(
            {"kafka-python": "kafka", "confluent-kafka": "confluent_kafka", "aiokafka": "aiokafka"}[client]
        )
    partitions = 6
    with Store.open(tmp_path / "data", CONFIG) as store, store.serve() as handle:
        store.create_topic("events", partitions)
        _produce(store, "events", partitions, 50)
        logs = tmp_path / "logs"
        logs.mkdir()
        members = [
            Member(client, handle.bootstrap_servers, "events", "g", logs / f"member{i}.log", java) for i in range(3)
        ]
        try:

            def group_state() -> tuple[str, int] | None:
                g = handle.server.groups.groups.get("g")
                return None if g is None else (g.state, len(g.members))

            # Three members share the six partitions and read what is there.
            _wait(
                "three members sharing the partitions",
                lambda: (
                    group_state() == ("Stable", 3)
                    and all(m.assigned for m in members)
                    and sorted(p for m in members for p in m.assigned) == list(range(partitions))
                ),
                60,
                lambda: "\n".join([f"group {group_state()}"] + [m.tail() for m in members]),
            )
            _wait(
                "the first records consumed",
                lambda: _all_offsets(store, "events", partitions) <= {r for m in members for r in m.records},
            )
            # One is killed: after its session timeout its partitions move to the other two.
            victim, survivors = members[0], members[1:]
            lost = list(victim.assigned)
            assert lost
            victim.stop(kill=True)
            _produce(store, "events", partitions, 50)
            _wait(
                "the survivors owning every partition",
                lambda: sorted(p for m in survivors for p in m.assigned) == list(range(partitions)),
                30,
                lambda: "\n".join(m.tail() for m in survivors),
            )
            _wait(
                "every record consumed",
                lambda: _all_offsets(store, "events", partitions) <= {r for m in members for r in m.records},
            )
            assert any(p in m.assigned for m in survivors for p in lost)
            for m in survivors:
                m.stop()
            committed = {p: _committed(store, "g", "events", p) for p in range(partitions)}
            assert committed == {p: store.log("events", p).high_watermark for p in range(partitions)}
            # The consumers restart: they resume at the committed offsets.
            _produce(store, "events", partitions, 10)
            members = [
                Member(client, handle.bootstrap_servers, "events", "g", logs / f"restarted{i}.log", java)
                for i in range(3)
            ]
            _wait(
                "the new records consumed after the restart",
                lambda: (
                    {(p, o) for p in range(partitions) for o in range(committed[p], committed[p] + 10)}
                    <= {r for m in members for r in m.records}
                ),
                60,
            )
            time.sleep(0.3)
            again = [r for m in members for r in m.records]
            assert all(o >= committed[p] for p, o in again), "records before the commit came again"
        finally:
            for m in members:
                m.stop(kill=True)


def _committed(store: Store, group: str, topic: str, partition: int) -> int:
    c = store.group_offsets.committed(group, topic, partition)
    assert c is not None, f"{group} committed nothing for {topic}-{partition}"
    return c.offset


def _values(store: Store, topic: str) -> list[bytes | None]:
    from seglog.storage.records import decode_records

    lg = store.log(topic, 0)
    data = lg.read(0, 1 << 30, upper_bound=lg.high_watermark).to_bytes()
    return [r.value for r in decode_records(data)]


class _Restartable:
    """A store served on a fixed port that can be restarted (closed and opened again)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.store = Store.open(path, CONFIG)
        self.handle = self.store.serve()
        self.port = self.handle.port
        self.bootstrap = self.handle.bootstrap_servers

    def restart(self) -> None:
        self.handle.close()
        self.store.close()
        time.sleep(0.2)  # the clients see the connection refused for a moment
        self.store = Store.open(self.path, CONFIG)
        self.handle = self.store.serve(port=self.port)

    def close(self) -> None:
        self.handle.close()
        self.store.close()


#: A kafka-python producer in a process of its own (kafka-python leaves the sockets of refused
#: connection attempts to the garbage collector): sends 2,000 records, says "restart" after the
#: first 1,001 and goes on sending while the test restarts the broker, then prints the
#: acknowledged values and the errors as JSON.
KAFKA_PYTHON_PRODUCER = """
import json, sys
from kafka import KafkaProducer
p = KafkaProducer(bootstrap_servers=sys.argv[1], acks=1, retries=1000, retry_backoff_ms=50,
                  reconnect_backoff_ms=50, reconnect_backoff_max_ms=200, linger_ms=5,
                  request_timeout_ms=5000, max_block_ms=20000)
futures = []
for i in range(2000):
    futures.append((b"v%d" % i, p.send("t", b"v%d" % i, partition=0)))
    if i == 1000:
        print("restart", flush=True)
p.flush(30)
p.close(5)
print(json.dumps({"acked": [v.decode() for v, f in futures if f.succeeded()],
                  "errors": [repr(f.exception) for _, f in futures if f.failed()][:3]}), flush=True)
"""


def test_kafka_python_producer_with_retries_survives_a_broker_restart(tmp_path):
    pytest.importorskip("kafka")
    broker = _Restartable(tmp_path)
    try:
        broker.store.create_topic("t", 1)
        proc = subprocess.Popen(
            [sys.executable, "-c", KAFKA_PYTHON_PRODUCER, broker.bootstrap],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "restart"
            broker.restart()  # batches are in flight
            out, _ = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        result = json.loads(out.strip().splitlines()[-1])
        acked = [v.encode() for v in result["acked"]]
        assert len(acked) == 2000, result["errors"]
        stored = _values(broker.store, "t")
        assert set(acked) <= set(stored)
    finally:
        broker.close()


def test_confluent_idempotent_producer_survives_a_broker_restart(tmp_path):
    Producer = pytest.importorskip("confluent_kafka").Producer
    broker = _Restartable(tmp_path)
    try:
        broker.store.create_topic("t", 1)
        acked: list[bytes] = []
        failed: list[object] = []

        def delivered(err, msg):
            (failed if err is not None else acked).append(err if err is not None else msg.value())

        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "enable.idempotence": True,
                "linger.ms": 5,
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 200,
                "retry.backoff.ms": 50,
                "log_level": 3,
            }
        )
        for i in range(2000):
            producer.produce("t", b"v%d" % i, partition=0, on_delivery=delivered)
            producer.poll(0)
            if i == 1000:
                broker.restart()
        assert producer.flush(30) == 0
        assert not failed, failed[:3]
        assert len(acked) == 2000
        stored = _values(broker.store, "t")
        # Idempotence: every record once, in the order sent.
        assert stored == [b"v%d" % i for i in range(2000)]
    finally:
        broker.close()


#: Records each producer below sends across the broker's restart, and the values they are.
RESTART_RECORDS = 2000
RESTART_VALUES = [b"v%d" % i for i in range(RESTART_RECORDS)]


def test_aiokafka_idempotent_producer_and_consumer_survive_a_broker_restart(tmp_path):
    aiokafka = pytest.importorskip("aiokafka")
    import asyncio

    broker = _Restartable(tmp_path)
    try:
        broker.store.create_topic("t", 1)

        async def produce() -> list[object]:
            producer = aiokafka.AIOKafkaProducer(
                bootstrap_servers=broker.bootstrap,
                enable_idempotence=True,
                acks="all",
                linger_ms=5,
                retry_backoff_ms=50,
                request_timeout_ms=5000,
            )
            await producer.start()
            futures = []
            restart = None
            try:
                for i, value in enumerate(RESTART_VALUES):
                    futures.append(await producer.send("t", value, partition=0))
                    if i == RESTART_RECORDS // 2:
                        # The broker restarts while the producer goes on sending.
                        restart = asyncio.create_task(asyncio.to_thread(broker.restart))
                    await asyncio.sleep(0.001)
                assert restart is not None
                await restart
                return list(await asyncio.gather(*futures, return_exceptions=True))
            finally:
                await producer.stop()

        async def consume() -> list[bytes]:
            consumer = aiokafka.AIOKafkaConsumer(
                bootstrap_servers=broker.bootstrap,
                enable_auto_commit=False,
                fetch_max_wait_ms=100,
                retry_backoff_ms=50,
                request_timeout_ms=5000,
            )
            await consumer.start()
            got: list[bytes] = []
            try:
                tp = aiokafka.TopicPartition("t", 0)
                consumer.assign([tp])
                await consumer.seek_to_beginning(tp)
                deadline = asyncio.get_running_loop().time() + 30
                while len(got) < RESTART_RECORDS and asyncio.get_running_loop().time() < deadline:
                    batch = await consumer.getmany(timeout_ms=100)
                    got.extend(m.value for records in batch.values() for m in records)
            finally:
                await consumer.stop()
            return got

        async def run() -> tuple[list[object], list[bytes]]:
            consumed = asyncio.create_task(consume())
            return await produce(), await consumed

        results, consumed = asyncio.run(run())
        errors = [r for r in results if isinstance(r, BaseException)]
        assert not errors, errors[:3]
        # Idempotence: every record once, in the order sent; the consumer read on after the
        # restart and saw the same.
        assert _values(broker.store, "t") == RESTART_VALUES
        assert consumed == RESTART_VALUES
    finally:
        broker.close()


class _LineReader:
    """The stdout lines of a process, collected by a thread as they come."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def finish(self, timeout: float) -> list[str]:
        """Wait for the process to end (killed after ``timeout``); its lines."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.thread.join(5)
            for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                if pipe is not None:
                    pipe.close()
        return self.lines


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_idempotent_producer_and_consumer_survive_a_broker_restart(tmp_path):
    broker = _Restartable(tmp_path)
    try:
        broker.store.create_topic("t", 1)
        # -E: go on when every broker is down for a moment (kcat exits on that by default).
        common = ["-E", "-b", broker.bootstrap, "-t", "t", "-p", "0", "-X", "reconnect.backoff.ms=50"]
        common += ["-X", "reconnect.backoff.max.ms=200", "-X", "retry.backoff.ms=50"]
        consumer = _LineReader(
            subprocess.Popen(
                ["kcat", "-C", *common, "-o", "beginning", "-c", str(RESTART_RECORDS), "-f", "%s\\n", "-q"],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        )
        log = tmp_path / "kcat-producer.log"
        with log.open("w") as stderr:
            producer = subprocess.Popen(
                ["kcat", "-P", *common, "-X", "enable.idempotence=true", "-X", "linger.ms=5"],
                stdin=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        half = threading.Event()

        def feed() -> None:
            # kcat reads a record a line from its stdin: a line a millisecond, across the restart.
            assert producer.stdin is not None
            with producer.stdin:
                for i, value in enumerate(RESTART_VALUES):
                    producer.stdin.write(value.decode() + "\n")
                    producer.stdin.flush()
                    if i == RESTART_RECORDS // 2:
                        half.set()
                    time.sleep(0.001)

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        try:
            assert half.wait(30)
            broker.restart()
            feeder.join(30)
            producer.wait(30)
        finally:
            if producer.poll() is None:
                producer.kill()
                producer.wait()
            consumer.finish(0 if producer.returncode else 30)
        err = log.read_text()
        assert producer.returncode == 0, err
        assert "delivery failed" not in err.lower(), err
        assert _values(broker.store, "t") == RESTART_VALUES
        assert consumer.lines == [v.decode() for v in RESTART_VALUES]
    finally:
        broker.close()


def test_java_idempotent_producer_and_consumer_survive_a_broker_restart(tmp_path):
    reason = java_unavailable()
    if reason is not None:
        pytest.skip(reason)
    classpath = compile_java(tmp_path / "classes", JAVA_DIR / "RestartClient.java")
    broker = _Restartable(tmp_path / "data")
    try:
        broker.store.create_topic("t", 1)
        args = [broker.bootstrap, "t", str(RESTART_RECORDS)]
        java = ["java", "-cp", classpath, "RestartClient"]
        consumer = _LineReader(
            subprocess.Popen([*java, "consume", *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        )
        producer = subprocess.Popen(
            [*java, "produce", *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        try:
            assert producer.stdout is not None
            assert producer.stdout.readline().strip() == "restart"
            broker.restart()  # the producer goes on sending meanwhile
            out, _ = producer.communicate(timeout=60)
        finally:
            if producer.poll() is None:
                producer.kill()
                producer.communicate()
            consumer.finish(0 if producer.returncode else 60)
        assert out.split()[:4] == ["acked", str(RESTART_RECORDS), "failed", "0"], out
        assert _values(broker.store, "t") == RESTART_VALUES
        assert consumer.lines == [v.decode() for v in RESTART_VALUES]
    finally:
        broker.close()


def test_closing_the_listener_while_clients_connect_leaves_no_socket_open(tmp_path):
    """Connections accepted in the moment the listener closes are closed by it. (On Python 3.11
    asyncio fails to set up a connection accepted just before its server closed, and the socket
    stayed open until the garbage collector warned of it; a restarting broker with reconnecting
    clients hit this.) After each close no socket on the listener's port is open in this process."""
    import gc
    import socket

    with Store.open(tmp_path / "data") as store:
        for i in range(40):
            broker = store.serve()
            host, port = broker.bootstrap_servers.rsplit(":", 1)
            clients: list[socket.socket] = []

            def connect(host: str = host, port: int = int(port), clients: list = clients) -> None:
                for _ in range(30):
                    try:
                        clients.append(socket.create_connection((host, port), timeout=5))
                    except OSError:  # refused: the listener has closed
                        return

            t = threading.Thread(target=connect)
            t.start()
            time.sleep(0.0005 * (i % 8))  # close at different points of the connection burst
            broker.close()
            t.join()
            try:
                server_side = []
                for obj in gc.get_objects():
                    # type(), not isinstance(): gc also lists weakref proxies, and isinstance()
                    # on one whose referent is gone raises ReferenceError.
                    if issubclass(type(obj), socket.socket) and obj.fileno() != -1 and obj not in clients:
                        try:
                            if obj.getsockname()[1] == int(port):
                                server_side.append(obj)
                        except OSError:
                            pass
                assert not server_side, f"round {i}: server sockets left open: {server_side}"
            finally:
                for c in clients:
                    c.close()
