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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

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
