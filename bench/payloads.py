"""Kafka-like test data shared by the compression benchmark (``bench_compression.py``) and the
compression tests (``tests/unit/test_compression.py``): what a producer compresses, one
generator for both, so the tests check the codecs on the bytes the benchmark times."""

from __future__ import annotations

import random

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "order",
    "payment",
    "user",
    "session",
    "click",
    "view",
    "checkout",
    "cart",
    "item",
    "price",
    "status",
    "ok",
    "error",
    "retry",
    "timeout",
    "region",
    "eu",
    "us",
    "mobile",
    "web",
    "search",
    "query",
    "page",
    "home",
    "product",
    "account",
    "login",
    "token",
    "cache",
    "hit",
    "miss",
    "latency",
]


def _zigzag_varint(n: int) -> bytes:
    u = (n << 1) ^ (n >> 63)
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def kafka_records(total: int, value_size: int = 100, seed: int = 1) -> bytes:
    """Concatenated v2 records (attributes, timestamp delta, offset delta, key ``user-N``,
    a JSON-like value of ``value_size`` bytes, no headers), each with its length prefix, cut to
    ``total`` bytes. The same arguments give the same bytes."""
    rng = random.Random(seed)
    out = bytearray()
    i = 0
    while len(out) < total:
        key = b"user-%d" % rng.randrange(10000)
        parts = []
        n = 0
        while n < value_size:
            s = '"%s":"%s-%d"' % (rng.choice(WORDS), rng.choice(WORDS), rng.randrange(100000))
            parts.append(s)
            n += len(s) + 1
        value = ("{" + ",".join(parts) + "}").encode()[:value_size]
        body = (
            b"\x00"
            + _zigzag_varint(rng.randrange(50))
            + _zigzag_varint(i)
            + _zigzag_varint(len(key))
            + key
            + _zigzag_varint(len(value))
            + value
            + _zigzag_varint(0)
        )
        out += _zigzag_varint(len(body)) + body
        i += 1
    return bytes(out[:total])
