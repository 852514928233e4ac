"""F8 (controller churn) and F9 (wall-clock jumps) of ``docs/replication.md`` §9.3.

F8: the controller is SIGKILLed (or SIGSTOPped) while an ISR shrink is inside the proxy on its
way to it; then every AlterPartition frame captured on the links, and earlier writes of the
state znodes, are replayed — newest first — to the new controller and to ZooKeeper. Stale ones
must be refused (compare-and-set on the partition epoch, and on the controller epoch for
ZooKeeper writes); nothing goes back; the checker (which also checks that no leader's HW went
back within its epoch, from the consumers' polls) finds nothing.

F9: seglog nodes read the wall clock for record timestamps (LogAppendTime), timestamp checks
(``message.timestamp.*.max.ms``, unbounded by default) and time-based segment rolls; every timer
— ISR expiry, fetch back-off, sessions — runs on the monotonic clock. Node processes run no
retention at all (only the embedded store schedules it), so a wall-clock jump cannot delete
anything on a cluster node; with Kafka's rule (``now - largest timestamp > retention.ms``,
:meth:`seglog.storage.log.Log.delete_old_segments`) a +1 h jump would delete what is within an hour of
expiring, and a -1 h jump would delay deletion by an hour. The tests jump every node's wall clock
±1 h and check that leadership and ISR do not move and nothing is lost, and that the jump did
happen (LogAppendTime stamps follow it).
"""

from __future__ import annotations

import os
import random
import struct
import time
from typing import Any

import pytest

from seglog.cluster.messages import NONE, AlterPartitionRequest, FetchPartition, FetchRequest
from seglog.cluster.metadata import PartitionState, broker_path
from seglog.kafka import codec
from tests.cluster.churn import (
    FrameTap,
    ZkWrite,
    parse_request,
    read_write,
    regressed,
    replay_all,
    replay_frame,
    replay_zk_write,
    request_frame,
)
from tests.cluster.harness import LAG_S
from tests.cluster.history import History, Op
from tests.cluster.scenario import SAFE, Scenario

# -- pieces, without a cluster --------------------------------------------------------------------


def test_frame_tap_keeps_exactly_the_alter_partition_frames() -> None:
    req = AlterPartitionRequest(1, 77, SAFE, 0, 3, 9, (1, 2), (77, 78))
    wanted = request_frame(req, corr=5, src=1)
    versions = codec.encode_to_bytes(
        "ApiVersionsRequest", 3, {"client_software_name": "x", "client_software_version": "1"}
    )
    head = struct.pack(">hhih", 18, 3, 1, 8) + b"broker-1" + b"\0"
    stream = (
        struct.pack(">i", len(head) + len(versions))
        + head
        + versions  # a connection opens with ApiVersions
        + request_frame(FetchRequest(1, (FetchPartition(SAFE, 0, 10),)), 4, src=1)
        + wanted
        + request_frame(FetchRequest(1, ()), 6, src=1)
    )
    tap = FrameTap()
    tap.learn([SAFE])
    conn = type("Conn", (), {})()
    for i in range(0, len(stream), 7):  # frames arrive cut anywhere
        tap._feed("1->0", conn, stream[i : i + 7])
    got = tap.captured()
    assert [c.raw for c in got] == [wanted]
    assert got[0].msg == req and got[0].src == 1
    assert parse_request(wanted, tap.topic_name) == (56, 5, req)


def _state(leader: int, epoch: int, isr: tuple[int, ...]) -> bytes:
    return bytes(PartitionState(leader, epoch, isr, (), 0, 1).to_json())


def test_zookeeper_replays_are_refused_and_an_unconditional_write_is_caught(zookeeper_server: Any) -> None:
    """The controller's two write forms, replayed with the version they expected then, fail
    once the znode moved on; a deposed controller's write with fresh versions fails on the
    controller-epoch check. The regression check itself catches a replay that lands (an
    unconditional set)."""
    from kazoo.client import KazooClient  # type: ignore[import-untyped]

    zk = KazooClient(hosts=zookeeper_server.connect_string, timeout=10)
    zk.start(timeout=10)
    root = f"/f8-{os.getpid()}-{time.monotonic_ns()}"
    try:
        zk.create(root + "/controller_epoch", b"1", makepath=True)
        path = root + "/state"
        zk.create(path, _state(0, 1, (0, 1, 2)))

        def controller_write(data: bytes) -> None:
            _, st = zk.get(path)
            _, cst = zk.get(root + "/controller_epoch")
            t = zk.transaction()
            t.check(root + "/controller_epoch", cst.version)
            t.set_data(path, data, st.version)
            assert not any(isinstance(r, Exception) for r in t.commit())

        def read() -> tuple[ZkWrite, PartitionState]:
            data, st = zk.get(path)
            _, cst = zk.get(root + "/controller_epoch")
            return (
                ZkWrite(path, bytes(data), st.version, cst.version, root + "/controller_epoch"),
                PartitionState.from_json(bytes(data), st.version),
            )

        controller_write(_state(0, 1, (0, 1)))  # shrink
        w_shrink, _ = read()
        controller_write(_state(0, 1, (0, 1, 2)))  # expand
        controller_write(_state(1, 2, (1, 2)))  # a new leader
        _, before = read()

        out = replay_zk_write(zk, w_shrink)
        assert out == {"set": "BadVersionError", "multi": "BadVersionError"}, out
        zk.set(root + "/controller_epoch", b"2")  # another controller took over
        out = replay_zk_write(zk, w_shrink, current_version=before.partition_epoch)
        assert out["multi_current"] == "BadVersionError", out
        _, after = read()
        assert regressed(before, after) == [] and after.partition_epoch == before.partition_epoch

        zk.set(path, w_shrink.data, -1)  # a write without compare-and-set lands
        _, landed = read()
        assert regressed(before, landed) == ["leader epoch 2 -> 1"]
    finally:
        zk.delete(root, recursive=True)
        zk.stop()
        zk.close()


def _observations(ops: list[Op], t0: float, t1: float, topics: dict[str, int]) -> dict[str, set[tuple[Any, ...]]]:
    """Per partition, the distinct (leader, epoch, ISR) the observer saw in [t0, t1] plus the
    state it held at t0."""
    out: dict[str, set[tuple[Any, ...]]] = {f"{t}-{p}": set() for t, n in topics.items() for p in range(n)}
    last: dict[str, tuple[Any, ...]] = {}
    for o in ops:
        if o.f != "observe" or not o.value.get("zk"):
            continue
        key = f"{o.value['topic']}-{o.value['partition']}"
        st = (o.value["node"], o.value["epoch"], tuple(o.value["isr"]))
        if o.time < t0:
            last[key] = st
        elif o.time <= t1 and key in out:
            out[key].add(st)
    for key, st in last.items():
        if key in out:
            out[key].add(st)
    return out


def test_stability_window_sees_a_change() -> None:
    h = History()
    obs = {"topic": SAFE, "partition": 0, "role": "leader", "zk": True, "replicas": [0, 1, 2]}
    h.event("observer", "observe", {**obs, "node": 0, "epoch": 1, "isr": [0, 1, 2]})
    t0 = h.now()
    h.event("observer", "observe", {**obs, "node": 0, "epoch": 1, "isr": [0, 1]})
    assert len(_observations(h.ops, t0, h.now() + 1, {SAFE: 1})[f"{SAFE}-0"]) == 2
    assert len(_observations(h.ops, h.now() + 1, h.now() + 2, {SAFE: 1})[f"{SAFE}-0"]) == 1


# -- on the cluster -------------------------------------------------------------------------------


def _ok(sc: Scenario) -> None:
    res = sc.finish_ok()
    # The HW property runs on real observations: every poll says which leader, in which epoch,
    # reported which HW.
    assert res.stats["hw_observations"].get("polls", 0) > 0, res.stats["hw_observations"]


def _f8(sc: Scenario, how: str) -> None:
    c = sc.c
    sc.warm()
    topics = sc.topics
    sc.wait(lambda: c.full_isr(topics) and c.controller() is not None, 20, "a whole cluster")
    zk = c.zk()
    earlier = [read_write(zk, t, p) for t, n in topics.items() for p in range(n)]
    done = c.controller_churn(topics, random.Random(8), how, hold_s=1.0 if how == "kill" else 2.5 * LAG_S)
    assert done.get("remote_proposer"), f"no ISR shrink was proposed over a link to the controller: {done}"
    old_ctl = done["controller"]
    sc.wait(lambda: c.full_isr(topics) and c.controller() not in (None,), 40, "a whole cluster after the churn")
    # The shrink committed by someone and the expand after it moved the state on: the earlier
    # writes and the frames sent for them are stale now.
    frames = [f for f in c.frames.captured() if isinstance(f.msg, AlterPartitionRequest)]
    assert frames, "no AlterPartition request crossed the proxy"
    op = c._fault("replay", c.controller(), "controller", frames=len(frames), zk_writes=len(earlier))
    res = replay_all(c, c.frames, earlier, topics, zk=zk, frames=8)
    c.fault_done(op, {k: res[k] for k in ("stale_accepted", "regressions", "requests", "zk")})
    assert res["stale_accepted"] == 0 and res["regressions"] == [], res
    answered = [r for r in res["requests"] if "response" in r]
    assert answered and any(r["stale"] for r in answered), res["requests"]
    for r in answered:
        if r["stale"]:
            assert r["response"] in ("INVALID_UPDATE_VERSION", "FENCED_LEADER_EPOCH", "STALE_BROKER_EPOCH"), r
    assert all(
        z["set"] in ("BadVersionError", "NodeExistsError") and z["multi"] in ("BadVersionError", "NodeExistsError")
        for z in res["zk"]
    ), res["zk"]
    if how == "kill" or c.controller() != old_ctl:
        assert any("multi_current" in z for z in res["zk"]), res["zk"]
        assert all(z.get("multi_current", "BadVersionError") == "BadVersionError" for z in res["zk"]), res["zk"]
    # The same path does apply a current request: the refusals above are the controller's.
    t, p = SAFE, 0
    st = c.state(t, p)
    assert st is not None and st.leader >= 0
    reg = c.coordinator.read(broker_path(st.leader))
    assert reg is not None
    fresh = AlterPartitionRequest(st.leader, reg[1].czxid, t, p, st.leader_epoch, st.partition_epoch, tuple(st.isr))
    ctl = c.controller()
    assert ctl is not None
    resp = replay_frame((c.host, c.port(ctl)), request_frame(fresh, src=st.leader), fresh)
    assert resp.error == NONE, resp
    st2 = c.state(t, p)
    assert st2 is not None and st2.partition_epoch == st.partition_epoch + 1 and st2.isr == st.isr
    _ok(sc)
    assert sc.scraped.get("controller_elections", 0) >= 2, sc.scraped


@pytest.mark.parametrize("sc", [{"topics": {SAFE: 3}}], indirect=True, ids=["3p"])
@pytest.mark.cluster
def test_f8_controller_killed_mid_isr_change_then_stale_changes_replayed(sc: Scenario) -> None:
    _f8(sc, "kill")


@pytest.mark.slow
@pytest.mark.parametrize("sc", [{"topics": {SAFE: 3}}], indirect=True, ids=["3p"])
@pytest.mark.cluster
def test_f8_controller_paused_mid_isr_change_then_stale_changes_replayed(sc: Scenario) -> None:
    _f8(sc, "pause")


@pytest.mark.parametrize(
    "sc", [{"safe_config": {"message.timestamp.type": "LogAppendTime"}}], indirect=True, ids=["log-append-time"]
)
@pytest.mark.cluster
def test_f9_wall_clock_jumps_move_no_leader_and_no_isr(sc: Scenario) -> None:
    """Every node's wall clock +1 h: nothing moves. Then -1 h, and a follower stops fetching:
    the ISR shrinks within the usual bound (the expiry runs on the monotonic clock; on the
    wall clock it would wait an hour) and expands once it fetches again. No election."""
    c = sc.c
    sc.warm()
    sc.wait(lambda: c.full_isr(sc.topics), 20, "full ISR")
    before = {(t, p): c.state(t, p) for t, n in sc.topics.items() for p in range(n)}
    leaders = {st.leader for st in before.values() if st is not None}
    follower = next(i for i in c.ids if i not in leaders)
    marks: dict[str, tuple[int, int]] = {}

    def jump(offset_ms: int) -> int | None:
        op = c._fault("clock_jump", "all", "all", offset_ms=offset_ms)
        for i in c.ids:
            c.set_wall_clock_offset(i, offset_ms)
        return op

    t0 = sc.history.now()
    wall = int(time.time() * 1000)
    op = jump(3_600_000)
    time.sleep(LAG_S)  # two ISR expiry checks, a few hundred acked writes
    marks["+1h"] = (wall, int(time.time() * 1000))
    c.fault_done(op)
    t1 = sc.history.now()
    wall = int(time.time() * 1000)
    op = jump(-3_600_000)
    cut = [f"{follower}->{o}" for o in c.ids if o != follower]
    c.hub.set(cut, "blackhole")
    shrink_s = sc.wait(
        lambda: all(follower not in c.isr(t, p) for t, n in sc.topics.items() for p in range(n)),
        2 * LAG_S,
        f"node {follower} out of every ISR with the wall clock an hour back",
    )
    c.hub.set(cut, "pass")
    sc.wait(lambda: c.full_isr(sc.topics), 20, "full ISR again")
    marks["-1h"] = (wall, int(time.time() * 1000))
    c.fault_done(op, {"isr_shrink_s": round(shrink_s, 2)})
    for i in c.ids:
        c.set_wall_clock_offset(i, 0)
    after = {(t, p): c.state(t, p) for t, n in sc.topics.items() for p in range(n)}
    for tp, st in before.items():
        a = after[tp]
        assert st is not None and a is not None
        assert (a.leader, a.leader_epoch) == (st.leader, st.leader_epoch), (tp, st, a)
    seen = _observations(sc.history.ops, t0, t1, sc.topics)
    assert all(len(v) == 1 for v in seen.values()), f"the state moved while the clocks were an hour ahead: {seen}"
    st0 = after[(SAFE, 0)]
    assert st0 is not None
    leader = st0.leader
    _ok(sc)
    # The jumps happened: the leader stamped the records it appended meanwhile with its shifted
    # clock (LogAppendTime), and its log says so.
    from seglog.storage.log import Log
    from seglog.storage.records import decode_records

    stamps: list[int] = []
    d = os.path.join(c.node_dir(leader), f"{SAFE}-0")
    lg = Log.open(d, read_only=True)
    try:
        assert lg.log_start_offset == 0  # nothing deleted
        pos = 0
        while pos < lg.log_end_offset:
            recs = decode_records(lg.read(pos, 1 << 22, upper_bound="log_end").to_bytes(), min_offset=pos)
            stamps += [r.timestamp for r in recs]
            pos = recs[-1].offset + 1
    finally:
        lg.close()
    ahead = [s for s in stamps if s > marks["+1h"][0] + 3_000_000]
    behind = [s for s in stamps if s < marks["-1h"][1] - 3_000_000]
    assert ahead and behind, (len(stamps), marks)
    with open(c.log_path(leader), encoding="utf-8", errors="replace") as f:
        text = f.read()
    assert "wall clock offset +3600000 ms" in text and "wall clock offset -3600000 ms" in text
