"""Replication cost on loopback: a three-replica ``LocalCluster`` with ``acks=1`` and
``acks=all`` beside a single replica (same cluster code, replication factor 1) and beside a
bare ``Log.append`` of the same batches. 100-byte records.

Throughput: the registry's ``replication`` benchmark (``seglog.benchmarks.suite``), which
produces records through ``ClusterProducer`` (batches form while one request per partition is
in flight) and waits for every acknowledgement. The latency test sends
one record at a time at about half the acks=all peak rate and records p50/p99 of send -> ack in
``extra_info``. Run with ``pytest bench/bench_replication.py``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator

import pytest

from seglog.benchmarks import cases
from seglog.cluster import LocalCluster

VALUE = b"v" * 100


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(nodes=3) as c:
        c.create_topic("rf3", 1, 3, {"min.insync.replicas": 2})
        c.create_topic("rf1", 1, 1)
        yield c


def _produce(cluster: LocalCluster, topic: str, acks: str, n: int) -> None:
    with cluster.producer(acks=acks, batch_size=64 * 1024) as p:
        futures = [p.send(topic, VALUE, partition=0) for _ in range(n)]
        p.flush(120)
        futures[-1].result(10)


CASES = cases("replication")


@pytest.mark.parametrize("name,contender", CASES, ids=[c for _, c in CASES])
def test_cluster_throughput(bench_run: Callable[[str, str], None], name: str, contender: str) -> None:
    """The registry's ``replication`` benchmark (``seglog bench --only replication``): 3 replicas
    with acks=all and acks=1, one replica, and a bare ``Log.append`` of the same records."""
    bench_run(name, contender)


def test_acks_all_latency_at_half_peak(benchmark, cluster: LocalCluster) -> None:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    _produce(cluster, "rf3", "all", 5000)
    peak = 5000 / (time.perf_counter() - t0)
    rate = peak / 2
    latencies: list[float] = []
    done_at: dict[int, float] = {}

    def run_timed() -> None:
        with cluster.producer(acks="all") as p:
            start = time.perf_counter()
            sent_at = []
            futs = []
            for i in range(2000):
                due = start + i / rate
                now = time.perf_counter()
                if due > now:
                    time.sleep(due - now)
                sent_at.append(time.perf_counter())
                f = p.send("rf3", VALUE, partition=0)
                f.add_done_callback(lambda _f, i=i: done_at.__setitem__(i, time.perf_counter()))
                futs.append(f)
            for f in futs:
                f.result(30)
            latencies.extend((done_at[i] - sent_at[i]) * 1000 for i in range(len(futs)))

    benchmark.pedantic(run_timed, rounds=1, iterations=1)
    q = statistics.quantiles(latencies, n=100)
    benchmark.extra_info.update({"peak_records_per_s": round(peak), "rate": round(rate),
                                 "p50_ms": round(q[49], 3), "p99_ms": round(q[98], 3)})
