"""The real cluster under fault injection: node processes on ZooKeeper
(:class:`seglog.cluster.process.ProcessCluster`) with every link through the fault proxy, the
fsync journal on, a state observer, and the nemesis operations of ``docs/replication.md`` §9.3.

Links (directed, one proxy listener each): ``"a->b"`` node a's connections to node b (fetches,
controller requests), ``"a->zk"`` node a's ZooKeeper session, ``"c->a"`` connections to node a's
node-to-node listener from outside the cluster (:meth:`FaultCluster.address`), ``"k->a"``
Kafka clients' connections to node a's CLIENT listener (:attr:`FaultCluster.bootstrap_servers`,
:meth:`FaultCluster.kafka_address`) — the harness's own producers and consumers among them. Nodes learn the
peer links from ``SEGLOG_LINK_ADDRESSES``; their ``zookeeper.connect`` and
``advertised.listeners`` (both listeners) name their own links.
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

from seglog.cluster.netloop import LINK_ADDRESSES_ENV
from seglog.cluster.process import ProcessCluster
from seglog.storage.log import FSYNC_JOURNAL_ENV
from seglog.storage.logdir import parse_partition_dir
from seglog.util.clock import WALL_CLOCK_OFFSET_ENV
from tests.cluster import disk
from tests.cluster.checker import ReplicaState, read_replica
from tests.cluster.churn import FrameTap
from tests.cluster.history import History
from tests.cluster.proxy import ProxyHub

#: §9.2 timers (lag 3 s, fetch wait 200 ms, 3 s sessions), 256 KiB segments.
REPLICA_CONFIG = {
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.wait.max.ms": 200,
    "session.timeout.ms": 3000,
    "replica.high.watermark.checkpoint.interval.ms": 1000,
}
LOG_DEFAULTS = {"segment.bytes": 256 * 1024}
LAG_S = 3.0


class FaultCluster(ProcessCluster):
    """A :class:`ProcessCluster` whose every link runs through :attr:`hub`. ``dir`` is required
    (the run's files stay for the checker and for post-mortems)."""

    def __init__(
        self,
        nodes: int,
        dir: str | os.PathLike[str],
        *,
        history: History | None = None,
        tmpfs_nodes: Iterable[int] = (),
        tmpfs_size: str = "8m",
        tmpfs_dir: int = 0,
        **kw: Any,
    ) -> None:
        self.hub = ProxyHub()
        #: Every AlterPartition request a node sends another through the proxy, byte for byte.
        self.frames = FrameTap()
        self._zk: Any = None
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
            super().__init__(nodes, dir, coordinator="zookeeper", **kw)
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
                    self.frames.attach(self.hub.add(f"{a}->{b}", (host, self._ports[b])))
            zk_host, _, zk_port = self.zookeeper_connect.partition("/")[0].split(",")[0].rpartition(":")
            self.hub.add(f"{a}->zk", (zk_host, int(zk_port)))
            self.hub.add(f"c->{a}", (host, self._ports[a]))
            self.hub.add(f"k->{a}", (host, self._kafka_ports[a]))
        self._env[LINK_ADDRESSES_ENV] = ",".join(
            f"{a}>{b}={self.hub.links[f'{a}->{b}'].address}" for a in self.ids for b in self.ids if a != b
        )

    def _properties(self, i: int) -> dict[str, Any]:
        self._make_links()
        props = super()._properties(i)
        chroot = self.zookeeper_connect.partition("/")[2]  # a shared server's (``zookeeper=``)
        props["zookeeper.connect"] = self.hub.links[f"{i}->zk"].address + (f"/{chroot}" if chroot else "")
        props["advertised.listeners"] = (
            f"PLAINTEXT://{self.hub.links[f'c->{i}'].address},CLIENT://{self.hub.links[f'k->{i}'].address}"
        )
        return props

    def _request_topic(
        self, name: str, partitions: int, replication_factor: int, config: Any, timeout_s: float
    ) -> None:
        self.frames.learn([name])  # AlterPartition names topics by id
        super()._request_topic(name, partitions, replication_factor, config, timeout_s)

    def address(self, i: int) -> str:
        self._make_links()
        return self.hub.links[f"c->{i}"].address

    def kafka_address(self, i: int) -> str:
        """Node ``i``'s Kafka listener through its link ``k->i`` (what Metadata names too)."""
        self._check(i)
        self._make_links()
        return self.hub.links[f"k->{i}"].address

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(self.kafka_address(i) for i in self.ids)

    def clock_offset_path(self, i: int) -> str:
        return os.path.join(self.dir, f"wall-clock-offset-{i}")

    def set_wall_clock_offset(self, node: int, offset_ms: int) -> None:
        """F9: shift node ``node``'s wall clock by ``offset_ms`` (it notices within 50 ms; the
        shift survives restarts until set back to 0)."""
        path = self.clock_offset_path(node)
        with open(path + ".tmp", "w", encoding="ascii") as f:
            f.write(f"{int(offset_ms)}\n")
        os.replace(path + ".tmp", path)

    def _spawn(self, i: int) -> None:
        if i in self._tmpfs_nodes and i not in self.tmpfs:
            self.tmpfs[i] = disk.Tmpfs(self.node_dirs(i)[self._tmpfs_dir], self._tmpfs_size)
        env = {**self._env, WALL_CLOCK_OFFSET_ENV: self.clock_offset_path(i)}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            super()._spawn(i)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def zk(self) -> Any:
        """A kazoo client of the harness's own on ZooKeeper (direct, not through the proxy)."""
        if self._zk is None:
            from kazoo.client import KazooClient  # type: ignore[import-untyped]

            zk = KazooClient(hosts=self.zookeeper_connect, timeout=10)
            zk.start(timeout=10)
            self._zk = zk
        return self._zk

    def _close_extras(self) -> None:
        if self._zk is not None:
            try:
                self._zk.stop()
                self._zk.close()
            except Exception:  # noqa: BLE001 - closing after a failure: best effort
                pass
            self._zk = None
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

    def _fault(
        self, fault: str, target: Any, role: str, led: list[list[Any]] | None = None, **extra: Any
    ) -> int | None:
        """Log a fault's start; :meth:`fault_done` with the returned id logs its end (undone)."""
        if self.history is None:
            return None
        return self.history.invoke(
            "nemesis", "nemesis", {"fault": fault, "target": target, "role": role, "led": led or [], **extra}
        )

    def fault_done(self, op: int | None, extra: dict[str, Any] | None = None) -> None:
        if self.history is not None and op is not None:
            self.history.ok(op, extra)

    def led_by(self, node: int, topics: dict[str, int]) -> list[list[Any]]:
        return [[t, p] for t, n in topics.items() for p in range(n) if self.leader(t, p) == node]

    def links_of(
        self, node: int, *, peers: bool = True, zk: bool = False, clients: bool = False, kafka: bool = False
    ) -> list[str]:
        out = []
        for o in self.ids:
            if o != node and peers:
                out += [f"{node}->{o}", f"{o}->{node}"]
        if zk:
            out.append(f"{node}->zk")
        if clients or kafka:  # the harness's clients are Kafka clients
            out.append(f"k->{node}")
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

    def controller_churn(
        self, topics: dict[str, int], rng: random.Random, how: str = "kill", hold_s: float | None = None
    ) -> dict[str, Any]:
        """F8: stop the controller while an ISR change is in flight. A follower other than the
        controller loses its fetches (its links to its peers blackholed; its ZooKeeper session
        stays, so the controller does not drop it itself), preferably one the other
        non-controller node leads partitions for; that leader's link to the controller is
        delayed 0.8 s, so the AlterPartition it sends to shrink the ISR is still inside the
        proxy when — right as a leader logs the proposal — the controller is SIGKILLed
        (``how="kill"``, restarted after ``hold_s``, default 0.5-3 s) or SIGSTOPped past its
        session (``"pause"``, default 2.5 × lag). Then every link passes again. Returns what
        happened (also the nemesis operation's completion)."""
        if how not in ("kill", "pause"):
            raise ValueError(f"controller churn is 'kill' or 'pause', not {how!r}")
        ctl = self.controller()
        if ctl is None:
            return {"skipped": "no controller"}
        others = [i for i in self.ids if i != ctl]
        led = {i: self.led_by(i, topics) for i in others}
        leading = [i for i in others if led[i]]
        if leading and len(others) > 1:
            proposer = rng.choice(leading)
            follower = rng.choice([i for i in others if i != proposer])
        else:
            follower = rng.choice(others)
        cut = [f"{follower}->{o}" for o in self.ids if o != follower]
        delayed = [f"{i}->{ctl}" for i in self.ids if i not in (ctl, follower)]
        marks = {i: _size(self.log_path(i)) for i in self.ids}
        op = self._fault("controller_churn", ctl, "controller", self.led_by(ctl, topics), how=how, follower=follower)
        self.hub.set(delayed, "delay", delay_ms=800)
        self.hub.set(cut, "blackhole")
        t0 = time.monotonic()
        seen: set[int] = set()
        # Wait for a proposal that travels (from a leader other than the controller) if one can.
        while time.monotonic() - t0 < 4 * LAG_S and not (seen - {ctl} or (seen and not leading)):
            seen = self._shrink_proposed(marks, follower)
            time.sleep(0.02)
        in_flight_s = round(time.monotonic() - t0, 2)
        if how == "kill":
            self.kill(ctl)
            time.sleep(rng.uniform(0.5, 3) if hold_s is None else hold_s)
            self.restart(ctl)
        else:
            self.pause(ctl)
            time.sleep(2.5 * LAG_S if hold_s is None else hold_s)
            self.resume(ctl)
        self.hub.set(delayed + cut, "pass")
        done = {
            "controller": ctl,
            "how": how,
            "follower": follower,
            "proposers": sorted(seen),
            "remote_proposer": bool(seen - {ctl}),
            "proposal_after_s": in_flight_s,
        }
        self.fault_done(op, done)
        return done

    def _shrink_proposed(self, marks: dict[int, int], follower: int) -> set[int]:
        """The leaders whose logs, past ``marks``, propose to drop ``follower`` from an ISR."""
        out = set()
        for i, start in marks.items():
            try:
                with open(self.log_path(i), "rb") as f:
                    f.seek(start)
                    text = f.read().decode("utf-8", "replace")
            except OSError:
                continue
            for m in _SHRINK.finditer(text):
                if follower in {int(x) for x in m.group(4).replace(",", " ").split()}:
                    out.add(int(m.group(3)))
        return out

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

    def scrape_logs(self, history: History) -> dict[str, int]:
        """Add the nodes' own reports to ``history``: leadership (for split-leader epochs),
        truncations with their records and bytes (``kind``: ``follower`` — epoch divergence or
        a log end past the leader's; ``full`` — behind the leader's log start; ``recovery`` — a
        damaged tail cut at startup, measured against the checkpointed HW), ISR change
        proposals, producer-snapshot loads and controller elections. Returns counts by kind."""
        return scrape_node_logs(history, {i: self.log_path(i) for i in self.ids})


_P = r"^(\S+ \S+) \w+ seglog\.\S+: "
_LEADS = re.compile(_P + r"(\S+)-(\d+): node (\d+) leads epoch (\d+) from offset (\d+)")
_TRUNC_BELOW = re.compile(
    _P + r"(\S+)-(\d+): node (\d+) truncates below its high watermark (\d+) to (\d+) "
    r"\(from (\d+); (\d+) records, (\d+) bytes\)"
)
_TRUNC = re.compile(
    _P + r"(\S+)-(\d+): node (\d+) truncates (fully )?from (\d+) to (\d+) "
    r"\((\d+) records, (\d+) bytes\), high watermark (\d+)"
)
_RECOVERY = re.compile(
    _P + r"(\S+): recovery truncates to (\d+) \((\d+) records, (\d+) bytes\), "
    r"checkpointed high watermark (-?\d+)"
)
_ISR = re.compile(_P + r"(\S+)-(\d+): leader (\d+) (shrinks|expands) ISR \S.*-> (\(.*?\)|\[.*?\])")
_SHRINK = re.compile(r"(\S+)-(\d+): leader (\d+) shrinks ISR .*?\(lagging \[([^\]]*)\]\)")
_SNAPSHOT = re.compile(_P + r"(\S+)-(\d+): node (\d+) loaded producer state from a snapshot")
_CONTROLLER = re.compile(_P + r"node (\d+) is controller \(epoch (\d+)\)")


def scrape_node_logs(history: History, logs: dict[int, str]) -> dict[str, int]:
    """:meth:`FaultCluster.scrape_logs` over ``{node id: its log file}``."""
    counts: dict[str, int] = {}
    wall0 = time.time() - history.now()

    def bump(k: str, n: int = 1) -> None:
        counts[k] = counts.get(k, 0) + n

    def truncation(
        m: re.Match[str],
        topic: str,
        part: int,
        node: int,
        frm: int | None,
        to: int,
        records: int,
        nbytes: int,
        hw: int | None,
        kind: str,
    ) -> None:
        history.event(
            "node",
            "truncate",
            {
                "topic": topic,
                "partition": part,
                "node": node,
                "from": frm,
                "to": to,
                "hw": hw,
                "records": records,
                "bytes": nbytes,
                "kind": kind,
                "at": _rel(m.group(1), wall0),
            },
        )
        bump("truncations")
        bump(f"truncations_{kind}")
        bump("truncated_records", records)
        bump("truncated_bytes", nbytes)

    for i, path in sorted(logs.items()):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.readlines()
        except OSError:
            continue
        for line in lines:
            if "seglog." not in line:
                continue
            m = _LEADS.match(line)
            if m:
                history.event(
                    "node",
                    "observe",
                    {
                        "topic": m.group(2),
                        "partition": int(m.group(3)),
                        "node": int(m.group(4)),
                        "role": "leader",
                        "epoch": int(m.group(5)),
                        "from_log": True,
                        "at": _rel(m.group(1), wall0),
                    },
                )
                bump("leads")
                continue
            m = _TRUNC_BELOW.match(line)
            if m:
                truncation(
                    m,
                    m.group(2),
                    int(m.group(3)),
                    int(m.group(4)),
                    int(m.group(7)),
                    int(m.group(6)),
                    int(m.group(8)),
                    int(m.group(9)),
                    int(m.group(5)),
                    "follower",
                )
                bump("truncations_below_hw")
                continue
            m = _TRUNC.match(line)
            if m:
                truncation(
                    m,
                    m.group(2),
                    int(m.group(3)),
                    int(m.group(4)),
                    int(m.group(6)),
                    int(m.group(7)),
                    int(m.group(8)),
                    int(m.group(9)),
                    int(m.group(10)),
                    "full" if m.group(5) else "follower",
                )
                continue
            m = _RECOVERY.match(line)
            if m:
                parsed = parse_partition_dir(os.path.basename(m.group(2).rstrip("/")))
                if parsed is not None:
                    hw = int(m.group(6))
                    truncation(
                        m,
                        parsed[0],
                        parsed[1],
                        i,
                        None,
                        int(m.group(3)),
                        int(m.group(4)),
                        int(m.group(5)),
                        hw if hw >= 0 else None,
                        "recovery",
                    )
                continue
            m = _ISR.match(line)
            if m:
                bump("isr_" + m.group(5))
                continue
            if _SNAPSHOT.match(line):
                bump("producer_snapshot_loads")
                continue
            if _CONTROLLER.match(line):
                bump("controller_elections")
    return counts


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


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
                    self.history.event(
                        "observer",
                        "observe",
                        {
                            "topic": t,
                            "partition": p,
                            "node": st.leader,
                            "role": "leader" if st.leader >= 0 else "none",
                            "epoch": st.leader_epoch,
                            "isr": sorted(st.isr),
                            "replicas": replicas,
                            "zk": True,
                        },
                    )

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
