"""One contract, two coordination services: the in-memory coordinator and ZooKeeper (through
kazoo) must behave alike for everything the node and controller rely on — compare-and-set on
versions, atomic multi, ephemerals that vanish with their session, one-shot watches, the
take-over of a stale registration, and controller-epoch fencing. The ZooKeeper cases run
against a real server (``zookeeper_server`` fixture) and expire sessions for real."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from seglog.cluster.coordinator import (
    BadVersionError,
    Check,
    ConnectionLossError,
    Create,
    Delete,
    InMemoryCoordinator,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    SetData,
    WatchEvent,
)
from seglog.util.clock import Clock, Scheduler

_ids = itertools.count()


class Env:
    """A coordinator plus the means to expire one of its sessions for real."""

    def __init__(self, kind: str, coord: Any, expire: Callable[[Any], None], root: str) -> None:
        self.kind = kind
        self.coord = coord
        self.expire = expire
        self.root = root

    def connect(self, **kw: Any) -> Any:
        return self.coord.connect(session_timeout_ms=kw.pop("session_timeout_ms", 2000), **kw)


@pytest.fixture(params=["memory", "zookeeper"])
def env(request: pytest.FixtureRequest) -> Iterator[Env]:
    root = f"/contract-{next(_ids)}-{time.monotonic_ns()}"
    if request.param == "memory":
        clock = Clock()
        sched = Scheduler(clock)
        mem = InMemoryCoordinator(clock, sched, session_timeout_ms=2000, tick_ms=20)

        def expire_mem(s: Any) -> None:
            s._reachable = lambda: False  # no heartbeats arrive: the coordinator expires it
            deadline = time.monotonic() + 5
            while not s.expired and time.monotonic() < deadline:
                for other in mem.sessions():
                    if other is not s:
                        other.heartbeat()  # the other sessions stay alive meanwhile
                time.sleep(0.02)
            s._reachable = None

        e = Env("memory", mem, expire_mem, root)
        s = e.connect()
        s.create(root, b"")
        yield e
        mem.close()
        sched.shutdown()
    else:
        server = request.getfixturevalue("zookeeper_server")
        from kazoo.client import KazooClient  # type: ignore[import-untyped]  # kazoo ships no type information

        from seglog.cluster.zookeeper import ZooKeeperCoordinator

        zk = ZooKeeperCoordinator(server.connect_string, session_timeout_ms=2000)

        def expire_zk(s: Any) -> None:
            # ZooKeeper's own test technique: a second client attaches to the same session and
            # closes it; the server ends the session and the first client learns it has expired.
            sid, pwd = s.client.client_id
            other = KazooClient(server.connect_string, client_id=(sid, pwd), timeout=1.0)
            other.start(5)
            other.stop()
            other.close()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    s.heartbeat()
                except SessionExpiredError:
                    return
                except ConnectionLossError:
                    pass
                time.sleep(0.02)
            raise AssertionError("the ZooKeeper session did not expire")

        e = Env("zookeeper", zk, expire_zk, root)
        s = e.connect()
        s.create(root, b"")
        s.close()
        yield e
        zk.close()


def _wait(pred: Callable[[], bool], what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def test_compare_and_set(env: Env) -> None:
    s = env.connect()
    p = env.root + "/state"
    st0 = s.create(p, b"a")
    assert st0.version == 0 and st0.ephemeral_owner == 0
    with pytest.raises(NodeExistsError):
        s.create(p, b"again")
    st1 = s.set(p, b"b", 0)
    assert st1.version == 1 and st1.czxid == st0.czxid and st1.mzxid > st0.mzxid
    with pytest.raises(BadVersionError):
        s.set(p, b"stale", 0)  # a writer holding version 0 lost the race
    data, st = s.get(p)
    assert (data, st.version) == (b"b", 1)
    with pytest.raises(BadVersionError):
        s.delete(p, 0)
    with pytest.raises(NoNodeError):
        s.get(env.root + "/missing")
    with pytest.raises(NoNodeError):
        s.set(env.root + "/missing", b"x")
    s.create(p + "/child", b"")
    with pytest.raises(NotEmptyError):
        s.delete(p)
    assert s.children(p) == ["child"]
    s.delete(p + "/child")
    s.delete(p, 1)
    assert s.exists(p) is None
    st2 = s.create(env.root + "/a/b/c", b"deep", make_parents=True)
    assert st2.version == 0 and s.get(env.root + "/a/b/c")[0] == b"deep"
    s.close()


def test_multi_is_all_or_nothing(env: Env) -> None:
    s = env.connect()
    epoch, state = env.root + "/epoch", env.root + "/state"
    s.create(epoch, b"1")
    s.create(state, b"s0")
    with pytest.raises(BadVersionError):
        s.multi([SetData(state, b"s1", 0), Check(epoch, 7), Create(env.root + "/new", b"")])
    assert s.get(state)[0] == b"s0" and s.exists(env.root + "/new") is None
    res = s.multi([Check(epoch, 0), SetData(state, b"s1", 0), Create(env.root + "/new", b"n"), Delete(epoch, 0)])
    assert res[1] is not None and res[1].version == 1
    assert res[2] is not None and res[2].version == 0
    assert res[3] is None
    assert s.get(state)[0] == b"s1" and s.exists(epoch) is None
    s.close()


def test_controller_epoch_fences_a_deposed_controller(env: Env) -> None:
    """The controller's writes are conditional on the controller-epoch znode's version: once a
    new controller bumped it, every write of the old one fails and changes nothing."""
    old, new = env.connect(), env.connect()
    epoch, state = env.root + "/controller_epoch", env.root + "/state"
    old.create(epoch, b'{"epoch":1}')
    old.create(state, b"leader=1")
    _, est = old.get(epoch)
    old.multi([Check(epoch, est.version), SetData(state, b"leader=2", 0)])
    _, est2 = new.get(epoch)
    new.set(epoch, b'{"epoch":2}', est2.version)
    with pytest.raises(BadVersionError):
        old.multi([Check(epoch, est.version), SetData(state, b"leader=3", 1)])
    assert new.get(state)[0] == b"leader=2"
    old.close()
    new.close()


def test_ephemerals_and_watches_on_close(env: Env) -> None:
    a, b = env.connect(), env.connect()
    p = env.root + "/controller"
    events: list[WatchEvent] = []
    got = threading.Event()

    def watch(ev: WatchEvent) -> None:
        events.append(ev)
        got.set()

    st = a.create(p, b"a", ephemeral=True)
    assert st.ephemeral_owner == a.session_id != 0
    with pytest.raises(NodeExistsError):
        b.create(p, b"b", ephemeral=True)  # first to create it wins
    assert b.exists(p, watch=watch) is not None
    a.close()
    assert got.wait(10)
    assert [(e.kind, e.path) for e in events] == [("deleted", p)]
    assert b.exists(p) is None
    b.create(p, b"b", ephemeral=True)
    b.close()


def test_watches_fire_once(env: Env) -> None:
    s = env.connect()
    p = env.root + "/w"
    s.create(p, b"0")
    data_events: list[WatchEvent] = []
    child_events: list[WatchEvent] = []
    s.get(p, watch=data_events.append)
    s.children(env.root, watch=child_events.append)
    s.set(p, b"1")
    s.set(p, b"2")
    s.create(env.root + "/x", b"")
    s.create(env.root + "/y", b"")
    _wait(lambda: bool(data_events) and bool(child_events), "watch events")
    time.sleep(0.2)
    assert [(e.kind, e.path) for e in data_events] == [("changed", p)]
    assert [(e.kind, e.path) for e in child_events] == [("children", env.root)]
    s.close()


def test_session_expiry_removes_ephemerals_and_fails_calls(env: Env) -> None:
    """Session expiry is node death: the registration vanishes, watchers hear of it, and the
    expired session refuses every call until its owner connects again."""
    node, ctrl = env.connect(), env.connect()
    reg = env.root + "/ids-1"
    node.create(reg, b"{}", ephemeral=True)
    deleted = threading.Event()
    ctrl.exists(reg, watch=lambda ev: deleted.set() if ev.kind == "deleted" else None)
    env.expire(node)
    assert node.expired
    with pytest.raises(SessionExpiredError):
        node.get(reg)
    assert deleted.wait(10)
    assert ctrl.exists(reg) is None
    again = env.connect()
    st = again.create(reg, b"{}", ephemeral=True)
    assert st.ephemeral_owner == again.session_id != node.session_id
    again.close()
    ctrl.close()


def test_replace_takes_over_a_stale_registration(env: Env) -> None:
    """A restarted node registers at once over its previous incarnation's ephemeral znode,
    with a new czxid (its broker epoch)."""
    old, new = env.connect(), env.connect()
    reg = env.root + "/ids-2"
    st_old = old.create(reg, b"old", ephemeral=True)
    st_new = new.create(reg, b"new", ephemeral=True, replace=True)
    assert st_new.czxid > st_old.czxid and st_new.ephemeral_owner == new.session_id
    assert new.get(reg)[0] == b"new"
    old.close()  # the stale session's end must not take the new registration with it
    time.sleep(0.2)
    assert new.exists(reg) is not None
    with pytest.raises(NodeExistsError):
        new.create(reg, b"mine", ephemeral=True, replace=True)  # our own znode is not replaced
    new.close()


def test_sequential_znodes_count_the_parents_child_changes(env: Env) -> None:
    """A node's log dir failure notification: a persistent sequential znode. Its suffix counts
    the children ever created under the parent, in ten digits, so names never repeat and
    sort in creation order; the parent's children watch hears of it and the znode outlives the
    session that wrote it."""
    s, ctrl = env.connect(), env.connect()
    parent = env.root + "/events"
    s.create(parent, b"")
    heard: list[WatchEvent] = []
    assert ctrl.children(parent, watch=heard.append) == []
    first = s.create_sequential(parent + "/ev_", b'{"broker":1}')
    assert first == parent + "/ev_0000000000"
    _wait(lambda: bool(heard), "the children watch")
    assert [(e.kind, e.path) for e in heard] == [("children", parent)]
    second = s.create_sequential(parent + "/ev_", b'{"broker":2}')
    assert second == parent + "/ev_0000000001"
    s.delete(first)
    third = s.create_sequential(parent + "/ev_", b"")
    assert third == parent + "/ev_0000000002"  # a deletion frees no number
    s.close()
    assert ctrl.children(parent) == ["ev_0000000001", "ev_0000000002"]
    assert ctrl.get(second)[0] == b'{"broker":2}' and ctrl.get(second)[1].ephemeral_owner == 0
    with pytest.raises(NoNodeError):
        ctrl.create_sequential(env.root + "/missing/ev_", b"")
    ctrl.close()
