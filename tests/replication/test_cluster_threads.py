"""``LocalCluster(node_threads=True)``: every node on an event loop (and thread) of its own.

Kill, restart and pause reach a node on its own loop while a ``send_batch`` stream runs on the
cluster's loop; afterwards every acknowledged record is consumed exactly once, at the offset its
acknowledgement named. The oracle is the producer's own acknowledgements (values are unique),
not the cluster's view of itself.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from seglog.cluster.coordinator import InMemoryCoordinator
from seglog.cluster.local import LocalCluster
from tests.replication.clients import consume_all

TOPIC = "t"
PER_CALL = 500


def _stream(cluster: LocalCluster, stop: threading.Event, acked: dict[bytes, int], errors: list[BaseException]) -> None:
    """send_batch columns of unique values until ``stop``; an acknowledged call's values are
    recorded with the offsets its BatchResults give them."""
    producer = cluster.producer(
        acks="all", enable_idempotence=True, delivery_timeout_ms=30_000, request_timeout_ms=2000
    )
    n = 0
    try:
        while not stop.is_set():
            values = [b"v-%08d" % (n + i) + b"." * 90 for i in range(PER_CALL)]
            n += PER_CALL
            try:
                results = producer.send_batch(TOPIC, values, partition=0, timeout=60)
            except Exception as exc:  # noqa: BLE001 - an unacknowledged call: its records may or may not be in
                errors.append(exc)
                continue
            at = 0
            for r in results:
                assert r.last_offset - r.first_offset + 1 == r.record_count
                for k in range(r.record_count):
                    acked[values[at + k]] = r.first_offset + k
                at += r.record_count
            assert at == len(values)
    finally:
        producer.close()


@pytest.mark.heavy
def test_kill_restart_pause_during_a_send_batch_stream(tmp_path: Path) -> None:
    with LocalCluster(nodes=3, dir=tmp_path / "c", node_threads=True) as cluster:
        assert len({t.ident for t in cluster._node_threads.values()} | {cluster._thread.ident}) == 4
        cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
        acked: dict[bytes, int] = {}
        errors: list[BaseException] = []
        stop = threading.Event()
        t = threading.Thread(target=_stream, args=(cluster, stop, acked, errors))
        t.start()
        try:
            cluster.wait_for(lambda: len(acked) >= 2000, 20, "a first acknowledged stretch")
            leader = cluster.leader(TOPIC)
            assert leader is not None
            follower = next(i for i in cluster.ids if i != leader)
            # A follower dies and comes back while the stream runs.
            cluster.kill(follower)
            n = len(acked)
            cluster.wait_for(lambda: len(acked) >= n + 2000, 20, "writes with a follower down")
            cluster.restart(follower)
            cluster.wait_for(lambda: follower in cluster.isr(TOPIC), 20, "the follower back in the ISR")
            # The leader freezes for a moment (its requests wait on its own loop).
            cluster.pause(leader, 0.3)
            time.sleep(0.4)
            n = len(acked)
            cluster.wait_for(lambda: len(acked) >= n + 2000, 20, "writes after the pause")
            # The leader dies: another takes over, the stream goes on, the old one returns.
            cluster.kill(leader)
            cluster.wait_for(lambda: cluster.leader(TOPIC) not in (None, leader), 20, "a new leader")
            n = len(acked)
            cluster.wait_for(lambda: len(acked) >= n + 2000, 30, "writes acknowledged by the new leader")
            cluster.restart(leader)
            cluster.wait_for(lambda: sorted(cluster.isr(TOPIC)) == [0, 1, 2], 30, "a full ISR")
        finally:
            stop.set()
            t.join(90)
        assert not t.is_alive()
        got = [(r.value or b"", r.offset) for r in consume_all(cluster, TOPIC, 1, len(acked))]
        seen: dict[bytes, list[int]] = {}
        for v, off in got:
            seen.setdefault(v, []).append(off)
        offsets = [off for _, off in got]
        assert len(offsets) == len(set(offsets)), "an offset consumed twice"
        lost = [v for v in acked if v not in seen]
        assert not lost, f"{len(lost)} acknowledged records missing, e.g. {lost[:3]}"
        dup = [v for v, offs in seen.items() if len(offs) > 1]
        assert not dup, f"{len(dup)} records consumed more than once, e.g. {dup[:3]}"
        moved = [v for v, off in acked.items() if seen[v] != [off]]
        assert not moved, f"{len(moved)} records not at their acknowledged offsets"
        # Every replica holds the same high watermark once the stream has settled.
        cluster.wait_for(lambda: len(set(cluster.high_watermarks(TOPIC).values())) == 1, 20, "equal HWs")


def test_watch_events_run_on_the_nodes_own_loops() -> None:
    with LocalCluster(nodes=3, node_threads=True) as cluster:
        assert isinstance(cluster.coordinator, InMemoryCoordinator)
        seen: dict[int, int | None] = {}
        for i in cluster.ids:
            node = cluster.nodes[i]
            assert node is not None and node.session is not None
            done = threading.Event()

            def probe(_ev: object, i: int = i, done: threading.Event = done) -> None:
                seen[i] = threading.get_ident()
                done.set()

            path = f"/probe-{i}"
            cluster._on_node(i, lambda s=node.session, p=path: s.exists(p, watch=probe))
            cluster._on_node(i, lambda s=node.session, p=path: s.create(p, b""))
            assert done.wait(5)
        assert seen == {i: cluster._node_threads[i].ident for i in cluster.ids}


def test_one_loop_without_node_threads() -> None:
    with LocalCluster(nodes=3, node_threads=False) as cluster:
        assert not cluster._node_threads
        assert all(loop is cluster.loop for loop in cluster._node_loops.values())
        cluster.create_topic(TOPIC, 1, 3)
        with cluster.producer(acks="all") as p:
            res = p.send_batch(TOPIC, [b"x"] * 1000, partition=0)
        assert sum(r.record_count for r in res) == 1000
