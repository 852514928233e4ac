"""The deterministic scenarios S1-S13 of ``docs/replication.md`` §9.6 on the real cluster: three node
processes on ZooKeeper, every link through the fault proxy, kills and pauses by PID, power loss
from the fsync journal. Each runs the background workload and ends with the full §9.5 checker
(:class:`tests.cluster.scenario.Scenario`); the scenario's own expectation is asserted on top.
The in-memory versions (with their mutants) are tests/replication/test_scenarios.py.

S6 (plain), S11, S12 (torn) and the positive control run in the default suite; the others are
marked ``heavy`` (about 4.5 minutes together): ``python -m pytest -m heavy``, which CI runs."""

from __future__ import annotations

import random
import time

import pytest

from tests.cluster.harness import LAG_S
from tests.cluster.scenario import SAFE, Scenario

pytestmark = pytest.mark.cluster


def _leader(sc: Scenario, topic: str = SAFE) -> int:
    sc.wait(lambda: sc.c.leader(topic, 0) is not None, 20, f"a leader for {topic}")
    leader = sc.c.leader(topic, 0)
    assert leader is not None
    return leader


def _new_leader(sc: Scenario, old: int, topic: str = SAFE, timeout: float = 20) -> int:
    sc.wait(lambda: sc.c.leader(topic, 0) not in (None, old), timeout, f"a leader other than {old}")
    return sc.c.leader(topic, 0)  # type: ignore[return-value]


def _replace_leader(sc: Scenario, leader: int, topic: str = SAFE) -> None:
    """Kill ``leader``, wait until another node leads ``topic``, then restart ``leader``."""
    sc.c.kill(leader)
    _new_leader(sc, leader, topic)
    sc.c.restart(leader)


def _fails(sc: Scenario, error: str) -> int:
    return sum(1 for o in sc.history.ops if o.f == "send" and o.type == "fail" and o.error == error)


def _send_one(sc: Scenario, producer: object, client: str, n: int) -> str | None:
    """One logged send; returns the error name (None when acked)."""
    from tests.cluster.checker import encode_value
    from tests.cluster.history import error_name

    op = sc.history.invoke(client, "send", {"topic": SAFE, "partition": 0, "value": f"{client}:{n}"})
    try:
        md = producer.send(SAFE, encode_value(client, n), partition=0).result(30)  # type: ignore[attr-defined]
    except Exception as exc:  # noqa: BLE001 - classified into the history
        sc.history.error(op, exc)
        return error_name(exc)
    sc.history.ok(op, {"partition": md.partition, "offset": md.offset})
    return None


@pytest.mark.heavy
def test_s1_clean_restart_of_a_follower_then_leader_kill_keeps_acked(sc: Scenario) -> None:
    """KIP-101 #1: A has m2 but not the HW covering it (its next fetch is held); A restarts
    cleanly, B (the leader) dies. A must not have cut m2 back to its own HW."""
    sc.warm()
    b = _leader(sc)
    a = next(i for i in sc.c.ids if i != b)
    sc.c.hub.set(f"{a}->{b}", "blackhole")
    time.sleep(0.3)
    assert sc.c.terminate(a) == 0
    sc.c.restart(a)
    sc.c.kill(b)
    sc.c.hub.set(f"{a}->{b}", "pass")
    _new_leader(sc, b)
    sc.finish_ok()


@pytest.mark.heavy
def test_s2_power_loss_on_every_replica_never_diverges(sc: Scenario) -> None:
    """KIP-101 #2: all replicas lose their unsynced tails; one comes back first and takes writes,
    the others return later. Acked loss is allowed here (n-of-n power loss); divergence is not."""
    sc.warm(100)
    rng = random.Random(2)
    for i in sc.c.ids:
        sc.c.power_loss(i, rng, keep="random")
    first = rng.choice(sc.c.ids)
    sc.c.restart(first)
    time.sleep(3)
    res = sc.finish()
    for k in (
        "divergent_replicas",
        "epoch_cache_mismatch",
        "hw_not_at_leo",
        "epoch_cache_violations",
        "split_leader_epochs",
        "duplicates",
        "nonmonotonic",
        "poll_skip",
    ):
        assert res.counts[k] == 0, (k, res.examples.get(k), sc.dir)


@pytest.mark.heavy
def test_s3_two_failovers_within_a_fetch_round(sc: Scenario) -> None:
    """KIP-279: leaders change twice in quick succession; the survivors iterate truncation
    until their logs match."""
    sc.warm()
    l1 = _leader(sc)
    sc.c.kill(l1)
    l2 = _new_leader(sc, l1)
    sc.c.kill(l2)
    sc.c.restart(l1)
    sc.c.restart(l2)
    sc.finish_ok()


@pytest.mark.heavy
def test_s4_lagging_follower_is_not_admitted_on_a_stale_hw(sc: Scenario) -> None:
    """KAFKA-7128, approximated: C falls out of the ISR, A (leader) dies so B leads with a
    lagging HW, C comes back while B is new, then B dies. Committed records survive."""
    sc.warm()
    a = _leader(sc)
    b, cc = [i for i in sc.c.ids if i != a]
    sc.c.pause(cc)
    sc.wait(lambda: cc not in sc.c.isr(SAFE, 0), 3 * LAG_S, "C out of the ISR")
    sc.c.kill(a)
    _new_leader(sc, a)
    sc.c.resume(cc)
    time.sleep(0.5)
    leader = sc.c.leader(SAFE, 0)
    if leader is not None:
        sc.c.kill(leader)
    time.sleep(2)
    sc.finish_ok()


@pytest.mark.heavy
def test_s5_leader_cut_from_followers_not_from_controller(sc: Scenario) -> None:
    """Jepsen 2013: the leader loses its followers but keeps ZooKeeper and clients. After the
    ISR shrink, acks=all writes fail with NOT_ENOUGH_REPLICAS (definitely not written); then the
    leader is isolated completely and only it or an eligible (ELR) replica may lead."""
    sc.warm()
    # The controller lives in a node: the shape needs it on the leader (leader <-> controller
    # kept while leader <-> followers is cut). Move leadership there by killing other leaders
    # (the survivors race for it).
    for _ in range(8):
        leader, ctl = _leader(sc), sc.c.controller()
        if ctl == leader:
            break
        _replace_leader(sc, leader)
        sc.wait(lambda: sc.c.full_isr(sc.topics) and sc.c.controller() is not None, 30, "a whole cluster")
    else:
        pytest.skip("could not get the controller's node to lead in 8 leader kills")
    leader = _leader(sc)
    sc.c.hub.set(sc.c.links_of(leader), "blackhole")
    sc.wait(lambda: sc.c.isr(SAFE, 0) == [leader], 6 * LAG_S, "ISR = {leader}")
    # A producer that gives up quickly (the workload's retry NOT_ENOUGH_REPLICAS for 30 s)
    prod = sc.c.producer(acks="all", enable_idempotence=True, request_timeout_ms=1000, delivery_timeout_ms=2500)
    errors = [_send_one(sc, prod, "p9", k) for k in range(3)]
    prod.close()
    assert any(e == "NOT_ENOUGH_REPLICAS" for e in errors), errors
    st = sc.c.state(SAFE, 0)
    assert st is not None
    # seglog follows KIP-966: members dropped while the ISR fell below min.insync.replicas are
    # eligible (ELR) — they hold every committed record, since the HW cannot move below min ISR.
    electable = {leader, *st.elr}
    sc.c.hub.set(sc.c.links_of(leader, peers=False, zk=True, clients=True), "blackhole")
    t_end = time.monotonic() + 3 * LAG_S
    while time.monotonic() < t_end:
        now = sc.c.leader(SAFE, 0)
        assert now is None or now in electable, f"node {now} led, outside ISR {st.isr} and ELR {st.elr}"
        time.sleep(0.1)
    sc.finish_ok()


@pytest.mark.parametrize(
    "block_fetches", [False, pytest.param(True, marks=pytest.mark.heavy)], ids=["plain", "followers-blocked"]
)
def test_s6_zombie_leader(sc: Scenario, block_fetches: bool) -> None:
    """SIGSTOP the leader past its session; a new leader is elected; SIGCONT. Whatever the
    zombie acks must survive; with the followers' fetches to it blocked it can ack nothing."""
    sc.warm()
    old = _leader(sc)
    sc.c.pause(old)
    new = _new_leader(sc, old, timeout=6 * LAG_S)
    if block_fetches:
        sc.c.hub.set([f"{o}->{old}" for o in sc.c.ids if o != old], "blackhole")
        n_ok = sc.acked()
    sc.c.resume(old)
    time.sleep(LAG_S)
    assert sc.c.leader(SAFE, 0) == new or sc.c.leader(SAFE, 0) != old
    if block_fetches:
        zombie_acks = [o for o in sc.history.ops if o.f == "send" and o.type == "ok" and o.value.get("topic") == SAFE]
        assert len(zombie_acks) >= n_ok
    sc.finish_ok()


@pytest.mark.heavy
def test_s7_last_replica_standing_loses_power(sc: Scenario) -> None:
    """The ISR shrinks to {L}; L loses its unsynced tail and restarts; the followers return.
    Records acked while the ISR was 3 wide must survive (seglog's rule: ELR plus unclean-restart
    removal, KIP-966)."""
    sc.warm()
    leader = _leader(sc)
    f1, f2 = [i for i in sc.c.ids if i != leader]
    sc.c.pause(f1)
    sc.c.pause(f2)
    sc.wait(lambda: sc.c.isr(SAFE, 0) == [leader], 6 * LAG_S, "ISR = {leader}")
    sc.c.power_loss(leader, random.Random(7), keep="durable")
    sc.c.restart(leader)
    sc.c.resume(f1)
    sc.c.resume(f2)
    sc.finish_ok()


@pytest.mark.heavy
def test_s8_follower_back_from_power_loss_is_not_elected_before_resync(sc: Scenario) -> None:
    sc.warm()
    leader = _leader(sc)
    b, cc = [i for i in sc.c.ids if i != leader]
    sc.c.power_loss(b, random.Random(8), keep="durable")
    sc.c.hub.set([f"{b}->{leader}", f"{b}->{cc}"], "blackhole")  # it cannot catch up for now
    sc.c.restart(b)  # well within the session timeout
    sc.wait(lambda: b not in sc.c.isr(SAFE, 0), 2 * LAG_S, "B out of the ISR")
    sc.c.kill(leader)
    t_end = time.monotonic() + LAG_S
    while time.monotonic() < t_end:
        assert sc.c.leader(SAFE, 0) != b, "a replica back from power loss led before catching up"
        time.sleep(0.1)
    sc.finish_ok()


@pytest.mark.heavy
def test_s9_idempotent_retries_across_failover(sc: Scenario) -> None:
    """Leaders die under idempotent producers (appended, replicated, response lost): retries to
    the new leader are deduplicated; then producer-state snapshots across a clean restart."""
    sc.warm()
    for _ in range(2):
        leader = _leader(sc)
        _replace_leader(sc, leader)
        time.sleep(1)
    leader = _leader(sc)
    sc.c.terminate(leader)
    sc.c.restart(leader)
    sc.finish_ok()
    assert sc.result.counts["duplicates"] == 0


@pytest.mark.heavy
def test_s10_retry_of_a_request_still_parked(sc: Scenario) -> None:
    """Client requests to the leader are delayed beyond the client's request timeout: the
    idempotent retries arrive while the originals are parked or just appended. Exactly one
    append each."""
    sc.warm()
    leader = _leader(sc)
    sc.c.hub.set(f"k->{leader}", "delay", delay_ms=6000)
    time.sleep(12)
    sc.c.hub.set(f"k->{leader}", "pass")
    sc.finish_ok()
    assert sc.result.counts["duplicates"] == 0


@pytest.mark.parametrize("sc", [{"tmpfs_nodes": (0, 1, 2), "tmpfs_size": "16m"}], indirect=True, ids=["tmpfs"])
def test_s11_disk_full_on_the_leader(sc: Scenario) -> None:
    """F5: the leader's disk fills. It must not ack what it could not write nor corrupt its log;
    its process halts (its only log dir failed, as a Kafka broker's last log dir), so leadership
    moves; after space is freed and it restarts, it recovers and re-syncs."""
    sc.warm()
    leader = _leader(sc)
    fs = sc.c.tmpfs[leader]
    fs.fill()
    _new_leader(sc, leader, timeout=20)
    sc.wait(lambda: not sc.c.is_running(leader), 10, "the node with the full disk halts")
    with open(sc.c.log_path(leader), encoding="utf-8", errors="replace") as f:
        assert "halting: the only log dir" in f.read()
    fs.free()
    sc.c.restart(leader)
    sc.finish_ok()


@pytest.mark.parametrize("how", ["torn", pytest.param("flip_last", marks=pytest.mark.heavy)])
def test_s12_damaged_tail_on_leader_and_follower(sc: Scenario, how: str) -> None:
    sc.warm()
    rng = random.Random(12)
    leader = _leader(sc)
    sc.c.damage_tail(leader, rng, how)
    sc.c.restart(leader)
    sc.wait(lambda: sc.c.full_isr(sc.topics), 30, "full ISR")
    follower = next(i for i in sc.c.ids if i != sc.c.leader(SAFE, 0))
    sc.c.damage_tail(follower, rng, how)
    sc.c.restart(follower)
    sc.finish_ok()


@pytest.mark.heavy
def test_s13_fast_leader_changes_no_divergence_no_going_back(sc: Scenario) -> None:
    """Kafka's shouldSurviveFastLeaderChange (5 rounds), shouldNotAllowDivergentLogs and
    offsetsShouldNotGoBackwards (consumer order, replica convergence) in one run."""
    sc.warm()
    for _ in range(5):
        leader = _leader(sc)
        _replace_leader(sc, leader)
    sc.finish_ok()


def test_positive_control_acks_1_loses_writes_on_leader_kill(sc: Scenario) -> None:
    """§9.5 #10: on the acks=1 control topic, a leader killed while its followers could not
    fetch loses acknowledged writes — and the checker must see it."""
    sc.warm()
    leader = _leader(sc, "control")
    followers = [i for i in sc.c.ids if i != leader]
    sc.c.hub.set([f"{f}->{leader}" for f in followers], "blackhole")
    n0 = sc.acked("control")
    sc.wait(lambda: sc.acked("control") > n0 + 10, 5, "acks=1 writes on the cut-off leader")
    sc.c.kill(leader)  # within the lag time: the followers are still in the ISR
    sc.c.hub.set([f"{f}->{leader}" for f in followers], "pass")
    _new_leader(sc, leader, "control")
    sc.c.restart(leader)
    res = sc.finish()
    assert res.valid, res.violations()
    assert res.counts["control_lost"] > 0, "the checker found no loss on the acks=1 control topic"
