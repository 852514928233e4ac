"""ClusterProducer.send: records go into the partition's open batch at once (the native record
accumulator), batches go out at batch.size, after linger.ms or on flush, several in flight; the
futures are RecordFutures."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from seglog._native.accumulator import RecordFuture, RecordMetadata
from seglog.client.partitioner import partition_for_key
from seglog.cluster.local import LocalCluster
from seglog.errors import RecordTooLargeError, UnknownTopicOrPartitionError
from seglog.storage.records import BatchHeader, batch_headers
from tests.replication.clients import consume_all


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with LocalCluster(nodes=3, dir=tmp_path_factory.mktemp("send") / "cluster") as c:
        c.create_topic("t", partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
        c.create_topic("two", partitions=2, replication_factor=2)
        yield c


def _leader_batches(cluster: Any, topic: str, partition: int) -> list[BatchHeader]:
    """The headers of the record batches in the leader's segment files of ``topic``-``partition``."""
    leader = cluster.leader(topic, partition)
    assert leader is not None
    out: list[BatchHeader] = []
    for d in cluster.node_dirs(leader):
        for seg in sorted(Path(d).glob(f"{topic}-{partition}/*.log")):
            out += batch_headers(seg.read_bytes())
    return out


def test_records_are_acknowledged_in_order_with_their_metadata(cluster: Any) -> None:
    with cluster.producer(acks="all", enable_idempotence=True) as p:
        futures = [p.send("t", b"rec-%05d" % i, partition=0, timestamp=1_700_000_000_000 + i) for i in range(3000)]
        p.flush(30)
    assert all(isinstance(f, RecordFuture) and f.done() for f in futures)
    mds = [f.result(0) for f in futures]
    assert all(isinstance(md, RecordMetadata) for md in mds)
    first = mds[0].offset
    assert [md.offset for md in mds] == list(range(first, first + 3000))
    assert {(md.topic, md.partition) for md in mds} == {("t", 0)}
    assert mds[7].timestamp == 1_700_000_000_007
    assert mds[7].serialized_value_size == 9 and mds[7].serialized_key_size == -1
    got = [r for r in consume_all(cluster, "t", 1, first + 3000) if r.offset >= first]
    assert [r.value for r in got] == [b"rec-%05d" % i for i in range(3000)]


def test_batches_are_cut_at_batch_size_and_several_are_in_flight(cluster: Any) -> None:
    flying = [0, 0]  # now, most at once
    with cluster.producer(acks="all", batch_size=4096, linger_ms=50) as p:
        request_once = p._request_once

        async def counted(tp: Any, data: Any) -> Any:
            flying[0] += 1
            flying[1] = max(flying)
            try:
                return await request_once(tp, data)
            finally:
                flying[0] -= 1

        p._request_once = counted
        futures = [p.send("t", b"x" * 100, partition=0) for _ in range(400)]
        p.flush(30)
    assert 1 < flying[1] <= 5  # max.in.flight.requests.per.connection
    offsets = [f.result(0).offset for f in futures]
    batches = [b for b in _leader_batches(cluster, "t", 0) if b.base_offset >= offsets[0]]
    assert sum(b.records_count for b in batches) == 400
    # 400 records of ~110 B in batches of at most 4 KiB: more than ten batches, none over.
    assert len(batches) >= 10
    assert all(b.size <= 4096 for b in batches)


def test_linger_holds_a_batch_and_flush_sends_it_at_once(cluster: Any) -> None:
    with cluster.producer(acks="all", linger_ms=60_000, delivery_timeout_ms=200_000) as p:
        futures = [p.send("t", b"lingering-%d" % i, partition=0) for i in range(5)]
        time.sleep(0.3)
        assert not any(f.done() for f in futures)
        with pytest.raises(TimeoutError, match="not acknowledged within 0.05 s"):
            futures[0].result(0.05)
        t0 = time.monotonic()
        p.flush(10)
        assert time.monotonic() - t0 < 5
    offsets = [f.result(0).offset for f in futures]
    assert offsets == list(range(offsets[0], offsets[0] + 5))
    # One batch: the five records lingered together.
    batches = [b for b in _leader_batches(cluster, "t", 0) if b.base_offset == offsets[0]]
    assert len(batches) == 1 and batches[0].records_count == 5


def test_done_callbacks_get_the_future_and_cannot_wait_on_the_loop(cluster: Any) -> None:
    seen: list[Any] = []
    ready = threading.Event()
    with cluster.producer(acks="all") as p:
        other = p.send("t", b"other", partition=0, timestamp=5)

        def done(f: Any) -> None:
            seen.append((f.result().offset, threading.current_thread().name))
            try:
                other.result(1) if not other.done() else None
                p.send("no-such-topic-seen-yet", b"v")
            except RuntimeError as exc:
                seen.append(str(exc))
            ready.set()

        fut = p.send("t", b"cb", partition=0)
        assert fut.add_done_callback(done) is None
        assert ready.wait(20)
        p.flush(10)
        late: list[Any] = []
        fut.add_done_callback(late.append)  # already done: called at once, here
    assert late == [fut]
    assert seen[0][0] == fut.result(0).offset
    assert seen[0][1] != threading.current_thread().name
    assert "cannot wait for it on the producer's own loop thread" in seen[1]


def test_a_raising_callback_spares_the_others(cluster: Any, caplog: pytest.LogCaptureFixture) -> None:
    got: list[int] = []
    with cluster.producer(acks="all", linger_ms=100) as p:
        f1 = p.send("t", b"a", partition=0)
        f2 = p.send("t", b"b", partition=0)
        f1.add_done_callback(lambda f: 1 / 0)
        f2.add_callback(lambda md: got.append(md.offset))
        p.flush(10)
    assert got == [f2.result(0).offset]
    assert any("a record callback of t-0 raised" in r.getMessage() for r in caplog.records)


def test_keys_pick_kafkas_partition_and_keyless_records_stick_then_move(cluster: Any) -> None:
    with cluster.producer(acks=1, batch_size=1024) as p:
        keyed = [(k, p.send("two", b"v", key=k)) for k in (b"alpha", b"beta", b"gamma", b"delta", b"eps")]
        keyless = [p.send("two", b"k" * 200) for _ in range(200)]
        p.flush(30)
    for k, f in keyed:
        assert f.result(0).partition == partition_for_key(k, 2)
    parts = [f.result(0).partition for f in keyless]
    # Sticky: runs of one partition, a batch (~1 KiB, ~4 records) long at least, and both used.
    assert set(parts) == {0, 1}
    runs = sum(1 for a, b in zip(parts, parts[1:]) if a != b)
    assert runs < len(parts) / 3


def test_bad_records_are_refused_at_send(cluster: Any) -> None:
    with cluster.producer(acks="all", max_block_ms=300, max_request_size=10_000) as p:
        with pytest.raises(UnknownTopicOrPartitionError, match="partition 3 of topic 't' does not exist"):
            p.send("t", b"v", partition=3)
        with pytest.raises(UnknownTopicOrPartitionError, match="no topic 'missing'.*max.block.ms=300"):
            p.send("missing", b"v")
        with pytest.raises(RecordTooLargeError):
            p.send("t", b"x" * 20_000, partition=0)
        with pytest.raises(TypeError, match="str"):
            p.send("t", b"v", key="text", partition=None)
        ok = p.send("t", b"fine", partition=0)
        p.flush(10)
    assert ok.result(0).offset >= 0


def test_compression_goes_on_the_wire(cluster: Any) -> None:
    value = b"compressible " * 200
    with cluster.producer(acks="all", compression_type="zstd", linger_ms=20) as p:
        futures = [p.send("t", value, partition=0, headers=[("h", b"%d" % i)]) for i in range(50)]
        p.flush(10)
    first = futures[0].result(0).offset
    batches = [b for b in _leader_batches(cluster, "t", 0) if b.base_offset >= first]
    assert batches and all(b.attributes & 7 == 4 for b in batches)
    assert sum(b.size for b in batches) < len(value) * 50 / 10
    got = [r for r in consume_all(cluster, "t", 1, first + 50) if r.offset >= first]
    assert [r.value for r in got] == [value] * 50


def test_headers_come_back_to_our_consumer_and_to_kafka_python(cluster: Any) -> None:
    sent = [[("trace", b"%d" % i), ("empty", None), ("dup", b"a"), ("dup", b"b")] for i in range(20)]
    with cluster.producer(acks="all", linger_ms=20) as p:
        futures = [p.send("t", b"h-%d" % i, partition=0, headers=h) for i, h in enumerate(sent)]
        p.flush(10)
    first = futures[0].result(0).offset
    got = [r for r in consume_all(cluster, "t", 1, first + 20) if r.offset >= first]
    assert [r.headers for r in got[:20]] == sent

    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, enable_auto_commit=False)
    try:
        tp = TopicPartition("t", 0)
        consumer.assign([tp])
        consumer.seek(tp, first)
        theirs: list[Any] = []
        deadline = time.monotonic() + 30
        while len(theirs) < 20 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                theirs.extend(records)
    finally:
        consumer.close()
    assert [r.value for r in theirs[:20]] == [b"h-%d" % i for i in range(20)]
    assert [list(r.headers) for r in theirs[:20]] == sent


def test_producers_alive_at_once_each_get_metadata_and_close_alone(cluster: Any) -> None:
    first = cluster.producer(acks="all")
    second = cluster.producer(acks="all")
    try:
        a = first.send("two", b"from-first", partition=1)
        b = second.send("t", b"from-second", partition=0)
        assert b.result(20).partition == 0
        after_a = a.result(20).offset + 1
        c = second.send("two", b"second-to-two", partition=1)
        assert c.result(20).offset == after_a
        first.close()
        # The other producer's connections are its own: closing the first leaves them open.
        assert second.send("two", b"after-close", partition=1).result(20).offset == c.result(0).offset + 1
    finally:
        first.close()
        second.close()
