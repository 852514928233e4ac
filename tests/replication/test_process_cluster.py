"""Node processes on ZooKeeper (``start_cluster(coordinator="zookeeper", processes=True)``):
acknowledged records survive a SIGKILLed leader, exactly once; SIGTERM with controlled
shutdown moves leadership before the node deregisters and leaves the clean-shutdown marker; a
node frozen past its session timeout is declared dead and replaced (session expiry = node
death), then rejoins with a new broker epoch."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from seglog.cluster import start_cluster
from seglog.config.properties import parse_properties
from seglog.storage.logdir import CLEAN_SHUTDOWN_FILE
from tests.replication.clients import consume_all, delete_records_with_a_paused_follower, paused_follower_cluster

pytestmark = pytest.mark.cluster


@pytest.fixture
def cluster(zookeeper_chroot: str, tmp_path: Any) -> Iterator[Any]:
    c = start_cluster(
        nodes=3, dir=tmp_path / "cluster", coordinator="zookeeper", processes=True, zookeeper=zookeeper_chroot
    )
    try:
        yield c
    finally:
        c.close()


def test_sigkill_leader_loses_no_acknowledged_record(cluster: Any) -> None:
    info = cluster.info()
    assert sorted(info) == [0, 1, 2]
    assert len({n.pid for n in info.values()}) == 3 and all(n.running for n in info.values())
    assert all(os.path.isdir(n.data_dir) for n in info.values())
    cluster.create_topic("safe", partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
    producer = cluster.producer(
        acks="all",
        enable_idempotence=True,
        linger_ms=2,
        delivery_timeout_ms=30_000,
        request_timeout_ms=3000,
        retry_backoff_ms=50,
    )
    acked: dict[bytes, int] = {}
    failed: list[bytes] = []
    stop = threading.Event()

    def stream() -> None:
        i = 0
        while not stop.is_set():
            batch = [(b"r-%06d" % n, producer.send("safe", b"r-%06d" % n)) for n in range(i, i + 50)]
            i += 50
            for v, f in batch:
                try:
                    acked[v] = f.result(60).offset
                except Exception:  # noqa: BLE001 - indeterminate or failed: not acknowledged
                    failed.append(v)

    t = threading.Thread(target=stream)
    t.start()
    try:
        cluster.wait_for(lambda: len(acked) >= 500, 30, "500 acknowledged records")
        leader = cluster.leader("safe")
        assert leader is not None
        old_pid = cluster.pid(leader)
        cluster.kill(leader)  # SIGKILL by PID
        assert cluster.pid(leader) is None
        cluster.wait_for(lambda: cluster.leader("safe") not in (None, leader), 30, "a new leader")
        n = len(acked)
        cluster.wait_for(lambda: len(acked) >= n + 500, 30, "writes acknowledged by the new leader")
        cluster.restart(leader)
        assert cluster.pid(leader) not in (None, old_pid)
        cluster.wait_for(lambda: leader in cluster.isr("safe"), 30, "the restarted node back in the ISR")
    finally:
        stop.set()
        t.join(60)
    producer.close()
    got = consume_all(cluster, "safe", 1, len(acked), fetch_max_wait_ms=100)
    values = [r.value for r in got]
    assert len(values) == len(set(values)), "a record was consumed twice"
    by_value = {r.value: r.offset for r in got}
    lost = [v for v in acked if by_value.get(v) != acked[v]]
    assert not lost, f"{len(lost)} acknowledged records lost or moved, e.g. {lost[:3]}"
    assert [r.offset for r in got] == list(range(len(got)))


def test_sigterm_moves_leadership_first_and_leaves_the_marker(cluster: Any) -> None:
    from kazoo.client import KazooClient  # type: ignore[import-untyped]  # kazoo ships no type information

    cluster.create_topic("ctl", partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
    producer = cluster.producer(acks="all")
    for f in [producer.send("ctl", b"x%d" % i) for i in range(200)]:
        f.result(30)
    leader = cluster.leader("ctl")
    before = cluster.state("ctl")
    assert leader is not None and before is not None
    t0 = time.monotonic()
    assert cluster.terminate(leader) == 0
    took = time.monotonic() - t0
    after = cluster.state("ctl")
    assert after is not None
    assert after.leader not in (-1, leader) and leader not in after.isr
    assert after.leader_epoch == before.leader_epoch + 1
    # The new state was written before the node's registration went: the znode's mzxid is
    # older than the last change of /brokers/ids' children (the deregistration).
    zk = KazooClient(cluster.zookeeper_connect)
    zk.start(10)
    try:
        _, st = zk.get("/brokers/topics/ctl/partitions/0/state")
        _, ids = zk.get("/brokers/ids")
        assert str(leader) not in zk.get_children("/brokers/ids")
    finally:
        zk.stop()
        zk.close()
    assert st.mzxid < ids.pzxid
    assert took < cluster.replica_config.session_timeout_ms / 1000, "shutdown waited for a session expiry"
    assert os.path.exists(os.path.join(cluster.node_dir(leader), CLEAN_SHUTDOWN_FILE))
    with open(cluster.log_path(leader)) as f:
        assert "controlled shutdown succeeded" in f.read()
    # The cluster keeps taking acks=all writes (ISR of 2 = min.insync.replicas).
    assert producer.send("ctl", b"after").result(30).offset == 200
    producer.close()
    cluster.restart(leader)
    cluster.wait_for(lambda: leader in cluster.isr("ctl"), 30, "the node back in the ISR")
    assert not os.path.exists(os.path.join(cluster.node_dir(leader), CLEAN_SHUTDOWN_FILE))


def test_session_expiry_is_node_death(cluster: Any) -> None:
    """SIGSTOP the leader past zookeeper.session.timeout.ms: ZooKeeper expires its session (a
    real expiry, no client co-operation), the controller elects another leader; on SIGCONT the
    node notices, registers again with a new broker epoch and catches up."""
    cluster.create_topic("exp", partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
    leader = cluster.leader("exp")
    assert leader is not None
    epoch_before = dict(cluster.state("exp").broker_epochs)[leader]
    cluster.pause(leader)
    try:
        cluster.wait_for(lambda: leader not in cluster.registered(), 20, "the frozen node's session to expire")
        cluster.wait_for(lambda: cluster.leader("exp") not in (None, leader), 20, "a new leader")
        producer = cluster.producer(acks="all")
        assert producer.send("exp", b"while-frozen").result(30).offset == 0
    finally:
        cluster.resume(leader)
    cluster.wait_for(lambda: leader in cluster.registered(), 20, "the node to register again")
    cluster.wait_for(lambda: leader in cluster.isr("exp"), 30, "the node back in the ISR")
    assert dict(cluster.state("exp").broker_epochs)[leader] > epoch_before
    assert producer.send("exp", b"after").result(30).offset == 1
    producer.close()


def test_describe_bootstrap_prints_kafka_topics_layout(cluster: Any) -> None:
    cluster.create_topic("desc", partitions=2, replication_factor=3)
    out = subprocess.run(
        [sys.executable, "-m", "seglog.cli", "describe", "--bootstrap", cluster.kafka_address(1)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "Topic: desc\tPartitionCount: 2\tReplicationFactor: 3"
    for p in (0, 1):
        st = cluster.state("desc", p)
        line = (
            f"\tTopic: desc\tPartition: {p}\tLeader: {st.leader}\tReplicas: "
            f"{','.join(map(str, cluster.client.describe_topics(['desc'])[p].replicas))}\t"
            f"Isr: {','.join(map(str, st.isr))}"
            # From the leader: the low watermark is 0 once both followers have fetched.
            "\tLogStart: 0\tHighWatermark: 0\tLowWatermark: "
        )
        assert any(x in (line + "0", line + "?") for x in lines), (line, lines)


def test_zookeeper_restart_keeps_the_cluster(tmp_path: Any) -> None:
    """ZooKeeper killed and started again within the session timeout: sessions survive (the
    server persisted them), no node is declared dead, the controller and leader stay, and
    acks=all writes continue once the nodes have reconnected."""
    with start_cluster(
        nodes=3,
        dir=tmp_path / "c",
        coordinator="zookeeper",
        processes=True,
        replica_config={"session.timeout.ms": 6000},
    ) as cluster:
        assert cluster.zk_server is not None
        cluster.create_topic("z", partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
        producer = cluster.producer(acks="all", enable_idempotence=True)
        assert producer.send("z", b"before").result(30).offset == 0
        st = cluster.state("z")
        controller = cluster.controller()
        cluster.zk_server.kill()
        # The data plane does not need ZooKeeper: writes go on while it is down.
        assert producer.send("z", b"during").result(30).offset == 1
        cluster.zk_server.start()
        assert producer.send("z", b"after").result(30).offset == 2
        time.sleep(2)  # past any reconnection, within the session timeout
        after = cluster.state("z")
        logs = {i: cluster._log_tail(i, 40) for i in cluster.ids}
        assert cluster.registered() == [0, 1, 2], logs
        assert cluster.controller() == controller, logs
        assert after is not None and st is not None and after.leader == st.leader, (after, st, logs)
        assert after.leader_epoch == st.leader_epoch, (after, st, logs)
        producer.close()


def test_advertised_listener_set_per_node(cluster: Any) -> None:
    """A node advertises what ``advertised.listeners`` says (how a proxy is put in front of
    it); clients and peers then reach it there."""
    port = cluster.port(2)
    cluster.set_node_config(2, {"advertised.listeners": f"PLAINTEXT://localhost:{port}"})
    with open(cluster.config_path(2), encoding="utf-8") as f:
        assert parse_properties(f.read())["advertised.listeners"] == f"PLAINTEXT://localhost:{port}"
    cluster.restart(2)
    assert cluster._registration(2)["address"] == f"localhost:{port}"
    assert cluster.info()[2].port == port
    cluster.create_topic("adv", partitions=1, replication_factor=3)
    producer = cluster.producer(acks="all")
    assert producer.send("adv", b"x").result(30).offset == 0
    producer.close()
    cluster.wait_for(lambda: sorted(cluster.isr("adv")) == [0, 1, 2], 30, "a full ISR")
    with pytest.raises(Exception, match="advertised.listeners|listener"):
        cluster.set_node_config(1, {"advertised.listeners": "nonsense"})


def test_delete_records_waits_for_a_paused_follower(zookeeper_chroot: str, tmp_path: Any) -> None:
    """DeleteRecords while a follower is SIGSTOPped (within its session timeout, so it still
    counts) times out with the low watermark it reached; after SIGCONT it completes, and every
    node's log starts at the offset."""
    with paused_follower_cluster(tmp_path, zookeeper_chroot) as cluster:
        delete_records_with_a_paused_follower(cluster)
        assert cluster.watermarks("t") == (60, 100, 60)
