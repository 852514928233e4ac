"""The embedded producer: send, send_batch, partitioning, linger, acks, idempotence."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from seglog import Store, TopicPartition
from seglog.client.partitioner import partition_for_key
from seglog.client.producer import RecordFuture, RecordMetadata
from seglog.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaStorageError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
)
from seglog.storage.records import batch_headers, decode_records, encode_batch
from seglog.util.clock import ManualClock


def _all(store: Store, topic: str) -> dict[int, list[Any]]:
    out = {}
    for p in range(store.partitions_for(topic)):
        lg = store.log(topic, p)
        data = lg.read(lg.log_start_offset, 1 << 30).to_bytes() if lg.log_end_offset else b""
        out[p] = decode_records(data) if data else []
    return out


def _batches(store: Store, topic: str, p: int) -> list[Any]:
    lg = store.log(topic, p)
    return batch_headers(lg.read(0, 1 << 30).to_bytes()) if lg.log_end_offset else []


def test_send_without_linger_returns_metadata(store: Store, clock: ManualClock) -> None:
    store.create_topic("t", 1)
    p = store.producer()
    mds = [p.send("t", b"v%d" % i, key=b"k", headers=[("h", b"x")]) for i in range(3)]
    assert all(isinstance(m, RecordMetadata) for m in mds)
    assert [(m.topic, m.partition, m.offset, m.timestamp) for m in mds] == [
        ("t", 0, i, clock.time_ms()) for i in range(3)
    ]
    assert mds[0].serialized_key_size == 1 and mds[0].serialized_value_size == 2
    recs = _all(store, "t")[0]
    assert [(r.offset, r.key, r.value, r.headers) for r in recs] == [
        (i, b"k", b"v%d" % i, [("h", b"x")]) for i in range(3)
    ]
    assert len(_batches(store, "t", 0)) == 3  # one batch per send


def test_keyed_records_use_kafka_murmur2(store: Store) -> None:
    store.create_topic("t", 7)
    p = store.producer()
    keys = [b"", b"a", b"abc", b"user-42", bytes(range(40)), "été".encode()]
    for k in keys:
        assert p.send("t", b"v", key=k).partition == partition_for_key(k, 7)
    # bytearray and memoryview keys hash the same bytes
    assert p.send("t", b"v", key=bytearray(b"abc")).partition == partition_for_key(b"abc", 7)
    assert p.send("t", b"v", key=memoryview(b"user-42")).partition == partition_for_key(b"user-42", 7)


def test_explicit_partition_and_errors(store: Store) -> None:
    store.create_topic("t", 2)
    store.create_topic("c", 1, {"cleanup.policy": "compact"})
    p = store.producer()
    assert p.send("t", b"v", key=b"x", partition=1).partition == 1
    with pytest.raises(UnknownTopicOrPartitionError, match="partition 2"):
        p.send("t", b"v", partition=2)
    with pytest.raises(InvalidRecordError, match="compacted"):
        p.send("c", b"v")
    with pytest.raises(TypeError, match="str"):
        p.send("t", "text")
    with pytest.raises(TypeError, match="str"):
        p.send("t", b"v", key="text")
    with pytest.raises(TypeError):
        p.send("t", 42)
    assert p.send("t", None, key=b"k").offset >= 0  # a null value is fine


def test_record_too_large(store: Store) -> None:
    store.create_topic("t", 1, {"max.message.bytes": 1000})
    p = store.producer()
    with pytest.raises(RecordTooLargeError, match="1000"):
        p.send("t", b"x" * 2000)
    p2 = store.producer(max_request_size=500)
    with pytest.raises(RecordTooLargeError, match="500"):
        p2.send("t", b"x" * 600)
    assert p2.send("t", b"x" * 300).offset == 0


def test_sticky_partitioner_keeps_a_batch_together(store: Store) -> None:
    store.create_topic("t", 4)
    p = store.producer(linger_ms=1000, batch_size=1000)
    futs = [p.send("t", b"x" * 90) for _ in range(100)]
    p.flush()
    parts = [f.get().partition for f in futs]
    # Consecutive records share a partition until a batch (~1000 bytes) is full.
    runs = [len(list(g)) for _, g in __import__("itertools").groupby(parts)]
    assert all(r >= 5 for r in runs[:-1])
    assert len(set(parts)) > 1
    for part in range(4):
        for h in _batches(store, "t", part):
            assert h.size <= 1000


def test_linger_and_batch_size(store: Store, clock: ManualClock) -> None:
    store.create_topic("t", 1)
    p = store.producer(linger_ms=50, batch_size=1 << 20)
    futs = [p.send("t", b"v%d" % i) for i in range(10)]
    assert all(isinstance(f, RecordFuture) for f in futs)
    assert not any(f.done() for f in futs)
    assert store.log("t", 0).log_end_offset == 0
    clock.advance(49)
    assert not futs[0].done()
    clock.advance(1)
    assert all(f.done() for f in futs)
    assert [f.get().offset for f in futs] == list(range(10))
    assert len(_batches(store, "t", 0)) == 1
    # A full batch goes at once.
    small = store.producer(linger_ms=10_000, batch_size=300)
    fs = [small.send("t", b"y" * 50) for _ in range(10)]
    assert fs[0].done() and not fs[-1].done()
    # Asking a future for its result sends its batch.
    assert fs[-1].get().offset == 19
    assert all(f.done() for f in fs)


def test_future_callbacks(store: Store, clock: ManualClock) -> None:
    store.create_topic("t", 1)
    p = store.producer(linger_ms=10)
    seen: list[Any] = []
    f = p.send("t", b"a").add_callback(lambda md: seen.append(md.offset))
    assert seen == []
    clock.advance(10)
    assert seen == [0]
    f.add_callback(lambda md: seen.append(("late", md.offset)))
    assert seen == [0, ("late", 0)]
    assert f.succeeded() and not f.failed() and f.exception() is None


def test_failed_batch_reaches_its_futures(store: Store, clock: ManualClock) -> None:
    store.create_topic("t", 1)
    p = store.producer(linger_ms=10)
    errors: list[BaseException] = []
    f = p.send("t", b"a").add_errback(errors.append)
    store.log("t", 0).close()  # the append will fail
    clock.advance(10)
    assert f.failed() and isinstance(errors[0], KafkaStorageError)
    with pytest.raises(KafkaStorageError):
        f.get()


def test_acks_zero_reports_no_offsets(store: Store) -> None:
    store.create_topic("t", 1)
    p = store.producer(acks="0", enable_idempotence=False)
    assert p.send("t", b"a").offset == -1
    assert [r.first_offset for r in p.send_batch("t", [b"b"], partition=0)] == [-1]
    assert store.log("t", 0).log_end_offset == 2


def test_timestamps(store: Store, clock: ManualClock) -> None:
    store.create_topic("t", 1)
    store.create_topic("la", 1, {"message.timestamp.type": "LogAppendTime"})
    p = store.producer()
    assert p.send("t", b"a", timestamp=1_600_000_000_000).timestamp == 1_600_000_000_000
    clock.advance(5)
    md = p.send("la", b"a", timestamp=1_600_000_000_000)
    assert md.timestamp == clock.time_ms()  # the broker's append time
    assert _all(store, "la")[0][0].timestamp == clock.time_ms()


def test_compression_from_producer_and_topic(store: Store) -> None:
    pytest.importorskip("seglog._native.compression")
    store.create_topic("t", 1)
    store.create_topic("z", 1, {"compression.type": "zstd"})
    p = store.producer(compression_type="gzip", linger_ms=5)
    for i in range(100):
        p.send("t", b"value %d" % i)
        p.send("z", b"value %d" % i)
    p.flush()
    assert {h.compression for h in _batches(store, "t", 0)} == {1}
    assert {h.compression for h in _batches(store, "z", 0)} == {4}
    assert [r.value for r in _all(store, "z")[0]] == [b"value %d" % i for i in range(100)]


# -------------------------------------------------------------------------------------------------
# send_batch
# -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["list", "tuple", "numpy", "arrow"])
def test_send_batch_column_forms(store: Store, form: str) -> None:
    store.create_topic("t", 5)
    n = 1000
    values = [b"value-%05d" % i for i in range(n)]
    keys = [b"key-%d" % (i % 37) for i in range(n)]
    ts = [1_700_000_000_000 + i for i in range(n)]
    if form == "tuple":
        cols: tuple[Any, Any, Any] = (tuple(values), tuple(keys), tuple(ts))
    elif form == "numpy":
        cols = (np.array(values), np.array(keys), np.array(ts, dtype=np.int64))
    elif form == "arrow":
        cols = (pa.array(values, pa.binary()), pa.array(keys, pa.binary()), pa.array(ts, pa.int64()))
    else:
        cols = (values, keys, ts)
    p = store.producer()
    results = p.send_batch("t", cols[0], keys=cols[1], timestamps=cols[2])
    assert sum(r.record_count for r in results) == n
    got = _all(store, "t")
    # Oracle: Kafka's partitioner per key, and per-partition order = input order.
    for part in range(5):
        expect = [(values[i], keys[i], ts[i]) for i in range(n) if partition_for_key(keys[i], 5) == part]
        assert [(r.value, r.key, r.timestamp) for r in got[part]] == expect
        assert [r.offset for r in got[part]] == list(range(len(expect)))


def test_send_batch_splits_into_batches_under_the_limit(store: Store) -> None:
    store.create_topic("t", 1, {"max.message.bytes": 10_000})
    p = store.producer()
    values = [b"x" * (i % 200) for i in range(2000)]
    results = p.send_batch("t", values, partition=0)
    assert len(results) > 20
    heads = _batches(store, "t", 0)
    assert all(h.size <= 10_000 for h in heads)
    assert [r.value for r in _all(store, "t")[0]] == values
    assert [(r.first_offset, r.last_offset) for r in results] == [(h.base_offset, h.last_offset) for h in heads]


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_send_batch_batches_share_one_buffer_and_stay_intact(store: Store, compression: str) -> None:
    # Every batch of send_batch is encoded into the producer's one kept buffer, appended, then
    # overwritten by the next: columns of shrinking and growing records must read back whole.
    import random

    rnd = random.Random(3)
    store.create_topic("t", 1, {"max.message.bytes": 300_000})
    p = store.producer(compression_type=compression)
    columns = [[rnd.randbytes(size) for _ in range(count)] for size, count in ((2000, 900), (10, 30_000), (50_000, 20))]
    for values in columns:
        p.send_batch("t", values, partition=0)
    assert [r.value for r in _all(store, "t")[0]] == [v for c in columns for v in c]


def test_send_batch_sticky_without_keys(store: Store) -> None:
    store.create_topic("t", 3, {"max.message.bytes": 2000})
    p = store.producer()
    results = p.send_batch("t", [b"v" * 100] * 100)
    assert sum(r.record_count for r in results) == 100
    # Each batch goes whole to one partition, and the partition changes between batches.
    assert all(results[i].partition != results[i + 1].partition for i in range(len(results) - 1))
    assert sum(len(v) for v in _all(store, "t").values()) == 100


def test_send_batch_with_headers_and_null_keys(store: Store) -> None:
    store.create_topic("t", 2)
    p = store.producer()
    keys = [b"a", None, b"b", None]
    headers = [[("h", b"1")], None, [], [("x", None)]]
    p.send_batch("t", [b"1", b"2", b"3", b"4"], keys=keys, headers=headers)
    got = [r for recs in _all(store, "t").values() for r in recs]
    assert sorted((r.value, r.key, r.headers) for r in got) == [
        (b"1", b"a", [("h", b"1")]),
        (b"2", None, []),
        (b"3", b"b", []),
        (b"4", None, [("x", None)]),
    ]


def test_send_batch_preserves_order_after_lingering_sends(store: Store) -> None:
    store.create_topic("t", 1)
    p = store.producer(linger_ms=1000)
    f = p.send("t", b"first")
    p.send_batch("t", [b"second", b"third"], partition=0)
    assert f.get().offset == 0
    assert [r.value for r in _all(store, "t")[0]] == [b"first", b"second", b"third"]


def test_send_batch_errors(store: Store) -> None:
    store.create_topic("t", 1)
    store.create_topic("c", 1, {"cleanup.policy": "compact"})
    p = store.producer()
    assert p.send_batch("t", []) == []
    with pytest.raises(ValueError, match="keys has 1"):
        p.send_batch("t", [b"a", b"b"], keys=[b"k"])
    with pytest.raises(InvalidRecordError, match="compacted"):
        p.send_batch("c", [b"a"])
    with pytest.raises(InvalidRecordError, match="compacted"):
        p.send_batch("c", [b"a", b"b"], keys=[b"k", None])
    with pytest.raises(UnknownTopicOrPartitionError):
        p.send_batch("t", [b"a"], partition=5)


# -------------------------------------------------------------------------------------------------
# Idempotence
# -------------------------------------------------------------------------------------------------


def test_idempotent_batches_carry_producer_fields(store: Store) -> None:
    store.create_topic("t", 1)
    p = store.producer(linger_ms=100)
    assert p.idempotent and p.producer_id >= 0 and p.producer_epoch == 0
    for i in range(5):
        p.send("t", b"%d" % i)
    p.flush()
    p.send_batch("t", [b"x", b"y"], partition=0)
    heads = _batches(store, "t", 0)
    assert [(h.producer_id, h.producer_epoch, h.base_sequence) for h in heads] == [
        (p.producer_id, 0, 0),
        (p.producer_id, 0, 5),
    ]
    np_ = store.producer(enable_idempotence=False)
    assert np_.producer_id == -1
    np_.send("t", b"z")
    assert _batches(store, "t", 0)[-1].producer_id == -1


def test_producer_ids_are_never_reused(tmp_path: Path, clock: ManualClock) -> None:
    with Store.open(tmp_path, clock=clock) as store:
        ids = [store.producer().producer_id for _ in range(3)]
    with Store.open(tmp_path, clock=clock) as store:
        later = store.producer().producer_id
    assert len(set(ids)) == 3 and later > max(ids)


def _idem_batch(pid: int, seq: int, n: int = 2, epoch: int = 0) -> bytes:
    return encode_batch(
        [b"v%d" % (seq + i) for i in range(n)],
        timestamps=1_700_000_000_000,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def test_duplicates_of_the_last_five_batches_get_their_original_offsets(store: Store) -> None:
    store.create_topic("t", 1)
    firsts = []
    for k in range(7):
        r = store.append("t", 0, _idem_batch(7, 2 * k))
        assert not r.duplicate
        firsts.append((r.first_offset, r.last_offset))
    end = store.log("t", 0).log_end_offset
    for k in range(2, 7):  # the last five
        r = store.append("t", 0, _idem_batch(7, 2 * k))
        assert r.duplicate and (r.first_offset, r.last_offset) == firsts[k]
    assert store.log("t", 0).log_end_offset == end
    # Older than the last five: no longer known as a duplicate, and out of sequence.
    with pytest.raises(OutOfOrderSequenceError):
        store.append("t", 0, _idem_batch(7, 0))
    with pytest.raises(OutOfOrderSequenceError, match="expected 14"):
        store.append("t", 0, _idem_batch(7, 20))
    assert not store.append("t", 0, _idem_batch(7, 14)).duplicate


def test_epochs(store: Store) -> None:
    store.create_topic("t", 1)
    store.append("t", 0, _idem_batch(9, 0, epoch=3))
    with pytest.raises(InvalidProducerEpochError):
        store.append("t", 0, _idem_batch(9, 2, epoch=2))
    with pytest.raises(OutOfOrderSequenceError, match="new epoch"):
        store.append("t", 0, _idem_batch(9, 5, epoch=4))
    assert not store.append("t", 0, _idem_batch(9, 0, epoch=4)).duplicate
    # An unknown producer may start anywhere (its state may have expired).
    assert not store.append("t", 0, _idem_batch(10, 1000)).duplicate


def test_sequence_wraps_at_int32_max(store: Store) -> None:
    store.create_topic("t", 1)
    store.append("t", 0, _idem_batch(11, 2**31 - 2, n=2))
    assert not store.append("t", 0, _idem_batch(11, 0, n=1)).duplicate


def test_producer_resends_are_answered_not_duplicated(store: Store) -> None:
    """The producer's own path: a repeated append of a batch it already wrote."""
    store.create_topic("t", 1)
    p = store.producer()
    p.send("t", b"a")
    data = store.log("t", 0).read(0).to_bytes()
    r = store.append("t", 0, data)
    assert r.duplicate and r.first_offset == 0
    assert store.log("t", 0).log_end_offset == 1


def test_closed_producer(store: Store) -> None:
    store.create_topic("t", 1)
    p = store.producer(linger_ms=100)
    f = p.send("t", b"a")
    p.close()
    assert f.get().offset == 0  # close flushed it
    with pytest.raises(KafkaStorageError, match="closed"):
        p.send("t", b"b")


def test_store_close_flushes_lingering_records(tmp_path: Path, clock: ManualClock) -> None:
    with Store.open(tmp_path, clock=clock) as store:
        store.create_topic("t", 1)
        f = store.producer(linger_ms=10_000).send("t", b"a")
    assert f.get().offset == 0
    with Store.open(tmp_path, clock=clock) as store:
        assert store.log("t", 0).log_end_offset == 1


def test_topic_deletion_and_growth_seen_by_producer(store: Store) -> None:
    store.create_topic("t", 1)
    p = store.producer()
    p.send("t", b"a")
    store.create_partitions("t", 3)
    assert p.send("t", b"b", partition=2).partition == 2
    store.delete_topic("t")
    store.create_topic("t", 2)
    assert p.send("t", b"c", partition=1).offset == 0
    assert p.partitions_for("t") == [0, 1]
    assert TopicPartition("t", 1) == ("t", 1)


def test_each_batch_lingers_from_its_own_first_record(store: Store, clock: ManualClock) -> None:
    store.create_topic("t", 2)
    p = store.producer(linger_ms=50)
    a = p.send("t", b"a", partition=0)
    clock.advance(30)
    b = p.send("t", b"b", partition=1)
    clock.advance(20)
    assert a.done() and not b.done()
    clock.advance(29)
    assert not b.done()
    clock.advance(1)
    assert b.done()
    c = p.send("t", b"c", partition=0)  # the timer re-arms for a new batch
    clock.advance(50)
    assert c.done() and c.get().offset == 1


def test_threads_share_a_producer(tmp_path: Path) -> None:
    import threading

    with Store.open(tmp_path) as store:
        store.create_topic("t", 3)
        p = store.producer(linger_ms=2, batch_size=2000)
        futures: list[Any] = []
        lock = threading.Lock()

        def work(n: int) -> None:
            mine = [p.send("t", b"%d-%d" % (n, i), key=b"%d" % i) for i in range(2000)]
            with lock:
                futures.extend(mine)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        p.flush()
        where = {(f.get().partition, f.get().offset) for f in futures}
        assert len(where) == 8000
        for part in range(3):
            assert sorted(o for q, o in where if q == part) == list(range(store.log("t", part).log_end_offset))


def test_topic_admin_and_sends_from_other_threads_do_not_deadlock(tmp_path: Path) -> None:
    import threading

    with Store.open(tmp_path) as store:
        p = store.producer(linger_ms=1)
        stop = threading.Event()
        errors: list[BaseException] = []

        def sender() -> None:
            i = 0
            while not stop.is_set():
                try:
                    p.send("t%d" % (i % 3), b"x")  # auto-creates under the producer's lock
                except UnknownTopicOrPartitionError:
                    pass
                except Exception as exc:  # noqa: BLE001
                    errors.append(exc)
                i += 1

        def admin() -> None:
            for i in range(30):
                name = "t%d" % (i % 3)
                try:
                    store.delete_topic(name)
                except UnknownTopicOrPartitionError:
                    pass
                store.create_topic("t%d" % ((i + 1) % 3), 2, exist_ok=True)

        s = threading.Thread(target=sender)
        a = threading.Thread(target=admin)
        s.start()
        a.start()
        a.join(60)
        stop.set()
        s.join(60)
        assert not a.is_alive() and not s.is_alive(), "deadlock"
        p.flush()
        assert not [e for e in errors if not isinstance(e, KafkaStorageError)]


# -- a failed append reports its own error, not the batch's buffer --------------------------------


@pytest.mark.parametrize("linger", [0, 10])
@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_timestamp_out_of_bounds_reports_invalid_timestamp(
    store: Store, clock: ManualClock, linger: int, codec: str
) -> None:
    store.create_topic("t", 1, {"message.timestamp.before.max.ms": 1000})
    p = store.producer(linger_ms=linger, compression_type=codec)
    now = clock.time_ms()
    if linger == 0:
        with pytest.raises(InvalidTimestampError, match=rf"timestamp {now - 5000} of record 0 is out of range"):
            p.send("t", b"old", timestamp=now - 5000)
    else:
        p.send("t", b"ok", timestamp=now)
        f = p.send("t", b"old", timestamp=now - 5000)
        clock.advance(10)
        assert f.failed()
        with pytest.raises(InvalidTimestampError, match=r"of record 1 is out of range"):
            f.get()
    # The producer goes on: the next batch is written.
    p.send("t", b"new", timestamp=clock.time_ms())
    p.flush()
    assert [r.value for r in _all(store, "t")[0]] == [b"new"]


@pytest.mark.parametrize("linger", [0, 10])
def test_full_disk_reports_the_storage_error(store: Store, clock: ManualClock, monkeypatch: Any, linger: int) -> None:
    import errno

    store.create_topic("t", 1)
    lg = store.log("t", 0)
    real = lg.active

    class FullDisk:
        """The active segment on a full disk: its write fails as pwritev's ENOSPC does."""

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def append(self, *args: Any) -> Any:
            raise KafkaStorageError(
                f"write to {lg.dir} failed at position 0: {os.strerror(errno.ENOSPC)} (append rolled back)"
            )

    lg._segments[-1] = FullDisk()  # type: ignore[call-overload]
    p = store.producer(linger_ms=linger)
    if linger == 0:
        with pytest.raises(KafkaStorageError, match="No space left on device"):
            p.send("t", b"a")
    else:
        f = p.send("t", b"a")
        clock.advance(10)
        with pytest.raises(KafkaStorageError, match="No space left on device"):
            f.get()
    with pytest.raises(KafkaStorageError, match="No space left on device"):
        p.send_batch("t", [b"x", b"y"])
    lg._segments[-1] = real
    p.send("t", b"b")
    p.flush()
    assert [r.value for r in _all(store, "t")[0]] == [b"b"]
