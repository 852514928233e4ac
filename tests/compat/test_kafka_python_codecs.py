"""The kafka-python / aiokafka differential tests across every codec (gzip, snappy, lz4, zstd),
both directions, plus legacy v0/v1 compressed wrappers (kafka-python's LegacyRecordBatchBuilder).

Compressed payload bytes are implementation specific, so only decoded content is compared.
"""

from __future__ import annotations

import struct

import pytest

pytest.importorskip("seglog._native.compression")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder  # noqa: E402

from seglog.errors import CorruptRecordError  # noqa: E402
from seglog.storage.records import (  # noqa: E402
    batch_headers,
    decode_columns,
    decode_records,
    iter_records,
)
from tests.compat.kafka_oracle import (  # noqa: E402
    BIG,
    BatchInput,
    LegacyInput,
    aio_build_v2,
    aio_records,
    arrow_rows,
    kp_batches,
    kp_build_legacy,
    kp_build_v2,
    kp_records,
    ours,
    reseal_legacy,
)
from tests.compat.record_cases import (  # noqa: E402
    aio_inputs,
    batch_inputs,
    check_ours_reads,
    legacy_inputs,
)
from tests.conftest import KAFKA_CODECS  # noqa: E402

SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
CODECS = {name: code for name, code in KAFKA_CODECS.items() if name != "none"}
LEGACY_CODECS = {"gzip": 1, "snappy": 2, "lz4": 3}  # zstd needs magic 2


def compressible(n: int, seed: int = 0) -> BatchInput:
    values: list[bytes | None] = [(b"record-%d-" % (i % 7)) * (10 + (i + seed) % 5) for i in range(n)]
    return BatchInput(
        values=values,
        keys=[b"k%d" % (i % 3) if i % 4 else None for i in range(n)],
        timestamps=[1700000000000 + 3 * i for i in range(n)],
        headers=[[("h", b"v"), ("n", None)] if i % 2 else [] for i in range(n)],
        base_offset=1000,
    )


# ---------------------------------------------------------------------------------------------
# v2, both directions
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
@SETTINGS
@given(inp=batch_inputs(max_records=12))
def test_our_compressed_batches_decode_in_kafka_python_and_aiokafka(codec: int, inp: BatchInput) -> None:
    buf = inp.encode_ours(compression=codec)
    (b,) = kp_batches(buf)
    assert b.crc_ok
    assert b.attributes & 0x07 == codec
    assert b.records == inp.expected()
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.leader_epoch) == (
        inp.producer_id,
        inp.producer_epoch,
        inp.base_sequence,
        inp.partition_leader_epoch,
    )
    assert aio_records(buf) == inp.expected()
    check_ours_reads(inp, buf)


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
@SETTINGS
@given(inp=batch_inputs(max_records=12))
def test_kafka_python_compressed_batches_decode_in_ours(codec: int, inp: BatchInput) -> None:
    # kafka-python sends a batch uncompressed when compression does not shrink it.
    check_ours_reads(inp, kp_build_v2(inp, compression=codec))


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
@SETTINGS
@given(inp=aio_inputs)
def test_aiokafka_compressed_batches_decode_in_ours(codec: int, inp: BatchInput) -> None:
    check_ours_reads(inp, aio_build_v2(inp, compression=codec))


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
@pytest.mark.parametrize("n", [1, 50, 3000])
def test_compressible_batches_really_are_compressed(codec: int, n: int) -> None:
    inp = compressible(n)
    for buf in (
        kp_build_v2(inp, compression=codec),
        aio_build_v2(inp, compression=codec),
        inp.encode_ours(compression=codec),
    ):
        if n > 1:
            assert batch_headers(buf)[0].compression == codec
        check_ours_reads(inp, buf)
        assert kp_records(buf) == inp.expected()


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_values_up_to_one_mib_compressed(codec: int) -> None:
    import random

    rnd = random.Random(codec)
    values = [rnd.randbytes(2**20), b"z" * 2**20, None, b""]
    inp = BatchInput(values, [None, b"k", b"", None], [5, 4, 3, 2], [[], [("ключ", None)], [], []])
    buf = inp.encode_ours(compression=codec)
    assert kp_records(buf) == inp.expected()
    check_ours_reads(inp, kp_build_v2(inp, compression=codec))


# ---------------------------------------------------------------------------------------------
# Legacy wrappers (v0 absolute inner offsets, v1 relative; kafka-python writes wrapper offset 0)
# ---------------------------------------------------------------------------------------------


def with_wrapper(buf: bytes, *, offset: int | None = None, log_append_time: int | None = None) -> bytes:
    out = bytearray(buf)
    if offset is not None:
        struct.pack_into(">q", out, 0, offset)  # outside the legacy CRC
    if log_append_time is not None:
        out[17] |= 0x08
        struct.pack_into(">q", out, 18, log_append_time)
        reseal_legacy(out)
    return bytes(out)


def relative(inp: LegacyInput) -> LegacyInput:
    """Inner offsets as a producer writes them: 0..n-1."""
    return LegacyInput(inp.magic, list(range(len(inp.offsets))), inp.timestamps, inp.keys, inp.values, False)


@pytest.mark.parametrize("codec", LEGACY_CODECS.values(), ids=LEGACY_CODECS.keys())
@SETTINGS
@given(inp=legacy_inputs(), data=st.data())
def test_kafka_python_legacy_wrappers_decode_in_ours(codec: int, inp: LegacyInput, data: st.DataObject) -> None:
    if inp.magic == 1:
        inp = relative(inp)
    wrapped = kp_build_legacy(inp, compression=codec)
    (h,) = batch_headers(wrapped, verify_crc=True)
    assert h.compression == codec and h.magic == inp.magic
    expected = inp.expected()
    assert kp_records(wrapped) == expected == ours(wrapped)  # wrapper offset 0: inner offsets as-is

    if inp.magic == 0:
        return
    # The broker's view: wrapper offset = absolute offset of the last inner message.
    last = data.draw(st.integers(len(inp.offsets) - 1, 2**62), label="wrapper offset")
    base = last - (len(inp.offsets) - 1)
    moved = with_wrapper(wrapped, offset=last)
    exp_moved = [(base + o, *rest) for o, *rest in expected]
    assert kp_records(moved) == exp_moved == ours(moved)
    assert list(iter_records(moved)) == decode_records(moved)
    assert arrow_rows(decode_columns(moved)) == exp_moved
    # LogAppendTime on the wrapper: every inner message takes the wrapper's timestamp.
    lat = data.draw(st.integers(-(2**63), 2**63 - 1), label="log append time")
    stamped = with_wrapper(moved, log_append_time=lat)
    exp_lat = [(o, lat, 1, k, v, h) for o, _, _, k, v, h in exp_moved]
    assert kp_records(stamped) == exp_lat == ours(stamped)
    assert arrow_rows(decode_columns(stamped)) == exp_lat


def test_v0_lz4_wrapper_uses_kafkas_broken_header_checksum() -> None:
    inp = LegacyInput(0, [5, 6, 7], [0, 0, 0], [b"a", None, b""], [b"x" * 100, b"y", None])
    buf = kp_build_legacy(inp, compression=3)
    assert ours(buf) == kp_records(buf) == inp.expected()


# Regression test (was a bug):  a v1 wrapper whose offset is non-zero and below its last inner
# relative offset is accepted  and yields offsets below the wrapper's range (here -1, 0, 1); Kafka's
# AbstractLegacyRecordBatch.DeepRecordsIterator throws InvalidRecordException ('wrapper offset  ...
# is less than the last inner message of
@pytest.mark.parametrize("codec", LEGACY_CODECS.values(), ids=LEGACY_CODECS.keys())
def test_v1_wrapper_offset_below_last_inner_offset_is_corrupt(codec: int) -> None:
    inp = LegacyInput(1, [0, 1, 2], [10, 11, 12], [b"a", None, b""], [b"x", None, b"y"])
    buf = with_wrapper(kp_build_legacy(inp, compression=codec), offset=1)
    with pytest.raises(CorruptRecordError):
        decode_records(buf)


# Regression test (was a bug):  a compressed legacy wrapper whose payload decompresses to zero bytes
# (no inner messages)  decodes to no records; Kafka's DeepRecordsIterator throws
# InvalidRecordException  ('Found invalid compressed record set with no inner records')
@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_wrapper_with_no_inner_messages_is_corrupt(magic: int) -> None:
    buf = bytes(KpLegacyBuilder(magic=magic, compression_type=1, batch_size=BIG).build())
    assert buf[17] & 0x07 == 1
    with pytest.raises(CorruptRecordError):
        decode_records(buf)


@pytest.mark.parametrize("codec", LEGACY_CODECS.values(), ids=LEGACY_CODECS.keys())
def test_mixed_legacy_and_v2_compressed_buffer(codec: int) -> None:
    legacy = relative(LegacyInput(1, [0, 1], [7, 8], [b"a", None], [None, b"b"]))
    v2 = compressible(20)
    v2 = BatchInput(v2.values, v2.keys, v2.timestamps, v2.headers, base_offset=2)
    buf = (
        with_wrapper(kp_build_legacy(legacy, compression=codec), offset=1)
        + v2.encode_ours(compression=min(codec + 1, 4))
        + kp_build_v2(BatchInput(v2.values, v2.keys, v2.timestamps, v2.headers, base_offset=22), codec)
    )
    assert kp_records(buf) == ours(buf)
    assert [r[0] for r in ours(buf)] == list(range(42))
