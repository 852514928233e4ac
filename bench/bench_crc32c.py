"""CRC-32C, CRC-32 and murmur2 throughput, side by side with the libraries Kafka clients use.

    pytest bench/bench_crc32c.py --benchmark-columns=median,ops --benchmark-sort=name

Groups: ``crc32c-<size>`` (the registry's benchmarks, as ``seglog bench --only crc32c``: seglog,
the ``crc32c`` package, ``google-crc32c`` when installed, our portable table path, memcpy),
``crc32 <size>`` (seglog vs ``zlib.crc32``), ``gil <size>`` (the
same CRC-32C call holding vs releasing the GIL: the measurement behind ``CRC32C_NOGIL_MIN``),
and ``murmur2`` (per key and vectorised, vs pure Python and kafka-python).
"""

from __future__ import annotations

import random
import warnings
import zlib
from collections.abc import Callable
from typing import Any

import crc32c as crc32c_pkg
import pytest

from seglog._native import crc32c as native
from seglog.benchmarks import cases
from seglog.benchmarks.peers import python_murmur2
from seglog.client.partitioner import murmur2, partition_for_key, partitions_for_keys

SIZES = {"100B": 100, "4KiB": 4096, "1MiB": 1 << 20}
DATA = {name: random.Random(n).randbytes(n) for name, n in SIZES.items()}


CRC32C_CASES = cases("crc32c-100B", "crc32c-4KiB", "crc32c-1MiB")


@pytest.mark.parametrize("name,contender", CRC32C_CASES, ids=[f"{n}-{c}" for n, c in CRC32C_CASES])
def test_crc32c(bench_run: Callable[[str, str], None], name: str, contender: str) -> None:
    """The registry's crc32c benchmarks (``seglog bench --only crc32c``)."""
    bench_run(name, contender)


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("impl", ["seglog", "zlib"])
def test_crc32(benchmark: Any, impl: str, size: str) -> None:
    data = DATA[size]
    fn = native.crc32 if impl == "seglog" else zlib.crc32
    benchmark.group = f"crc32 {size}"
    assert benchmark(fn, data) == zlib.crc32(data)


GIL_SIZES = [256, 1024, 4096, 16384, 32768, 65536, 262144]
GIL_DATA = {n: random.Random(n).randbytes(n) for n in GIL_SIZES}


@pytest.mark.parametrize("size", GIL_SIZES)
@pytest.mark.parametrize("release", [False, True], ids=["hold", "release"])
def test_gil(benchmark: Any, size: int, release: bool) -> None:
    data = GIL_DATA[size]
    benchmark.group = f"gil {size}"
    assert benchmark(native._crc32c_gil, data, 0, release) == crc32c_pkg.crc32c(data)


# --- murmur2 ---------------------------------------------------------------------------

KEYS = [b"user-%08d" % i for i in range(10_000)]
MASK = 0xFFFFFFFF


def _kafka_python_murmur2() -> Callable[[bytes], int] | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from kafka.partitioner.default import murmur2 as km
    except ImportError:
        return None
    return km


kafka_python_murmur2 = _kafka_python_murmur2()


def _per_key(fn: Callable[[bytes], int]) -> Callable[[], int]:
    def run() -> int:
        acc = 0
        for k in KEYS:
            acc ^= fn(k)
        return acc

    return run


@pytest.mark.parametrize("impl", ["seglog", "pure-python", "kafka-python"])
def test_murmur2_per_key(benchmark: Any, impl: str) -> None:
    """Time for 10,000 calls, one key each (divide by 10,000 for per key)."""
    if impl == "kafka-python" and kafka_python_murmur2 is None:
        pytest.skip("kafka-python is not installed")
    fn = {"seglog": murmur2, "pure-python": python_murmur2, "kafka-python": kafka_python_murmur2}[impl]
    assert fn is not None
    benchmark.group = "murmur2 x10000 keys"
    benchmark(_per_key(fn))
    assert [murmur2(k) & MASK for k in KEYS[:50]] == [fn(k) & MASK for k in KEYS[:50]]


def test_partition_for_key_per_key(benchmark: Any) -> None:
    benchmark.group = "murmur2 x10000 keys"
    benchmark(_per_key(lambda k: partition_for_key(k, 12)))


def test_partitions_for_keys_vectorised(benchmark: Any) -> None:
    benchmark.group = "murmur2 x10000 keys"
    out = benchmark(partitions_for_keys, KEYS, 12)
    assert list(out[:50]) == [(python_murmur2(k) & 0x7FFFFFFF) % 12 for k in KEYS[:50]]
