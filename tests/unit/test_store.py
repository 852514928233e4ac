"""The store: topics, the log-dir layout, checkpoints, the lock, background tasks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from seglog import Store, TopicPartition
from seglog.errors import (
    ConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    KafkaStorageError,
    LogDirectoryLockedError,
    StorageError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from seglog.storage.checkpoints import OffsetCheckpointFile
from seglog.storage.topic import validate_topic_name
from seglog.util.clock import ManualClock


def _open(path: Path, clock: ManualClock, **kw: object) -> Store:
    return Store.open(path, clock=clock, **kw)  # type: ignore[arg-type]


# -------------------------------------------------------------------------------------------------
# Topic names (Kafka's Topic.validate)
# -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "orders", "a.b-c_D9", "x" * 249, "__private", "-", "..."])
def test_valid_topic_names(name: str) -> None:
    assert validate_topic_name(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        ".",
        "..",
        "x" * 250,
        "a/b",
        "../etc",
        "a b",
        "tópico",
        "a\\b",
        "a\x00b",
        "a:b",
        # The whole name, not a prefix: "$" in a regex accepts a trailing
        # newline, "\\d" and str.isdigit accept non-ASCII digits.
        "a\n",
        "orders\n",
        "\n",
        "x" * 248 + "\n",
        "a\r",
        "a\t",
        "\na",
        "\u0661",
        "t\u0660",
        "\uff4frders",
        "a\u200b",
        "\u01c5",
        "ß",
    ],
)
def test_invalid_topic_names(name: str, tmp_path: Path, clock: ManualClock) -> None:
    with pytest.raises(InvalidTopicError):
        validate_topic_name(name)
    with _open(tmp_path / "d", clock) as store:
        with pytest.raises(InvalidTopicError):
            store.create_topic(name)
        assert store.topics() == []
    # Nothing was created outside (or inside) the directory.
    assert sorted(os.listdir(tmp_path)) == ["d"]


def test_directories_whose_names_only_look_like_partitions_are_ignored(tmp_path: Path, clock: ManualClock) -> None:
    with _open(tmp_path, clock) as store:
        store.create_topic("a", 1)
    for name in ("a\n-0", "a-\u00b2", "b-\u0663"):
        os.mkdir(tmp_path / name)
    with _open(tmp_path, clock) as store:
        assert store.topics() == ["a"]


def test_topic_names_differing_only_by_dot_and_underscore_collide(tmp_path: Path, clock: ManualClock) -> None:
    with _open(tmp_path, clock) as store:
        store.create_topic("a.b")
        with pytest.raises(InvalidTopicError, match="collides"):
            store.create_topic("a_b")


def test_non_string_topic_name(tmp_path: Path, clock: ManualClock) -> None:
    with _open(tmp_path, clock) as store:
        for bad in (b"bytes", 5, None):
            with pytest.raises(TypeError, match=rf"topic must be a str, not {type(bad).__name__}"):
                store.create_topic(bad)  # type: ignore[arg-type]
        assert store.topics() == []


# -------------------------------------------------------------------------------------------------
# Topics
# -------------------------------------------------------------------------------------------------


def test_create_describe_delete(tmp_path: Path, clock: ManualClock) -> None:
    with _open(tmp_path, clock) as store:
        desc = store.create_topic("orders", 3, {"retention.ms": 1000, "segment.bytes": 1 << 20})
        assert desc.name == "orders" and len(desc.partitions) == 3 and not desc.internal
        assert desc.config_overrides == {"retention.ms": 1000, "segment.bytes": 1 << 20}
        assert len(desc.topic_id or "") == 22
        assert sorted(p for p in os.listdir(tmp_path) if p.startswith("orders")) == ["orders-0", "orders-1", "orders-2"]
        meta = (tmp_path / "orders-1" / "partition.metadata").read_text()
        assert meta == f"version: 0\ntopic_id: {desc.topic_id}"
        assert store.topic_config("orders").retention_ms == 1000
        assert store.topic_config("orders").segment_bytes == 1 << 20
        assert store.partitions_for("orders") == 3
        with pytest.raises(TopicAlreadyExistsError):
            store.create_topic("orders")
        assert store.create_topic("orders", exist_ok=True).topic_id == desc.topic_id
        store.create_topic("audit")
        assert store.topics() == ["audit", "orders"]
        store.delete_topic("orders")
        assert store.topics() == ["audit"]
        assert not any(p.startswith("orders") for p in os.listdir(tmp_path))
        with pytest.raises(UnknownTopicOrPartitionError):
            store.describe("orders")
        with pytest.raises(UnknownTopicOrPartitionError):
            store.delete_topic("orders")
        # The name is free again.
        assert store.create_topic("orders", 1).topic_id != desc.topic_id


def test_invalid_partitions_and_config(tmp_path: Path, clock: ManualClock) -> None:
    with _open(tmp_path, clock) as store:
        for bad in (0, -1):
            with pytest.raises(InvalidPartitionsError):
                store.create_topic("t", bad)
        for wrong in (True, 1.5, "2"):
            with pytest.raises(TypeError, match="partitions must be an int"):
                store.create_topic("t", wrong)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="retention.msec"):
            store.create_topic("t", 1, {"retention.msec": 5})
        with pytest.raises(ConfigError):
            store.create_topic("t", 1, {"segment.bytes": 1})
        assert store.topics() == []
        with pytest.raises(InvalidTopicError, match="internal"):
            store.create_topic("__consumer_offsets")


def test_topics_and_overrides_survive_restart(tmp_path: Path, clock: ManualClock) -> None:
    with _open(tmp_path, clock) as store:
        tid = store.create_topic("t", 2, {"cleanup.policy": "compact,delete"}).topic_id
        store.alter_topic_config("t", {"retention.bytes": 12345})
    with _open(tmp_path, clock) as store:
        assert store.topics() == ["t"]
        d = store.describe("t")[0]
        assert d.topic_id == tid and len(d.partitions) == 2
        cfg = store.topic_config("t")
        assert cfg.cleanup_policy == ("compact", "delete") and cfg.retention_bytes == 12345
        store.alter_topic_config("t", delete=["retention.bytes"])
        assert store.topic_config("t").retention_bytes == -1
        assert store.log("t", 1).config.retention_bytes == -1


def test_broker_config_sets_topic_defaults(tmp_path: Path, clock: ManualClock) -> None:
    with _open(tmp_path, clock, config={"log.retention.hours": 1, "num.partitions": 4}) as store:
        store.create_topic("t")
        assert store.topic_config("t").retention_ms == 3_600_000
        store.producer().send("auto", b"x")  # auto-created with num.partitions
        assert store.partitions_for("auto") == 4


def test_auto_create_can_be_disabled(tmp_path: Path, clock: ManualClock) -> None:
    with _open(tmp_path, clock, config={"auto.create.topics.enable": False}) as store:
        with pytest.raises(UnknownTopicOrPartitionError):
            store.producer().send("nope", b"x")


def test_create_partitions(tmp_path: Path, clock: ManualClock) -> None:
    with _open(tmp_path, clock) as store:
        store.create_topic("t", 1)
        p = store.producer()
        p.send("t", b"a")
        store.create_partitions("t", 3)
        assert store.partitions_for("t") == 3
        assert p.send("t", b"b", partition=2).offset == 0
        with pytest.raises(InvalidPartitionsError):
            store.create_partitions("t", 3)
    with _open(tmp_path, clock) as store:
        assert store.partitions_for("t") == 3


def test_missing_partition_directory_is_recreated(tmp_path: Path, clock: ManualClock) -> None:
    with _open(tmp_path, clock) as store:
        store.create_topic("t", 2)
    shutil.rmtree(tmp_path / "t-1")
    with _open(tmp_path, clock) as store:
        assert store.partitions_for("t") == 2
        assert (tmp_path / "t-1").is_dir()


def test_leftover_delete_dirs_are_removed(tmp_path: Path, clock: ManualClock) -> None:
    junk = tmp_path / ("gone-0." + "ab" * 16 + "-delete")
    junk.mkdir(parents=True)
    (junk / "00000000000000000000.log").write_bytes(b"x")
    with _open(tmp_path, clock) as store:
        assert store.topics() == []
    assert not junk.exists()


def test_closed_store_refuses_work(tmp_path: Path, clock: ManualClock) -> None:
    store = _open(tmp_path, clock)
    store.create_topic("t")
    store.close()
    store.close()  # idempotent
    with pytest.raises(KafkaStorageError, match="closed"):
        store.create_topic("u")
    with pytest.raises(KafkaStorageError, match="closed"):
        store.describe("t")


# -------------------------------------------------------------------------------------------------
# The lock and the clean-shutdown marker
# -------------------------------------------------------------------------------------------------


def test_second_open_in_process_is_refused(tmp_path: Path, clock: ManualClock) -> None:
    store = _open(tmp_path, clock)
    try:
        with pytest.raises(LogDirectoryLockedError, match="already open"):
            _open(tmp_path, clock)
        # Read-only opens do not need the lock.
        with Store.open(tmp_path, read_only=True) as ro:
            assert ro.topics() == []
    finally:
        store.close()
    _open(tmp_path, clock).close()  # released


def test_second_process_is_refused(tmp_path: Path, clock: ManualClock) -> None:
    code = textwrap.dedent(f"""
        import sys
        from seglog import Store
        from seglog.errors import LogDirectoryLockedError
        try:
            Store.open({str(tmp_path)!r})
        except LogDirectoryLockedError as exc:
            print("LOCKED", exc)
            sys.exit(3)
        sys.exit(0)
    """)
    with _open(tmp_path, clock):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert out.returncode == 3, out.stderr
        assert "another process" in out.stdout
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def test_clean_shutdown_marker_lifecycle(tmp_path: Path, clock: ManualClock) -> None:
    marker = tmp_path / ".kafka_cleanshutdown"
    store = _open(tmp_path, clock)
    assert not marker.exists()
    store.create_topic("t")
    store.close()
    assert json.loads(marker.read_text()) == {"version": 0, "brokerEpoch": -1}
    store = _open(tmp_path, clock)
    assert not marker.exists()  # removed once the logs are loaded
    store.close()


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="not found"):
        Store.open(tmp_path / "nope", read_only=True)
    with pytest.raises(StorageError, match="not found"):
        Store.open(tmp_path / "nope", create=False)


def test_corrupt_metadata_is_reported(tmp_path: Path, clock: ManualClock) -> None:
    (tmp_path / "seglog-metadata.json").write_text("{not json")
    with pytest.raises(StorageError, match="seglog-metadata.json"):
        _open(tmp_path, clock)
    # The failed open released the lock.
    (tmp_path / "seglog-metadata.json").unlink()
    _open(tmp_path, clock).close()


# -------------------------------------------------------------------------------------------------
# Dir-level checkpoints
# -------------------------------------------------------------------------------------------------


def _ckpt(path: Path, name: str) -> dict[tuple[str, int], int]:
    return OffsetCheckpointFile(str(path / name)).read()


def test_checkpoint_files_cover_every_partition(tmp_path: Path, clock: ManualClock) -> None:
    with _open(tmp_path, clock) as store:
        store.create_topic("a", 2)
        store.create_topic("b", 1, {"cleanup.policy": "compact"})
        p = store.producer()
        p.send_batch("a", [b"x"] * 10, partition=1)
        p.send("b", b"v", key=b"k")
        assert _ckpt(tmp_path, "recovery-point-offset-checkpoint") == {("a", 0): 0, ("a", 1): 0, ("b", 0): 0}
        store.flush()
        assert _ckpt(tmp_path, "recovery-point-offset-checkpoint") == {("a", 0): 0, ("a", 1): 10, ("b", 0): 1}
        assert _ckpt(tmp_path, "replication-offset-checkpoint") == {("a", 0): 0, ("a", 1): 10, ("b", 0): 1}
        assert _ckpt(tmp_path, "log-start-offset-checkpoint") == {}
        assert store.delete_records("a", 1, 4) == 4
        assert _ckpt(tmp_path, "log-start-offset-checkpoint") == {("a", 1): 4}
    # The logs do not keep entries of their own: one file, one entry per partition.
    rp = (tmp_path / "recovery-point-offset-checkpoint").read_text().splitlines()
    assert rp[:2] == ["0", "3"] and sorted(rp[2:]) == ["a 0 0", "a 1 10", "b 0 1"]
    with _open(tmp_path, clock) as store:
        assert store.log("a", 1).log_start_offset == 4
        c = store.consumer(auto_offset_reset="earliest")
        c.assign([TopicPartition("a", 1)])
        assert [r.offset for r in c.poll()] == list(range(4, 10))


def test_periodic_checkpoint_flushes_rolled_segments(tmp_path: Path, clock: ManualClock) -> None:
    cfg = {"log.flush.offset.checkpoint.interval.ms": 1000}
    with _open(tmp_path, clock, config=cfg) as store:
        store.create_topic("t", 1, {"segment.bytes": 1000})
        store.producer().send_batch("t", [b"x" * 100] * 30, partition=0)
        lg = store.log("t", 0)
        assert len(lg.segments) > 1 and lg.recovery_point == 0
        clock.advance(1000)
        # Up to the active segment's base: what a roll makes durable in Kafka.
        assert lg.recovery_point == lg.active.base_offset > 0
        assert _ckpt(tmp_path, "recovery-point-offset-checkpoint")[("t", 0)] == lg.recovery_point


def test_retention_task_runs_on_the_clock(tmp_path: Path, clock: ManualClock) -> None:
    cfg = {"log.retention.check.interval.ms": 10_000}
    with _open(tmp_path, clock, config=cfg) as store:
        store.create_topic("t", 1, {"segment.bytes": 500, "retention.ms": 60_000, "file.delete.delay.ms": 0})
        p = store.producer()
        for _ in range(5):
            p.send_batch("t", [b"y" * 50] * 10, partition=0)
        store.log("t", 0).roll()
        lg = store.log("t", 0)
        before = len(lg.segments)
        assert before > 2
        clock.advance(10_000)
        assert len(lg.segments) == before  # nothing old enough yet
        clock.advance(60_000)
        assert lg.log_start_offset == lg.log_end_offset == 50
        assert _ckpt(tmp_path, "log-start-offset-checkpoint") == {}  # the first segment starts there
        assert len(lg.segments) == 1


def test_flush_ms_flusher_runs_on_the_clock(tmp_path: Path, clock: ManualClock) -> None:
    with _open(tmp_path, clock) as store:
        store.create_topic("t", 1, {"flush.ms": 500})
        store.producer().send("t", b"x")
        lg = store.log("t", 0)
        assert lg.recovery_point == 0
        clock.advance(1000)
        assert lg.recovery_point == 1


def test_cleaner_task_and_checkpoint(tmp_path: Path, clock: ManualClock) -> None:
    with _open(tmp_path, clock, config={"log.cleaner.backoff.ms": 1000}) as store:
        store.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": 300})
        p = store.producer()
        for i in range(40):
            p.send("c", b"v%d" % i, key=b"k%d" % (i % 3))
        clock.advance(1000)
        ck = _ckpt(tmp_path, "cleaner-offset-checkpoint")
        assert ck[("c", 0)] == store.log("c", 0).active.base_offset
        c = store.consumer(auto_offset_reset="earliest")
        c.assign([("c", 0)])
        recs = list(c.poll(max_records=1000))
        assert {r.key: r.value for r in recs} == {b"k0": b"v39", b"k1": b"v37", b"k2": b"v38"}
    with _open(tmp_path, clock) as store:
        assert store._partition("c", 0).cleaner_offset == ck[("c", 0)]


# -------------------------------------------------------------------------------------------------
# Read-only open of a Kafka broker's log dir
# -------------------------------------------------------------------------------------------------


def test_read_only_open_of_kafka_fixture(fixtures_dir: Path) -> None:
    src = fixtures_dir / "kafka-real" / "LDI-POC"
    before = {p: p.stat().st_mtime_ns for p in src.rglob("*")}
    with Store.open(src, read_only=True) as store:
        assert store.topics() == ["TestTopicPatient"]
        assert store.topics(internal=True) == ["TestTopicPatient", "__consumer_offsets"]
        d = store.describe("__consumer_offsets")[0]
        assert d.topic_id == "gSnfpEbtQfSDpxM2lhEn9A" and d.internal
        assert [p.partition for p in d.partitions] == [6]
        assert d.partitions[0].log_end_offset == 13
        c = store.consumer(group_id="DEVSmileCDR", auto_offset_reset="earliest")
        # The group's committed offsets, in Kafka's __consumer_offsets schema (partition 6 of 50
        # by Java's String.hashCode of the group id).
        assert c.committed(("TestTopicPatient", 0)).offset == 3  # type: ignore[union-attr]
        c.assign([("TestTopicPatient", 0)])
        assert c.position(("TestTopicPatient", 0)) == 3
        c.seek_to_beginning()
        recs = list(c.poll())
        assert [r.offset for r in recs] == [0, 1, 2]
        assert [r.producer_id for r in recs] == [1, 2, 3]
        assert all(r.value is not None and r.value.startswith(b"{") for r in recs)
        with pytest.raises(KafkaStorageError, match="read-only"):
            store.create_topic("x")
        with pytest.raises(KafkaStorageError, match="read-only"):
            store.producer()
    after = {p: p.stat().st_mtime_ns for p in src.rglob("*")}
    assert before == after


def test_writable_open_of_a_copy_of_a_kafka_dir(tmp_path: Path, fixtures_dir: Path, clock: ManualClock) -> None:
    dst = tmp_path / "kafka"
    shutil.copytree(fixtures_dir / "kafka-real" / "LDI-POC", dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    with _open(dst, clock) as store:
        assert store.partitions_for("__consumer_offsets") == 50
        assert store.producer().send("TestTopicPatient", b"{}").offset == 3
        c = store.consumer(group_id="DEVSmileCDR")
        c.assign([("TestTopicPatient", 0)])
        assert [r.offset for r in c.poll()] == [3]
        c.commit()
    with _open(dst, clock) as store:
        assert store.group_offsets.committed("DEVSmileCDR", "TestTopicPatient", 0).offset == 4  # type: ignore[union-attr]
