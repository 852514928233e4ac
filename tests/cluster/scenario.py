"""A scripted scenario on the real cluster: background workload (two idempotent producers and
one non-idempotent on ``safe``, one acks=1 producer on ``control``, one consumer), a fault script,
then heal, full ISR, final read and the full checker (:meth:`Scenario.finish`)."""

from __future__ import annotations

import os
import time
from typing import Any

from tests.cluster.checker import CheckResult, check
from tests.cluster.harness import FaultCluster, Observer, wait
from tests.cluster.history import History, load
from tests.cluster.report import build, write
from tests.cluster.workload import Consumer, Producer, final_read

#: The topic the workload writes with acks=all (min.insync.replicas=2) and checks.
SAFE = "safe"
#: The workload's idempotent producers (client names in the history).
IDEM = ("p0", "p1")


class Scenario:
    def __init__(
        self,
        dir: str,
        *,
        topics: dict[str, int] | None = None,
        safe_config: dict[str, Any] | None = None,
        control: bool = True,
        workload: bool = True,
        rate: float = 40.0,
        **cluster_kw: Any,
    ) -> None:
        self.dir = dir
        os.makedirs(dir, exist_ok=True)
        self.history = History(os.path.join(dir, "history.jsonl"))
        self.topics = dict(topics or {SAFE: 1})
        if control:
            self.topics["control"] = 1
        try:
            self.cluster = FaultCluster(3, os.path.join(dir, "cluster"), history=self.history, **cluster_kw)
        except BaseException:
            self.history.close()  # a cluster that failed to start leaves no open file behind
            raise
        self.threads: list[Any] = []
        self.observer: Observer | None = None
        self._closed = False
        try:
            self.cluster.create_topic(SAFE, self.topics[SAFE], 3, {"min.insync.replicas": 2, **(safe_config or {})})
            if control:
                self.cluster.create_topic("control", 1, 3, {"min.insync.replicas": 1})
            self.observer = Observer(self.cluster, self.history, self.topics).start()
            if workload:
                n = self.topics[SAFE]
                self.producers = [
                    Producer(
                        self.cluster,
                        self.history,
                        name,
                        SAFE,
                        n,
                        rate=rate,
                        seed=k,
                        acks="all",
                        enable_idempotence=True,
                    )
                    for k, name in enumerate(IDEM)
                ]
                self.producers.append(
                    Producer(
                        self.cluster,
                        self.history,
                        "n2",
                        SAFE,
                        n,
                        rate=rate,
                        seed=7,
                        acks="all",
                        enable_idempotence=False,
                    )
                )
                if control:
                    self.producers.append(
                        Producer(
                            self.cluster,
                            self.history,
                            "k3",
                            "control",
                            1,
                            rate=rate,
                            seed=8,
                            acks="1",
                            enable_idempotence=False,
                        )
                    )
                tps = [(t, p) for t, k in self.topics.items() for p in range(k)]
                self.consumers = [Consumer(self.cluster, self.history, "c0", tps)]
                self.threads = self.producers + self.consumers
                for t in self.threads:
                    t.start()
        except BaseException:
            self.close()
            raise

    @property
    def c(self) -> FaultCluster:
        return self.cluster

    def wait(self, pred: Any, timeout_s: float, what: str) -> float:
        return wait(pred, timeout_s, what)

    def acked(self, topic: str = SAFE) -> int:
        return sum(1 for o in self.history.ops if o.f == "send" and o.type == "ok" and o.value["topic"] == topic)

    def warm(self, n: int = 60) -> None:
        """Wait (up to 20 s) until the workload has ``n`` acknowledged writes."""
        self.wait(lambda: self.acked() >= n, 20, f"{n} acked writes")

    def finish(self, *, heal: bool = True, full_isr_s: float = 60) -> CheckResult:
        """Heal, stop the producers, wait for a full ISR, final read, read every replica, check.
        Writes report.json/.txt in the scenario directory."""
        c = self.cluster
        if heal:
            c.heal()
        for p in getattr(self, "producers", []):
            p.stop()
        wait(lambda: c.full_isr(self.topics), full_isr_s, "full ISR after heal")
        for p in getattr(self, "producers", []):
            p.join(60)
        final_read(c, self.history, self.topics, 30)
        for t in self.threads:
            t.stop()
        for t in self.threads:
            t.join(10)
        time.sleep(2.5)
        replicas = c.replica_states(self.topics)
        leaders = {(t, p): c.leader(t, p) for t, k in self.topics.items() for p in range(k)}
        self.scraped = c.scrape_logs(self.history)
        self.close()
        ops = load(os.path.join(self.dir, "history.jsonl"))
        self.result = check(ops, replicas, idempotent_clients=IDEM, control_topics=("control",), final_leaders=leaders)
        self.report = build(
            ops,
            self.result,
            {"scenario": os.path.basename(self.dir), "node_log_counts": self.scraped},
            min_isr={SAFE: 2, "control": 1},
        )
        write(self.report, os.path.join(self.dir, "report.json"))
        return self.result

    def finish_ok(self, *, full_isr_s: float = 60) -> CheckResult:
        """``finish`` and assert what every scenario promises: the checker found no violation,
        every acknowledged write was read back, and the workload had more than 50 of them."""
        res = self.finish(full_isr_s=full_isr_s)
        assert res.valid, f"{res.violations()}: {res.examples} (run in {self.dir})"
        assert res.counts["unseen"] == 0, res.examples.get("unseen")
        assert self.acked() > 50
        return res

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for t in self.threads:
            t.stop()
        # Heal first so the clients' outstanding requests end before their loop closes.
        try:
            self.cluster.hub.heal()
            for i in list(self.cluster._paused):
                self.cluster.resume(i)
        except Exception:  # noqa: BLE001 - closing after a failure: best effort
            pass
        for t in self.threads:
            t.join(45)
        self.threads = []
        if self.observer is not None:
            self.observer.stop()
            self.observer = None
        self.cluster.close()
        self.history.close()
