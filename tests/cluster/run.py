"""One randomised run against the real cluster (``docs/replication.md`` §9.3 schedule, §9.7 budgets):
warm-up, faults drawn from a profile's mix, heal, full ISR, final read, check, report.

>>> report = run("/tmp/r1", profile="mixed", seed=1, fault_s=60)   # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import os
import random
import time
from collections.abc import Callable
from typing import Any

from tests.cluster import report as report_mod
from tests.cluster.checker import check
from tests.cluster.churn import ZkWrite, read_write, replay_all
from tests.cluster.harness import LAG_S, FaultCluster, Observer, wait
from tests.cluster.history import History, load
from tests.cluster.workload import Consumer, Producer, final_read

SAFE, CONTROL = "safe", "control"
TOPICS = {SAFE: 3, CONTROL: 1}

#: §9.3 mixes.
PROFILES: dict[str, tuple[str, ...]] = {
    "kill": ("kill",),
    "pause": ("pause",),
    "partition": ("partition",),
    "mixed": ("kill", "pause", "partition"),
    "power": ("power_loss", "kill"),
    "disk-full": ("disk_full",),
    "torn": ("torn",),
    "controller": ("zk_expire", "kill_controller"),
    "churn": ("controller_churn", "replay"),
    "clock": ("clock_jump", "kill"),
}


@dataclasses.dataclass(frozen=True, slots=True)
class RunConfig:
    profile: str = "mixed"
    seed: int = 1
    warmup_s: float = 10.0
    fault_s: float = 120.0
    mean_gap_s: float = 5.0
    final_read_s: float = 60.0
    rate: float = 50.0
    idempotent_producers: int = 3


class Nemesis:
    def __init__(self, cluster: FaultCluster, rng: random.Random, profile: str) -> None:
        self.c = cluster
        self.rng = rng
        self.mix = PROFILES[profile]
        self.applied: dict[str, int] = {}
        self.skipped: dict[str, int] = {}
        #: The last few writes of every partition's state znode, for the ZooKeeper replays.
        self.zk_writes: dict[tuple[str, int], list[ZkWrite]] = {}

    def _remember_writes(self) -> None:
        for t, n in TOPICS.items():
            for p in range(n):
                try:
                    w = read_write(self.c.zk(), t, p)
                except Exception:  # noqa: BLE001 - ZooKeeper hiccup: nothing remembered this time
                    continue
                seen = self.zk_writes.setdefault((t, p), [])
                if not seen or seen[-1].version != w.version:
                    seen.append(w)
                    del seen[:-5]

    def _pick(self, role: str) -> tuple[int, str]:
        ids = self.c.ids
        if role == "leader":
            p = self.rng.randrange(TOPICS[SAFE])
            node = self.c.leader(SAFE, p)
            if node is not None:
                return node, "leader"
        if role == "controller":
            node = self.c.controller()
            if node is not None:
                return node, "controller"
        leaders = {self.c.leader(SAFE, p) for p in range(TOPICS[SAFE])}
        followers = [i for i in ids if i not in leaders]
        if followers and role == "follower":
            return self.rng.choice(followers), "follower"
        n = self.rng.choice(ids)
        return n, "leader" if n in leaders else "follower"

    def _role(self) -> str:
        return self.rng.choice(("leader", "follower", "controller", "leader"))

    def step(self) -> None:
        kind = self.rng.choice(self.mix)
        c, rng = self.c, self.rng
        op: int | None = None
        lost: dict[str, Any] = {}
        if "replay" in self.mix:
            self._remember_writes()
        if kind in ("kill", "kill_controller"):
            node, role = self._pick("controller" if kind == "kill_controller" else self._role())
            led = c.led_by(node, TOPICS)
            op = c._fault("kill", node, role, led)
            c.kill(node)
            time.sleep(rng.uniform(0, 5))
            c.restart(node)
        elif kind == "pause":
            node, role = self._pick(self._role())
            secs = LAG_S * rng.choice((0.5, 1, 2, 4))
            op = c._fault("pause", node, role, c.led_by(node, TOPICS), seconds=secs)
            c.pause(node)
            time.sleep(secs)
            c.resume(node)
        elif kind == "partition":
            node, role = self._pick(self._role())
            mode = rng.choice(("leader_followers", "isolate", "one_way", "delay", "throttle", "reset"))
            led = c.led_by(node, TOPICS)
            hold = rng.uniform(3, 8)
            op = c._fault("partition", node, role, led, mode=mode, seconds=round(hold, 2))
            if mode == "leader_followers":
                links = c.links_of(node)
                c.hub.set(links, "blackhole")
            elif mode == "isolate":
                links = c.links_of(node, zk=True, clients=True)
                c.hub.set(links, "blackhole")
            elif mode == "one_way":
                links = [f"{node}->{o}" for o in c.ids if o != node]
                c.hub.set(links, rng.choice(("drop_forward", "drop_backward")))
            elif mode == "delay":
                links = c.links_of(node)
                c.hub.set(links, "delay", delay_ms=rng.uniform(50, 500))
            elif mode == "throttle":
                links = c.links_of(node)
                c.hub.set(links, "throttle", rate=100 * 1024)
            else:
                links = c.links_of(node, clients=True)
                c.hub.set(links, "reset")
            time.sleep(hold)
            c.hub.set(links, "pass")
        elif kind == "power_loss":
            node, role = self._pick(self._role())
            op = c._fault("power_loss", node, role, c.led_by(node, TOPICS))
            cut = c.power_loss(node, rng, keep=rng.choice(("durable", "random")))
            lost["lost_batches"] = sum(v["lost_batches"] for v in cut.values())
            lost["lost_bytes"] = sum(v["lost_bytes"] for v in cut.values())
            time.sleep(rng.uniform(0, 2))
            c.restart(node)
        elif kind == "torn":
            node, role = self._pick(self._role())
            how = rng.choice(("torn", "garbage", "flip_last", "torn"))
            op = c._fault("torn", node, role, c.led_by(node, TOPICS), how=how)
            c.damage_tail(node, rng, how)
            time.sleep(rng.uniform(0, 2))
            c.restart(node)
        elif kind == "disk_full":
            node, role = self._pick(self._role())
            fs = c.tmpfs.get(node)
            if fs is None:
                self.skipped[kind] = self.skipped.get(kind, 0) + 1
                return
            op = c._fault("disk_full", node, role, c.led_by(node, TOPICS))
            fs.fill()
            time.sleep(rng.uniform(3, 6))
            fs.free()
            c.restart(node)
        elif kind == "controller_churn":
            done = c.controller_churn(TOPICS, rng, rng.choice(("kill", "pause")))
            if "skipped" in done:
                self.skipped[kind] = self.skipped.get(kind, 0) + 1
                return
        elif kind == "replay":
            # Earlier writes only: the latest of each znode is the live state.
            older = [w for ws in self.zk_writes.values() for w in ws[:-1]]
            op = c._fault("replay", c.controller(), "controller", frames=len(c.frames.captured()), zk_writes=len(older))
            res = replay_all(c, c.frames, rng.sample(older, min(3, len(older))), TOPICS, zk=c.zk())
            lost = {
                "stale_accepted": res["stale_accepted"],
                "regressions": res["regressions"],
                "requests": res["requests"],
                "zk": res["zk"],
            }
        elif kind == "clock_jump":
            node, role = self._pick(self._role())
            jump = rng.choice((-1, 1)) * 3_600_000
            op = c._fault("clock_jump", node, role, c.led_by(node, TOPICS), offset_ms=jump)
            c.set_wall_clock_offset(node, jump)
            time.sleep(rng.uniform(2, 6))
            c.set_wall_clock_offset(node, 0)
        elif kind == "zk_expire":
            ctrl = c.controller()
            if ctrl is None:
                self.skipped[kind] = self.skipped.get(kind, 0) + 1
                return
            op = c._fault("zk_expire", ctrl, "controller", c.led_by(ctrl, TOPICS))
            c.hub.set(f"{ctrl}->zk", "blackhole")
            time.sleep(2.5 * LAG_S)  # past the 3 s session
            c.hub.set(f"{ctrl}->zk", "pass")
        c.fault_done(op, lost or None)
        self.applied[kind] = self.applied.get(kind, 0) + 1
        # One fault at a time: wait for the cluster to be whole before the next (up to 20 s), so
        # a second power loss never hits a replica whose lost tail is not back yet.
        try:
            wait(lambda: all(c.is_running(i) for i in c.ids) and c.full_isr(TOPICS), 20, "full ISR")
        except TimeoutError:
            pass


def run(out_dir: str, cfg: RunConfig = RunConfig(), *, log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Run once in ``out_dir`` (history.jsonl, node dirs, report.json/.txt); returns the report."""
    os.makedirs(out_dir, exist_ok=True)
    rng = random.Random(cfg.seed)
    t_start = time.monotonic()
    history = History(os.path.join(out_dir, "history.jsonl"))
    tmpfs_nodes: tuple[int, ...] = ()
    if "disk_full" in PROFILES[cfg.profile]:
        from tests.cluster.disk import tmpfs_available

        reason = tmpfs_available()
        if reason is not None:
            raise RuntimeError(f"profile {cfg.profile} needs a size-limited tmpfs: {reason}")
        tmpfs_nodes = (0, 1, 2)
    cluster = FaultCluster(
        3, os.path.join(out_dir, "cluster"), history=history, tmpfs_nodes=tmpfs_nodes, tmpfs_size="16m"
    )
    threads: list[Any] = []
    observer = None
    scraped: dict[str, int] = {}
    ends: dict[tuple[str, int], int] = {}
    timings: dict[str, float] = {}
    try:
        cluster.create_topic(SAFE, TOPICS[SAFE], 3, {"min.insync.replicas": 2})
        cluster.create_topic(CONTROL, TOPICS[CONTROL], 3, {"min.insync.replicas": 1})
        observer = Observer(cluster, history, TOPICS).start()
        idem = [f"p{i}" for i in range(cfg.idempotent_producers)]
        k = cfg.idempotent_producers
        producers = [
            Producer(
                cluster,
                history,
                name,
                SAFE,
                TOPICS[SAFE],
                rate=cfg.rate,
                seed=cfg.seed * 100 + i,
                acks="all",
                enable_idempotence=True,
            )
            for i, name in enumerate(idem)
        ]
        producers.append(
            Producer(
                cluster,
                history,
                f"n{k}",
                SAFE,
                TOPICS[SAFE],
                rate=cfg.rate,
                seed=cfg.seed * 100 + k,
                acks="all",
                enable_idempotence=False,
            )
        )
        producers.append(
            Producer(
                cluster,
                history,
                f"k{k + 1}",
                CONTROL,
                TOPICS[CONTROL],
                rate=cfg.rate / 2,
                seed=cfg.seed * 100 + k + 1,
                acks="1",
                enable_idempotence=False,
            )
        )
        tps = [(t, p) for t, n in TOPICS.items() for p in range(n)]
        consumers = [Consumer(cluster, history, f"c{i}", tps) for i in range(2)]
        threads = producers + consumers
        for t in threads:
            t.start()
        time.sleep(cfg.warmup_s)
        log(f"warm-up done; faults for {cfg.fault_s} s ({cfg.profile})")
        nem = Nemesis(cluster, rng, cfg.profile)
        t_faults = time.monotonic()
        while time.monotonic() - t_faults < cfg.fault_s:
            time.sleep(min(rng.expovariate(1 / cfg.mean_gap_s), max(0.0, cfg.fault_s - (time.monotonic() - t_faults))))
            if time.monotonic() - t_faults >= cfg.fault_s:
                break
            nem.step()
        timings["faults_s"] = round(time.monotonic() - t_faults, 1)
        cluster.heal()
        for p in producers:
            p.stop()
        t_heal = time.monotonic()
        try:
            wait(lambda: cluster.full_isr(TOPICS), 60, "full ISR after heal")
        except TimeoutError:
            log("ISR not full 60 s after heal")
        timings["heal_to_full_isr_s"] = round(time.monotonic() - t_heal, 2)
        for p in producers:
            p.join(60)
        ends = final_read(cluster, history, TOPICS, cfg.final_read_s)
        for c in consumers:
            c.stop()
        for c in consumers:
            c.join(10)
        time.sleep(2.5)  # one more fetch round and a HW checkpoint
        replicas = cluster.replica_states(TOPICS)
        leaders = {(t, p): cluster.leader(t, p) for t, n in TOPICS.items() for p in range(n)}
        scraped = cluster.scrape_logs(history)
        applied, skipped = nem.applied, nem.skipped
    finally:
        for t in threads:
            t.stop()
        if observer is not None:
            observer.stop()
        cluster.close()
        history.close()
    ops = load(os.path.join(out_dir, "history.jsonl"))
    result = check(ops, replicas, idempotent_clients=idem, control_topics=(CONTROL,), final_leaders=leaders)
    rep = report_mod.build(
        ops,
        result,
        {
            "seed": cfg.seed,
            "profile": cfg.profile,
            "revision": report_mod.git_revision(os.path.dirname(__file__)),
            "duration_s": round(time.monotonic() - t_start, 1),
            "config": dataclasses.asdict(cfg),
            "timings": timings,
            "nemesis_applied": applied,
            "nemesis_skipped": skipped,
            "node_log_counts": scraped,
            "final_read_ends": {f"{t}-{p}": e for (t, p), e in ends.items()},
            "client_errors": {"consumer_poll_errors": sum(c.errors for c in consumers)},
        },
        min_isr={SAFE: 2, CONTROL: 1},
    )
    report_mod.write(rep, os.path.join(out_dir, "report.json"))
    return rep
