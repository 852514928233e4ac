"""Wrong argument types across the public API: a TypeError naming the argument and the type
expected, not whatever the first operation on the value happens to raise."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from seglog import Store
from seglog.storage.log import Log
from seglog.storage.records import (
    batch_headers,
    decode_columns,
    decode_records,
    encode_batch,
    first_at_or_after,
    iter_records,
    validate_batches,
)
from seglog.util.clock import ManualClock
from tests.conftest import T0, wrong


@pytest.fixture
def env(tmp_path: Path) -> Any:
    clock = ManualClock(T0)
    store = Store.open(tmp_path / "s", clock=clock)
    store.create_topic("t", 1)
    log = Log.open(str(tmp_path / "l-0"), clock=clock)
    log.append(encode_batch([b"a"], timestamps=T0))
    yield store, store.producer(), log
    log.close()
    store.close()


CASES: list[tuple[str, Callable[[Any, Any, Any], Any], str]] = [
    ("log.read offset", lambda s, p, lg: lg.read("0"), r"offset must be an int, not str"),
    ("log.read max_bytes", lambda s, p, lg: lg.read(0, "5"), r"max_bytes must be an int, not str"),
    ("log.read upper_bound", lambda s, p, lg: lg.read(0, upper_bound=1.5), r"upper_bound must be an int"),
    ("log.append batches str", lambda s, p, lg: lg.append("str"), r"batches must be a bytes-like object .* not str"),
    ("log.append batches int", lambda s, p, lg: lg.append(5), r"batches must be a bytes-like object .* not int"),
    (
        "log.append leader_epoch",
        lambda s, p, lg: lg.append(encode_batch([b"a"]), leader_epoch="1"),
        r"leader_epoch must be an int, not str",
    ),
    ("log.truncate_to", lambda s, p, lg: lg.truncate_to("1"), r"offset must be an int, not str"),
    (
        "log.truncate_fully_and_start_at",
        lambda s, p, lg: lg.truncate_fully_and_start_at(None),
        r"offset must be an int, not NoneType",
    ),
    ("log.delete_records", lambda s, p, lg: lg.delete_records(b"1"), r"before_offset must be an int, not bytes"),
    ("log.offset_for_timestamp", lambda s, p, lg: lg.offset_for_timestamp("1"), r"timestamp must be an int, not str"),
    ("store.create_topic name", lambda s, p, lg: s.create_topic(5), r"topic must be a str, not int"),
    ("store.create_topic partitions", lambda s, p, lg: s.create_topic("x", "3"), r"partitions must be an int, not str"),
    (
        "store.create_topic partitions bool",
        lambda s, p, lg: s.create_topic("x", True),
        r"partitions must be an int, not bool",
    ),
    ("store.create_topic config", lambda s, p, lg: s.create_topic("y", 1, 5), r"config must be a mapping .* not int"),
    (
        "store.append partition",
        lambda s, p, lg: s.append("t", "0", encode_batch([b"a"])),
        r"partition must be an int, not str",
    ),
    (
        "store.append records",
        lambda s, p, lg: s.append("t", 0, "str"),
        r"records must be a bytes-like object .* not str",
    ),
    ("producer.send topic", lambda s, p, lg: p.send(5, b"v"), r"'topic'.*expected str, got int"),
    ("producer.send value", lambda s, p, lg: p.send("t", "str value"), r"record value is a str"),
    ("producer.send key", lambda s, p, lg: p.send("t", b"v", key=5), r"record key must be bytes-like or None, not int"),
    (
        "producer.send timestamp",
        lambda s, p, lg: p.send("t", b"v", timestamp="1"),
        r"timestamp must be an int \(milliseconds\) or None, not str",
    ),
    (
        "producer.send partition",
        lambda s, p, lg: p.send("t", b"v", partition="0"),
        r"partition must be an int or None, not str",
    ),
    ("producer.send headers", lambda s, p, lg: p.send("t", b"v", headers="h"), r"headers must be a list"),
    ("producer.send_batch values", lambda s, p, lg: p.send_batch("t", [1, 2]), r"values\[0\] is a int, not bytes-like"),
    (
        "producer.send_batch keys",
        lambda s, p, lg: p.send_batch("t", [b"a", b"b"], keys=[b"k", 7]),
        r"keys\[1\] .*bytes-like",
    ),
    ("encode_batch values", lambda s, p, lg: encode_batch([1, 2]), r"values\[0\] is a int, not bytes-like"),
    ("encode_batch keys", lambda s, p, lg: encode_batch([b"a"], keys=[1]), r"keys\[0\] is a int"),
    (
        "encode_batch timestamps str",
        lambda s, p, lg: encode_batch([b"a"], timestamps="x"),
        r"timestamps must be None, an int .* not str",
    ),
    (
        "encode_batch timestamps float",
        lambda s, p, lg: encode_batch([b"a"], timestamps=1.5),
        r"timestamps must be None, an int .* not float",
    ),
    (
        "encode_batch compression",
        lambda s, p, lg: encode_batch([b"a"], compression=wrong(5.0)),
        r"compression must be a codec name .* not float",
    ),
    ("decode_records", lambda s, p, lg: decode_records(wrong("abc")), r"buf must be a bytes-like object .* not str"),
    ("decode_columns", lambda s, p, lg: decode_columns(wrong(5)), r"buf must be a bytes-like object .* not int"),
    ("batch_headers", lambda s, p, lg: batch_headers(wrong(None)), r"buf must be a bytes-like object .* not NoneType"),
    (
        "first_at_or_after",
        lambda s, p, lg: first_at_or_after(wrong("x"), 0),
        r"buf must be a bytes-like object .* not str",
    ),
    (
        "validate_batches",
        lambda s, p, lg: validate_batches(wrong(1), "t-0", now=T0),
        r"buf must be a bytes-like object .* not int",
    ),
    ("iter_records", lambda s, p, lg: iter_records(wrong("abc")), r"buf must be a bytes-like object .* not str"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_wrong_types_name_the_argument(env: Any, case: tuple[str, Callable[..., Any], str]) -> None:
    store, producer, log = env
    _, call, match = case
    with pytest.raises(TypeError, match=match):
        call(store, producer, log)
    # Nothing was written by the refused call.
    assert log.log_end_offset == 1
    assert store.log("t", 0).log_end_offset == 0


def test_numpy_integers_are_still_integers(env: Any) -> None:
    store, producer, log = env
    assert log.read(np.int64(0), np.int32(1 << 20)).to_bytes()
    assert log.offset_for_timestamp(np.int64(T0)) == (0, T0)
    assert store.append("t", np.int64(0), encode_batch([b"x"], timestamps=T0)).first_offset == 0


@pytest.mark.parametrize("ts", [-2, -5, -(2**63)])
def test_negative_timestamps_are_refused_as_kafkas_producer_refuses_them(env: Any, ts: int) -> None:
    store, producer, log = env
    with pytest.raises(ValueError, match=rf"invalid timestamp {ts}: a timestamp must be >= 0"):
        producer.send("t", b"v", timestamp=ts)
    with pytest.raises(ValueError, match=rf"invalid timestamp {ts}: a timestamp must be >= 0"):
        encode_batch([b"a"], timestamps=ts)
    with pytest.raises(ValueError, match=rf"invalid timestamp {ts} of record 2"):
        encode_batch([b"a", b"b", b"c"], timestamps=[T0, T0, ts])
    with pytest.raises(ValueError, match=rf"invalid timestamp {ts} of record 1"):
        encode_batch([b"a", b"b"], timestamps=np.array([T0, ts], dtype=np.int64))
    with pytest.raises(ValueError, match=rf"invalid timestamp {ts} of record 0"):
        producer.send_batch("t", [b"a"], timestamps=[ts])
    producer.flush()
    assert store.log("t", 0).log_end_offset == 0
    # -1 is the format's "no timestamp" and stays allowed.
    assert decode_records(encode_batch([b"a"], timestamps=-1))[0].timestamp == -1
    producer.send("t", b"v", timestamp=-1)
    producer.flush()
    assert store.log("t", 0).log_end_offset == 1


CONSUMER_CASES: list[tuple[str, Callable[[Any, Any], Any], str]] = [
    ("subscribe int", lambda c, tp: c.subscribe(5), r"topics must be a list of names, not int"),
    ("subscribe item", lambda c, tp: c.subscribe([5]), r"topics must hold str names, not int"),
    ("subscribe pattern", lambda c, tp: c.subscribe(pattern=5), r"pattern must be a str or a compiled"),
    (
        "assign item",
        lambda c, tp: c.assign([5]),
        r"partition must be a TopicPartition or a \(topic, partition\) pair, not int",
    ),
    (
        "assign partition number",
        lambda c, tp: c.assign([("t", "0")]),
        r"partition \('t', '0'\): the partition number must be an int, not str",
    ),
    ("seek offset", lambda c, tp: (c.assign([tp]), c.seek(tp, "0")), r"offset must be an int, not str"),
    ("seek partition", lambda c, tp: c.seek(5, 0), r"partition must be a TopicPartition"),
    ("position", lambda c, tp: c.position(3.5), r"partition must be a TopicPartition"),
    ("poll max_records", lambda c, tp: c.poll(max_records="1"), r"max_records must be an int or None, not str"),
    ("poll timeout_ms", lambda c, tp: c.poll(timeout_ms="1"), r"timeout_ms must be an int, not str"),
    ("poll_columns max_records", lambda c, tp: c.poll_columns(1.5), r"max_records must be an int or None, not float"),
    ("commit offsets", lambda c, tp: c.commit(5), r"offsets must be a mapping of partition to offset, not int"),
    ("commit offset value", lambda c, tp: c.commit({tp: "1"}), r"the offset for t-0 must be an int, not str"),
    (
        "offsets_for_times",
        lambda c, tp: c.offsets_for_times({tp: "1"}),
        r"the timestamp for t-0 must be an int, not str",
    ),
    ("committed", lambda c, tp: c.committed(None), r"partition must be a TopicPartition"),
    ("pause", lambda c, tp: c.pause("t"), r"partition must be a TopicPartition"),
]


@pytest.mark.parametrize("case", CONSUMER_CASES, ids=[c[0] for c in CONSUMER_CASES])
def test_consumer_wrong_types_name_the_argument(env: Any, case: tuple[str, Callable[..., Any], str]) -> None:
    from seglog import TopicPartition

    store, _, _ = env
    c = store.consumer(group_id="g")
    with pytest.raises(TypeError, match=case[2]):
        case[1](c, TopicPartition("t", 0))
    assert store.group_offsets.committed("g", "t", 0) is None


def test_consumer_takes_numpy_partition_numbers_and_offsets(env: Any) -> None:
    from seglog import TopicPartition

    store, _, _ = env
    store.append("t", 0, encode_batch([b"a", b"b"], timestamps=T0))
    c = store.consumer(group_id="g")
    c.assign([("t", np.int64(0))])
    c.seek(("t", 0), np.int64(1))
    assert [r.value for r in c.poll(timeout_ms=0)] == [b"b"]
    c.commit({TopicPartition("t", 0): np.int64(2)})
    assert c.committed(("t", 0)).offset == 2
