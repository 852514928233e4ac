"""Kafka protocol codec: seglog's generated codec against ``kio`` on the request path.

Each case encodes one message of a realistic size with seglog's codec, reads the same bytes
with kio (so both decoders see identical input and kio's result proves our encoding), then
times, per message: decode with each codec, and encode with each codec from its own decoded
form. Record data is opaque to both. Run: ``python bench/kafka_codec.py`` (about 20 s).
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Callable
from typing import Any

from seglog.kafka import codec


def _produce_request(partitions: int, batch: int) -> dict:
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [
            {
                "name": "orders",
                "partition_data": [{"index": p, "records": bytes([p % 256]) * batch} for p in range(partitions)],
            }
        ],
    }


def _produce_response(partitions: int) -> dict:
    return {
        "responses": [
            {
                "name": "orders",
                "partition_responses": [
                    {
                        "index": p,
                        "error_code": 0,
                        "base_offset": 1000 * p,
                        "log_append_time_ms": -1,
                        "log_start_offset": 0,
                        "record_errors": [],
                        "error_message": None,
                    }
                    for p in range(partitions)
                ],
            }
        ],
        "throttle_time_ms": 0,
    }


def _fetch_request(topics: int, partitions: int) -> dict:
    return {
        "replica_id": -1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 52428800,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": f"topic-{t}",
                "partitions": [
                    {
                        "partition": p,
                        "current_leader_epoch": 0,
                        "fetch_offset": 123456,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1048576,
                    }
                    for p in range(partitions)
                ],
            }
            for t in range(topics)
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def _fetch_response(partitions: int, size: int) -> dict:
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                "topic": "orders",
                "partitions": [
                    {
                        "partition_index": p,
                        "error_code": 0,
                        "high_watermark": 10**6,
                        "last_stable_offset": 10**6,
                        "log_start_offset": 0,
                        "aborted_transactions": None,
                        "preferred_read_replica": -1,
                        "records": bytes(size),
                    }
                    for p in range(partitions)
                ],
            }
        ],
    }


def _metadata_response(topics: int, partitions: int) -> dict:
    return {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
        "cluster_id": "seglog-cluster-0123456789",
        "controller_id": 1,
        "topics": [
            {
                "error_code": 0,
                "name": f"topic-{t}",
                "topic_id": bytes(16),
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": p,
                        "leader_id": 1,
                        "leader_epoch": 0,
                        "replica_nodes": [1],
                        "isr_nodes": [1],
                        "offline_replicas": [],
                    }
                    for p in range(partitions)
                ],
                "topic_authorized_operations": -2147483648,
            }
            for t in range(topics)
        ],
    }


# (label, message name, version, kio module path, message)
CASES = [
    ("Produce request, 1 partition x 16 KiB", "ProduceRequest", 9, "produce.v9.request", _produce_request(1, 16384)),
    ("Produce request, 8 partitions x 16 KiB", "ProduceRequest", 9, "produce.v9.request", _produce_request(8, 16384)),
    ("Produce response, 8 partitions", "ProduceResponse", 9, "produce.v9.response", _produce_response(8)),
    ("Fetch request, 1 topic x 8 partitions", "FetchRequest", 12, "fetch.v12.request", _fetch_request(1, 8)),
    ("Fetch request, 20 topics x 10 partitions", "FetchRequest", 12, "fetch.v12.request", _fetch_request(20, 10)),
    ("Fetch response, 8 partitions x 1 MiB", "FetchResponse", 12, "fetch.v12.response", _fetch_response(8, 1 << 20)),
    (
        "Metadata response, 10 topics x 8 partitions",
        "MetadataResponse",
        12,
        "metadata.v12.response",
        _metadata_response(10, 8),
    ),
    (
        "Metadata response, 100 topics x 10 partitions",
        "MetadataResponse",
        12,
        "metadata.v12.response",
        _metadata_response(100, 10),
    ),
]


def _best(fn: Callable[[], Any], seconds: float = 0.4) -> float:
    """Best time of one call over repeated runs of at least ``seconds`` in total."""
    best = float("inf")
    deadline = time.perf_counter() + seconds
    runs = 0
    while runs < 5 or time.perf_counter() < deadline:
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        runs += 1
    return best


def main() -> int:
    import importlib

    from kio.serial import entity_reader, entity_writer

    rows = []
    for label, name, version, kio_path, message in CASES:
        wire = codec.encode_to_bytes(name, version, message)
        mod = importlib.import_module(f"kio.schema.{kio_path}")
        kio_type = getattr(mod, name)
        read = entity_reader(kio_type)
        write = entity_writer(kio_type)
        kio_obj, size = read(wire, 0)
        assert size == len(wire), (label, size, len(wire))
        ours, pos = codec.decode(name, version, memoryview(wire))
        assert pos == len(wire)

        def kio_encode() -> bytes:
            buf = io.BytesIO()
            write(buf, kio_obj)
            return buf.getvalue()

        assert kio_encode() == wire, f"{label}: kio and seglog encode differently"
        t = {
            "seglog decode": _best(lambda: codec.decode(name, version, memoryview(wire))),
            "kio decode": _best(lambda: read(wire, 0)),
            "seglog encode": _best(lambda: codec.encode(name, version, ours)),
            "kio encode": _best(kio_encode),
        }
        rows.append((label, len(wire), t))
    print("| message | bytes | seglog decode | kio decode | seglog encode | kio encode |")
    print("|---|---|---|---|---|---|")
    for label, size, t in rows:
        cells = [f"{t[k] * 1e6:,.1f} µs" for k in ("seglog decode", "kio decode", "seglog encode", "kio encode")]
        print(f"| {label} | {size:,} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
