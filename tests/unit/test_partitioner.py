"""Kafka's keyed partitioner: murmur2 and the partition it picks, against the vectors
kafka-clients 3.9.1 generated, Kafka's own UtilsTest vectors and kafka-python's partitioner
test vectors (docs/kafka-format.md §11)."""

from __future__ import annotations

import array
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pytest

from seglog.client.partitioner import murmur2, partition_for_key, partitions_for_keys

if TYPE_CHECKING:
    from typing_extensions import Buffer


def load_vectors(fixtures_dir: Path) -> list[dict[str, Any]]:
    doc = json.loads((fixtures_dir / "kafka-clients-generated" / "vectors.json").read_text())
    vectors: list[dict[str, Any]] = doc["murmur2"]
    assert vectors, "no murmur2 vectors in the fixture"
    return vectors


def test_generated_vectors(fixtures_dir: Path) -> None:
    for v in load_vectors(fixtures_dir):
        key = bytes.fromhex(v["key_hex"])
        assert murmur2(key) == int(v["murmur2"]), v
        assert murmur2(key) & 0x7FFFFFFF == int(v["toPositive"]), v
        for n in (3, 6, 12, 1000):
            assert partition_for_key(key, n) == int(v[f"p{n}"]), (v, n)


def test_generated_vectors_vectorised(fixtures_dir: Path) -> None:
    vectors = load_vectors(fixtures_dir)
    keys: list[bytes | None] = [bytes.fromhex(v["key_hex"]) for v in vectors]
    for n in (3, 6, 12, 1000):
        got = partitions_for_keys(keys, n)
        assert isinstance(got, array.array)
        assert got.typecode == "i"
        assert list(got) == [int(v[f"p{n}"]) for v in vectors]


@pytest.mark.parametrize(
    ("key", "want"),
    [
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
    ],
)
def test_kafka_utils_test_vectors(key: bytes, want: int) -> None:
    assert murmur2(key) == want


@pytest.mark.parametrize(
    ("key", "want"),
    [(b"", 681), (b"a", 524), (b"ab", 434), (b"abc", 107), (b"123456789", 566), (b"\x00 ", 742)],
)
def test_kafka_python_partitioner_vectors(key: bytes, want: int) -> None:
    assert partition_for_key(key, 1000) == want


def test_key_buffer_kinds() -> None:
    key = b"user-42"
    want = murmur2(key)
    assert want == 1459644460
    bufs: list[Buffer] = [
        bytearray(key),
        memoryview(key),
        memoryview(b"xuser-42y")[1:-1],
        cast("Buffer", np.frombuffer(key, dtype=np.uint8)),
    ]
    for buf in bufs:
        assert murmur2(buf) == want
        assert partition_for_key(buf, 12) == 4
    assert list(partitions_for_keys([bytearray(key), memoryview(key), key], 1000)) == [460] * 3


def test_vectorised_none_and_empty() -> None:
    assert list(partitions_for_keys([None, b"", None], 1000)) == [-1, 681, -1]
    assert list(partitions_for_keys([], 5)) == []
    assert list(partitions_for_keys((b"a", None), 1000)) == [524, -1]  # any sequence
    assert list(partitions_for_keys(iter([b"abc"]), 1000)) == [107]


def test_one_partition_and_the_largest_count() -> None:
    assert partition_for_key(b"a", 1) == 0
    top = 2**31 - 1
    assert partition_for_key(b"a", top) == (murmur2(b"a") & 0x7FFFFFFF) % top
    assert list(partitions_for_keys([b"a"], top)) == [(murmur2(b"a") & 0x7FFFFFFF) % top]
    assert partition_for_key(b"a", np.int64(1000)) == 524  # any integer type


def test_none_key_is_refused_clearly() -> None:
    with pytest.raises(TypeError, match="null keys"):
        partition_for_key(None, 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="null keys"):
        murmur2(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("n", [0, -1, 2**31])
def test_bad_partition_count(n: int) -> None:
    with pytest.raises(ValueError, match="num_partitions must be between 1 and 2147483647"):
        partition_for_key(b"k", n)
    with pytest.raises(ValueError, match="num_partitions"):
        partitions_for_keys([b"k"], n)


@pytest.mark.parametrize("n", [3.0, "3", None, True])
def test_partition_count_type(n: object) -> None:
    with pytest.raises(TypeError, match="num_partitions must be an int"):
        partition_for_key(b"k", n)  # type: ignore[arg-type]


def test_bad_keys() -> None:
    with pytest.raises(TypeError, match="encode"):
        murmur2("abc")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key must be a bytes-like"):
        partition_for_key(42, 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"keys\[1\] is a str"):
        partitions_for_keys([b"a", "b"], 3)  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"keys\[2\] must be a bytes-like"):
        partitions_for_keys([b"a", None, 7], 3)  # type: ignore[list-item]
    with pytest.raises(TypeError, match="keys must be a list"):
        partitions_for_keys(b"abc", 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="keys must be a list"):
        partitions_for_keys(None, 3)  # type: ignore[arg-type]
