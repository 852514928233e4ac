"""The log start across replicas (``docs/replication.md`` §2.5 and §3): followers take the
leader's log start from every fetch response, the leader's low watermark (LW) follows its live
followers, and DeleteRecords completes when the LW reaches its offset — scripted on the
simulated cluster, each guarded rule also run with its mutation switched on."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from seglog.cluster import mutations as mut
from seglog.cluster.client import format_describe
from seglog.cluster.local import LocalCluster
from seglog.cluster.messages import NONE, DeleteRecordsRequest, DeleteRecordsResponse, FetchPartitionResponse
from seglog.cluster.metadata import PartitionInfo
from seglog.cluster.partition import Partition
from seglog.errors import NotLeaderOrFollowerError, OffsetOutOfRangeError, RequestTimedOutError
from tests.replication.clients import consume_all
from tests.replication.sim import SimCluster, batch_fingerprints, log_values

TP = ("t", 0)


def _setup(tmp_path: Path, mutants: tuple[str, ...] = ()) -> tuple[SimCluster, int, int, int]:
    """Three nodes, ``t-0`` on all of them led by the first non-controller node; 100 records
    in batches of 10, replicated everywhere."""
    c = SimCluster(str(tmp_path / "c"), nodes=3, seed=5, mutants=mutants)
    ctrl = c.wait_controller()
    others = [i for i in c.ids if i != ctrl]
    leader, follower = others[0], others[1]
    c.create_topic("t", 1, 3, {"min.insync.replicas": 2}, assignment=((leader, follower, ctrl),))
    for k in range(10):
        c.produce_ok(TP, [b"v%03d" % (10 * k + j) for j in range(10)])
    c.run_until(lambda: all((q := c.replica(i, TP)) is not None and q.high_watermark == 100 for i in c.ids), 10_000)
    return c, leader, follower, ctrl


def _delete(c: SimCluster, dst: int, offset: int, timeout_ms: int) -> DeleteRecordsResponse:
    resp = c.call(dst, DeleteRecordsRequest(TP[0], TP[1], offset, timeout_ms), timeout_ms + 1000)
    assert isinstance(resp, DeleteRecordsResponse)
    return resp


def _start(c: SimCluster, i: int) -> int:
    q = c.replica(i, TP)
    assert q is not None
    return q.log.log_start_offset


def test_delete_records_moves_every_log_start_and_answers_with_the_low_watermark(tmp_path: Path) -> None:
    c, leader, follower, ctrl = _setup(tmp_path)
    try:
        resp = _delete(c, leader, 55, 5000)  # inside the batch 50..59
        assert resp.error == NONE, resp
        assert resp.low_watermark >= 55
        assert [_start(c, i) for i in c.ids] == [55, 55, 55]
        lp = c.leader_replica(TP)
        assert lp is not None and lp.low_watermark == 55
        for i in c.ids:
            assert min(log_values(c.replica(i, TP))) == 55  # type: ignore[arg-type]
        # The metadata answer of the leader carries (log start, HW, LW).
        meta = c.node(leader).metadata_response()
        assert meta.watermarks == (("t", 0, 55, 100, 55),)
        assert c.node(follower).metadata_response().watermarks == ()
        # Only below the high watermark, and only on the leader.
        assert _delete(c, leader, 101, 1000).error == OffsetOutOfRangeError.code
        assert _delete(c, follower, 60, 1000).error == NotLeaderOrFollowerError.code
        assert _start(c, leader) == 55
        # -1 is the high watermark.
        resp = _delete(c, leader, -1, 5000)
        assert resp.error == NONE and resp.low_watermark == 100
    finally:
        c.close()


def test_a_paused_follower_holds_the_low_watermark_until_it_fetches_again(tmp_path: Path) -> None:
    c, leader, follower, ctrl = _setup(tmp_path)
    try:
        c.pause(follower)
        box = c.request(leader, DeleteRecordsRequest(TP[0], TP[1], 70, 1000), 3000)
        c.run_until(lambda: _start(c, leader) == 70, 100, 1, "the leader's log start")
        assert not box and _start(c, ctrl) == 0  # at once on the leader, before any follower knows
        c.run_until(lambda: bool(box), 3000, 5, "the DeleteRecords answer")
        resp, err = box[0]
        assert err is None and resp.error == RequestTimedOutError.code, resp
        assert resp.low_watermark == 0  # the paused follower still starts at 0
        assert f"replicas [{follower}]" in resp.message and "reached 0" in resp.message
        assert _start(c, ctrl) == 70
        c.resume(follower)
        c.run_until(lambda: _start(c, follower) == 70, 3000, 5, "the follower's log start")
        resp2 = _delete(c, leader, 70, 3000)
        assert resp2.error == NONE and resp2.low_watermark == 70
    finally:
        c.close()


def _down_follower_first_fetch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mutants: tuple[str, ...]) -> int:
    """A follower is down while records before 70 are deleted; the delete completes once its
    session expires (a node that is down does not hold the LW; with the mutation the other
    follower holds it and the delete times out). Returns the follower's log start right after
    the first fetch response it applies when back."""
    c, leader, follower, ctrl = _setup(tmp_path, mutants)
    try:
        c.crash(follower)
        resp = _delete(c, leader, 70, 10_000)
        if not mutants:
            assert resp.error == NONE and resp.low_watermark >= 70, resp
        seen: list[int] = []
        applied = Partition.on_fetch_response

        def observe(self: Partition, sent: Any, r: FetchPartitionResponse) -> bool:
            out = applied(self, sent, r)
            if self.host.node_id == follower and r.error == NONE and not seen:
                seen.append(self.log.log_start_offset)
            return out

        monkeypatch.setattr(Partition, "on_fetch_response", observe)
        c.start_node(follower)
        c.run_until(lambda: bool(seen), 10_000, 5, "the follower's first fetch back")
        return seen[0]
    finally:
        c.close()


def test_a_follower_down_during_the_delete_drops_the_records_on_its_first_fetch_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _down_follower_first_fetch(tmp_path, monkeypatch, ()) == 70


def test_the_first_fetch_check_fails_when_followers_ignore_the_leaders_log_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _down_follower_first_fetch(tmp_path, monkeypatch, (mut.FOLLOWER_IGNORES_LOG_START,)) == 0


def test_a_follower_behind_the_log_start_restarts_at_the_batch_holding_it(tmp_path: Path) -> None:
    """The follower's log ends (100) below the leader's log start (155, inside the batch
    150..159): it starts an empty log there, gets the whole batch back, restarts at 150 and
    appends it, then takes the log start 155 again."""
    c, leader, follower, ctrl = _setup(tmp_path)
    try:
        c.crash(follower)
        for k in range(10, 20):
            c.produce_ok(TP, [b"v%03d" % (10 * k + j) for j in range(10)])
        assert _delete(c, leader, 155, 10_000).error == NONE
        c.start_node(follower)
        lp = c.leader_replica(TP)
        assert lp is not None
        c.run_until(
            lambda: (q := c.replica(follower, TP)) is not None and q.log_end_offset == 200 and q.high_watermark == 200,
            10_000,
            5,
            "the follower caught up",
        )
        q = c.replica(follower, TP)
        assert q is not None
        assert q.log.log_start_offset == 155
        assert batch_fingerprints(q) == batch_fingerprints(lp)
        assert min(log_values(q)) == 155
        assert c.node(follower).stats.get("fetch_apply_errors", 0) == 0
    finally:
        c.close()


def test_delete_records_through_a_local_clusters_client_api(tmp_path: Path) -> None:
    """Over loopback TCP: DeleteRecords, the watermarks, a consumer reset to the log start, the
    errors, and a paused follower making it time out with the LW, then complete."""
    with LocalCluster(nodes=3, dir=tmp_path / "cluster", replica_config={"session.timeout.ms": 6000}) as cluster:
        cluster.create_topic("t", partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
        producer = cluster.producer(acks="all")
        for k in range(100):
            producer.send("t", b"v%03d" % k, partition=0)
        producer.flush(30)
        producer.close()
        deadline = time.monotonic() + 20
        while sorted(cluster.high_watermarks("t").values()) != [100] * 3:
            assert time.monotonic() < deadline, f"HW 100 everywhere not reached: {cluster.high_watermarks('t')}"
            time.sleep(0.05)
        assert cluster.watermarks("t") == (0, 100, 0)
        assert cluster.delete_records("t", 0, 40, timeout_ms=10_000) >= 40
        assert cluster.watermarks("t") == (40, 100, 40)
        got = consume_all(cluster, "t", 1, 60)
        assert [r.offset for r in got] == list(range(40, 100))
        with pytest.raises(OffsetOutOfRangeError, match="high watermark"):
            cluster.delete_records("t", 0, 101, timeout_ms=2000)
        leader = cluster.leader("t")
        follower = next(i for i in cluster.ids if i != leader)
        cluster.pause(follower, 3)
        with pytest.raises(RequestTimedOutError, match="reached 40") as info:
            cluster.delete_records("t", 0, 70, timeout_ms=800)
        assert info.value.offset == 40
        assert cluster.watermarks("t") == (70, 100, 40)
        assert cluster.delete_records("t", 0, 70, timeout_ms=15_000) == 70
        state = cluster.state("t")
        assert state is not None
        text = format_describe([PartitionInfo("t", 0, (0, 1, 2), state)], {("t", 0): cluster.watermarks("t")})
        assert "LogStart: 70\tHighWatermark: 100\tLowWatermark: 70" in text


def test_a_waiting_delete_fails_with_not_leader_when_leadership_moves(tmp_path: Path) -> None:
    """A DeleteRecords waiting for a paused follower is answered NOT_LEADER_OR_FOLLOWER as soon
    as its leader hands leadership over (here: a preferred-leader election), not left to time
    out. The caller retries on the new leader, whose log start is its own (here still 0: it had
    not fetched since the delete), as in Kafka."""
    c = SimCluster(str(tmp_path / "c"), nodes=4, seed=7)
    try:
        ctrl = c.wait_controller()
        a, b, d = [i for i in c.ids if i != ctrl]
        c.create_topic("t", 1, 3, {"min.insync.replicas": 2}, assignment=((a, b, d),))
        for k in range(5):
            c.produce_ok(TP, [b"v%03d" % (10 * k + j) for j in range(10)])
        c.run_until(lambda: all((q := c.replica(i, TP)) is not None and q.high_watermark == 50 for i in (a, b, d)))
        # Leadership away from the preferred replica a: it goes down, b leads, a comes back.
        c.crash(a)
        c.run_until(lambda: (st := c.state(TP)) is not None and st.leader == b, 30_000, 10, "b leading")
        c.start_node(a)
        c.run_until(lambda: (st := c.state(TP)) is not None and a in st.isr, 30_000, 10, "a back in the ISR")
        c.pause(d)  # holds the low watermark at 0
        box = c.request(b, DeleteRecordsRequest(TP[0], TP[1], 30, 60_000), 61_000)
        c.run_until(lambda: _start(c, b) == 30, 100, 1, "the leader's log start")
        assert not box
        c.elect_preferred(TP)
        c.run_until(lambda: bool(box), 5000, 5, "the DeleteRecords answer")
        resp, err = box[0]
        assert err is None and resp.error == NotLeaderOrFollowerError.code, resp
        st = c.state(TP)
        assert st is not None and st.leader == a
        assert _start(c, b) == 30 and _start(c, a) == 0
        c.resume(d)
        # The new leader's high watermark catches up once its followers fetch; then the retry.
        c.run_until(lambda: (q := c.replica(a, TP)) is not None and q.high_watermark == 50, 10_000, 5, "a's HW")
        resp2 = _delete(c, a, 30, 10_000)
        assert resp2.error == NONE and resp2.low_watermark >= 30, resp2
        c.run_until(lambda: all(_start(c, i) >= 30 for i in (a, b, d)), 10_000, 5, "every log start at 30")
    finally:
        c.close()
