"""Replication (group ``replication``): producing to a three-node cluster on loopback, in one
process and as ``seglog node`` processes coordinated by ZooKeeper, acks=all beside acks=1, one
replica and a bare ``Log.append``; and the paced latency probe the ``bench/`` files use."""

from __future__ import annotations

import array
import functools
import gc
import random
import shutil
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from seglog.storage.log import Log
from seglog.storage.records import encode_batch

from .inputs import T0, Fresh, workdir
from .registry import Benchmark, Contender, Work


def sustained_peak(cluster: Any, topic: str, values: Sequence[bytes]) -> float:
    """Records/s of a producer configured as the latency probe's (``acks=all``, Kafka's
    defaults otherwise) sending ``values`` one ``send`` each to partition 0 of ``topic``, then
    flushing: the rate the cluster keeps up with, the peak that the probe's "half the peak"
    is taken of. ``values`` should take a second or more: a burst of a few thousand records
    only measures how fast the client takes them into its batches. The producer's first record
    (its connections, the metadata, a producer id) is sent before timing."""
    with cluster.producer(acks="all") as p:
        p.send(topic, values[0], partition=0).result(30)
        t0 = time.perf_counter()
        for v in values:
            p.send(topic, v, partition=0)
        p.flush(120)
        return len(values) / (time.perf_counter() - t0)


def probe_count(rate: float, available: int, seconds: float = 2.0, least: int = 2000) -> int:
    """How many records the latency probe sends at ``rate``: ``seconds`` of them (at least
    ``least``, at most ``available``), so that its p99 covers a stretch of steady state however
    high the rate."""
    return max(1, min(available, max(least, int(rate * seconds))))


def latency_at_half_peak(
    cluster: Any,
    topic: str,
    values: Sequence[bytes],
    peak_n: int,
    count: int | None = None,
    timed: Callable[[Callable[[], None]], object] = lambda run: run(),
) -> dict[str, float]:
    """The acks=all latency probe at half the sustained peak: :func:`sustained_peak` over
    ``values[:peak_n]``, then :func:`paced_latencies_ms` of ``count`` records (default
    :func:`probe_count`'s two seconds) from ``values[peak_n:]`` at half that rate, the probe run
    through ``timed`` (a benchmark's timer). Returns the peak, the rate, the count, p50 and p99."""
    peak = sustained_peak(cluster, topic, values[:peak_n])
    rate = peak / 2
    n = probe_count(rate, len(values) - peak_n) if count is None else count
    latencies: list[float] = []

    def run() -> None:
        with cluster.producer(acks="all") as p:
            latencies.extend(paced_latencies_ms(p, topic, values[peak_n:], n, rate))

    timed(run)
    q = statistics.quantiles(latencies, n=100)
    return {
        "peak_records_per_s": round(peak),
        "rate": round(rate),
        "records": n,
        "p50_ms": round(q[49], 3),
        "p99_ms": round(q[98], 3),
    }


def paced_latencies_ms(
    producer: Any, topic: str, value: bytes | Sequence[bytes], count: int, rate: float
) -> list[float]:
    """Send ``count`` records one at a time at ``rate`` records/s (partition 0) and return each
    one's send -> acknowledgement latency in ms. ``value``: every record's value, or a sequence
    of distinct values taken in turn.

    One record is sent and acknowledged first, untimed: a new producer's first send waits for
    its connections, the metadata and (idempotent) its producer id, ~40 ms here, which at
    15,000 records/s would hold the first 600 records and decide the p99 by itself. What is
    timed is a producer in its steady state.

    The probe keeps no future: a callback notes each acknowledgement in an ``array`` (which
    the garbage collector does not scan). Holding every future until the end, as an earlier
    version did, grew the process by ~14 objects a record, and the collector's full passes
    over them (20-80 ms each, every ~0.4 s at 15,000 records/s) set the p99 instead of the
    cluster. For the same reason the garbage of whatever ran before (the peak measurement's
    futures) is collected before the timed part, not in it."""
    values = [value] if isinstance(value, bytes) else value
    producer.send(topic, values[0], partition=0).result(30)
    gc.collect()
    sent_at = array.array("d", bytes(8 * count))
    done_at = array.array("d", bytes(8 * count))
    left = [count]
    failed: list[BaseException] = []
    all_done = threading.Event()
    lock = threading.Lock()

    def acknowledged(fut: Any, i: int) -> None:
        done_at[i] = time.perf_counter()
        if (exc := fut.exception()) is not None:
            failed.append(exc)
        with lock:
            left[0] -= 1
            if left[0] == 0:
                all_done.set()

    start = time.perf_counter()
    for i in range(count):
        due = start + i / rate
        now = time.perf_counter()
        if due > now:
            time.sleep(due - now)
        sent_at[i] = time.perf_counter()
        producer.send(topic, values[i % len(values)], partition=0).add_done_callback(
            functools.partial(acknowledged, i=i)
        )
    if not all_done.wait(30 + count / rate):
        raise TimeoutError(f"{left[0]} of {count} records not acknowledged within {30 + count / rate:.0f} s")
    if failed:
        raise failed[0]
    return [(done_at[i] - sent_at[i]) * 1000 for i in range(count)]


def _prepare_replication(p: Mapping[str, int], base: Path, available: frozenset[str], zookeeper: bool = False) -> Work:
    from seglog.cluster import start_cluster  # lazy: the cluster modules add ~0.5 s to start-up

    n = p["count"]
    # Distinct 100-byte records (random bytes), made once: no two records or batches alike.
    blob = random.Random(3).randbytes(100 * n)
    values = [blob[i : i + 100] for i in range(0, len(blob), 100)]
    zk: Any = None
    if zookeeper:
        # Three `seglog node` processes coordinated by a throwaway ZooKeeper server.
        from seglog.cluster.zkserver import ZooKeeperServer  # lazy: start-up time, as above

        zk = ZooKeeperServer()
        zk.__enter__()
        try:
            cluster: Any = start_cluster(
                nodes=3, coordinator="zookeeper", processes=True, zookeeper=f"{zk.connect_string}/bench"
            )
        except BaseException:
            zk.__exit__(None, None, None)
            raise
    else:
        cluster = start_cluster(nodes=3, dir=workdir(base, "cluster"))
    try:
        cluster.create_topic("rf3", 1, 3, {"min.insync.replicas": 2})
        cluster.create_topic("rf1", 1, 1)
    except BaseException:
        cluster.close()
        if zk is not None:
            zk.__exit__(None, None, None)
        raise

    # A producer per call (Kafka's defaults but acks), closed in it: its connections and metadata
    # fetch are timed too, as a short-lived producer pays them.
    def produce(topic: str, acks: str) -> Callable[[], None]:
        def run() -> None:
            with cluster.producer(acks=acks) as producer:
                futures = [producer.send(topic, v, partition=0) for v in values]
                producer.flush(120)
                futures[-1].result(10)

        return run

    batches = [encode_batch(values[a : a + 500], timestamps=T0) for a in range(0, n, 500)]
    bare = Fresh(base, "replication-log", lambda d: Log.open(d / "t-0"))

    def bare_append() -> None:
        for batch in batches:
            bare.obj.append(batch)

    def close() -> None:
        bare.close()
        try:
            cluster.close()
        finally:
            if zk is not None:
                zk.__exit__(None, None, None)
        shutil.rmtree(base / "cluster", ignore_errors=True)

    calls: dict[str, Callable[[], object]] = {
        "3 replicas, acks=all": produce("rf3", "all"),
        "3 replicas, acks=1": produce("rf3", "1"),
        "1 replica": produce("rf1", "1"),
        "Log.append (no network)": bare_append,
    }
    return Work(items=n, calls=calls, setup={"Log.append (no network)": bare.setup}, repeatable=False, close=close)


def _zookeeper_missing() -> str | None:
    from seglog.cluster.zkserver import unavailable_reason  # lazy: start-up time, as above

    return unavailable_reason()


def replication_benches() -> list[Benchmark]:
    return [
        Benchmark(
            name="replication",
            group="replication",
            unit="records",
            title="produce distinct 100 B records to a 3-node LocalCluster on loopback, acks=all vs acks=1",
            contenders=(
                Contender("3 replicas, acks=all", "seglog"),
                Contender("3 replicas, acks=1", "seglog"),
                Contender("1 replica", "seglog"),
                Contender("Log.append (no network)", "limit", note="the same records, batches of 500"),
            ),
            prepare=_prepare_replication,
            quick={"count": 20_000},
            full={"count": 200_000},
            full_round_seconds=10,
        ),
        Benchmark(
            name="replication-zookeeper",
            group="replication",
            unit="records",
            title="produce distinct 100 B records to 3 `seglog node` processes coordinated by ZooKeeper, acks=all vs acks=1",
            contenders=(
                Contender("3 replicas, acks=all", "seglog", ("kazoo",), "seglog[zookeeper]"),
                Contender("3 replicas, acks=1", "seglog", ("kazoo",), "seglog[zookeeper]"),
                Contender("1 replica", "seglog", ("kazoo",), "seglog[zookeeper]"),
                Contender("Log.append (no network)", "limit", note="the same records, batches of 500"),
            ),
            prepare=lambda p, b, a: _prepare_replication(p, b, a, zookeeper=True),
            quick={"count": 20_000},
            full={"count": 200_000},
            unavailable=_zookeeper_missing,
            full_round_seconds=10,
        ),
    ]
