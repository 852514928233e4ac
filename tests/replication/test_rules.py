"""The replication rules one at a time: election and placement, the caught-up predicate, the
high watermark, ISR changes, acks, the coordinator's compare-and-set and sessions."""

from __future__ import annotations

import functools
import random
from pathlib import Path
from typing import Any

import pytest

from seglog.cluster import election as el
from seglog.cluster.coordinator import (
    BadVersionError,
    Check,
    ConnectionLossError,
    InMemoryCoordinator,
    NodeExistsError,
    SessionExpiredError,
    SetData,
    WatchEvent,
)
from seglog.cluster.partition import IsrState, RemoteReplica
from seglog.errors import (
    InvalidReplicationFactorError,
    NotControllerError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    RequestTimedOutError,
    write_outcome,
)
from seglog.util.clock import ManualClock, Scheduler
from tests.replication.sim import SimCluster

# -- election and placement ---------------------------------------------------------------------


def test_offline_election_prefers_first_live_isr_member_in_assignment_order() -> None:
    e = el.offline_election([3, 1, 2], isr=[2, 1], elr=[], live={1, 2, 3}, unclean_enabled=False)
    assert (e.leader, e.unclean) == (1, False)
    e = el.offline_election([3, 1, 2], isr=[2, 1], elr=[], live={2, 3}, unclean_enabled=False)
    assert e.leader == 2


def test_offline_election_never_picks_outside_the_isr_unless_unclean_is_enabled() -> None:
    e = el.offline_election([1, 2, 3], isr=[1], elr=[], live={2, 3}, unclean_enabled=False)
    assert e.leader == el.NO_LEADER and e.isr == (1,)  # the ISR is never emptied
    e = el.offline_election([1, 2, 3], isr=[1], elr=[], live={2, 3}, unclean_enabled=True)
    assert (e.leader, e.isr, e.unclean) == (2, (2,), True)


def test_offline_election_uses_eligible_leader_replicas_before_unclean() -> None:
    e = el.offline_election([1, 2, 3], isr=[1], elr=[3, 2], live={2, 3}, unclean_enabled=True)
    assert (e.leader, e.isr, e.elr, e.unclean) == (2, (2,), (3,), False)


def test_preferred_election_needs_the_first_replica_alive_and_in_sync() -> None:
    assert el.preferred_election([1, 2, 3], [1, 2, 3], {1, 2, 3}) == 1
    assert el.preferred_election([1, 2, 3], [2, 3], {1, 2, 3}) == el.NO_LEADER
    assert el.preferred_election([1, 2, 3], [1, 2, 3], {2, 3}) == el.NO_LEADER


def test_shrink_below_min_isr_fills_the_elr_and_keeps_the_last_member() -> None:
    assert el.shrink_with_elr([1, 2, 3], [], {3}, 2) == ((1, 2), ())
    assert el.shrink_with_elr([1, 2], [], {2}, 2) == ((1,), (2,))
    assert el.shrink_with_elr([1], [2], {1}, 2) == ((1,), (2,))
    assert el.expand_with_elr([1], [2], [3], 2) == ((1, 3), ())


def test_placement_matches_kafkas_documented_layout() -> None:
    # AdminUtils' doc: 5 brokers, 10 partitions, 3 replicas, start index 0 and shift 0.
    got = el.assign_replicas(10, 3, [0, 1, 2, 3, 4], start_index=0)
    first = {p: r[0] for p, r in enumerate(got)}
    second = {p: r[1] for p, r in enumerate(got)}
    third = {p: r[2] for p, r in enumerate(got)}
    assert first == {0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 5: 0, 6: 1, 7: 2, 8: 3, 9: 4}
    # rows of the table: broker -> partitions holding it as 2nd / 3rd replica
    assert {b: sorted(p for p, r in second.items() if r == b) for b in range(5)} == {
        0: [4, 8],
        1: [0, 9],
        2: [1, 5],
        3: [2, 6],
        4: [3, 7],
    }
    assert {b: sorted(p for p, r in third.items() if r == b) for b in range(5)} == {
        0: [3, 7],
        1: [4, 8],
        2: [0, 9],
        3: [1, 5],
        4: [2, 6],
    }


def test_placement_spreads_leaders_and_rejects_impossible_factors() -> None:
    got = el.assign_replicas(30, 3, [7, 8, 9], rng=random.Random(5))
    leaders = [r[0] for r in got]
    assert {b: leaders.count(b) for b in (7, 8, 9)} == {7: 10, 8: 10, 9: 10}
    assert all(len(set(r)) == 3 for r in got)
    with pytest.raises(InvalidReplicationFactorError, match="larger than the 2 available"):
        el.assign_replicas(1, 3, [1, 2])


# -- the caught-up predicate --------------------------------------------------------------------


def test_caught_up_to_the_live_leo_moves_last_caught_up_to_now() -> None:
    r = RemoteReplica(1)
    r.update_fetch_state(10, 0, leader_leo=10, now_ms=1000, broker_epoch=5)
    assert r.last_caught_up_time_ms == 1000
    assert r.is_caught_up(10, 40_000, 30_000)  # LEO equal: in sync whatever the time
    assert not r.is_caught_up(11, 40_000, 30_000)
    assert r.is_caught_up(11, 31_000, 30_000)


def test_caught_up_to_the_previous_fetch_leo_uses_the_previous_fetch_time() -> None:
    r = RemoteReplica(1)
    r.update_fetch_state(5, 0, leader_leo=10, now_ms=1000, broker_epoch=5)
    assert r.last_caught_up_time_ms == 0  # behind, and nothing before
    # Next fetch reaches the LEO the leader had at the previous fetch, not today's.
    r.update_fetch_state(10, 0, leader_leo=12, now_ms=1500, broker_epoch=5)
    assert r.last_caught_up_time_ms == 1000
    # Not reaching the previous LEO leaves it unchanged.
    r.update_fetch_state(11, 0, leader_leo=20, now_ms=2000, broker_epoch=5)
    assert r.last_caught_up_time_ms == 1000
    assert r.last_fetch_leader_log_end_offset == 20


def test_maximal_isr_is_the_old_one_while_shrinking_and_the_larger_while_expanding() -> None:
    assert IsrState((1, 2, 3), "shrink", (1, 2)).maximal == (1, 2, 3)
    assert IsrState((1, 2), "expand", (3,)).maximal == (1, 2, 3)
    assert IsrState((1, 2)).maximal == (1, 2)


# -- coordinator ----------------------------------------------------------------------------------


def _coord(timeout: int = 1000) -> tuple[ManualClock, InMemoryCoordinator]:
    clock = ManualClock()
    sched = Scheduler(clock)
    return clock, InMemoryCoordinator(clock, sched, session_timeout_ms=timeout)


def test_compare_and_set_and_multi_are_all_or_nothing() -> None:
    _, c = _coord()
    s = c.connect()
    st = s.create("/a", b"1")
    s.create("/b", b"x")
    assert st.version == 0
    assert s.set("/a", b"2", 0).version == 1
    with pytest.raises(BadVersionError):
        s.set("/a", b"3", 0)
    with pytest.raises(BadVersionError):
        s.multi([SetData("/b", b"y"), Check("/a", 0)])
    assert s.get("/b")[0] == b"x"  # the first op of the failed multi did not happen
    s.multi([Check("/a", 1), SetData("/b", b"z", 0)])
    assert s.get("/b")[0] == b"z"


def test_sessions_expire_on_the_injected_clock_and_take_their_ephemeral_znodes() -> None:
    clock, c = _coord(1000)
    a, b = c.connect(), c.connect(session_timeout_ms=60_000)
    a.create("/eph", b"", ephemeral=True)
    events: list[WatchEvent] = []
    b.exists("/eph", watch=events.append)
    clock.advance(600)
    a.heartbeat()
    b.heartbeat()
    clock.advance(600)
    assert a.exists("/eph") is not None  # heard from 600 ms ago
    clock.advance(1200)
    with pytest.raises(SessionExpiredError):
        a.heartbeat()
    assert c.read("/eph") is None
    assert [e.kind for e in events] == ["deleted"]


def test_unreachable_sessions_fail_calls_and_miss_heartbeats() -> None:
    clock, c = _coord(1000)
    up = [True]
    s = c.connect(reachable=lambda: up[0])
    s.create("/x", b"", ephemeral=True)
    up[0] = False
    with pytest.raises(ConnectionLossError):
        s.get("/x")
    clock.advance(1500)
    up[0] = True
    with pytest.raises(SessionExpiredError):
        s.heartbeat()


def test_ephemeral_create_with_replace_takes_over_and_changes_czxid() -> None:
    _, c = _coord()
    old, new = c.connect(), c.connect()
    old.create("/brokers", b"")
    st1 = old.create("/brokers/1", b"a", ephemeral=True)
    with pytest.raises(NodeExistsError):
        new.create("/brokers/1", b"b", ephemeral=True)
    st2 = new.create("/brokers/1", b"b", ephemeral=True, replace=True)
    assert st2.czxid > st1.czxid and st2.ephemeral_owner == new.session_id
    old.close()
    assert c.read("/brokers/1") is not None  # the old session no longer owned it


# -- node level ------------------------------------------------------------------------------------


@pytest.fixture
def cluster(tmp_path: Path):
    c = SimCluster(str(tmp_path), seed=3)
    yield c
    c.close()


def _produce(c: SimCluster, tp: tuple[str, int], value: bytes, acks: int = -1, timeout_ms: int = 5000) -> list:
    from seglog.cluster.messages import ProduceRequest
    from seglog.storage.records import encode_batch

    leader = c.leader_of(tp)
    return c.request(
        leader,
        ProduceRequest(tp[0], tp[1], encode_batch([value], timestamps=c.clock.time_ms()), acks, timeout_ms),
        timeout_ms + 1000,
    )


def _result(box: list):
    from seglog.errors import error_for_code

    resp, err = box[0]
    if err is not None:
        return err
    return None if resp.error == 0 else error_for_code(resp.error)(resp.message)


def test_isr_shrinks_within_one_and_a_half_lag_and_acks_all_then_fails_before_append(cluster: SimCluster) -> None:
    c = cluster
    tp = ("t", 0)
    c.create_topic("t", 1, 3, {"min.insync.replicas": 2})
    leader = c.leader_of(tp)
    followers = [i for i in c.ids if i != leader]
    box = _produce(c, tp, b"m0")
    c.run_until(lambda: bool(box), 5000)
    assert _result(box) is None
    lag = c.config.replica_lag_time_max_ms
    for f in followers:
        c.pause(f)
    t0 = c.clock.monotonic_ms()
    lp = c.leader_replica(tp)
    assert lp is not None
    c.run_until(lambda: lp.isr_state.isr == (leader,), 3 * lag, 10, "ISR shrink")
    took = c.clock.monotonic_ms() - t0
    assert lag <= took <= 1.5 * lag + 200, took
    box = _produce(c, tp, b"m1")
    c.run_until(lambda: bool(box), 5000)
    err = _result(box)
    assert isinstance(err, NotEnoughReplicasError) and write_outcome(err) == "not_written"
    assert lp.log_end_offset == 1  # nothing appended


def test_acks_all_parked_when_the_isr_shrinks_under_min_isr_is_indeterminate(cluster: SimCluster) -> None:
    c = cluster
    tp = ("t", 0)
    c.create_topic("t", 1, 3, {"min.insync.replicas": 2})
    leader = c.leader_of(tp)
    for f in [i for i in c.ids if i != leader]:
        c.pause(f)
    box = _produce(c, tp, b"m0", timeout_ms=20_000)
    c.run_until(lambda: bool(box), 25_000)
    err = _result(box)
    # HW cannot move under min ISR: the parked request times out, appended but not committed.
    assert isinstance(err, RequestTimedOutError) and write_outcome(err) == "indeterminate"
    assert NotEnoughReplicasAfterAppendError.definitely_not_written is False


def test_high_watermark_waits_for_the_maximal_isr_during_a_pending_shrink(tmp_path: Path) -> None:
    c = SimCluster(str(tmp_path), nodes=4, seed=3)
    try:
        _pending_shrink(c)
    finally:
        c.close()


def _pending_shrink(c: SimCluster) -> None:
    tp = ("t", 0)
    ctrl = c.wait_controller()
    others = [i for i in c.ids if i != ctrl]
    c.create_topic("t", 1, 3, {"min.insync.replicas": 1}, assignment=(tuple(others),))
    leader = c.leader_of(tp)
    lp = c.leader_replica(tp)
    assert lp is not None
    f1 = others[1]
    box = _produce(c, tp, b"m0")
    c.run_until(lambda: bool(box), 3000)
    assert _result(box) is None and lp.high_watermark == 1
    # Cut the leader from the controller so its shrink stays pending.
    c.pause(f1)
    c.net.cut(leader, ctrl)
    box = _produce(c, tp, b"m1", acks=1)
    c.run_until(lambda: bool(box), 3000)
    c.run_until(lambda: lp.isr_state.pending == "shrink", 10_000, 10, "a pending shrink")
    c.run_until(lambda: lp.remotes[others[2]].log_end_offset == 2, 3000)
    c.advance(500)
    assert lp.high_watermark == 1  # f1 is still in the maximal ISR
    c.heal()
    c.run_until(lambda: lp.isr_state.pending is None and f1 not in lp.isr_state.isr, 10_000)
    c.run_until(lambda: lp.high_watermark == lp.log_end_offset, 5000)


def test_a_stale_leader_cannot_change_the_isr(cluster: SimCluster) -> None:
    from seglog.cluster.messages import AlterPartitionRequest, AlterPartitionResponse

    c = cluster
    tp = ("t", 0)
    c.create_topic("t", 1, 3)
    st = c.state(tp)
    assert st is not None
    ctrl = c.wait_controller()
    resp = c.call(
        ctrl,
        AlterPartitionRequest(
            st.leader, c.node(st.leader).broker_epoch, "t", 0, st.leader_epoch - 1, st.partition_epoch, (st.leader,)
        ),
    )
    assert isinstance(resp, AlterPartitionResponse) and resp.error != 0
    resp = c.call(
        ctrl,
        AlterPartitionRequest(
            st.leader, c.node(st.leader).broker_epoch, "t", 0, st.leader_epoch, st.partition_epoch + 7, (st.leader,)
        ),
    )
    assert resp.error == 95  # INVALID_UPDATE_VERSION: the compare-and-set failed
    assert c.state(tp) == st


def test_preferred_leader_election_moves_leadership_back(cluster: SimCluster) -> None:
    from seglog.cluster.messages import ElectLeadersResponse

    c = cluster
    tp = ("t", 0)
    c.create_topic("t", 1, 3, assignment=((0, 1, 2),))
    assert c.leader_of(tp) == 0
    c.crash(0)
    c.run_until(lambda: c.leader_of(tp) not in (0, -1), 10_000)
    epoch = c.state(tp).leader_epoch  # type: ignore[union-attr]
    c.start_node(0)
    c.run_until(lambda: 0 in c.state(tp).isr, 20_000)  # type: ignore[union-attr]
    resp = c.elect_preferred(tp)
    assert isinstance(resp, ElectLeadersResponse) and resp.error == 0 and resp.leader == 0
    c.run_until(lambda: c.leader_replica(tp) is not None and c.leader_replica(tp).host.node_id == 0, 5000)  # type: ignore[union-attr]
    assert c.state(tp).leader_epoch == epoch + 1  # type: ignore[union-attr]


def test_controller_failover_through_the_coordinator(cluster: SimCluster) -> None:
    c = cluster
    c.create_topic("t", 1, 3)
    first = c.wait_controller()
    epoch = c.node(first).controller.epoch  # type: ignore[union-attr]
    c.crash(first)
    second = c.wait_controller(10_000)
    assert second != first
    assert c.node(second).controller.epoch == epoch + 1  # type: ignore[union-attr]
    c.start_node(first)
    c.advance(2000)
    assert c.controller() == second


def test_controller_requests_to_another_node_are_refused_with_not_controller(cluster: SimCluster) -> None:
    from seglog.cluster.messages import (
        AlterPartitionRequest,
        AlterPartitionResponse,
        ControlledShutdownRequest,
        ControlledShutdownResponse,
        CreatePartitionsRequest,
        CreatePartitionsResponse,
        CreateTopicRequest,
        CreateTopicResponse,
        ElectLeadersRequest,
        ElectLeadersResponse,
        InitProducerIdRequest,
        InitProducerIdResponse,
    )

    controller = cluster.wait_controller()
    other = next(i for i in cluster.ids if i != controller)
    asks: list[tuple[object, type]] = [
        (AlterPartitionRequest(other, 0, "t", 0, 0, 0, (other,)), AlterPartitionResponse),
        (CreateTopicRequest("t", 1, 3), CreateTopicResponse),
        (CreatePartitionsRequest("t", 2), CreatePartitionsResponse),
        (ElectLeadersRequest("t", 0), ElectLeadersResponse),
        (ControlledShutdownRequest(other, 0), ControlledShutdownResponse),
        (InitProducerIdRequest(), InitProducerIdResponse),
    ]
    for request, response_type in asks:
        resp: Any = cluster.call(other, request)
        error, message = resp.error, resp.message
        assert type(resp) is response_type, (request, resp)
        assert error == NotControllerError.code
        assert message == f"node {other} is not the controller"
    # The controller itself answers: one of them for real.
    created = cluster.call(controller, CreateTopicRequest("t", 1, 3))
    assert created.error == 0


def _led(c: SimCluster, tp: tuple[str, int]) -> bool:
    return c.leader_replica(tp) is not None


def _held(c: SimCluster, node: int, tp: tuple[str, int]) -> bool:
    return c.replica(node, tp) is not None


def test_created_partitions_get_leaders_and_survive_a_controller_failover(cluster: SimCluster) -> None:
    """CreatePartitions at the controller: the new partitions are placed over the live nodes
    with the topic's replication factor, get leaders and replicas on every assigned node; the
    topic record holds them, so the next controller knows them too. validate_only writes
    nothing; a count not larger is INVALID_PARTITIONS."""
    from seglog.cluster.messages import CreatePartitionsRequest
    from seglog.errors import InvalidPartitionsError

    cluster.create_topic("t", partitions=1, rf=2)
    controller = cluster.wait_controller()
    checked = cluster.call(controller, CreatePartitionsRequest("t", 3, validate_only=True))
    assert checked.error == 0 and len(checked.assignment) == 2
    assert ("t", 1) not in cluster.node(controller).metadata
    assert cluster.call(controller, CreatePartitionsRequest("t", 1)).error == InvalidPartitionsError.code
    grown = cluster.call(controller, CreatePartitionsRequest("t", 3))
    assert grown.error == 0
    assert [len(r) for r in grown.assignment] == [2, 2]
    for p in (1, 2):
        cluster.run_until(functools.partial(_led, cluster, ("t", p)), 10_000, 5, f"a leader of t-{p}")
        for r in grown.assignment[p - 1]:
            cluster.run_until(functools.partial(_held, cluster, r, ("t", p)), 10_000, 5, f"t-{p} on {r}")
    cluster.crash(controller)
    second = cluster.wait_controller()
    assert second != controller
    topic = cluster.node(second).controller.topics["t"]  # type: ignore[union-attr]
    assert sorted(topic.assignment) == [0, 1, 2]
    assert topic.assignment[1] == grown.assignment[0] and topic.assignment[2] == grown.assignment[1]
    assert cluster.call(second, CreatePartitionsRequest("t", 3)).error == InvalidPartitionsError.code


def test_topic_deletion_waits_for_every_replica_and_survives_a_controller_crash(cluster: SimCluster) -> None:
    """DeleteTopic: the topic is marked (``/admin/delete_topics/T``) and leaves the nodes'
    metadata at once; replicas are stopped and their dirs deleted; while a replica's node is
    down the topic stays marked (re-creating it is TOPIC_ALREADY_EXISTS). The controller crashes
    mid-deletion: the next one resumes from the marker; once the node is back its dir goes, the
    topic's znodes and marker go, and the name can be created again, empty. A ``-delete`` dir a
    crash left behind is removed at the next start."""
    import os

    from seglog.cluster.messages import DeleteTopicRequest
    from seglog.cluster.metadata import DELETE_TOPICS_PATH, topic_path
    from seglog.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError

    cluster.create_topic("doomed", partitions=2, rf=3)
    cluster.produce_ok(("doomed", 0), [b"old"])
    controller = cluster.wait_controller()
    down = next(i for i in cluster.ids if i != controller)
    cluster.shutdown(down)
    cluster.run_until(lambda: down not in cluster.node(controller).controller.brokers, 20_000, 10, "node down")  # type: ignore[union-attr]
    # An earlier attempt's marker got written, its answer lost: the retry goes on from it.
    cluster.node(controller).controller.session.create(f"{DELETE_TOPICS_PATH}/doomed", b"")  # type: ignore[union-attr]
    assert cluster.call(controller, DeleteTopicRequest("doomed")).error == 0
    assert cluster.call(controller, DeleteTopicRequest("doomed")).error == 0  # marked already: fine
    assert cluster.call(controller, DeleteTopicRequest("never")).error == UnknownTopicOrPartitionError.code
    up = [i for i in cluster.ids if i != down]
    for i in up:
        gone = functools.partial(os.path.exists, os.path.join(cluster.node_dir(i), "doomed-0"))
        cluster.run_until(lambda: not gone(), 5000, 10, "dir gone")
        assert not any(t == "doomed" for t, _ in cluster.node(i).metadata)
        assert ("doomed", 0) not in cluster.node(i).partitions
    assert os.path.isdir(os.path.join(cluster.node_dir(down), "doomed-0"))
    cluster.advance(2000)
    assert cluster.coord.read(topic_path("doomed")) is not None  # waits for the node that is down
    with pytest.raises(TopicAlreadyExistsError):
        cluster.create_topic("doomed", partitions=1, rf=3)

    cluster.crash(controller)
    leftover = os.path.join(cluster.node_dir(down), "doomed-1.0123456789abcdef0123456789abcdef-delete")
    os.makedirs(leftover)
    cluster.start_node(down)
    second = cluster.wait_controller()
    assert second != controller
    cluster.advance(2000)
    assert cluster.coord.read(topic_path("doomed")) is not None  # the crashed node held replicas too
    cluster.start_node(controller)
    cluster.run_until(lambda: cluster.coord.read(topic_path("doomed")) is None, 20_000, 10, "the topic's znodes gone")
    assert cluster.coord.read(f"{DELETE_TOPICS_PATH}/doomed") is None
    assert not os.path.exists(leftover)
    for i in cluster.ids:
        assert not any(n.startswith("doomed-") for n in os.listdir(cluster.node_dir(i)))
    cluster.create_topic("doomed", partitions=1, rf=3)
    leader = cluster.leader_replica(("doomed", 0))
    assert leader is not None and leader.log.log_end_offset == 0
    cluster.produce_ok(("doomed", 0), [b"new"])


def test_an_older_leader_and_isr_that_arrives_late_is_ignored(cluster: SimCluster) -> None:
    """Two LeaderAndIsr (or UpdateMetadata) of one controller can cross on the way to a node
    (each change is sent at once); the older, arriving second, must not replace the newer state
    (a node that had just registered lost a new topic this way and never answered for it). The
    versions are compared per kind: the newest UpdateMetadata does not make an older
    LeaderAndIsr of a version the node has not seen yet stale."""
    import dataclasses

    from seglog.cluster.messages import LeaderAndIsrResponse, UpdateMetadataResponse

    c = cluster
    c.create_topic("t", 1, 3)
    ctrl = c.node(c.wait_controller()).controller
    assert ctrl is not None
    follower = next(i for i in c.ids if i != c.wait_controller())
    node = c.node(follower)
    newer = ctrl.update_metadata(follower)
    assert newer.state_version >= 1 and any(p.topic == "t" for p in newer.partitions)
    older = dataclasses.replace(newer, partitions=(), state_version=newer.state_version - 1)
    resp = c.call(follower, older)
    assert isinstance(resp, UpdateMetadataResponse) and resp.error == 0  # superseded, not an error
    assert ("t", 0) in node.metadata
    # The same version again, or a newer one, is applied.
    assert c.call(follower, newer).error == 0
    assert ("t", 0) in node.metadata

    lai = ctrl.leader_and_isr(follower)
    assert [p.tp for p in lai.partitions] == [("t", 0)] and lai.state_version == newer.state_version
    stale = dataclasses.replace(lai, partitions=(), state_version=lai.state_version - 1)
    resp = c.call(follower, stale)
    assert isinstance(resp, LeaderAndIsrResponse) and resp.error == 0
    assert node.versions_seen["LeaderAndIsrRequest"] == (lai.controller_epoch, lai.state_version)
    assert node.metadata_caught_up()


def test_leader_and_isr_and_update_metadata_apply_in_either_order(cluster: SimCluster) -> None:
    """LeaderAndIsr and UpdateMetadata travel apart: a LeaderAndIsr older than the node's
    UpdateMetadata still opens the node's replicas (with its topic config), and an
    UpdateMetadata older than the node's LeaderAndIsr still sets the metadata, but neither
    takes back a topic config the newer one set."""
    import dataclasses
    import json

    c = cluster
    c.create_topic("t", 1, 3, config={"retention.ms": 1000})
    ctrl = c.node(c.wait_controller()).controller
    assert ctrl is not None
    follower = next(i for i in c.ids if i != c.wait_controller())
    node = c.node(follower)
    c.advance(500)
    lai, um = ctrl.leader_and_isr(follower), ctrl.update_metadata(follower)
    v = max(node.versions_seen.values())[1]
    newer_cfg = tuple((t, json.dumps({"retention.ms": 2000})) for t, _ in um.topic_configs if t == "t")
    # UpdateMetadata v+2 (config 2000), then LeaderAndIsr v+1 (config 1000): the config stays.
    assert c.call(follower, dataclasses.replace(um, topic_configs=newer_cfg, state_version=v + 2)).error == 0
    assert c.call(follower, dataclasses.replace(lai, state_version=v + 1)).error == 0
    assert node.topic_configs["t"] == {"retention.ms": 2000}
    assert node.partitions[("t", 0)].log_config.retention_ms == 2000
    # LeaderAndIsr v+4 (config 1000), then UpdateMetadata v+3 without the topic: the metadata
    # is the older message's (no topic), the config the newer one's.
    assert c.call(follower, dataclasses.replace(lai, state_version=v + 4)).error == 0
    assert node.topic_configs["t"] == {"retention.ms": 1000}
    assert (
        c.call(follower, dataclasses.replace(um, partitions=(), topic_configs=newer_cfg, state_version=v + 3)).error
        == 0
    )
    assert ("t", 0) not in node.metadata and ("t", 0) in node.partitions
    assert node.topic_configs["t"] == {"retention.ms": 1000}
    assert not node.metadata_caught_up()


class _CountingSession:
    """A controller's coordinator session that counts its reads and fails the next
    ``fail_reads`` of them with ConnectionLossError."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.reads = 0
        self.fail_reads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _read(self, name: str, *args: Any, **kwargs: Any) -> Any:
        self.reads += 1
        if self.fail_reads > 0:
            self.fail_reads -= 1
            raise ConnectionLossError("test: the coordinator does not answer")
        return getattr(self.inner, name)(*args, **kwargs)

    def get(self, *args: Any, **kwargs: Any) -> Any:
        return self._read("get", *args, **kwargs)

    def exists(self, *args: Any, **kwargs: Any) -> Any:
        return self._read("exists", *args, **kwargs)

    def children(self, *args: Any, **kwargs: Any) -> Any:
        return self._read("children", *args, **kwargs)


def test_controller_reads_the_coordinator_only_when_a_watch_fires_and_retries_a_failed_read(
    cluster: SimCluster,
) -> None:
    """The controller learns of node changes from its watches, not by polling: a quiet cluster
    costs it no coordinator read (each read is a blocking ZooKeeper round trip on the node's
    loop). A re-read that fails with a connection loss is repeated by the periodic task until it
    goes through, and the watches it sets are armed again."""
    c = cluster
    c.create_topic("t", 1, 3)
    ctrl = c.node(c.wait_controller()).controller
    assert ctrl is not None
    counting = _CountingSession(ctrl.session)
    ctrl.session = counting
    c.advance(5000)  # ten periods of the controller's periodic task
    assert counting.reads == 0

    # A node dies: its registration's watches fire; the re-read fails twice, then goes through.
    gone = next(i for i in c.ids if i != c.controller())
    counting.fail_reads = 2
    c.crash(gone)
    c.run_until(lambda: gone not in ctrl.brokers, 10_000, what=f"the controller sees node {gone} gone")
    assert counting.fail_reads == 0 and not ctrl._retry
    # The watches were armed again: the node's return is seen with no failure to retry it.
    before = counting.reads
    c.start_node(gone)
    c.run_until(lambda: gone in ctrl.brokers, 10_000, what=f"the controller sees node {gone} back")
    assert counting.reads > before
    reads = counting.reads
    c.advance(3000)
    assert counting.reads == reads
