"""Several log dirs per node (``log.dirs``, Kafka's JBOD) on the deterministic in-process cluster:
placement of new partitions, what each dir's checkpoint files hold, reloading after a restart,
refusals at start (a partition in two dirs, a dir locked by another process), and a failed dir
going offline alone while the node keeps serving the others. The real-process version with a
full tmpfs is tests/cluster/test_log_dirs.py."""

from __future__ import annotations

import errno
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from seglog.cluster.coordinator import InMemoryCoordinator
from seglog.cluster.log_dirs import LogDirs
from seglog.cluster.messages import NONE, FetchPartition, FetchRequest, FetchResponse
from seglog.cluster.metadata import LOG_DIR_EVENT_PATH, broker_path, loads
from seglog.cluster.node import HW_CHECKPOINT_FILE, ReplicaNode
from seglog.cluster.transport import InMemoryNetwork
from seglog.errors import KafkaStorageError, StorageError
from seglog.storage.checkpoints import OffsetCheckpointFile
from seglog.storage.log import Log
from seglog.storage.logdir import CLEAN_SHUTDOWN_FILE, CLEANER_OFFSET_FILE, LOG_START_FILE, RECOVERY_POINT_FILE
from seglog.storage.records import encode_batch
from seglog.util.clock import ManualClock, Scheduler
from tests.replication.sim import SimCluster

TOPIC = "t"
# Node 0 leads t-0 and t-1 and follows t-2 and t-3.
ASSIGNMENT = ((0, 1, 2), (0, 2, 1), (1, 0, 2), (2, 0, 1))
TPS = [(TOPIC, p) for p in range(len(ASSIGNMENT))]


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[SimCluster]:
    c = SimCluster(str(tmp_path / "sim"), nodes=3, seed=5, log_dirs=2)
    yield c
    c.close()


def expected_placement(initial: list[int], new: list[tuple[str, int]]) -> list[int]:
    """The oracle: each new partition, in the order opened, goes to the dir holding the fewest
    partitions, ties to the first."""
    counts = list(initial)
    out = []
    for _ in new:
        d = min(range(len(counts)), key=lambda k: (counts[k], k))
        counts[d] += 1
        out.append(d)
    return out


def dirs_holding(sim: SimCluster, i: int, tp: tuple[str, int]) -> list[int]:
    return [k for k, d in enumerate(sim.node_dirs(i)) if os.path.isdir(os.path.join(d, f"{tp[0]}-{tp[1]}"))]


def checkpoint(d: str, name: str) -> dict[tuple[str, int], int]:
    return OffsetCheckpointFile(os.path.join(d, name)).read()


def fill(sim: SimCluster, n: int = 5) -> dict[tuple[str, int], list[bytes]]:
    sent: dict[tuple[str, int], list[bytes]] = {}
    for tp in TPS:
        sent[tp] = [f"{tp[1]}:{k}".encode() for k in range(n)]
        sim.produce_ok(tp, sent[tp], acks=-1)
    return sent


def full_isr(sim: SimCluster) -> bool:
    return all(len(st.isr) == 3 for st in (sim.state(tp) for tp in TPS) if st is not None)


def test_new_partitions_go_to_the_dir_with_fewest_partitions(tmp_path: Path) -> None:
    root = tmp_path / "sim"
    # Node 0 already holds two partitions of another topic in its first dir.
    for name in ("old-0", "old-1"):
        (root / "node-0" / name).mkdir(parents=True)
    sim = SimCluster(str(root), nodes=3, seed=1, log_dirs=2)
    try:
        sim.create_topic(TOPIC, len(ASSIGNMENT), 3, {"min.insync.replicas": 2}, assignment=ASSIGNMENT)
        for i in sim.ids:
            initial = [2, 0] if i == 0 else [0, 0]
            # The controller's LeaderAndIsr lists partitions in order: that is the opening order.
            want = expected_placement(initial, TPS)
            assert [dirs_holding(sim, i, tp) for tp in TPS] == [[d] for d in want], f"node {i}"
            assert [sim.node(i).dir_of(*tp) for tp in TPS] == [sim.node_dirs(i)[d] for d in want]
        assert expected_placement([2, 0], TPS) == [1, 1, 0, 1]
        assert expected_placement([0, 0], TPS) == [0, 1, 0, 1]
    finally:
        sim.close()


def test_each_dir_checkpoints_its_own_partitions_and_a_restart_reloads_both(sim: SimCluster) -> None:
    sim.create_topic(TOPIC, len(ASSIGNMENT), 3, {"min.insync.replicas": 2}, assignment=ASSIGNMENT)
    sent = fill(sim)
    sim.run_until(
        lambda: all(
            sim.values(i, tp) == dict(enumerate(sent[tp])) and sim.replica(i, tp).high_watermark == len(sent[tp])  # type: ignore[union-attr]
            for i in sim.ids
            for tp in TPS
        ),
        10_000,
        10,
        "every replica holding every record, below its high watermark",
    )
    home: dict[tuple[str, int], str] = {}
    for tp in TPS:
        d = sim.node(0).dir_of(*tp)
        assert d is not None, tp
        home[tp] = d
    sim.shutdown(0)
    for d in sim.node_dirs(0):
        mine = {tp for tp in TPS if home[tp] == d}
        assert mine, f"{d} holds no partition: the placement test would have failed"
        assert os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE))
        hws = checkpoint(d, HW_CHECKPOINT_FILE)
        assert hws == {tp: len(sent[tp]) for tp in mine}
        assert set(checkpoint(d, RECOVERY_POINT_FILE)) == mine
        assert set(checkpoint(d, RECOVERY_POINT_FILE).values()) == {5}  # a clean close flushes
        assert set(checkpoint(d, LOG_START_FILE)) <= mine
    n = sim.start_node(0)
    assert n.started_clean
    sim.run_until(lambda: all(sim.replica(0, tp) is not None for tp in TPS), 10_000, 10, "node 0 reopening")
    assert {tp: n.dir_of(*tp) for tp in TPS} == home
    assert [dirs_holding(sim, 0, tp) for tp in TPS] == [[sim.node_dirs(0).index(home[tp])] for tp in TPS]
    for tp in TPS:
        assert sim.values(0, tp) == dict(enumerate(sent[tp]))
        assert sim.replica(0, tp).high_watermark == len(sent[tp])  # type: ignore[union-attr]


def test_a_partition_in_two_dirs_is_refused_naming_both(sim: SimCluster) -> None:
    sim.create_topic(TOPIC, len(ASSIGNMENT), 3, {"min.insync.replicas": 2}, assignment=ASSIGNMENT)
    fill(sim, 2)
    first = sim.node(0).dir_of(TOPIC, 0)
    assert first is not None
    other = next(d for d in sim.node_dirs(0) if d != first)
    sim.shutdown(0)
    shutil.copytree(os.path.join(first, "t-0"), os.path.join(other, "t-0"))
    with pytest.raises(StorageError) as info:
        sim.start_node(0)
    msg = str(info.value)
    assert os.path.join(first, "t-0") in msg and os.path.join(other, "t-0") in msg, msg
    shutil.rmtree(os.path.join(other, "t-0"))
    sim.start_node(0)  # the locks taken before the refusal were released


def test_a_dir_locked_by_another_process_is_refused(sim: SimCluster) -> None:
    sim.shutdown(0)
    locked = sim.node_dirs(0)[1]
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            f"fd = os.open({os.path.join(locked, '.lock')!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.lockf(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(StorageError, match=f"log dir {locked} is locked by another process"):
            sim.start_node(0)
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    sim.start_node(0)


def test_duplicate_dirs_are_refused(tmp_path: Path) -> None:
    clock = ManualClock()
    scheduler = Scheduler(clock)
    with pytest.raises(ValueError, match="listed twice"):
        ReplicaNode(
            0,
            [str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "a") + "/"],
            coordinator=InMemoryCoordinator(clock, scheduler),
            transport=InMemoryNetwork(scheduler, random.Random(0)),
            clock=clock,
            scheduler=scheduler,
        )


def _fail_writes(sim: SimCluster, i: int, d: str) -> None:
    """Every append to a log of node ``i`` in dir ``d`` fails as on a full disk."""

    def enospc(*_a: Any, **_k: Any) -> Any:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    for tp, p in sim.node(i).partitions.items():
        if sim.node(i).dir_of(*tp) == d:
            p.log.append = enospc  # type: ignore[method-assign]


def _fetch(sim: SimCluster, i: int, tp: tuple[str, int]) -> Any:
    resp = sim.call(i, FetchRequest(-1, (FetchPartition(tp[0], tp[1], 0, max_bytes=1 << 16),), -1, 0, 1, 1 << 20))
    assert isinstance(resp, FetchResponse)
    return resp.partitions[0]


def test_a_failed_dir_goes_offline_alone(sim: SimCluster) -> None:
    sim.create_topic(TOPIC, len(ASSIGNMENT), 3, {"min.insync.replicas": 2}, assignment=ASSIGNMENT)
    sent = fill(sim)
    sim.run_until(lambda: full_isr(sim), 10_000, 10, "a full ISR")
    node = sim.node(0)
    halted: list[BaseException] = []
    node.on_log_dir_failure = halted.append
    healthy, failing = sim.node_dirs(0)
    assert [node.dir_of(*tp) for tp in TPS] == [healthy, failing, healthy, failing]
    _fail_writes(sim, 0, failing)

    box = sim.produce((TOPIC, 1), [b"lost?"], acks=-1)  # node 0 leads t-1, in the failing dir
    sim.run_until(lambda: bool(box), 5000, 1, "the produce answer")
    assert box[0][0].error == KafkaStorageError.code, box
    assert node.offline_dirs.keys() == {failing} and node.offline_partitions == {(TOPIC, 1), (TOPIC, 3)}
    assert not halted and node.running

    # The controller moves leadership of t-1 away and takes node 0 out of t-1's and t-3's ISRs.
    sim.run_until(
        lambda: sim.leader_of((TOPIC, 1)) not in (-1, 0) and all(0 not in sim.state((TOPIC, p)).isr for p in (1, 3)),  # type: ignore[union-attr]
        10_000,
        10,
        "leadership and ISR moved off the offline replicas",
    )
    reg = loads(sim.coord.read(broker_path(0))[0])  # type: ignore[index]
    assert reg["offline_log_dirs"] == [failing] and reg["offline_replicas"] == [[TOPIC, 1], [TOPIC, 3]]
    sim.run_until(lambda: sim.coord.children_of(LOG_DIR_EVENT_PATH) == [], 5000, 10, "the notification consumed")
    assert sim.leader_of((TOPIC, 0)) == 0 and sim.state((TOPIC, 0)).isr == (0, 1, 2)  # type: ignore[union-attr]
    assert 0 in sim.state((TOPIC, 2)).isr  # type: ignore[union-attr]

    # The healthy dir keeps being served; the offline partitions answer KAFKA_STORAGE_ERROR.
    sent[(TOPIC, 0)].append(b"more")
    assert sim.produce_ok((TOPIC, 0), [b"more"], acks=-1).error == NONE
    assert _fetch(sim, 0, (TOPIC, 3)).error == KafkaStorageError.code
    assert _fetch(sim, 0, (TOPIC, 0)).error == NONE
    box = sim.produce((TOPIC, 3), [b"x"], acks=-1, dst=0)
    sim.run_until(lambda: bool(box), 5000, 1, "the produce answer")
    assert box[0][0].error == KafkaStorageError.code
    for k in range(3):  # writes to t-1 reach its new leader
        v = f"1:after{k}".encode()
        sim.produce_ok((TOPIC, 1), [v], acks=-1)
        sent[(TOPIC, 1)].append(v)
    sim.advance(3000)  # LeaderAndIsr resends do not bring the offline replicas back
    assert node.partitions.keys() == {(TOPIC, 0), (TOPIC, 2)} and not halted

    # A restart with the dir usable again: the replicas recover, catch up and rejoin.
    sim.restart(0)
    assert not sim.node(0).started_clean  # the failed dir has no clean-shutdown marker
    sim.run_until(lambda: full_isr(sim), 20_000, 10, "every replica back in its ISR")
    for tp in TPS:
        for i in sim.ids:
            got = list(sim.values(i, tp).values())
            assert [v for v in got if v in sent[tp]] == sent[tp], (i, tp, got)


def test_the_last_dir_failing_calls_on_log_dir_failure(sim: SimCluster) -> None:
    sim.create_topic(TOPIC, len(ASSIGNMENT), 3, {"min.insync.replicas": 2}, assignment=ASSIGNMENT)
    fill(sim, 1)
    node = sim.node(0)
    halted: list[BaseException] = []
    node.on_log_dir_failure = halted.append
    first, second = sim.node_dirs(0)
    _fail_writes(sim, 0, second)
    box = sim.produce((TOPIC, 1), [b"a"], acks=-1)
    sim.run_until(lambda: bool(box), 5000, 1, "the produce answer")
    assert not halted and node.offline_dirs.keys() == {second}
    _fail_writes(sim, 0, first)
    box = sim.produce((TOPIC, 0), [b"b"], acks=-1)
    sim.run_until(lambda: bool(halted), 5000, 1, "the halt callback")
    assert len(halted) == 1 and halted[0].errno == errno.ENOSPC  # type: ignore[attr-defined]
    assert node.log_dir_failed and node.offline_dirs.keys() == {first, second}


def test_a_dir_unusable_at_start_starts_offline(sim: SimCluster) -> None:
    sim.create_topic(TOPIC, len(ASSIGNMENT), 3, {"min.insync.replicas": 2}, assignment=ASSIGNMENT)
    sent = fill(sim)
    sim.run_until(lambda: full_isr(sim), 10_000, 10, "a full ISR")
    healthy, broken = sim.node_dirs(0)
    sim.shutdown(0)
    os.rename(broken, broken + ".away")
    Path(broken).write_bytes(b"not a directory")
    n = sim.start_node(0)
    assert n.offline_dirs.keys() == {broken} and not n.started_clean
    # The partitions the node has no log for may be in the unusable dir: offline, never created
    # in the healthy one.
    sim.run_until(
        lambda: (
            n.offline_partitions == {(TOPIC, 1), (TOPIC, 3)}
            and all(0 not in sim.state((TOPIC, p)).isr for p in (1, 3))  # type: ignore[union-attr]
            and sim.leader_of((TOPIC, 1)) not in (-1, 0)
        ),
        10_000,
        10,
        "t-1 and t-3 offline on node 0",
    )
    assert sorted(f for f in os.listdir(healthy) if f.startswith("t-")) == ["t-0", "t-2"]
    sim.run_until(
        lambda: all(0 in sim.state((TOPIC, p)).isr for p in (0, 2)),  # type: ignore[union-attr]
        10_000,
        10,
        "node 0 back in the ISRs of its healthy dir",
    )
    sim.shutdown(0)
    os.unlink(broken)
    os.rename(broken + ".away", broken)
    sim.start_node(0)
    sim.run_until(lambda: full_isr(sim), 20_000, 10, "every replica back in its ISR")
    for tp in TPS:
        assert list(sim.values(0, tp).values())[: len(sent[tp])] == sent[tp]


def test_log_dirs_rewrite_keeps_unopened_partitions_and_a_corrupt_file_counts_as_empty(tmp_path: Path) -> None:
    """The high-watermark checkpoint of a dir is rewritten from its open logs plus the entries
    read at open for partitions not opened since; a corrupt file reads as empty."""
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    os.makedirs(os.path.join(a, "t-0"))
    os.makedirs(os.path.join(a, "t-1"))
    OffsetCheckpointFile(os.path.join(a, HW_CHECKPOINT_FILE)).write({("t", 0): 3, ("t", 1): 7})
    os.makedirs(b)
    with open(os.path.join(b, HW_CHECKPOINT_FILE), "w") as f:
        f.write("0\n5\nnot a checkpoint\n")
    dirs = LogDirs(0, (a, b))
    dirs.open()
    try:
        assert dirs.unopened == {("t", 0), ("t", 1)} and not dirs.offline
        assert dirs.checkpointed_high_watermark(("t", 1)) == 7
        assert dirs.place(("u", 0)) == b  # b holds no partition yet
        lg = Log.open(
            os.path.join(a, "t-0"), clock=ManualClock(0), replicated=True, owner=dirs.owner(a), high_watermark=3
        )
        try:
            lg.append(encode_batch([b"x"] * 5, timestamps=0))
            lg.update_high_watermark(5)
            dirs.opened(("t", 0))
            assert dirs.write_checkpoints(dirs.checkpoint_values([(("t", 0), lg)])) == {}
        finally:
            lg.close()
        assert OffsetCheckpointFile(os.path.join(a, HW_CHECKPOINT_FILE)).read() == {("t", 0): 5, ("t", 1): 7}
        with open(os.path.join(b, HW_CHECKPOINT_FILE)) as f:
            assert f.read() == "0\n5\nnot a checkpoint\n"  # not rewritten: no open log there
        assert dirs.fail(a, "disk gone") == [("t", 0), ("t", 1)] and dirs.fail(a, "again") is None
        assert dirs.place(("v", 0)) == b and not dirs.all_failed
    finally:
        dirs.close()


def test_cleaner_checkpoints_are_read_at_open_and_rewritten_only_when_they_change(tmp_path: Path) -> None:
    """Each dir's cleaner-offset-checkpoint: read at open (an entry for a partition not in that
    dir is dropped; a corrupt file reads as empty), written with the high watermarks from each
    open log's ``cleaner_offset`` plus the entries of partitions not opened since, and only
    when that changed."""
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    for d in ("t-0", "t-1"):
        os.makedirs(os.path.join(a, d))
    os.makedirs(os.path.join(b, "u-0"))
    cleaner_a = OffsetCheckpointFile(os.path.join(a, CLEANER_OFFSET_FILE))
    cleaner_a.write({("t", 0): 4, ("t", 1): 9, ("gone", 0): 2})
    with open(os.path.join(b, CLEANER_OFFSET_FILE), "w") as f:
        f.write("0\n1\nnot a checkpoint\n")
    dirs = LogDirs(0, (a, b))
    dirs.open()
    try:
        assert dirs.checkpointed_cleaner_offset(("t", 0)) == 4
        assert dirs.checkpointed_cleaner_offset(("t", 1)) == 9
        assert dirs.checkpointed_cleaner_offset(("gone", 0)) is None  # not in the dir
        assert dirs.checkpointed_cleaner_offset(("u", 0)) is None  # its file is corrupt
        lg = Log.open(os.path.join(a, "t-0"), clock=ManualClock(0), replicated=True, owner=dirs.owner(a))
        try:
            dirs.opened(("t", 0))
            lg.cleaner_offset = dirs.checkpointed_cleaner_offset(("t", 0))
            values = dirs.checkpoint_values([(("t", 0), lg)])
            assert values[a][4] == {("t", 0): 4, ("t", 1): 9}  # differs from the file: the stray entry goes
            assert dirs.write_checkpoints(values) == {}
            assert cleaner_a.read() == {("t", 0): 4, ("t", 1): 9}
            assert dirs.checkpoint_values([(("t", 0), lg)])[a][4] is None  # unchanged: not rewritten
            lg.cleaner_offset = 6
            assert dirs.write_checkpoints(dirs.checkpoint_values([(("t", 0), lg)])) == {}
            assert cleaner_a.read() == {("t", 0): 6, ("t", 1): 9}
            lg.cleaner_offset = None  # truncated fully: cleaned from its start again
            assert dirs.write_checkpoints(dirs.checkpoint_values([(("t", 0), lg)])) == {}
            assert cleaner_a.read() == {("t", 1): 9}
        finally:
            lg.close()
        with open(os.path.join(b, CLEANER_OFFSET_FILE)) as f:
            assert f.read() == "0\n1\nnot a checkpoint\n"  # no open log there
        lg = Log.open(os.path.join(b, "u-0"), clock=ManualClock(0), replicated=True, owner=dirs.owner(b))
        try:
            dirs.opened(("u", 0))
            assert dirs.write_checkpoints(dirs.checkpoint_values([(("u", 0), lg)])) == {}
        finally:
            lg.close()
        assert OffsetCheckpointFile(os.path.join(b, CLEANER_OFFSET_FILE)).read() == {}  # the corrupt one replaced
    finally:
        dirs.close()
