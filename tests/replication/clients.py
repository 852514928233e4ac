"""What the cluster tests of this folder do as clients of a LocalCluster (the simulator is sim.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def consume_all(
    cluster: Any, topic: str, partitions: int, expect: int, timeout_s: float = 30, **consumer_config: Any
) -> list[Any]:
    """Every record of ``topic``'s partitions 0..``partitions``-1 that ``cluster``'s consumer
    reads, polling until ``expect`` came (giving up once ``timeout_s`` pass without a new
    record: millions of records take longer than that on a loaded machine), then once more: a
    record beyond those expected shows up in the result."""
    consumer = cluster.consumer(**consumer_config)
    consumer.assign([(topic, p) for p in range(partitions)])
    got: list[Any] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < expect and time.monotonic() < deadline:
            more = consumer.poll(500)
            if more:
                got += more
                deadline = time.monotonic() + timeout_s
        got += consumer.poll(300)
    finally:
        consumer.close()
    return got


def paused_follower_cluster(tmp_path: Path, zookeeper: str) -> Any:
    """Three node processes on ZooKeeper (chroot ``zookeeper``) under ``tmp_path / "cluster"``,
    for :func:`delete_records_with_a_paused_follower`: a 10 s session timeout, so that the
    paused follower keeps its session (and its place in the ISR) while DeleteRecords waits."""
    from seglog.cluster import start_cluster

    return start_cluster(
        nodes=3,
        dir=tmp_path / "cluster",
        coordinator="zookeeper",
        processes=True,
        zookeeper=zookeeper,
        replica_config={"session.timeout.ms": 10_000},
    )


def delete_records_with_a_paused_follower(cluster: Any, topic: str = "t", records: int = 100, offset: int = 60) -> int:
    """On a three-node ``cluster`` (a ``ProcessCluster``: pausing is SIGSTOP): ``records``
    records in ``topic``-0, then DeleteRecords before ``offset`` while a follower is paused —
    it must time out with the low watermark still at 0 — and again once it is resumed, when it
    must complete. Returns the paused follower."""
    from seglog.errors import RequestTimedOutError

    cluster.create_topic(topic, partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
    producer = cluster.producer(acks="all")
    for k in range(records):
        producer.send(topic, b"v%04d" % k, partition=0)
    producer.flush(30)
    producer.close()
    cluster.wait_for(lambda: cluster.watermarks(topic) == (0, records, 0), 20, f"HW {records}, LW 0")
    leader = cluster.leader(topic)
    follower = next(i for i in cluster.ids if i != leader)
    cluster.pause(follower)
    try:
        try:
            cluster.delete_records(topic, 0, offset, timeout_ms=1000)
        except RequestTimedOutError as exc:
            assert exc.offset == 0, f"the low watermark reached should be 0: {exc}"
            assert "reached 0, not" in str(exc), exc
        else:
            raise AssertionError(f"DeleteRecords completed while follower {follower} was paused")
        assert cluster.watermarks(topic) == (offset, records, 0)
    finally:
        cluster.resume(follower)
    lw = cluster.delete_records(topic, 0, offset, timeout_ms=15_000)
    assert lw >= offset, lw
    return int(follower)
