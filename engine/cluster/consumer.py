"""The cluster's consumer: committed records (below each leader's high watermark) of assigned
partitions, fetched from their leaders over Kafka's protocol (Fetch through a
:class:`seglog.kafka.client.KafkaClient`), so it reads a cluster's nodes, a single store's
listener or a Kafka broker alike.

Made by :meth:`seglog.cluster.local.LocalCluster.consumer` and
:meth:`seglog.cluster.client.ClusterClient.consumer`; its requests run on their loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Iterable
from typing import Any

from seglog.client.kafka_table import columns_table, empty_table
from seglog.cluster.network import ClientHost, kafka_keys
from seglog.config import ConsumerConfig
from seglog.errors import KafkaStorageError, OffsetOutOfRangeError, SeglogError
from seglog.storage.records import batch_headers, decode_records
from seglog.storage.topic import TopicPartition
from seglog.util.args import int_arg
from seglog.util.closing import Closeable

__all__ = ["ClusterConsumer", "ConsumerRecord"]

#: What :meth:`ClusterConsumer._poll` hands a partition's fetched bytes to: (partition, the
#: records bytes, the position, the high watermark or None, how many records may still be
#: taken or None, the partition's response, the serving leader, its epoch) -> records taken.
_Take = Callable[[tuple[str, int], bytes, int, int | None, int | None, Any, int, int], int]


def _end(data: bytes, pos: int, hw: int | None, last: int) -> int:
    """The position after every record of ``data`` was taken: past its last whole batch
    (so control batches and offsets a compaction removed are stepped over, as Kafka's consumer
    does), never past the high watermark; at least ``last``, one past the last record taken."""
    heads = batch_headers(data, allow_truncated=True)
    end = heads[-1].next_offset if heads else pos
    if hw is not None:
        end = min(end, hw)
    return max(end, last, pos)


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerRecord:
    """A committed record a :class:`ClusterConsumer` read."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    leader_epoch: int = -1
    high_watermark: int = -1  # the serving leader's HW in the fetch response that carried it
    #: With :attr:`ClusterConsumer.name_leader_epoch`: the node that served the record and the
    #: leader epoch it checked the fetch against (KIP-320), so ``high_watermark`` is that leader's
    #: HW in that epoch; -1 otherwise.
    serving_leader: int = -1
    serving_leader_epoch: int = -1
    #: The record's headers, ``(key, value)`` pairs in the order they were sent.
    headers: list[tuple[str, bytes | None]] = dataclasses.field(default_factory=list)


class ClusterConsumer(Closeable):
    """Reads committed records (below each leader's high watermark) of assigned partitions.

    With :attr:`name_leader_epoch` set, every fetch names the leader epoch the consumer's
    metadata gives (KIP-320): a leader in another epoch refuses it (the consumer refreshes its
    metadata), so each record says which leader, in which epoch, reported its HW."""

    name_leader_epoch = False

    def __init__(self, cluster: ClientHost, config: ConsumerConfig) -> None:
        self.cluster = cluster
        self.config = config
        self._c = cluster._client()
        self._positions: dict[tuple[str, int], int] = {}
        self._closed = False

    async def _refresh(self) -> None:
        try:
            await self._c.refresh_metadata(sorted({t for t, _ in self._positions}) or None)
        except SeglogError:
            pass  # no broker answered: the next poll asks again

    @classmethod
    def from_keywords(cls, cluster: ClientHost, **config: Any) -> ClusterConsumer:
        """A consumer of ``cluster`` reading from the earliest offset unless told otherwise;
        keywords are Kafka consumer keys with '_' for '.' (``fetch_max_wait_ms=...``,
        ``max_poll_records=...``)."""
        cfg: dict[str, Any] = {"auto.offset.reset": "earliest"}
        cfg.update(kafka_keys(config))
        return cls(cluster, ConsumerConfig.from_dict(cfg))

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        for tp in partitions:
            self._positions.setdefault((tp[0], tp[1]), 0)

    def subscribe(self, topics: Iterable[str]) -> None:
        topics = list(topics)
        try:
            self.cluster._call(self._c.refresh_metadata(topics))
        except SeglogError:
            pass
        for t in topics:
            for p in range(self._c.topic_partitions.get(t, 0)):
                self._positions.setdefault((t, p), 0)

    def seek(self, topic: str, partition: int, offset: int) -> None:
        self._positions[(topic, partition)] = offset

    def position(self, topic: str, partition: int) -> int:
        return self._positions[(topic, partition)]

    def poll(self, timeout_ms: int = 1000, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records from the current positions; waits up to ``timeout_ms`` for any."""
        self._check_open()
        limit = max_records or self.config.max_poll_records
        out: list[ConsumerRecord] = []
        check = self.config.check_crcs

        def take(
            tp: tuple[str, int], data: bytes, pos: int, hw: int | None, left: int | None, pr: Any, by: int, epoch: int
        ) -> int:
            recs = decode_records(data, allow_truncated=True, min_offset=pos, max_offset=hw, verify_crc=check)
            if left is not None and len(recs) > left:
                del recs[left:]
                self._positions[tp] = recs[-1].offset + 1
            else:
                self._positions[tp] = _end(data, pos, hw, recs[-1].offset + 1 if recs else pos)
            hwm = pr["high_watermark"]
            out.extend(
                ConsumerRecord(
                    tp[0], tp[1], r.offset, r.timestamp, r.key, r.value, r.leader_epoch, hwm, by, epoch, r.headers
                )
                for r in recs
            )
            return len(recs)

        self.cluster._call(self._poll(timeout_ms, limit, take), timeout_ms / 1000 + 30)
        return out

    def poll_columns(self, max_records: int | None = None, timeout_ms: int = 1000, *, headers: bool = False) -> Any:
        """Like :meth:`poll` but as a ``pyarrow.Table`` decoded without per-record Python
        objects (the store's :meth:`seglog.client.consumer.Consumer.poll_columns`), with Spark's
        Kafka-source columns: ``key``, ``value`` (binary), ``topic`` (string), ``partition``
        (int32), ``offset`` (int64), ``timestamp`` (timestamp[ms, UTC]), ``timestampType``
        (int32) and, with ``headers=True``, ``headers`` (list<struct<key: string, value:
        binary>>). ``max_records`` defaults to everything one round of fetches returns; records
        past it are fetched again from the position by the next call."""
        import pyarrow as pa  # optional dependency, imported on first use

        int_arg("max_records", max_records, optional=True)
        int_arg("timeout_ms", timeout_ms)
        self._check_open()
        if max_records is not None and max_records < 1:
            raise ValueError(f"max_records must be at least 1, got {max_records}")
        tables: list[Any] = []
        check = self.config.check_crcs

        def take(
            tp: tuple[str, int], data: bytes, pos: int, hw: int | None, left: int | None, pr: Any, by: int, epoch: int
        ) -> int:
            table = columns_table(
                TopicPartition(*tp), [memoryview(data)], pos, headers, check, allow_truncated=True, max_offset=hw
            )
            n = int(table.num_rows)
            if left is not None and n > left:
                table = table.slice(0, left)
                n = left
                self._positions[tp] = table.column("offset")[n - 1].as_py() + 1
            else:
                last = table.column("offset")[n - 1].as_py() + 1 if n else pos
                self._positions[tp] = _end(data, pos, hw, last)
            if n:
                tables.append(table)
            return n

        self.cluster._call(self._poll(timeout_ms, max_records, take), timeout_ms / 1000 + 30)
        if not tables:
            return empty_table(headers)
        return tables[0] if len(tables) == 1 else pa.concat_tables(tables)

    async def _poll(self, timeout_ms: int, limit: int | None, take: _Take) -> None:
        """Fetch rounds from the leaders of the assigned partitions until ``take`` has taken
        records (it decodes a partition's fetched bytes from the position, below the high
        watermark, at most ``left`` of them, moves the position and says how many it took) or
        ``timeout_ms`` has passed."""
        deadline = time.monotonic() + timeout_ms / 1000
        left = limit
        taken = 0
        while True:
            by_leader: dict[int, list[tuple[str, int]]] = {}
            missing = False
            for tp in self._positions:
                info = self._c.partitions.get(tp)
                if info is None or info.leader < 0 or info.leader not in self._c.brokers:
                    missing = True
                else:
                    by_leader.setdefault(info.leader, []).append(tp)
            if missing or not by_leader:
                await self._refresh()
            wait = max(0, min(self.config.fetch_max_wait_ms, int((deadline - time.monotonic()) * 1000)))
            named = self.name_leader_epoch
            for leader, tps in by_leader.items():
                if left == 0:
                    break
                epochs = {}
                for tp in tps:
                    info = self._c.partitions.get(tp)
                    epochs[tp] = info.leader_epoch if named and info is not None else -1
                asked = [
                    (t, p, self._positions[(t, p)], epochs[(t, p)], self.config.max_partition_fetch_bytes)
                    for t, p in tps
                ]
                try:
                    parts = await self._c.fetch_from(
                        leader,
                        asked,
                        max_wait_ms=wait,
                        min_bytes=self.config.fetch_min_bytes,
                        max_bytes=self.config.fetch_max_bytes,
                    )
                except SeglogError:
                    await self._refresh()
                    continue
                for topic, pr in parts:
                    tp = (topic, pr["partition_index"])
                    if tp not in self._positions:
                        continue
                    error = pr["error_code"]
                    if error == OffsetOutOfRangeError.code and 0 <= self._positions[tp] < pr["log_start_offset"]:
                        # Records deleted below the position (retention, DeleteRecords).
                        self._reset(tp, pr["log_start_offset"], pr["high_watermark"])
                        continue
                    if error:
                        self._c.partitions.pop(tp, None)
                        await self._refresh()
                        continue
                    data = pr["records"]
                    if not data or left == 0:
                        continue
                    served_epoch = epochs.get(tp, -1)
                    served_by = leader if served_epoch >= 0 else -1
                    hw = pr["high_watermark"]
                    n = take(
                        tp,
                        bytes(data),
                        self._positions[tp],
                        hw if hw >= 0 else None,
                        left,
                        pr,
                        served_by,
                        served_epoch,
                    )
                    taken += n
                    left = None if limit is None else limit - taken
            if taken or time.monotonic() >= deadline:
                return
            await asyncio.sleep(0.01)

    def _reset(self, tp: tuple[str, int], log_start: int, log_end: int) -> None:
        """The position is below the leader's log start (its records were deleted):
        ``auto.offset.reset`` decides (earliest: the leader's log start; latest: its high
        watermark). A
        position past the leader's end (records lost with a leader, then written anew) is not
        reset: the consumer asks again until the log reaches it, as before; detecting that
        truncation (KIP-320's OffsetForLeaderEpoch check) is not done yet."""
        pos = self._positions[tp]
        policy = self.config.auto_offset_reset
        if policy == "earliest":
            self._positions[tp] = log_start
        elif policy == "latest" and log_end >= 0:
            self._positions[tp] = log_end
        else:
            raise OffsetOutOfRangeError(
                f"position {pos} of {tp[0]}-{tp[1]} is outside the leader's [{log_start}, {log_end}] "
                f"and auto.offset.reset is {policy!r}",
                offset=pos,
            )

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError("the consumer is closed")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if not self.cluster._closed:
                self.cluster._call(self._c.close(), 10)
