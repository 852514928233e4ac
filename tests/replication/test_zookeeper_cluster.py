"""The unchanged node and controller code on the ZooKeeper coordinator, in one process
(``LocalCluster(coordinator="zookeeper")``): elections after a leader's death, a new
controller with a higher epoch after the controller's death, and the deposed controller's
writes fenced."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from seglog.cluster.coordinator import BadVersionError
from seglog.cluster.local import LocalCluster
from seglog.cluster.metadata import CONTROLLER_EPOCH_PATH, loads

pytestmark = pytest.mark.cluster


@pytest.fixture
def cluster(zookeeper_chroot: str, tmp_path: Any) -> Iterator[LocalCluster]:
    with LocalCluster(nodes=3, dir=tmp_path / "c", coordinator="zookeeper", zookeeper=zookeeper_chroot) as c:
        yield c


def _epoch(cluster: LocalCluster) -> int:
    r = cluster.coordinator.read(CONTROLLER_EPOCH_PATH)
    assert r is not None
    return int(loads(r[0])["epoch"])


def test_leader_death_elects_from_the_isr(cluster: LocalCluster) -> None:
    cluster.create_topic("t", partitions=2, replication_factor=3, config={"min.insync.replicas": 2})
    producer = cluster.producer(acks="all", enable_idempotence=True)
    acked = {b"v%d" % i: producer.send("t", b"v%d" % i, partition=0).result(30).offset for i in range(100)}
    leader = cluster.leader("t", 0)
    assert leader is not None
    cluster.kill(leader)
    cluster.wait_for(lambda: cluster._state("t", 0).leader not in (-1, leader), 20, "a new leader")  # type: ignore[union-attr]
    st = cluster.state("t", 0)
    assert st is not None and st.leader in st.isr and leader not in st.isr
    acked[b"after"] = producer.send("t", b"after", partition=0).result(30).offset
    producer.close()
    consumer = cluster.consumer()
    consumer.assign([("t", 0)])
    got: list[Any] = []
    while len(got) < len(acked):
        batch = consumer.poll(3000)
        assert batch, f"only {len(got)} of {len(acked)} records came back"
        got += batch
    consumer.close()
    assert {r.value: r.offset for r in got} == acked


def test_controller_death_and_fencing(cluster: LocalCluster) -> None:
    cluster.create_topic("c", partitions=1, replication_factor=3)
    old = cluster._controller()
    assert old is not None
    old_node = cluster.nodes[old]
    assert old_node is not None and old_node.controller is not None
    old_ctrl, old_session = old_node.controller, old_node.session
    epoch = _epoch(cluster)
    assert old_ctrl.epoch == epoch
    cluster.kill(old)
    cluster.wait_for(lambda: cluster._controller() not in (None, old), 20, "a new controller")
    assert _epoch(cluster) == epoch + 1
    # A deposed controller's conditional write fails: another session bumped the epoch's version.
    new = cluster._controller()
    assert new is not None
    node = cluster.nodes[new]
    assert node is not None and node.session is not None and node.controller is not None
    from seglog.cluster.coordinator import Check, SetData
    from seglog.cluster.metadata import state_path

    def stale_write() -> None:
        s = node.session
        assert s is not None
        _, st = s.get(state_path("c", 0))
        s.multi([Check(CONTROLLER_EPOCH_PATH, old_ctrl.epoch_version), SetData(state_path("c", 0), b"{}", st.version)])

    with pytest.raises(BadVersionError):
        cluster._on_loop(stale_write)
    assert old_session is not None and old_session.expired
    st = cluster.state("c", 0)
    assert st is not None and st.leader not in (-1, old)
