"""Record batches (group ``records``): encode from Python lists, decode to record objects and
to columns, seglog beside aiokafka's and kafka-python's record-batch code and ``memcpy``."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from seglog.storage.records import decode_columns, decode_records, encode_batch

from .inputs import MEMCPY, SEGLOG, T0, memcpy_of
from .peers import AIOKAFKA, KAFKA_PYTHON, aio_decode
from .registry import Benchmark, Contender, Goal, Work

BIG = 1 << 30


def _batch_inputs(p: Mapping[str, int]) -> tuple[int, list[bytes], list[bytes], list[int], bytes]:
    value = p["value"]
    n = (1 << 20) // (value + 24)  # ~1 MiB batches
    rng = random.Random(value)
    values = [rng.randbytes(value) for _ in range(n)]
    keys = [b"%08d" % (i % 65536) for i in range(n)]
    stamps = [T0 + i // 16 for i in range(n)]
    return n, values, keys, stamps, encode_batch(values, keys=keys, timestamps=stamps)


def _builder_encode(builder: Any, keys: list[bytes], values: list[bytes], stamps: list[int]) -> bytes:
    append = builder.append
    for i, (k, v, t) in enumerate(zip(keys, values, stamps)):
        append(i, timestamp=t, key=k, value=v, headers=[])
    return bytes(builder.build())


def _prepare_encode(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    n, values, keys, stamps, batch = _batch_inputs(p)
    calls: dict[str, Callable[[], object]] = {SEGLOG: lambda: encode_batch(values, keys=keys, timestamps=stamps)}
    if "aiokafka" in available:
        from aiokafka.record.default_records import DefaultRecordBatchBuilder as Aio

        calls["aiokafka"] = lambda: _builder_encode(Aio(2, 0, 0, -1, -1, -1, BIG), keys, values, stamps)
    if "kafka-python" in available:
        from kafka.record.default_records import DefaultRecordBatchBuilder as Kp  # type: ignore[import-untyped,unused-ignore]

        calls["kafka-python"] = lambda: _builder_encode(Kp(2, 0, False, -1, -1, -1, BIG), keys, values, stamps)
    for name, fn in calls.items():
        out = fn()
        assert isinstance(out, bytes)
        # The same bytes but for partitionLeaderEpoch (outside the CRC; kafka-python writes 0).
        if out[:12] + out[16:] != batch[:12] + batch[16:]:
            raise AssertionError(f"{name} encodes different bytes")
    calls[MEMCPY] = memcpy_of(batch)
    return Work(items=n, calls=calls, nbytes=len(batch), params={"records_per_batch": n})


def _prepare_decode(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    n, _, _, _, batch = _batch_inputs(p)
    calls: dict[str, Callable[[], object]] = {SEGLOG: lambda: len(decode_records(batch))}
    if "aiokafka" in available:
        calls["aiokafka"] = lambda: aio_decode(batch, False)
    if "kafka-python" in available:
        from kafka.record.default_records import DefaultRecordBatch as Kp

        def kp() -> int:
            b = Kp(batch)
            if not b.validate_crc():
                raise AssertionError("CRC")
            return len(list(b))

        calls["kafka-python"] = kp
    calls[MEMCPY] = memcpy_of(batch)
    return Work(items=n, calls=calls, nbytes=len(batch), params={"records_per_batch": n})


SEGLOG_VIEWS = "seglog views"


def _prepare_columns(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    n, _, _, _, batch = _batch_inputs(p)
    calls: dict[str, Callable[[], object]] = {SEGLOG: lambda: len(decode_columns(batch, headers=False))}
    if "seglog → Arrow" in available:
        calls["seglog → Arrow"] = lambda: decode_columns(batch, headers=False).to_arrow().num_rows
    calls[SEGLOG_VIEWS] = lambda: len(decode_columns(batch, headers=False, views=True))
    if "aiokafka" in available:
        calls["aiokafka"] = lambda: aio_decode(batch, True)
    calls[MEMCPY] = memcpy_of(batch)
    return Work(items=n, calls=calls, nbytes=len(batch), params={"records_per_batch": n})


def _codec_benches(label: str, value: int) -> list[Benchmark]:
    sizes = {"value": value}
    return [
        Benchmark(
            name=f"encode-{label}",
            group="records",
            unit="records",
            title=f"encode a ~1 MiB batch of {label} records from Python lists",
            contenders=(Contender(SEGLOG, "seglog"), AIOKAFKA, KAFKA_PYTHON, Contender(MEMCPY, "limit")),
            goals=(Goal("≥5× aiokafka", "ratio", 5.0, "aiokafka"),),
            prepare=_prepare_encode,
            quick=sizes,
            full=sizes,
            full_round_seconds=2,
        ),
        Benchmark(
            name=f"decode-{label}",
            group="records",
            unit="records",
            title=f"decode a ~1 MiB batch of {label} records to record objects (CRC checked)",
            contenders=(Contender(SEGLOG, "seglog"), AIOKAFKA, KAFKA_PYTHON, Contender(MEMCPY, "limit")),
            prepare=_prepare_decode,
            quick=sizes,
            full=sizes,
            full_round_seconds=2,
        ),
        Benchmark(
            name=f"columns-{label}",
            group="records",
            unit="records",
            title=f"decode a ~1 MiB batch of {label} records to columns (offset, timestamp, key, value)",
            contenders=(
                Contender(SEGLOG, "seglog"),
                Contender("seglog → Arrow", "seglog", ("pyarrow",), "pyarrow"),
                Contender(SEGLOG_VIEWS, "seglog", note="decode_columns(views=True): Arrow binary_view into the input"),
                AIOKAFKA,
                Contender(MEMCPY, "limit"),
            ),
            goals=(
                Goal("≥10× aiokafka", "ratio", 10.0, "aiokafka"),
                Goal("≥10× aiokafka (views)", "ratio", 10.0, "aiokafka", SEGLOG_VIEWS),
            ),
            prepare=_prepare_columns,
            quick=sizes,
            full=sizes,
            full_round_seconds=1,
        ),
    ]


def records_benches() -> list[Benchmark]:
    return [*_codec_benches("100B", 100), *_codec_benches("1KiB", 1024)]
