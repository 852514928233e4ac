"""Three node processes (``seglog node``) with ZooKeeper on loopback: ``acks=all`` produce
throughput and latency, and leader failover time against ``zookeeper.session.timeout.ms``.

* throughput: the registry's ``replication-zookeeper`` benchmark (``seglog.benchmarks.replication``:
  acks=all, acks=1 and one replica beside a bare ``Log.append``, every acknowledgement awaited);
* latency: one record at a time at half the rate the same producer sustains over 200,000
  distinct records, p50/p99 of send -> ack;
* confluent-kafka (librdkafka) producing to the cluster with acks=all and idempotence, beside
  seglog's own producer sending the same distinct records one call each;
* failover: SIGKILL the partition's leader, then send one ``acks=all`` record and wait for its
  acknowledgement (the producer refreshes metadata and retries every 50 ms); failover time =
  kill -> that acknowledgement. Repeated ``TRIALS`` times per session timeout (the killed node is
  restarted and back in the ISR before the next trial); p50/p99/max in ``extra_info``, with how
  many of the killed leaders were also the controller.

Skipped when ZooKeeper is not installed. Run with ``pytest bench/bench_cluster.py``; with
``--benchmark-disable`` (the CI smoke pass) every measurement runs once, briefly.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from seglog.cluster.zkserver import ZooKeeperServer, unavailable_reason

_reason = unavailable_reason()
if _reason is not None:
    pytest.skip(_reason, allow_module_level=True)

from seglog.benchmarks import cases  # noqa: E402
from seglog.benchmarks.replication import latency_at_half_peak  # noqa: E402
from seglog.cluster import start_cluster  # noqa: E402

TRIALS = 10


@pytest.fixture(scope="module")
def zk() -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer() as server:
        yield server


def _cluster(zk: ZooKeeperServer, name: str, session_timeout_ms: int = 3000) -> Any:
    return start_cluster(
        nodes=3,
        coordinator="zookeeper",
        processes=True,
        zookeeper=f"{zk.connect_string}/{name}-{time.monotonic_ns()}",
        replica_config={"session.timeout.ms": session_timeout_ms},
    )


@pytest.fixture(scope="module")
def cluster(zk: ZooKeeperServer) -> Iterator[Any]:
    c = _cluster(zk, "bench")
    try:
        c.create_topic("rf3", 1, 3, {"min.insync.replicas": 2})
        yield c
    finally:
        c.close()


CASES = cases("replication-zookeeper")


@pytest.mark.parametrize("name,contender", CASES, ids=[c for _, c in CASES])
def test_processes_throughput(bench_run: Callable[[str, str], None], name: str, contender: str) -> None:
    """The registry's ``replication-zookeeper`` benchmark (``seglog bench --only
    replication-zookeeper``): acks=all and acks=1 on three replicas, one replica, and a bare
    ``Log.append`` of the same records."""
    bench_run(name, contender)


def test_processes_acks_all_latency_at_half_peak(benchmark: Any, cluster: Any) -> None:
    """p50/p99 of send -> acknowledgement, one record at a time with acks=all at half the rate
    the same producer sustains (:func:`~seglog.benchmarks.replication.sustained_peak` over
    200,000 distinct records), for two seconds of records."""
    import random

    peak_n = 2_000 if benchmark.disabled else 200_000
    blob = random.Random(7).randbytes(100 * (peak_n + 400_000))
    values = [blob[i : i + 100] for i in range(0, len(blob), 100)]
    count = 200 if benchmark.disabled else None
    run = functools.partial(benchmark.pedantic, rounds=1, iterations=1)
    benchmark.extra_info.update(latency_at_half_peak(cluster, "rf3", values, peak_n, count, run))


def _confluent_produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    """confluent-kafka (librdkafka) producing ``values`` with acks=all and idempotence, every
    delivery report awaited; raises if any record failed."""
    from confluent_kafka import Producer

    failed: list[Any] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(err)

    p = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5, "log_level": 3}
    )
    for v in values:
        while True:
            try:
                p.produce(topic, v, partition=0, on_delivery=delivered)
                break
            except BufferError:  # the client's queue is full: let it send
                p.poll(0.01)
    left = p.flush(120)
    if left or failed:
        raise RuntimeError(f"confluent-kafka: {left} records undelivered, {len(failed)} failed ({failed[:1]})")


def test_confluent_kafka_acks_all_to_three_nodes(benchmark: Any, cluster: Any) -> None:
    """confluent-kafka producing distinct 100 B records (random bytes) to the three-node
    cluster's replication-factor-3 topic with acks=all, min.insync.replicas=2 and idempotence,
    each round beside seglog's own producer sending the same records one call each (acks=all,
    idempotent), once with Kafka's defaults (``batch.size`` 16 KiB, ``linger.ms`` 0) and once
    batching as librdkafka does by default (``batch.size`` 1 MiB, ``linger.ms`` 5): records/s of
    each and the ratios, in ``extra_info``."""
    pytest.importorskip("confluent_kafka", reason="pip install confluent-kafka")
    import random

    n = 2_000 if benchmark.disabled else 200_000
    blob = random.Random(5).randbytes(100 * n)
    values = [blob[i : i + 100] for i in range(0, len(blob), 100)]
    confluent: list[float] = []
    own: list[float] = []
    own_large: list[float] = []

    def seglog_produce(rates: list[float], **batching: Any) -> None:
        t = time.perf_counter()
        with cluster.producer(acks="all", enable_idempotence=True, **batching) as p:
            for v in values:
                p.send("rf3", v, partition=0)
            p.flush(120)
        rates.append(n / (time.perf_counter() - t))

    def run() -> None:
        t = time.perf_counter()
        _confluent_produce(cluster.bootstrap_servers, "rf3", values)
        confluent.append(n / (time.perf_counter() - t))
        seglog_produce(own)
        seglog_produce(own_large, batch_size=1 << 20, linger_ms=5)

    benchmark.pedantic(run, rounds=1 if benchmark.disabled else 3, iterations=1)
    benchmark.extra_info.update(
        {
            "records": n,
            "confluent_records_per_s": round(statistics.median(confluent)),
            "confluent_mib_per_s": round(statistics.median(confluent) * 100 / (1 << 20), 1),
            "seglog_producer_records_per_s": round(statistics.median(own)),
            "confluent_vs_seglog_producer": round(statistics.median(c / o for c, o in zip(confluent, own)), 3),
            "seglog_producer_1mib_batches_records_per_s": round(statistics.median(own_large)),
            "confluent_vs_seglog_producer_1mib_batches": round(
                statistics.median(c / o for c, o in zip(confluent, own_large)), 3
            ),
        }
    )


@pytest.mark.parametrize("session_timeout_ms", [1000, 3000, 6000])
def test_processes_leader_failover(benchmark: Any, zk: ZooKeeperServer, session_timeout_ms: int) -> None:
    trials = 1 if benchmark.disabled else TRIALS
    if benchmark.disabled and session_timeout_ms != 1000:
        pytest.skip("the smoke pass measures one session timeout")
    times: list[float] = []
    controller_too = 0
    c = _cluster(zk, f"failover-{session_timeout_ms}", session_timeout_ms)
    try:
        c.create_topic("f", 1, 3, {"min.insync.replicas": 2})
        producer = c.producer(
            acks="all",
            enable_idempotence=True,
            retry_backoff_ms=50,
            retry_backoff_max_ms=50,
            request_timeout_ms=max(1000, session_timeout_ms),
            delivery_timeout_ms=120_000,
        )
        producer.send("f", b"warm-up").result(30)

        def trial(k: int) -> None:
            nonlocal controller_too
            c.wait_for(lambda: len(c.isr("f")) == 3, 60, "a full ISR")
            leader = c.leader("f")
            controller_too += leader == c.controller()
            t0 = time.perf_counter()
            c.kill(leader)
            producer.send("f", b"after-kill-%d" % k).result(120)
            times.append(time.perf_counter() - t0)
            c.restart(leader)

        def run() -> None:
            for k in range(trials):
                trial(k)

        benchmark.pedantic(run, rounds=1, iterations=1)
        producer.close()
    finally:
        c.close()
    ms = sorted(t * 1000 for t in times)
    q = statistics.quantiles(ms, n=100, method="inclusive") if len(ms) > 1 else [ms[0]] * 99
    benchmark.extra_info.update(
        {
            "session_timeout_ms": session_timeout_ms,
            "trials": len(ms),
            "failover_p50_ms": round(q[49]),
            "failover_p99_ms": round(q[98]),
            "failover_max_ms": round(ms[-1]),
            "failover_min_ms": round(ms[0]),
            "leader_was_controller": controller_too,
            "failover_ms": [round(x) for x in ms],
        }
    )
