"""A null Kafka broker: seglog's Kafka protocol front end with no log behind produce and fetch.

It decodes every request and encodes every answer as ``seglog serve`` does (the same
:class:`seglog.kafka.server.KafkaServer`), but answers Produce without storing anything and
Fetch from one pre-encoded batch held in memory, its base offset set to the offset asked for.
What a client reaches against it is that client's ceiling on this machine's loopback: the
benchmarks of ``seglog bench`` (``kafka-produce-*``, ``kafka-consume-*``) compare ``seglog serve``
with it. Topics and metadata are a real (empty) store's, in a temporary directory.

Run as ``python -m seglog.benchmarks.nullbroker --listen 127.0.0.1:0 --topic T --records N``;
it writes ``null broker: serving on HOST:PORT`` to stderr once it accepts connections and stops
on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import os
import random
import struct
import sys
import tempfile
from typing import Any

from seglog.cli.serve import serve_until_stopped
from seglog.errors import SeglogError, UnknownTopicOrPartitionError, code_for_exception
from seglog.kafka.codec import Message
from seglog.kafka.connection import ConnState
from seglog.kafka.server import KafkaServer, record_count
from seglog.storage.records import encode_batch

__all__ = ["NullBroker", "main"]

_BASE_OFFSET = struct.Struct(">q")
T0 = 1_700_000_000_000


class NullBroker(KafkaServer):
    """A :class:`KafkaServer` whose Produce stores nothing and whose Fetch serves copies of one
    batch of ``batch_records`` records of ``value_size`` bytes, as if every partition held
    ``records`` records."""

    def __init__(
        self, store: Any, host: str, port: int, *, records: int, batch_records: int = 1000, value_size: int = 100
    ) -> None:
        super().__init__(store, host, port, group_initial_rebalance_delay_ms=0)
        rng = random.Random(0)
        self.records = records
        self.batch_records = batch_records
        self.batch = bytes(encode_batch([rng.randbytes(value_size) for _ in range(batch_records)], timestamps=T0))
        self._next_offset: dict[tuple[str, int], int] = {}

    def _produce_partition(self, topic: str, partition: int, records: Any, acks: int, state: ConnState) -> Message:
        out: Message = {
            "index": partition,
            "error_code": 0,
            "base_offset": -1,
            "log_append_time_ms": -1,
            "log_start_offset": 0,
            "record_errors": [],
            "error_message": None,
        }
        try:
            self.store.partitions_for(topic)
        except SeglogError as exc:
            out["error_code"] = code_for_exception(exc)
            return out
        key = (topic, partition)
        base = self._next_offset.get(key, 0)
        out["base_offset"] = base
        self._next_offset[key] = base + record_count(records)
        return out

    def _read_fetch(self, req: Message, topics: list[Message]) -> tuple[list[Any], int, bool]:
        budget = req.get("max_bytes", 0x7FFFFFFF)
        size = len(self.batch)
        responses = []
        total = 0
        error = False
        for topic in topics:
            parts = []
            for fp in topic["partitions"]:
                out = {
                    "partition_index": fp["partition"],
                    "error_code": 0,
                    "high_watermark": self.records,
                    "last_stable_offset": self.records,
                    "log_start_offset": 0,
                    "aborted_transactions": None,
                    "preferred_read_replica": -1,
                    "records": b"",
                }
                try:
                    self.store.partitions_for(topic["topic"])
                except UnknownTopicOrPartitionError as exc:
                    out["error_code"] = exc.code
                    error = True
                    parts.append(out)
                    continue
                offset = fp["fetch_offset"]
                left = -(-(self.records - offset) // self.batch_records)
                fit = min(fp["partition_max_bytes"], budget) // size
                count = max(0, min(left, fit if fit or total else 1))
                if count:
                    data = bytearray(self.batch * count)
                    for i in range(count):
                        _BASE_OFFSET.pack_into(data, i * size, offset + i * self.batch_records)
                    out["records"] = data
                    total += len(data)
                    budget -= len(data)
                parts.append(out)
            responses.append({"topic": topic["topic"], "partitions": parts})
        return responses, total, error


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m seglog.benchmarks.nullbroker", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--listen", default="127.0.0.1:0", metavar="HOST:PORT")
    parser.add_argument("--topic", action="append", default=[], help="a topic to create (1 partition)")
    parser.add_argument("--records", type=int, default=1_000_000, help="records each partition seems to hold for Fetch")
    parser.add_argument("--batch-records", type=int, default=1000)
    parser.add_argument("--value-size", type=int, default=100)
    args = parser.parse_args(argv)
    host, _, port = args.listen.rpartition(":")

    from seglog import Store

    with (
        tempfile.TemporaryDirectory(prefix="seglog-null-broker-") as tmp,
        Store.open(tmp, {"group.initial.rebalance.delay.ms": 0}) as store,
    ):
        for t in args.topic:
            store.create_topic(t, 1)

        serve_until_stopped(
            lambda: NullBroker(
                store,
                host,
                int(port),
                records=args.records,
                batch_records=args.batch_records,
                value_size=args.value_size,
            ),
            lambda server: f"null broker: serving on {server.bootstrap_servers}",
        )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
