"""Record batch encode and decode, side by side with aiokafka (Cython) and kafka-python.

    pytest bench/bench_records.py --benchmark-columns=median,ops --benchmark-sort=name

Every round handles one ~1 MiB RecordBatch v2 (uncompressed): 9,300 records of 8-byte key +
100-byte value, or 1,000 records of 8-byte key + 1 KiB value. ``extra_info`` carries the record
count, so records/s = ops x records (and is stored as ``records_per_s`` in ``--benchmark-json``).

Groups (one table each, the implementations side by side):

* ``encode <size>``: a list of values/keys/timestamps to batch bytes. Ours is one call over the
  columns; aiokafka's Cython ``DefaultRecordBatchBuilder`` and kafka-python's builder need one
  ``append`` per record (that loop is part of their cost, as it is in a producer).
* ``decode <size>``: batch bytes to record objects, CRC-32C checked. Ours ``decode_records``;
  theirs ``DefaultRecordBatch`` + ``validate_crc`` + iteration.
* ``columns <size>``: batch bytes to offset/timestamp/key/value data. Ours ``decode_columns``
  (Arrow-layout buffers, no Python object per record), ``decode_columns(...).to_arrow()`` and
  ``decode_columns(..., views=True)`` (Arrow binary_view keys/values pointing into the input:
  no value bytes copied); aiokafka iterating its records and touching those four fields.

Goals (docs/performance.md, Part C): encode >= 5x aiokafka, columnar decode >= 10x aiokafka.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder

from seglog.records import decode_columns, decode_records, encode_batch

T0 = 1700000000000
KEY_SIZE = 8
BATCH_BYTES = 1 << 20
SIZES = {"100B": 100, "1KiB": 1024}


def _inputs(value_size: int) -> dict[str, Any]:
    n = BATCH_BYTES // (value_size + KEY_SIZE + 8)  # ~8 bytes of record framing each
    rnd = random.Random(value_size)
    values = [rnd.randbytes(value_size) for _ in range(n)]
    keys = [b"%08d" % (i % 65536) for i in range(n)]
    timestamps = [T0 + i // 16 for i in range(n)]
    batch = encode_batch(values, keys=keys, timestamps=timestamps)
    return {"n": n, "values": values, "keys": keys, "timestamps": timestamps, "batch": batch}


INPUTS = {name: _inputs(size) for name, size in SIZES.items()}
BIG = 1 << 30


def _record_rate(benchmark: Any, n: int, nbytes: int) -> None:
    benchmark.extra_info["records"] = n
    benchmark.extra_info["batch_bytes"] = nbytes
    stats = getattr(benchmark, "stats", None)
    if stats is not None and getattr(stats, "stats", None) is not None and stats.stats.mean:
        benchmark.extra_info["records_per_s"] = round(n / stats.stats.mean)


# ---------------------------------------------------------------------------------------------
# Encode
# ---------------------------------------------------------------------------------------------

def _encode_ours(d: dict[str, Any]) -> bytes:
    return encode_batch(d["values"], keys=d["keys"], timestamps=d["timestamps"])


def _encode_with(builder: Any, d: dict[str, Any]) -> bytes:
    append = builder.append
    for i, (k, v, t) in enumerate(zip(d["keys"], d["values"], d["timestamps"])):
        append(i, timestamp=t, key=k, value=v, headers=[])
    return bytes(builder.build())


def _encode_aiokafka(d: dict[str, Any]) -> bytes:
    return _encode_with(AioBuilder(2, 0, 0, -1, -1, -1, BIG), d)


def _encode_kafka_python(d: dict[str, Any]) -> bytes:
    return _encode_with(KpBuilder(2, 0, False, -1, -1, -1, BIG), d)


ENCODERS = {"seglog": _encode_ours, "aiokafka": _encode_aiokafka, "kafka-python": _encode_kafka_python}


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("impl", list(ENCODERS))
def test_encode(benchmark: Any, impl: str, size: str) -> None:
    d = INPUTS[size]
    benchmark.group = f"encode {size}"
    out = benchmark(ENCODERS[impl], d)
    # All three write the same bytes for these inputs, but for partitionLeaderEpoch (outside the
    # CRC; the broker sets it): kafka-python writes 0, aiokafka and seglog -1.
    assert out[:12] + out[16:] == d["batch"][:12] + d["batch"][16:]
    _record_rate(benchmark, d["n"], len(out))


# ---------------------------------------------------------------------------------------------
# Decode to record objects (CRC checked)
# ---------------------------------------------------------------------------------------------

def _decode_ours(buf: bytes) -> int:
    return len(decode_records(buf))


def _decode_aiokafka(buf: bytes) -> int:
    b = AioBatch(buf)
    if not b.validate_crc():
        raise AssertionError("CRC")
    return len(list(b))


def _decode_kafka_python(buf: bytes) -> int:
    b = KpBatch(buf)
    if not b.validate_crc():
        raise AssertionError("CRC")
    return len(list(b))


DECODERS = {"seglog": _decode_ours, "aiokafka": _decode_aiokafka, "kafka-python": _decode_kafka_python}


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("impl", list(DECODERS))
def test_decode(benchmark: Any, impl: str, size: str) -> None:
    d = INPUTS[size]
    benchmark.group = f"decode {size}"
    assert benchmark(DECODERS[impl], d["batch"]) == d["n"]
    _record_rate(benchmark, d["n"], len(d["batch"]))


# ---------------------------------------------------------------------------------------------
# Columnar decode vs record iteration
# ---------------------------------------------------------------------------------------------

def _columns_ours(buf: bytes) -> int:
    return len(decode_columns(buf, headers=False))


def _columns_ours_arrow(buf: bytes) -> int:
    return int(decode_columns(buf, headers=False).to_arrow().num_rows)


def _columns_ours_views(buf: bytes) -> int:
    return len(decode_columns(buf, headers=False, views=True))


def _iterate_aiokafka(buf: bytes) -> int:
    b = AioBatch(buf)
    if not b.validate_crc():
        raise AssertionError("CRC")
    n = 0
    for r in b:
        r.offset, r.timestamp, r.key, r.value  # noqa: B018  (touch what the columns hold)
        n += 1
    return n


COLUMNAR = {"seglog-columns": _columns_ours, "seglog-arrow": _columns_ours_arrow,
            "seglog-views": _columns_ours_views, "aiokafka-iterate": _iterate_aiokafka}


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("impl", list(COLUMNAR))
def test_columns(benchmark: Any, impl: str, size: str) -> None:
    d = INPUTS[size]
    benchmark.group = f"columns {size}"
    assert benchmark(COLUMNAR[impl], d["batch"]) == d["n"]
    _record_rate(benchmark, d["n"], len(d["batch"]))
