"""The embedded consumer (Kafka's ``KafkaConsumer``, in process).

>>> import tempfile
>>> from seglog import Store, TopicPartition
>>> store = Store.open(tempfile.mkdtemp())
>>> _ = store.producer().send_batch("clicks", [b"a", b"b", b"c"], partition=0)
>>> consumer = store.consumer(group_id="stats", auto_offset_reset="earliest")
>>> consumer.assign([TopicPartition("clicks", 0)])
>>> [r.value for r in consumer.poll(max_records=2)]
[b'a', b'b']
>>> consumer.poll_columns().column("value").to_pylist()
[b'c']
>>> consumer.commit(); consumer.committed(TopicPartition("clicks", 0)).offset
3
>>> store.close()

Positions. Each assigned partition has a position: the offset of the next record ``poll``
returns. Without one (new assignment) it comes from the group's committed offset, else from
``auto.offset.reset`` (``earliest``, ``latest`` or ``none``); an out-of-range position (records
removed by retention) is reset the same way.

Reads. ``poll`` fetches whole batches (``max.partition.fetch.bytes`` per partition, at most
``fetch.max.bytes`` in all) as zero-copy views of the segment files, decodes them in C and
releases the views before returning; records past ``max_records`` wait in a per-partition
buffer for the next call. ``poll_columns`` decodes straight into Arrow buffers (no Python object
per record) and returns a ``pyarrow.Table`` with Spark's Kafka-source columns.

Long polling. When nothing (or less than ``fetch.min.bytes``) is available, ``poll`` waits for
an append, at most ``fetch.max.wait.ms`` per round and ``timeout_ms`` in all, on the store's
clock (with a ManualClock the wait advances the clock, running due tasks).

Isolation. ``read_committed`` reads up to the last stable offset and drops batches of aborted
transactions (the producer state's aborted-transaction list, Kafka's ``.txnindex``);
``read_uncommitted`` (the default) reads up to the high watermark. Control batches (transaction
markers) are never returned.

Groups. ``commit`` stores offsets in ``__consumer_offsets`` (durable, survives restarts);
``subscribe`` with a ``group.id`` shares the topics' partitions among the store's consumers of
that group (Kafka's range assignor), rebalancing on ``poll`` when members or partitions change.

Thread-safety: none, as Kafka's consumer; use one consumer per thread.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from seglog.client.kafka_table import columns_table, empty_table
from seglog.config import ConsumerConfig
from seglog.errors import (
    KafkaStorageError,
    OffsetOutOfRangeError,
    SeglogError,
)
from seglog.storage.group_offsets import OffsetAndMetadata
from seglog.storage.records import Record, batch_headers, decode_records
from seglog.storage.topic import TopicPartition
from seglog.util.args import int_arg
from seglog.util.closing import Closeable

if TYPE_CHECKING:
    import pyarrow as pa

    from seglog.storage.log import LogReadResult
    from seglog.storage.log_manager import LogManager
    from seglog.storage.topic import StoredPartition

__all__ = [
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecords",
    "NoOffsetForPartitionError",
    "OffsetAndTimestamp",
]

_member_seq = itertools.count()


class NoOffsetForPartitionError(SeglogError):
    """A partition has no committed offset and ``auto.offset.reset`` is ``none``."""


@dataclasses.dataclass(frozen=True, slots=True)
class OffsetAndTimestamp:
    offset: int
    timestamp: int


class ConsumerRebalanceListener:
    """Called back when a group subscription's partitions change (override either method)."""

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        pass

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        pass


def _tp(value: Any, name: str = "partition") -> TopicPartition:
    """A ``TopicPartition`` from one or a ``(topic, partition)`` pair; TypeError naming ``name``."""
    if type(value) is TopicPartition and type(value.topic) is str and type(value.partition) is int:
        return value
    if isinstance(value, (tuple, list)) and len(value) == 2 and isinstance(value[0], str):
        p = value[1]
        if isinstance(p, bool) or not hasattr(type(p), "__index__"):
            raise TypeError(f"{name} {tuple(value)!r}: the partition number must be an int, not {type(p).__name__}")
        return TopicPartition(value[0], int(p))
    raise TypeError(
        f"{name} must be a TopicPartition or a (topic, partition) pair, not {type(value).__name__} {str(value)[:40]!r}"
    )


class ConsumerRecords:
    """The records of one ``poll``, by partition. Iterating yields every record (a
    :class:`seglog.storage.records.Record`: offset, timestamp, key, value, headers...), partition by
    partition; :meth:`items` pairs them with their :class:`TopicPartition`."""

    __slots__ = ("_by_tp", "_count")

    def __init__(self, by_tp: dict[TopicPartition, list[Record]]) -> None:
        self._by_tp = by_tp
        self._count = sum(len(v) for v in by_tp.values())

    def __iter__(self) -> Iterator[Record]:
        for recs in self._by_tp.values():
            yield from recs

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def count(self) -> int:
        return self._count

    def partitions(self) -> list[TopicPartition]:
        return list(self._by_tp)

    def records(self, tp: TopicPartition | tuple[str, int]) -> list[Record]:
        return self._by_tp.get(_tp(tp), [])

    def items(self) -> Iterator[tuple[TopicPartition, list[Record]]]:
        return iter(self._by_tp.items())

    def __repr__(self) -> str:
        return f"ConsumerRecords({self._count} records from {len(self._by_tp)} partition(s))"


class _Fetched:
    """Decoded records of one partition not yet returned (a list, or an Arrow table)."""

    __slots__ = ("end", "index", "records", "table")

    def __init__(self, end: int) -> None:
        self.records: list[Record] | None = None
        self.index = 0
        self.table: Any = None
        self.end = end


class Consumer(Closeable):
    """Create with :meth:`seglog.Store.consumer`."""

    def __init__(
        self,
        store: LogManager,
        group_id: str | None = None,
        config: Mapping[str, Any] | ConsumerConfig | None = None,
        **settings: Any,
    ) -> None:
        cfg = ConsumerConfig.coerce(config)
        if group_id is not None:
            settings["group_id"] = group_id
        if settings:
            cfg = cfg.with_overrides(**settings)
        self.config = cfg
        self.group_id = cfg.group_id
        self._store = store
        self._clock = store.clock
        self._assignment: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int] = {}
        self._buffers: dict[TopicPartition, _Fetched] = {}
        self._paused: set[TopicPartition] = set()
        self._topics: set[str] | None = None
        self._pattern: re.Pattern[str] | None = None
        self._listener: ConsumerRebalanceListener | None = None
        self._manual = False
        self._closed = False
        self._next_tp = 0
        self._read_committed = cfg.isolation_level == "read_committed"
        self._last_commit = self._clock.monotonic_ms()
        self.member_id = f"{cfg.client_id or 'consumer'}-{next(_member_seq)}"

    # ---------------------------------------------------------------------------------------------
    # Assignment and subscription
    # ---------------------------------------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Read exactly these partitions (no group rebalancing)."""
        self._check_open()
        tps = [_tp(tp) for tp in partitions]
        for tp in tps:
            self._store.partition(tp.topic, tp.partition)
        self._leave_group()
        self._topics = None
        self._pattern = None
        self._manual = True
        self._set_assignment(tps)

    def assignment(self) -> set[TopicPartition]:
        return set(self._assignment)

    def subscribe(
        self,
        topics: Sequence[str] | None = None,
        pattern: str | None = None,
        listener: ConsumerRebalanceListener | None = None,
    ) -> None:
        """Follow ``topics`` (or every topic matching the regular expression ``pattern``).
        With a ``group.id`` the partitions are shared with the group's other consumers."""
        self._check_open()
        if (topics is None) == (pattern is None):
            raise ValueError("subscribe needs either topics or pattern (not both)")
        if isinstance(topics, str):
            raise TypeError("topics must be a list of names; for a regular expression use pattern=")
        if topics is not None:
            if not isinstance(topics, Iterable):
                raise TypeError(f"topics must be a list of names, not {type(topics).__name__}")
            topics = list(topics)
            for t in topics:
                if not isinstance(t, str):
                    raise TypeError(f"topics must hold str names, not {type(t).__name__} {t!r}")
        if pattern is not None and not isinstance(pattern, (str, re.Pattern)):
            raise TypeError(f"pattern must be a str or a compiled regular expression, not {type(pattern).__name__}")
        self._topics = set(topics) if topics is not None else None
        self._pattern = re.compile(pattern) if pattern is not None else None
        self._listener = listener
        self._manual = False
        if self.group_id is not None:
            members = self._store._group_members.setdefault(self.group_id, [])
            if self not in members:
                members.append(self)
        self._rebalance()

    def subscription(self) -> set[str]:
        if self._topics is not None:
            return set(self._topics)
        if self._pattern is not None:
            return {t for t in self._store.topics() if self._pattern.fullmatch(t)}
        return set()

    def unsubscribe(self) -> None:
        self._leave_group()
        self._topics = None
        self._pattern = None
        self._manual = False
        self._set_assignment([])

    def _leave_group(self) -> None:
        if self.group_id is not None:
            members = self._store._group_members.get(self.group_id)
            if members and self in members:
                members.remove(self)

    def _wants(self, topic: str) -> bool:
        if self._topics is not None:
            return topic in self._topics
        return self._pattern is not None and self._pattern.fullmatch(topic) is not None

    def _target_assignment(self) -> list[TopicPartition]:
        store = self._store
        topics = [t for t in store.topics() if self._wants(t)]
        members = [self]
        if self.group_id is not None:
            members = [m for m in store._group_members.get(self.group_id, []) if not m._closed]
        out: list[TopicPartition] = []
        for t in topics:
            n = store.partitions_for(t)
            subs = [m for m in members if m._wants(t)]
            if self not in subs:
                continue
            i = subs.index(self)
            per, extra = divmod(n, len(subs))
            start = i * per + min(i, extra)
            out.extend(TopicPartition(t, p) for p in range(start, start + per + (1 if i < extra else 0)))
        return out

    def _rebalance(self) -> None:
        if self._manual or (self._topics is None and self._pattern is None):
            return
        target = self._target_assignment()
        if target == self._assignment:
            return
        revoked = [tp for tp in self._assignment if tp not in target]
        added = [tp for tp in target if tp not in self._assignment]
        if revoked:
            if self._auto_commit():
                self._commit_positions(revoked)
            if self._listener is not None:
                self._listener.on_partitions_revoked(revoked)
        self._set_assignment(target)
        if added and self._listener is not None:
            self._listener.on_partitions_assigned(added)

    def _set_assignment(self, tps: list[TopicPartition]) -> None:
        keep = set(tps)
        for tp in list(self._positions):
            if tp not in keep:
                del self._positions[tp]
        for tp in list(self._buffers):
            if tp not in keep:
                del self._buffers[tp]
        self._paused &= keep
        self._assignment = list(dict.fromkeys(tps))

    def pause(self, *partitions: TopicPartition) -> None:
        self._paused.update(_tp(tp) for tp in partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._paused.difference_update(_tp(tp) for tp in partitions)

    def paused(self) -> set[TopicPartition]:
        return set(self._paused)

    # ---------------------------------------------------------------------------------------------
    # Positions
    # ---------------------------------------------------------------------------------------------

    def _owned(self, tp: TopicPartition | tuple[str, int]) -> TopicPartition:
        tp = _tp(tp)
        if tp not in self._assignment:
            raise ValueError(f"{tp} is not assigned to this consumer")
        return tp

    def seek(self, partition: TopicPartition | tuple[str, int], offset: int) -> None:
        """Make ``offset`` the next offset ``poll`` returns for ``partition``."""
        int_arg("offset", offset)
        tp = self._owned(partition)
        if offset < 0:
            raise ValueError(f"cannot seek {tp} to a negative offset ({offset})")
        self._positions[tp] = offset
        self._buffers.pop(tp, None)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        for tp in partitions or tuple(self._assignment):
            tp = self._owned(tp)
            self._positions[tp] = self._log_start(tp)
            self._buffers.pop(tp, None)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        for tp in partitions or tuple(self._assignment):
            tp = self._owned(tp)
            self._positions[tp] = self._end(tp)
            self._buffers.pop(tp, None)

    def position(self, partition: TopicPartition | tuple[str, int]) -> int:
        """The offset of the next record ``poll`` returns for ``partition``."""
        tp = self._owned(partition)
        pos = self._positions.get(tp)
        if pos is None:
            pos = self._reset(tp)
        return pos

    def _part(self, tp: TopicPartition) -> StoredPartition:
        return self._store.partition(tp.topic, tp.partition)

    def _log_start(self, tp: TopicPartition) -> int:
        return self._part(tp).log.log_start_offset

    def _end(self, tp: TopicPartition) -> int:
        part = self._part(tp)
        return part.last_stable_offset() if self._read_committed else part.log.high_watermark

    def _reset(self, tp: TopicPartition, *, out_of_range: bool = False) -> int:
        if not out_of_range and self.group_id is not None:
            om = self._store.group_offsets.committed(self.group_id, tp.topic, tp.partition)
            if om is not None:
                self._positions[tp] = om.offset
                return om.offset
        policy = self.config.auto_offset_reset
        if policy == "earliest":
            pos = self._log_start(tp)
        elif policy == "latest":
            pos = self._end(tp)
        elif out_of_range:
            raise OffsetOutOfRangeError(f"position of {tp} is out of range and auto.offset.reset is none")
        else:
            raise NoOffsetForPartitionError(
                f"{tp} has no committed offset for group {self.group_id!r} and auto.offset.reset is none"
            )
        self._positions[tp] = pos
        return pos

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {_tp(tp): self._log_start(_tp(tp)) for tp in partitions}

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The high watermark (read_uncommitted) or last stable offset (read_committed)."""
        return {_tp(tp): self._end(_tp(tp)) for tp in partitions}

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition the earliest offset whose timestamp is at least the given one
        (None when no such record exists), Kafka's ListOffsets."""
        out: dict[TopicPartition, OffsetAndTimestamp | None] = {}
        if not isinstance(timestamps, Mapping):
            raise TypeError(f"timestamps must be a mapping of partition to timestamp, not {type(timestamps).__name__}")
        for tp, ts in timestamps.items():
            tp = _tp(tp)
            int_arg(f"the timestamp for {tp}", ts)
            if ts < 0:
                raise ValueError(f"timestamp for {tp} must be >= 0, got {ts}")
            found = self._part(tp).log.offset_for_timestamp(ts, upper_bound=self._end(tp))
            out[tp] = None if found is None else OffsetAndTimestamp(found[0], found[1])
        return out

    def partitions_for_topic(self, topic: str) -> set[int]:
        return set(range(self._store.partitions_for(topic)))

    def topics(self) -> list[str]:
        return self._store.topics()

    # ---------------------------------------------------------------------------------------------
    # Committed offsets
    # ---------------------------------------------------------------------------------------------

    def _group(self) -> str:
        if self.group_id is None:
            raise SeglogError("committing offsets needs a group.id")
        return self.group_id

    def commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None) -> None:
        """Store ``offsets`` (default: the current positions of every assigned partition) for
        the group, durably."""
        group = self._group()
        self._store._check_writable()
        if offsets is None:
            self._commit_positions(self._assignment)
            return
        if not isinstance(offsets, Mapping):
            raise TypeError(f"offsets must be a mapping of partition to offset, not {type(offsets).__name__}")
        now = self._clock.time_ms()
        out: dict[tuple[str, int], OffsetAndMetadata | None] = {}
        for tp, om in offsets.items():
            tp = _tp(tp)
            if not isinstance(om, OffsetAndMetadata):
                om = OffsetAndMetadata(int(int_arg(f"the offset for {tp}", om)), "", -1, now)
            elif om.commit_timestamp < 0:
                om = dataclasses.replace(om, commit_timestamp=now)
            if om.offset < 0:
                raise ValueError(f"cannot commit a negative offset for {tp}")
            out[(tp.topic, tp.partition)] = om
        self._store.group_offsets.commit(group, out)
        self._last_commit = self._clock.monotonic_ms()

    def _commit_positions(self, tps: Iterable[TopicPartition]) -> None:
        group = self._group()
        now = self._clock.time_ms()
        out: dict[tuple[str, int], OffsetAndMetadata | None] = {}
        for tp in tps:
            pos = self._positions.get(tp)
            if pos is not None:
                out[(tp.topic, tp.partition)] = OffsetAndMetadata(pos, "", -1, now)
        self._store.group_offsets.commit(group, out)
        self._last_commit = self._clock.monotonic_ms()

    def committed(self, partition: TopicPartition | tuple[str, int]) -> OffsetAndMetadata | None:
        tp = _tp(partition)
        return self._store.group_offsets.committed(self._group(), tp.topic, tp.partition)

    def _auto_commit(self) -> bool:
        return self.config.auto_commit and not self._store.read_only and not self._store.closed

    def _maybe_auto_commit(self) -> None:
        if not self._auto_commit():
            return
        now = self._clock.monotonic_ms()
        if now - self._last_commit >= self.config.auto_commit_interval_ms:
            self._commit_positions(self._assignment)

    # ---------------------------------------------------------------------------------------------
    # Poll
    # ---------------------------------------------------------------------------------------------

    def poll(self, max_records: int | None = None, timeout_ms: int = 0) -> ConsumerRecords:
        """Records from the assigned partitions, at most ``max_records`` (default
        ``max.poll.records``), waiting up to ``timeout_ms`` when none are available."""
        int_arg("max_records", max_records, optional=True)
        int_arg("timeout_ms", timeout_ms)
        out = self._poll(max_records or self.config.max_poll_records, timeout_ms, columns=False)
        return ConsumerRecords(out)

    def poll_columns(self, max_records: int | None = None, timeout_ms: int = 0, *, headers: bool = False) -> pa.Table:
        """Like :meth:`poll` but as a ``pyarrow.Table`` decoded without per-record Python
        objects, with Spark's Kafka-source columns: ``key``, ``value`` (binary), ``topic``
        (string), ``partition`` (int32), ``offset`` (int64), ``timestamp`` (timestamp[ms, UTC]),
        ``timestampType`` (int32) and, with ``headers=True``, ``headers``
        (list<struct<key: string, value: binary>>). ``max_records`` defaults to everything one
        fetch returns."""
        import pyarrow as pa

        int_arg("max_records", max_records, optional=True)
        int_arg("timeout_ms", timeout_ms)
        out = self._poll(max_records, timeout_ms, columns=True, headers=headers)
        tables = [t for t in out.values() if t.num_rows]
        if not tables:
            return empty_table(headers)
        if len(tables) == 1:
            return tables[0]
        return pa.concat_tables(tables)

    def _poll(
        self, max_records: int | None, timeout_ms: int, *, columns: bool, headers: bool = False
    ) -> dict[TopicPartition, Any]:
        self._check_open()
        if max_records is not None and max_records < 1:
            raise ValueError(f"max_records must be at least 1, got {max_records}")
        self._rebalance()
        self._maybe_auto_commit()
        clock = self._clock
        start = clock.monotonic_ms()
        while True:
            out = self._collect(max_records, columns, headers, start)
            if out is not None:
                return out
            waited = clock.monotonic_ms() - start
            left = timeout_ms - waited
            if left <= 0:
                return {}
            self._store._wait_for_data(min(left, max(self.config.fetch_max_wait_ms, 1)))
            self._rebalance()

    def _collect(
        self, max_records: int | None, columns: bool, headers: bool, start_ms: int
    ) -> dict[TopicPartition, Any] | None:
        """One round: buffered records first, then fetches. None when there is nothing yet
        (or less than fetch.min.bytes, while fetch.max.wait.ms has not passed)."""
        tps = [tp for tp in self._assignment if tp not in self._paused]
        if not tps:
            return None
        n = len(tps)
        first = self._next_tp % n
        order = tps[first:] + tps[:first]
        self._next_tp += 1
        out: dict[TopicPartition, Any] = {}
        left = max_records
        # Records already decoded.
        for tp in order:
            buf = self._buffers.get(tp)
            if buf is None:
                continue
            if (buf.table is not None) != columns:
                self._buffers.pop(tp)  # decoded for the other API: fetch again from the position
                continue
            taken = self._take(tp, buf, left)
            if taken is not None:
                out[tp] = taken
                left = None if left is None else left - _rows(taken)
                if left == 0:
                    return out
        if out:
            return out
        # Fetch.
        fetches: list[tuple[TopicPartition, LogReadResult]] = []
        total_bytes = 0
        budget = self.config.fetch_max_bytes
        for tp in order:
            res = self._read(tp, min(self.config.max_partition_fetch_bytes, max(budget, 0)), min_one=not fetches)
            if res is None:
                continue
            fetches.append((tp, res))
            total_bytes += res.size
            budget -= res.size
            if budget <= 0:
                break
        if not fetches:
            return None
        waited = self._clock.monotonic_ms() - start_ms
        if total_bytes < self.config.fetch_min_bytes and waited < self.config.fetch_max_wait_ms:
            return None
        for tp, res in fetches:
            pos = self._positions[tp]
            buf = self._decode(tp, res, pos, columns, headers)
            if left == 0:
                self._buffers[tp] = buf
                continue
            taken = self._take(tp, buf, left)
            if taken is not None:
                out[tp] = taken
                left = None if left is None else left - _rows(taken)
        return out if out else None

    def _read(self, tp: TopicPartition, max_bytes: int, *, min_one: bool) -> LogReadResult | None:
        pos = self._positions.get(tp)
        if pos is None:
            pos = self._reset(tp)
        part = self._part(tp)
        bound: Any = part.last_stable_offset() if self._read_committed else "high_watermark"
        for _ in range(2):
            try:
                res = part.log.read(pos, max_bytes, upper_bound=bound, min_one_batch=min_one)
            except OffsetOutOfRangeError:
                pos = self._reset(tp, out_of_range=True)
                continue
            return res if res else None
        return None

    def _decode(self, tp: TopicPartition, res: LogReadResult, pos: int, columns: bool, headers: bool) -> _Fetched:
        views = res.views()
        pieces: list[memoryview] = []
        end = pos
        try:
            part = self._part(tp) if self._read_committed else None
            for v in views:
                heads = batch_headers(v)
                if not heads:
                    continue
                end = max(end, heads[-1].last_offset + 1)
                if part is not None:
                    pieces.extend(self._committed_runs(part, v, heads))
                else:
                    pieces.append(v)
            buf = _Fetched(end)
            check = self.config.check_crcs
            if columns:
                buf.table = columns_table(tp, pieces, pos, headers, check)
            else:
                recs: list[Record] = []
                for piece in pieces:
                    recs.extend(decode_records(piece, min_offset=pos, verify_crc=check))
                buf.records = recs
            return buf
        finally:
            for piece in pieces:
                piece.release()
            for v in views:
                v.release()

    def _committed_runs(self, part: StoredPartition, view: memoryview, heads: Sequence[Any]) -> list[memoryview]:
        """Slices of ``view`` holding the batches a read_committed reader may see: batches of
        aborted transactions and control batches are dropped (Kafka's consumer-side filter
        over the aborted transactions the log's ``.txnindex`` lists for the fetched range)."""
        aborted = sorted(
            part.log.collect_aborted_transactions(heads[0].base_offset, heads[-1].last_offset + 1),
            key=lambda a: a.first_offset,
        )
        if not aborted and not any(h.is_control for h in heads):
            return [view[:]]
        live: set[int] = set()
        runs: list[memoryview] = []
        run_start = -1
        i = 0
        for h in heads:
            while i < len(aborted) and aborted[i].first_offset <= h.last_offset:
                live.add(aborted[i].producer_id)
                i += 1
            keep = True
            if h.is_control:
                keep = False
                if h.producer_id in live:
                    recs = decode_records(view[h.position : h.position + h.size], include_control=True)
                    if recs and recs[0].control_type == 0:
                        live.discard(h.producer_id)
            elif h.is_transactional and h.producer_id in live:
                keep = False
            if keep and run_start < 0:
                run_start = h.position
            elif not keep and run_start >= 0:
                runs.append(view[run_start : h.position])
                run_start = -1
        if run_start >= 0:
            runs.append(view[run_start : heads[-1].position + heads[-1].size])
        return runs

    def _take(self, tp: TopicPartition, buf: _Fetched, limit: int | None) -> Any:
        """Up to ``limit`` records from the buffer; moves the position; drops the buffer when
        it is used up."""
        if buf.table is not None:
            table = buf.table
            if limit is None or table.num_rows <= limit:
                self._buffers.pop(tp, None)
                self._positions[tp] = buf.end
                return table if table.num_rows else None
            taken = table.slice(0, limit)
            rest = table.slice(limit)
            buf.table = rest
            self._buffers[tp] = buf
            self._positions[tp] = rest.column("offset")[0].as_py()
            return taken
        recs = buf.records or []
        i = buf.index
        if limit is None or len(recs) - i <= limit:
            self._buffers.pop(tp, None)
            self._positions[tp] = buf.end
            out = recs[i:] if i else recs
            return out if out else None
        out = recs[i : i + limit]
        buf.index = i + limit
        self._buffers[tp] = buf
        self._positions[tp] = recs[buf.index].offset
        return out

    # ---------------------------------------------------------------------------------------------

    def close(self, autocommit: bool = True) -> None:
        """Commit positions (if ``enable.auto.commit`` and ``autocommit``), leave the group."""
        if self._closed:
            return
        try:
            if autocommit and self._auto_commit():
                self._commit_positions(self._assignment)
        finally:
            self._closed = True
            self._leave_group()
            self._store._forget_client(self)

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError("the consumer is closed")
        self._store._check_open()

    def __repr__(self) -> str:
        return f"Consumer(group_id={self.group_id!r}, assignment={sorted(str(tp) for tp in self._assignment)})"


def _rows(x: Any) -> int:
    return x.num_rows if hasattr(x, "num_rows") else len(x)
