"""What the cluster tests of this folder do as clients of a LocalCluster (the simulator is sim.py)."""

from __future__ import annotations

import time
from typing import Any


def consume_all(
    cluster: Any, topic: str, partitions: int, expect: int, timeout_s: float = 30, **consumer_config: Any
) -> list[Any]:
    """Every record of ``topic``'s partitions 0..``partitions``-1 that ``cluster``'s consumer
    reads within ``timeout_s``, polling until ``expect`` came, then once more: a record beyond
    those expected shows up in the result."""
    consumer = cluster.consumer(**consumer_config)
    consumer.assign([(topic, p) for p in range(partitions)])
    got: list[Any] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < expect and time.monotonic() < deadline:
            got += consumer.poll(500)
        got += consumer.poll(300)
    finally:
        consumer.close()
    return got
