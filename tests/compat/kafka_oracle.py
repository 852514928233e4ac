"""kafka-python and aiokafka as independent oracles for the record codec.

Builders: batches made with kafka-python's own builders (v2 ``DefaultRecordBatchBuilder``, v0/v1
``LegacyRecordBatchBuilder``) and aiokafka's Cython builder. Decoders: any buffer read by
kafka-python's ``MemoryRecords`` / aiokafka's ``MemoryRecords`` into plain tuples that compare
directly with ours (:func:`ours`).

A record tuple is ``(offset, timestamp, timestamp_type, key, value, headers)`` with ``headers`` a
tuple of ``(str, bytes | None)``. Magic 0 has no timestamp: kafka-python says ``None`` where
Kafka's Java client (and seglog) say -1 (``RecordBatch.NO_TIMESTAMP`` / ``TimestampType.NO_TIMESTAMP_TYPE``);
the tuples use -1.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Any

import crc32c as crc32c_pkg
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder
from kafka.record.memory_records import MemoryRecords as KpMemoryRecords

from seglog.storage.records import decode_records

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
BIG = 1 << 30  # builder size limit: never split a batch

RecTuple = tuple[int, int, int, "bytes | None", "bytes | None", tuple]


@dataclass(frozen=True)
class BatchInput:
    """What a producer hands a v2 builder (offset deltas are 0..n-1)."""

    values: list[bytes | None]
    keys: list[bytes | None]
    timestamps: list[int]
    headers: list[list[tuple[str, bytes | None]]]
    base_offset: int = 0
    partition_leader_epoch: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    is_transactional: bool = False
    log_append_time: int | None = None

    def expected(self) -> list[RecTuple]:
        """The records a Kafka consumer sees (LogAppendTime replaces every record's timestamp)."""
        out = []
        for i, (k, v, t, h) in enumerate(zip(self.keys, self.values, self.timestamps, self.headers)):
            ts, tt = (t, 0) if self.log_append_time is None else (self.log_append_time, 1)
            out.append((self.base_offset + i, ts, tt, k, v, tuple(h)))
        return out

    def encode_ours(self, **extra: Any) -> bytes:
        from seglog.storage.records import encode_batch

        return encode_batch(
            self.values,
            keys=self.keys,
            timestamps=self.timestamps,
            headers=self.headers,
            base_offset=self.base_offset,
            partition_leader_epoch=self.partition_leader_epoch,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=self.base_sequence,
            is_transactional=self.is_transactional,
            log_append_time=self.log_append_time,
            allow_negative_timestamps=True,
            **extra,
        )


# ---------------------------------------------------------------------------------------------
# Builders
# ---------------------------------------------------------------------------------------------


def _fill(builder: Any, inp: BatchInput) -> None:
    for i, (k, v, t, h) in enumerate(zip(inp.keys, inp.values, inp.timestamps, inp.headers)):
        meta = builder.append(i, timestamp=t, key=k, value=v, headers=list(h))
        assert meta is not None, "builder refused a record: batch_size too small"


def set_base_offset_and_epoch(buf: bytearray, base_offset: int, ple: int) -> None:
    """Both fields lie outside the CRC (brokers assign them): patch without re-checksumming."""
    struct.pack_into(">q", buf, 0, base_offset)
    struct.pack_into(">i", buf, 12, ple)


def reseal_v2(buf: bytearray, start: int = 0) -> None:
    """Recompute the CRC-32C of the v2 batch at ``start`` (crc32c package: independent of ours)."""
    (length,) = struct.unpack_from(">i", buf, start + 8)
    crc = crc32c_pkg.crc32c(bytes(buf[start + 21 : start + 12 + length]))
    struct.pack_into(">I", buf, start + 17, crc)


def set_log_append_time(buf: bytearray, when: int) -> None:
    """What a broker does to a v2 batch under message.timestamp.type=LogAppendTime."""
    (attrs,) = struct.unpack_from(">h", buf, 21)
    struct.pack_into(">h", buf, 21, attrs | 0x08)
    struct.pack_into(">q", buf, 35, when)
    reseal_v2(buf)


def _built(builder: Any, inp: BatchInput) -> bytes:
    """``inp``'s records through a client's v2 builder, with the broker-assigned fields patched in."""
    _fill(builder, inp)
    buf = bytearray(builder.build())
    set_base_offset_and_epoch(buf, inp.base_offset, inp.partition_leader_epoch)
    if inp.log_append_time is not None:
        set_log_append_time(buf, inp.log_append_time)
    return bytes(buf)


def kp_build_v2(inp: BatchInput, compression: int = 0) -> bytes:
    """The batch kafka-python's producer would send, with the broker-assigned fields patched in."""
    b = KpBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=inp.is_transactional,
        producer_id=inp.producer_id,
        producer_epoch=inp.producer_epoch,
        base_sequence=inp.base_sequence,
        batch_size=BIG,
    )
    return _built(b, inp)


def aio_build_v2(inp: BatchInput, compression: int = 0) -> bytes:
    b = AioBuilder(
        2, compression, int(inp.is_transactional), inp.producer_id, inp.producer_epoch, inp.base_sequence, BIG
    )
    return _built(b, inp)


@dataclass(frozen=True)
class LegacyInput:
    magic: int
    offsets: list[int]
    timestamps: list[int]  # ignored for magic 0
    keys: list[bytes | None]
    values: list[bytes | None]
    log_append: bool = False  # magic 1 only: the broker's LogAppendTime attribute

    def expected(self) -> list[RecTuple]:
        out = []
        for o, t, k, v in zip(self.offsets, self.timestamps, self.keys, self.values):
            if self.magic == 0:
                out.append((o, -1, -1, k, v, ()))
            else:
                out.append((o, t, 1 if self.log_append else 0, k, v, ()))
        return out


def kp_build_legacy(inp: LegacyInput, compression: int = 0) -> bytes:
    """An uncompressed legacy message set (one message per record), or one compressed wrapper."""
    b = KpLegacyBuilder(magic=inp.magic, compression_type=compression, batch_size=BIG)
    for o, t, k, v in zip(inp.offsets, inp.timestamps, inp.keys, inp.values):
        assert b.append(o, timestamp=t, key=k, value=v) is not None
    buf = bytearray(b.build())
    if inp.log_append and inp.magic == 1:
        pos = 0
        while pos < len(buf):
            (size,) = struct.unpack_from(">i", buf, pos + 8)
            buf[pos + 17] |= 0x08
            reseal_legacy(buf, pos)
            pos += 12 + size
    return bytes(buf)


def reseal_legacy(buf: bytearray, start: int = 0) -> None:
    """Recompute the CRC-32 (IEEE, zlib) of the legacy message at ``start``."""
    (size,) = struct.unpack_from(">i", buf, start + 8)
    struct.pack_into(">I", buf, start + 12, zlib.crc32(bytes(buf[start + 16 : start + 12 + size])))


# ---------------------------------------------------------------------------------------------
# Decoders
# ---------------------------------------------------------------------------------------------


def _tuple(r: Any) -> RecTuple:
    ts = -1 if r.timestamp is None else r.timestamp
    tt = -1 if r.timestamp_type is None else r.timestamp_type
    return (r.offset, ts, tt, r.key, r.value, tuple(tuple(h) for h in r.headers))


@dataclass(frozen=True)
class KpBatchView:
    """One batch as kafka-python reads it."""

    magic: int
    base_offset: int
    crc_ok: bool
    attributes: int
    records: list[RecTuple]
    # v2 only
    last_offset_delta: int | None = None
    leader_epoch: int | None = None
    first_timestamp: int | None = None
    max_timestamp: int | None = None
    producer_id: int | None = None
    producer_epoch: int | None = None
    base_sequence: int | None = None
    records_count: int | None = None
    is_control: bool = False
    control: tuple | None = None  # (version, type) of each control record


def kp_batches(buf: bytes) -> list[KpBatchView]:
    out = []
    mr = KpMemoryRecords(bytes(buf))
    while (b := mr.next_batch()) is not None:
        crc_ok = b.validate_crc()
        if isinstance(b, KpBatch):
            recs = list(b)
            out.append(
                KpBatchView(
                    magic=2,
                    base_offset=b.base_offset,
                    crc_ok=crc_ok,
                    attributes=b.attributes,
                    records=[_tuple(r) for r in recs],
                    last_offset_delta=b.last_offset_delta,
                    leader_epoch=b.leader_epoch,
                    first_timestamp=b.first_timestamp,
                    max_timestamp=b.max_timestamp,
                    producer_id=b.producer_id,
                    producer_epoch=b.producer_epoch,
                    base_sequence=b.base_sequence,
                    records_count=b.records_count,
                    is_control=b.is_control_batch,
                    control=tuple((r.version, r.type) for r in recs) if b.is_control_batch else None,
                )
            )
        else:
            out.append(
                KpBatchView(
                    magic=b.magic,
                    base_offset=b.base_offset,
                    crc_ok=crc_ok,
                    attributes=b._attributes,
                    records=[_tuple(r) for r in b],
                )
            )
    return out


def kp_records(buf: bytes) -> list[RecTuple]:
    """Every record, every batch's checksum verified."""
    out = []
    for b in kp_batches(buf):
        assert b.crc_ok, f"kafka-python: bad CRC in the batch at offset {b.base_offset}"
        out.extend(b.records)
    return out


def kp_sequence(base_sequence: int, delta: int) -> int:
    """kafka-python's (Kafka's) wrap-around sequence arithmetic."""
    return KpBatch._increment_sequence(KpBatch, base_sequence, delta)


def aio_records(buf: bytes) -> list[RecTuple]:
    out: list[Any] = []
    mr = AioMemoryRecords(bytes(buf))
    while (b := mr.next_batch()) is not None:
        assert b.validate_crc(), "aiokafka: bad CRC"
        out.extend(_tuple(r) for r in b)
    return out


def ours(buf: bytes, **kw: Any) -> list[RecTuple]:
    return [
        (r.offset, r.timestamp, r.timestamp_type, r.key, r.value, tuple(r.headers)) for r in decode_records(buf, **kw)
    ]


def arrow_rows(cols: Any) -> list[RecTuple]:
    """decode_columns(...).to_arrow() back to record tuples."""
    out = []
    for row in cols.to_arrow().to_pylist():
        hdrs = tuple((h["key"], h["value"]) for h in row.get("headers") or [])
        out.append((row["offset"], row["timestamp"], row["timestampType"], row.get("key"), row["value"], hdrs))
    return out
