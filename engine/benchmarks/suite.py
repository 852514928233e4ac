"""The benchmarks of ``seglog bench``, in the order it runs them: seglog and its peers on the
same work. Each group's cases are a module of this package (:mod:`.crc32c`, :mod:`.records`,
:mod:`.storage` (the log), :mod:`.store`, :mod:`.spark`, :mod:`.replication`, :mod:`.kafka`);
the peers they share are :mod:`.peers`, their shared inputs :mod:`.inputs`.

Every case's ``prepare`` builds the data once (deterministic, seeded) and returns one callable
per available contender. Peers are imported inside ``prepare`` so that a missing one only
removes its own callable.
"""

from __future__ import annotations

from .crc32c import crc32c_benches
from .kafka import kafka_benches
from .records import records_benches
from .registry import Benchmark
from .replication import replication_benches
from .spark import spark_benches, stop_session
from .storage import append_batches_benches, lookup_benches, storage_benches, stream_storage_benches
from .store import store_benches

BENCHMARKS: tuple[Benchmark, ...] = (
    *crc32c_benches(),
    *records_benches(),
    *stream_storage_benches("100B", 100),
    *stream_storage_benches("1KiB", 1024),
    *append_batches_benches(),
    *storage_benches("100B", 100),
    *storage_benches("1KiB", 1024),
    *lookup_benches(),
    *store_benches(),
    *spark_benches(),
    *replication_benches(),
    *kafka_benches(),
)

NOT_YET: dict[str, str] = {}


def get(name: str) -> Benchmark:
    for b in BENCHMARKS:
        if b.name == name:
            return b
    raise KeyError(f"no benchmark {name!r}; valid names: {', '.join(b.name for b in BENCHMARKS)}")


def shutdown() -> None:
    """Stop what the benchmarks keep between them (the Spark session)."""
    stop_session()
