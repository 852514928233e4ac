"""What the benchmark cases share: the records they write and read, the names of the
contenders every group has, fresh directories per round and the machine's limits (``memcpy``,
``write()``, ``read()``) for the same bytes.

Records are 8-byte keys, 100-byte or 1 KiB values and millisecond timestamps, in batches of
1,000 (what a producer sends: ~100 KiB or ~1 MiB). Every input is deterministic (seeded).
"""

from __future__ import annotations

import os
import random
import shutil
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .registry import Work

T0 = 1_700_000_000_000
PER_BATCH = 1_000
POOL = 16  # distinct input batches, cycled: inputs for 10 M records would not fit in memory

SEGLOG = "seglog"
MEMCPY = "memcpy"
WRITE = "write()"
READ = "read()"


class BatchPool:
    """``records`` records as POOL distinct batches of PER_BATCH records, cycled: batch ``b``
    holds offsets ``b*PER_BATCH...``, with the values/keys of pool entry ``b % POOL`` and
    timestamps ``T0 + offset``."""

    def __init__(self, records: int, value_size: int, per_batch: int = PER_BATCH) -> None:
        rng = random.Random(value_size)
        self.records = records
        self.value_size = value_size
        self.per_batch = min(per_batch, records)
        self.batches = -(-records // self.per_batch)
        n = self.per_batch
        self.values = [[rng.randbytes(value_size) for _ in range(n)] for _ in range(min(POOL, self.batches))]
        self.keys = [[(p * n + i).to_bytes(8, "big") for i in range(n)] for p in range(len(self.values))]

    def __iter__(self) -> Iterator[tuple[int, list[bytes], list[bytes], list[int]]]:
        """(first offset, values, keys, timestamps) per batch."""
        for b in range(self.batches):
            base = b * self.per_batch
            n = min(self.per_batch, self.records - base)
            p = b % len(self.values)
            vals, keys = self.values[p], self.keys[p]
            if n < len(vals):
                vals, keys = vals[:n], keys[:n]
            yield base, vals, keys, list(range(T0 + base, T0 + base + n))

    @property
    def nbytes(self) -> int:
        return self.records * (self.value_size + 16)


def workdir(base: Path, name: str) -> Path:
    """``base / name``, empty."""
    d = base / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    return d


class Fresh:
    """A new directory per round (the previous one removed, and the previous store closed,
    untimed), so that every timed write starts from an empty store and a clean page cache."""

    def __init__(self, base: Path, name: str, opener: Callable[[Path], Any]) -> None:
        self.base, self.name, self.opener = base, name, opener
        self.obj: Any = None
        self.round = 0

    def setup(self) -> None:
        self.close()
        self.round += 1
        self.obj = self.opener(workdir(self.base, self.name))
        # What the previous contender left dirty in the page cache is written back now, not
        # during the next timed round (where its writeback and the kernel's throttling of
        # writers would land on whoever runs next).
        os.sync()

    def close(self) -> None:
        self._close_obj()
        shutil.rmtree(self.base / self.name, ignore_errors=True)

    def _close_obj(self) -> None:
        if self.obj is not None:
            closer = getattr(self.obj, "close", None)
            if closer is not None:
                closer()
            self.obj = None


class FreshFile(Fresh):
    """A :class:`Fresh` whose object is the descriptor of a new file ``raw.bin`` opened for
    appending: the ``write()`` limit's target."""

    def __init__(self, base: Path, name: str) -> None:
        super().__init__(base, name, lambda d: os.open(d / "raw.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))

    def _close_obj(self) -> None:
        if self.obj is not None:
            os.close(self.obj)
            self.obj = None


class FreshCalls:
    """Contenders that each run on their own :class:`Fresh` directory (``<prefix>-<i>``): the
    ``calls``, ``setup`` and ``teardown`` of a :class:`~seglog.benchmarks.registry.Work`."""

    def __init__(self, base: Path, prefix: str) -> None:
        self.base, self.prefix = base, prefix
        self.calls: dict[str, Callable[[], object]] = {}
        self.setup: dict[str, Callable[[], object]] = {}
        self.teardown: dict[str, Callable[[], object]] = {}
        self.fresh: list[Fresh] = []

    def add(
        self, name: str, opener: Callable[[Path], Any], run: Callable[[Any], object], *, teardown: bool = False
    ) -> None:
        """Contender ``name``: ``run(obj)`` timed on what ``opener`` opened in a fresh
        directory; with ``teardown`` the directory is removed after each timed call too."""
        f = Fresh(self.base, f"{self.prefix}-{len(self.fresh)}", opener)
        self.fresh.append(f)
        self.setup[name] = f.setup
        if teardown:
            self.teardown[name] = f.close
        self.calls[name] = lambda: run(f.obj)

    def close(self) -> None:
        for f in self.fresh:
            f.close()


def memcpy_of(data: bytes) -> Callable[[], None]:
    """The ``memcpy`` limit: ``data`` copied into a buffer of its size."""
    buf = bytearray(len(data))

    def memcpy() -> None:
        buf[:] = data

    return memcpy


def read_files(paths: list[Path]) -> Callable[[], int]:
    """The read() limit: every byte of ``paths`` through one reused 8 MiB buffer."""
    buf = bytearray(8 << 20)

    def read_all() -> int:
        total = 0
        for path in paths:
            with open(path, "rb", buffering=0) as f:
                while k := f.readinto(buf):
                    total += k
        return total

    return read_all


# -------------------------------------------------------------------------------------------------
# Streams: millions of distinct records, as users send them
# -------------------------------------------------------------------------------------------------

STREAM_POOL = 64 << 20  # random bytes the values are cut from
STREAM_CHUNK = 16 << 20  # payload bytes materialised at a time, untimed (beyond the L2 cache)


def producer_batch_size() -> int:
    """The producer's default ``batch.size`` (Kafka's 16 KiB): how large the batches it builds are."""
    from seglog.config.producer import ProducerConfig

    return int(ProducerConfig().batch_size)


class Stream:
    """``records`` distinct records of ``value_size``-byte values, in batches of as many records as
    the producer's default ``batch.size`` holds, never reused between batches.

    Record ``i`` has the 8-byte big-endian key ``i``, timestamp ``T0 + i`` and as value the
    ``value_size`` bytes of a seeded random pool that follow those of record ``i - 1``; each pass
    over the pool starts one byte further in, so no two records of a stream shorter than the
    pool's length in records share an offset (equal values would take the random bytes to
    repeat). Only one chunk of about :data:`STREAM_CHUNK` payload bytes exists as Python objects
    at a time: :meth:`chunks` makes each one just before it is handed out (the caller times only
    its own work on it), so the harness holds tens of MB, not the GBs of the whole stream.
    :meth:`prime` makes the first chunk ahead (in a round's untimed set-up), so that the memory
    the harness's chunks take is already there when a contender's run starts."""

    def __init__(self, records: int, value_size: int) -> None:
        from seglog.storage.records import encode_batch

        if value_size < 1:
            raise ValueError(f"stream values must be at least 1 byte, got {value_size}")
        self.records = records
        self.value_size = value_size
        self.per_pass = STREAM_POOL // value_size
        self.pool = random.Random(value_size).randbytes(self.per_pass * value_size + value_size)
        one = len(encode_batch([bytes(value_size)], keys=[bytes(8)], timestamps=T0))
        two = len(encode_batch([bytes(value_size)] * 2, keys=[bytes(8)] * 2, timestamps=T0))
        limit = producer_batch_size()
        self.per_batch = max(1, min(records, 1 + (limit - one) // (two - one)))
        while self.per_batch > 1 and len(self._encode(self._batch(0, self.per_batch))) > limit:
            self.per_batch -= 1
        self.batches = -(-records // self.per_batch)
        self.batches_per_chunk = max(1, STREAM_CHUNK // (self.per_batch * (value_size + 16)))
        self._primed: tuple[bool, list[Any]] | None = None

    @staticmethod
    def _encode(b: tuple[int, list[bytes], list[bytes], list[int]]) -> bytes:
        from seglog.storage.records import encode_batch

        return encode_batch(b[1], keys=b[2], timestamps=b[3])

    def _batch(self, base: int, n: int) -> tuple[int, list[bytes], list[bytes], list[int]]:
        size, per_pass, pool = self.value_size, self.per_pass, self.pool
        vals: list[bytes] = []
        lo, left = base, n
        while left:
            p, j = divmod(lo, per_pass)
            k = min(left, per_pass - j)
            start = p % size + j * size
            blob = pool[start : start + k * size]
            vals += [blob[x : x + size] for x in range(0, k * size, size)]
            lo += k
            left -= k
        kb = struct.pack(f">{n}Q", *range(base, base + n))
        keys = [kb[x : x + 8] for x in range(0, 8 * n, 8)]
        return base, vals, keys, list(range(T0 + base, T0 + base + n))

    def _chunk(self, c: int, encoded: bool) -> list[Any]:
        out: list[Any] = []
        first = c * self.batches_per_chunk
        for b in range(first, min(self.batches, first + self.batches_per_chunk)):
            base = b * self.per_batch
            batch = self._batch(base, min(self.per_batch, self.records - base))
            out.append((*batch, self._encode(batch)) if encoded else batch)
        return out

    @property
    def n_chunks(self) -> int:
        return -(-self.batches // self.batches_per_chunk)

    def prime(self, encoded: bool = False) -> None:
        """Make the first chunk now (untimed), for the next :meth:`chunks`."""
        self._primed = (encoded, self._chunk(0, encoded))

    def chunks(self, limit: int | None = None, encoded: bool = False) -> Iterator[list[Any]]:
        """Each chunk in turn (the first ``limit`` only, if given): a list of batches
        ``(first offset, values, keys, timestamps)``, with the batch's encoding (seglog's
        ``encode_batch``) appended with ``encoded``."""
        for c in range(self.n_chunks if limit is None else min(limit, self.n_chunks)):
            if c == 0 and self._primed is not None and self._primed[0] == encoded:
                chunk, self._primed = self._primed[1], None
            else:
                chunk = self._chunk(c, encoded)
            yield chunk
            del chunk

    def timed(
        self, consume: Callable[[Any], object], encoded: bool = False, finish: Callable[[], object] | None = None
    ) -> Callable[[int | None], float]:
        """``run(limit=None) -> seconds``: ``consume(batch)`` for every batch of the stream (of its
        first ``limit`` chunks), then ``finish()``; only those calls are timed, not the making
        of the chunks."""

        def run(limit: int | None = None) -> float:
            total = 0.0
            clock = time.perf_counter
            for chunk in self.chunks(limit, encoded):
                t = clock()
                for batch in chunk:
                    consume(batch)
                total += clock() - t
                del chunk, batch  # before the next chunk is made: one chunk alive at a time
            if finish is not None:
                t = clock()
                finish()
                total += clock() - t
            return total

        return run

    @property
    def nbytes(self) -> int:
        return self.records * (self.value_size + 16)

    def work(
        self,
        calls: dict[str, Callable[[], object]],
        setup: dict[str, Callable[[], object]],
        warmup: dict[str, Callable[[], object]],
        teardown: dict[str, Callable[[], object]] | None = None,
        close: Callable[[], None] | None = None,
    ) -> Work:
        """The :class:`~seglog.benchmarks.registry.Work` of calls that run over this stream and
        time themselves (made with :meth:`timed`): one item a record, never repeated within a
        sample."""
        return Work(
            items=self.records,
            calls=calls,
            setup=setup,
            teardown=teardown or {},
            warmup=warmup,
            repeatable=False,
            timed_inside=True,
            nbytes=self.nbytes,
            close=close,
            params={"records_per_batch": self.per_batch, "batches": self.batches},
        )
