"""The real cluster under fault injection: node processes on ZooKeeper
(:class:`seglog.process_cluster.ProcessCluster`) with every link through the fault proxy, the
fsync journal on, a state observer, and the nemesis operations of ``replication.md`` §4.2.

Links (directed, one proxy listener each): ``"a->b"`` node a's connections to node b (fetches,
controller requests), ``"a->zk"`` node a's ZooKeeper session, ``"c->a"`` the harness clients'
connections to node a. Nodes learn the peer links from ``SEGLOG_LINK_ADDRESSES``; their
``zookeeper.connect`` and ``advertised.listeners`` name their own links.
"""

from __future__ import annotations

import datetime
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from seglog.log import FSYNC_JOURNAL_ENV
from seglog.process_cluster import ProcessCluster
from seglog.replication.tcp import LINK_ADDRESSES_ENV
from tests.cluster import disk
from tests.cluster.checker import ReplicaState, read_replica
from tests.cluster.history import History
from tests.cluster.proxy import ProxyHub

#: §4.1 timers (lag 3 s, fetch wait 200 ms, 3 s sessions), 256 KiB segments.
REPLICA_CONFIG = {"replica.lag.time.max.ms": 3000, "replica.fetch.wait.max.ms": 200,
                  "session.timeout.ms": 3000, "replica.high.watermark.checkpoint.interval.ms": 1000}
LOG_DEFAULTS = {"segment.bytes": 256 * 1024}
LAG_S = 3.0


class FaultCluster(ProcessCluster):
    """A :class:`ProcessCluster` whose every link runs through :attr:`hub`. ``dir`` is required
    (the run's files stay for the checker and for post-mortems)."""

    def __init__(self, nodes: int, dir: str | os.PathLike[str], *, history: History | None = None,
                 tmpfs_nodes: Iterable[int] = (), tmpfs_size: str = "8m", tmpfs_dir: int = 0, **kw: Any) -> None:
        self.hub = ProxyHub()
        self.history = history
        self._links_made = False
        self.journal = os.path.join(os.fspath(dir), "fsync.journal")
        self._tmpfs_nodes = set(tmpfs_nodes)
        self._tmpfs_size = tmpfs_size
        self._tmpfs_dir = tmpfs_dir  # which of a node's log dirs (``log_dirs=``) is the tmpfs
        self.tmpfs: dict[int, disk.Tmpfs] = {}
        self._env: dict[str, str] = {FSYNC_JOURNAL_ENV: self.journal}
        kw.setdefault("replica_config", dict(REPLICA_CONFIG))
        kw.setdefault("log_defaults", dict(LOG_DEFAULTS))
        try:
            super().__init__(nodes, dir, coordinator="zookeeper", processes=True, **kw)
        except BaseException:
            self._close_extras()
            raise

    # -- wiring --------------------------------------------------------------------------------------

    def _make_links(self) -> None:
        if self._links_made:
            return
        self._links_made = True
        host = self.host
        for a in self.ids:
            for b in self.ids:
                if a != b:
                    self.hub.add(f"{a}->{b}", (host, self._ports[b]))
            zk_host, _, zk_port = self.zookeeper_connect.split(",")[0].rpartition(":")
            self.hub.add(f"{a}->zk", (zk_host, int(zk_port)))
            self.hub.add(f"c->{a}", (host, self._ports[a]))
        self._env[LINK_ADDRESSES_ENV] = ",".join(
            f"{a}>{b}={self.hub.links[f'{a}->{b}'].address}" for a in self.ids for b in self.ids if a != b)

    def _properties(self, i: int) -> dict[str, Any]:
        self._make_links()
        props = super()._properties(i)
        props["zookeeper.connect"] = self.hub.links[f"{i}->zk"].address
        props["advertised.listeners"] = f"PLAINTEXT://{self.hub.links[f'c->{i}'].address}"
        return props

    def address(self, i: int) -> str:
        self._make_links()
        return self.hub.links[f"c->{i}"].address

    def _spawn(self, i: int) -> None:
        if i in self._tmpfs_nodes and i not in self.tmpfs:
            self.tmpfs[i] = disk.Tmpfs(self.node_dirs(i)[self._tmpfs_dir], self._tmpfs_size)
        saved = {k: os.environ.get(k) for k in self._env}
        os.environ.update(self._env)
        try:
            super()._spawn(i)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def _close_extras(self) -> None:
        self.hub.close()
        for fs in self.tmpfs.values():
            fs.close()

    def close(self, timeout_s: float = 30) -> None:
        try:
            super().close(timeout_s)
        finally:
            self._close_extras()

    # -- state ---------------------------------------------------------------------------------------

    def leaders(self, topic: str, partitions: int) -> dict[int, int | None]:
        return {p: self.leader(topic, p) for p in range(partitions)}

    def full_isr(self, topics: dict[str, int]) -> bool:
        for t, n in topics.items():
            for p in range(n):
                st = self.state(t, p)
                if st is None or st.leader < 0 or len(st.isr) != len(self.ids):
                    return False
        return True

    def replica_states(self, topics: dict[str, int]) -> dict[tuple[str, int], list[ReplicaState]]:
        out: dict[tuple[str, int], list[ReplicaState]] = {}
        for t, n in topics.items():
            for p in range(n):
                reps = []
                for i in self.ids:
                    for log_dir in self.node_dirs(i):
                        d = os.path.join(log_dir, f"{t}-{p}")
                        if os.path.isdir(d):
                            reps.append(read_replica(d, i))
                out[(t, p)] = reps
        return out

    # -- nemesis -------------------------------------------------------------------------------------

    def _fault(self, fault: str, target: Any, role: str, led: list[list[Any]] | None = None, **extra: Any) -> int | None:
        """Log a fault's start; :meth:`fault_done` with the returned id logs its end (undone)."""
        if self.history is None:
            return None
        return self.history.invoke("nemesis", "nemesis", {"fault": fault, "target": target, "role": role,
                                                          "led": led or [], **extra})

    def fault_done(self, op: int | None, extra: dict[str, Any] | None = None) -> None:
        if self.history is not None and op is not None:
            self.history.ok(op, extra)

    def led_by(self, node: int, topics: dict[str, int]) -> list[list[Any]]:
        return [[t, p] for t, n in topics.items() for p in range(n) if self.leader(t, p) == node]

    def links_of(self, node: int, *, peers: bool = True, zk: bool = False, clients: bool = False) -> list[str]:
        out = []
        for o in self.ids:
            if o != node and peers:
                out += [f"{node}->{o}", f"{o}->{node}"]
        if zk:
            out.append(f"{node}->zk")
        if clients:
            out.append(f"c->{node}")
        return out

    def heal(self) -> None:
        """Every link back to pass, every paused node resumed, every killed node restarted."""
        if self.history is not None:
            self.history.invoke("nemesis", "nemesis", {"fault": "heal"})
        self.hub.heal()
        for i in list(self._paused):
            self.resume(i)
        for i in self.ids:
            if not self.is_running(i):
                self.restart(i)

    def power_loss(self, node: int, rng: random.Random, keep: str = "durable") -> dict[str, dict[str, int]]:
        """SIGKILL, cut to the fsynced lengths, leave the node down (restart it to bring it back)."""
        if self.is_running(node):
            self.kill(node)
        return disk.power_loss(self.node_dir(node), self.journal, rng, keep)

    def damage_tail(self, node: int, rng: random.Random, how: str) -> list[str]:
        """SIGKILL, then ``torn`` / ``garbage`` / ``flip_last`` / ``flip_older`` every partition's
        active segment (or older batch); the node stays down."""
        if self.is_running(node):
            self.kill(node)
        done = []
        for d in disk.partition_dirs(self.node_dir(node)):
            if not disk.segments_of(d):
                continue
            try:
                if how == "torn":
                    disk.torn_tail(d, rng)
                elif how == "garbage":
                    disk.garbage_tail(d, rng, rng.randint(1, 300))
                elif how == "flip_last":
                    disk.flip_bit(d, rng, "last")
                elif how == "flip_older":
                    disk.flip_bit(d, rng, "older")
                else:
                    raise ValueError(f"unknown tail damage {how!r}")
            except FileNotFoundError:
                continue
            done.append(os.path.basename(d))
        return done

    # -- node logs -> history ------------------------------------------------------------------------

    _LEADS = re.compile(r"^(\S+ \S+) \w+ seglog\.\S+: (\S+)-(\d+): node (\d+) leads epoch (\d+) from offset (\d+)")
    _TRUNC_BELOW = re.compile(r"^(\S+ \S+) \w+ seglog\.\S+: (\S+)-(\d+): node (\d+) truncates below its high "
                              r"watermark (\d+) to (\d+)")
    _TRUNC = re.compile(r"^(\S+ \S+) \w+ seglog\.\S+: (\S+)-(\d+): node (\d+) truncates from (\d+) to (\d+), "
                        r"high watermark (\d+)")
    _ISR = re.compile(r"^(\S+ \S+) \w+ seglog\.\S+: (\S+)-(\d+): leader (\d+) (shrinks|expands) ISR \S.*-> (\(.*?\)|\[.*?\])")

    def scrape_logs(self, history: History) -> dict[str, int]:
        """Add the nodes' own reports to ``history``: leadership (for split-leader epochs),
        truncations (with the HW at the time), ISR changes. Returns counts by kind."""
        counts: dict[str, int] = {}
        wall0 = time.time() - history.now()
        for i in self.ids:
            try:
                with open(self.log_path(i), encoding="utf-8", errors="replace") as f:
                    lines = f.readlines()
            except OSError:
                continue
            for line in lines:
                m = self._LEADS.match(line)
                if m:
                    history.event("node", "observe", {"topic": m.group(2), "partition": int(m.group(3)),
                                                      "node": int(m.group(4)), "role": "leader",
                                                      "epoch": int(m.group(5)), "from_log": True,
                                                      "at": _rel(m.group(1), wall0)})
                    counts["leads"] = counts.get("leads", 0) + 1
                    continue
                m = self._TRUNC_BELOW.match(line)
                if m:
                    history.event("node", "truncate", {"topic": m.group(2), "partition": int(m.group(3)),
                                                       "node": int(m.group(4)), "hw": int(m.group(5)),
                                                       "to": int(m.group(6)), "at": _rel(m.group(1), wall0)})
                    counts["truncations_below_hw"] = counts.get("truncations_below_hw", 0) + 1
                    continue
                m = self._TRUNC.match(line)
                if m:
                    history.event("node", "truncate", {"topic": m.group(2), "partition": int(m.group(3)),
                                                       "node": int(m.group(4)), "to": int(m.group(6)),
                                                       "hw": int(m.group(7)),
                                                       "records": int(m.group(5)) - int(m.group(6)),
                                                       "at": _rel(m.group(1), wall0)})
                    counts["truncations"] = counts.get("truncations", 0) + 1
                    continue
                m = self._ISR.match(line)
                if m:
                    k = "isr_" + m.group(5)
                    counts[k] = counts.get(k, 0) + 1
        return counts


def _rel(stamp: str, wall0: float) -> float:
    try:
        t = datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
    except ValueError:
        return -1.0
    return round(t - wall0, 3)


class Observer:
    """Samples every partition's state from ZooKeeper every ``period`` seconds and logs each
    change as an ``observe`` event (leader, epoch, ISR, replicas)."""

    def __init__(self, cluster: FaultCluster, history: History, topics: dict[str, int], period: float = 0.1) -> None:
        self.cluster = cluster
        self.history = history
        self.topics = topics
        self.period = period
        self._stop = threading.Event()
        self._last: dict[tuple[str, int], tuple[Any, ...]] = {}
        self.errors = 0
        self._thread = threading.Thread(target=self._run, name="observer", daemon=True)

    def start(self) -> Observer:
        self._thread.start()
        return self

    def _run(self) -> None:
        replicas = list(self.cluster.ids)
        while not self._stop.wait(self.period):
            for t, n in self.topics.items():
                for p in range(n):
                    try:
                        st = self.cluster.state(t, p)
                    except Exception:  # noqa: BLE001 - ZooKeeper hiccups are not the cluster's fault
                        self.errors += 1
                        continue
                    if st is None:
                        continue
                    key = (st.leader, st.leader_epoch, tuple(sorted(st.isr)))
                    if self._last.get((t, p)) == key:
                        continue
                    self._last[(t, p)] = key
                    self.history.event("observer", "observe", {
                        "topic": t, "partition": p, "node": st.leader, "role": "leader" if st.leader >= 0 else "none",
                        "epoch": st.leader_epoch, "isr": sorted(st.isr), "replicas": replicas, "zk": True})

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def wait(pred: Callable[[], bool], timeout_s: float, what: str, step: float = 0.05) -> float:
    """Wait for ``pred``; returns the seconds it took; raises TimeoutError naming ``what``."""
    t0 = time.monotonic()
    while True:
        try:
            if pred():
                return time.monotonic() - t0
        except Exception:  # noqa: BLE001 - state reads may fail mid-fault; keep waiting
            pass
        if time.monotonic() - t0 > timeout_s:
            raise TimeoutError(f"{what} not reached within {timeout_s} s")
        time.sleep(step)
