"""Consumer groups over the wire: kafka-python and librdkafka group consumers share partitions,
rebalance, commit and resume; the group APIs' errors at the byte level."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from .conftest import RawClient

kafka = pytest.importorskip("kafka")
from kafka import KafkaConsumer, KafkaProducer  # noqa: E402


def _topic(broker, partitions: int) -> str:
    name = "g-" + uuid.uuid4().hex[:10]
    broker.store.create_topic(name, partitions)
    return name


def _produce(broker, topic: str, values: list[bytes], partitions: int) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks=1)
    for i, v in enumerate(values):
        producer.send(topic, v, partition=i % partitions)
    producer.flush()
    producer.close()


def test_kafka_python_group_shares_partitions_commits_and_resumes(broker):
    topic = _topic(broker, 4)
    group = "grp-" + uuid.uuid4().hex[:6]
    _produce(broker, topic, [b"a%d" % i for i in range(200)], 4)
    settings = dict(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                    auto_offset_reset="earliest", enable_auto_commit=False,
                    heartbeat_interval_ms=200, session_timeout_ms=6000)
    seen: list[bytes] = []
    assigned: dict[int, set] = {}
    stop = threading.Event()
    errors: list[BaseException] = []

    def member(n: int) -> None:
        # Each member polls on its own thread, as applications do: a JoinGroup waits for the
        # rest of the group to rejoin, which they do from their own poll loops.
        try:
            consumer = KafkaConsumer(topic, **settings)
            try:
                while not stop.is_set():
                    for records in consumer.poll(timeout_ms=100).values():
                        seen.extend(r.value for r in records)
                    assigned[n] = set(consumer.assignment())
                consumer.commit()
            finally:
                consumer.close()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=member, args=(n,)) for n in (1, 2)]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not errors:
            sizes = [len(assigned.get(n, ())) for n in (1, 2)]
            if sizes == [2, 2] and len(set(seen)) >= 200:
                break
            time.sleep(0.05)
        assert [len(assigned.get(n, ())) for n in (1, 2)] == [2, 2]
        assert assigned[1].isdisjoint(assigned[2])
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors, errors
    # Every record at least once (a rebalance may hand a partition over before its commit).
    assert set(seen) == {b"a%d" % i for i in range(200)}
    committed = broker.store.group_offsets.group_offsets(group)
    assert {p: om.offset for (t, p), om in committed.items() if t == topic} == {0: 50, 1: 50, 2: 50, 3: 50}
    # A new member of the group starts from the committed offsets.
    _produce(broker, topic, [b"b%d" % i for i in range(8)], 4)
    third = KafkaConsumer(topic, consumer_timeout_ms=3000, **settings)
    try:
        assert sorted(m.value for m in third) == sorted(b"b%d" % i for i in range(8))
    finally:
        third.close()


def test_librdkafka_group_consumer_commits(broker):
    ck = pytest.importorskip("confluent_kafka")
    topic = _topic(broker, 3)
    group = "rdk-" + uuid.uuid4().hex[:6]
    _produce(broker, topic, [b"r%d" % i for i in range(90)], 3)
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                            "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(got) < 90 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        consumer.commit(asynchronous=False)
        committed = consumer.committed([ck.TopicPartition(topic, p) for p in range(3)], timeout=10)
        assert [tp.offset for tp in committed] == [30, 30, 30]
    finally:
        consumer.close()
    assert sorted(got) == sorted(b"r%d" % i for i in range(90))
    assert {p: om.offset for (t, p), om in broker.store.group_offsets.group_offsets(group).items()} == {
        0: 30, 1: 30, 2: 30}


def _join(raw: RawClient, group: str, member_id: str = "", session: int = 10000) -> dict:
    return raw.request("JoinGroup", 11, 7, {
        "group_id": group, "session_timeout_ms": session, "rebalance_timeout_ms": 2000,
        "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"meta"}]})


def test_group_api_errors_and_listing(broker):
    raw = RawClient(broker.bootstrap_servers)
    group = "raw-" + uuid.uuid4().hex[:6]
    try:
        coord = raw.request("FindCoordinator", 10, 4, {"key_type": 0, "coordinator_keys": [group]})
        node = coord["coordinators"][0]
        assert node["error_code"] == 0 and node["port"] == broker.port
        assert _join(raw, group, session=10)["error_code"] == 26  # INVALID_SESSION_TIMEOUT
        assert _join(raw, group, member_id="nobody")["error_code"] == 25  # UNKNOWN_MEMBER_ID
        joined = _join(raw, group)
        assert joined["error_code"] == 0 and joined["leader"] == joined["member_id"]
        assert joined["members"][0]["metadata"] == b"meta"
        gen, me = joined["generation_id"], joined["member_id"]
        hb = {"group_id": group, "generation_id": gen, "member_id": me, "group_instance_id": None}
        synced = raw.request("SyncGroup", 14, 5, {
            "group_id": group, "generation_id": gen, "member_id": me, "group_instance_id": None,
            "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": me, "assignment": b"mine"}]})
        assert synced["error_code"] == 0 and synced["assignment"] == b"mine"
        assert raw.request("Heartbeat", 12, 4, hb)["error_code"] == 0
        assert raw.request("Heartbeat", 12, 4, {**hb, "generation_id": gen + 5})["error_code"] == 22
        # A commit from outside the generation while the group has a member is refused.
        commit = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                  "group_instance_id": None, "topics": [{"name": "__nope", "partitions": [
                      {"partition_index": 0, "committed_offset": 5, "committed_metadata": "m"}]}]}
        assert raw.request("OffsetCommit", 8, 8, commit)["topics"][0]["partitions"][0]["error_code"] == 25
        described = raw.request("DescribeGroups", 15, 5, {"groups": [group],
                                                           "include_authorized_operations": False})
        g = described["groups"][0]
        assert g["group_state"] == "Stable" and g["members"][0]["member_assignment"] == b"mine"
        listed = raw.request("ListGroups", 16, 4, {"states_filter": ["Stable"]})
        assert group in [x["group_id"] for x in listed["groups"]]
        left = raw.request("LeaveGroup", 13, 5, {"group_id": group, "members": [
            {"member_id": me, "group_instance_id": None, "reason": "done"}]})
        assert left["members"][0]["error_code"] == 0
        # Empty now: a plain commit (no generation) is taken, and OffsetFetch (v8 form) reads it.
        topic = _topic(broker, 1)
        commit["topics"][0]["name"] = topic
        assert raw.request("OffsetCommit", 8, 8, commit)["topics"][0]["partitions"][0]["error_code"] == 0
        fetched = raw.request("OffsetFetch", 9, 8, {"groups": [
            {"group_id": group, "topics": None}], "require_stable": False})
        part = fetched["groups"][0]["topics"][0]["partitions"][0]
        assert (part["committed_offset"], part["metadata"]) == (5, "m")
    finally:
        raw.close()


def test_silent_member_expires_and_the_group_rebalances(tmp_path):
    from seglog import Store

    with Store.open(tmp_path) as store, store.serve(group_min_session_timeout_ms=100) as handle:
        a, b = RawClient(handle.bootstrap_servers), RawClient(handle.bootstrap_servers)
        try:
            first = _join(a, "exp", session=300)
            assert first["error_code"] == 0
            # b joins: the group rebalances; a never rejoins nor heartbeats, so it expires
            # (300 ms) and b's join completes as the only member of the next generation.
            start = time.monotonic()
            second = _join(b, "exp", session=5000)
            assert second["error_code"] == 0
            assert second["generation_id"] > first["generation_id"]
            assert [m["member_id"] for m in second["members"]] == [second["member_id"]]
            assert time.monotonic() - start < 2.5
        finally:
            a.close()
            b.close()
