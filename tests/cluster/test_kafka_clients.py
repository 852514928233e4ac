"""Kafka clients nobody here wrote (kafka-python, confluent-kafka) against a three-node
``LocalCluster`` through its nodes' Kafka listeners: ``acks=all`` with
``min.insync.replicas=2``, consumers assigned from the earliest offset, a producer that knows
only a follower, and an idempotent producer that keeps going while the leader is killed."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from seglog.cluster.local import LocalCluster
from seglog.storage.records import decode_records, encode_batch


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(nodes=3, dir=tmp_path / "cluster") as c:
        yield c


def _topic(cluster: LocalCluster, name: str, partitions: int = 1) -> None:
    cluster.create_topic(name, partitions=partitions, replication_factor=3, config={"min.insync.replicas": 2})
    # Every node has heard of the leaders (Metadata is answered from the node's own view).
    cluster.wait_for(
        lambda: all(
            n is not None
            and all((name, p) in n.metadata and n.metadata[(name, p)].state.leader >= 0 for p in range(partitions))
            for n in cluster.nodes.values()
        ),
        10,
        f"every node knowing {name}'s leaders",
    )


def _confluent_consume(
    ck,
    bootstrap: str,
    topic: str,
    partitions: int,
    count: int,
    timeout_s: float = 20,
    config: dict[str, str] | None = None,
) -> dict[int, list[bytes]]:
    consumer = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False, **(config or {})}
    )
    got: dict[int, list[bytes]] = {}
    try:
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
        n = 0
        deadline = time.monotonic() + timeout_s
        while n < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.setdefault(msg.partition(), []).append(msg.value())
            n += 1
    finally:
        consumer.close()
    return got


def test_kafka_python_acks_all_and_assigned_consumer(cluster: LocalCluster) -> None:
    kafka = pytest.importorskip("kafka")
    _topic(cluster, "orders", partitions=2)
    producer = kafka.KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=5, max_block_ms=10_000
    )
    sent: dict[int, list[bytes]] = {0: [], 1: []}
    try:
        futures = []
        for i in range(300):
            v = b"order-%04d" % i
            futures.append(producer.send("orders", v, partition=i % 2))
            sent[i % 2].append(v)
        producer.flush(timeout=15)
        for f in futures:
            md = f.get(1)
            assert md.offset >= 0
    finally:
        producer.close(timeout=5)
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers, enable_auto_commit=False, consumer_timeout_ms=5000
    )
    try:
        tps = [kafka.TopicPartition("orders", p) for p in (0, 1)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        got: dict[int, list[bytes]] = {0: [], 1: []}
        for msg in consumer:
            got[msg.partition].append(msg.value)
            if sum(map(len, got.values())) == 300:
                break
        # Latest offsets from the leaders: the high watermarks.
        assert consumer.end_offsets(tps) == {tps[0]: 150, tps[1]: 150}
        assert consumer.beginning_offsets(tps) == {tps[0]: 0, tps[1]: 0}
    finally:
        consumer.close()
    assert got == sent
    # Every replica holds every record (acks=all with min.insync.replicas=2 reached at least two;
    # the third catches up).
    deadline = time.monotonic() + 10
    while set(cluster.high_watermarks("orders", 0).values()) != {150}:
        assert time.monotonic() < deadline, cluster.high_watermarks("orders", 0)
        time.sleep(0.05)


def test_confluent_producer_that_knows_only_a_follower(cluster: LocalCluster) -> None:
    ck = pytest.importorskip("confluent_kafka")
    _topic(cluster, "events")
    leader = cluster.leader("events", 0)
    follower = next(i for i in cluster.ids if i != leader)
    only = cluster.kafka_listeners[follower].bootstrap_servers
    producer = ck.Producer(
        {
            "bootstrap.servers": only,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 15000,
        }
    )
    errors: list[object] = []
    offsets: list[int] = []

    def report(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            offsets.append(msg.offset())  # type: ignore[attr-defined]

    values = [b"event-%04d" % i for i in range(200)]
    for v in values:
        producer.produce("events", v, partition=0, on_delivery=report)
    assert producer.flush(20) == 0
    assert errors == []
    assert sorted(offsets) == list(range(200))
    got = _confluent_consume(ck, only, "events", 1, 200)
    assert got == {0: values}


def test_metadata_names_every_node_and_the_leader(cluster: LocalCluster) -> None:
    ck = pytest.importorskip("confluent_kafka")
    _topic(cluster, "meta", partitions=3)
    for i in cluster.ids:
        client = ck.Consumer({"bootstrap.servers": cluster.kafka_listeners[i].bootstrap_servers, "group.id": "unused"})
        try:
            md = client.list_topics("meta", timeout=10)
            # Every topic (librdkafka's all-topics Metadata v12, with its trailing bytes).
            assert "meta" in client.list_topics(timeout=10).topics
        finally:
            client.close()
        assert sorted(md.brokers) == cluster.ids
        assert {b.port for b in md.brokers.values()} == {cluster.kafka_listeners[j].port for j in cluster.ids}
        parts = md.topics["meta"].partitions
        for p in range(3):
            st = cluster._state("meta", p)
            assert st is not None
            assert parts[p].leader == st.leader
            assert sorted(parts[p].isrs) == sorted(st.isr)
            assert len(parts[p].replicas) == 3
        assert md.controller_id in cluster.ids
    # A topic nobody made is not created by asking for it.
    consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "unused"})
    try:
        md = consumer.list_topics("nothere", timeout=10)
        assert md.topics["nothere"].error is not None
        assert md.topics["nothere"].error.code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART
    finally:
        consumer.close()


def test_idempotent_producer_across_a_leader_kill(cluster: LocalCluster) -> None:
    ck = pytest.importorskip("confluent_kafka")
    _topic(cluster, "stream", partitions=2)
    producer = ck.Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 2,
            "message.timeout.ms": 25000,
            "topic.metadata.refresh.interval.ms": 1000,
            "retry.backoff.ms": 50,
        }
    )
    acked: dict[bytes, tuple[int, int]] = {}
    failed: list[bytes] = []
    lock = threading.Lock()

    def report(err: object, msg: object) -> None:
        with lock:
            if err is not None:
                failed.append(msg.value())  # type: ignore[attr-defined]
            else:
                acked[msg.value()] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]

    stop = threading.Event()
    sent: list[bytes] = []

    def stream() -> None:
        n = 0
        while not stop.is_set():
            v = b"rec-%06d" % n
            producer.produce("stream", v, partition=n % 2, on_delivery=report)
            sent.append(v)
            n += 1
            producer.poll(0)
            if n % 20 == 0:
                time.sleep(0.002)

    t = threading.Thread(target=stream)
    t.start()
    try:
        time.sleep(1.0)
        victim = cluster.leader("stream", 0)
        assert victim is not None
        cluster.kill(victim)
        cluster.wait_for(
            lambda: (st := cluster._state("stream", 0)) is not None and st.leader not in (-1, victim),
            15,
            "a new leader",
        )
        time.sleep(1.5)
    finally:
        stop.set()
        t.join()
    assert producer.flush(30) == 0
    assert not failed, f"{len(failed)} records failed, e.g. {failed[:3]}"
    assert len(acked) == len(sent) > 200
    live = ",".join(cluster.kafka_listeners[i].bootstrap_servers for i in cluster.ids if i != victim)
    got = _confluent_consume(ck, live, "stream", 2, len(sent), timeout_s=25)
    for p in (0, 1):
        mine = [v for v in sent if acked[v][0] == p]
        # Exactly once, in the order produced, at the offsets acknowledged.
        assert got.get(p) == mine
        assert [acked[v][1] for v in mine] == list(range(len(mine)))


#: SASL/PLAIN on the Kafka clients' listener named CLIENT, in Kafka's broker keys.
SASL_CLIENT_LISTENER = {
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLIENT:SASL_PLAINTEXT",
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.client.plain.sasl.jaas.config": (
        'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
    ),
}
SASL_ALICE = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "alice",
    "sasl.password": "alice-secret",
}


@pytest.mark.cluster
def test_node_processes_serve_kafka_clients_on_their_second_listener(zookeeper_chroot: str, tmp_path: Path) -> None:
    """``seglog node`` with ``listeners=PLAINTEXT://...,CLIENT://...`` and
    ``inter.broker.listener.name=PLAINTEXT``: the nodes replicate on the first, Kafka clients
    use the second (``ProcessCluster.bootstrap_servers``), here with SASL/PLAIN from the
    properties file's listener keys: produce acks=all from a follower's address only and
    consume from the earliest offset as alice; a wrong password is refused. Then the admin APIs
    across processes: DescribeConfigs of a node's broker resource (its properties file),
    DeleteTopics (every node's dirs go) and the name created again with the defaults."""
    ck = pytest.importorskip("confluent_kafka")
    from seglog.cluster import start_cluster

    cluster = start_cluster(
        nodes=3,
        dir=tmp_path / "cluster",
        coordinator="zookeeper",
        processes=True,
        zookeeper=zookeeper_chroot,
        node_config=SASL_CLIENT_LISTENER,
        client_config=SASL_ALICE,  # the cluster's own client authenticates there too
    )
    try:
        cluster.create_topic("p", partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
        leader = cluster.leader("p", 0)
        follower = next(i for i in cluster.ids if i != leader)
        assert cluster.kafka_address(follower) in cluster.bootstrap_servers.split(",")
        assert cluster.kafka_address(follower) != cluster.address(follower)
        producer = ck.Producer(
            {
                "bootstrap.servers": cluster.kafka_address(follower),
                "acks": "all",
                "enable.idempotence": True,
                "message.timeout.ms": 15000,
                **SASL_ALICE,
            }
        )
        errors: list[object] = []

        def report(err: object, msg: object) -> None:
            if err is not None:
                errors.append(err)

        values = [b"p-%03d" % i for i in range(100)]
        for v in values:
            producer.produce("p", v, partition=0, on_delivery=report)
        assert producer.flush(20) == 0
        assert errors == []
        got = _confluent_consume(ck, cluster.bootstrap_servers, "p", 1, 100, config=SASL_ALICE)
        assert got == {0: values}
        refused: list[Any] = []
        wrong = ck.Producer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                **SASL_ALICE,
                "sasl.password": "wrong",
                "error_cb": refused.append,
                "message.timeout.ms": 3000,
            }
        )
        wrong.produce("p", b"refused", partition=0)
        wrong.flush(6)
        auth = [e for e in refused if e.code() == ck.KafkaError._AUTHENTICATION]
        assert auth, refused
        assert "Invalid username or password" in auth[0].str()

        # The admin APIs across processes: the node's own properties, then a deletion whose
        # StopReplica crosses the nodes' transport, and the name created again.
        import os

        from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType  # type: ignore[attr-defined]

        admin = AdminClient({"bootstrap.servers": cluster.kafka_address(follower), **SASL_ALICE})
        resource = ConfigResource(ResourceType.BROKER, str(follower))
        broker = admin.describe_configs([resource], request_timeout=10)[resource].result(15)
        assert broker["node.id"].value == str(follower)
        assert broker["controlled.shutdown.retry.backoff.ms"].value == "200"  # from its properties file
        admin.delete_topics(["p"], operation_timeout=10)["p"].result(15)
        deadline = time.monotonic() + 15
        while any(d.startswith("p-") for i in cluster.ids for d in os.listdir(cluster.node_dir(i))):
            assert time.monotonic() < deadline, "p's dirs still there"
            time.sleep(0.05)
        deadline = time.monotonic() + 15
        while True:  # TOPIC_ALREADY_EXISTS until the controller removed the topic's znodes
            fut = admin.create_topics([NewTopic("p")], operation_timeout=10)["p"]
            try:
                fut.result(15)
                break
            except ck.KafkaException as exc:
                assert exc.args[0].code() == ck.KafkaError.TOPIC_ALREADY_EXISTS and time.monotonic() < deadline
                time.sleep(0.1)
        assert len(admin.list_topics(timeout=10).topics["p"].partitions) == 1  # num.partitions
    finally:
        cluster.close()


def test_sasl_on_the_nodes_kafka_listeners(tmp_path: Path) -> None:
    """``LocalCluster(kafka_options=...)``: every node's Kafka listener requires SASL/SCRAM;
    kafka-python produces and consumes as alice, and a wrong password is refused."""
    kafka = pytest.importorskip("kafka")
    options = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanisms": ["SCRAM-SHA-256"],
        "users": {"alice": "alice-secret"},
    }
    sasl = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "alice-secret",
    }
    client = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256"}
    client |= {"sasl.username": "alice", "sasl.password": "alice-secret"}  # the cluster's own clients
    with LocalCluster(nodes=3, dir=tmp_path / "cluster", kafka_options=options, client_config=client) as cluster:
        _topic(cluster, "secure")
        producer = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", **sasl)
        try:
            for i in range(20):
                producer.send("secure", b"s-%02d" % i, partition=0)
            producer.flush(20)
        finally:
            producer.close()
        consumer = kafka.KafkaConsumer(
            bootstrap_servers=cluster.bootstrap_servers, enable_auto_commit=False, consumer_timeout_ms=10000, **sasl
        )
        try:
            tp = kafka.TopicPartition("secure", 0)
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            got = []
            for record in consumer:
                got.append(record.value)
                if len(got) == 20:
                    break
        finally:
            consumer.close()
        assert got == [b"s-%02d" % i for i in range(20)]
        # A wrong password is refused (librdkafka: kafka-python leaves the sockets of a producer
        # whose constructor failed to the garbage collector).
        ck = pytest.importorskip("confluent_kafka")
        refused: list[Any] = []
        wrong = ck.Producer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": "alice",
                "sasl.password": "wrong",
                "error_cb": refused.append,
                "message.timeout.ms": 3000,
            }
        )
        wrong.produce("secure", b"refused", partition=0)
        wrong.flush(6)
        assert any(e.code() == ck.KafkaError._AUTHENTICATION for e in refused), refused


def _raw_clients(cluster: LocalCluster, topic: str) -> tuple[int, int, Any, Any]:
    """Topic ``topic`` made; its leader, a follower, and a RawClient to each."""
    from tests.kafka.conftest import RawClient

    _topic(cluster, topic)
    leader = cluster.leader(topic, 0)
    assert leader is not None
    follower = next(i for i in cluster.ids if i != leader)
    lead = RawClient(cluster.kafka_listeners[leader].bootstrap_servers)
    foll = RawClient(cluster.kafka_listeners[follower].bootstrap_servers)
    return leader, follower, lead, foll


def test_errors_a_node_answers_over_kafkas_protocol(cluster: LocalCluster) -> None:
    """Exact codes, byte-level: a follower refuses Produce, Fetch and ListOffsets with
    NOT_LEADER_OR_FOLLOWER; the leader refuses a leader epoch it does not know and answers ListOffsets from
    its log start and high watermark; a node that is not the controller still hands out
    producer ids; an unknown topic is not created by Metadata."""
    from seglog.storage.records import encode_batch
    from tests.kafka.conftest import RawClient, fetch_body, produce_body

    leader, follower, lead, foll = _raw_clients(cluster, "raw")
    try:
        batch = encode_batch([b"a", b"b", b"c"], timestamps=1_700_000_000_000)
        r = foll.request("Produce", 0, 9, produce_body("raw", batch, acks=-1))
        assert r["responses"][0]["partition_responses"][0]["error_code"] == 6  # NOT_LEADER_OR_FOLLOWER
        r = lead.request("Produce", 0, 9, produce_body("raw", batch, acks=-1))
        part = r["responses"][0]["partition_responses"][0]
        assert (part["error_code"], part["base_offset"], part["log_start_offset"]) == (0, 0, 0)
        r = foll.request("Fetch", 1, 12, fetch_body("raw"))
        assert r["responses"][0]["partitions"][0]["error_code"] == 6
        r = lead.request("Fetch", 1, 12, fetch_body("raw"))
        got = r["responses"][0]["partitions"][0]
        assert (got["error_code"], got["high_watermark"], got["last_stable_offset"]) == (0, 3, 3)
        assert len(got["records"]) > 0
        st = cluster._state("raw", 0)
        assert st is not None
        ahead = fetch_body("raw")
        ahead["topics"][0]["partitions"][0]["current_leader_epoch"] = st.leader_epoch + 1
        assert lead.request("Fetch", 1, 12, ahead)["responses"][0]["partitions"][0]["error_code"] == 75
        r = lead.request("Fetch", 1, 12, fetch_body("raw", offset=99))
        assert r["responses"][0]["partitions"][0]["error_code"] == 1  # OFFSET_OUT_OF_RANGE

        def list_offset(client: RawClient, ts: int) -> dict:
            body = {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [{"name": "raw", "partitions": [{"partition_index": 0, "timestamp": ts}]}],
            }
            return client.request("ListOffsets", 2, 7, body)["topics"][0]["partitions"][0]

        assert list_offset(foll, -1)["error_code"] == 6
        assert (list_offset(lead, -2)["offset"], list_offset(lead, -1)["offset"]) == (0, 3)
        assert list_offset(lead, 1_700_000_000_000)["offset"] == 0
        others = [i for i in cluster.ids if i != cluster._controller()]
        pid = RawClient(cluster.kafka_listeners[others[0]].bootstrap_servers)
        try:
            r = pid.request("InitProducerId", 22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000})
            assert r["error_code"] == 0 and r["producer_id"] >= 0
        finally:
            pid.sock.close()
        r = foll.request("Metadata", 3, 12, {"topics": [{"name": "nothere", "topic_id": bytes(16)}]})
        assert r["topics"][0]["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
        r = foll.request("Metadata", 3, 12, {"topics": [{"name": "bad topic!", "topic_id": bytes(16)}]})
        assert r["topics"][0]["error_code"] == 17  # INVALID_TOPIC_EXCEPTION: an illegal name
        assert not any(t == "nothere" for t, _ in cluster.nodes[leader].metadata)  # type: ignore[union-attr]
    finally:
        lead.sock.close()
        foll.sock.close()


def test_nodes_on_loops_of_their_own(tmp_path: Path) -> None:
    """``node_threads=True``: each node's Kafka listener runs on that node's own loop."""
    ck = pytest.importorskip("confluent_kafka")
    with LocalCluster(nodes=3, dir=tmp_path / "cluster", node_threads=True) as cluster:
        cluster.create_topic("t", partitions=2, replication_factor=3, config={"min.insync.replicas": 2})
        cluster.wait_for(
            lambda: all(
                cluster._on_node(i, lambda n=n: all(("t", p) in n.metadata for p in (0, 1)))
                for i, n in cluster.nodes.items()
                if n is not None
            ),
            10,
            "every node knowing t",
        )
        producer = ck.Producer(
            {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "message.timeout.ms": 15000}
        )
        values = [b"v-%03d" % i for i in range(100)]
        for i, v in enumerate(values):
            producer.produce("t", v, partition=i % 2)
        assert producer.flush(20) == 0
        got = _confluent_consume(ck, cluster.bootstrap_servers, "t", 2, 100)
        assert got == {0: values[0::2], 1: values[1::2]}


def test_a_paused_node_answers_kafka_clients_only_after_it_resumes(cluster: LocalCluster) -> None:
    from tests.kafka.conftest import RawClient

    _topic(cluster, "frozen")
    client = RawClient(cluster.kafka_listeners[0].bootstrap_servers)
    try:
        assert client.request("Metadata", 3, 12, {"topics": None})["brokers"]
        cluster.pause(0, 1.5)
        t0 = time.monotonic()
        r = client.request("Metadata", 3, 12, {"topics": [{"name": "frozen", "topic_id": bytes(16)}]})
        assert time.monotonic() - t0 >= 1.0  # held while the node was frozen
        assert r["topics"][0]["error_code"] == 0
    finally:
        client.sock.close()


def test_acks_all_below_min_insync_replicas_is_refused(cluster: LocalCluster) -> None:
    from seglog.storage.records import encode_batch
    from tests.kafka.conftest import RawClient, produce_body

    cluster.create_topic("few", partitions=1, replication_factor=2, config={"min.insync.replicas": 2})
    st = cluster._state("few", 0)
    assert st is not None and len(st.isr) == 2
    leader = st.leader
    cluster.kill(next(r for r in st.isr if r != leader))
    cluster.wait_for(
        lambda: (
            (p := cluster.nodes[leader].partitions.get(("few", 0))) is not None  # type: ignore[union-attr]
            and len(p.isr_state.isr) == 1
        ),
        15,
        "the ISR down to the leader",
    )
    batch = encode_batch([b"a"], timestamps=1_700_000_000_000)
    client = RawClient(cluster.kafka_listeners[leader].bootstrap_servers)
    try:
        part = client.request("Produce", 0, 9, produce_body("few", batch, acks=-1))["responses"][0]
        assert part["partition_responses"][0]["error_code"] == 19  # NOT_ENOUGH_REPLICAS
        part = client.request("Produce", 0, 9, produce_body("few", batch, acks=1))["responses"][0]
        assert part["partition_responses"][0]["error_code"] == 0
        assert part["partition_responses"][0]["base_offset"] == 0  # the refused one left nothing
    finally:
        client.sock.close()


def test_confluent_admin_creates_topics_on_a_node(cluster: LocalCluster) -> None:
    """AdminClient.create_topics through a node's listener: the new topic is usable at once
    (produce with acks=all, consume from the start); a repeat is TOPIC_ALREADY_EXISTS, a
    replication factor above the node count INVALID_REPLICATION_FACTOR."""
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    # A node that is not the controller: the request is forwarded.
    node = next(i for i in cluster.ids if i != cluster._controller())
    bootstrap = cluster.kafka_listeners[node].bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic("made", num_partitions=2, replication_factor=3, config={"min.insync.replicas": "2"})],
        operation_timeout=10,
    )
    futures["made"].result(15)
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    errors: list[Any] = []
    for i in range(20):
        producer.produce("made", b"v%02d" % i, partition=i % 2, on_delivery=lambda err, _m: errors.append(err))
    assert producer.flush(15) == 0
    assert errors == [None] * 20
    got = _confluent_consume(ck, bootstrap, "made", 2, 20)
    assert got == {0: [b"v%02d" % i for i in range(0, 20, 2)], 1: [b"v%02d" % i for i in range(1, 20, 2)]}
    leader = cluster.leader("made", 0)
    assert leader is not None
    assert cluster.nodes[leader].partitions[("made", 0)].log.config.min_insync_replicas == 2  # type: ignore[union-attr]

    again = admin.create_topics([NewTopic("made", num_partitions=2, replication_factor=3)], operation_timeout=10)
    with pytest.raises(ck.KafkaException) as exc:
        again["made"].result(15)
    assert exc.value.args[0].code() == ck.KafkaError.TOPIC_ALREADY_EXISTS
    big = admin.create_topics([NewTopic("big", num_partitions=1, replication_factor=4)], operation_timeout=10)
    with pytest.raises(ck.KafkaException) as exc:
        big["big"].result(15)
    assert exc.value.args[0].code() == ck.KafkaError.INVALID_REPLICATION_FACTOR
    assert not any(t == "big" for t, _ in cluster.nodes[node].metadata)  # type: ignore[union-attr]


def test_admin_clients_create_topics_with_the_cluster_defaults(tmp_path: Path) -> None:
    """-1 partitions and replication factor (confluent-kafka's NewTopic defaults, kafka-python's
    explicit -1) are the nodes' ``num.partitions`` and ``default.replication.factor``."""
    ck = pytest.importorskip("confluent_kafka")
    kafka = pytest.importorskip("kafka")
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    config = {"num.partitions": 3, "default.replication.factor": 2}
    with LocalCluster(nodes=3, dir=tmp_path / "cluster", replica_config=config) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic("dflt")], operation_timeout=10)["dflt"].result(15)
        client = kafka.KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=10_000)
        try:
            client.create_topics([kafka.admin.NewTopic("dflt2", -1, -1)], timeout_ms=10_000)
        finally:
            client.close()
        for name in ("dflt", "dflt2"):
            infos = {p: i for (t, p), i in cluster.nodes[0].metadata.items() if t == name}  # type: ignore[union-attr]
            assert sorted(infos) == [0, 1, 2]
            assert {len(i.replicas) for i in infos.values()} == {2}


def test_admin_clients_describe_configs_on_a_node(cluster: LocalCluster) -> None:
    """DescribeConfigs (confluent-kafka, kafka-python): a topic's overrides are
    DYNAMIC_TOPIC_CONFIG, the rest the defaults; the node's broker resource has its id and its
    replication settings; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION."""
    ck = pytest.importorskip("confluent_kafka")
    kafka = pytest.importorskip("kafka")
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        ConfigResource,
        ConfigSource,
        ResourceType,
    )

    _topic(cluster, "described")
    node = next(i for i in cluster.ids if i != cluster.leader("described", 0))
    admin = AdminClient({"bootstrap.servers": cluster.kafka_listeners[node].bootstrap_servers})
    wanted = [ConfigResource(ResourceType.TOPIC, "described"), ConfigResource(ResourceType.BROKER, str(node))]
    topic, broker = (f.result(15) for f in admin.describe_configs(wanted, request_timeout=10).values())
    assert (topic["min.insync.replicas"].value, topic["min.insync.replicas"].source) == (
        "2",
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
    )
    assert (topic["cleanup.policy"].value, topic["cleanup.policy"].source) == (
        "delete",
        ConfigSource.DEFAULT_CONFIG.value,
    )
    assert broker["node.id"].value == str(node)
    lag = broker["replica.lag.time.max.ms"]  # LocalCluster's compressed timers
    assert (lag.value, lag.source, lag.is_read_only) == ("3000", ConfigSource.STATIC_BROKER_CONFIG.value, True)
    (missing,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "absent")], request_timeout=10).values()
    with pytest.raises(ck.KafkaException) as exc:
        missing.result(15)
    assert exc.value.args[0].code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART

    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType

    client = kafka.KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=10_000)
    try:
        got = client.describe_configs([KConfigResource(ConfigResourceType.TOPIC, "described")])
    finally:
        client.close()
    # Its default filter ("modified"): the keys not at their defaults, the topic's override.
    assert got == {
        "topic": {
            "described": {
                "min.insync.replicas": {
                    "value": "2",
                    "read_only": False,
                    "config_source": "DYNAMIC_TOPIC_CONFIG",
                    "is_sensitive": False,
                    "synonyms": [],
                    "config_type": "INT",
                    "documentation": None,
                }
            }
        }
    }


def test_admin_clients_create_partitions_on_a_node(cluster: LocalCluster) -> None:
    """CreatePartitions through a node that is not the controller: confluent-kafka's grows a
    topic from 1 to 3 partitions placed with its replication factor, a producer writes to the new
    partition 2 with acks=all at once and a consumer reads it back; kafka-python's grows it to 4;
    a count not larger is INVALID_PARTITIONS."""
    ck = pytest.importorskip("confluent_kafka")
    kafka = pytest.importorskip("kafka")
    from confluent_kafka.admin import AdminClient, NewPartitions  # type: ignore[attr-defined]

    _topic(cluster, "grow")
    node = next(i for i in cluster.ids if i != cluster._controller())
    bootstrap = cluster.kafka_listeners[node].bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_partitions([NewPartitions("grow", 3)], operation_timeout=10)["grow"].result(15)
    meta = cluster.nodes[node].metadata  # type: ignore[union-attr]
    assert sorted(p for t, p in meta if t == "grow") == [0, 1, 2]
    assert all(len(meta[("grow", p)].replicas) == 3 and meta[("grow", p)].state.leader >= 0 for p in (1, 2))
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    errors: list[Any] = []
    for i in range(5):
        producer.produce("grow", b"new-%d" % i, partition=2, on_delivery=lambda err, _m: errors.append(err))
    assert producer.flush(15) == 0
    assert errors == [None] * 5
    assert _confluent_consume(ck, bootstrap, "grow", 3, 5) == {2: [b"new-%d" % i for i in range(5)]}
    same = admin.create_partitions([NewPartitions("grow", 3)], operation_timeout=10)["grow"]
    with pytest.raises(ck.KafkaException) as exc:
        same.result(15)
    assert exc.value.args[0].code() == ck.KafkaError.INVALID_PARTITIONS

    client = kafka.KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        client.create_partitions({"grow": kafka.admin.NewPartitions(4)}, timeout_ms=10_000)
    finally:
        client.close()
    for n in cluster.nodes.values():
        assert n is not None
        cluster.wait_for(lambda n=n: ("grow", 3) in n.partitions, 10, "every node holding grow-3")


def test_admin_clients_delete_topics_on_a_node(cluster: LocalCluster) -> None:
    """DeleteTopics through a node that is not the controller: confluent-kafka's, then
    kafka-python's; the topic leaves every node's Metadata and every node's log dirs, and the
    same name can be created again, empty."""
    import os

    ck = pytest.importorskip("confluent_kafka")
    kafka = pytest.importorskip("kafka")
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    _topic(cluster, "gone", partitions=2)
    _topic(cluster, "gone2")
    node = next(i for i in cluster.ids if i != cluster._controller())
    bootstrap = cluster.kafka_listeners[node].bootstrap_servers
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce("gone", b"old-%d" % i, partition=0)
    assert producer.flush(15) == 0
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics(["gone"], operation_timeout=10)["gone"].result(15)
    client = kafka.KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        client.delete_topics(["gone2"], timeout_ms=10_000)
    finally:
        client.close()

    def gone_everywhere() -> bool:
        for i, n in cluster.nodes.items():
            assert n is not None
            if any(t in ("gone", "gone2") for t, _ in n.metadata):
                return False
            if any(d.startswith("gone") for d in os.listdir(cluster.node_dir(i))):
                return False
        return True

    cluster.wait_for(gone_everywhere, 10, "the topics gone from every node's metadata and dirs")
    for listener in cluster.kafka_listeners.values():
        md = AdminClient({"bootstrap.servers": listener.bootstrap_servers}).list_topics(timeout=10)
        assert "gone" not in md.topics and "gone2" not in md.topics
    (missing,) = admin.delete_topics(["gone"], operation_timeout=10).values()
    with pytest.raises(ck.KafkaException) as exc:
        missing.result(15)
    assert exc.value.args[0].code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART

    # The same name again: the deletion has finished (the controller dropped the topic's znodes).
    cluster.wait_for(lambda: cluster.coordinator.read("/brokers/topics/gone") is None, 10, "gone's znodes removed")
    admin.create_topics([NewTopic("gone", num_partitions=1, replication_factor=3)], operation_timeout=10)[
        "gone"
    ].result(15)
    producer.produce("gone", b"new", partition=0)
    assert producer.flush(15) == 0
    assert _confluent_consume(ck, bootstrap, "gone", 1, 1) == {0: [b"new"]}


def test_admin_client_alters_topic_configs_on_every_node(cluster: LocalCluster) -> None:
    """IncrementalAlterConfigs (confluent-kafka) through a node that is not the controller:
    SET and APPEND reach every node's replicas (min.insync.replicas 3 refuses acks=all with a
    node down), DescribeConfigs shows them as the topic's own, DELETE goes back to the default."""
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        ResourceType,
    )

    _topic(cluster, "tuned")
    node = next(i for i in cluster.ids if i != cluster._controller())
    admin = AdminClient({"bootstrap.servers": cluster.kafka_listeners[node].bootstrap_servers})

    def alter(*entries: ConfigEntry) -> None:
        (fut,) = admin.incremental_alter_configs(
            [ConfigResource(ResourceType.TOPIC, "tuned", incremental_configs=list(entries))]
        ).values()
        fut.result(15)

    alter(
        ConfigEntry("min.insync.replicas", "3", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    )
    for n in cluster.nodes.values():
        assert n is not None
        cfg = n.partitions[("tuned", 0)].log_config
        assert (cfg.min_insync_replicas, sorted(cfg.cleanup_policy)) == (3, ["compact", "delete"])
    (fut,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "tuned")], request_timeout=10).values()
    entries = fut.result(15)
    assert (entries["min.insync.replicas"].value, entries["min.insync.replicas"].source) == (
        "3",
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
    )
    alter(ConfigEntry("min.insync.replicas", None, incremental_operation=AlterConfigOpType.DELETE))
    for n in cluster.nodes.values():
        assert n is not None
        assert n.partitions[("tuned", 0)].log_config.min_insync_replicas == 1  # the default again
    bad = ConfigEntry("segment.bytes", "many", incremental_operation=AlterConfigOpType.SET)
    (fut,) = admin.incremental_alter_configs(
        [ConfigResource(ResourceType.TOPIC, "tuned", incremental_configs=[bad])]
    ).values()
    with pytest.raises(ck.KafkaException) as exc:
        fut.result(15)
    assert exc.value.args[0].code() == ck.KafkaError.INVALID_CONFIG


def test_admin_clients_delete_records_on_a_node(cluster: LocalCluster) -> None:
    """AdminClient.delete_records (confluent-kafka, then kafka-python's) moves the low
    watermark; a consumer from the earliest offset starts there."""
    ck = pytest.importorskip("confluent_kafka")
    kafka = pytest.importorskip("kafka")
    from confluent_kafka.admin import AdminClient

    _topic(cluster, "trim")
    bootstrap = cluster.bootstrap_servers
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce("trim", b"r%d" % i, partition=0)
    assert producer.flush(15) == 0
    admin = AdminClient({"bootstrap.servers": bootstrap})
    done = admin.delete_records([ck.TopicPartition("trim", 0, 4)], operation_timeout=10)
    (fut,) = done.values()
    assert fut.result(15).low_watermark == 4
    assert _confluent_consume(ck, bootstrap, "trim", 1, 6) == {0: [b"r%d" % i for i in range(4, 10)]}
    leader = cluster.leader("trim", 0)
    assert leader is not None
    assert cluster.nodes[leader].partitions[("trim", 0)].log.log_start_offset == 4  # type: ignore[union-attr]

    client = kafka.KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        tp = kafka.TopicPartition("trim", 0)
        result = client.delete_records({tp: 7}, timeout_ms=10_000)
        assert result[tp]["low_watermark"] == 7
    finally:
        client.close()
    assert _confluent_consume(ck, bootstrap, "trim", 1, 3) == {0: [b"r7", b"r8", b"r9"]}


def test_java_admin_producer_and_consumer_on_a_cluster(cluster: LocalCluster, tmp_path: Path) -> None:
    """Kafka's Java client (tests/kafka/java/ClusterAdminCheck.java) against the cluster: its
    AdminClient creates a topic with three replicas, an idempotent acks=all producer writes ten
    records at offsets 0-9, deleteRecords(4) answers low watermark 4 (and one past the high
    watermark OffsetOutOfRangeException), and a consumer's seekToBeginning lands on 4."""
    from tests.kafka.conftest import JAVA_DIR, compile_java, java_unavailable

    reason = java_unavailable()
    if reason is not None:
        pytest.skip(reason)
    classpath = compile_java(tmp_path / "classes", JAVA_DIR / "ClusterAdminCheck.java")
    proc = subprocess.run(
        ["java", "-cp", classpath, "ClusterAdminCheck", cluster.bootstrap_servers, "jtrim", "3"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert proc.stdout.count("OK ") == 5, proc.stdout
    # Every replica has let the deleted records go (the request completes once the low
    # watermark, the lowest log start over the replicas, reached 4).
    for node in cluster.nodes.values():
        assert node is not None
        assert node.partitions[("jtrim", 0)].log.log_start_offset == 4


def test_admin_errors_a_node_answers_over_kafkas_protocol(cluster: LocalCluster) -> None:
    """Exact codes, byte-level: CreateTopics (repeat, replication factor, partitions, the -1
    defaults, a name twice in one request, a bad config or name, validate_only, explicit assignments)
    and DeleteRecords
    (a follower, the leader, -1 = the high watermark, an unknown partition)."""
    from seglog.storage.records import encode_batch
    from tests.kafka.conftest import RawClient, produce_body

    leader, follower, lead, foll = _raw_clients(cluster, "raw")

    def create(client: RawClient, name: str, n: int, rf: int, validate_only: bool = False, **extra: Any) -> dict:
        topic = {"name": name, "num_partitions": n, "replication_factor": rf, "assignments": [], "configs": []}
        topic.update(extra)
        body = {"topics": [topic], "timeout_ms": 10_000, "validate_only": validate_only}
        return client.request("CreateTopics", 19, 7, body)["topics"][0]

    def delete(client: RawClient, name: str, offset: int) -> dict:
        body = {
            "topics": [{"name": name, "partitions": [{"partition_index": 0, "offset": offset}]}],
            "timeout_ms": 10_000,
        }
        return client.request("DeleteRecords", 21, 2, body)["topics"][0]["partitions"][0]

    try:
        assert create(foll, "raw", 1, 3)["error_code"] == 36  # TOPIC_ALREADY_EXISTS
        assert create(foll, "wide", 1, 4)["error_code"] == 38  # INVALID_REPLICATION_FACTOR
        assert create(foll, "wide", 0, 3)["error_code"] == 37  # INVALID_PARTITIONS
        r = create(foll, "dflt", -1, -1)  # the cluster's num.partitions / default.replication.factor: 1, 1
        assert (r["error_code"], r["num_partitions"], r["replication_factor"]) == (0, 1, 1)
        assert [p for t, p in cluster.nodes[follower].metadata if t == "dflt"] == [0]  # type: ignore[union-attr]
        twice = {"name": "twice", "num_partitions": 1, "replication_factor": 3, "assignments": [], "configs": []}
        once = dict(twice, name="once")
        body = {"topics": [twice, once, twice], "timeout_ms": 10_000, "validate_only": False}
        codes = [(t["name"], t["error_code"]) for t in foll.request("CreateTopics", 19, 4, body)["topics"]]
        assert codes == [("twice", 42), ("once", 0), ("twice", 42)]  # INVALID_REQUEST; the other one made
        assert ("once", 0) in cluster.nodes[follower].metadata  # type: ignore[union-attr]
        assert not any(t == "twice" for t, _ in cluster.nodes[follower].metadata)  # type: ignore[union-attr]
        bad = [{"name": "segment.bytes", "value": "many"}]
        assert create(foll, "wide", 1, 3, configs=bad)["error_code"] == 40  # INVALID_CONFIG
        assert create(foll, "bad name", 1, 3, validate_only=True)["error_code"] == 17  # INVALID_TOPIC_EXCEPTION
        assert create(foll, "bad name", 1, 3)["error_code"] == 17
        r = create(foll, "checked", 2, 3, validate_only=True)
        assert (r["error_code"], r["num_partitions"], r["replication_factor"]) == (0, 2, 3)
        assert create(foll, "raw", 1, 1, validate_only=True)["error_code"] == 36
        assert not any(t == "checked" for t, _ in cluster.nodes[follower].metadata)  # type: ignore[union-attr]
        r = create(foll, "placed", 2, 3)
        assert (r["error_code"], r["num_partitions"], r["replication_factor"]) == (0, 2, 3)
        assert {c["name"]: c["value"] for c in r["configs"]}["cleanup.policy"] == "delete"
        assert all((("placed", p) in cluster.nodes[follower].metadata) for p in (0, 1))  # type: ignore[union-attr]
        pinned = [{"partition_index": 0, "broker_ids": [follower, leader]}]
        r = create(lead, "pinned", -1, -1, assignments=pinned)
        assert (r["error_code"], r["num_partitions"], r["replication_factor"]) == (0, 1, 2)
        assert cluster.nodes[leader].metadata[("pinned", 0)].replicas == (follower, leader)  # type: ignore[union-attr]
        for broker_ids in ([leader, leader], [leader, 99]):  # INVALID_REPLICA_ASSIGNMENT
            wrong = [{"partition_index": 0, "broker_ids": broker_ids}]
            assert create(lead, "misplaced", -1, -1, assignments=wrong)["error_code"] == 39
        uneven = [{"partition_index": 0, "broker_ids": [leader]}, {"partition_index": 1, "broker_ids": [0, 1]}]
        assert create(lead, "misplaced", -1, -1, assignments=uneven)["error_code"] == 39
        assert create(lead, "misplaced", 1, 1, assignments=wrong)["error_code"] == 42  # INVALID_REQUEST
        assert not any(t == "misplaced" for t, _ in cluster.nodes[leader].metadata)  # type: ignore[union-attr]
        body = {
            "topics": [
                {"name": "quick", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
            ],
            "timeout_ms": 0,
            "validate_only": False,
        }
        assert foll.request("CreateTopics", 19, 7, body)["topics"][0]["error_code"] == 0  # no wait
        cluster.wait_for(lambda: cluster.leader("quick", 0) is not None, 10, "quick's leader")

        batch = encode_batch([b"a", b"b", b"c", b"d"], timestamps=1_700_000_000_000)
        r = lead.request("Produce", 0, 9, produce_body("raw", batch, acks=-1))
        assert r["responses"][0]["partition_responses"][0]["error_code"] == 0
        assert delete(foll, "raw", 2)["error_code"] == 6  # NOT_LEADER_OR_FOLLOWER
        assert (delete(lead, "raw", 2)["error_code"], delete(lead, "raw", 2)["low_watermark"]) == (0, 2)
        got = delete(lead, "raw", -1)  # -1: the high watermark
        assert (got["error_code"], got["low_watermark"]) == (0, 4)
        assert delete(lead, "raw", 9)["error_code"] == 1  # OFFSET_OUT_OF_RANGE
        assert delete(lead, "nothere", 0)["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
    finally:
        lead.sock.close()
        foll.sock.close()


def test_partition_and_config_errors_a_node_answers_over_kafkas_protocol(cluster: LocalCluster) -> None:
    """Exact codes, byte-level: CreatePartitions (an unknown topic, a count not larger, a name
    twice, validate_only, explicit assignments of the wrong size or on unknown nodes, then right),
    DescribeConfigs (an unknown topic, another node's broker resource, keys asked for),
    DeleteTopics (by an unknown id or name, a name twice, by id at v6, by name at v4) and
    IncrementalAlterConfigs (an unknown topic, a bad value, APPEND to a scalar, a key twice, a
    broker resource, validate_only, then applied on every node)."""
    leader, follower, lead, foll = _raw_clients(cluster, "raw")

    def grow(name: str, count: int, assignments: Any = None, validate_only: bool = False) -> list[tuple[str, int]]:
        topic = {"name": name, "count": count, "assignments": assignments}
        body = {"topics": [topic], "timeout_ms": 10_000, "validate_only": validate_only}
        return [(r["name"], r["error_code"]) for r in foll.request("CreatePartitions", 37, 3, body)["results"]]

    def partitions() -> list[int]:
        return sorted(p for t, p in cluster.nodes[follower].metadata if t == "raw")  # type: ignore[union-attr]

    try:
        assert grow("nothere", 2) == [("nothere", 3)]  # UNKNOWN_TOPIC_OR_PARTITION
        assert grow("raw", 1) == [("raw", 37)]  # INVALID_PARTITIONS
        assert grow("raw", 0) == [("raw", 37)]
        assert grow("raw", 2, validate_only=True) == [("raw", 0)]
        assert partitions() == [0]
        body = {"topics": [{"name": "raw", "count": 2, "assignments": None}] * 2, "timeout_ms": 10_000}
        codes = [r["error_code"] for r in foll.request("CreatePartitions", 37, 3, body)["results"]]
        assert codes == [42, 42]  # INVALID_REQUEST
        third = next(i for i in cluster.ids if i not in (leader, follower))
        assert grow("raw", 2, [{"broker_ids": [leader, follower]}]) == [("raw", 39)]  # not 3 replicas
        assert grow("raw", 2, [{"broker_ids": [leader, follower, 99]}]) == [("raw", 39)]
        assert grow("raw", 3, [{"broker_ids": [leader, follower, third]}]) == [("raw", 39)]  # one for two
        assert partitions() == [0]
        assert grow("raw", 2, [{"broker_ids": [third, leader, follower]}]) == [("raw", 0)]
        assert partitions() == [0, 1]
        info = cluster.nodes[follower].metadata[("raw", 1)]  # type: ignore[union-attr]
        assert info.replicas == (third, leader, follower) and info.state.leader == third

        def describe(rtype: int, name: str, keys: Any = None) -> dict:
            body = {"resources": [{"resource_type": rtype, "resource_name": name, "configuration_keys": keys}]}
            return foll.request("DescribeConfigs", 32, 4, dict(body, include_synonyms=False))["results"][0]

        assert describe(2, "nothere")["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
        got = describe(2, "raw", ["min.insync.replicas", "retention.ms"])
        assert got["error_code"] == 0
        assert {c["name"]: (c["value"], c["config_source"]) for c in got["configs"]} == {
            "min.insync.replicas": ("2", 1),  # DYNAMIC_TOPIC_CONFIG
            "retention.ms": (str(7 * 24 * 3600 * 1000), 5),  # DEFAULT_CONFIG
        }
        assert describe(4, str(leader))["error_code"] == 42  # another node's: INVALID_REQUEST
        got = describe(4, str(follower), ["node.id", "num.partitions"])
        assert {c["name"]: c["value"] for c in got["configs"]} == {"node.id": str(follower), "num.partitions": "1"}

        from seglog.cluster.kafka_listener import topic_id

        def delete(topics: list[Any], version: int = 6) -> list[tuple[Any, int]]:
            body = (
                {"topics": topics, "timeout_ms": 10_000}
                if version >= 6
                else {"topic_names": topics, "timeout_ms": 10_000}
            )
            return [(r["name"], r["error_code"]) for r in foll.request("DeleteTopics", 20, version, body)["responses"]]

        _topic(cluster, "byid")
        _topic(cluster, "byname")
        assert delete([{"name": None, "topic_id": topic_id("nothere")}]) == [(None, 100)]  # UNKNOWN_TOPIC_ID
        assert delete([{"name": "nothere", "topic_id": bytes(16)}]) == [("nothere", 3)]  # UNKNOWN_TOPIC_OR_PARTITION
        twice = {"name": "byid", "topic_id": bytes(16)}
        assert delete([twice, twice]) == [("byid", 42), ("byid", 42)]  # INVALID_REQUEST
        assert delete([{"name": None, "topic_id": topic_id("byid")}]) == [("byid", 0)]
        assert delete(["byname"], version=4) == [("byname", 0)]
        for name in ("byid", "byname"):
            assert not any(t == name for t, _ in cluster.nodes[follower].metadata)  # type: ignore[union-attr]

        def alter(rtype: int, name: str, configs: list[tuple[str, int, Any]], validate_only: bool = False) -> int:
            entries = [{"name": k, "config_operation": op, "value": v} for k, op, v in configs]
            resource = {"resource_type": rtype, "resource_name": name, "configs": entries}
            body = {"resources": [resource], "validate_only": validate_only}
            return int(foll.request("IncrementalAlterConfigs", 44, 1, body)["responses"][0]["error_code"])

        assert alter(2, "nothere", [("retention.ms", 0, "1000")]) == 3  # UNKNOWN_TOPIC_OR_PARTITION
        assert alter(2, "raw", [("segment.bytes", 0, "many")]) == 40  # INVALID_CONFIG
        assert alter(2, "raw", [("retention.ms", 2, "1000")]) == 40  # APPEND to a key that is not a list
        assert alter(2, "raw", [("retention.ms", 0, "1000"), ("retention.ms", 1, None)]) == 42  # INVALID_REQUEST
        assert alter(4, str(follower), [("num.partitions", 0, "3")]) == 42
        assert alter(2, "raw", [("retention.ms", 0, "1000")], validate_only=True) == 0
        assert "retention.ms" not in cluster.nodes[follower].topic_configs["raw"]  # type: ignore[union-attr]
        assert alter(2, "raw", [("retention.ms", 0, "1000")]) == 0
        for n in cluster.nodes.values():
            assert n is not None and n.topic_configs["raw"]["retention.ms"] == "1000"
        assert cluster.nodes[leader].partitions[("raw", 0)].log.config.retention_ms == 1000  # type: ignore[union-attr]
    finally:
        lead.sock.close()
        foll.sock.close()


def test_an_incremental_fetch_session_names_the_topic_by_id(cluster: LocalCluster) -> None:
    """Fetch v13+ on a node: records that arrive for a session (an incremental fetch) come
    under the topic's id, as the session was opened with it. Kafka's Java consumer drops
    records under an id it does not know, and fetched on and on (it lost a group member's
    partition after a rebalance)."""
    from tests.kafka.conftest import RawClient, fetch_body

    _topic(cluster, "ids")
    leader = cluster.leader("ids", 0)
    assert leader is not None
    client = RawClient(cluster.kafka_listeners[leader].bootstrap_servers)
    try:
        meta = client.request("Metadata", 3, 12, {"topics": [{"name": "ids", "topic_id": bytes(16)}]})
        tid = meta["topics"][0]["topic_id"]
        assert tid != bytes(16)
        full = client.request("Fetch", 1, 13, fetch_body("ids", topic_id=tid, session_epoch=0))
        assert full["error_code"] == 0 and full["session_id"] != 0
        assert [t["topic_id"] for t in full["responses"]] == [tid]
        produce = {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
                   "topic_data": [{"name": "ids", "partition_data": [{"index": 0, "records": encode_batch([b"x"])}]}]}  # fmt: skip
        assert client.request("Produce", 0, 9, produce)["responses"][0]["partition_responses"][0]["error_code"] == 0
        inc = client.request(
            "Fetch", 1, 13, fetch_body("ids", topic_id=tid, session_id=full["session_id"], session_epoch=1, topics=[])
        )
        assert inc["error_code"] == 0
        assert [t["topic_id"] for t in inc["responses"]] == [tid]
        assert [r.value for r in decode_records(bytes(inc["responses"][0]["partitions"][0]["records"]))] == [b"x"]
    finally:
        client.sock.close()
