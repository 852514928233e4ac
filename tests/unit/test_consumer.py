"""The embedded consumer: positions, poll, poll_columns, long polling, offsets, groups,
read_committed."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from seglog import Store, TopicPartition
from seglog.client.consumer import ConsumerRebalanceListener, NoOffsetForPartitionError, OffsetAndTimestamp
from seglog.errors import OffsetOutOfRangeError
from seglog.storage.group_offsets import OffsetAndMetadata
from seglog.storage.records import encode_batch, encode_control_batch
from seglog.util.clock import ManualClock

TP = TopicPartition("t", 0)


def _fill(store: Store, n: int, topic: str = "t", partitions: int = 1, **kw: Any) -> None:
    store.create_topic(topic, partitions, kw or None)
    p = store.producer()
    for part in range(partitions):
        p.send_batch(
            topic,
            [b"%s-%d-%d" % (topic.encode(), part, i) for i in range(n)],
            keys=[b"k%d" % i for i in range(n)],
            partition=part,
            timestamps=[1_700_000_000_000 + 10 * i for i in range(n)],
        )


def test_assign_poll_seek_position(store: Store) -> None:
    _fill(store, 100)
    c = store.consumer(auto_offset_reset="earliest")
    c.assign([TP])
    assert c.assignment() == {TP}
    assert c.position(TP) == 0
    recs = c.poll(max_records=30)
    assert [r.offset for r in recs] == list(range(30)) and c.position(TP) == 30
    assert recs.partitions() == [TP] and len(recs.records(TP)) == 30 and recs.count() == 30
    assert [r.value for r in c.poll(max_records=5)] == [b"t-0-%d" % i for i in range(30, 35)]
    c.seek(TP, 90)
    assert [r.offset for r in c.poll()] == list(range(90, 100))
    assert not c.poll()
    c.seek_to_beginning()
    assert c.position(TP) == 0
    c.seek_to_end()
    assert c.position(TP) == 100 and not c.poll()
    with pytest.raises(ValueError, match="not assigned"):
        c.seek(TopicPartition("t", 1), 0)
    with pytest.raises(ValueError, match="negative"):
        c.seek(TP, -1)


def test_max_poll_records_and_buffering(store: Store) -> None:
    _fill(store, 1200)
    c = store.consumer(auto_offset_reset="earliest", max_poll_records=500)
    c.assign([TP])
    sizes = []
    offsets: list[int] = []
    while True:
        recs = c.poll()
        if not recs:
            break
        sizes.append(len(recs))
        offsets.extend(r.offset for r in recs)
    assert sizes == [500, 500, 200] and offsets == list(range(1200))


def test_several_partitions_and_fetch_limits(store: Store) -> None:
    store.create_topic("t", 3)
    p = store.producer()
    for i in range(300):
        for part in range(3):
            p.send("t", b"value-%05d" % i, partition=part)  # one batch each
    c = store.consumer(auto_offset_reset="earliest", max_partition_fetch_bytes=1024, fetch_max_bytes=2048)
    c.assign([TopicPartition("t", p) for p in range(3)])
    seen: dict[int, list[int]] = {0: [], 1: [], 2: []}
    rounds = 0
    while True:
        recs = c.poll(max_records=10_000)
        if not recs:
            break
        rounds += 1
        for tp, rs in recs.items():
            seen[tp.partition].extend(r.offset for r in rs)
    assert all(v == list(range(300)) for v in seen.values())
    assert rounds > 5  # the byte limits applied


def test_auto_offset_reset(store: Store) -> None:
    _fill(store, 10)
    latest = store.consumer()
    latest.assign([TP])
    assert latest.position(TP) == 10 and not latest.poll()
    store.producer().send("t", b"new")
    assert [r.value for r in latest.poll()] == [b"new"]
    none = store.consumer(group_id="g", auto_offset_reset="none")
    none.assign([TP])
    with pytest.raises(NoOffsetForPartitionError):
        none.poll()
    none.commit({TP: 4})
    assert none.position(TP) == 4


def test_out_of_range_position_is_reset(store: Store) -> None:
    _fill(store, 50)
    c = store.consumer(auto_offset_reset="earliest")
    c.assign([TP])
    c.seek(TP, 10)
    store.delete_records("t", 0, 20)
    assert [r.offset for r in c.poll()][0] == 20
    c.seek(TP, 1000)
    assert [r.offset for r in c.poll()][0] == 20
    strict = store.consumer(auto_offset_reset="none")
    strict.assign([TP])
    strict.seek(TP, 5)
    with pytest.raises(OffsetOutOfRangeError):
        strict.poll()


def test_offsets_for_times_against_a_scan(store: Store) -> None:
    _fill(store, 200)
    c = store.consumer(auto_offset_reset="earliest")
    c.assign([TP])
    all_recs = list(c.poll(max_records=1000))
    for target in (
        0,
        1_700_000_000_000,
        1_700_000_000_005,
        1_700_000_000_990,
        1_700_000_001_990,
        1_700_000_001_991,
        1_800_000_000_000,
    ):
        expect = next(((r.offset, r.timestamp) for r in all_recs if r.timestamp >= target), None)
        got = c.offsets_for_times({TP: target})[TP]
        assert (None if got is None else (got.offset, got.timestamp)) == expect
    assert isinstance(c.offsets_for_times({TP: 0})[TP], OffsetAndTimestamp)
    assert c.beginning_offsets([TP]) == {TP: 0} and c.end_offsets([TP]) == {TP: 200}


def test_poll_columns_matches_poll(store: Store) -> None:
    _fill(store, 500, partitions=2)
    store.producer().send("t", b"with headers", key=b"h", headers=[("a", b"1"), ("b", None)], partition=1)
    rows = store.consumer(auto_offset_reset="earliest")
    rows.assign([TopicPartition("t", 0), TopicPartition("t", 1)])
    expect: list[tuple[Any, ...]] = []
    while recs := rows.poll(max_records=10_000):
        for tp, rs in recs.items():
            expect.extend(
                (
                    r.key,
                    r.value,
                    tp.topic,
                    tp.partition,
                    r.offset,
                    r.timestamp,
                    r.timestamp_type,
                    [{"key": k, "value": v} for k, v in r.headers],
                )
                for r in rs
            )
    cols = store.consumer(auto_offset_reset="earliest")
    cols.assign([TopicPartition("t", 0), TopicPartition("t", 1)])
    tables = []
    while (t := cols.poll_columns(headers=True)).num_rows:
        tables.append(t)
    table = pa.concat_tables(tables)
    assert table.schema.names == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    assert table.schema.field("timestamp").type == pa.timestamp("ms", tz="UTC")
    got = [
        (
            r["key"],
            r["value"],
            r["topic"],
            r["partition"],
            r["offset"],
            r["timestamp"].timestamp() * 1000,
            r["timestampType"],
            r["headers"],
        )
        for r in table.to_pylist()
    ]
    got = [g[:5] + (int(round(g[5])),) + g[6:] for g in got]
    assert sorted(got, key=lambda x: (x[3], x[4])) == sorted(expect, key=lambda x: (x[3], x[4]))
    assert cols.position(TopicPartition("t", 1)) == 501


def test_poll_columns_limits_and_empty(store: Store) -> None:
    _fill(store, 100)
    c = store.consumer(auto_offset_reset="earliest")
    c.assign([TP])
    t = c.poll_columns(max_records=30)
    assert t.num_rows == 30 and t.column("offset").to_pylist() == list(range(30))
    assert c.position(TP) == 30
    assert c.poll_columns(max_records=1000).column("offset").to_pylist() == list(range(30, 100))
    empty = c.poll_columns()
    assert empty.num_rows == 0 and "headers" not in empty.schema.names
    # Switching between the two forms loses nothing.
    c.seek(TP, 0)
    assert [r.offset for r in c.poll(max_records=10)] == list(range(10))
    assert c.poll_columns(max_records=5).column("offset").to_pylist() == list(range(10, 15))


def test_commit_and_committed_survive_restart(tmp_path: Path, clock: ManualClock) -> None:
    with Store.open(tmp_path, clock=clock) as store:
        _fill(store, 20)
        c = store.consumer(group_id="g", auto_offset_reset="earliest", enable_auto_commit=False)
        c.assign([TP])
        c.poll(max_records=7)
        c.commit()
        assert c.committed(TP) == OffsetAndMetadata(7, "", -1, clock.time_ms())
        c.commit({TP: OffsetAndMetadata(9, "meta")})
        other = store.consumer(group_id="h")
        other.assign([TP])
        other.commit({TP: 3})
    with Store.open(tmp_path, clock=clock) as store:
        c = store.consumer(group_id="g")
        c.assign([TP])
        om = c.committed(TP)
        assert om is not None and om.offset == 9 and om.metadata == "meta"
        assert c.position(TP) == 9
        assert [r.offset for r in c.poll()] == list(range(9, 20))
        assert store.group_offsets.committed("h", "t", 0).offset == 3  # type: ignore[union-attr]
        assert store.group_offsets.groups() == ["g", "h"]
        assert store.consumer(group_id="nobody").committed(TP) is None


def test_auto_commit(store: Store, clock: ManualClock) -> None:
    _fill(store, 20)
    c = store.consumer(group_id="g", auto_offset_reset="earliest", auto_commit_interval_ms=1000)
    c.assign([TP])
    c.poll(max_records=5)
    assert c.committed(TP) is None
    clock.advance(1000)
    c.poll(max_records=5)  # commits the position before fetching
    assert c.committed(TP).offset == 5  # type: ignore[union-attr]
    c.close()
    assert store.group_offsets.committed("g", "t", 0).offset == 10  # type: ignore[union-attr]


def test_commit_needs_a_group(store: Store) -> None:
    _fill(store, 1)
    c = store.consumer()
    c.assign([TP])
    with pytest.raises(Exception, match="group.id"):
        c.commit()


def test_deleting_a_topic_removes_its_committed_offsets(store: Store) -> None:
    _fill(store, 5)
    c = store.consumer(group_id="g")
    c.assign([TP])
    c.commit({TP: 2})
    store.delete_topic("t")
    assert store.group_offsets.committed("g", "t", 0) is None


def test_subscribe_and_pattern(store: Store) -> None:
    _fill(store, 5, topic="a.x")
    _fill(store, 5, topic="a.y")
    _fill(store, 5, topic="b")
    c = store.consumer(auto_offset_reset="earliest")
    c.subscribe(pattern=r"a\..*")
    assert c.subscription() == {"a.x", "a.y"}
    assert len(c.poll(max_records=100)) == 10
    _fill(store, 3, topic="a.z")
    assert len(c.poll(max_records=100)) == 3  # a new matching topic is picked up
    with pytest.raises(ValueError):
        c.subscribe(["a"], pattern="b")
    with pytest.raises(TypeError):
        c.subscribe("a.x")
    c.unsubscribe()
    assert c.assignment() == set()


def test_group_members_share_partitions(store: Store) -> None:
    _fill(store, 10, partitions=5)
    events: list[tuple[str, str, list[TopicPartition]]] = []

    class Listener(ConsumerRebalanceListener):
        def __init__(self, name: str) -> None:
            self.name = name

        def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
            events.append((self.name, "revoked", revoked))

        def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
            events.append((self.name, "assigned", assigned))

    a = store.consumer(group_id="g", auto_offset_reset="earliest")
    a.subscribe(["t"], listener=Listener("a"))
    assert len(a.assignment()) == 5
    a.poll(max_records=7)
    b = store.consumer(group_id="g", auto_offset_reset="earliest")
    b.subscribe(["t"], listener=Listener("b"))
    a.poll(max_records=1)  # a notices the new member
    # Kafka's range assignor: the first member gets partitions 0-2, the second 3-4.
    assert a.assignment() == {TopicPartition("t", p) for p in range(3)}
    assert b.assignment() == {TopicPartition("t", p) for p in (3, 4)}
    assert ("a", "revoked", [TopicPartition("t", 3), TopicPartition("t", 4)]) in events
    got = len(b.poll(max_records=1000))
    assert got == 20
    b.close()
    a.poll(max_records=1)
    assert len(a.assignment()) == 5
    other = store.consumer(group_id="other")
    other.subscribe(["t"])
    assert len(other.assignment()) == 5  # another group is independent


def test_pause_resume(store: Store) -> None:
    _fill(store, 5, partitions=2)
    c = store.consumer(auto_offset_reset="earliest")
    c.assign([TopicPartition("t", 0), TopicPartition("t", 1)])
    c.pause(TopicPartition("t", 0))
    assert {tp.partition for tp in c.poll(max_records=100).partitions()} == {1}
    c.resume(TopicPartition("t", 0))
    assert {tp.partition for tp in c.poll(max_records=100).partitions()} == {0}


# -------------------------------------------------------------------------------------------------
# Long polling
# -------------------------------------------------------------------------------------------------


def test_long_poll_on_the_manual_clock_runs_the_linger_timer(store: Store, clock: ManualClock) -> None:
    store.create_topic("t", 1)
    p = store.producer(linger_ms=300)
    c = store.consumer()
    c.assign([TP])
    c.position(TP)
    p.send("t", b"late")
    start = clock.monotonic_ms()
    assert not c.poll(timeout_ms=100)  # nothing within 100 ms
    assert clock.monotonic_ms() - start == 100
    recs = c.poll(timeout_ms=5000)
    assert [r.value for r in recs] == [b"late"]
    assert clock.monotonic_ms() - start < 5000  # returned as soon as the batch was written


def test_fetch_min_bytes_waits_for_more(store: Store, clock: ManualClock) -> None:
    store.create_topic("t", 1)
    p = store.producer()
    c = store.consumer(fetch_min_bytes=10_000, fetch_max_wait_ms=200, auto_offset_reset="earliest")
    c.assign([TP])
    p.send("t", b"small")
    start = clock.monotonic_ms()
    recs = c.poll(timeout_ms=1000)
    assert len(recs) == 1 and clock.monotonic_ms() - start == 200  # waited fetch.max.wait.ms


def test_long_poll_with_the_system_clock_wakes_on_append(tmp_path: Path) -> None:
    with Store.open(tmp_path) as store:
        store.create_topic("t", 1)
        c = store.consumer()
        c.assign([TP])
        c.position(TP)
        p = store.producer()
        timer = threading.Timer(0.2, lambda: p.send("t", b"x"))
        t0 = time.monotonic()
        timer.start()
        recs = c.poll(timeout_ms=10_000)
        elapsed = time.monotonic() - t0
        timer.join()
        assert [r.value for r in recs] == [b"x"]
        assert 0.15 < elapsed < 5


# -------------------------------------------------------------------------------------------------
# read_committed
# -------------------------------------------------------------------------------------------------


def _txn(store: Store, pid: int, values: list[bytes], seq: int) -> None:
    store.append(
        "t",
        0,
        encode_batch(
            values,
            timestamps=1_700_000_000_000,
            producer_id=pid,
            producer_epoch=0,
            base_sequence=seq,
            is_transactional=True,
        ),
    )


def _marker(store: Store, pid: int, commit: bool) -> None:
    store.append(
        "t",
        0,
        encode_control_batch(1 if commit else 0, timestamp=1_700_000_000_000, producer_id=pid, producer_epoch=0),
        origin="coordinator",
    )


def _values(c: Any) -> list[bytes | None]:
    out: list[bytes | None] = []
    while recs := c.poll(max_records=1000):
        out.extend(r.value for r in recs)
    return out


def test_read_committed_skips_aborted_and_stops_at_open_transactions(store: Store) -> None:
    store.create_topic("t", 1)
    p = store.producer(enable_idempotence=False)
    p.send("t", b"plain-1")
    _txn(store, 100, [b"a1", b"a2"], 0)
    _txn(store, 200, [b"b1"], 0)
    _marker(store, 100, commit=False)  # abort producer 100
    _txn(store, 200, [b"b2"], 1)
    _marker(store, 200, commit=True)  # commit producer 200
    p.send("t", b"plain-2")
    _txn(store, 300, [b"c1"], 0)  # still open
    p.send("t", b"plain-3")

    committed = store.consumer(auto_offset_reset="earliest", isolation_level="read_committed")
    committed.assign([TP])
    assert _values(committed) == [b"plain-1", b"b1", b"b2", b"plain-2"]
    lso = committed.end_offsets([TP])[TP]
    assert committed.position(TP) == lso == 8  # the open transaction's first offset

    uncommitted = store.consumer(auto_offset_reset="earliest")
    uncommitted.assign([TP])
    assert _values(uncommitted) == [b"plain-1", b"a1", b"a2", b"b1", b"b2", b"plain-2", b"c1", b"plain-3"]

    _marker(store, 300, commit=False)
    assert _values(committed) == [b"plain-3"]
    cols = store.consumer(auto_offset_reset="earliest", isolation_level="read_committed")
    cols.assign([TP])
    assert cols.poll_columns().column("value").to_pylist() == [b"plain-1", b"b1", b"b2", b"plain-2", b"plain-3"]


def test_read_committed_after_restart_rebuilds_from_the_log(tmp_path: Path, clock: ManualClock) -> None:
    with Store.open(tmp_path, clock=clock) as store:
        store.create_topic("t", 1)
        _txn(store, 5, [b"x"], 0)
        _marker(store, 5, commit=False)
        _txn(store, 6, [b"y"], 0)
        _marker(store, 6, commit=True)
    with Store.open(tmp_path, clock=clock) as store:
        c = store.consumer(auto_offset_reset="earliest", isolation_level="read_committed")
        c.assign([TP])
        assert _values(c) == [b"y"]


def test_poll_columns_timestamp_types(store: Store, clock: ManualClock) -> None:
    store.create_topic("t", 1)
    p = store.producer()
    p.send("t", b"create", timestamp=1_600_000_000_000)
    store.alter_topic_config("t", {"message.timestamp.type": "LogAppendTime"})
    p.send("t", b"append", timestamp=1_600_000_000_000)
    c = store.consumer(auto_offset_reset="earliest")
    c.assign([TP])
    t = c.poll_columns()
    assert t.column("timestampType").to_pylist() == [0, 1]  # mixed in one fetch
    assert t.column("timestamp").cast(pa.int64()).to_pylist() == [1_600_000_000_000, clock.time_ms()]
    c.seek(TP, 1)
    assert c.poll_columns().column("timestampType").to_pylist() == [1]
    c.seek(TP, 0)
    assert c.poll_columns(max_records=1).column("timestampType").to_pylist() == [0]


def test_group_consumers_on_a_read_only_store(tmp_path: Path, clock: ManualClock) -> None:
    with Store.open(tmp_path, clock=clock) as store:
        _fill(store, 10, partitions=2)
    with Store.open(tmp_path, read_only=True) as ro:
        a = ro.consumer(group_id="g", auto_offset_reset="earliest")
        a.subscribe(["t"])
        assert len(a.poll(max_records=100)) == 20  # alone in the group: both partitions
        b = ro.consumer(group_id="g", auto_offset_reset="earliest")
        b.subscribe(["t"])
        a.poll()  # rebalances without trying to commit
        assert len(a.assignment()) == 1 and len(b.assignment()) == 1
        with pytest.raises(Exception, match="read-only"):
            a.commit()
