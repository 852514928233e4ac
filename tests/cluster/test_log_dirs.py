"""Several log dirs per node on the real cluster (three node processes on ZooKeeper, every link
through the fault proxy): one node's second log dir is a size-limited tmpfs that fills up. Only
that dir goes offline — its partitions' leadership moves to the other nodes and its replicas
leave their ISRs — while the node stays up and keeps leading the partitions in its healthy dir.
After space is freed and the node restarts, its replicas recover and rejoin. The background
workload and the full checker (tests.cluster.scenario) say no acknowledged acks=all record was
lost. The in-process version: tests/replication/test_log_dirs.py."""

from __future__ import annotations

import os
from typing import Any

import pytest

from seglog.cluster.metadata import LOG_DIR_EVENT_PATH, broker_path, loads
from tests.cluster.scenario import Scenario

pytestmark = pytest.mark.cluster

PARTITIONS = 6
TMPFS_DIR = 1  # each node's second log dir is a tmpfs


@pytest.fixture
def scenario_kw() -> dict[str, Any]:
    return {
        "topics": {"safe": PARTITIONS},
        "log_dirs": 2,
        "tmpfs_nodes": (0, 1, 2),
        "tmpfs_dir": TMPFS_DIR,
        "tmpfs_size": "16m",
    }


def _home(sc: Scenario, node: int, p: int) -> int:
    dirs = [k for k, d in enumerate(sc.c.node_dirs(node)) if os.path.isdir(os.path.join(d, f"safe-{p}"))]
    assert len(dirs) == 1, f"safe-{p} on node {node} is in dirs {dirs}"
    return dirs[0]


def _acked(sc: Scenario, p: int) -> int:
    return sum(
        1
        for o in sc.history.ops
        if o.f == "send" and o.type == "ok" and o.value["topic"] == "safe" and o.value["partition"] == p
    )


def test_a_full_log_dir_goes_offline_alone(sc: Scenario) -> None:
    sc.wait(lambda: sc.acked() >= 60, 20, "60 acked writes")
    leaders = {p: sc.c.leader("safe", p) for p in range(PARTITIONS)}
    # Every node holds every partition; each leads two, one in each dir (placement alternates).
    node = next(n for n in sc.c.ids if {_home(sc, n, p) for p, lead in leaders.items() if lead == n} == {0, 1})
    homes = {p: _home(sc, node, p) for p in range(PARTITIONS)}
    assert sorted(homes.values()) == [0, 0, 0, 1, 1, 1]  # fewest partitions first: 3 and 3
    full = [p for p in range(PARTITIONS) if homes[p] == TMPFS_DIR]
    kept = [p for p in range(PARTITIONS) if homes[p] != TMPFS_DIR and leaders[p] == node]
    moving = [p for p in full if leaders[p] == node]
    assert kept and moving

    sc.c.tmpfs[node].fill()
    sc.wait(
        lambda: all(sc.c.leader("safe", p) not in (None, node) for p in moving),
        15,
        f"leadership of {moving} off node {node}",
    )
    sc.wait(lambda: all(node not in sc.c.isr("safe", p) for p in full), 15, f"node {node} out of the ISRs of {full}")
    assert sc.c.is_running(node)
    # Through ZooKeeper: the registration lists the offline replicas (every partition in the
    # full dir), and the controller consumed the notification.
    tmpfs_dir = sc.c.node_dirs(node)[TMPFS_DIR]
    on_tmpfs = sorted(
        [n.rpartition("-")[0], int(n.rpartition("-")[2])]
        for n in os.listdir(tmpfs_dir)
        if n.rpartition("-")[2].isdigit()
    )
    reg = loads(sc.c.coordinator.read(broker_path(node))[0])
    assert reg["offline_log_dirs"] == [tmpfs_dir] and reg["offline_replicas"] == on_tmpfs
    assert {tuple(tp) for tp in on_tmpfs} >= {("safe", p) for p in full}
    sc.wait(lambda: sc.c.coordinator.children_of(LOG_DIR_EVENT_PATH) == [], 10, "the notification consumed")
    before = {p: _acked(sc, p) for p in kept}
    sc.wait(
        lambda: all(_acked(sc, p) >= before[p] + 20 for p in kept),
        15,
        f"more acked writes to {kept}, led by node {node}",
    )
    assert all(sc.c.leader("safe", p) == node for p in kept)
    assert all(node in sc.c.isr("safe", p) for p in kept)
    assert sc.c.is_running(node)
    with open(sc.c.log_path(node), encoding="utf-8", errors="replace") as f:
        out = f.read()
    assert f"log dir {sc.c.node_dirs(node)[TMPFS_DIR]} failed" in out and "halting" not in out

    sc.c.tmpfs[node].free()
    assert sc.c.terminate(node) == 0  # a clean stop: only the healthy dir gets its marker
    assert os.path.exists(os.path.join(sc.c.node_dirs(node)[0], ".kafka_cleanshutdown"))
    assert not os.path.exists(os.path.join(sc.c.node_dirs(node)[TMPFS_DIR], ".kafka_cleanshutdown"))
    sc.c.start(node)
    sc.finish_ok(full_isr_s=30)
