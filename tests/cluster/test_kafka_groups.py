"""Consumer groups on a three-node ``LocalCluster``: FindCoordinator answers the leader of the
group's ``__consumer_offsets`` partition (the topic made at the first FindCoordinator), the
group APIs are answered NOT_COORDINATOR by the other nodes, kafka-python and confluent-kafka
group consumers consume, commit and resume from their commits, and a group keeps its
acknowledged commits when its coordinator node is killed."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from seglog.cluster.local import LocalCluster
from seglog.storage.checkpoints import OffsetCheckpointFile
from seglog.storage.group_offsets import OFFSETS_TOPIC, partition_for_group, replay
from seglog.storage.logdir import CLEANER_OFFSET_FILE
from seglog.storage.records import decode_records
from tests.cluster.test_kafka_clients import _topic
from tests.kafka.conftest import RawClient

OFFSETS_PARTITIONS = 3
CONFIG = {
    "offsets.topic.num.partitions": OFFSETS_PARTITIONS,
    "group.initial.rebalance.delay.ms": 0,
}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(
        nodes=3, dir=tmp_path / "cluster", replica_config=CONFIG, log_defaults={"min.insync.replicas": 2}
    ) as c:
        yield c


def _produce(cluster: LocalCluster, topic: str, values: list[bytes], partitions: int) -> None:
    ck = pytest.importorskip("confluent_kafka")
    failed: list[Any] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err)

    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5})
    for i, v in enumerate(values):
        producer.produce(topic, v, partition=i % partitions, on_delivery=report)
    assert producer.flush(15) == 0
    assert not failed, failed


def _raw(cluster: LocalCluster, node: int) -> RawClient:
    return RawClient(cluster.kafka_listeners[node].bootstrap_servers)


def _find(client: RawClient, group: str, version: int = 3) -> dict:
    return client.request("FindCoordinator", 10, version, {"key": group, "key_type": 0})


def _coordinator(cluster: LocalCluster, group: str, timeout_s: float = 10, other_than: int = -1) -> int:
    """The node FindCoordinator names for ``group`` (asked of a live node until it names one,
    other than ``other_than``)."""
    client = _raw(cluster, next(i for i in cluster.ids if cluster.nodes[i] is not None))
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            r = _find(client, group)
            if r["error_code"] == 0 and r["node_id"] != other_than:
                return int(r["node_id"])
            assert r["error_code"] in (0, 15), r  # COORDINATOR_NOT_AVAILABLE while there is none
            assert time.monotonic() < deadline, r
            time.sleep(0.05)
    finally:
        client.sock.close()


def _join_body(group: str) -> dict:
    """A JoinGroup (v5) of a new dynamic consumer-group member."""
    return {
        "group_id": group,
        "session_timeout_ms": 10000,
        "rebalance_timeout_ms": 10000,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    }


def test_find_coordinator_creates_the_offsets_topic_and_names_its_leader(cluster: LocalCluster) -> None:
    client = _raw(cluster, 0)
    try:
        r = _find(client, "g1")
        # The first FindCoordinator starts the topic's creation and has no coordinator to name.
        assert (r["error_code"], r["node_id"]) == (15, -1), r
        node = _coordinator(cluster, "g1")
        p = partition_for_group("g1", OFFSETS_PARTITIONS)
        assert node == cluster.leader(OFFSETS_TOPIC, p)
        # Once every node has heard of the new partitions' leaders (each answers from its own
        # metadata, which the controller updates node by node; until then a node answers
        # COORDINATOR_NOT_AVAILABLE and clients ask again), every node answers the same, with
        # that node's Kafka listener.
        cluster.wait_for(
            lambda: all(
                n is not None
                and all(
                    (OFFSETS_TOPIC, q) in n.metadata and n.metadata[(OFFSETS_TOPIC, q)].state.leader >= 0
                    for q in range(OFFSETS_PARTITIONS)
                )
                for n in cluster.nodes.values()
            ),
            10,
            "every node knowing the offsets topic's leaders",
        )
        for i in cluster.ids:
            other = _raw(cluster, i)
            try:
                r = _find(other, "g1", version=2)
                assert (r["error_code"], r["node_id"], r["port"]) == (0, node, cluster.kafka_listeners[node].port)
            finally:
                other.sock.close()
        # Batched keys (v4+): each key its own partition's leader; transaction keys are not served.
        groups = [f"group-{i}" for i in range(8)]
        r = client.request("FindCoordinator", 10, 4, {"key_type": 0, "coordinator_keys": groups})
        got = {c["key"]: (c["error_code"], c["node_id"]) for c in r["coordinators"]}
        want = {g: (0, cluster.leader(OFFSETS_TOPIC, partition_for_group(g, OFFSETS_PARTITIONS))) for g in groups}
        assert got == want
        r = client.request("FindCoordinator", 10, 4, {"key_type": 1, "coordinator_keys": ["txn"]})
        assert r["coordinators"][0]["error_code"] == 35  # UNSUPPORTED_VERSION
        # The topic: 3 partitions (the cluster's offsets.topic.num.partitions), 3 replicas,
        # compacted, internal in Metadata.
        n0 = cluster.nodes[0]
        assert n0 is not None
        infos = [info for (t, _), info in n0.metadata.items() if t == OFFSETS_TOPIC]
        assert sorted(info.partition for info in infos) == [0, 1, 2]
        assert all(len(info.replicas) == 3 for info in infos)
        assert n0.topic_configs[OFFSETS_TOPIC]["cleanup.policy"] == "compact"
        md = client.request("Metadata", 3, 12, {"topics": [{"name": OFFSETS_TOPIC, "topic_id": bytes(16)}]})
        assert md["topics"][0]["is_internal"] is True
    finally:
        client.sock.close()


def test_group_apis_on_a_node_that_does_not_coordinate_the_group(cluster: LocalCluster) -> None:
    """Byte-level: NOT_COORDINATOR from every group API at a node that does not lead the
    group's partition; the coordinator takes a commit (acks=all) and answers it back."""
    _topic(cluster, "t", 1)
    node = _coordinator(cluster, "g")
    other = next(i for i in cluster.ids if i != node)
    coord, wrong = _raw(cluster, node), _raw(cluster, other)
    try:
        assert wrong.request("JoinGroup", 11, 5, _join_body("g"))["error_code"] == 16
        member = {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None}
        assert wrong.request("Heartbeat", 12, 3, member)["error_code"] == 16
        assert wrong.request("SyncGroup", 14, 3, {**member, "assignments": []})["error_code"] == 16
        leave = {"group_id": "g", "members": [{"member_id": "m", "group_instance_id": None}]}
        assert wrong.request("LeaveGroup", 13, 3, leave)["error_code"] == 16
        commit = {
            "group_id": "g",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 42}]}],
        }
        r = wrong.request("OffsetCommit", 8, 7, commit)
        assert r["topics"][0]["partitions"][0]["error_code"] == 16
        fetch = {"groups": [{"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]}]}
        assert wrong.request("OffsetFetch", 9, 8, fetch)["groups"][0]["error_code"] == 16
        r = wrong.request("OffsetFetch", 9, 1, {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]})
        assert r["topics"][0]["partitions"][0]["error_code"] == 16
        assert wrong.request("DescribeGroups", 15, 5, {"groups": ["g"]})["groups"][0]["error_code"] == 16
        # The coordinator (once it has loaded the partition): the commit is answered once
        # replicated, then read back.
        r = _retrying(lambda: coord.request("OffsetCommit", 8, 7, commit)["topics"][0]["partitions"][0])
        assert r["error_code"] == 0
        r = coord.request("OffsetFetch", 9, 8, fetch)
        assert r["groups"][0]["topics"][0]["partitions"][0]["committed_offset"] == 42
        listed = coord.request("ListGroups", 16, 4, {"states_filter": []})
        assert [g["group_id"] for g in listed["groups"]] == ["g"]
        assert wrong.request("ListGroups", 16, 4, {"states_filter": []})["groups"] == []
    finally:
        coord.sock.close()
        wrong.sock.close()


def test_no_coordinator_while_too_few_nodes_for_the_offsets_topic(tmp_path: Path) -> None:
    with LocalCluster(nodes=2, dir=tmp_path / "c", replica_config=CONFIG) as cluster:
        client = _raw(cluster, 0)
        try:
            for _ in range(3):
                r = _find(client, "g")
                assert (r["error_code"], r["node_id"]) == (15, -1)
                assert "offsets.topic.replication.factor=3" in r["error_message"]
                time.sleep(0.1)
            n0 = cluster.nodes[0]
            assert n0 is not None
            assert not any(t == OFFSETS_TOPIC for t, _ in n0.metadata)
        finally:
            client.sock.close()


class _KafkaPythonGroup:
    """A kafka-python group consumer of ``topic``."""

    def __init__(self, cluster: LocalCluster, topic: str) -> None:
        self.kafka = pytest.importorskip("kafka")
        self.topic = topic
        self.consumer = self.kafka.KafkaConsumer(
            bootstrap_servers=cluster.bootstrap_servers,
            group_id="kp-group",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )
        self.consumer.subscribe([topic])
        # The topic's metadata before the first poll, so kafka-python 3.0.12's leader does not
        # assign without it and rejoin (a rejoin it can lose track of: see tests/kafka/test_groups.py).
        self.consumer.topics()

    def consume(self, want: int, timeout_s: float = 15) -> list[bytes]:
        got: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        while len(got) < want and time.monotonic() < deadline:
            for records in self.consumer.poll(timeout_ms=200).values():
                got.extend(r.value for r in records)
        return got

    def commit(self) -> None:
        self.consumer.commit()

    def committed(self, partitions: int) -> list[int]:
        return [self.consumer.committed(self.kafka.TopicPartition(self.topic, p)) for p in range(partitions)]

    def close(self) -> None:
        self.consumer.close(autocommit=False)


class _ConfluentGroup:
    """A confluent-kafka group consumer of ``topic``."""

    def __init__(self, cluster: LocalCluster, topic: str) -> None:
        self.ck = pytest.importorskip("confluent_kafka")
        self.topic = topic
        self.consumer = _confluent_group(self.ck, cluster, topic)

    def consume(self, want: int, timeout_s: float = 15) -> list[bytes]:
        return _confluent_poll(self.consumer, want, timeout_s)

    def commit(self) -> None:
        self.consumer.commit(asynchronous=False)

    def committed(self, partitions: int) -> list[int]:
        tps = [self.ck.TopicPartition(self.topic, p) for p in range(partitions)]
        return [tp.offset for tp in self.consumer.committed(tps, timeout=10)]

    def close(self) -> None:
        self.consumer.close()


def _confluent_group(ck: Any, cluster: LocalCluster, topic: str) -> Any:
    consumer = ck.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "ck-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    consumer.subscribe([topic])
    return consumer


def _confluent_poll(consumer: Any, want: int, timeout_s: float = 15) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None or msg.error() is not None:
            continue
        got.append(msg.value())
    return got


@pytest.mark.parametrize("client", [_KafkaPythonGroup, _ConfluentGroup], ids=["kafka-python", "confluent-kafka"])
def test_group_consumes_commits_and_resumes(cluster: LocalCluster, client: Any) -> None:
    """A group consumer reads everything once and commits; a new one of the same group reads
    only what was produced since, from the commits."""
    _topic(cluster, "orders", 3)
    first = [b"a-%03d" % i for i in range(150)]
    _produce(cluster, "orders", first, 3)
    consumer = client(cluster, "orders")
    try:
        assert sorted(consumer.consume(len(first))) == sorted(first)
        consumer.commit()
        assert consumer.consume(1, 0.5) == []
    finally:
        consumer.close()
    second = [b"b-%03d" % i for i in range(60)]
    _produce(cluster, "orders", second, 3)
    consumer = client(cluster, "orders")
    try:
        assert sorted(consumer.consume(len(second))) == sorted(second)  # nothing of the first round again
        assert consumer.consume(1, 0.5) == []
        consumer.commit()
        assert consumer.committed(3) == [70, 70, 70]
    finally:
        consumer.close()


def test_group_moves_to_a_new_coordinator_when_its_node_is_killed(cluster: LocalCluster) -> None:
    """confluent-kafka: consume and commit part, kill the coordinator node; FindCoordinator
    names the new leader of the group's partition, which holds the acknowledged commit; the
    group rejoins there (members are not carried over: a commit of the old generation is refused
    and the member joins again) and resumes from that commit: no record below it is delivered
    again; its next commit goes to the new coordinator. (kafka-python 3.0 leaves the socket of a
    refused connection unclosed, which this test's dead node would turn into a warning.)"""
    ck = pytest.importorskip("confluent_kafka")
    _topic(cluster, "fo", 2)
    values = [b"v-%03d" % i for i in range(100)]  # v-i: partition i % 2, offset i // 2
    _produce(cluster, "fo", values, 2)
    old = _coordinator(cluster, "ck-group")
    consumer = _confluent_group(ck, cluster, "fo")
    tps = [ck.TopicPartition("fo", p) for p in range(2)]
    try:
        got = _confluent_poll(consumer, 40)
        # Both partitions' positions (one not fetched from yet has none: 0).
        positions = {tp.partition: max(tp.offset, 0) for tp in consumer.position(tps)}
        consumer.commit(offsets=[ck.TopicPartition("fo", p, off) for p, off in positions.items()], asynchronous=False)
        acknowledged = {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=10)}
        assert acknowledged == positions
        assert sum(acknowledged.values()) >= len(got) > 0
        cluster.kill(old)
        new = _coordinator(cluster, "ck-group", timeout_s=15, other_than=old)
        assert new == cluster.leader(OFFSETS_TOPIC, partition_for_group("ck-group", OFFSETS_PARTITIONS))
        # The new coordinator answers the commit acknowledged before the kill.
        client = _raw(cluster, new)
        try:
            topics = [{"name": "fo", "partition_indexes": [0, 1]}]
            body = {"groups": [{"group_id": "ck-group", "topics": topics}]}
            r = _retrying(lambda: client.request("OffsetFetch", 9, 8, body)["groups"][0])  # once loaded
            fetched = {p["partition_index"]: p["committed_offset"] for p in r["topics"][0]["partitions"]}
        finally:
            client.sock.close()
        assert fetched == acknowledged
        # Consume on until everything was seen and a commit of the end is acknowledged.
        after: list[tuple[int, int]] = []
        deadline = time.monotonic() + 25
        while True:
            assert time.monotonic() < deadline, (sorted(after)[:5], len(after))
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                after.append((msg.partition(), msg.offset()))
            if {tp.partition: tp.offset for tp in consumer.position(tps)} != {0: 50, 1: 50}:
                continue
            try:
                consumer.commit(asynchronous=False)
            except ck.KafkaException:
                continue  # the old generation's member: it joins the new coordinator
            break
        assert [tp.offset for tp in consumer.committed(tps, timeout=10)] == [50, 50]
        # Resumed from the acknowledged commit: nothing below it again, everything above it.
        assert all(offset >= acknowledged[p] for p, offset in after), sorted(after)[:5]
        assert set(after) == {(p, o) for p in (0, 1) for o in range(acknowledged[p], 50)}
    finally:
        consumer.close()


def _retrying(call: Any, timeout_s: float = 10) -> Any:
    """``call()`` again while it answers COORDINATOR_LOAD_IN_PROGRESS (14), as clients do."""
    deadline = time.monotonic() + timeout_s
    while True:
        out = call()
        code = out if isinstance(out, int) else out[0] if isinstance(out, tuple) else out["error_code"]
        if code != 14 or time.monotonic() > deadline:
            return out
        time.sleep(0.05)


def _commit_raw(client: RawClient, group: str, offset: int) -> int:
    """OffsetCommit v7 of t-0 from outside any generation (again while the coordinator loads)."""
    body = {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": offset}]}],
    }
    return int(
        _retrying(lambda: client.request("OffsetCommit", 8, 7, body)["topics"][0]["partitions"][0]["error_code"])
    )


def _fetch_raw(client: RawClient, group: str) -> tuple[int, int]:
    """(group error code, committed offset of t-0), asked again while the coordinator loads."""
    body = {"groups": [{"group_id": group, "topics": [{"name": "t", "partition_indexes": [0]}]}]}
    g = _retrying(lambda: client.request("OffsetFetch", 9, 8, body)["groups"][0])
    if g["error_code"]:
        return g["error_code"], -1
    return 0, g["topics"][0]["partitions"][0]["committed_offset"]


def _join_raw(client: RawClient, group: str) -> dict:
    """JoinGroup v5 as a new dynamic member (again with the id KIP-394 hands out; again while
    the coordinator loads)."""
    body = _join_body(group)
    r = _retrying(lambda: client.request("JoinGroup", 11, 5, body))
    if r["error_code"] == 79:  # MEMBER_ID_REQUIRED
        r = client.request("JoinGroup", 11, 5, {**body, "member_id": r["member_id"]})
    return r


def _rebalancing(cluster: LocalCluster, node: int, group: str) -> bool:
    listener = cluster.kafka_listeners.get(node)
    g = None if listener is None else listener.groups.coordinator.groups.get(group)
    return g is not None and g.state == "PreparingRebalance"


def _leads(cluster: LocalCluster, node: int, p: int) -> bool:
    """Whether ``node`` itself holds the leadership of ``__consumer_offsets``-``p`` now."""
    n = cluster.nodes[node]
    part = None if n is None else n.partitions.get((OFFSETS_TOPIC, p))
    return part is not None and part.is_leader


def test_a_node_that_stops_leading_the_partition_stops_coordinating(cluster: LocalCluster) -> None:
    """The coordinator is frozen until its partition of __consumer_offsets moves: the new
    leader has its commit and takes the next; thawed, the old one answers a JoinGroup still
    waiting there and every later request NOT_COORDINATOR; led by it again (a new leader epoch)
    it reloads the log and answers the newer commit."""
    _topic(cluster, "t", 1)
    a = _coordinator(cluster, "g")
    p = partition_for_group("g", OFFSETS_PARTITIONS)
    # Another group of the same partition, with a JoinGroup waiting for a rebalance.
    other = next(g for g in (f"j{i}" for i in range(100)) if partition_for_group(g, OFFSETS_PARTITIONS) == p)
    first, second = _raw(cluster, a), _raw(cluster, a)
    waiting: list[dict] = []
    try:
        assert _commit_raw(first, "g", 5) == 0
        assert _join_raw(first, other)["error_code"] == 0  # one member: generation 1 at once
        second.sock.settimeout(15)
        joiner = threading.Thread(target=lambda: waiting.append(_join_raw(second, other)))
        joiner.start()
        cluster.wait_for(lambda: _rebalancing(cluster, a, other), 10, "a rebalance of the other group")
        cluster.pause(a, 4.0)
        cluster.wait_for(lambda: cluster.leader(OFFSETS_TOPIC, p) not in (None, a), 10, "a new leader")
        joiner.join(15)
        assert [r["error_code"] for r in waiting] == [16]  # NOT_COORDINATOR: find the new one
    finally:
        first.sock.close()
        second.sock.close()
    b = cluster.leader(OFFSETS_TOPIC, p)
    assert b is not None
    old, new = _raw(cluster, a), _raw(cluster, b)
    try:
        assert _fetch_raw(new, "g") == (0, 5)
        assert _commit_raw(new, "g", 7) == 0
        # Thawed, the old coordinator learns it follows now (its requests waited meanwhile).
        cluster.wait_for(lambda: not _leads(cluster, a, p), 10, "the old coordinator following")
        assert _fetch_raw(old, "g") == (16, -1)  # NOT_COORDINATOR
        assert _commit_raw(old, "g", 9) == 16
        cluster.wait_for(lambda: a in cluster.isr(OFFSETS_TOPIC, p), 10, "the old coordinator in the ISR")
        assert cluster.elect_preferred_leader(OFFSETS_TOPIC, p) == a
        cluster.wait_for(lambda: _leads(cluster, a, p), 10, "the old coordinator leading again")
        assert _fetch_raw(old, "g") == (0, 7)
        assert _fetch_raw(new, "g") == (16, -1)
    finally:
        old.sock.close()
        new.sock.close()


def _sync_raw(client: RawClient, group: str, generation: int, member: str, assignment: bytes) -> dict:
    """SyncGroup v5 of the group's leader, assigning ``assignment`` to itself alone."""
    body = {
        "group_id": group,
        "generation_id": generation,
        "member_id": member,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocol_name": "range",
        "assignments": [{"member_id": member, "assignment": assignment}],
    }
    return client.request("SyncGroup", 14, 5, body)


def test_a_new_coordinator_loads_the_generation_and_members_keep_going(cluster: LocalCluster) -> None:
    """A member joins and syncs a generation; the coordinator node is killed. The new leader
    of the group's partition has the generation from the group metadata record: the member's
    heartbeats and commits of that generation are accepted there without a rebalance, and
    DescribeGroups shows it Stable with the member's assignment. When the member leaves, the
    empty generation is written too (the next one is numbered on from it)."""
    _topic(cluster, "t", 1)
    a = _coordinator(cluster, "g")
    p = partition_for_group("g", OFFSETS_PARTITIONS)
    client = _raw(cluster, a)
    try:
        joined = _join_raw(client, "g")
        assert joined["error_code"] == 0, joined
        member, gen = joined["member_id"], joined["generation_id"]
        synced = _sync_raw(client, "g", gen, member, b"all-of-t")
        assert (synced["error_code"], synced["assignment"]) == (0, b"all-of-t")
    finally:
        client.sock.close()
    cluster.kill(a)
    b = _coordinator(cluster, "g", timeout_s=15, other_than=a)
    client = _raw(cluster, b)
    try:
        hb = {"group_id": "g", "generation_id": gen, "member_id": member, "group_instance_id": None}
        assert _retrying(lambda: client.request("Heartbeat", 12, 4, hb))["error_code"] == 0
        body = {
            "group_id": "g",
            "generation_id_or_member_epoch": gen,
            "member_id": member,
            "group_instance_id": None,
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 3}]}],
        }
        r = client.request("OffsetCommit", 8, 7, body)
        assert r["topics"][0]["partitions"][0]["error_code"] == 0
        assert _fetch_raw(client, "g") == (0, 3)
        d = client.request("DescribeGroups", 15, 5, {"groups": ["g"], "include_authorized_operations": False})
        g = d["groups"][0]
        assert (g["error_code"], g["group_state"], g["protocol_data"]) == (0, "Stable", "range")
        assert [(m["member_id"], m["member_assignment"]) for m in g["members"]] == [(member, b"all-of-t")]
        # A SyncGroup of the generation hands out its assignment again.
        assert _sync_raw(client, "g", gen, member, b"")["assignment"] == b"all-of-t"
        left = client.request(
            "LeaveGroup", 13, 5, {"group_id": "g", "members": [{"member_id": member, "group_instance_id": None}]}
        )
        assert left["members"][0]["error_code"] == 0
    finally:
        client.sock.close()

    def stored() -> Any:
        n = cluster.nodes[b]
        return None if n is None else replay(n.partitions[(OFFSETS_TOPIC, p)].log, "high_watermark")[1].get("g")

    cluster.wait_for(lambda: (s := stored()) is not None and not s.members, 10, "the empty generation stored")
    assert stored().generation == gen + 1


#: Commits before the coordinator is killed: the new one replays them one batch a step.
COMMITS = 100


def test_group_requests_are_answered_load_in_progress_while_the_new_coordinator_replays(
    cluster: LocalCluster,
) -> None:
    """The coordinator is killed after 100 commits (100 batches in the group's partition); the
    node that takes over replays them one batch per step (``load_buffer_bytes`` = 1). Polled on
    the nodes' loop at every turn, each survivor answers the group NOT_COORDINATOR until it
    leads the partition, then COORDINATOR_LOAD_IN_PROGRESS until the whole log is replayed, then
    serves it, with the last commit: never an answer from a part of the log."""
    _topic(cluster, "t", 1)
    a = _coordinator(cluster, "g")
    client = _raw(cluster, a)
    try:
        for i in range(COMMITS):
            assert _retrying(lambda i=i: _commit_raw(client, "g", i)) == 0
    finally:
        client.sock.close()
    survivors = [i for i in cluster.ids if i != a]
    for i in survivors:
        cluster.kafka_listeners[i].groups.load_buffer_bytes = 1

    served_at: list[float] = []  # when the first survivor served the group

    async def watch(i: int) -> list[int]:
        groups = cluster.kafka_listeners[i].groups
        codes: list[int] = []
        clock = asyncio.get_running_loop().time
        deadline = clock() + 20
        # Until this node serves, or 1 s after another did (it must not serve meanwhile).
        while clock() < deadline and not (served_at and clock() > served_at[0] + 1.0):
            code = groups.coordinator_error("g")
            if not codes or codes[-1] != code:
                codes.append(code)
            if code == 0:
                served_at.append(clock())
                break
            await asyncio.sleep(0)
        return codes

    watchers = [asyncio.run_coroutine_threadsafe(watch(i), cluster.loop) for i in survivors]
    cluster.kill(a)
    seen = [w.result(30) for w in watchers]
    b = cluster.leader(OFFSETS_TOPIC, partition_for_group("g", OFFSETS_PARTITIONS))
    assert b in survivors
    assert seen[survivors.index(b)] == [16, 14, 0]  # NOT_COORDINATOR, LOAD_IN_PROGRESS, serving
    assert 0 not in seen[1 - survivors.index(b)]
    client = _raw(cluster, b)
    try:
        assert _fetch_raw(client, "g") == (0, COMMITS - 1)
    finally:
        client.sock.close()


def _records(log: Any) -> int:
    """How many records a log holds below its high watermark."""
    n, offset = 0, log.log_start_offset
    while offset < log.high_watermark:
        nxt = offset
        for view in log.read(offset, 1 << 20, upper_bound="high_watermark").views():
            try:
                for rec in decode_records(view, min_offset=offset):
                    n += 1
                    nxt = rec.offset + 1
            finally:
                view.release()
        if nxt == offset:
            break
        offset = nxt
    return n


def test_nodes_compact_the_offsets_topic(tmp_path: Path) -> None:
    """200 commits of one key in 1 KiB segments of the group's __consumer_offsets partition:
    every replica's cleaner (every 100 ms here, on its own thread) leaves a few records, later
    commits still replicate to the cleaned followers (acks=-1), and the next coordinator loads
    the last one. Each replica's first dirty offset goes to its dir's cleaner-offset-checkpoint,
    and a killed node restarts from it."""
    config = {
        **CONFIG,
        "offsets.topic.segment.bytes": 1024,
        "log.cleaner.backoff.ms": 100,
        "replica.high.watermark.checkpoint.interval.ms": 100,
    }
    with LocalCluster(
        nodes=3, dir=tmp_path / "c", replica_config=config, log_defaults={"min.insync.replicas": 2}
    ) as cluster:
        _topic(cluster, "t", 1)
        a = _coordinator(cluster, "g")
        p = partition_for_group("g", OFFSETS_PARTITIONS)
        client = _raw(cluster, a)
        try:
            for i in range(200):
                assert _commit_raw(client, "g", i) == 0
        finally:
            client.sock.close()

        def sizes() -> list[int]:
            return [_records(n.partitions[(OFFSETS_TOPIC, p)].log) for n in cluster.nodes.values() if n is not None]

        cluster.wait_for(lambda: max(sizes()) < 30, 20, "every replica cleaned")
        tp = (OFFSETS_TOPIC, p)

        def checkpointed(i: int) -> int | None:
            n = cluster.nodes[i]
            assert n is not None
            (d,) = n.dirs.paths
            return OffsetCheckpointFile(os.path.join(d, CLEANER_OFFSET_FILE)).read().get(tp)

        cluster.wait_for(
            lambda: all(
                (c := checkpointed(i)) is not None and c > 0 and c == n.partitions[tp].log.cleaner_offset
                for i, n in cluster.nodes.items()
                if n is not None
            ),
            20,
            "every replica's cleaner checkpoint written",
        )
        client = _raw(cluster, a)
        try:
            for i in range(200, 210):
                assert _commit_raw(client, "g", i) == 0
        finally:
            client.sock.close()
        node_a = cluster.nodes[a]
        assert node_a is not None
        (a_dir,) = node_a.dirs.paths
        cluster.kill(a)
        b = _coordinator(cluster, "g", timeout_s=15, other_than=a)
        client = _raw(cluster, b)
        try:
            assert _fetch_raw(client, "g") == (0, 209)
        finally:
            client.sock.close()
        # The killed node wrote nothing at its death: it restarts from its last checkpoint.
        saved = OffsetCheckpointFile(os.path.join(a_dir, CLEANER_OFFSET_FILE)).read()[tp]
        cluster.restart(a)

        def reopened() -> int | None:
            n = cluster.nodes[a]
            part = None if n is None else n.partitions.get(tp)
            return None if part is None else part.log.cleaner_offset

        cluster.wait_for(lambda: reopened() is not None, 20, "the restarted node's replica open")
        now = reopened()
        assert now is not None and now >= saved > 0


def test_committed_offsets_of_a_deleted_topic_are_removed(cluster: LocalCluster) -> None:
    """A group commits for two topics; one is deleted. The coordinator writes tombstones for
    its offsets (replicated: none left below the high watermark of the group's partition),
    keeps the other topic's, and a topic created again under the name has no committed offset."""
    pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    _topic(cluster, "t", 1)
    _topic(cluster, "keep", 1)
    a = _coordinator(cluster, "g")
    p = partition_for_group("g", OFFSETS_PARTITIONS)
    client = _raw(cluster, a)
    body = {
        "group_id": "g",
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {"name": name, "partitions": [{"partition_index": 0, "committed_offset": 5}]} for name in ("t", "keep")
        ],
    }
    fetch = {"groups": [{"group_id": "g", "topics": None}]}
    try:
        r = _retrying(lambda: client.request("OffsetCommit", 8, 7, body)["topics"][0]["partitions"][0])
        assert r["error_code"] == 0
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.delete_topics(["t"], operation_timeout=10)["t"].result(15)

        def stored() -> set[tuple[str, str, int]]:
            n = cluster.nodes[a]
            assert n is not None
            return set(replay(n.partitions[(OFFSETS_TOPIC, p)].log, "high_watermark")[0])

        cluster.wait_for(lambda: stored() == {("g", "keep", 0)}, 10, "the tombstone of t-0 acknowledged")
        r = client.request("OffsetFetch", 9, 8, fetch)["groups"][0]
        assert [(t["name"], [q["committed_offset"] for q in t["partitions"]]) for t in r["topics"]] == [("keep", [5])]
        admin.create_topics([NewTopic("t", 1, 3)])["t"].result(15)
        _topic_known(cluster, "t")
        assert _fetch_raw(client, "g") == (0, -1)
    finally:
        client.sock.close()


def _topic_known(cluster: LocalCluster, name: str) -> None:
    cluster.wait_for(
        lambda: all(n is not None and (name, 0) in n.metadata for n in cluster.nodes.values()),
        10,
        f"every node knowing {name}",
    )
