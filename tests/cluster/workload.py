"""The client workload of ``docs/replication.md`` §9.4, recorded into a :class:`History`.

Producers: ``p0..p{k-1}`` idempotent (acks=all) on the safe topic, ``n{k}`` non-idempotent with
retries on the safe topic, and ``k{k+1}`` with acks=1 on the control topic. Each sends unique values
``(client, n)`` (:func:`tests.cluster.checker.encode_value`, 64 bytes) round-robin over the
partitions, in bursts of 1-10 records at about ``rate`` records/s. Every record is one ``send``
operation: ``invoke`` before it is handed to the client, then ``ok`` with its offset or
``fail``/``info`` by the §9.4 table.

Consumers ``c0``, ``c1``: assign mode on every partition of both topics from offset 0, polling
continuously; every record is logged with its partition and offset (``poll`` operations, one
per partition per poll, with the position the poll started from). Fetches name the leader
epoch (KIP-320), so each poll also logs ``served``: the leader that answered, its epoch and the
HW it reported — the checker's HW observations.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Sequence
from typing import Any

from tests.cluster.checker import encode_value, value_key
from tests.cluster.history import History

PRODUCER_TIMEOUTS = {"request_timeout_ms": 5000, "delivery_timeout_ms": 30000}


class Producer(threading.Thread):
    def __init__(
        self,
        cluster: Any,
        history: History,
        name: str,
        topic: str,
        partitions: int,
        *,
        rate: float,
        seed: int,
        **config: Any,
    ) -> None:
        super().__init__(name=f"producer-{name}", daemon=True)
        self.cluster = cluster
        self.history = history
        self.client = name
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.rng = random.Random(seed)
        self.config = config
        self.stop_event = threading.Event()
        self.n = 0
        self.errors: list[BaseException] = []
        self.outstanding = 0
        self._lock = threading.Lock()

    def _send(self, producer: Any, partition: int) -> None:
        key = f"{self.client}:{self.n}"
        value = encode_value(self.client, self.n)
        self.n += 1
        op = self.history.invoke(self.client, "send", {"topic": self.topic, "partition": partition, "value": key})
        with self._lock:
            self.outstanding += 1
        try:
            fut = producer.send(self.topic, value, partition=partition)
        except Exception as exc:  # noqa: BLE001 - refused before it was queued
            self._done(op, None, exc)
            return

        def done(f: Any) -> None:
            exc = f.exception()
            self._done(op, None if exc is not None else f.result(), exc)

        fut.add_done_callback(done)

    def _done(self, op: int, md: Any, exc: BaseException | None) -> None:
        if exc is None:
            self.history.ok(op, {"partition": md.partition, "offset": md.offset})
        else:
            self.history.error(op, exc)
        with self._lock:
            self.outstanding -= 1

    def run(self) -> None:
        try:
            producer = self.cluster.producer(**{**PRODUCER_TIMEOUTS, **self.config})
        except Exception as exc:  # noqa: BLE001
            self.errors.append(exc)
            return
        p = self.rng.randrange(self.partitions)
        try:
            while not self.stop_event.is_set():
                burst = self.rng.randint(1, 10)
                for _ in range(burst):
                    self._send(producer, p)
                p = (p + 1) % self.partitions
                # keep at most a few seconds' worth outstanding: a stalled cluster is not flooded
                while self.outstanding > 20 * self.rate and not self.stop_event.is_set():
                    time.sleep(0.05)
                self.stop_event.wait(burst / self.rate)
        finally:
            deadline = time.monotonic() + 40
            while self.outstanding > 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            try:
                producer.close()
            except Exception as exc:  # noqa: BLE001
                self.errors.append(exc)

    def stop(self) -> None:
        self.stop_event.set()


class Consumer(threading.Thread):
    def __init__(
        self, cluster: Any, history: History, name: str, tps: Sequence[tuple[str, int]], poll_ms: int = 200
    ) -> None:
        super().__init__(name=f"consumer-{name}", daemon=True)
        self.cluster = cluster
        self.history = history
        self.client = name
        self.tps = list(tps)
        self.poll_ms = poll_ms
        self.stop_event = threading.Event()
        self.errors = 0
        self.records = 0
        self.consumer: Any = None

    def poll_once(self) -> int:
        c = self.consumer
        starts = {tp: c.position(*tp) for tp in self.tps}
        t_invoke = self.history.now()
        recs = c.poll(timeout_ms=self.poll_ms)
        by_tp: dict[tuple[str, int], list[list[Any]]] = {}
        served: dict[tuple[str, int], list[list[int]]] = {}
        for r in recs:
            tp = (r.topic, r.partition)
            by_tp.setdefault(tp, []).append(
                [r.offset, value_key(r.value), r.leader_epoch, r.high_watermark if r.high_watermark >= 0 else None]
            )
            if r.serving_leader >= 0 and r.high_watermark >= 0:
                obs = [r.serving_leader, r.serving_leader_epoch, r.high_watermark]
                if not served.get(tp) or served[tp][-1] != obs:
                    served.setdefault(tp, []).append(obs)
        for tp, rs in by_tp.items():
            op = self.history.invoke(
                self.client,
                "poll",
                {"topic": tp[0], "partition": tp[1], "from": starts[tp], "invoked_at": round(t_invoke, 3)},
            )
            extra: dict[str, Any] = {"records": rs}
            if tp in served:
                # [[leader, its epoch, its HW], ...]: what the leader that answered reported
                extra["served"] = served[tp]
            self.history.ok(op, extra)
        self.records += len(recs)
        return len(recs)

    def open(self) -> None:
        self.consumer = self.cluster.consumer(request_timeout_ms=3000, fetch_max_wait_ms=200)
        self.consumer.name_leader_epoch = True  # each poll then says which leader, in which epoch, served it
        self.consumer.assign(self.tps)

    def run(self) -> None:
        try:
            self.open()
        except Exception:  # noqa: BLE001
            self.errors += 1
            return
        while not self.stop_event.is_set():
            try:
                self.poll_once()
            except Exception:  # noqa: BLE001 - a poll that fails is retried; positions stay
                self.errors += 1
                time.sleep(0.1)
        try:
            self.consumer.close()
        except Exception:  # noqa: BLE001
            pass

    def stop(self) -> None:
        self.stop_event.set()


def final_read(
    cluster: Any, history: History, topics: dict[str, int], timeout_s: float = 60, name: str = "final"
) -> dict[tuple[str, int], int]:
    """Read every partition from 0 to its HW with a fresh consumer (logged as polls); returns the
    end offset reached per partition."""
    c = Consumer(cluster, history, name, [(t, p) for t, n in topics.items() for p in range(n)], poll_ms=500)
    c.open()
    deadline = time.monotonic() + timeout_s
    quiet = 0
    while time.monotonic() < deadline and quiet < 3:
        try:
            got = c.poll_once()
        except Exception:  # noqa: BLE001
            got = 0
        quiet = quiet + 1 if got == 0 else 0
    ends = {tp: c.consumer.position(*tp) for tp in c.tps}
    c.consumer.close()
    return ends
