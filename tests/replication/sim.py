"""A deterministic cluster harness and a seeded simulation with named invariants.

:class:`SimCluster` runs real :class:`~seglog.cluster.node.ReplicaNode` objects with real
partition logs on disk, over the in-memory network and coordinator, all on one
:class:`~seglog.util.clock.ManualClock`: nothing sleeps, and the same seed replays the same run.
It offers the faults of ``docs/replication.md`` §9.3 that make sense in one process: kill (the
page cache survives), power loss (everything after the last fsync is cut at a random byte),
clean restart, pause (SIGSTOP), link cuts and delays, node <-> coordinator cuts.

:class:`Simulation` drives random workloads (idempotent and plain producers, consumers) and
faults for a number of steps, checking the invariants of §9.5 after every step and at the end
(after healing everything): see :class:`Checker`. A failure raises :class:`SimulationFailure`
with the seed, the step and the recent events.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import random
import shutil
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

from seglog.cluster import mutations as mut
from seglog.cluster.coordinator import InMemoryCoordinator
from seglog.cluster.messages import (
    CONSUMER_REPLICA_ID,
    NONE,
    CreateTopicRequest,
    CreateTopicResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    ElectLeadersRequest,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from seglog.cluster.metadata import NO_LEADER, PartitionState, ReplicaConfig, state_path
from seglog.cluster.node import ReplicaNode
from seglog.cluster.partition import Partition, Role
from seglog.cluster.transport import GuardedScheduler, InMemoryNetwork
from seglog.errors import (
    NotEnoughReplicasError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    error_for_code,
)
from seglog.storage.records import batch_headers, decode_records, encode_batch
from seglog.util.clock import ManualClock, Scheduler

ADMIN = 1000

FAST = ReplicaConfig(
    replica_lag_time_max_ms=3000,
    replica_fetch_wait_max_ms=200,
    replica_fetch_backoff_ms=100,
    replica_fetch_max_bytes=4096,
    replica_fetch_response_max_bytes=16384,
    replica_socket_timeout_ms=2000,
    session_timeout_ms=3000,
    replica_high_watermark_checkpoint_interval_ms=1000,
    controller_socket_timeout_ms=2000,
)


class SimulationFailure(AssertionError):
    pass


class TappedNetwork(InMemoryNetwork):
    """The in-memory network with a tap on the follower fetches: ``fetch_tap(node, request,
    response, applied)`` runs after a node has applied a fetch response, ``applied`` naming the
    partitions whose replica was ready to take it (a follower in the epoch the fetch named, its
    log still ending at the fetch offset)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fetch_tap: Callable[[int, FetchRequest, FetchResponse, set[tuple[str, int]]], None] | None = None
        self.nodes: dict[int, ReplicaNode | None] = {}

    def request(self, src: int, dst: int, message: Any, callback: Any, timeout_ms: int) -> None:
        tap = self.fetch_tap
        if tap is None or not isinstance(message, FetchRequest) or message.replica_id < 0:
            super().request(src, dst, message, callback, timeout_ms)
            return

        def tapped(resp: Any, err: BaseException | None) -> None:
            n = self.nodes.get(src)
            ready: set[tuple[str, int]] = set()
            if n is not None and n.running and err is None and isinstance(resp, FetchResponse):
                for fp in message.partitions:
                    q = n.partitions.get((fp.topic, fp.partition))
                    if (
                        q is not None
                        and q.role is Role.FOLLOWER
                        and q.leader_epoch == fp.current_leader_epoch
                        and q.log_end_offset == fp.fetch_offset
                    ):
                        ready.add((fp.topic, fp.partition))
            errors = n.stats.get("fetch_apply_errors", 0) if n is not None else 0
            callback(resp, err)
            # Not after an append that failed part-way: the fetcher backs off and asks again.
            if ready and n is not None and n.running and n.stats.get("fetch_apply_errors", 0) == errors:
                tap(src, message, resp, ready)

        super().request(src, dst, message, tapped, timeout_ms)


class NotReached(SimulationFailure):
    """``run_until`` gave up waiting."""


class SimCluster:
    """Nodes, network, coordinator and clock for one deterministic run (see module docs)."""

    def __init__(
        self,
        root: str,
        *,
        nodes: int = 3,
        seed: int = 0,
        config: ReplicaConfig = FAST,
        log_defaults: dict[str, Any] | None = None,
        mutants: Iterable[str] = (),
        net_delay: tuple[int, int] = (1, 3),
        log_dirs: int = 1,
    ) -> None:
        self.root = root
        self.log_dirs = log_dirs
        self.seed = seed
        self.rng = random.Random(seed)
        self.config = config
        self.log_defaults = {
            "flush.ms": 1000,
            "segment.bytes": 64 * 1024,
            "message.timestamp.before.max.ms": 2**62,
            "message.timestamp.after.max.ms": 2**62,
        }
        self.log_defaults.update(log_defaults or {})
        self.mutants = mut.check(frozenset(mutants))
        self.clock = ManualClock()
        self.errors: list[tuple[str, BaseException]] = []
        self.scheduler = Scheduler(self.clock, on_error=lambda n, e: self.errors.append((n, e)))
        self.net = TappedNetwork(self.scheduler, random.Random(seed * 31 + 7), delay_ms=net_delay)
        self.coord = InMemoryCoordinator(self.clock, self.scheduler, session_timeout_ms=config.session_timeout_ms)
        self.ids = list(range(nodes))
        self.nodes: dict[int, ReplicaNode | None] = dict.fromkeys(self.ids)
        self.net.nodes = self.nodes
        self._gs: dict[int, GuardedScheduler] = {}
        self.paused: set[int] = set()
        self.lost_tail: dict[int, set[tuple[str, int]]] = {i: set() for i in self.ids}
        self.events: deque[str] = deque(maxlen=60)
        self.power_losses = 0
        self.admin_inbox: list[Any] = []
        self.net.register(ADMIN, lambda *a: None)
        for i in self.ids:
            self.start_node(i)

    # -- nodes ------------------------------------------------------------------------------------

    def node_dir(self, i: int) -> str:
        return os.path.join(self.root, f"node-{i}")

    def node_dirs(self, i: int) -> list[str]:
        """Node ``i``'s log dirs (``log_dirs`` of them; the first is :meth:`node_dir`)."""
        return [self.node_dir(i)] + [f"{self.node_dir(i)}.dir{k}" for k in range(1, self.log_dirs)]

    def start_node(self, i: int) -> ReplicaNode:
        gs = GuardedScheduler(self.scheduler)
        self._gs[i] = gs
        n = ReplicaNode(
            i,
            self.node_dirs(i),
            coordinator=self.coord,
            transport=self.net,
            clock=self.clock,
            scheduler=gs,
            config=self.config,
            log_defaults=self.log_defaults,
            mutants=self.mutants,
            coordinator_reachable=functools.partial(self.net.coordinator_reachable, i),
        )
        self.nodes[i] = n
        n.start()
        self.event(f"start node {i} ({'clean' if n.started_clean else 'unclean'})")
        return n

    def node(self, i: int) -> ReplicaNode:
        n = self.nodes[i]
        assert n is not None and n.running, f"node {i} is not running"
        return n

    def running(self) -> list[int]:
        return [i for i, n in self.nodes.items() if n is not None and n.running]

    def alive(self) -> list[int]:
        """Running and not paused."""
        return [i for i in self.running() if i not in self.paused]

    def event(self, text: str) -> None:
        self.events.append(f"t={self.clock.monotonic_ms()} {text}")

    def crash(self, i: int, *, power_loss: bool = False, keep: str = "random") -> None:
        """Kill node ``i``; with ``power_loss`` its unflushed bytes are lost too, cut at a random
        byte (``keep="random"``) or exactly at the last fsync (``keep="durable"``)."""
        n = self.nodes[i]
        if n is None or not n.running:
            return
        if i in self.paused:
            self.resume(i)
        cuts = self._durable_cuts(n) if power_loss else {}
        self._gs[i].kill()
        n.crash()
        self.nodes[i] = None
        if power_loss:
            self.power_losses += 1
            self._apply_power_loss(n, cuts, keep)
        self.event(f"{'power loss' if power_loss else 'kill'} node {i}")

    def shutdown(self, i: int, *, deregister: bool = False) -> None:
        n = self.nodes[i]
        if n is None or not n.running:
            return
        if i in self.paused:
            self.resume(i)
        self._gs[i].kill()
        n.shutdown(deregister=deregister)
        self.nodes[i] = None
        self.event(f"clean shutdown node {i}")

    def restart(self, i: int) -> ReplicaNode:
        if self.nodes[i] is not None:
            self.crash(i)
        return self.start_node(i)

    def pause(self, i: int) -> None:
        if self.nodes[i] is None or i in self.paused:
            return
        self.paused.add(i)
        self._gs[i].paused = True
        self.net.pause(i)
        self.net.cut_coordinator(i)
        self.event(f"pause node {i}")

    def resume(self, i: int) -> None:
        if i not in self.paused:
            return
        self.paused.discard(i)
        self.net._coordinator_cut.discard(i)
        self._gs[i].resume()
        self.net.resume(i)
        self.event(f"resume node {i}")

    def heal(self) -> None:
        self.net.heal()
        for i in list(self.paused):
            self.net.cut_coordinator(i)  # a paused process still cannot talk
        self.event("heal network")

    # -- power loss -------------------------------------------------------------------------------

    def _durable_cuts(self, n: ReplicaNode) -> dict[str, tuple[list[tuple[str, int, int]], int]]:
        """Per partition dir: the segments after the recovery point as (path, durable bytes,
        written bytes), in order."""
        out = {}
        for p in n.partitions.values():
            lg = p.log
            rp = lg.recovery_point
            segs = []
            for seg in lg.segments:
                if seg.next_offset <= rp:
                    continue
                durable = 0
                if seg.base_offset < rp:
                    b = seg.translate_offset(rp)
                    durable = b.position if b is not None else seg.size
                segs.append((seg.log_path, durable, seg.size))
            out[lg.dir] = (segs, rp)
        return out

    def _apply_power_loss(
        self, n: ReplicaNode, cuts: dict[str, tuple[list[tuple[str, int, int]], int]], keep: str = "random"
    ) -> None:
        for d, (segs, _rp) in cuts.items():
            if not segs:
                continue
            # One random byte position among the unsynced bytes; everything after it is lost.
            total = sum(size - durable for _, durable, size in segs)
            pick = self.rng.randint(0, total) if keep == "random" else 0
            for k, (path, durable, size) in enumerate(segs):
                span = size - durable
                if pick <= span:
                    cut = durable + pick
                    _truncate(path, cut)
                    prefix = path[: -len(".log")]
                    for ext in (".index", ".timeindex"):
                        _truncate(prefix + ext, 0)
                    for later, _, _ in segs[k + 1 :]:
                        lp = later[: -len(".log")]
                        for ext in (".log", ".index", ".timeindex", ".txnindex"):
                            if os.path.exists(lp + ext):
                                os.unlink(lp + ext)
                    break
                pick -= span
            tp = _tp_of_dir(d)
            if tp is not None:
                self.lost_tail[n.node_id].add(tp)
        if mut.EPOCH_CACHE_NO_FSYNC in self.mutants:
            for path, content in n.durable_epoch_files.items():
                if content is None:
                    if os.path.exists(path):
                        os.unlink(path)
                else:
                    with open(path, "wb") as f:
                        f.write(content)

    # -- time -------------------------------------------------------------------------------------

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        if self.errors:
            name, exc = self.errors[0]
            raise SimulationFailure(f"task {name!r} raised {exc!r}") from exc

    def run_until(
        self, pred: Callable[[], bool], timeout_ms: int = 30_000, step_ms: int = 10, what: str = "condition"
    ) -> None:
        waited = 0
        while not pred():
            if waited >= timeout_ms:
                raise NotReached(f"{what} not reached within {timeout_ms} ms\n" + self.describe())
            self.advance(step_ms)
            waited += step_ms

    # -- requests from the harness ----------------------------------------------------------------

    def request(self, dst: int, msg: Any, timeout_ms: int = 2000) -> list[Any]:
        box: list[Any] = []
        self.net.request(ADMIN, dst, msg, lambda r, e: box.append((r, e)), timeout_ms)
        return box

    def call(self, dst: int, msg: Any, timeout_ms: int = 2000) -> Any:
        box = self.request(dst, msg, timeout_ms)
        self.run_until(lambda: bool(box), timeout_ms + 100, 1, f"answer to {type(msg).__name__}")
        resp, err = box[0]
        if err is not None:
            raise err
        return resp

    def controller(self) -> int:
        for i in self.running():
            n = self.nodes[i]
            if n is not None and n.controller is not None and n.controller.active:
                return i
        return -1

    def wait_controller(self, timeout_ms: int = 20_000) -> int:
        self.run_until(
            lambda: self.controller() >= 0 and self.controller() not in self.paused, timeout_ms, 10, "a controller"
        )
        return self.controller()

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        rf: int = 3,
        config: dict[str, Any] | None = None,
        assignment: tuple[tuple[int, ...], ...] = (),
    ) -> CreateTopicResponse:
        import json

        c = self.wait_controller()
        cfg = tuple((k, json.dumps(v)) for k, v in (config or {}).items())
        resp = self.call(c, CreateTopicRequest(name, partitions, rf, cfg, assignment))
        assert isinstance(resp, CreateTopicResponse)
        if resp.error != NONE:
            raise error_for_code(resp.error)(resp.message)
        for p in range(partitions):
            self.run_until(
                functools.partial(self._has_leader, (name, p)),
                10_000,
                5,
                f"a leader for {name}-{p}",
            )
        return resp

    def init_producer_id(self) -> tuple[int, int]:
        resp = self.call(self.wait_controller(), InitProducerIdRequest())
        assert isinstance(resp, InitProducerIdResponse) and resp.error == NONE, resp
        return resp.producer_id, resp.producer_epoch

    def produce(
        self,
        tp: tuple[str, int],
        values: list[bytes],
        *,
        acks: int = -1,
        dst: int | None = None,
        pid: int = -1,
        epoch: int = -1,
        seq: int = -1,
        timeout_ms: int = 5000,
    ) -> list[Any]:
        """Send one batch to ``dst`` (default: the current leader); the box fills with
        (response, error)."""
        batch = encode_batch(
            values, timestamps=self.clock.time_ms(), producer_id=pid, producer_epoch=epoch, base_sequence=seq
        )
        target = self.leader_of(tp) if dst is None else dst
        return self.request(target, ProduceRequest(tp[0], tp[1], batch, acks, timeout_ms), timeout_ms + 1000)

    def produce_ok(self, tp: tuple[str, int], values: list[bytes], **kw: Any) -> ProduceResponse:
        box = self.produce(tp, values, **kw)
        self.run_until(lambda: bool(box), 10_000, 1, "a produce response")
        resp, err = box[0]
        if err is not None:
            raise err
        assert isinstance(resp, ProduceResponse)
        if resp.error != NONE:
            raise error_for_code(resp.error)(resp.message)
        return resp

    def values(self, i: int, tp: tuple[str, int]) -> dict[int, bytes]:
        p = self.replica(i, tp)
        assert p is not None, f"node {i} does not host {tp}"
        return log_values(p)

    def elect_preferred(self, tp: tuple[str, int]) -> Any:
        return self.call(self.wait_controller(), ElectLeadersRequest(tp[0], tp[1]))

    # -- views ------------------------------------------------------------------------------------

    def state(self, tp: tuple[str, int]) -> PartitionState | None:
        r = self.coord.read(state_path(*tp))
        return None if r is None else PartitionState.from_json(r[0], r[1].version)

    def leader_of(self, tp: tuple[str, int]) -> int:
        st = self.state(tp)
        return NO_LEADER if st is None else st.leader

    def replica(self, i: int, tp: tuple[str, int]) -> Partition | None:
        n = self.nodes.get(i)
        if n is None or not n.running:
            return None
        return n.partitions.get(tp)

    def _has_leader(self, tp: tuple[str, int]) -> bool:
        return self.leader_of(tp) >= 0 and self.leader_replica(tp) is not None

    def leader_replica(self, tp: tuple[str, int]) -> Partition | None:
        st = self.state(tp)
        if st is None or st.leader < 0:
            return None
        p = self.replica(st.leader, tp)
        if p is None or not p.is_leader or p.leader_epoch != st.leader_epoch:
            return None
        return p

    def describe(self) -> str:
        lines = [f"seed {self.seed}, t={self.clock.monotonic_ms()} ms, paused {sorted(self.paused)}"]
        for i in self.ids:
            n = self.nodes[i]
            if n is None:
                lines.append(f"  node {i}: down")
                continue
            lines.append(f"  node {i}: broker epoch {n.broker_epoch}, controller={n.controller is not None}")
            for tp, p in sorted(n.partitions.items()):
                lines.append(
                    f"    {tp[0]}-{tp[1]}: {p.role.value} epoch {p.leader_epoch} leader {p.leader} "
                    f"isr {p.isr_state.isr}{' ' + str(p.isr_state.pending) if p.isr_state.pending else ''} "
                    f"hw {p.high_watermark} leo {p.log_end_offset} cache {p.log.epoch_cache.entries()}"
                )
        for k, v in sorted(self.coord.dump().items()):
            if "/state" in k:
                lines.append(f"  {k}: {v.decode()}")
        lines.append("  recent events:")
        lines += [f"    {e}" for e in self.events]
        return "\n".join(lines)

    def close(self) -> None:
        for i in self.ids:
            n = self.nodes[i]
            if n is not None and n.running:
                self._gs[i].kill()
                n.crash()
        self.scheduler.shutdown()

    def wipe(self) -> None:
        self.close()
        shutil.rmtree(self.root, ignore_errors=True)


def _truncate(path: str, size: int) -> None:
    if os.path.exists(path):
        with open(path, "r+b") as f:
            f.truncate(size)


def _tp_of_dir(d: str) -> tuple[str, int] | None:
    name = os.path.basename(d)
    topic, _, part = name.rpartition("-")
    return (topic, int(part)) if part.isdigit() else None


def log_values(p: Partition, upper: int | None = None) -> dict[int, bytes]:
    """offset -> value of a replica's log (below ``upper``, default its log end)."""
    lg = p.log
    end = lg.log_end_offset if upper is None else upper
    out: dict[int, bytes] = {}
    off = lg.log_start_offset
    while off < end:
        res = lg.read(off, 1 << 20, upper_bound=end)
        data = res.to_bytes()
        del res
        if not data:
            break
        for r in decode_records(data):
            if off <= r.offset < end:
                out[r.offset] = r.value or b""
        off = batch_headers(data)[-1].last_offset + 1
    return out


def epochs_with_data(p: Partition) -> list[tuple[int, int]]:
    """The epoch cache without a last epoch that holds no record yet (a leader records its
    epoch at election; followers learn it from the first batch)."""
    entries = p.log.epoch_cache.entries()
    if entries and entries[-1][1] >= p.log_end_offset:
        entries = entries[:-1]
    return entries


def batch_fingerprints(p: Partition) -> list[tuple[int, int, int, int, int, int, int]]:
    return [
        (
            b.base_offset,
            b.last_offset,
            b.partition_leader_epoch,
            b.producer_id,
            b.producer_epoch,
            b.base_sequence,
            b.records_count,
        )
        for b in p.log.batches()
        if b.last_offset >= p.log.log_start_offset  # whole segments go: where they end may differ
    ]


# ---------------------------------------------------------------------------------------------------
# History and checker
# ---------------------------------------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class Send:
    client: int
    tp: tuple[str, int]
    values: tuple[bytes, ...]
    idempotent: bool
    status: str = "pending"  # pending | ok | fail | info
    first_offset: int = -1
    attempts: int = 0
    definite_failures: int = 0
    indeterminate: int = 0


class Checker:
    """The properties of ``docs/replication.md`` §9.5 over one run's history and node states."""

    def __init__(self, cluster: SimCluster, *, safe_topics: set[str], strict_truncation: bool) -> None:
        self.c = cluster
        self.safe_topics = safe_topics
        self.strict_truncation = strict_truncation
        self.sends: list[Send] = []
        self.acked: dict[tuple[str, int], dict[int, bytes]] = {}
        self.polled: dict[tuple[str, int], dict[int, bytes]] = {}
        self.value_send: dict[bytes, Send] = {}
        self.leaders: dict[tuple[tuple[str, int], int], int] = {}
        self.hw_seen: dict[tuple[int, tuple[str, int], int], int] = {}
        self.duplicates_allowed = 0
        self.counts: dict[str, int] = {}
        #: The highest offset a DeleteRecords request named, per partition (answered or not, the
        #: leader's log start moved): records below it may be gone.
        self.delete_requested: dict[tuple[str, int], int] = {}
        cluster.net.fetch_tap = self.on_follower_fetch

    def fail(self, text: str) -> NoReturn:
        raise SimulationFailure(f"{text}\n{self.c.describe()}")

    def count(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    # -- history ----------------------------------------------------------------------------------

    def new_send(self, s: Send) -> None:
        self.sends.append(s)
        for v in s.values:
            self.value_send[v] = s

    def on_ok(self, s: Send, first_offset: int) -> None:
        if s.tp[0] not in self.safe_topics:
            s.status = "ok"
            s.first_offset = first_offset
            self.acked.setdefault(s.tp, {}).update((first_offset + k, v) for k, v in enumerate(s.values))
            return
        if s.status == "ok":
            if s.first_offset != first_offset:
                self.fail(f"{s.values[0]!r}.. acked twice at offsets {s.first_offset} and {first_offset}")
            return
        s.status = "ok"
        s.first_offset = first_offset
        acked = self.acked.setdefault(s.tp, {})
        polled = self.polled.get(s.tp, {})
        for k, v in enumerate(s.values):
            off = first_offset + k
            prev = acked.get(off)
            if prev is not None and prev != v:
                self.fail(f"inconsistent offsets: {s.tp} offset {off} acked with {prev!r} and {v!r}")
            if off in polled and polled[off] != v:
                self.fail(f"inconsistent offsets: {s.tp} offset {off} polled as {polled[off]!r}, acked as {v!r}")
            acked[off] = v

    def on_poll(self, tp: tuple[str, int], offset: int, value: bytes) -> None:
        polled = self.polled.setdefault(tp, {})
        if tp[0] not in self.safe_topics:
            polled[offset] = value
            return
        prev = polled.get(offset)
        if prev is not None and prev != value:
            self.fail(f"inconsistent offsets: {tp} offset {offset} polled as {prev!r} and {value!r}")
        a = self.acked.get(tp, {}).get(offset)
        if a is not None and a != value:
            self.fail(f"inconsistent offsets: {tp} offset {offset} acked as {a!r}, polled as {value!r}")
        polled[offset] = value
        s = self.value_send.get(value)
        if s is not None and s.status == "fail":
            self.fail(f"aborted read: {value!r} at {tp} offset {offset} was from a send that definitely failed")

    # -- invariants after every step ---------------------------------------------------------------

    def check_step(self) -> None:
        c = self.c
        for i in c.running():
            n = c.nodes[i]
            assert n is not None
            for tp, p in n.partitions.items():
                if p.log.closed:
                    continue
                hw, leo = p.high_watermark, p.log_end_offset
                if hw > leo:
                    self.fail(f"node {i} {tp}: high watermark {hw} above its log end {leo}")
                entries = p.log.epoch_cache.entries()
                for (e1, s1), (e2, s2) in zip(entries, entries[1:]):
                    if not (e2 > e1 and s2 > s1):
                        self.fail(f"node {i} {tp}: epoch cache not strictly increasing: {entries}")
                if entries and entries[-1][1] > leo:
                    self.fail(f"node {i} {tp}: epoch cache entry {entries[-1]} beyond log end {leo}")
                if p.role is Role.LEADER:
                    key = (tp, p.leader_epoch)
                    other = self.leaders.setdefault(key, i)
                    if other != i:
                        self.fail(f"two leaders for {tp} in epoch {p.leader_epoch}: nodes {other} and {i}")
                    hkey = (i, tp, p.leader_epoch)
                    last = self.hw_seen.get(hkey, -1)
                    if hw < last:
                        self.fail(
                            f"leader {i} of {tp} epoch {p.leader_epoch}: high watermark went back from {last} to {hw}"
                        )
                    self.hw_seen[hkey] = hw
                    st = c.state(tp)
                    if st is not None and st.leader == i and st.leader_epoch == p.leader_epoch:
                        for r in p.isr_state.isr:
                            if r == i or tp in c.lost_tail.get(r, set()):
                                continue
                            q = c.replica(r, tp)
                            if q is None or q.log.closed:
                                continue
                            if q.log_end_offset < hw:
                                self.fail(
                                    f"{tp}: leader {i} high watermark {hw} above the log end "
                                    f"{q.log_end_offset} of ISR member {r}"
                                )
            if self.strict_truncation and n.stats.get("truncations_below_hw", 0):
                self.fail(f"node {i} truncated below its high watermark")
        # No replica's log start passes the leader's high watermark (records are deleted only
        # below it, and followers take the leader's log start after its high watermark).
        # The leader: the replica leading in the highest epoch (no coordinator read per step).
        leaders: dict[tuple[str, int], Partition] = {}
        replicas: list[tuple[int, Partition]] = []
        for i in c.running():
            for tp, p in c.nodes[i].partitions.items():  # type: ignore[union-attr]
                if p.log.closed:
                    continue
                replicas.append((i, p))
                if p.role is Role.LEADER and (tp not in leaders or p.leader_epoch > leaders[tp].leader_epoch):
                    leaders[tp] = p
        for i, q in replicas:
            lp = leaders.get(q.tp)
            if lp is not None and q.log.log_start_offset > lp.high_watermark:
                self.fail(
                    f"{q.tp}: node {i} log start {q.log.log_start_offset} above the high watermark "
                    f"{lp.high_watermark} of leader {lp.host.node_id}"
                )
        # ISR admission clears the lost-tail mark.
        for r, tps in c.lost_tail.items():
            for tp in list(tps):
                st = c.state(tp)
                lp = c.leader_replica(tp)
                if st is not None and r in st.isr and lp is not None and r in lp.isr_state.isr and st.leader != r:
                    q = c.replica(r, tp)
                    if q is not None and q.log_end_offset >= lp.high_watermark:
                        tps.discard(tp)

    def on_follower_fetch(self, i: int, req: FetchRequest, resp: FetchResponse, ready: set[tuple[str, int]]) -> None:
        """A follower applied a fetch response: each partition it took without an error or a
        divergence now starts at or after the leader's log start in it — the first fetch after
        a node comes back included (records deleted while it was away are gone)."""
        n = self.c.nodes[i]
        if n is None:
            return
        for pr in resp.partitions:
            tp = (pr.topic, pr.partition)
            if tp not in ready or pr.error != NONE or pr.diverging_epoch >= 0 or pr.diverging_end_offset >= 0:
                continue
            q = n.partitions.get(tp)
            if q is None or q.log.closed:
                continue
            if q.log.log_start_offset < pr.log_start_offset:
                self.fail(
                    f"node {i} {tp}: starts at {q.log.log_start_offset} after a fetch response giving the "
                    f"leader's log start {pr.log_start_offset}: it keeps records the leader deleted"
                )
            self.count("follower_fetches_checked")

    def on_deleted(self, tp: tuple[str, int], offset: int, leader: int, low_watermark: int) -> None:
        """A DeleteRecords request completed: every replica the leader counts as alive (running
        with the broker epoch the leader knows) has moved its log start to ``offset``."""
        c = self.c
        if low_watermark < offset:
            self.fail(f"{tp}: DeleteRecords to {offset} answered with the low watermark {low_watermark}")
        ln = c.nodes[leader]
        if ln is None:
            return
        for r in c.ids:
            n = c.nodes[r]
            if n is None or ln.live_brokers.get(r, -1) != n.broker_epoch:
                continue
            q = c.replica(r, tp)
            if q is None or q.log.closed:
                continue
            if q.log.log_start_offset < offset:
                self.fail(
                    f"{tp}: DeleteRecords to {offset} completed on leader {leader} (low watermark "
                    f"{low_watermark}), but live replica {r} starts at {q.log.log_start_offset}"
                )
        self.count("deletes_completed")

    # -- final checks -----------------------------------------------------------------------------

    def check_final(self, topics: dict[str, int], *, allow_loss: set[str]) -> dict[str, int]:
        c = self.c
        report: dict[str, int] = {"lost": 0, "duplicates": 0, "unseen": 0}
        for topic, parts in topics.items():
            for part in range(parts):
                tp = (topic, part)
                lp = c.leader_replica(tp)
                if lp is None:
                    self.fail(f"{tp} has no serving leader after healing")
                reps = [c.replica(r, tp) for r in lp.replicas]
                if any(q is None for q in reps):
                    self.fail(f"{tp}: a replica is missing after healing")
                ref = batch_fingerprints(lp)
                ref_cache = epochs_with_data(lp)
                for q in reps:
                    assert q is not None
                    if q.high_watermark != q.log_end_offset or q.log_end_offset != lp.log_end_offset:
                        self.fail(
                            f"{tp}: replica {q.host.node_id} hw {q.high_watermark} leo "
                            f"{q.log_end_offset}, leader leo {lp.log_end_offset} after quiescence"
                        )
                    if q.log.log_start_offset < lp.log.log_start_offset:
                        self.fail(
                            f"{tp}: replica {q.host.node_id} starts at {q.log.log_start_offset}, below the "
                            f"log start {lp.log.log_start_offset} of leader {lp.host.node_id}: it keeps "
                            "records the leader deleted"
                        )
                    fp = batch_fingerprints(q)
                    if fp != ref:
                        diff = next((k for k, (a, b) in enumerate(zip(fp, ref)) if a != b), min(len(fp), len(ref)))
                        self.fail(
                            f"{tp}: replica {q.host.node_id} diverges from leader {lp.host.node_id} "
                            f"at batch {diff}: {fp[diff : diff + 2]} vs {ref[diff : diff + 2]}"
                        )
                    if epochs_with_data(q) != ref_cache:
                        self.fail(
                            f"{tp}: epoch caches differ: node {q.host.node_id} "
                            f"{q.log.epoch_cache.entries()} vs leader {lp.log.epoch_cache.entries()}"
                        )
                final = log_values(lp)
                producer_epoch_at = {
                    o: b.producer_epoch for b in lp.log.batches() for o in range(b.base_offset, b.last_offset + 1)
                }
                seen_vals: dict[bytes, int] = {}
                for off, v in final.items():
                    s = self.value_send.get(v)
                    if v in seen_vals:
                        if s is not None and s.idempotent:
                            first = seen_vals[v]
                            # A client that bumps its epoch after repeated OUT_OF_ORDER_SEQUENCE
                            # resends the records as new ones: the copies differ in producer epoch.
                            # That refusal needs a leader that lost acknowledged writes, so such a
                            # duplicate is a failure only where loss is not allowed either.
                            resent = producer_epoch_at.get(first) != producer_epoch_at.get(off)
                            if not resent or topic not in allow_loss:
                                self.fail(
                                    f"duplicate: {v!r} at {tp} offsets {first} and {off} from an idempotent producer"
                                )
                            report["duplicates_resent"] = report.get("duplicates_resent", 0) + 1
                        report["duplicates"] += 1
                    seen_vals[v] = off
                    if s is not None and s.status == "fail":
                        self.fail(f"aborted read: {v!r} at {tp} offset {off} is from a send that definitely failed")
                gone = min(self.delete_requested.get(tp, 0), lp.log.log_start_offset)
                for s in self.sends:
                    if s.tp != tp or s.status != "ok":
                        continue
                    for k, v in enumerate(s.values):
                        off = s.first_offset + k
                        if off < gone:
                            continue  # deleted on request
                        if final.get(off) != v:
                            report["lost"] += 1
                            if topic in allow_loss:
                                report[f"lost_{topic}"] = report.get(f"lost_{topic}", 0) + 1
                            else:
                                self.fail(
                                    f"lost acknowledged write: {v!r} acked at {tp} offset {off}, "
                                    f"the final log holds {final.get(off)!r}"
                                )
                for off, v in self.polled.get(tp, {}).items():
                    if off >= gone and final.get(off) != v and topic not in allow_loss:
                        self.fail(
                            f"read then vanish: {v!r} polled at {tp} offset {off}, final log holds {final.get(off)!r}"
                        )
                polled = self.polled.get(tp, {})
                if topic not in allow_loss:
                    for off, v in self.acked.get(tp, {}).items():
                        if off not in polled and off >= gone:
                            report["unseen"] += 1
        return report


# ---------------------------------------------------------------------------------------------------
# Clients
# ---------------------------------------------------------------------------------------------------


class SimClient:
    """Shared client plumbing: a network endpoint with a metadata cache."""

    def __init__(self, cluster: SimCluster, client_id: int, rng: random.Random) -> None:
        self.c = cluster
        self.id = client_id
        self.rng = rng
        self.leaders: dict[tuple[str, int], tuple[int, int]] = {}
        self.controller_id = -1
        self.meta_in_flight = False
        self.stopped = False
        cluster.net.register(client_id, lambda *a: None)

    def refresh_metadata(self) -> None:
        if self.meta_in_flight:
            return
        alive = self.c.running()
        if not alive:
            return
        dst = self.rng.choice(alive)
        self.meta_in_flight = True

        def done(resp: Any, err: BaseException | None) -> None:
            self.meta_in_flight = False
            if isinstance(resp, MetadataResponse):
                for info in resp.partitions:
                    self.leaders[info.tp] = (info.state.leader, info.state.leader_epoch)
                self.controller_id = resp.controller_id

        self.c.net.request(self.id, dst, MetadataRequest(), done, 1000)

    def leader(self, tp: tuple[str, int]) -> int:
        return self.leaders.get(tp, (NO_LEADER, -1))[0]


class SimProducer(SimClient):
    """One producer on one partition, one batch in flight; retries its batch (same sequence
    when idempotent) until it is acknowledged."""

    def __init__(
        self,
        cluster: SimCluster,
        checker: Checker,
        client_id: int,
        tp: tuple[str, int],
        *,
        idempotent: bool,
        acks: int,
        rng: random.Random,
        interval_ms: int = 20,
        timeout_ms: int = 1500,
        max_batch: int = 4,
    ) -> None:
        super().__init__(cluster, client_id, rng)
        self.checker = checker
        self.tp = tp
        self.idempotent = idempotent
        self.acks = acks
        self.interval_ms = interval_ms
        self.timeout_ms = timeout_ms
        self.max_batch = max_batch
        self.pid = -1
        self.epoch = -1
        self.seq = 0
        self.n = 0
        self.current: Send | None = None
        self.current_seq = 0
        self.in_flight = False
        self.pid_in_flight = False
        self.ok = 0
        self.oos_in_a_row = 0
        self.next_at = 0
        cluster.scheduler.schedule(f"producer {client_id}", self.tick, delay_ms=interval_ms, period_ms=interval_ms)

    def tick(self) -> None:
        if self.in_flight or self.pid_in_flight:
            return
        now = self.c.clock.monotonic_ms()
        if now < self.next_at:
            return
        if self.idempotent and self.pid < 0:
            self.init_pid()
            return
        if self.current is None:
            if self.stopped:
                return
            k = self.rng.randint(1, self.max_batch)
            values = tuple(b"c%d-%d" % (self.id, self.n + j) for j in range(k))
            self.n += k
            self.current = Send(self.id, self.tp, values, self.idempotent)
            self.current_seq = self.seq
            self.checker.new_send(self.current)
        leader = self.leader(self.tp)
        if leader < 0:
            self.refresh_metadata()
            self.next_at = now + 50
            return
        self.send(leader)

    def init_pid(self) -> None:
        ctrl = self.controller_id
        if ctrl < 0:
            self.refresh_metadata()
            self.next_at = self.c.clock.monotonic_ms() + 50
            return
        self.pid_in_flight = True

        def done(resp: Any, err: BaseException | None) -> None:
            if self.took_pid(resp):
                if self.current is not None:
                    self.current_seq = 0
            else:
                self.refresh_metadata()
                self.next_at = self.c.clock.monotonic_ms() + 100

        self.c.net.request(self.id, ctrl, InitProducerIdRequest(self.pid, self.epoch), done, 1000)

    def took_pid(self, resp: Any) -> bool:
        """An InitProducerId answer is in: whether it gave a producer id and epoch, which are
        then this producer's, its sequence starting again at 0."""
        self.pid_in_flight = False
        if not (isinstance(resp, InitProducerIdResponse) and resp.error == NONE):
            return False
        self.pid, self.epoch = resp.producer_id, resp.producer_epoch
        self.seq = 0
        return True

    def send(self, leader: int) -> None:
        s = self.current
        assert s is not None
        if self.idempotent:
            batch = encode_batch(
                list(s.values),
                timestamps=self.c.clock.time_ms(),
                producer_id=self.pid,
                producer_epoch=self.epoch,
                base_sequence=self.current_seq,
            )
        else:
            batch = encode_batch(list(s.values), timestamps=self.c.clock.time_ms())
        s.attempts += 1
        self.in_flight = True
        # The server's wait may outlast the client's: a retry can meet the original in purgatory.
        server_timeout = self.timeout_ms + self.rng.choice((-500, 0, 1000))

        def done(resp: Any, err: BaseException | None) -> None:
            self.in_flight = False
            if err is None and isinstance(resp, ProduceResponse) and resp.error == NONE:
                self.oos_in_a_row = 0
                self.checker.on_ok(s, resp.base_offset)
                self.ok += 1
                if self.idempotent:
                    self.seq = (self.current_seq + len(s.values)) % 2**31
                self.current = None
                return
            exc: BaseException
            if err is None and isinstance(resp, ProduceResponse):
                exc = error_for_code(resp.error)(resp.message)
            elif err is not None:
                exc = err
            else:
                exc = error_for_code(getattr(resp, "error", -1))("")
            definite = getattr(exc, "definitely_not_written", False)
            if definite:
                s.definite_failures += 1
            else:
                s.indeterminate += 1
            self.refresh_metadata()
            self.next_at = self.c.clock.monotonic_ms() + 50
            if isinstance(exc, OutOfOrderSequenceError) and self.idempotent:
                self.checker.count("oos")
                if self.c.leader_of(self.tp) != leader:
                    return  # a stale leader's opinion: ask for metadata, retry the same sequence
                self.oos_in_a_row += 1
                if self.oos_in_a_row < 3:
                    return
                # What clients do when the leader keeps refusing (Redpanda #3039's trap): bump
                # the epoch, restart the sequence, resend the same records.
                self.oos_in_a_row = 0
                self.pid_in_flight = True

                def bumped(r: Any, e: BaseException | None) -> None:
                    if self.took_pid(r):
                        self.current_seq = 0

                ctrl = self.controller_id if self.controller_id >= 0 else leader
                self.c.net.request(self.id, ctrl, InitProducerIdRequest(self.pid, self.epoch), bumped, 1000)
                return
            if (
                definite
                and isinstance(exc, NotEnoughReplicasError)
                and s.indeterminate == 0
                and not self.idempotent
                and self.rng.random() < 0.5
            ):
                # A plain producer may give a batch up when it definitely failed.
                s.status = "fail"
                self.current = None

        self.c.net.request(
            self.id,
            leader,
            ProduceRequest(self.tp[0], self.tp[1], batch, self.acks, max(100, server_timeout)),
            done,
            self.timeout_ms,
        )

    def finish(self) -> None:
        """End of the run: the batch still being retried is indeterminate."""
        self.stopped = True


class SimConsumer(SimClient):
    """Polls one partition from its leader, below the high watermark, and checks that polls are
    contiguous and that no record at or above the serving replica's HW is returned."""

    def __init__(
        self,
        cluster: SimCluster,
        checker: Checker,
        client_id: int,
        tp: tuple[str, int],
        *,
        rng: random.Random,
        interval_ms: int = 30,
    ) -> None:
        super().__init__(cluster, client_id, rng)
        self.checker = checker
        self.tp = tp
        self.position = 0
        self.in_flight = False
        cluster.scheduler.schedule(f"consumer {client_id}", self.tick, delay_ms=interval_ms, period_ms=interval_ms)

    def tick(self) -> None:
        if self.in_flight:
            return
        leader = self.leader(self.tp)
        if leader < 0:
            self.refresh_metadata()
            return
        self.in_flight = True
        req = FetchRequest(
            CONSUMER_REPLICA_ID,
            (FetchPartition(self.tp[0], self.tp[1], self.position),),
            max_wait_ms=100,
            max_bytes=64 * 1024,
        )

        def done(resp: Any, err: BaseException | None) -> None:
            self.in_flight = False
            if err is not None or not isinstance(resp, FetchResponse):
                self.refresh_metadata()
                return
            pr = resp.partitions[0]
            if pr.error == OffsetOutOfRangeError.code and 0 <= self.position < pr.log_start_offset:
                # Deleted below the position: auto.offset.reset=earliest, the leader's log start.
                self.position = pr.log_start_offset
                return
            if pr.error != NONE:
                self.refresh_metadata()
                return
            if not pr.records:
                return
            if self.position < pr.log_start_offset:
                self.checker.fail(
                    f"consumer {self.id} on {self.tp}: served at {self.position}, below the leader's log start "
                    f"{pr.log_start_offset}"
                )
            for r in decode_records(pr.records):
                if r.offset < self.position:
                    continue
                if r.offset != self.position:
                    self.checker.fail(f"consumer {self.id} on {self.tp}: skipped from {self.position} to {r.offset}")
                if r.offset >= pr.high_watermark:
                    self.checker.fail(
                        f"consumer {self.id} on {self.tp}: got offset {r.offset} at or "
                        f"above the leader's high watermark {pr.high_watermark}"
                    )
                self.checker.on_poll(self.tp, r.offset, r.value or b"")
                self.position = r.offset + 1

        self.c.net.request(self.id, leader, req, done, 1000)


# ---------------------------------------------------------------------------------------------------
# The randomised simulation
# ---------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int = 1
    rf: int = 3
    min_isr: int = 2
    acks: int = -1
    idempotent_producers: int = 2
    plain_producers: int = 0
    consumers: int = 1
    may_lose: bool = False  # positive-control topics: loss is allowed (and expected)


@dataclasses.dataclass(frozen=True, slots=True)
class SimConfig:
    seed: int
    steps: int = 1500
    nodes: int = 3
    topics: tuple[TopicSpec, ...] = (TopicSpec("safe"),)
    faults: frozenset[str] = frozenset({"kill", "pause", "partition", "restart"})
    fault_every: tuple[int, int] = (20, 60)  # steps between fault operations
    step_ms: tuple[int, int] = (5, 40)
    mutants: frozenset[str] = frozenset()
    unclean: bool = False
    settle_ms: int = 60_000


ALL_FAULTS = frozenset(
    {
        "kill",
        "power_loss",
        "restart",
        "pause",
        "partition",
        "leader_isolation",
        "coordinator_cut",
        "drop",
        "delay",
        "controller_kill",
        "preferred",
        "failover_during_catch_up",
    }
)


class Simulation:
    def __init__(self, cfg: SimConfig, root: str) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        config: dict[str, Any] = {}
        if cfg.unclean:
            config["unclean.leader.election.enable"] = True
        self.c = SimCluster(root, nodes=cfg.nodes, seed=cfg.seed, mutants=cfg.mutants, log_defaults=config)
        strict = "power_loss" not in cfg.faults and not cfg.unclean
        self.checker = Checker(
            self.c, safe_topics={t.name for t in cfg.topics if not self.may_lose(t)}, strict_truncation=strict
        )
        self.producers: list[SimProducer] = []
        self.consumers: list[SimConsumer] = []
        self.pending: list[tuple[int, Callable[[], object], str]] = []
        self.step = 0
        self.faults_done: dict[str, int] = {}

    def may_lose(self, t: TopicSpec) -> bool:
        """Whether acknowledged writes of ``t`` may be lost in this run: positive controls;
        every topic under unclean elections; and under power loss a topic whose ISR may shrink
        to one member (that member's page cache is then all there is)."""
        return t.may_lose or self.cfg.unclean or ("power_loss" in self.cfg.faults and t.min_isr < 2)

    def setup(self) -> None:
        c = self.c
        cid = 2000
        for t in self.cfg.topics:
            c.create_topic(t.name, t.partitions, t.rf, {"min.insync.replicas": t.min_isr})
            for p in range(t.partitions):
                tp = (t.name, p)
                for _ in range(t.idempotent_producers):
                    self.producers.append(
                        SimProducer(
                            c, self.checker, cid, tp, idempotent=True, acks=t.acks, rng=random.Random(self.rng.random())
                        )
                    )
                    cid += 1
                for _ in range(t.plain_producers):
                    self.producers.append(
                        SimProducer(
                            c,
                            self.checker,
                            cid,
                            tp,
                            idempotent=False,
                            acks=t.acks,
                            rng=random.Random(self.rng.random()),
                        )
                    )
                    cid += 1
                for _ in range(t.consumers):
                    self.consumers.append(SimConsumer(c, self.checker, cid, tp, rng=random.Random(self.rng.random())))
                    cid += 1

    def run(self) -> dict[str, Any]:
        try:
            self.setup()
            next_fault = self.rng.randint(*self.cfg.fault_every)
            for self.step in range(self.cfg.steps):
                now = self.c.clock.monotonic_ms()
                for item in [x for x in self.pending if x[0] <= now]:
                    self.pending.remove(item)
                    item[1]()
                if self.step >= next_fault and self.cfg.faults:
                    self.fault()
                    next_fault = self.step + self.rng.randint(*self.cfg.fault_every)
                self.c.advance(self.rng.randint(*self.cfg.step_ms))
                self.checker.check_step()
            return self.settle()
        except SimulationFailure as exc:
            raise SimulationFailure(
                f"seed {self.cfg.seed}, step {self.step}, mutants {sorted(self.cfg.mutants)}: {exc}"
            ) from None

    # -- faults -----------------------------------------------------------------------------------

    def _cut_from_coordinator(self, i: int) -> None:
        self.c.net.cut_coordinator(i)
        self.c.event(f"cut leader {i} from the coordinator")

    def _restart(self, i: int) -> None:
        if self.c.nodes[i] is None:
            self.c.start_node(i)

    def later(self, delay_ms: int, fn: Callable[[], object], what: str) -> None:
        self.pending.append((self.c.clock.monotonic_ms() + delay_ms, fn, what))

    def _leader_node(self) -> int:
        tps = [(t.name, p) for t in self.cfg.topics for p in range(t.partitions)]
        tp = self.rng.choice(tps)
        return self.c.leader_of(tp)

    def _target(self) -> int:
        r = self.rng.random()
        if r < 0.5:
            n = self._leader_node()
            if n >= 0:
                return n
        if r < 0.6 and self.c.controller() >= 0:
            return self.c.controller()
        return self.rng.choice(self.c.ids)

    def fault(self) -> None:
        c = self.c
        kind = self.rng.choice(sorted(self.cfg.faults))
        self.faults_done[kind] = self.faults_done.get(kind, 0) + 1
        target = self._target()
        down = [i for i in c.ids if c.nodes[i] is None]
        if kind in ("kill", "power_loss", "restart", "controller_kill"):
            if kind == "controller_kill" and c.controller() >= 0:
                target = c.controller()
            if c.nodes[target] is None:
                return
            if (kind == "power_loss" or "power_loss" in self.cfg.faults) and (
                down or any(c.lost_tail.values()) or c.paused
            ):
                # One node at a time, and only once the previous one has caught up: losing the
                # page cache of every ISR member may lose acknowledged writes (allowed), which
                # is not what this fault tests. A kill counts too: an unclean restart leaves the
                # ISR like a power loss, and the controller cannot tell them apart.
                return
            if len(down) >= 1 and self.rng.random() < 0.7:
                return  # keep most runs to one node down at a time
            if kind == "restart":
                c.shutdown(target, deregister=self.rng.random() < 0.3)
                delay = self.rng.randint(0, 1500)
            else:
                c.crash(target, power_loss=kind == "power_loss")
                delay = self.rng.randint(200, 5000)
            self.later(delay, functools.partial(self._restart, target), f"restart {target}")
        elif kind == "pause":
            if c.nodes[target] is None or target in c.paused:
                return
            c.pause(target)
            self.later(
                self.rng.choice((500, 1500, 3000, 6000, 12000)), functools.partial(c.resume, target), f"resume {target}"
            )
        elif kind == "partition":
            others = [o for o in c.ids if o != target]
            for o in others:
                c.net.cut(target, o)
            if self.rng.random() < 0.5:
                c.net.cut_coordinator(target)
            c.event(f"partition node {target} from {others}")
            self.later(self.rng.randint(500, 8000), c.heal, "heal")
        elif kind == "leader_isolation":
            # Jepsen 2013: the leader loses its followers but keeps the coordinator.
            lead = self._leader_node()
            if lead < 0:
                return
            for o in c.ids:
                if o != lead:
                    c.net.cut(lead, o)
            c.event(f"cut leader {lead} from its followers")
            self.later(
                self.rng.randint(2000, 8000),
                functools.partial(self._cut_from_coordinator, lead),
                "isolate fully",
            )
            self.later(self.rng.randint(9000, 15000), c.heal, "heal")
        elif kind == "coordinator_cut":
            c.net.cut_coordinator(target)
            c.event(f"cut node {target} from the coordinator")
            self.later(self.rng.randint(500, 8000), c.heal, "heal")
        elif kind == "drop":
            a, b = self.rng.sample(c.ids, 2)
            c.net.rule(a, b).drop = self.rng.choice((0.1, 0.3, 0.7))
            c.event(f"lossy link {a}->{b}")
            self.later(self.rng.randint(500, 5000), c.heal, "heal")
        elif kind == "delay":
            a, b = self.rng.sample(c.ids, 2)
            lo = self.rng.choice((20, 100, 300))
            c.net.rule(a, b).delay_ms = (lo, lo * 2)
            c.event(f"slow link {a}->{b} {lo}-{lo * 2} ms")
            self.later(self.rng.randint(500, 5000), c.heal, "heal")
        elif kind == "failover_during_catch_up":
            self._failover_during_catch_up()
        elif kind == "delete_records":
            self._delete_records()
        elif kind == "preferred":
            tps = [(t.name, p) for t in self.cfg.topics for p in range(t.partitions)]
            tp = self.rng.choice(tps)
            ctrl = c.controller()
            if ctrl >= 0 and ctrl not in c.paused:
                c.request(ctrl, ElectLeadersRequest(tp[0], tp[1]))
                c.event(f"preferred election {tp}")

    def _delete_records(self) -> None:
        """DeleteRecords to a random offset in [log start, HW] of a partition's leader; the
        checker looks at the replicas when it completes."""
        c = self.c
        tps = [(t.name, p) for t in self.cfg.topics for p in range(t.partitions)]
        tp = self.rng.choice(tps)
        lp = c.leader_replica(tp)
        if lp is None or lp.host.node_id in c.paused:
            return
        leader = lp.host.node_id
        offset = self.rng.randint(lp.log.log_start_offset, lp.high_watermark)
        timeout = self.rng.choice((500, 3000, 10_000))
        c.event(f"delete records of {tp} before {offset} on leader {leader} (timeout {timeout} ms)")
        self.checker.delete_requested[tp] = max(self.checker.delete_requested.get(tp, 0), offset)

        def done(resp: Any, err: BaseException | None) -> None:
            if err is not None or not isinstance(resp, DeleteRecordsResponse):
                return
            if resp.error == NONE:
                self.checker.on_deleted(tp, offset, leader, resp.low_watermark)
            else:
                self.checker.count(f"delete_error_{error_for_code(resp.error).error_name}")

        c.net.request(ADMIN, leader, DeleteRecordsRequest(tp[0], tp[1], offset, timeout), done, timeout + 2000)

    def _failover_during_catch_up(self) -> None:
        """A follower leaves the ISR (paused), comes back and catches up one batch per fetch;
        meanwhile the leader dies, and its successor dies while the follower is still behind
        the successor's epoch start (KAFKA-7128's window)."""
        c = self.c
        tps = [(t.name, p) for t in self.cfg.topics if not t.may_lose for p in range(t.partitions)]
        tp = self.rng.choice(tps)
        st = c.state(tp)
        if st is None or st.leader < 0 or any(c.nodes[i] is None for i in c.ids) or c.paused:
            return
        follower = self.rng.choice([r for r in st.isr if r != st.leader] or [-1])
        if follower < 0:
            return
        c.pause(follower)
        c.event(f"catch-up failover on {tp}: follower {follower} paused")

        def resume_and_kill_leader() -> None:
            n = c.nodes[follower]
            if n is None:
                return
            c.resume(follower)
            n.config = dataclasses.replace(n.config, replica_fetch_max_bytes=1)
            leader = c.leader_of(tp)
            if leader >= 0 and leader != follower and c.nodes[leader] is not None:
                c.crash(leader)
                self.later(8000, lambda: c.start_node(leader) if c.nodes[leader] is None else None, f"restart {leader}")
            deadline = c.clock.monotonic_ms() + 10_000

            def watch() -> None:
                # Strike when the follower has reached the successor's HW: it is then in the
                # window between the stale HW and the epoch start.
                lp = c.leader_replica(tp)
                q = c.replica(follower, tp)
                if q is None or c.clock.monotonic_ms() > deadline:
                    finish()
                    return
                if lp is None:
                    self.later(1, watch, "watch catch-up")
                    return
                if lp.high_watermark - q.log_end_offset < 10:
                    for o in c.ids:  # slow the last steps down: the window lasts
                        if o != follower:
                            c.net.rule(o, follower).delay_ms = (30, 60)
                if (
                    lp.host.node_id != follower
                    and q.log_end_offset >= lp.high_watermark
                    and (follower in lp.isr_state.maximal or q.log_end_offset >= lp.leader_epoch_start_offset)
                ):
                    succ = lp.host.node_id
                    c.crash(succ)
                    c.event(
                        f"killed successor {succ} with follower {follower} at {q.log_end_offset}, "
                        f"epoch start {lp.leader_epoch_start_offset}"
                    )
                    self.later(6000, lambda: c.start_node(succ) if c.nodes[succ] is None else None, f"restart {succ}")
                    finish()
                    return
                self.later(1, watch, "watch catch-up")

            self.later(1, watch, "watch catch-up")

        def finish() -> None:
            c.heal()
            n = c.nodes[follower]
            if n is not None:
                n.config = c.config

        self.later(int(c.config.replica_lag_time_max_ms * 1.6), resume_and_kill_leader, "resume + kill leader")

    # -- the end ----------------------------------------------------------------------------------

    def settle(self) -> dict[str, Any]:
        c = self.c
        for _, fn, what in sorted(self.pending, key=lambda x: x[0]):
            if what.startswith("restart"):
                fn()
        self.pending.clear()
        for i in list(c.paused):
            c.resume(i)
        c.heal()
        for i in c.ids:
            if c.nodes[i] is None:
                c.start_node(i)
        for p in self.producers:
            p.finish()
        topics = {t.name: t.partitions for t in self.cfg.topics}

        def quiet() -> bool:
            if any(p.current is not None for p in self.producers):
                return False
            for t, parts in topics.items():
                for part in range(parts):
                    tp = (t, part)
                    lp = c.leader_replica(tp)
                    if lp is None or lp.isr_state.pending is not None:
                        return False
                    if set(lp.isr_state.isr) != set(lp.replicas):
                        return False
                    for r in lp.replicas:
                        q = c.replica(r, tp)
                        if q is None or q.log_end_offset != lp.log_end_offset or q.high_watermark != q.log_end_offset:
                            return False
                    if any(cons.tp == tp and cons.position < lp.high_watermark for cons in self.consumers):
                        return False
            return True

        try:
            c.run_until(quiet, self.cfg.settle_ms, 20, "quiescence after healing")
        except NotReached:
            stuck = [p for p in self.producers if p.current is not None]
            raise SimulationFailure(
                "no quiescence after healing (liveness); producers still retrying: "
                f"{[(p.id, p.current.values[0] if p.current else None) for p in stuck]}\n{c.describe()}"
            ) from None
        self.checker.check_step()
        allow = {t.name for t in self.cfg.topics if self.may_lose(t)}
        report = self.checker.check_final(topics, allow_loss=allow)
        report.update(
            {
                "steps": self.cfg.steps,
                "sim_ms": c.clock.monotonic_ms(),
                "acked": sum(len(v) for v in self.checker.acked.values()),
                "sends": len(self.checker.sends),
                "faults": sum(self.faults_done.values()),
                "power_losses": c.power_losses,
                "messages": c.net.delivered,
                "deletes_completed": self.checker.counts.get("deletes_completed", 0),
            }
        )
        if report["unseen"]:
            raise SimulationFailure(f"{report['unseen']} acknowledged records never polled\n{c.describe()}")
        return report


def run_seed(cfg: SimConfig, root: str) -> dict[str, Any]:
    sim = Simulation(cfg, root)
    try:
        return sim.run()
    finally:
        sim.c.close()
