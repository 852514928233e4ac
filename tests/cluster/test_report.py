"""The run report: figures computed from a hand-made history with known answers."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cluster.checker import HARD
from tests.cluster.history import History
from tests.cluster.report import build, latencies, percentile, state_counts, text, write
from tests.cluster.test_checker import clean_run


class _Clock:
    """A clock that stands still until the test moves it: events are stamped at exact times."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _history() -> History:
    return History(clock=_Clock())


def _timed(h: History, t: float) -> None:
    clock = h._clock
    assert isinstance(clock, _Clock)
    clock.t = h.t0 + t  # the recorder's clock now reads ``t``


def _observe_leader(h: History, hw: int, isr: list[int]) -> None:
    """The observer sees node 2 lead safe-0 (epoch 1, replicas 1-3) with this ``hw`` and ISR."""
    h.event(
        "observer",
        "observe",
        {
            "topic": "safe",
            "partition": 0,
            "node": 2,
            "role": "leader",
            "epoch": 1,
            "hw": hw,
            "isr": isr,
            "replicas": [1, 2, 3],
        },
    )


def test_percentile() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile(range(101), 99) == 99


def test_latencies_from_known_timings() -> None:
    h = _history()
    _timed(h, 10.0)
    h.invoke("nemesis", "nemesis", {"fault": "kill", "target": 1, "role": "leader", "led": [["safe", 0]]})
    _observe_leader(h, hw=0, isr=[2, 3])
    _timed(h, 11.0)
    s = h.invoke("p0", "send", {"topic": "safe", "partition": 0, "value": "p0:0"})
    _timed(h, 12.5)
    h.ok(s, {"offset": 0})  # failover: 12.5 - 10 = 2.5; produce latency 1.5
    _timed(h, 20.0)
    h.invoke("nemesis", "nemesis", {"fault": "pause", "target": 3, "role": "follower", "led": []})
    _timed(h, 24.0)
    _observe_leader(h, hw=1, isr=[2])  # shrink: 4.0
    _timed(h, 30.0)
    h.invoke("nemesis", "nemesis", {"fault": "heal"})
    _timed(h, 33.0)
    _observe_leader(h, hw=1, isr=[1, 2, 3])  # expand: 3.0
    lat = latencies(h.ops)
    assert lat["failover_s"]["p50"] == 2.5
    assert lat["isr_shrink_s"]["p50"] == 4.0
    assert lat["isr_expand_s"]["p50"] == 3.0
    assert lat["produce_latency_s"]["max"] == 1.5


def test_report_json_and_text(tmp_path: Path) -> None:
    r = clean_run()
    r.h.invoke("nemesis", "nemesis", {"fault": "kill", "target": 0, "role": "leader"})
    r.h.invoke("nemesis", "nemesis", {"fault": "kill", "target": 1, "role": "follower"})
    r.h.invoke("nemesis", "nemesis", {"fault": "pause", "target": 1, "role": "follower"})
    r.h.invoke("nemesis", "nemesis", {"fault": "heal"})
    res = r.check()
    rep = build(r.h.ops, res, {"seed": 7, "profile": "unit", "revision": "abc", "duration_s": 10})
    assert rep["faults"]["by_type"] == {"kill": 2, "pause": 1}
    assert rep["faults"]["by_type_and_role"] == {"kill:leader": 1, "kill:follower": 1, "pause:follower": 1}
    assert rep["operations"]["send"] == {"invoke": 12, "ok": 10, "fail": 1, "info": 1}
    assert set(rep["safety"]) == set(HARD) and not any(rep["safety"].values()) and rep["valid"]
    assert rep["performance"]["acked_per_s"] == 1.0
    write(rep, tmp_path / "run.json")
    assert json.loads((tmp_path / "run.json").read_text())["provenance"]["seed"] == 7
    t = (tmp_path / "run.txt").read_text()
    assert "result: VALID" in t and "kill:leader 1" in t and "lost 0" in t


def test_report_names_a_violation() -> None:
    r = clean_run()
    r.logs[("safe", 0)][0] = r.logs[("safe", 0)][0][:-1]  # node 0 lost its last record
    res = r.check(final_leaders={("safe", 0): 0})
    rep = build(r.h.ops, res, {"seed": 1})
    assert not rep["valid"] and rep["safety"]["lost"] == 1
    assert "result: INVALID" in text(rep) and "lost: p1:4 acked" in text(rep)


def test_isr_expand_is_measured_from_the_end_of_a_fault() -> None:
    h = _history()
    obs = {"topic": "safe", "partition": 0, "node": 0, "role": "leader", "epoch": 1, "replicas": [0, 1, 2]}
    h.event("observer", "observe", {**obs, "isr": [0, 1, 2]})
    _timed(h, 1.0)
    op = h.invoke("nemesis", "nemesis", {"fault": "kill", "target": 2, "role": "follower"})
    _timed(h, 4.0)
    h.event("observer", "observe", {**obs, "isr": [0, 1]})
    _timed(h, 6.0)
    h.ok(op)  # restarted
    _timed(h, 7.5)
    h.event("observer", "observe", {**obs, "isr": [0, 1, 2]})
    lat = latencies(h.ops)
    assert lat["isr_expand_s"]["p50"] == 1.5
    assert lat["isr_shrink_s"]["p50"] == 3.0


def test_state_counts_from_observations() -> None:
    h = _history()
    obs = {"topic": "safe", "partition": 0, "role": "leader", "replicas": [0, 1, 2], "zk": True}
    h.event("observer", "observe", {**obs, "node": 0, "epoch": 0, "isr": [0, 1, 2]})
    _timed(h, 2.0)
    h.event("observer", "observe", {**obs, "node": 0, "epoch": 0, "isr": [0, 1]})  # shrink
    _timed(h, 3.0)
    h.event("observer", "observe", {**obs, "node": 0, "epoch": 0, "isr": [0]})  # shrink, under min ISR 2
    _timed(h, 4.5)
    h.event("observer", "observe", {**obs, "node": -1, "role": "none", "epoch": 1, "isr": [0]})  # no leader
    _timed(h, 5.0)
    h.event("observer", "observe", {**obs, "node": 1, "epoch": 2, "isr": [1]})  # new leader
    _timed(h, 6.0)
    h.event("observer", "observe", {**obs, "node": 1, "epoch": 2, "isr": [0, 1, 2]})  # expand
    _timed(h, 8.0)
    h.event(
        "observer", "observe", {"topic": "safe", "partition": 0, "node": 1, "role": "leader", "epoch": 2, "hw": 5}
    )  # not a ZooKeeper sample: ignored
    d = state_counts(h.ops, {"safe": 2})["safe-0"]
    assert d == {
        "leader_epochs": 2,
        "leader_changes": 1,
        "isr_shrinks": 2,
        "isr_expands": 1,
        "no_leader_s": 0.5,
        "under_min_isr_s": 3.0,
    }
    assert "under_min_isr_s" not in state_counts(h.ops)["safe-0"]
