"""``LocalCluster`` end to end over loopback TCP: kill the leader during an ``acks=all``
stream, and every acknowledged record is consumed exactly once afterwards."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from seglog._native.accumulator import RecordFuture
from seglog.cluster import start_cluster
from seglog.cluster.local import LocalCluster
from tests.replication.clients import consume_all


def test_killing_the_leader_during_an_acks_all_stream_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    with LocalCluster(nodes=3, dir=tmp_path / "cluster") as cluster:
        cluster.create_topic("orders", partitions=2, replication_factor=3, config={"min.insync.replicas": 2})
        producer = cluster.producer(
            acks="all", enable_idempotence=True, delivery_timeout_ms=60_000, request_timeout_ms=2000
        )
        futures: list[tuple[bytes, RecordFuture]] = []
        stop = threading.Event()

        def stream() -> None:
            n = 0
            while not stop.is_set():
                v = b"order-%06d" % n
                futures.append((v, producer.send("orders", v, partition=n % 2)))
                n += 1
                if n % 50 == 0:
                    time.sleep(0.005)

        t = threading.Thread(target=stream)
        t.start()
        time.sleep(0.5)
        victim = cluster.leader("orders", 0)
        assert victim is not None
        cluster.kill(victim)
        cluster.wait_for(
            lambda: (st := cluster._state("orders", 0)) is not None and st.leader not in (-1, victim),
            20,
            "a new leader",
        )
        time.sleep(0.5)
        stop.set()
        t.join()
        producer.flush(60)
        acked = {}
        failed = 0
        for v, f in futures:
            try:
                md = f.result(0)
                acked[v] = (md.partition, md.offset)
            except Exception:  # noqa: BLE001 - counted: may or may not be in the log
                failed += 1
        producer.close()
        assert len(acked) > 500
        assert cluster.leader("orders", 0) != victim
        cluster.restart(victim)
        cluster.wait_for(
            lambda: all(len(cluster._state("orders", p).isr) == 3 for p in (0, 1)),  # type: ignore[union-attr]
            30,
            "the victim back in the ISRs",
        )
        got = consume_all(cluster, "orders", 2, len(acked) + failed)
        values = [r.value for r in got]
        assert len(values) == len(set(values)), "a record was consumed twice"
        where = {r.value: (r.partition, r.offset) for r in got}
        missing = [v for v in acked if v not in where]
        assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:3]}"
        assert all(where[v] == pos for v, pos in acked.items())


def test_pause_shrinks_the_isr_and_the_node_rejoins(tmp_path: Path) -> None:
    with LocalCluster(
        nodes=3, dir=tmp_path / "cluster", replica_config={"replica.lag.time.max.ms": 1000, "session.timeout.ms": 5000}
    ) as cluster:
        cluster.create_topic("t", partitions=1, replication_factor=3)
        leader = cluster.leader("t")
        follower = next(i for i in cluster.ids if i != leader)
        producer = cluster.producer(acks="1")
        cluster.pause(follower, 2.5)
        deadline = time.monotonic() + 10
        while follower in cluster.isr("t") and time.monotonic() < deadline:
            producer.send("t", b"x").result(5)
            time.sleep(0.05)
        assert follower not in cluster.isr("t")
        cluster.wait_for(lambda: follower in cluster._state("t", 0).isr, 20, "rejoin")  # type: ignore[union-attr]
        producer.close()


def test_a_cluster_with_a_shared_secret_and_preferred_election(tmp_path: Path) -> None:
    with LocalCluster(nodes=3, dir=tmp_path / "cluster", secret="cluster-secret") as cluster:
        cluster.create_topic("t", partitions=3, replication_factor=3)
        leaders = {cluster.leader("t", p) for p in range(3)}
        assert leaders == {0, 1, 2}  # Kafka's placement spreads the leaders
        first = cluster.leader("t", 0)
        assert first is not None
        cluster.kill(first)
        cluster.wait_for(lambda: (st := cluster._state("t", 0)) is not None and st.leader not in (-1, first), 20)
        cluster.restart(first)
        cluster.wait_for(lambda: first in cluster._state("t", 0).isr, 20)  # type: ignore[union-attr]
        assert cluster.elect_preferred_leader("t", 0) == first
        with cluster.producer(acks="all") as p:
            assert p.send("t", b"hello", partition=0).result(10).offset == 0
        got = consume_all(cluster, "t", 1, 1)
        assert [r.value for r in got] == [b"hello"]


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'memory' or 'zookeeper'"):
        LocalCluster(coordinator="etcd")
    with pytest.raises(ValueError, match="through ZooKeeper"):
        start_cluster(coordinator="memory", processes=True)
    with LocalCluster(nodes=1, dir=tmp_path / "c") as cluster:
        with pytest.raises(ValueError, match="no node 5"):
            cluster.kill(5)
        from seglog.errors import InvalidReplicationFactorError

        with pytest.raises(InvalidReplicationFactorError):
            cluster.create_topic("t", replication_factor=2)


def test_start_cluster_makes_each_kind_and_local_cluster_points_at_it(tmp_path: Path) -> None:
    with start_cluster(nodes=1, dir=tmp_path / "c") as cluster:
        assert type(cluster) is LocalCluster
        cluster.create_topic("t", replication_factor=1)
        with cluster.producer() as p:
            assert p.send("t", b"v").result(10).offset == 0
    # One process per node is the factory's to make: LocalCluster says where to go, and starts
    # nothing (no directory, no ZooKeeper server) on the way.
    with pytest.raises(ValueError, match=r"start_cluster\(\.\.\., processes=True\)"):
        LocalCluster(dir=tmp_path / "p", coordinator="zookeeper", processes=True)
    assert not (tmp_path / "p").exists()


def test_the_cluster_demo_tells_the_story(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from seglog.cli import main

    assert main(["demo", "--no-spark", "--records", "300", "--dir", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    assert "was elected" in out and "rejoined" in out
    assert "600 acknowledged, 0 lost or moved, 0 duplicated, 0 unexpected" in out


def test_send_batch_ships_columns_by_key_and_survives_a_leader_kill(tmp_path: Path) -> None:
    from seglog.client.partitioner import partition_for_key

    with LocalCluster(nodes=3, dir=tmp_path / "cluster") as cluster:
        cluster.create_topic("events", partitions=3, replication_factor=3, config={"min.insync.replicas": 2})
        producer = cluster.producer(
            acks="all",
            enable_idempotence=True,
            delivery_timeout_ms=60_000,
            request_timeout_ms=2000,
            max_request_size=32 * 1024,
        )
        n = 12_000
        values = [b"event-%06d" % i + b"." * 60 for i in range(n)]
        keys = [b"user-%d" % (i % 97) for i in range(n)]
        results = producer.send_batch("events", values, keys=keys)
        # Batches of at most max.request.size, per partition in the order of the column.
        assert sum(r.record_count for r in results) == n and len(results) >= 3 * 2
        offsets = {}
        for p in range(3):
            mine = [i for i in range(n) if partition_for_key(keys[i], 3) == p]
            got = [o for r in results if r.partition == p for o in range(r.first_offset, r.last_offset + 1)]
            assert got == list(range(len(mine)))
            offsets.update({(p, o): i for o, i in zip(got, mine)})

        # A second column while the leader of partition 0 dies: retried with the same sequence
        # numbers, acknowledged once the new leader has it.
        victim = cluster.leader("events", 0)
        assert victim is not None
        more = [b"late-%06d" % i for i in range(3000)]
        done: list[Any] = []  # what send_batch returned
        t = threading.Thread(target=lambda: done.append(producer.send_batch("events", more, partition=0)))
        t.start()
        cluster.kill(victim)
        t.join(90)
        assert done and not isinstance(done[0], BaseException)
        late = [o for res in done[0] for o in range(res.first_offset, res.last_offset + 1)]
        assert len(late) == 3000 and late == sorted(late)
        producer.close()

        consumed = consume_all(cluster, "events", 3, n + 3000, timeout_s=60)
        by_pos = {(rec.partition, rec.offset): rec for rec in consumed}
        assert len(by_pos) == len(consumed) == n + 3000  # nothing duplicated
        for (p, o), i in offsets.items():
            assert by_pos[(p, o)].value == values[i] and by_pos[(p, o)].key == keys[i]
        assert [by_pos[(0, o)].value for o in late] == more  # nothing lost, in order


def test_send_batch_keeps_column_order_without_idempotence(tmp_path: Path) -> None:
    # Several ~1 MiB requests in flight on one connection: without sequence numbers only the
    # order of the requests on the wire (and of their handling) keeps the column in order.
    with LocalCluster(nodes=1, dir=tmp_path / "cluster") as cluster:
        cluster.create_topic("t", partitions=1, replication_factor=1)
        producer = cluster.producer(acks="1", enable_idempotence=False)
        n = 80_000
        values = [b"%08d" % i + b"." * 100 for i in range(n)]
        results = producer.send_batch("t", values, partition=0)
        assert len(results) >= 8
        assert [r.first_offset for r in results] == sorted(r.first_offset for r in results)
        producer.close()
        got = consume_all(cluster, "t", 1, n)
        assert [r.value for r in got] == values


def test_send_batch_reuses_its_batch_buffers_only_once_answered(tmp_path: Path) -> None:
    # send_batch encodes into buffers it keeps once a batch's request is answered. Columns of
    # different record sizes one after another (buffers shrink and grow), several requests in
    # flight: every record must come back as sent. With acks=0 nothing answers, so nothing is kept.
    import random

    rnd = random.Random(7)
    with LocalCluster(nodes=1, dir=tmp_path / "cluster") as cluster:
        cluster.create_topic("t", partitions=1, replication_factor=1)
        producer = cluster.producer(acks="all", enable_idempotence=True, max_request_size=256 * 1024)
        columns = [
            [rnd.randbytes(size) for _ in range(count)] for size, count in ((900, 3000), (40, 20_000), (5000, 400))
        ]
        for values in columns:
            producer.send_batch("t", values, partition=0)
        kept = producer._buffers
        assert 0 < len(kept) <= producer.config.max_in_flight_requests_per_connection + 1
        producer.close()
        fire = cluster.producer(acks="0", enable_idempotence=False)
        last = [rnd.randbytes(300) for _ in range(2000)]
        fire.send_batch("t", last, partition=0)
        assert fire._buffers == []
        fire.close()
        want = [v for c in columns for v in c] + last
        got = consume_all(cluster, "t", 1, len(want))
        assert [r.value for r in got] == want
