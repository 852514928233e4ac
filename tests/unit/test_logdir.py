"""A log dir has exactly one owner (seglog.storage.logdir): a second writer is refused whatever its
entry point (Store, Log.open, a replica node, the Spark writer, the CLI, in this process or
another), reading writes nothing, and a topic change that fails leaves nothing behind."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest

from seglog import Log, Store
from seglog.errors import KafkaStorageError, LogDirectoryLockedError
from seglog.storage.checkpoints import OffsetCheckpointFile, atomic_write
from seglog.storage.group_offsets import OFFSETS_TOPIC, partition_for_group
from seglog.storage.logdir import LogDir
from seglog.storage.records import encode_batch
from seglog.util.clock import ManualClock
from tests.conftest import ROOT, T0, make_kafka_broker_dir, run_python, snapshot_tree


def _batch(*values: bytes) -> bytes:
    return encode_batch(list(values), timestamps=T0)


class _Holder:
    """A child process holding something open until told to stop: ``kind`` is ``store`` (a
    writable Store of the dir), ``log`` (a writable Log of one partition) or ``broker`` (the
    dir's ``.lock`` under an exclusive record lock, as a running Kafka broker holds it)."""

    CODE = """
        import fcntl, os, sys
        kind, path = sys.argv[1], sys.argv[2]
        if kind == "store":
            from seglog import Store
            held = Store.open(path)
        elif kind == "log":
            from seglog import Log
            held = Log.open(path)
            held.append(__import__("seglog.storage.records").storage.records.encode_batch([b"theirs"], timestamps=1))
        else:
            fd = os.open(os.path.join(path, ".lock"), os.O_RDWR | os.O_CREAT)
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        print("held", flush=True)
        sys.stdin.readline()
        if kind != "broker":
            held.close()
    """

    def __init__(self, kind: str, path: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(self.CODE), kind, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=str(ROOT),
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if line != "held":
            self.proc.kill()
            raise AssertionError(f"holder failed: {self.proc.communicate()[1]}")

    def __enter__(self) -> _Holder:
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        _, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, err


# -------------------------------------------------------------------------------------------------
# A second writer is refused
# -------------------------------------------------------------------------------------------------


def test_log_open_inside_a_store_dir_is_refused_and_the_store_keeps_its_data(
    tmp_path: Path, clock: ManualClock
) -> None:
    with Store.open(tmp_path, clock=clock) as store:
        store.create_topic("t", 1)
        p = store.producer()
        assert p.send("t", b"ours", partition=0).offset == 0
        p.flush()
        # The partition the store writes, and a new one in its dir: both refused, nothing made.
        with pytest.raises(LogDirectoryLockedError, match="already open for writing in this process"):
            Log.open(tmp_path / "t-0", clock=clock)
        with pytest.raises(LogDirectoryLockedError):
            Log.open(tmp_path / "other-0", clock=clock)
        assert not (tmp_path / "other-0").exists()
        assert p.send("t", b"ours too", partition=0).offset == 1
    with Store.open(tmp_path, read_only=True) as ro:
        lg = ro.log("t", 0)
        assert lg.log_end_offset == 2
    # Read-only opens take no lock, even while the store runs.
    with Store.open(tmp_path, clock=clock) as store:
        ro_log = Log.open(tmp_path / "t-0", read_only=True)
        assert ro_log.log_end_offset == 2
        ro_log.close()


def test_log_open_in_a_dir_a_store_of_another_process_holds_is_refused(tmp_path: Path) -> None:
    Store.open(tmp_path).close()
    with _Holder("store", tmp_path):
        with pytest.raises(LogDirectoryLockedError, match="locked by another process"):
            Log.open(tmp_path / "t-0")
        assert not (tmp_path / "t-0").exists()
    Log.open(tmp_path / "t-0").close()


def test_two_logs_of_one_partition_in_one_process(tmp_path: Path) -> None:
    first = Log.open(tmp_path / "t-0")
    first.append(_batch(b"a"))
    with pytest.raises(LogDirectoryLockedError, match="open for writing"):
        Log.open(tmp_path / "t-0")
    # Another partition of the same dir is another writer's to take.
    other = Log.open(tmp_path / "t-1")
    other.append(_batch(b"b"))
    # ... but no owner may take the dir while they write.
    with pytest.raises(LogDirectoryLockedError, match="in this process"):
        Store.open(tmp_path)
    other.close()
    first.close()
    again = Log.open(tmp_path / "t-0")
    assert again.log_end_offset == 1
    again.close()
    Store.open(tmp_path).close()


def test_a_dropped_log_frees_its_partition(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0")
    lg.abandon()
    Log.open(tmp_path / "t-0").close()
    lg = Log.open(tmp_path / "t-0")
    del lg
    Log.open(tmp_path / "t-0").close()


def test_a_log_of_another_process_excludes_logs_and_stores_here(tmp_path: Path) -> None:
    with _Holder("log", tmp_path / "t-0"):
        with pytest.raises(LogDirectoryLockedError, match="open for writing by another Log"):
            Log.open(tmp_path / "t-0")
        with pytest.raises(LogDirectoryLockedError, match="locked by another process"):
            Store.open(tmp_path)
        # A different partition of the same dir may be written meanwhile.
        lg = Log.open(tmp_path / "t-1")
        lg.append(_batch(b"mine"))
        lg.close()
    with Store.open(tmp_path) as store:
        assert store.log("t", 0).log_end_offset == 1
        assert store.log("t", 1).log_end_offset == 1


def test_a_log_open_waits_for_the_partition_when_asked(tmp_path: Path) -> None:
    holder = _Holder("log", tmp_path / "t-0")
    with pytest.raises(LogDirectoryLockedError, match=r"waited 0\.2 s"):
        Log.open(tmp_path / "t-0", lock_wait_s=0.2)
    import threading

    threading.Timer(0.3, holder.__exit__, args=(None, None, None)).start()
    lg = Log.open(tmp_path / "t-0", lock_wait_s=30)
    assert lg.log_end_offset == 1
    lg.close()


def test_a_broker_holding_the_dir_refuses_every_writer(tmp_path: Path) -> None:
    (tmp_path / "t-0").mkdir()
    with _Holder("broker", tmp_path):
        with pytest.raises(LogDirectoryLockedError):
            Store.open(tmp_path)
        with pytest.raises(LogDirectoryLockedError):
            Log.open(tmp_path / "t-0")
        with pytest.raises(LogDirectoryLockedError):
            LogDir.open(tmp_path)


def test_a_forked_child_does_not_inherit_the_claims(tmp_path: Path) -> None:
    import multiprocessing

    def child(path: str, q: Any, go: Any) -> None:
        try:
            Log.open(os.path.join(path, "t-0"))
            q.put("opened")
        except LogDirectoryLockedError as exc:
            q.put(f"refused: {exc}")
        go.wait(60)  # alive, with its copies of the parent's descriptors, until told

    lg = Log.open(tmp_path / "t-0")
    with LogDir.open(tmp_path / "owned"):
        ctx = multiprocessing.get_context("fork")
        q, go = ctx.Queue(), ctx.Event()
        p = ctx.Process(target=child, args=(str(tmp_path), q, go))
        p.start()
        try:
            got = q.get(timeout=60)
            assert got.startswith("refused"), got
            lg.close()
            # The child's copies hold nothing once the parent lets go.
            Log.open(tmp_path / "t-0").close()
            Store.open(tmp_path).close()
        finally:
            go.set()
            p.join(60)
    Store.open(tmp_path / "owned").close()


def test_log_dir_hands_out_only_its_own_partitions(tmp_path: Path) -> None:
    with LogDir.open(tmp_path / "a") as a, LogDir.open(tmp_path / "b") as b:
        with pytest.raises(ValueError, match="does not hold"):
            Log.open(tmp_path / "b" / "t-0", owner=a)
        lg = Log.open(b.partition_path("t", 0), owner=b)
        lg.append(_batch(b"x"))
        lg.close()
    with pytest.raises(ValueError, match="does not hold"):
        Log.open(tmp_path / "b" / "t-0", owner=b)  # closed: no longer the owner


def test_a_replica_node_dir_refuses_other_writers(tmp_path: Path) -> None:
    from tests.replication.sim import SimCluster

    sim = SimCluster(str(tmp_path / "sim"), nodes=1, seed=1)
    try:
        d = sim.node_dirs(0)[0]
        with pytest.raises(LogDirectoryLockedError):
            Log.open(os.path.join(d, "t-0"))
        with pytest.raises(LogDirectoryLockedError):
            Store.open(d)
        assert not os.path.exists(os.path.join(d, "t-0"))
    finally:
        sim.close()


# -------------------------------------------------------------------------------------------------
# The Spark writer goes through the same lock
# -------------------------------------------------------------------------------------------------


def _spark_writer(log_dir: Path, topic: str = "t") -> Any:
    spark = pytest.importorskip("seglog.bindings.spark")
    spec = spark.parse_write_options({"path": str(log_dir), "topic": topic})
    counts = {pd.topic: pd.partition + 1 for pd in spark.find_partition_dirs([str(log_dir)])}
    return spark, spark.SeglogWriter(spec, counts)


def test_spark_write_into_a_store_dir_is_refused(tmp_path: Path, clock: ManualClock) -> None:
    pa = pytest.importorskip("pyarrow")
    with Store.open(tmp_path, clock=clock) as store:
        store.create_topic("t", 1)
        store.producer().send("t", b"ours", partition=0)
        spark, writer = _spark_writer(tmp_path)
        with pytest.raises(LogDirectoryLockedError):
            spark.init_high_watermarks(str(tmp_path))  # the driver, at save()
        rows = pa.RecordBatch.from_pydict({"value": [b"theirs"]})
        with pytest.raises(LogDirectoryLockedError):
            writer.write(iter([rows]))  # a task
        store.producer().send("t", b"ours too", partition=0)
    with Store.open(tmp_path, read_only=True) as ro:
        assert ro.log("t", 0).log_end_offset == 2


HW_NAME = "replication-offset-checkpoint"


def test_spark_tasks_of_one_partition_take_turns_and_commit(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    spark, writer = _spark_writer(tmp_path)
    spark.init_high_watermarks(str(tmp_path))
    rows = pa.RecordBatch.from_pydict({"value": [b"a", b"b"], "partition": [0, 0]})
    held = Log.open(tmp_path / "t-0")  # another writer of the partition, for a moment
    import threading

    threading.Timer(0.3, held.close).start()
    m1 = writer.write(iter([rows]))
    m2 = writer.write(iter([rows]))
    writer.commit([m1, m2])
    assert OffsetCheckpointFile(str(tmp_path / HW_NAME)).read() == {("t", 0): 4}
    with Store.open(tmp_path) as store:  # no claim left behind
        assert store.log("t", 0).log_end_offset == 4


# -------------------------------------------------------------------------------------------------
# Reading writes nothing
# -------------------------------------------------------------------------------------------------


def _read_everything(d: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every reader: a read-only Store, the CLI's describe, dump and consume (no group), and
    the Spark reader's planning and task code."""
    from seglog.cli import main

    with Store.open(d, read_only=True) as store:
        assert "TestTopicPatient" in store.topics()
        desc = {t.name: t for t in store.describe()}
        assert desc["TestTopicPatient"].partitions[0].log_end_offset == 3
        assert store.group_offsets.committed("DEVSmileCDR", "TestTopicPatient", 0) is not None
        c = store.consumer(auto_offset_reset="earliest")
        c.assign([("TestTopicPatient", 0)])
        assert len(c.poll()) == 3
        c.close()
    assert main(["describe", str(d)]) == 0
    assert main(["dump", str(d / "TestTopicPatient-0" / f"{0:020d}.log")]) == 0
    assert main(["dump", str(d / "__consumer_offsets-6" / f"{0:020d}.index")]) == 0
    assert main(["consume", str(d), "TestTopicPatient", "--from-beginning", "--timeout-ms", "10"]) == 0
    out = capsys.readouterr().out
    assert "Patient" in out
    spark = pytest.importorskip("seglog.bindings.spark")
    ro = spark.parse_read_options({"path": str(d), "subscribe": "TestTopicPatient,_confluent-command"})
    parts = spark.plan_batch(ro, spark.Constraints())
    rows = sum(b.num_rows for part in parts for b in spark.read_partition(part, ro))
    assert rows == 3 + 2


@pytest.mark.parametrize("state", ["clean", "unclean"])
def test_reading_a_broker_dir_changes_no_byte(
    kafka_broker_dir: Path, capsys: pytest.CaptureFixture[str], state: str
) -> None:
    if state == "unclean":
        # What a killed broker leaves: no marker, a deletion and a compaction under way, a
        # torn write at the end of a segment. A writable open would clean all of it up.
        d = kafka_broker_dir
        (d / ".kafka_cleanshutdown").unlink()
        (d / f"gone-0.{'0' * 32}-delete").mkdir()
        (d / f"gone-0.{'0' * 32}-delete" / f"{0:020d}.log").write_bytes(b"")
        (d / "TestTopicPatient-0" / f"{0:020d}.log.cleaned").write_bytes(b"\0" * 10)
        with open(d / "__consumer_offsets-6" / f"{0:020d}.log", "ab") as f:
            f.write(b"\0\0\0\0\0\0\0\x0d\0\0\0\x40")
    before = snapshot_tree(kafka_broker_dir)
    _read_everything(kafka_broker_dir, capsys)
    assert snapshot_tree(kafka_broker_dir) == before


def test_reading_a_dir_a_broker_runs_on_changes_no_byte(
    kafka_broker_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from seglog.cli import main

    with _Holder("broker", kafka_broker_dir):
        before = snapshot_tree(kafka_broker_dir)
        _read_everything(kafka_broker_dir, capsys)
        # A commit needs the dir: refused, saying why, with nothing written.
        assert main(["consume", str(kafka_broker_dir), "TestTopicPatient", "--group", "g", "--timeout-ms", "10"]) == 1
        err = capsys.readouterr().err
        assert "cannot commit the offsets of group 'g'" in err and "locked by another process" in err
        assert "without --group" in err
        assert snapshot_tree(kafka_broker_dir) == before


def test_consume_with_a_group_creates_only_its_offsets_partition(
    kafka_broker_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from seglog.cli import main

    d = kafka_broker_dir
    before = snapshot_tree(d)
    assert main(["consume", str(d), "TestTopicPatient", "--group", "g1", "--from-beginning", "--timeout-ms", "10"]) == 0
    after = snapshot_tree(d)
    n = partition_for_group("g1", 50)
    assert n != 6
    new = {k.split("/")[0] for k in set(after) - set(before)}
    assert new == {f"{OFFSETS_TOPIC}-{n}", "seglog-metadata.json"}
    assert set(before) <= set(after)
    for k, (data, _, _) in before.items():
        if k.endswith(".log"):
            assert after[k][0] == data, k
    meta = json.loads((d / "seglog-metadata.json").read_text())
    assert meta["topics"][OFFSETS_TOPIC]["partitions"] == 50
    with Store.open(d, read_only=True) as ro:
        assert ro.group_offsets.committed("g1", "TestTopicPatient", 0).offset == 3  # type: ignore[union-attr]
        # The group already in the broker's partition 6 is still read from there.
        assert ro.group_offsets.committed("DEVSmileCDR", "TestTopicPatient", 0) is not None


def test_writable_open_of_a_broker_dir_creates_no_offsets_partitions(kafka_broker_dir: Path) -> None:
    with Store.open(kafka_broker_dir) as store:
        assert store.partitions_for(OFFSETS_TOPIC) == 50
        assert [p.partition for p in store.describe(OFFSETS_TOPIC)[0].partitions] == [6]
    dirs = sorted(p.name for p in kafka_broker_dir.iterdir() if p.name.startswith(OFFSETS_TOPIC))
    assert dirs == [f"{OFFSETS_TOPIC}-6"]


def test_a_store_creates_offsets_partitions_one_at_a_time(tmp_path: Path, clock: ManualClock) -> None:
    with Store.open(tmp_path, clock=clock) as store:
        store.create_topic("t", 1)
        store.producer().send("t", b"x", partition=0)
        for g in ("a", "b"):
            c = store.consumer(group_id=g, auto_offset_reset="earliest")
            c.assign([("t", 0)])
            c.poll()
            c.commit()
        assert store.partitions_for(OFFSETS_TOPIC) == 50
    dirs = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(OFFSETS_TOPIC))
    assert dirs == sorted({f"{OFFSETS_TOPIC}-{partition_for_group(g, 50)}" for g in ("a", "b")})
    with Store.open(tmp_path, clock=clock) as store:
        for g in ("a", "b"):
            assert store.group_offsets.committed(g, "t", 0).offset == 1  # type: ignore[union-attr]
        assert store.group_offsets.groups() == ["a", "b"]


_READ_ONLY_READER = """
    import os, sys
    if sys.argv[3] == "nobody":
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    sys.path.insert(0, sys.argv[2])
    from seglog import Store
    from seglog.cli import main
    d = sys.argv[1]
    try:
        open(os.path.join(d, "probe"), "wb")
    except PermissionError:
        pass
    else:
        sys.exit("the directory is writable: this user can write anything")
    with Store.open(d, read_only=True) as store:
        c = store.consumer(auto_offset_reset="earliest")
        c.assign([("TestTopicPatient", 0)])
        assert len(c.poll()) == 3
    assert main(["describe", d]) == 0
    assert main(["dump", os.path.join(d, "TestTopicPatient-0", "00000000000000000000.log")]) == 0
    assert main(["consume", d, "TestTopicPatient", "--from-beginning", "--timeout-ms", "10"]) == 0
    assert main(["consume", d, "TestTopicPatient", "--group", "g", "--timeout-ms", "10"]) == 1
    try:
        import seglog.bindings.spark as spark
    except ImportError:
        pass
    else:
        ro = spark.parse_read_options({"path": d, "subscribe": "TestTopicPatient"})
        parts = spark.plan_batch(ro, spark.Constraints())
        assert sum(b.num_rows for p in parts for b in spark.read_partition(p, ro)) == 3
    print("READ-OK")
"""

# Root without the capabilities that bypass file permissions: chmod a-w then binds it too.
_NO_DAC = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner,-linux_immutable", "--"]


@pytest.mark.parametrize("who", ["root-without-dac-override", "nobody"])
def test_a_read_only_copy_reads_without_writing(fixtures_dir: Path, who: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to drop its file-permission capabilities or become another user")
    if who != "nobody" and shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    base = Path(tempfile.mkdtemp(prefix="seglog-ro-"))
    try:
        base.chmod(0o755)
        d = make_kafka_broker_dir(fixtures_dir, base / "kafka-logs")
        subprocess.run(["chmod", "-R", "a-w", str(d)], check=True)
        before = snapshot_tree(d)
        prefix = [] if who == "nobody" else _NO_DAC
        code = textwrap.dedent(_READ_ONLY_READER)
        argv = [str(d), str(ROOT), who]
        probe = subprocess.run(
            [*prefix, sys.executable, "-c", code.split("from seglog import Store")[0] + "import seglog\n", *argv],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if probe.returncode != 0:
            pytest.skip(f"seglog cannot be imported as {who}: " + probe.stderr.strip().splitlines()[-1])
        out = subprocess.run(
            [*prefix, sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120, cwd=str(base)
        )
        assert out.returncode == 0 and "READ-OK" in out.stdout, out.stderr[-2000:]
        # The group's commit cannot take the dir's lock and says so.
        assert (
            "seglog consume: error: cannot commit the offsets of group 'g': cannot open the lock file" in out.stderr
        ), out.stderr[-2000:]
        assert snapshot_tree(d) == before
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(base)], check=False)
        shutil.rmtree(base, ignore_errors=True)


# -------------------------------------------------------------------------------------------------
# No half-made state
# -------------------------------------------------------------------------------------------------


def _state(d: Path) -> tuple[list[str], dict[str, Any], list[dict[tuple[str, int], int]]]:
    names = sorted(p.name for p in d.iterdir())
    meta = json.loads((d / "seglog-metadata.json").read_text())["topics"]
    ckpts = [
        OffsetCheckpointFile(str(d / n)).read()
        for n in (
            "recovery-point-offset-checkpoint",
            "replication-offset-checkpoint",
            "log-start-offset-checkpoint",
            "cleaner-offset-checkpoint",
        )
    ]
    return names, meta, ckpts


def test_create_topic_with_a_bad_index_size_leaves_nothing(tmp_path: Path, clock: ManualClock) -> None:
    with Store.open(tmp_path, clock=clock) as store:
        store.create_topic("keep", 1)
        before = _state(tmp_path)
        with pytest.raises(ValueError, match="invalid max index size 7"):
            store.create_topic("t", 3, {"segment.index.bytes": 7})
        assert _state(tmp_path) == before
        assert store.topics() == ["keep"]
        store.create_topic("t", 3)
    with Store.open(tmp_path, clock=clock) as store:
        assert store.partitions_for("t") == 3


@pytest.mark.parametrize("fail_at", [0, 2, 4])
def test_create_topic_failing_at_the_nth_partition_leaves_nothing(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch, fail_at: int
) -> None:
    store = Store.open(tmp_path, clock=clock)
    store.create_topic("keep", 2)
    before = _state(tmp_path)
    real = Log.open.__func__  # type: ignore[attr-defined]
    calls = []

    def flaky(cls: type, directory: Any, *args: Any, **kwargs: Any) -> Log:
        calls.append(directory)
        if len(calls) == fail_at + 1:
            # What a full disk does once the partition directory is made.
            os.makedirs(directory, exist_ok=True)
            raise KafkaStorageError(f"no space left on device ({errno.ENOSPC})")
        return real(cls, directory, *args, **kwargs)

    monkeypatch.setattr(Log, "open", classmethod(flaky))
    with pytest.raises(KafkaStorageError, match="no space"):
        store.create_topic("t", 5)
    assert _state(tmp_path) == before
    assert store.topics() == ["keep"]
    with pytest.raises(KafkaStorageError, match="no space"):
        calls.clear()
        store.create_partitions("keep", 5 + fail_at)
    assert _state(tmp_path) == before
    assert store.partitions_for("keep") == 2
    monkeypatch.setattr(Log, "open", classmethod(real))
    store.create_topic("t", 5)
    store.close()
    with Store.open(tmp_path, clock=clock) as again:
        assert again.topics() == ["keep", "t"] and again.partitions_for("t") == 5


def test_create_topic_whose_metadata_write_fails_leaves_nothing(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    import seglog.storage.store_metadata

    with Store.open(tmp_path, clock=clock) as store:
        store.create_topic("keep", 1)
        before = _state(tmp_path)
        real = atomic_write
        fail = [True]

        def full(path: str, data: bytes) -> None:
            if fail[0] and path.endswith("seglog-metadata.json") and b'"t"' in data:
                fail[0] = False
                raise KafkaStorageError(f"cannot write checkpoint file {path}: No space left on device")
            real(path, data)

        monkeypatch.setattr(seglog.storage.store_metadata, "atomic_write", full)
        with pytest.raises(KafkaStorageError, match="No space"):
            store.create_topic("t", 3)
        assert _state(tmp_path) == before
        assert store.topics() == ["keep"]


def test_create_topic_on_a_full_disk_leaves_nothing(tmp_path: Path, clock: ManualClock) -> None:
    from tests.cluster.disk import Tmpfs, tmpfs_available

    reason = tmpfs_available()
    if reason is not None:
        pytest.skip(reason)
    with Tmpfs(str(tmp_path / "mnt"), size="2m") as fs:
        d = tmp_path / "mnt" / "logs"
        with Store.open(d, {"log.segment.bytes": 65536, "log.index.size.max.bytes": 4096}, clock=clock) as store:
            store.create_topic("keep", 1)
            store.producer().send("keep", b"x" * 1000, partition=0)
            store.flush()
            before = _state(d)
            fs.fill(leave=12 << 10)
            with pytest.raises(OSError) as info:
                store.create_topic("t", 200)
            assert "No space left on device" in str(info.value) or info.value.errno == errno.ENOSPC, info.value
            fs.free()
            assert _state(d) == before
            assert store.topics() == ["keep"]
            store.create_topic("t", 3)
        with Store.open(d, clock=clock) as again:
            assert again.topics() == ["keep", "t"] and again.log("keep", 0).log_end_offset == 1


def test_a_symlink_leads_around_no_lock(tmp_path: Path, clock: ManualClock) -> None:
    store_dir = tmp_path / "store"
    with Store.open(store_dir, clock=clock) as store:
        store.create_topic("t", 1)
        (tmp_path / "t-0").symlink_to(store_dir / "t-0")  # a partition of the store
        (tmp_path / "alias").symlink_to(store_dir)  # the store's dir
        with pytest.raises(LogDirectoryLockedError):
            Log.open(tmp_path / "t-0")
        with pytest.raises(LogDirectoryLockedError):
            Log.open(tmp_path / "alias" / "t-0")
        with pytest.raises(LogDirectoryLockedError):
            Store.open(tmp_path / "alias")
    lg = Log.open(tmp_path / "t-0")
    with pytest.raises(LogDirectoryLockedError):
        Log.open(store_dir / "t-0")
    with pytest.raises(LogDirectoryLockedError):
        Store.open(store_dir)
    lg.close()


def test_cli_produce_into_an_owned_dir_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from seglog.cli import main

    with Store.open(tmp_path) as store:
        store.create_topic("t", 1)
        before = snapshot_tree(tmp_path)
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"theirs\n")))
        assert main(["produce", str(tmp_path), "t"]) == 1
        assert "already open for writing in this process" in capsys.readouterr().err
        assert snapshot_tree(tmp_path) == before
    with _Holder("store", tmp_path):
        out = run_python(
            "import sys\nfrom seglog.cli import main\nsys.exit(main(['produce', sys.argv[1], 't']))",
            str(tmp_path),
            timeout=60,
        )
        assert out.returncode == 1 and "locked by another process" in out.stderr, out.stderr


_CRASH_MID_CREATE = """
    import os, sys
    from seglog import Log, Store
    d, what = sys.argv[1], sys.argv[2]
    store = Store.open(d)
    if what == "topic":
        store.create_topic("keep", 2)
        store.producer().send("keep", b"kept", partition=1)
        store.flush()
    real = Log.open.__func__
    calls = []

    def dying(cls, directory, *args, **kwargs):
        calls.append(directory)
        if len(calls) == 3:
            os._exit(9)   # killed in the middle of the change
        return real(cls, directory, *args, **kwargs)

    Log.open = classmethod(dying)
    if what == "topic":
        store.create_topic("t", 5)
    else:
        store.create_partitions("keep", 6)
"""


def test_a_crash_in_the_middle_of_create_topic_leaves_nothing_at_the_next_open(tmp_path: Path) -> None:
    d = tmp_path / "store"
    out = run_python(_CRASH_MID_CREATE, str(d), "topic", timeout=60)
    assert out.returncode == 9, out.stderr
    assert (d / "t-0").is_dir() and (d / "t-1").is_dir()  # what the crash left
    before = snapshot_tree(d)
    with Store.open(d, read_only=True) as ro:  # a reader ignores it, touching nothing
        assert ro.topics() == ["keep"]
    assert snapshot_tree(d) == before
    with Store.open(d) as store:
        assert store.topics() == ["keep"]
        assert store.log("keep", 1).log_end_offset == 1
        store.create_topic("t", 2)
    assert sorted(p.name for p in d.iterdir() if p.name.startswith("t-")) == ["t-0", "t-1"]
    # The crash in the middle of growing a topic.
    out = run_python(_CRASH_MID_CREATE, str(d), "partitions", timeout=60)
    assert out.returncode == 9, out.stderr
    assert (d / "keep-2").is_dir()
    with Store.open(d) as store:
        assert store.partitions_for("keep") == 2
        assert store.log("keep", 1).log_end_offset == 1
    assert not (d / "keep-2").exists()
    assert json.loads((d / "seglog-metadata.json").read_text())["topics"]["keep"] == {
        "config": {},
        "partitions": 2,
        "topic_id": json.loads((d / "seglog-metadata.json").read_text())["topics"]["keep"]["topic_id"],
    }
