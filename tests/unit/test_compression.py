"""seglog._native.compression against Kafka's own bytes, kafka-python's codec functions and
the reference libraries (gzip, lz4.frame, zstandard, cramjam) as independent oracles."""

from __future__ import annotations

import gzip
import json
import mmap
import os
import random
import struct
import threading
import warnings
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import cramjam
import lz4.frame
import pytest
import xxhash
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import seglog  # noqa: F401  (installs the engine's error classes into the native table)
from bench.payloads import kafka_records as records
from seglog._native import compression as C
from seglog.errors import CorruptRecordError
from tests.conftest import wrong

with warnings.catch_warnings():
    # kafka-python's package import trips a DeprecationWarning in importlib.resources.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import codec as kafka_codec

CODECS = [C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD]
NAMES = {C.GZIP: "gzip", C.SNAPPY: "snappy", C.LZ4: "lz4", C.ZSTD: "zstd"}


# --------------------------------------------------------------------------------------
# payloads and a legacy message-set parser written from docs/kafka-format.md §4


def payload(kind: str, size: int) -> bytes:
    if kind == "records":
        return records(size)
    if kind == "random":
        return random.Random(size).randbytes(size)
    return bytes(size)


def legacy_messages(buf: bytes) -> Iterator[tuple[int, int, int, bytes | None, bytes | None]]:
    """(offset, magic, attributes, key, value) of each entry of a magic 0/1 message set,
    checking each entry's CRC-32 and that the entries cover ``buf`` exactly."""
    pos = 0
    while pos < len(buf):
        offset, size = struct.unpack_from(">qi", buf, pos)
        crc, magic, attributes = struct.unpack_from(">IBB", buf, pos + 12)
        assert magic in (0, 1)
        assert zlib.crc32(buf[pos + 16 : pos + 12 + size]) == crc
        q = pos + 18 + (8 if magic == 1 else 0)
        (klen,) = struct.unpack_from(">i", buf, q)
        q += 4
        key = None if klen < 0 else buf[q : q + klen]
        q += max(klen, 0)
        (vlen,) = struct.unpack_from(">i", buf, q)
        q += 4
        value = None if vlen < 0 else buf[q : q + vlen]
        q += max(vlen, 0)
        assert q == pos + 12 + size
        yield offset, magic, attributes, key, value
        pos += 12 + size
    assert pos == len(buf)


def v2_batches(buf: bytes) -> Iterator[bytes]:
    pos = 0
    while pos + 17 <= len(buf):
        (length,) = struct.unpack_from(">i", buf, pos + 8)
        assert buf[pos + 16] == 2
        yield buf[pos : pos + 12 + length]
        pos += 12 + length
    assert pos == len(buf)


def count_v2_records(region: bytes) -> int:
    """Number of length-prefixed records in an uncompressed v2 records region."""
    pos = n = 0
    while pos < len(region):
        shift = u = 0
        while True:
            b = region[pos]
            pos += 1
            u |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        pos += (u >> 1) ^ -(u & 1)
        n += 1
    assert pos == len(region)
    return n


@pytest.fixture(scope="module")
def vectors(fixtures_dir: Path) -> dict[str, bytes]:
    raw = json.loads((fixtures_dir / "kafka-clients-generated" / "vectors.json").read_text())
    return {k: bytes.fromhex(h) for k, h in raw["vectors_hex"].items()}


def raises_corrupt(codec: int, data: Any, **kw: Any) -> CorruptRecordError:
    with pytest.raises(CorruptRecordError) as info:
        C.decompress(codec, data, **kw)
    return info.value


# --------------------------------------------------------------------------------------
# names, ids, levels


def test_codec_ids_match_kafka_attributes() -> None:
    assert (C.NONE, C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD) == (0, 1, 2, 3, 4)


@pytest.mark.parametrize(
    "name,codec",
    [
        ("none", 0),
        ("uncompressed", 0),
        ("gzip", 1),
        ("snappy", 2),
        ("lz4", 3),
        ("zstd", 4),
        ("GZIP", 1),
        ("Zstd", 4),
    ],
)
def test_codec_from_name(name: str, codec: int) -> None:
    assert C.codec_from_name(name) == codec


@pytest.mark.parametrize("bad", ["brotli", "", "producer", None, 3])
def test_codec_from_name_unknown_lists_valid_names(bad: Any) -> None:
    with pytest.raises(ValueError) as info:
        C.codec_from_name(bad)
    message = str(info.value)
    assert repr(bad) in message
    for name in ("none", "uncompressed", "gzip", "snappy", "lz4", "zstd"):
        assert name in message


def test_codec_name() -> None:
    assert [C.codec_name(i) for i in range(5)] == ["none", "gzip", "snappy", "lz4", "zstd"]
    with pytest.raises(ValueError, match="unknown compression codec id 5"):
        C.codec_name(5)


@pytest.mark.parametrize(
    "codec,level",
    [
        (C.GZIP, -1),
        (C.GZIP, 1),
        (C.GZIP, 9),
        (C.LZ4, 1),
        (C.LZ4, 9),
        (C.LZ4, 17),
        (C.ZSTD, -5),
        (C.ZSTD, 1),
        (C.ZSTD, 3),
        (C.ZSTD, 19),
    ],
)
def test_valid_levels_round_trip(codec: int, level: int) -> None:
    data = records(100_000)
    assert bytes(C.decompress(codec, C.compress(codec, data, level))) == data


@pytest.mark.parametrize(
    "codec,level",
    [
        (C.GZIP, 0),
        (C.GZIP, 10),
        (C.GZIP, -2),
        (C.LZ4, 0),
        (C.LZ4, 18),
        (C.ZSTD, 23),
        (C.ZSTD, -131073),
        (C.SNAPPY, 1),
        (C.NONE, 1),
    ],
)
def test_invalid_levels(codec: int, level: int) -> None:
    with pytest.raises(ValueError, match="level"):
        C.compress(codec, b"abc", level)


def test_level_type() -> None:
    with pytest.raises(TypeError):
        C.compress(C.ZSTD, b"abc", True)
    with pytest.raises(TypeError):
        C.compress(C.ZSTD, b"abc", wrong(3.0))


def test_levels_take_effect() -> None:
    data = records(256 * 1024)
    assert len(bytes(C.compress(C.LZ4, data, 17))) < len(bytes(C.compress(C.LZ4, data)))
    assert len(bytes(C.compress(C.GZIP, data, 9))) < len(bytes(C.compress(C.GZIP, data, 1)))
    assert len(bytes(C.compress(C.ZSTD, data, 19))) < len(bytes(C.compress(C.ZSTD, data, 1)))
    # Kafka's defaults: gzip -1 is zlib's 6, zstd 3, lz4 9 (the fast compressor).
    assert C.compress(C.GZIP, data) == C.compress(C.GZIP, data, 6)
    assert C.compress(C.ZSTD, data) == C.compress(C.ZSTD, data, 3)
    assert C.compress(C.LZ4, data) == C.compress(C.LZ4, data, 9)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="magic"):
        C.decompress(C.GZIP, b"x", magic=3)
    with pytest.raises(ValueError, match="max_size"):
        C.decompress(C.GZIP, b"x", max_size=-1)
    with pytest.raises(TypeError):
        C.decompress(C.GZIP, wrong(None))
    with pytest.raises(TypeError):
        C.compress(C.GZIP, wrong(None))
    with pytest.raises(ValueError, match="unknown compression codec id"):
        C.compress(5, b"x")
    with pytest.raises(ValueError, match="magic 2"):
        C.compress(C.ZSTD, b"x", magic=1)


# --------------------------------------------------------------------------------------
# Kafka's vectors (kafka-clients 3.9.1)


@pytest.mark.parametrize("name", ["v2_gzip", "v2_snappy", "v2_lz4", "v2_zstd"])
def test_v2_vectors(vectors: dict[str, bytes], name: str) -> None:
    batch = vectors[name]
    codec = batch[22] & 7
    assert NAMES[codec] == name[3:]
    records_region = vectors["v2_none_create_base0_ple0"][61:]
    assert bytes(C.decompress(codec, batch[61:])) == records_region


@pytest.mark.parametrize(
    "name,inner",
    [
        ("v1_gzip", "v1_none"),
        ("v1_snappy", "v1_none"),
        ("v1_lz4", "v1_none"),
        ("v0_lz4_brokenhc", "v0_none"),
    ],
)
def test_legacy_wrapper_vectors(vectors: dict[str, bytes], name: str, inner: str) -> None:
    ((offset, magic, attributes, key, value),) = legacy_messages(vectors[name])
    assert offset == 2 and key is None and value is not None
    out = bytes(C.decompress(attributes & 7, value, magic=magic))
    assert out == vectors[inner]
    assert [m[0] for m in legacy_messages(out)] == [0, 1, 2]


def test_lz4_header_checksum_rules(vectors: dict[str, bytes]) -> None:
    ((_, _, _, _, broken),) = legacy_messages(vectors["v0_lz4_brokenhc"])
    ((_, _, _, _, correct),) = legacy_messages(vectors["v1_lz4"])
    assert broken is not None and correct is not None
    assert broken[:7].hex() == "04224d1860401a" and correct[:7].hex() == "04224d18604082"
    for magic in (1, 2):
        err = raises_corrupt(C.LZ4, broken, magic=magic)
        assert "header checksum" in str(err) and err.position == 6
    # Kafka ignores HC for magic 0, so a correct one is accepted there as well.
    assert bytes(C.decompress(C.LZ4, correct, magic=0)) == vectors["v1_none"]


def test_segment_file_batches(fixtures_dir: Path) -> None:
    log = (fixtures_dir / "kafka-clients-generated" / "00000000000000000000.log").read_bytes()
    batches = list(v2_batches(log))
    plain = batches[0][61:]
    seen = []
    for batch in batches:
        codec = batch[22] & 7
        if codec:
            seen.append(codec)
            assert bytes(C.decompress(codec, batch[61:])) == plain
    assert seen == [C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD]


def test_our_lz4_frame_is_kafkas(vectors: dict[str, bytes]) -> None:
    # The three records do not compress, so both writers store one block: byte-identical.
    assert bytes(C.compress(C.LZ4, vectors["v2_none_create_base0_ple0"][61:])) == vectors["v2_lz4"][61:]
    ((_, _, _, _, broken),) = legacy_messages(vectors["v0_lz4_brokenhc"])
    ours = bytes(C.compress(C.LZ4, vectors["v0_none"], magic=0))
    assert broken is not None and ours[:7] == broken[:7]
    assert bytes(C.decompress(C.LZ4, ours, magic=0)) == vectors["v0_none"]


# --------------------------------------------------------------------------------------
# real broker-written logs


@pytest.mark.parametrize("kind", ["gzip", "snappy"])
def test_kafkalite_magic0_wrappers(fixtures_dir: Path, kind: str) -> None:
    path = fixtures_dir / "kafka-real" / "kafkalite" / f"hamlet-{kind}-0" / "00000000000000000000.log"
    inner_offsets = []
    first_value = None
    wrappers = 0
    for offset, magic, attributes, _, value in legacy_messages(path.read_bytes()):
        assert magic == 0 and attributes & 7 == C.codec_from_name(kind) and value is not None
        inner = list(legacy_messages(bytes(C.decompress(attributes & 7, value, magic=0))))
        assert inner[-1][0] == offset  # magic 0: wrapper offset = last inner (absolute) offset
        assert all(m[2] == 0 for m in inner)
        inner_offsets += [m[0] for m in inner]
        first_value = first_value or inner[0][4]
        wrappers += 1
    assert wrappers == 22
    assert inner_offsets == list(range(5382))
    assert first_value == b"The Tragedy of Hamlet, Prince of Denmark"


def test_real_v2_lz4_batches(fixtures_dir: Path) -> None:
    root = fixtures_dir / "kafka-real" / "kafka-connect-spooldir"
    n = 0
    for path in sorted(root.glob("*/00000000000000000000.log")):
        for batch in v2_batches(path.read_bytes()):
            assert batch[22] & 7 == C.LZ4
            (count,) = struct.unpack_from(">i", batch, 57)
            assert count_v2_records(bytes(C.decompress(C.LZ4, batch[61:]))) == count
            n += 1
    assert n == 12


# --------------------------------------------------------------------------------------
# round trips and written layouts

SIZES = [0, 1, 7, 16, 100, 4095, 32767, 32768, 32769, 65535, 65536, 65537, 200_003, 1 << 20, 2 << 20]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("kind", ["records", "random", "zeros"])
@pytest.mark.parametrize("codec", CODECS, ids=NAMES.get)
def test_round_trip(codec: int, kind: str, size: int) -> None:
    data = payload(kind, size)
    packed = C.compress(codec, data)
    memoryview(packed)
    out = C.decompress(codec, packed, max_size=size)
    assert memoryview(out).nbytes == size and bytes(out) == data
    if size:
        err = raises_corrupt(codec, packed, max_size=size - 1)
        assert f"max_size={size - 1}" in str(err) and err.limit == size - 1


@pytest.mark.parametrize("codec", CODECS, ids=NAMES.get)
def test_inputs_of_every_buffer_kind(codec: int, tmp_path: Path) -> None:
    data = records(70_000)
    packed = bytes(C.compress(codec, bytearray(data)))
    assert bytes(C.compress(codec, memoryview(data))) == packed
    path = tmp_path / "c"
    path.write_bytes(b"xx" + packed)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        view = memoryview(m)[2:]
        assert bytes(C.decompress(codec, view)) == data
        view.release()
    assert bytes(C.decompress(codec, bytearray(packed))) == data


def test_none_codec_passes_through() -> None:
    data = bytearray(b"abc")
    assert C.compress(C.NONE, data) is data
    assert C.decompress(C.NONE, data) is data
    raises_corrupt(C.NONE, data, max_size=2)


def _lz4_blocks(frame: bytes) -> tuple[list[tuple[int, bool]], int]:
    pos = 7
    blocks: list[tuple[int, bool]] = []
    while True:
        (word,) = struct.unpack_from("<I", frame, pos)
        pos += 4
        if word == 0:
            return blocks, pos
        size = word & 0x7FFFFFFF
        blocks.append((size, bool(word >> 31)))
        pos += size


@pytest.mark.parametrize("kind", ["records", "random"])
def test_lz4_written_layout(kind: str) -> None:
    data = payload(kind, 200_003)
    frame = bytes(C.compress(C.LZ4, data))
    assert frame[:7] == bytes.fromhex("04224d18604082")
    assert (xxhash.xxh32(frame[4:6]).intdigest() >> 8) & 0xFF == 0x82
    blocks, end = _lz4_blocks(frame)
    assert end == len(frame) and len(blocks) == 4
    assert all(stored == (kind == "random") for _, stored in blocks)
    # Independent decoders: lz4.frame and kafka-python's old-Kafka path for magic 0.
    assert lz4.frame.decompress(frame) == data
    frame0 = bytes(C.compress(C.LZ4, data, magic=0))
    assert frame0[6] == (xxhash.xxh32(frame0[:6]).intdigest() >> 8) & 0xFF == 0x1A
    assert frame0[7:] == frame[7:]
    assert kafka_codec.lz4_decode_old_kafka(frame0) == data


def test_snappy_written_layout() -> None:
    data = records(100_000)
    stream = bytes(C.compress(C.SNAPPY, data))
    assert stream[:16] == bytes.fromhex("82534e41505059000000000100000001")
    pos, chunks = 16, []
    while pos < len(stream):
        (n,) = struct.unpack_from(">i", stream, pos)
        chunks.append(bytes(cramjam.snappy.decompress_raw(stream[pos + 4 : pos + 4 + n])))
        pos += 4 + n
    assert [len(c) for c in chunks] == [32768, 32768, 32768, 100_000 - 3 * 32768]
    assert b"".join(chunks) == data
    assert C.compress(C.SNAPPY, b"") == stream[:16]
    assert C.decompress(C.SNAPPY, stream[:16]) == b""


def test_gzip_and_zstd_written_layout() -> None:
    data = records(100_000)
    gz = bytes(C.compress(C.GZIP, data))
    assert gz[:3] == b"\x1f\x8b\x08" and gzip.decompress(gz) == data
    zs = bytes(C.compress(C.ZSTD, data))
    params = zstandard.get_frame_parameters(zs)
    assert zs[:4] == bytes.fromhex("28b52ffd")
    assert params.content_size == len(data) and not params.has_checksum
    assert zstandard.ZstdDecompressor().decompress(zs) == data


# --------------------------------------------------------------------------------------
# kafka-python's codec functions both ways

INTEROP_SIZES = [1, 1000, 100_000, 1 << 20]


@pytest.mark.parametrize("size", INTEROP_SIZES)
def test_kafka_python_decodes_ours(size: int) -> None:
    data = records(size)
    assert kafka_codec.gzip_decode(bytes(C.compress(C.GZIP, data))) == data
    assert kafka_codec.snappy_decode(bytes(C.compress(C.SNAPPY, data))) == data
    assert kafka_codec.lz4_decode(bytes(C.compress(C.LZ4, data))) == data
    assert kafka_codec.lz4_decode_old_kafka(bytes(C.compress(C.LZ4, data, magic=0))) == data
    assert kafka_codec.zstd_decode(bytes(C.compress(C.ZSTD, data))) == data


@pytest.mark.parametrize("size", [0] + INTEROP_SIZES)
def test_we_decode_kafka_python(size: int) -> None:
    data = records(size)
    assert bytes(C.decompress(C.GZIP, kafka_codec.gzip_encode(data))) == data
    assert bytes(C.decompress(C.SNAPPY, kafka_codec.snappy_encode(data))) == data
    raw = kafka_codec.snappy_encode(data, xerial_compatible=False)
    assert bytes(C.decompress(C.SNAPPY, raw)) == data
    assert bytes(C.decompress(C.LZ4, kafka_codec.lz4_encode(data))) == data
    old = kafka_codec.lz4_encode_old_kafka(data)
    assert bytes(C.decompress(C.LZ4, old, magic=0)) == data
    assert bytes(C.decompress(C.ZSTD, kafka_codec.zstd_encode(data))) == data


# --------------------------------------------------------------------------------------
# what other writers produce


def test_gzip_members_and_trailing_bytes() -> None:
    a, b = records(50_000, seed=1), records(30_000, seed=2)
    two = gzip.compress(a) + gzip.compress(b)
    assert bytes(C.decompress(C.GZIP, two)) == a + b
    assert bytes(C.decompress(C.GZIP, gzip.compress(b"") + gzip.compress(a))) == a
    # GZIPInputStream ignores what follows a member unless another member starts there.
    assert bytes(C.decompress(C.GZIP, gzip.compress(a) + b"garbage!")) == a
    assert bytes(C.decompress(C.GZIP, gzip.compress(a) + bytes(8))) == a
    raises_corrupt(C.GZIP, gzip.compress(a) + b"\x1f\x8b\x08garbage")
    raises_corrupt(C.GZIP, two, max_size=len(a) + len(b) - 1)


def test_gzip_many_members_is_linear() -> None:
    members = [gzip.compress(b"%d," % i) for i in range(20_000)]
    out = bytes(C.decompress(C.GZIP, b"".join(members)))
    assert out == b"".join(b"%d," % i for i in range(20_000))


def test_gzip_malformed() -> None:
    good = gzip.compress(records(10_000))
    err = raises_corrupt(C.GZIP, good[:-1])
    assert "truncated" in str(err)
    bad_crc = bytearray(good)
    bad_crc[-8] ^= 1
    raises_corrupt(C.GZIP, bytes(bad_crc))
    raises_corrupt(C.GZIP, b"\x78\x9c" + good[10:])
    raises_corrupt(C.GZIP, b"")


def test_snappy_other_writers() -> None:
    data = records(100_000)
    assert bytes(C.decompress(C.SNAPPY, bytes(cramjam.snappy.compress_raw(data)))) == data
    # Concatenated xerial streams (snappy-java reads them as one).
    a, b = records(40_000, seed=3), records(5_000, seed=4)
    both = bytes(C.compress(C.SNAPPY, a)) + bytes(C.compress(C.SNAPPY, b))
    assert bytes(C.decompress(C.SNAPPY, both)) == a + b
    # Version fields written little-endian by some producers are not checked.
    stream = bytearray(C.compress(C.SNAPPY, a))
    stream[8:16] = bytes.fromhex("0100000001000000")
    assert bytes(C.decompress(C.SNAPPY, bytes(stream))) == a


def test_snappy_malformed() -> None:
    stream = bytes(C.compress(C.SNAPPY, records(70_000)))
    header = stream[:16]
    err = raises_corrupt(C.SNAPPY, header[:12])
    assert "header" in str(err)
    raises_corrupt(C.SNAPPY, header + b"\x00\x00\x00\x00")
    raises_corrupt(C.SNAPPY, header + b"\xff\xff\xff\xff")
    raises_corrupt(C.SNAPPY, header + b"\x00\x00")
    raises_corrupt(C.SNAPPY, stream[:-1])
    # A block that declares more than snappy can encode in it is refused before decoding.
    err = raises_corrupt(C.SNAPPY, header + b"\x00\x00\x00\x05" + b"\xff\xff\xff\xff\x0f")
    assert "declares" in str(err)
    raises_corrupt(C.SNAPPY, b"\x05\x00")
    raises_corrupt(C.SNAPPY, b"")


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"block_checksum": True},
        {"content_checksum": True},
        {"store_size": True, "content_checksum": True, "block_checksum": True},
        {"block_size": lz4.frame.BLOCKSIZE_MAX256KB},
        {"block_size": lz4.frame.BLOCKSIZE_MAX1MB, "compression_level": 9},
        {"block_size": lz4.frame.BLOCKSIZE_MAX4MB},
    ],
)
def test_lz4_frames_from_lz4_frame(options: dict[str, Any]) -> None:
    data = records(3 << 20)
    frame = lz4.frame.compress(data, block_linked=False, **options)
    assert bytes(C.decompress(C.LZ4, frame)) == data


def test_lz4_malformed() -> None:
    data = records(150_000)
    linked = lz4.frame.compress(data, block_linked=True)
    assert "dependent" in str(raises_corrupt(C.LZ4, linked))
    checked = bytearray(lz4.frame.compress(data, block_linked=False, block_checksum=True, content_checksum=True))
    block_ck = bytearray(checked)
    block_ck[20] ^= 0x40
    assert "block checksum" in str(raises_corrupt(C.LZ4, bytes(block_ck)))
    content_ck = bytearray(checked)
    content_ck[-1] ^= 1
    assert "content checksum" in str(raises_corrupt(C.LZ4, bytes(content_ck)))
    frame = bytes(C.compress(C.LZ4, data))
    assert "end mark" in str(raises_corrupt(C.LZ4, frame[:-4]))
    raises_corrupt(C.LZ4, frame[:-5])
    raises_corrupt(C.LZ4, frame[:6])
    raises_corrupt(C.LZ4, b"\x05" + frame[1:])
    bad_bd = bytearray(frame)
    bad_bd[5] = 0x30
    raises_corrupt(C.LZ4, bytes(bad_bd), magic=0)
    # Lz4BlockInputStream stops at the end mark; whatever follows is never read.
    assert bytes(C.decompress(C.LZ4, frame + b"trailing")) == data


def _zstd_streamed(data: bytes, **kw: Any) -> bytes:
    """A frame without content size, as zstd-jni's streaming writer produces."""
    cobj = zstandard.ZstdCompressor(**kw).compressobj()
    return cobj.compress(data) + cobj.flush()


def test_zstd_frames_of_other_writers() -> None:
    a, b = records(300_000, seed=5), records(20_000, seed=6)
    streamed = _zstd_streamed(a)
    assert zstandard.get_frame_parameters(streamed).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert bytes(C.decompress(C.ZSTD, streamed)) == a
    checked = _zstd_streamed(a, write_checksum=True, level=7)
    assert bytes(C.decompress(C.ZSTD, checked)) == a
    two = streamed + zstandard.ZstdCompressor().compress(b)
    assert bytes(C.decompress(C.ZSTD, two)) == a + b
    skippable = struct.pack("<II", 0x184D2A50, 3) + b"abc"
    assert bytes(C.decompress(C.ZSTD, skippable + streamed + skippable)) == a
    assert bytes(C.decompress(C.ZSTD, zstandard.ZstdCompressor().compress(b""))) == b""
    # Bound above max_size but the real size within it: the bounded streaming path.
    assert bytes(C.decompress(C.ZSTD, _zstd_streamed(b), max_size=len(b))) == b
    raises_corrupt(C.ZSTD, _zstd_streamed(b), max_size=len(b) - 1)


def test_zstd_malformed() -> None:
    data = records(200_000)
    frame = _zstd_streamed(data, write_checksum=True)
    bad_ck = bytearray(frame)
    bad_ck[-1] ^= 1
    raises_corrupt(C.ZSTD, bytes(bad_ck))
    assert "truncated" in str(raises_corrupt(C.ZSTD, frame[:-1]))
    assert "not a zstd frame" in str(raises_corrupt(C.ZSTD, frame + b"junk"))
    raises_corrupt(C.ZSTD, struct.pack("<II", 0x184D2A50, 0))
    raises_corrupt(C.ZSTD, b"")
    for magic in (0, 1):
        assert "magic" in str(raises_corrupt(C.ZSTD, frame, magic=magic))
    # The same frame claiming dictionary id 7 (FHD dictionary flag 1, one id byte).
    plain = _zstd_streamed(data)
    assert plain[4] & 0x23 == 0  # no dictionary id, not single-segment: window byte follows
    dict_frame = plain[:4] + bytes([plain[4] | 1]) + plain[5:6] + b"\x07" + plain[6:]
    assert "dictionary 7" in str(raises_corrupt(C.ZSTD, dict_frame))


@pytest.mark.parametrize("codec", [5, 6, 7, -1, 255])
def test_unknown_codec_ids_are_corrupt(codec: int) -> None:
    assert "unknown compression codec id" in str(raises_corrupt(codec, b"abc"))


@pytest.mark.parametrize("codec", CODECS, ids=NAMES.get)
def test_empty_input_is_corrupt(codec: int) -> None:
    assert raises_corrupt(codec, b"").position == 0


# --------------------------------------------------------------------------------------
# decompression bombs


@pytest.mark.parametrize("codec", CODECS, ids=NAMES.get)
def test_bomb_is_refused_early(codec: int) -> None:
    data = bytes(32 << 20)
    packed = bytes(C.compress(codec, data))
    assert len(packed) < len(data) // 20
    err = raises_corrupt(codec, packed, max_size=1 << 20)
    assert "max_size=1048576" in str(err)
    assert bytes(C.decompress(codec, packed, max_size=len(data))) == data


def test_zstd_bomb_many_frames() -> None:
    frame = _zstd_streamed(bytes(4 << 20))
    raises_corrupt(C.ZSTD, frame * 8, max_size=30 << 20)
    assert len(memoryview(C.decompress(C.ZSTD, frame * 8, max_size=32 << 20))) == 32 << 20


def test_zstd_threads() -> None:
    datas = [records(50_000 + i * 1000, seed=i) for i in range(16)]

    def work(data: bytes) -> tuple[bool, int]:
        """Whether every level's round trip gave ``data`` back, and the thread that did it."""
        ok = all(bytes(C.decompress(C.ZSTD, C.compress(C.ZSTD, data, level))) == data for level in (1, 3, 5))
        return ok, threading.get_ident()

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(work, datas * 4))
    assert [ok for ok, _ in results] == [True] * len(datas) * 4
    threads = {ident for _, ident in results}
    # The round trips ran on the pool's threads (more than one of them), not on the test's.
    assert threading.get_ident() not in threads and len(threads) > 1, threads


# --------------------------------------------------------------------------------------
# fuzz: only the corrupt-record error, never a crash, a hang or a library exception


def _samples() -> dict[int, list[bytes]]:
    a, b = records(3000, seed=7), bytes(5000) + os.urandom(200)
    lz4_checked = lz4.frame.compress(a, block_linked=False, block_checksum=True, content_checksum=True, store_size=True)
    return {
        C.GZIP: [bytes(C.compress(C.GZIP, a)), gzip.compress(a) + gzip.compress(b)],
        C.SNAPPY: [bytes(C.compress(C.SNAPPY, a + b)), bytes(cramjam.snappy.compress_raw(a))],
        C.LZ4: [bytes(C.compress(C.LZ4, a + b)), lz4_checked, bytes(C.compress(C.LZ4, b))],
        C.ZSTD: [
            bytes(C.compress(C.ZSTD, a)),
            _zstd_streamed(a, write_checksum=True) + bytes(C.compress(C.ZSTD, b)),
            struct.pack("<II", 0x184D2A50, 2) + b"zz" + _zstd_streamed(b),
        ],
    }


SAMPLES = _samples()


def _check(codec: int, data: bytes, magic: int, max_size: int | None) -> None:
    try:
        out = C.decompress(codec, data, magic=magic, max_size=max_size)
    except CorruptRecordError:
        return
    n = memoryview(out).nbytes
    assert max_size is None or n <= max_size


# SEGLOG_FUZZ_EXAMPLES raises the example count for a long local run.
FUZZ = settings(
    max_examples=int(os.environ.get("SEGLOG_FUZZ_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@FUZZ
@given(
    codec=st.integers(0, 7),
    data=st.binary(max_size=600),
    magic=st.integers(0, 2),
    max_size=st.none() | st.integers(0, 1 << 16),
)
def test_fuzz_random_input(codec: int, data: bytes, magic: int, max_size: int | None) -> None:
    _check(codec, data, magic, max_size)


@st.composite
def mutated(draw: st.DrawFn) -> tuple[int, bytes]:
    codec = draw(st.sampled_from(CODECS))
    buf = bytearray(draw(st.sampled_from(SAMPLES[codec])))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "cut", "insert", "drop", "dup"]))
        i = draw(st.integers(0, max(len(buf) - 1, 0)))
        if op == "flip" and buf:
            buf[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and buf:
            buf[i] = draw(st.sampled_from([0, 1, 0x7F, 0x80, 0xFF]))
        elif op == "cut":
            del buf[i:]
        elif op == "insert":
            buf[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif op == "drop":
            del buf[i : i + draw(st.integers(1, 16))]
        elif op == "dup":
            buf[i:i] = buf[i : i + draw(st.integers(1, 64))]
    return codec, bytes(buf)


@FUZZ
@given(case=mutated(), magic=st.integers(0, 2), max_size=st.none() | st.integers(0, 1 << 14))
def test_fuzz_mutated_streams(case: tuple[int, bytes], magic: int, max_size: int | None) -> None:
    codec, data = case
    _check(codec, data, magic, max_size)


@FUZZ
@given(data=st.binary(max_size=300), seed=st.integers(0, 2**32 - 1))
def test_xxh32_matches_xxhash(data: bytes, seed: int) -> None:
    assert C.xxh32(data, seed) == xxhash.xxh32(data, seed=seed).intdigest()
