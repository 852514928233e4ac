"""Kafka clients against ``seglog serve`` and a null broker, and ``Store.serve()``'s start-up.

    pytest bench/bench_kafka.py --benchmark-columns=median,ops --benchmark-group-by=group

The registry's benchmarks (``seglog.benchmarks.kafka``; ``seglog bench --only kafka`` runs the
same work): for each of confluent-kafka, kafka-python and aiokafka, ``kafka-produce-CLIENT``
(100-byte records, acks=1, linger.ms=5) and ``kafka-consume-CLIENT``, each against
``seglog serve`` and against the null broker (``python -m seglog.benchmarks.nullbroker``), every
broker in a process of its own. Goals: confluent-kafka >= 0.8x the null broker both ways;
``Store.serve()`` < 0.3 s.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from seglog.benchmarks import cases

CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka")
CASES = cases(*(f"kafka-{way}-{c}" for c in CLIENTS for way in ("produce", "consume")), "kafka-serve-start")


@pytest.mark.parametrize("name,contender", CASES, ids=[f"{n}-{c}" for n, c in CASES])
def test_kafka(bench_run: Callable[[str, str], None], name: str, contender: str) -> None:
    bench_run(name, contender)
