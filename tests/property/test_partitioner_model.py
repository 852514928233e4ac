"""murmur2 and the keyed partition against a plain-Python model written from the spec
(docs/kafka-format.md §11; the benchmarks' pure-Python peer, ``python_murmur2``), and against
kafka-python's own implementation."""

from __future__ import annotations

import warnings

from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.benchmarks.peers import python_murmur2
from seglog.client.partitioner import murmur2, partition_for_key, partitions_for_keys

with warnings.catch_warnings():
    # kafka-python's protocol package uses a deprecated importlib.resources call on import.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2

MASK = 0xFFFFFFFF


def model_partition(data: bytes, n: int) -> int:
    return (python_murmur2(data) & 0x7FFFFFFF) % n


partition_counts = st.one_of(st.integers(1, 64), st.integers(1, 2**31 - 1))


@given(st.binary(max_size=200))
@settings(max_examples=500)
def test_murmur2_matches_model(key: bytes) -> None:
    want = python_murmur2(key)
    assert murmur2(key) == want
    assert murmur2(bytearray(key)) == want
    assert kafka_python_murmur2(key) == want & MASK


@given(st.binary(max_size=64), partition_counts)
def test_partition_matches_model(key: bytes, n: int) -> None:
    assert partition_for_key(key, n) == model_partition(key, n)


@given(st.lists(st.one_of(st.none(), st.binary(max_size=40)), max_size=50), partition_counts)
def test_vectorised_matches_model(keys: list[bytes | None], n: int) -> None:
    got = partitions_for_keys(keys, n)
    assert list(got) == [-1 if k is None else model_partition(k, n) for k in keys]
