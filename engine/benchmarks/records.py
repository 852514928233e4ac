"""Record batches (group ``records``): encode from Python lists, decode to record objects and
to columns, seglog beside aiokafka's and kafka-python's record-batch code and ``memcpy``."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from seglog.storage.records import decode_columns, decode_records, encode_batch

from .inputs import MEMCPY, SEGLOG, T0, Stream, memcpy_of, producer_batch_size
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
#: Who decodes to columns, and the goals, in the hot-batch and the stream rows alike.
COLUMNS_CONTENDERS = (
    Contender(SEGLOG, "seglog"),
    Contender("seglog → Arrow", "seglog", ("pyarrow",), "pyarrow"),
    Contender(SEGLOG_VIEWS, "seglog", note="decode_columns(views=True): Arrow binary_view into the input"),
    AIOKAFKA,
    Contender(MEMCPY, "limit"),
)
COLUMNS_GOALS = (
    Goal("≥10× aiokafka", "ratio", 10.0, "aiokafka"),
    Goal("≥10× aiokafka (views)", "ratio", 10.0, "aiokafka", SEGLOG_VIEWS),
)
#: The goal of encoding, in the hot-batch and the stream rows alike.
ENCODE_GOALS = (Goal("≥5× aiokafka", "ratio", 5.0, "aiokafka"),)


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


# -------------------------------------------------------------------------------------------------
# Streams: every record distinct, in the producer's batches
# -------------------------------------------------------------------------------------------------


def _stream_work(stream: Stream, consumers: Mapping[str, Callable[[Any], object]], encoded: bool) -> Work:
    """Each consumer over every batch of ``stream`` (with their encodings if ``encoded``), the
    memcpy limit copying each batch's encoding; the first chunk made in the untimed set-up."""
    buf = memoryview(bytearray(producer_batch_size() + 4096))

    def copy(b: Any) -> None:
        data = b[4]
        buf[: len(data)] = data

    all_calls = {**consumers, MEMCPY: copy}
    runs = {n: stream.timed(f, encoded or n == MEMCPY) for n, f in all_calls.items()}
    calls: dict[str, Callable[[], object]] = {n: partial(r, None) for n, r in runs.items()}
    warmup: dict[str, Callable[[], object]] = {n: partial(r, 1) for n, r in runs.items()}
    setup: dict[str, Callable[[], object]] = {n: partial(stream.prime, encoded or n == MEMCPY) for n in all_calls}
    return stream.work(calls, setup, warmup)


def _prepare_encode_stream(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    stream = Stream(p["records"], p["value"])
    consumers: dict[str, Callable[[Any], object]] = {SEGLOG: lambda b: encode_batch(b[1], keys=b[2], timestamps=b[3])}
    if "aiokafka" in available:
        from aiokafka.record.default_records import DefaultRecordBatchBuilder as Aio

        consumers["aiokafka"] = lambda b: _builder_encode(Aio(2, 0, 0, -1, -1, -1, BIG), b[2], b[1], b[3])
    first = next(stream.chunks(1, encoded=True))[0]
    for name, fn in consumers.items():
        out = fn(first)
        if not isinstance(out, bytes) or out[:12] + out[16:] != first[4][:12] + first[4][16:]:
            raise AssertionError(f"{name} encodes different bytes")
    return _stream_work(stream, consumers, False)


def _prepare_decode_stream(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    stream = Stream(p["records"], p["value"])
    consumers: dict[str, Callable[[Any], object]] = {SEGLOG: lambda b: len(decode_records(b[4]))}
    if "aiokafka" in available:
        consumers["aiokafka"] = lambda b: aio_decode(b[4], False)
    return _stream_work(stream, consumers, True)


def _prepare_columns_stream(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    stream = Stream(p["records"], p["value"])
    consumers: dict[str, Callable[[Any], object]] = {SEGLOG: lambda b: len(decode_columns(b[4], headers=False))}
    if "seglog → Arrow" in available:
        consumers["seglog → Arrow"] = lambda b: decode_columns(b[4], headers=False).to_arrow().num_rows
    consumers[SEGLOG_VIEWS] = lambda b: len(decode_columns(b[4], headers=False, views=True))
    if "aiokafka" in available:
        consumers["aiokafka"] = lambda b: aio_decode(b[4], True)
    return _stream_work(stream, consumers, True)


def _stream_benches(label: str, value: int) -> list[Benchmark]:
    quick = {"records": 1_000_000, "value": value}
    full = {"records": 10_000_000, "value": value}
    # kafka-python (pure Python, 6-40x slower than aiokafka here) is in the hot-batch rows only:
    # over a stream it would add minutes to every run and is never the best peer.
    each = f"distinct {label} records in the producer's default 16 KiB batches"
    # Seconds per round of the full run, from a 1 M-record run on a shared 2-core machine.
    scale = 1 if value <= 100 else 3
    return [
        Benchmark(
            name=f"encode-{label}-stream",
            group="records",
            unit="records",
            variant="stream",
            self_timed=True,
            title=f"encode a stream of {each} from Python lists",
            contenders=(Contender(SEGLOG, "seglog"), AIOKAFKA, Contender(MEMCPY, "limit")),
            goals=ENCODE_GOALS,
            prepare=_prepare_encode_stream,
            quick=quick,
            full=full,
            full_round_seconds=150 * scale,
        ),
        Benchmark(
            name=f"decode-{label}-stream",
            group="records",
            unit="records",
            variant="stream",
            self_timed=True,
            title=f"decode a stream of {each} to record objects (CRC checked)",
            contenders=(Contender(SEGLOG, "seglog"), AIOKAFKA, Contender(MEMCPY, "limit")),
            prepare=_prepare_decode_stream,
            quick=quick,
            full=full,
            full_round_seconds=150 * scale,
        ),
        Benchmark(
            name=f"columns-{label}-stream",
            group="records",
            unit="records",
            variant="stream",
            self_timed=True,
            title=f"decode a stream of {each} to columns (offset, timestamp, key, value)",
            contenders=COLUMNS_CONTENDERS,
            goals=COLUMNS_GOALS,
            prepare=_prepare_columns_stream,
            quick=quick,
            full=full,
            full_round_seconds=60 * scale,
        ),
    ]


def _codec_benches(label: str, value: int) -> list[Benchmark]:
    sizes = {"value": value}
    return [
        Benchmark(
            name=f"encode-{label}",
            group="records",
            unit="records",
            variant="hot batch",
            title=f"encode a ~1 MiB batch of {label} records from Python lists, the same batch every call",
            contenders=(Contender(SEGLOG, "seglog"), AIOKAFKA, KAFKA_PYTHON, Contender(MEMCPY, "limit")),
            goals=ENCODE_GOALS,
            prepare=_prepare_encode,
            quick=sizes,
            full=sizes,
            full_round_seconds=2,
        ),
        Benchmark(
            name=f"decode-{label}",
            group="records",
            unit="records",
            variant="hot batch",
            title=f"decode a ~1 MiB batch of {label} records to record objects (CRC checked), the same batch every call",
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
            variant="hot batch",
            title=f"decode a ~1 MiB batch of {label} records to columns (offset, timestamp, key, value), the same batch every call",
            contenders=COLUMNS_CONTENDERS,
            goals=COLUMNS_GOALS,
            prepare=_prepare_columns,
            quick=sizes,
            full=sizes,
            full_round_seconds=1,
        ),
    ]


def records_benches() -> list[Benchmark]:
    return [
        *_stream_benches("100B", 100),
        *_stream_benches("1KiB", 1024),
        *_codec_benches("100B", 100),
        *_codec_benches("1KiB", 1024),
    ]
