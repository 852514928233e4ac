"""The deterministic scenarios S1-S10 of ``docs/replication.md`` §9.6, each scripted on the
simulated cluster (real logs on disk, in-memory network and coordinator, manual clock).

Where a scenario guards against a known bug, the same script is also run with that bug switched
back on (a mutation) and must then fail: the scenario can tell right from wrong.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from seglog.cluster import mutations as mut
from seglog.cluster.metadata import ReplicaConfig
from seglog.cluster.partition import Role
from seglog.errors import (
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    error_for_code,
    write_outcome,
)
from tests.replication.sim import FAST, SimCluster, batch_fingerprints, epochs_with_data

TP = ("t", 0)


def _cluster(
    tmp_path: Path, *, nodes: int = 4, mutants: tuple[str, ...] = (), config: ReplicaConfig = FAST, **kw: Any
) -> SimCluster:
    return SimCluster(str(tmp_path / "c"), nodes=nodes, seed=11, mutants=mutants, config=config, **kw)


def _outcome(box: list[Any]) -> BaseException | None:
    resp, err = box[0]
    if err is not None:
        return err
    return None if resp.error == 0 else error_for_code(resp.error)(resp.message)


def _converged(c: SimCluster, tp: tuple[str, int], replicas: list[int]) -> bool:
    lp = c.leader_replica(tp)
    if lp is None:
        return False
    for r in replicas:
        q = c.replica(r, tp)
        if q is None or q.log_end_offset != lp.log_end_offset or q.high_watermark != q.log_end_offset:
            return False
    return True


def _assert_identical(c: SimCluster, tp: tuple[str, int], replicas: list[int]) -> None:
    c.run_until(lambda: _converged(c, tp, replicas), 30_000, 20, "convergence")
    reps = [c.replica(r, tp) for r in replicas]
    first = reps[0]
    assert first is not None
    for q in reps[1:]:
        assert q is not None
        assert batch_fingerprints(q) == batch_fingerprints(first), f"node {q.host.node_id} diverges"
        assert epochs_with_data(q) == epochs_with_data(first)


# -- S1: KIP-101 scenario 1 ------------------------------------------------------------------------


def s1(c: SimCluster) -> dict[int, bytes]:
    """Leader B, follower A. A has m2 but its HW does not cover it yet; A restarts cleanly (so
    it stays in the ISR), B dies before A fetches again. A is elected: does it hold m2?"""
    ctrl = c.wait_controller()
    a, b = [i for i in c.ids if i != ctrl][:2]
    c.create_topic("t", 1, 2, {"min.insync.replicas": 1}, assignment=((b, a),))
    c.produce_ok(TP, [b"m1"])
    c.run_until(lambda: c.replica(a, TP).high_watermark == 1, 5000)  # type: ignore[union-attr]
    c.produce_ok(TP, [b"m2"])  # acked: B's HW passed it when A fetched at offset 2
    pa = c.replica(a, TP)
    assert pa is not None and pa.log_end_offset == 2 and pa.high_watermark == 1
    c.net.cut(a, b)  # A's next fetch (which would carry HW 2) never arrives
    c.shutdown(a)
    c.start_node(a)
    c.run_until(lambda: (p := c.replica(a, TP)) is not None and p.role is Role.FOLLOWER, 5000)
    c.crash(b)
    c.run_until(lambda: c.leader_replica(TP) is not None, 10_000, 10, "A elected")
    assert c.leader_of(TP) == a
    return c.values(a, TP)


def test_s1_kip101_follower_keeps_m2_through_restart_and_election(tmp_path: Path) -> None:
    c = _cluster(tmp_path)
    try:
        assert s1(c) == {0: b"m1", 1: b"m2"}
        assert c.node(c.leader_of(TP)).stats.get("truncations_below_hw", 0) == 0
    finally:
        c.close()


def test_s1_fails_when_followers_truncate_to_their_hw_on_restart(tmp_path: Path) -> None:
    c = _cluster(tmp_path, mutants=(mut.TRUNCATE_TO_HW_ON_RESTART,))
    try:
        assert s1(c) == {0: b"m1"}  # m2, acknowledged, is gone
    finally:
        c.close()


# -- S2: KIP-101 scenario 2 ------------------------------------------------------------------------


def test_s2_logs_do_not_diverge_after_both_replicas_lose_power(tmp_path: Path) -> None:
    c = _cluster(tmp_path)
    try:
        ctrl = c.wait_controller()
        a, b = [i for i in c.ids if i != ctrl][:2]
        c.create_topic("t", 1, 2, {"min.insync.replicas": 1, "flush.ms": 2**62}, assignment=((b, a),))
        c.produce_ok(TP, [b"m1"])
        c.run_until(lambda: c.replica(a, TP).log_end_offset == 1, 5000)  # type: ignore[union-attr]
        c.replica(b, TP).log.flush()  # type: ignore[union-attr]
        c.produce_ok(TP, [b"m2"])
        c.run_until(lambda: c.replica(a, TP).log_end_offset == 2, 5000)  # type: ignore[union-attr]
        c.replica(a, TP).log.flush()  # type: ignore[union-attr]
        # Power fails on both: A keeps m2 (flushed), B, the last ISR member, loses it.
        c.crash(a, power_loss=True, keep="durable")
        c.run_until(lambda: c.state(TP).isr == (b,), 10_000)  # type: ignore[union-attr]
        c.crash(b, power_loss=True, keep="durable")
        c.start_node(b)
        c.run_until(lambda: c.leader_replica(TP) is not None and c.leader_of(TP) == b, 20_000)
        c.produce_ok(TP, [b"m3"])
        assert c.values(b, TP) == {0: b"m1", 1: b"m3"}
        c.start_node(a)
        _assert_identical(c, TP, [a, b])
        assert c.values(a, TP) == {0: b"m1", 1: b"m3"}  # m2 may be lost; divergence never
    finally:
        c.close()


# -- S3: KIP-279, with an epoch the new leader learned by replication -------------------------------


def s3(c: SimCluster) -> tuple[int, int, int]:
    """A ends with epochs [0, 2] (its epoch-2 record never replicated), C leads epoch 3 and
    learned epoch 1 from B. A's first answer names epoch 1, which A does not have: it must
    truncate to its own end of epoch 0 and ask again."""
    ctrl = c.wait_controller()
    a, b, cc = [i for i in c.ids if i != ctrl]
    c.create_topic(
        "t", 1, 3, {"min.insync.replicas": 1, "unclean.leader.election.enable": True}, assignment=((a, b, cc),)
    )
    for k in range(5):
        c.produce_ok(TP, [b"m%d" % k])
    c.run_until(lambda: _converged(c, TP, [a, b, cc]), 5000)
    c.shutdown(a, deregister=True)  # B leads epoch 1
    c.run_until(lambda: c.leader_of(TP) == b and c.leader_replica(TP) is not None, 10_000)
    c.produce_ok(TP, [b"b1"])
    c.run_until(lambda: c.replica(cc, TP).log_end_offset == 6, 5000)  # type: ignore[union-attr]
    c.crash(b)
    c.crash(cc)
    c.start_node(a)  # alone: elected uncleanly, epoch 2
    c.run_until(lambda: c.leader_of(TP) == a and c.leader_replica(TP) is not None, 20_000)
    c.produce_ok(TP, [b"a2"], acks=1)
    c.crash(a)
    c.start_node(cc)  # alone: elected uncleanly, epoch 3, holds epoch 1 by replication
    c.run_until(lambda: c.leader_of(TP) == cc and c.leader_replica(TP) is not None, 20_000)
    c.produce_ok(TP, [b"c3"], acks=1)
    lp = c.leader_replica(TP)
    assert lp is not None and [e for e, _ in lp.log.epoch_cache.entries()] == [0, 1, lp.leader_epoch]
    c.start_node(a)
    c.start_node(b)
    c.run_until(lambda: _converged(c, TP, [a, cc]), 20_000, 20, "A caught up")
    return a, b, cc


def test_s3_follower_iterates_epoch_truncation_until_the_logs_match(tmp_path: Path) -> None:
    c = _cluster(tmp_path)
    try:
        a, b, cc = s3(c)
        _assert_identical(c, TP, [a, b, cc])
        assert c.values(a, TP)[5] == b"b1"
        assert c.node(a).stats["truncations"] >= 1
    finally:
        c.close()


def test_s3_diverges_with_one_shot_truncation(tmp_path: Path) -> None:
    c = _cluster(tmp_path, mutants=(mut.NO_EPOCH_ITERATION,))
    try:
        a, b, cc = s3(c)
        assert c.values(a, TP)[5] == b"a2" and c.values(cc, TP)[5] == b"b1"
    finally:
        c.close()


def s3_trap(c: SimCluster) -> tuple[int, int, int]:
    """The Liftbridge-style trap: A's unreplicated record sits in epoch 0, the last epoch A
    has; C leads epoch 2 and learned epoch 1 (which starts at that offset) from B by
    replication. C must answer "epoch 0 ends at 5" — not 6."""
    ctrl = c.wait_controller()
    a, b, cc = [i for i in c.ids if i != ctrl]
    c.create_topic("t", 1, 3, {"min.insync.replicas": 1}, assignment=((a, b, cc),))
    for k in range(5):
        c.produce_ok(TP, [b"m%d" % k])
    c.run_until(lambda: _converged(c, TP, [a, b, cc]), 5000)
    c.net.cut(a, b)
    c.net.cut(a, cc)
    c.produce_ok(TP, [b"a0"], acks=1)
    c.crash(a)
    c.heal()
    c.run_until(lambda: c.leader_of(TP) == b and c.leader_replica(TP) is not None, 10_000)
    c.produce_ok(TP, [b"b1"])
    c.run_until(lambda: c.replica(cc, TP).log_end_offset == 6, 5000)  # type: ignore[union-attr]
    c.crash(b)
    c.run_until(lambda: c.leader_of(TP) == cc and c.leader_replica(TP) is not None, 10_000)
    c.start_node(a)
    c.start_node(b)
    c.run_until(lambda: _converged(c, TP, [a, cc]), 20_000, 20, "A caught up")
    return a, b, cc


def test_s3_liftbridge_trap_truncates_the_unreplicated_record(tmp_path: Path) -> None:
    c = _cluster(tmp_path)
    try:
        a, b, cc = s3_trap(c)
        _assert_identical(c, TP, [a, b, cc])
        assert c.values(a, TP)[5] == b"b1"
    finally:
        c.close()


def test_s3_liftbridge_trap_diverges_with_the_inclusive_exclusive_mix(tmp_path: Path) -> None:
    c = _cluster(tmp_path, mutants=(mut.EPOCH_START_OFF_BY_ONE,))
    try:
        a, b, cc = s3_trap(c)
        assert c.values(a, TP)[5] == b"a0" and c.values(cc, TP)[5] == b"b1"
    finally:
        c.close()


# -- S4: KAFKA-7128 ---------------------------------------------------------------------------------


def s4(c: SimCluster) -> tuple[int, int, int]:
    """B becomes leader with a HW that lags its epoch start; C, out of the ISR, reaches the
    stale HW but not the epoch start. It must not join; when B dies the committed records must
    survive (the partition waits offline for B)."""
    ctrl = c.wait_controller()
    a, b, cc = [i for i in c.ids if i != ctrl]
    c.create_topic("t", 1, 3, {"min.insync.replicas": 2}, assignment=((a, b, cc),))
    c.pause(cc)
    c.run_until(lambda: c.state(TP).isr == (a, b), 20_000, 10, "C out of the ISR")  # type: ignore[union-attr]
    c.produce_ok(TP, [b"m%d" % k for k in range(10)])  # one batch: B's HW is still 0
    pb = c.replica(b, TP)
    assert pb is not None and pb.log_end_offset == 10 and pb.high_watermark == 0
    c.crash(a)
    c.run_until(lambda: c.leader_of(TP) == b and c.leader_replica(TP) is not None, 10_000)
    assert pb.high_watermark == 0 and pb.leader_epoch_start_offset == 10
    c.net.rule(b, cc).cut = True  # C's fetches arrive, no answer reaches it: its LEO stays 0
    c.resume(cc)
    c.run_until(lambda: pb.remotes[cc].log_end_offset == 0 and pb.remotes[cc].broker_epoch > 0, 10_000)
    c.advance(3000)
    c.crash(b)
    c.advance(3000)
    return a, b, cc


def test_s4_kafka7128_no_isr_join_below_the_epoch_start(tmp_path: Path) -> None:
    c = _cluster(tmp_path)
    try:
        a, b, cc = s4(c)
        assert c.leader_of(TP) == -1  # offline: C may not lead
        c.heal()
        c.start_node(b)
        c.start_node(a)
        c.run_until(lambda: c.leader_of(TP) in (a, b) and c.leader_replica(TP) is not None, 20_000)
        assert c.values(c.leader_of(TP), TP) == {k: b"m%d" % k for k in range(10)}
    finally:
        c.close()


def test_s4_loses_committed_records_when_joining_at_the_hw_only(tmp_path: Path) -> None:
    c = _cluster(tmp_path, mutants=(mut.ISR_JOIN_AT_HW_ONLY,))
    try:
        a, b, cc = s4(c)
        assert c.leader_of(TP) == cc
        c.run_until(lambda: c.leader_replica(TP) is not None, 5000)
        assert c.values(cc, TP) == {}
    finally:
        c.close()


# -- S5: Jepsen 2013 -------------------------------------------------------------------------------


def test_s5_isolated_leader_refuses_acks_all_and_nothing_acked_is_lost(tmp_path: Path) -> None:
    c = _cluster(tmp_path)
    try:
        ctrl = c.wait_controller()
        a, b, cc = [i for i in c.ids if i != ctrl]
        c.create_topic("t", 1, 3, {"min.insync.replicas": 2}, assignment=((a, b, cc),))
        acked = {}
        for k in range(5):
            acked[c.produce_ok(TP, [b"m%d" % k]).base_offset] = b"m%d" % k
        # The leader loses its followers but keeps the controller and the coordinator.
        c.net.cut(a, b)
        c.net.cut(a, cc)
        lp = c.leader_replica(TP)
        assert lp is not None
        pending = c.produce(TP, [b"pending"], timeout_ms=20_000)
        c.run_until(lambda: lp.isr_state.isr == (a,), 20_000, 10, "ISR shrunk to the leader")
        c.run_until(lambda: bool(pending), 20_000)
        assert _outcome(pending).definitely_not_written is False  # type: ignore[union-attr]
        box = c.produce(TP, [b"late"])
        c.run_until(lambda: bool(box), 5000)
        assert isinstance(_outcome(box), NotEnoughReplicasError)
        assert lp.log_end_offset == 6
        # Now the leader is cut off completely.
        c.net.cut(a, ctrl)
        c.net.cut_coordinator(a)
        c.run_until(lambda: c.leader_of(TP) != a, 20_000, 10, "the old leader replaced")
        st = c.state(TP)
        assert st is not None
        # Either offline, or an eligible leader replica (it holds everything committed).
        assert st.leader in (-1, b, cc)
        c.heal()
        c.run_until(lambda: c.leader_replica(TP) is not None and _converged(c, TP, [a, b, cc]), 30_000)
        final = c.values(c.leader_of(TP), TP)
        for off, v in acked.items():
            assert final[off] == v
        assert b"late" not in final.values()
    finally:
        c.close()


# -- S6: zombie leader ------------------------------------------------------------------------------


@pytest.mark.parametrize("block_fetches", [False, True])
def test_s6_zombie_leader_acks_only_what_survives(tmp_path: Path, block_fetches: bool) -> None:
    c = _cluster(tmp_path)
    try:
        ctrl = c.wait_controller()
        a, b, cc = [i for i in c.ids if i != ctrl]
        c.create_topic("t", 1, 3, {"min.insync.replicas": 2}, assignment=((a, b, cc),))
        for k in range(3):
            c.produce_ok(TP, [b"m%d" % k])
        c.pause(a)
        boxes = [c.produce(TP, [b"z%d" % k], dst=a, timeout_ms=8000) for k in range(3)]
        c.run_until(lambda: c.leader_of(TP) not in (a, -1) and c.leader_replica(TP) is not None, 20_000)
        new = c.leader_of(TP)
        c.produce_ok(TP, [b"n0"])
        if block_fetches:
            c.net.rule(b, a).cut = True
            c.net.rule(cc, a).cut = True
        c.resume(a)  # the zombie now handles the queued produces as the leader it thinks it is
        c.run_until(lambda: all(boxes), 20_000)
        c.heal()
        c.run_until(lambda: _converged(c, TP, [a, b, cc]), 30_000)
        final = c.values(new, TP)
        for box in boxes:
            out = _outcome(box)
            resp = box[0][0]
            if out is None:
                assert not block_fetches
                assert final.get(resp.base_offset) is not None
            else:
                assert (
                    isinstance(out, (NotLeaderOrFollowerError, RequestTimedOutError))
                    or write_outcome(out) == "not_written"
                ), out
        if block_fetches:
            # No follower could fetch from the zombie: none of its writes reached the new leader.
            assert not [v for v in final.values() if v.startswith(b"z")], final
        _assert_identical(c, TP, [a, b, cc])
        pa = c.replica(a, TP)
        assert pa is not None and pa.role is Role.FOLLOWER
    finally:
        c.close()


# -- S7: last replica standing ---------------------------------------------------------------------


def test_s7_last_replica_standing_loses_nothing_acknowledged(tmp_path: Path) -> None:
    """The rule chosen (KIP-966): members dropped while the ISR falls below min.insync.replicas
    stay electable (ELR), and a node back from an unclean shutdown leaves the ISR and ELR."""
    c = _cluster(tmp_path)
    try:
        ctrl = c.wait_controller()
        a, b, cc = [i for i in c.ids if i != ctrl]
        c.create_topic("t", 1, 3, {"min.insync.replicas": 2, "flush.ms": 2**62}, assignment=((a, b, cc),))
        acked = {c.produce_ok(TP, [b"m%d" % k]).base_offset: b"m%d" % k for k in range(10)}
        c.pause(b)
        c.pause(cc)
        c.run_until(lambda: c.state(TP).isr == (a,), 20_000, 10, "ISR = {leader}")  # type: ignore[union-attr]
        assert set(c.state(TP).elr) == {b, cc}  # type: ignore[union-attr]
        c.crash(a, power_loss=True, keep="durable")  # nothing was flushed: all ten are gone here
        c.start_node(a)
        c.resume(b)
        c.resume(cc)
        c.run_until(lambda: c.leader_replica(TP) is not None and c.leader_of(TP) in (b, cc), 30_000)
        c.run_until(lambda: _converged(c, TP, [a, b, cc]), 30_000)
        final = c.values(c.leader_of(TP), TP)
        assert all(final.get(o) == v for o, v in acked.items())
        _assert_identical(c, TP, [a, b, cc])
    finally:
        c.close()


# -- S8: fast restart with a lost tail -------------------------------------------------------------


def test_s8_follower_back_from_power_loss_neither_counts_nor_leads_until_caught_up(tmp_path: Path) -> None:
    c = _cluster(tmp_path, log_defaults={"flush.ms": 2**62})
    try:
        ctrl = c.wait_controller()
        a, b, cc = [i for i in c.ids if i != ctrl]
        c.create_topic("t", 1, 3, {"min.insync.replicas": 2}, assignment=((a, b, cc),))
        acked = {c.produce_ok(TP, [b"m%d" % k]).base_offset: b"m%d" % k for k in range(10)}
        c.crash(b, power_loss=True, keep="durable")
        epoch_before = c.state(TP).broker_epochs  # type: ignore[union-attr]
        c.net.cut(a, b)  # it cannot catch up for now
        c.start_node(b)  # well within the session timeout
        c.run_until(lambda: b not in c.state(TP).isr, 5000, 5, "B out of the ISR")  # type: ignore[union-attr]
        assert dict(epoch_before)[b] != c.node(b).broker_epoch
        lp = c.leader_replica(TP)
        assert lp is not None
        c.run_until(lambda: b not in lp.isr_state.isr, 5000)
        c.crash(a)
        c.run_until(lambda: c.leader_of(TP) == cc and c.leader_replica(TP) is not None, 20_000)
        final = c.values(cc, TP)
        assert all(final.get(o) == v for o, v in acked.items())
        c.heal()
        c.start_node(a)
        c.run_until(lambda: set(c.state(TP).isr) == {a, b, cc}, 30_000, 20, "B back in the ISR")  # type: ignore[union-attr]
        _assert_identical(c, TP, [a, b, cc])
    finally:
        c.close()


# -- S9 and S10: idempotent retries -----------------------------------------------------------------


def s9(c: SimCluster) -> tuple[int, int]:
    ctrl = c.wait_controller()
    a, b, cc = [i for i in c.ids if i != ctrl]
    c.create_topic("t", 1, 3, {"min.insync.replicas": 2}, assignment=((a, b, cc),))
    pid, epoch = c.init_producer_id()
    c.produce_ok(TP, [b"p0", b"p1"], pid=pid, epoch=epoch, seq=0)
    c.net.rule(a, 1000).cut = True  # the response to the next produce is lost
    box = c.produce(TP, [b"p2", b"p3", b"p4"], pid=pid, epoch=epoch, seq=2, timeout_ms=3000)
    lp = c.leader_replica(TP)
    assert lp is not None
    c.run_until(lambda: lp.high_watermark == 5, 5000, 1)
    c.crash(a)
    c.run_until(lambda: bool(box), 10_000)
    assert isinstance(_outcome(box), RequestTimedOutError)  # indeterminate: retry
    c.run_until(lambda: c.leader_replica(TP) is not None and c.leader_of(TP) != a, 20_000)
    retry = c.produce_ok(TP, [b"p2", b"p3", b"p4"], pid=pid, epoch=epoch, seq=2)
    first = retry.base_offset
    # Once more after every node restarted cleanly: the state now comes from .snapshot files.
    for i in list(c.running()):
        c.shutdown(i)
    for i in c.ids:
        c.start_node(i)
    c.run_until(lambda: c.leader_replica(TP) is not None, 30_000)
    again = c.produce_ok(TP, [b"p2", b"p3", b"p4"], pid=pid, epoch=epoch, seq=2)
    return first, again.base_offset


def test_s9_idempotent_retry_across_failover_gets_the_original_offsets(tmp_path: Path) -> None:
    c = _cluster(tmp_path)
    try:
        first, again = s9(c)
        assert (first, again) == (2, 2)
        leader = c.leader_of(TP)
        assert list(c.values(leader, TP).values()) == [b"p0", b"p1", b"p2", b"p3", b"p4"]
        assert sum(c.node(i).stats.get("producer_snapshots_loaded", 0) for i in c.running()) >= 1
    finally:
        c.close()


def test_s9_duplicates_without_deduplication(tmp_path: Path) -> None:
    c = _cluster(tmp_path, mutants=(mut.DEDUPE_OFF,))
    try:
        first, again = s9(c)
        assert first != 2 and again not in (2, first)
    finally:
        c.close()


def s10(c: SimCluster) -> tuple[list[Any], list[Any], int]:
    ctrl = c.wait_controller()
    a, b, cc = [i for i in c.ids if i != ctrl]
    c.create_topic("t", 1, 3, {"min.insync.replicas": 2}, assignment=((a, b, cc),))
    pid, epoch = c.init_producer_id()
    c.produce_ok(TP, [b"q0"], pid=pid, epoch=epoch, seq=0)
    # The followers stop fetching for a moment (well under the lag time): the original waits.
    c.net.rule(b, a).cut = True
    c.net.rule(cc, a).cut = True
    original = c.produce(TP, [b"q1", b"q2"], pid=pid, epoch=epoch, seq=1, timeout_ms=10_000)
    c.advance(200)
    retry = c.produce(TP, [b"q1", b"q2"], pid=pid, epoch=epoch, seq=1, timeout_ms=10_000)
    c.advance(500)
    lp = c.leader_replica(TP)
    assert lp is not None
    leo = lp.log_end_offset
    assert not original and not retry
    c.heal()
    c.run_until(lambda: bool(original) and bool(retry), 5000)
    return original, retry, leo


def test_s10_retry_of_a_parked_request_appends_once_and_waits_for_the_same_hw(tmp_path: Path) -> None:
    c = _cluster(tmp_path)
    try:
        original, retry, leo = s10(c)
        assert leo == 3
        r1, r2 = original[0][0], retry[0][0]
        assert r1.error == 0 and r2.error == 0
        assert (r1.base_offset, r1.last_offset) == (r2.base_offset, r2.last_offset) == (1, 2)
        assert r2.duplicate and not r1.duplicate
    finally:
        c.close()


def test_s10_appends_twice_without_deduplication(tmp_path: Path) -> None:
    c = _cluster(tmp_path, mutants=(mut.DEDUPE_OFF,))
    try:
        _, _, leo = s10(c)
        assert leo == 5
    finally:
        c.close()
