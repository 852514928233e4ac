"""Helpers shared by the segment/log tests: batches, plain-Python readings of index files and of
Kafka's indexing rule (the oracles), fixture copies."""

from __future__ import annotations

import shutil
import struct
from dataclasses import dataclass, field
from pathlib import Path

from seglog.storage.records import encode_batch
from tests.conftest import FIXTURES, T0

KAFKA_REAL = FIXTURES / "kafka-real"
CONSUMER_OFFSETS_6 = KAFKA_REAL / "LDI-POC" / "__consumer_offsets-6"


def batch(
    n: int = 1, *, ts: int | list[int] = T0, size: int = 10, tag: int = 0, base_offset: int = 0, epoch: int = -1
) -> bytes:
    """One v2 batch of ``n`` records; values ``b"<tag>:<i>"`` padded to ``size`` bytes."""
    values = [f"{tag}:{i}".encode().ljust(size, b".") for i in range(n)]
    return encode_batch(values, timestamps=ts, base_offset=base_offset, partition_leader_epoch=epoch)


def zigzag_bytes(v: int, *, pad_to: int = 0) -> bytes:
    """Encode ``v`` (int32/int64 range) as a zigzag varint, optionally padded (non-canonical)."""
    u = ((v << 1) ^ (v >> 63)) & (2**64 - 1)
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    while len(out) < pad_to:
        out[-1] |= 0x80
        out.append(0)
    return bytes(out)


def txnindex_entry(pid: int, first: int, last: int, lso: int, version: int = 0) -> bytes:
    """One aborted-transaction entry of a .txnindex file (docs/kafka-format.md §7.4): [int16
    version][int64 producerId][int64 firstOffset][int64 lastOffset][int64 LSO]."""
    return version.to_bytes(2, "big", signed=True) + b"".join(
        v.to_bytes(8, "big", signed=True) for v in (pid, first, last, lso)
    )


def read_offset_index(path: str | Path, base: int) -> list[tuple[int, int]]:
    """(absolute offset, position) of a Kafka .index file, stopping at the zero tail."""
    data = Path(path).read_bytes()
    out = []
    for i in range(len(data) // 8):
        rel, pos = struct.unpack_from(">ii", data, 8 * i)
        if i > 0 and rel == 0:
            break
        if i == 0 and rel == 0 and pos == 0:
            break
        out.append((base + rel, pos))
    return out


def read_time_index(path: str | Path, base: int) -> list[tuple[int, int]]:
    """(timestamp, absolute offset) of a Kafka .timeindex file, stopping at the zero tail."""
    data = Path(path).read_bytes()
    out = []
    for i in range(len(data) // 12):
        ts, rel = struct.unpack_from(">qi", data, 12 * i)
        if ts == 0 and rel == 0:
            break
        out.append((ts, base + rel))
    return out


@dataclass
class KafkaIndexRule:
    """Kafka's ``LogSegment.append`` indexing in plain Python, applied batch by batch (as Kafka
    indexes each batch it appends, and as ``LogSegment.recover`` rebuilds the indexes)."""

    interval: int
    base: int
    size: int = 0
    since_last: int = 0
    max_ts: int = -1
    offset_of_max_ts: int = -1
    offsets: list[tuple[int, int]] = field(default_factory=list)
    times: list[tuple[int, int]] = field(default_factory=list)

    def append(self, batches: list[tuple[int, int, int]]) -> None:
        """One append call of the batches (max timestamp, last offset, size in bytes)."""
        for ts, off, nbytes in batches:
            if ts > self.max_ts:
                self.max_ts, self.offset_of_max_ts = ts, off
            if self.since_last > self.interval:
                self.offsets.append((off, self.size))
                self._time_entry()
                self.since_last = 0
            self.since_last += nbytes
            self.size += nbytes

    def _time_entry(self) -> None:
        last = self.times[-1][0] if self.times else -1
        if self.max_ts > last:
            self.times.append((self.max_ts, self.offset_of_max_ts))

    def close(self) -> None:
        self._time_entry()


def copy_partition(src: Path, dest_parent: Path, name: str | None = None) -> Path:
    """Copy a fixture partition directory to ``dest_parent/<topic>-<n>``."""
    dest = dest_parent / (name or src.name)
    shutil.copytree(src, dest)
    for p in dest.iterdir():
        p.chmod(0o644)
    return dest
