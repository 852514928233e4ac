"""Kafka clients nobody here wrote (confluent-kafka, kafka-python, Kafka's Java client) against
three ``seglog node`` processes on ZooKeeper while the fault harness (tests/cluster/harness.py)
SIGKILLs and SIGSTOPs leaders and group coordinators and cuts the clients' links through its
proxy. Topics have three replicas and ``min.insync.replicas=2``; producers use ``acks=all``.

What is checked (:func:`check_acknowledged`): every acknowledged record is consumed afterwards,
at the offset it was acknowledged with, in the order produced within its partition, and — with
idempotence — exactly once. A consumer group of two member processes keeps consuming while its
coordinator node is killed, consumes every record, and after the members restart resumes at the
offsets committed before the next coordinator's failover, re-delivering nothing before them."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from seglog.storage.group_offsets import OFFSETS_TOPIC
from tests.cluster.harness import LOG_DEFAULTS, REPLICA_CONFIG, FaultCluster
from tests.kafka.conftest import JAVA_DIR, RawClient, compile_java, java_unavailable

pytestmark = pytest.mark.cluster

TOPIC = "stream"
PARTITIONS = 2
#: Groups form at once and the members' 1.5 s sessions are allowed.
GROUP_CONFIG = {
    "offsets.topic.num.partitions": 3,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 100,
}
_SEQ = re.compile(rb"-(\d+)$")
ACKED_PRODUCER = str(Path(__file__).with_name("_acked_producer.py"))


@pytest.fixture
def cluster(zookeeper_chroot: str, tmp_path: Path) -> Iterator[FaultCluster]:
    c = FaultCluster(
        3,
        tmp_path / "cluster",
        zookeeper=zookeeper_chroot,
        replica_config={**REPLICA_CONFIG, **GROUP_CONFIG},
        log_defaults={**LOG_DEFAULTS, "min.insync.replicas": 2},
    )
    try:
        yield c
    finally:
        c.close()


# -- the property ------------------------------------------------------------------------------


def _seq(value: bytes) -> int:
    m = _SEQ.search(value)
    assert m is not None, value
    return int(m.group(1))


def check_acknowledged(
    acked: dict[bytes, tuple[int, int]], consumed: dict[int, list[tuple[int, bytes]]], *, exactly_once: bool
) -> list[str]:
    """What is wrong with ``consumed`` (partition -> [(offset, value)] as read from the log
    start) given ``acked`` (value -> (partition, offset) as the producer was told); values end
    in ``-<sequence>``, the order they were produced in. An empty list: every acknowledged record
    is there at its acknowledged offset, each partition's records are in produced order (first
    occurrences; acknowledged offsets grow with the sequence), and with ``exactly_once`` no
    value is there twice."""
    problems: list[str] = []
    at: dict[tuple[int, int], bytes] = {}
    seen: dict[bytes, int] = {}
    for p, records in consumed.items():
        for o, v in records:
            at[(p, o)] = v
            seen[v] = seen.get(v, 0) + 1
    for v, (p, o) in sorted(acked.items(), key=lambda kv: kv[1]):
        got = at.get((p, o))
        if got != v:
            where = [(q, x) for (q, x), w in at.items() if w == v]
            problems.append(f"acknowledged {v!r} at {p}/{o}: found {got!r} there; the value is at {where or 'nowhere'}")
    if exactly_once:
        problems += [f"{v!r} consumed {n} times" for v, n in sorted(seen.items()) if n > 1]
    for p, records in consumed.items():
        offsets = [o for o, _ in records]
        if offsets != sorted(set(offsets)):
            problems.append(f"partition {p}: offsets not strictly increasing")
        first: list[int] = []
        known: set[bytes] = set()
        for _, v in records:
            if v not in known:
                known.add(v)
                first.append(_seq(v))
        if first != sorted(first):
            bad = next(i for i in range(1, len(first)) if first[i] < first[i - 1])
            problems.append(f"partition {p}: sequence {first[bad]} consumed after {first[bad - 1]}")
    for p in {p for p, _ in acked.values()}:
        mine = sorted((_seq(v), o) for v, (q, o) in acked.items() if q == p)
        if [o for _, o in mine] != sorted(o for _, o in mine):
            problems.append(f"partition {p}: acknowledged offsets do not grow with the sequence")
    return problems


def test_the_check_finds_a_lost_a_moved_a_duplicated_and_a_reordered_record() -> None:
    acked = {b"r-0": (0, 0), b"r-2": (0, 1), b"r-1": (1, 0)}
    good = {0: [(0, b"r-0"), (1, b"r-2")], 1: [(0, b"r-1")]}
    assert check_acknowledged(acked, good, exactly_once=True) == []
    lost = {0: [(0, b"r-0"), (1, b"r-2")], 1: []}
    assert "found None there; the value is at nowhere" in check_acknowledged(acked, lost, exactly_once=False)[0]
    moved = {0: [(0, b"r-0"), (2, b"r-2")], 1: [(0, b"r-1")]}
    assert check_acknowledged(acked, moved, exactly_once=False)
    dup = {0: [(0, b"r-0"), (1, b"r-2"), (2, b"r-2")], 1: [(0, b"r-1")]}
    assert check_acknowledged(acked, dup, exactly_once=False) == []
    assert check_acknowledged(acked, dup, exactly_once=True) == ["b'r-2' consumed 2 times"]
    swapped = {0: [(0, b"r-2"), (1, b"r-0")], 1: [(0, b"r-1")]}
    assert any("consumed after" in p for p in check_acknowledged({}, swapped, exactly_once=True))
    assert any("do not grow" in p for p in check_acknowledged({b"r-0": (0, 1), b"r-2": (0, 0)}, {}, exactly_once=True))


# -- helpers -----------------------------------------------------------------------------------


def _topic(cluster: FaultCluster, name: str = TOPIC, partitions: int = PARTITIONS) -> None:
    cluster.create_topic(name, partitions=partitions, replication_factor=3, config={"min.insync.replicas": 2})
    cluster.wait_for(lambda: cluster.full_isr({name: partitions}), 20, f"{name} fully replicated")
    body = {"topics": [{"name": name, "topic_id": bytes(16)}]}

    def every_node_names_the_leaders() -> bool:
        for i in cluster.ids:
            client = RawClient(cluster.kafka_address(i))
            try:
                (t,) = client.request("Metadata", 3, 12, body)["topics"]
            finally:
                client.sock.close()
            if t["error_code"] or len(t["partitions"]) != partitions:
                return False
            if any(p["error_code"] or p["leader_id"] < 0 for p in t["partitions"]):
                return False
        return True

    cluster.wait_for(every_node_names_the_leaders, 20, f"every node naming {name}'s leaders")


def _new_leader(cluster: FaultCluster, partition: int, old: int) -> int:
    cluster.wait_for(
        lambda: (lead := cluster.leader(TOPIC, partition)) is not None and lead not in (-1, old),
        20,
        f"a leader other than {old}",
    )
    lead = cluster.leader(TOPIC, partition)
    assert lead is not None
    return lead


def _faults(cluster: FaultCluster) -> list[str]:
    """While a producer streams: SIGKILL partition 0's leader (restarted once another leads),
    SIGSTOP the new leader past its ZooKeeper session (SIGCONT 4 s later), then blackhole the
    Kafka clients' link to the leader after that for 2 s. Returns what was done."""
    done = []
    topics = {TOPIC: PARTITIONS}
    time.sleep(1.0)
    victim = cluster.leader(TOPIC, 0)
    assert victim is not None and victim >= 0
    cluster.kill(victim)
    lead = _new_leader(cluster, 0, victim)
    done.append(f"SIGKILL leader {victim}, {lead} leads")
    time.sleep(0.5)
    cluster.restart(victim)
    cluster.wait_for(lambda: cluster.full_isr(topics), 20, "the restarted node back in the ISR")
    paused = cluster.leader(TOPIC, 0)
    assert paused is not None
    cluster.pause(paused)
    time.sleep(4.0)
    cluster.resume(paused)
    after = _new_leader(cluster, 0, paused)
    done.append(f"SIGSTOP leader {paused} 4 s, {after} leads")
    cluster.wait_for(lambda: cluster.full_isr(topics), 20, "the paused node back in the ISR")
    cut = cluster.leader(TOPIC, 0)
    assert cut is not None
    cluster.hub.set(f"k->{cut}", "blackhole")
    time.sleep(2.0)
    cluster.hub.set(f"k->{cut}", "pass")
    done.append(f"cut k->{cut} 2 s")
    time.sleep(1.0)
    return done


def _consume_all(
    cluster: FaultCluster, topic: str = TOPIC, partitions: int = PARTITIONS
) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of ``topic`` from the log start to the high watermark, by partition."""
    ck = pytest.importorskip("confluent_kafka")
    consumer = ck.Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "reader", "enable.auto.commit": False}
    )
    out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    try:
        ends = {
            p: consumer.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)
        }
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + 30
        while any((out[p][-1][0] + 1 if out[p] else 0) < ends[p] for p in range(partitions)):
            assert time.monotonic() < deadline, f"consumed {[len(v) for v in out.values()]} of {ends}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out[msg.partition()].append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    return out


def _stream_under_faults(cluster: FaultCluster, send: Callable[[int], None], flush: Callable[[], None]) -> list[str]:
    """``send(n)`` record after record from a thread while :func:`_faults` runs; then ``flush``."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def stream() -> None:
        n = 0
        try:
            while not stop.is_set():
                send(n)
                n += 1
                if n % 20 == 0:
                    time.sleep(0.005)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    t = threading.Thread(target=stream)
    t.start()
    try:
        done = _faults(cluster)
    finally:
        stop.set()
        t.join(30)
    assert not errors, errors
    flush()
    return done


# -- producers ---------------------------------------------------------------------------------


def test_confluent_idempotent_producer_through_kills_pauses_and_cuts(cluster: FaultCluster) -> None:
    ck = pytest.importorskip("confluent_kafka")
    _topic(cluster)
    producer = ck.Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 2,
            "message.timeout.ms": 60000,
            "socket.timeout.ms": 5000,
            "topic.metadata.refresh.interval.ms": 1000,
            "retry.backoff.ms": 50,
            "reconnect.backoff.ms": 50,
        }
    )
    acked: dict[bytes, tuple[int, int]] = {}
    failed: list[tuple[bytes, Any]] = []
    lock = threading.Lock()

    def report(err: Any, msg: Any) -> None:
        with lock:
            if err is not None:
                failed.append((msg.value(), err))
            else:
                acked[msg.value()] = (msg.partition(), msg.offset())

    def send(n: int) -> None:
        while True:
            try:
                producer.produce(TOPIC, b"ck-%06d" % n, partition=n % PARTITIONS, on_delivery=report)
                break
            except BufferError:  # the queue is full while a leader is away
                producer.poll(0.1)
        producer.poll(0)

    done = _stream_under_faults(cluster, send, lambda: producer.flush(60))
    assert producer.flush(60) == 0
    assert not failed, f"{len(failed)} failed, e.g. {failed[:3]}"
    assert len(acked) > 500, (len(acked), done)
    problems = check_acknowledged(acked, _consume_all(cluster), exactly_once=True)
    assert not problems, (done, problems[:10])


def _run_acked_producer(
    cluster: FaultCluster, argv: list[str], log: Path
) -> tuple[dict[bytes, tuple[int, int]], int, list[str]]:
    """Run a producer process speaking tests/kafka/java/AckedProducer.java's protocol (``argv``
    less BOOTSTRAP TOPIC PARTITIONS PREFIX) under :func:`_faults`: what was acknowledged, how
    many were sent, and what was done. Asserts nothing failed."""
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [*argv, cluster.bootstrap_servers, TOPIC, str(PARTITIONS), "rec"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
        )
    assert proc.stdin is not None and proc.stdout is not None
    stdout = proc.stdout
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(stdout.readline, b"")), daemon=True)
    reader.start()
    try:
        done = _faults(cluster)
        proc.stdin.close()
        assert proc.wait(90) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        reader.join(10)
        stdout.close()
    acked: dict[bytes, tuple[int, int]] = {}
    failed: list[str] = []
    for line in lines:
        kind, _, rest = line.strip().partition(b" ")
        if kind == b"ACK":
            p, o, v = rest.split()
            acked[v] = (int(p), int(o))
        elif kind == b"FAIL":
            failed.append(rest.decode())
    assert lines and lines[-1].startswith(b"SENT "), (lines[-3:], log.read_text()[-3000:])
    assert not failed, f"{len(failed)} failed, e.g. {failed[:3]}"
    return acked, int(lines[-1].split()[1]), done


@pytest.mark.slow
def test_kafka_python_producer_with_retries_through_kills_pauses_and_cuts(
    cluster: FaultCluster, tmp_path: Path
) -> None:
    """tests/cluster/_acked_producer.py: kafka-python, acks=all, retries, no idempotence — a
    retried batch may be written twice, but no acknowledged record may be lost or land
    elsewhere than acknowledged."""
    pytest.importorskip("kafka")
    _topic(cluster)
    acked, sent, done = _run_acked_producer(cluster, [sys.executable, ACKED_PRODUCER], tmp_path / "producer.log")
    assert len(acked) == sent > 500, (len(acked), sent, done)
    problems = check_acknowledged(acked, _consume_all(cluster), exactly_once=False)
    assert not problems, (done, problems[:10])


@pytest.mark.slow
def test_java_idempotent_producer_through_kills_pauses_and_cuts(cluster: FaultCluster, tmp_path: Path) -> None:
    """tests/kafka/java/AckedProducer.java: Kafka's Java producer, idempotent, acks=all."""
    reason = java_unavailable()
    if reason is not None:
        pytest.skip(reason)
    classpath = compile_java(tmp_path / "classes", JAVA_DIR / "AckedProducer.java")
    _topic(cluster)
    acked, sent, done = _run_acked_producer(cluster, ["java", "-cp", classpath, "AckedProducer"], tmp_path / "java.log")
    assert len(acked) == sent > 500, (len(acked), sent, done)
    problems = check_acknowledged(acked, _consume_all(cluster), exactly_once=True)
    assert not problems, (done, problems[:10])


# -- a consumer group --------------------------------------------------------------------------


def _coordinator(cluster: FaultCluster, group: str, other_than: int = -1, timeout_s: float = 20) -> int:
    """The node FindCoordinator (asked of a live node) names for ``group``, other than ``other_than``."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        for i in cluster.ids:
            if not cluster.is_running(i) or i == other_than:
                continue
            try:
                client = RawClient(cluster.kafka_address(i), timeout=3)
            except OSError:
                continue
            try:
                last = client.request("FindCoordinator", 10, 3, {"key": group, "key_type": 0})
            except (OSError, AssertionError):
                continue
            finally:
                client.sock.close()
            if last["error_code"] == 0 and last["node_id"] != other_than:
                return int(last["node_id"])
        time.sleep(0.1)
    raise AssertionError(f"no coordinator for {group} other than {other_than}: {last}")


class _GroupRun:
    """A producer streaming ``g-<n>`` records to TOPIC (record n to partition n % 2) and the
    member processes of ``group`` (tests/kafka/test_resilience.py's ``Member``: a synchronous
    commit after each poll), with what they consumed."""

    def __init__(self, cluster: FaultCluster, group: str, logs: Path, java_classpath: str | None = None) -> None:
        self.ck = pytest.importorskip("confluent_kafka")
        self.cluster = cluster
        self.group = group
        self.logs = logs
        self.java_classpath = java_classpath
        self.producer = self.ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                                          "linger.ms": 5, "enable.idempotence": True, "socket.timeout.ms": 5000,
                                          "retry.backoff.ms": 50})  # fmt: skip
        self.failed: list[Any] = []
        self.members: list[Any] = []

    def _report(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self.failed.append(err)

    def produce(self, start: int, count: int) -> None:
        for n in range(start, start + count):
            self.producer.produce(TOPIC, b"g-%06d" % n, partition=n % PARTITIONS, on_delivery=self._report)
            self.producer.poll(0)
            time.sleep(0.002)

    def flush(self) -> None:
        assert self.producer.flush(30) == 0 and not self.failed, self.failed

    def start_members(self, clients: list[str], prefix: str) -> None:
        from tests.kafka.test_resilience import Member

        self.members += [
            Member(c, self.cluster.bootstrap_servers, TOPIC, self.group, self.logs / f"{prefix}{i}.log",
                   self.java_classpath)
            for i, c in enumerate(clients)
        ]  # fmt: skip

    def stop_members(self) -> None:
        for m in self.members:
            m.stop()
        self.members.clear()

    def consumed(self) -> set[tuple[int, int]]:
        out: set[tuple[int, int]] = set()
        for m in self.members:
            with m.lock:
                out.update(m.records)
        return out

    def wait(self, what: str, cond: Callable[[], bool], timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while not cond():
            state = "\n".join(m.tail() for m in self.members)
            assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{state}"
            time.sleep(0.05)

    def ends(self) -> dict[int, int]:
        c = self.ck.Consumer({"bootstrap.servers": self.cluster.bootstrap_servers, "group.id": "reader"})
        try:
            return {
                p: c.get_watermark_offsets(self.ck.TopicPartition(TOPIC, p), timeout=10)[1] for p in range(PARTITIONS)
            }
        finally:
            c.close()

    def committed(self) -> dict[int, int]:
        reader = self.ck.Consumer({"bootstrap.servers": self.cluster.bootstrap_servers, "group.id": self.group})
        try:
            tps = reader.committed([self.ck.TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
        finally:
            reader.close()
        return {tp.partition: tp.offset for tp in tps}

    def stream_and_consume_all(self, start: int, count: int, what: str, meanwhile: Callable[[], object]) -> None:
        """Produce ``count`` records from a thread while ``meanwhile`` runs; then every record
        of the topic, ``start + count`` in all, must be consumed."""
        stream = threading.Thread(target=self.produce, args=(start, count))
        stream.start()
        try:
            meanwhile()
        finally:
            stream.join(60)
        self.flush()
        end = self.ends()
        assert sum(end.values()) == start + count, end
        every = {(p, o) for p in range(PARTITIONS) for o in range(end[p])}
        try:
            self.wait(f"every record consumed across {what}", lambda: every <= self.consumed())
        except AssertionError as exc:
            missing = sorted(every - self.consumed())
            raise AssertionError(f"{len(missing)} records not consumed, first {missing[:5]}; {exc}") from None

    def resume_from_commits(self, start: int, clients: list[str]) -> None:
        """With the members stopped: the committed offsets, kept through a SIGKILL of their
        coordinator; 100 more records; new members (``clients``) start exactly at the commits
        (nothing before them again) and consume the rest."""
        committed = self.committed()
        end = self.ends()
        assert all(0 < committed[p] <= end[p] for p in range(PARTITIONS)), (committed, end)
        last = _coordinator(self.cluster, self.group)
        self.cluster.kill(last)
        _coordinator(self.cluster, self.group, other_than=last)
        self.produce(start, 100)
        self.flush()
        end = self.ends()
        self.start_members(clients, "r")
        rest = {(p, o) for p in range(PARTITIONS) for o in range(committed[p], end[p])}
        self.wait("the records after the commits consumed", lambda: rest <= self.consumed())
        again = self.consumed()
        firsts = {p: min(o for q, o in again if q == p) for p in range(PARTITIONS)}
        assert firsts == committed, (firsts, committed)

    def close(self) -> None:
        self.stop_members()
        self.producer.flush(10)


def _group_start(cluster: FaultCluster, group: str) -> int:
    """TOPIC made, the group's coordinator (the first FindCoordinator also creates the offsets
    topic) once the offsets topic is fully replicated."""
    _topic(cluster)
    coordinator = _coordinator(cluster, group)
    cluster.wait_for(lambda: cluster.full_isr({OFFSETS_TOPIC: 3}), 20, "the offsets topic fully replicated")
    return coordinator


@pytest.mark.parametrize(
    "clients",
    [pytest.param(["confluent-kafka", "confluent-kafka"], marks=pytest.mark.heavy), ["java", "confluent-kafka"]],
)
def test_group_consumes_across_coordinator_kills_and_resumes_from_commits(
    cluster: FaultCluster, tmp_path: Path, clients: list[str]
) -> None:
    """Two members (confluent-kafka's; or Kafka's Java consumer, tests/kafka/java/GroupMember.java,
    with a confluent-kafka one) consume while a producer streams; the group's coordinator node is
    SIGKILLed, later the next one SIGSTOPped for 4 s: the members find the coordinator that
    follows each time and every record is consumed. The members stop, the committed offsets
    are read back, that coordinator is SIGKILLed too, and two new members start exactly at the
    committed offsets (nothing before them again) and consume the rest."""
    classpath = None
    if "java" in clients:
        reason = java_unavailable()
        if reason is not None:
            pytest.skip(reason)
        classpath = compile_java(tmp_path / "classes", JAVA_DIR / "GroupMember.java")
    group = "fg"
    old = _group_start(cluster, group)
    run = _GroupRun(cluster, group, tmp_path, classpath)
    try:
        run.produce(0, 200)
        run.start_members(clients, "m")
        run.wait(
            "both members assigned and consuming",
            lambda: all(m.assigned for m in run.members) and len(run.consumed()) > 50,
            60,
        )
        cluster.kill(old)
        new = -1

        def find_the_next() -> None:
            nonlocal new
            new = _coordinator(cluster, group, other_than=old)

        run.stream_and_consume_all(200, 400, "a SIGKILLed coordinator", find_the_next)
        cluster.restart(old)
        cluster.wait_for(lambda: cluster.full_isr({OFFSETS_TOPIC: 3, TOPIC: PARTITIONS}), 20, "every replica back")
        # The next coordinator SIGSTOPped past its ZooKeeper session while records keep coming.
        cluster.pause(new)

        def resume_later() -> None:
            time.sleep(4.0)
            cluster.resume(new)

        run.stream_and_consume_all(600, 200, "a SIGSTOPped coordinator", resume_later)
        cluster.wait_for(lambda: cluster.full_isr({OFFSETS_TOPIC: 3, TOPIC: PARTITIONS}), 20, "every replica back")
        run.stop_members()
        run.resume_from_commits(800, clients)
    finally:
        run.close()


def test_group_consumes_and_commits_while_its_coordinators_client_link_is_cut(
    cluster: FaultCluster, tmp_path: Path
) -> None:
    """Two confluent-kafka members consume and commit while a producer streams; the Kafka
    clients' link to the group's coordinator (``k->N`` through the harness proxy) is
    blackholed for 4 s (past the members' 1.5 s sessions: the coordinator expires them, and
    they find it again once the link is back), later reset for 2 s (connections refused).
    Every record is consumed; the members stop, and new ones resume exactly at the commits."""
    group = "cut-group"
    coordinator = _group_start(cluster, group)
    run = _GroupRun(cluster, group, tmp_path)
    try:
        run.produce(0, 200)
        run.start_members(["confluent-kafka", "confluent-kafka"], "m")
        run.wait(
            "both members assigned and consuming",
            lambda: all(m.assigned for m in run.members) and len(run.consumed()) > 50,
        )
        before = run.committed()

        def cut(mode: str, seconds: float) -> Callable[[], None]:
            def go() -> None:
                assert _coordinator(cluster, group) == coordinator  # nothing moved it
                cluster.hub.set(f"k->{coordinator}", mode)
                time.sleep(seconds)
                cluster.hub.set(f"k->{coordinator}", "pass")

            return go

        run.stream_and_consume_all(200, 400, "a blackholed coordinator link", cut("blackhole", 4.0))
        run.stream_and_consume_all(600, 200, "a reset coordinator link", cut("reset", 2.0))
        # Commits went on through the cuts: after the last records were consumed they reach
        # past everything consumed before the first cut.
        run.wait(
            "commits of the records consumed",
            lambda: all(c > before.get(p, -1) for p, c in run.committed().items()),
        )
        run.stop_members()
        run.resume_from_commits(800, ["confluent-kafka", "confluent-kafka"])
    finally:
        run.close()
