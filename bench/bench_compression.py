"""Compression libraries side by side on Kafka-like payloads (docs/architecture.md,
"Compression libraries").

Payloads are concatenated v2 records with JSON-like values of 100 B or 1 KiB, cut to
16 KiB (Kafka's default batch.size), 256 KiB and 1 MiB. Every option produces the framing
Kafka needs: snappy in 32 KiB chunks, lz4 in 64 KiB independent blocks, zstd without a
pledged size except where noted. ``seglog`` is ``seglog._native.compression``, which
uses the libraries chosen from these numbers. Groups are codec / direction / payload, so
pytest-benchmark prints the options of one group together; throughput = input bytes /
time, the input size is in ``extra_info``.

    pytest bench/bench_compression.py --benchmark-columns=min,median,rounds
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable
from typing import Any

import cramjam
import lz4.block
import lz4.frame
import pytest
import snappy
import zstandard

from bench.payloads import kafka_records
from seglog._native import compression as C

K32 = 32 * 1024
K64 = 64 * 1024


def _chunks(data: bytes, n: int) -> list[memoryview]:
    mv = memoryview(data)
    return [mv[i : i + n] for i in range(0, len(data), n)]


_ZC = zstandard.ZstdCompressor(level=3, write_content_size=False)
_ZD = zstandard.ZstdDecompressor()


def _cj_lz4_blocks_decode(blocks: list[Any]) -> bytearray:
    out = bytearray(len(blocks) * K64)
    mv = memoryview(out)
    p = 0
    for b in blocks:
        p += cramjam.lz4.decompress_block_into(b, mv[p : p + K64], output_len=K64)
    mv.release()
    del out[p:]
    return out


def _lz4_blocks_decode(blocks: list[bytes]) -> bytes:
    return b"".join(lz4.block.decompress(b, uncompressed_size=K64) for b in blocks)


def _zlib_gzip(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


Codec = tuple[Callable[[bytes], Any], Callable[[Any], Any]]

OPTIONS: dict[str, dict[str, Codec]] = {
    "gzip": {
        "seglog": (lambda d: C.compress(C.GZIP, d), lambda c: C.decompress(C.GZIP, c)),
        "zlib": (_zlib_gzip, lambda c: zlib.decompressobj(31).decompress(c)),
        "gzip-module": (lambda d: gzip.compress(d, 6), gzip.decompress),
        "cramjam.gzip": (lambda d: cramjam.gzip.compress(d, level=6), cramjam.gzip.decompress),
    },
    "snappy": {
        "seglog": (lambda d: C.compress(C.SNAPPY, d), lambda c: C.decompress(C.SNAPPY, c)),
        "cramjam.snappy-raw": (
            lambda d: [cramjam.snappy.compress_raw(c) for c in _chunks(d, K32)],
            lambda bs: [cramjam.snappy.decompress_raw(b) for b in bs],
        ),
        "python-snappy": (
            lambda d: [snappy.compress(bytes(c)) for c in _chunks(d, K32)],
            lambda bs: [snappy.decompress(b) for b in bs],
        ),
    },
    "lz4": {
        "seglog": (lambda d: C.compress(C.LZ4, d), lambda c: C.decompress(C.LZ4, c)),
        "lz4.frame": (
            lambda d: lz4.frame.compress(
                d, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False, store_size=False
            ),
            lz4.frame.decompress,
        ),
        "lz4.block": (lambda d: [lz4.block.compress(c, store_size=False) for c in _chunks(d, K64)], _lz4_blocks_decode),
        "cramjam.lz4-block": (
            lambda d: [cramjam.lz4.compress_block(c, store_size=False) for c in _chunks(d, K64)],
            _cj_lz4_blocks_decode,
        ),
    },
    "zstd": {
        "seglog": (lambda d: C.compress(C.ZSTD, d), lambda c: C.decompress(C.ZSTD, c)),
        "zstandard": (_ZC.compress, lambda c: _ZD.decompressobj(read_across_frames=True).decompress(c)),
        "zstandard-bounded": (_ZC.compress, lambda c: _ZD.stream_reader(c, read_across_frames=True).read(1 << 30)),
        "cramjam.zstd": (lambda d: cramjam.zstd.compress(d, level=3), cramjam.zstd.decompress),
    },
}

PAYLOADS = {f"{v}B-values-{s >> 10}KiB": (v, s) for v in (100, 1024) for s in (16 << 10, 256 << 10, 1 << 20)}
_cache: dict[str, bytes] = {}


def _payload(name: str) -> bytes:
    if name not in _cache:
        v, s = PAYLOADS[name]
        _cache[name] = kafka_records(s, v)
    return _cache[name]


CASES = [(codec, option, payload) for codec, opts in OPTIONS.items() for option in opts for payload in PAYLOADS]


def _join(out: Any) -> bytes:
    return b"".join(bytes(x) for x in out) if isinstance(out, list) else bytes(out)


@pytest.mark.parametrize("codec,option,payload", CASES)
def test_compress(benchmark: Any, codec: str, option: str, payload: str) -> None:
    data = _payload(payload)
    compress, decompress = OPTIONS[codec][option]
    benchmark.group = f"{codec} compress {payload}"
    benchmark.extra_info["input_bytes"] = len(data)
    out = benchmark(compress, data)
    benchmark.extra_info["ratio"] = round(len(_join(out)) / len(data), 4)
    assert _join(decompress(out)) == data


@pytest.mark.parametrize("codec,option,payload", CASES)
def test_decompress(benchmark: Any, codec: str, option: str, payload: str) -> None:
    data = _payload(payload)
    compress, decompress = OPTIONS[codec][option]
    packed = compress(data)
    benchmark.group = f"{codec} decompress {payload}"
    benchmark.extra_info["input_bytes"] = len(data)
    out = benchmark(decompress, packed)
    assert _join(out) == data
