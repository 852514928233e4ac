"""Robustness of every record decoder entry point against damaged input.

For any bytes, ``decode_records``, ``iter_records``, ``decode_columns`` and ``batch_headers``
(CRC verification on and off, ``allow_truncated`` on and off) either return or raise
``seglog.errors.CorruptRecordError`` naming a position inside the buffer: never another
exception, never a crash, never a hang (a watchdog kills the run after WATCHDOG_S).

Beyond "does not crash", every input is checked against oracles:
* the entry points agree with each other (same outcome, same records, same columns);
* a plain-Python model of Kafka's readers (tests/faults/record_model.py) gives the same outcome and
  records for uncompressed input;
* with CRC verification on, every single-bit flip inside a checksummed region is detected;
* a torn buffer raises, and with ``allow_truncated`` yields exactly the records of the whole
  batches before the tear.

Inputs: random bytes, plausible headers over random bodies, the Kafka-generated vectors (v0, v1,
v2, control batches; compressed ones when the codec module is importable), batches we encode,
and their truncations, bit flips, byte mutations and targeted rewrites of lengths, counts and
varints (with checksums recomputed so the structure checks, not the CRC, must catch them).
"""

from __future__ import annotations

import faulthandler
import importlib.util
import random
import struct
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.errors import CorruptRecordError
from seglog.storage.records import (
    batch_headers,
    decode_columns,
    decode_records,
    encode_batch,
    encode_control_batch,
    first_at_or_after,
    iter_records,
)
from tests.faults import record_model as model
from tests.logkit import zigzag_bytes
from tests.vectors import segment_file, vector, vector_names

WATCHDOG_S = 120
HAVE_CODECS = importlib.util.find_spec("seglog._native.compression") is not None
COMPRESSED_NAMES = ("gzip", "snappy", "lz4", "zstd")

FAST = settings(
    max_examples=150,
    deadline=None,
    derandomize=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
SLOW = settings(FAST, max_examples=4000)


@pytest.fixture(autouse=True)
def watchdog() -> Iterator[None]:
    """A decoder stuck in native code holds the GIL: only faulthandler's thread can end it."""
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


# ---------------------------------------------------------------------------------------------
# Corpus of valid inputs
# ---------------------------------------------------------------------------------------------


def _is_compressed_vector(name: str) -> bool:
    return any(c in name for c in COMPRESSED_NAMES)


def rich_batches() -> list[bytes]:
    """Batches of ours that exercise every field: nulls, empties, headers, LogAppendTime, pids."""
    return [
        encode_batch(
            [b"v0", None, b"", b"x" * 200],
            keys=[None, b"k", b"", b"\xff" * 70],
            timestamps=[5, -7, 2**62, 0],
            headers=[[], [("h", None), ("ключ", b"")], None, [("", b"\x00" * 3)]],
            base_offset=1000,
            partition_leader_epoch=3,
            producer_id=77,
            producer_epoch=2,
            base_sequence=2**31 - 2,
            is_transactional=True,
            allow_negative_timestamps=True,
        ),
        encode_batch([b"a"], log_append_time=123, base_offset=2**40),
        encode_control_batch(1, base_offset=1004, timestamp=9, producer_id=77, producer_epoch=2, coordinator_epoch=5),
    ]


@cache
def corpus(compressed: bool = False) -> dict[str, bytes]:
    """Named valid buffers; compressed ones only when asked for (and importable). Built on first
    use, not at import, so a broken encoder fails the tests that need it, not collection."""
    out = {n: vector(n) for n in vector_names() if _is_compressed_vector(n) == compressed}
    if compressed:
        out["segment"] = segment_file().read_bytes()
    else:
        for i, b in enumerate(rich_batches()):
            out[f"ours{i}"] = b
        out["mixed"] = b"".join(
            [
                vector("v0_none"),
                vector("v1_none"),
                *rich_batches(),
                vector("v2_none_txn_base200"),
                vector("v2_commit_marker_off203"),
            ]
        )
    return out


class _Lazy:
    """name -> buffer, each built on first use (a broken encoder fails only the cases using it)."""

    def __getitem__(self, name: str) -> bytes:
        if name.startswith("ours") or name == "mixed":
            return corpus()[name]
        return vector(name)

    def values(self) -> list[bytes]:
        return list(corpus().values())


UNCOMPRESSED = _Lazy()
NAMES = sorted([n for n in vector_names() if not _is_compressed_vector(n)] + [f"ours{i}" for i in range(3)] + ["mixed"])


def need_codecs(name: str) -> None:
    if not HAVE_CODECS:
        pytest.skip("seglog._native.compression is not built yet")


# ---------------------------------------------------------------------------------------------
# The harness
# ---------------------------------------------------------------------------------------------

CORRUPT, OK, SKIP = "corrupt", "ok", "skip"  # skip: cannot be judged (no codec module, known bug)


def attempt(buf: bytes, fn: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return OK, fn()
    except CorruptRecordError as exc:
        assert isinstance(exc.position, int) and 0 <= exc.position < max(len(buf), 1), (
            f"error position {exc.position!r} outside the {len(buf)}-byte buffer: {exc}"
        )
        assert str(exc), "empty error message"
        return CORRUPT, exc
    except ImportError as exc:  # compressed input before the codec module exists
        if HAVE_CODECS or "compression" not in str(exc):
            raise
        return SKIP, None


def rec_tuple(r: Any) -> tuple:
    return (
        r.offset,
        r.timestamp,
        r.timestamp_type,
        r.key,
        r.value,
        tuple(r.headers),
        r.leader_epoch,
        r.producer_id,
        r.producer_epoch,
        r.sequence,
        r.is_transactional,
        r.is_control,
        r.magic,
    )


def _bitmap_ok(bitmap: Any, i: int) -> bool:
    return bitmap is None or bool(bitmap[i >> 3] >> (i & 7) & 1)


def _binary(offsets: Any, data: Any, validity: Any, n: int) -> list[bytes | None]:
    offs = memoryview(offsets).cast("B").cast("i").tolist()
    raw = bytes(memoryview(data).cast("B"))
    bits = None if validity is None else bytes(memoryview(validity).cast("B"))
    assert len(offs) == n + 1 and offs[0] == 0 and offs[-1] == len(raw)
    assert all(a <= b for a, b in zip(offs, offs[1:]))
    return [raw[offs[i] : offs[i + 1]] if _bitmap_ok(bits, i) else None for i in range(n)]


def columns_tuples(c: Any) -> list[tuple]:
    """Read the Arrow-layout buffers directly (independently of pyarrow) into record tuples."""
    n = c.count
    offsets = memoryview(c.offsets).cast("B").cast("q").tolist()
    ts = memoryview(c.timestamps).cast("B").cast("q").tolist()
    tts = memoryview(c.timestamp_types).cast("B").cast("b").tolist()
    epochs = memoryview(c.leader_epochs).cast("B").cast("i").tolist()
    keys = _binary(c.key_offsets, c.key_data, c.key_validity, n)
    values = _binary(c.value_offsets, c.value_data, c.value_validity, n)
    hoffs = memoryview(c.header_offsets).cast("B").cast("i").tolist()
    hkeys = _binary(c.header_key_offsets, c.header_key_data, None, c.header_count)
    hvals = _binary(c.header_value_offsets, c.header_value_data, c.header_value_validity, c.header_count)
    assert len(offsets) == len(ts) == len(tts) == len(epochs) == n
    assert len(hoffs) == n + 1 and hoffs[-1] == c.header_count
    out = []
    for i in range(n):
        hdrs = tuple(
            (hkeys[j].decode("utf-8", "replace"), hvals[j])  # type: ignore[union-attr]
            for j in range(hoffs[i], hoffs[i + 1])
        )
        out.append((offsets[i], ts[i], tts[i], keys[i], values[i], hdrs, epochs[i]))
    return out


def check(buf: bytes, *, verify_crc: bool, use_model: bool = True) -> tuple[str, list[tuple] | None]:
    """Run every entry point on ``buf`` and check them against each other and the model."""
    kw: dict[str, Any] = {"verify_crc": verify_crc, "include_control": True}
    rec_o, recs = attempt(buf, lambda: [rec_tuple(r) for r in decode_records(buf, **kw)])
    it_o, it = attempt(buf, lambda: [rec_tuple(r) for r in iter_records(buf, **kw)])
    col_o, cols = attempt(buf, lambda: decode_columns(buf, **kw))
    slim_o, slim = attempt(buf, lambda: decode_columns(buf, keys=False, headers=False, **kw))
    view_o, viewed = attempt(buf, lambda: decode_columns(buf, views=True, **kw).to_arrow())
    hdr_o, _ = attempt(buf, lambda: batch_headers(buf, verify_crc=verify_crc))
    tr_o, tr = attempt(buf, lambda: [rec_tuple(r) for r in decode_records(buf, allow_truncated=True, **kw)])
    hidden_o, hidden = attempt(buf, lambda: [rec_tuple(r) for r in decode_records(buf, verify_crc=verify_crc)])
    if SKIP in (rec_o, it_o, col_o, slim_o, tr_o, hidden_o, view_o):
        return SKIP, None

    assert rec_o == it_o == col_o == slim_o == view_o, (rec_o, it_o, col_o, slim_o, view_o)
    if hdr_o == CORRUPT:
        assert rec_o == CORRUPT, "batch_headers found corruption that decode_records accepted"
    if rec_o == OK:
        assert it == recs
        assert tr_o == OK and tr == recs
        assert columns_tuples(cols) == [r[:7] for r in recs]
        assert slim.count == len(recs) and slim.key_offsets is None and slim.header_offsets is None
        assert hidden_o == OK and hidden == [r for r in recs if not r[11]]
        table = cols.to_arrow()
        table.validate()
        viewed.validate()
        assert table.num_rows == len(recs)
        assert viewed.column("key").to_pylist() == table.column("key").to_pylist()
        assert viewed.column("value").to_pylist() == table.column("value").to_pylist()
        if all(_utf8(h[0]) for r in recs for h in r[5]):
            table.validate(full=True)
            viewed.validate(full=True)
    # The timestamp search reads uncompressed batches itself and stops at its answer: on a
    # buffer that decodes it must agree with the decoder; on any other it may answer (what it
    # read was sound) or report corruption, never anything else.
    stamps = sorted({r[1] for r in recs if not r[11]}) if rec_o == OK else [0, 2**40]
    for target in {stamps[0], stamps[len(stamps) // 2], stamps[-1] + 1} if stamps else {0}:
        ts_o, found = attempt(buf, lambda: first_at_or_after(buf, target, verify_crc=verify_crc))
        if rec_o == OK:
            want = next(((r[0], r[1]) for r in recs if not r[11] and r[1] >= target), None)
            assert ts_o == OK and found == want, (target, found, want)
    if use_model:
        try:
            expected = model.decode(buf, verify_crc=verify_crc)
        except model.NeedsCodec:
            pass
        except model.ModelCorrupt as exc:
            assert rec_o == CORRUPT, f"the model finds this corrupt ({exc}); ours returned {recs}"
        else:
            assert rec_o == OK, f"the model decodes this; ours raised {recs}"
            assert recs == expected
    return rec_o, recs


def _utf8(key: str) -> bool:
    return "\ufffd" not in key


def check_both(buf: bytes) -> None:
    for verify_crc in (True, False):
        check(buf, verify_crc=verify_crc)


# ---------------------------------------------------------------------------------------------
# The corpus itself is valid
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_corpus_decodes_and_matches_the_model(name: str) -> None:
    buf = UNCOMPRESSED[name]
    outcome, recs = check(buf, verify_crc=True)
    assert outcome == OK and recs


# ---------------------------------------------------------------------------------------------
# Random bytes and plausible headers over random bodies
# ---------------------------------------------------------------------------------------------


@FAST
@given(st.binary(max_size=600))
def test_random_bytes(buf: bytes) -> None:
    check_both(buf)


@st.composite
def plausible_batches(draw: st.DrawFn) -> bytes:
    """A v2 or legacy header with sane-looking fields over a random or semi-structured body,
    checksums right, so decoding gets past the CRC into the record parser."""
    magic = draw(st.sampled_from([2, 2, 2, 1, 0]))
    body = draw(
        st.one_of(
            st.binary(max_size=300),
            # record-shaped: small varints, short keys/values
            st.lists(
                st.one_of(
                    st.integers(0, 0x7F).map(lambda b: bytes([b])),
                    st.integers(-3, 40).map(zigzag_bytes),
                    st.binary(max_size=8),
                ),
                max_size=40,
            ).map(b"".join),
        )
    )
    if magic == 2:
        attrs = draw(st.one_of(st.sampled_from([0, 0x08, 0x10, 0x20, 0x30]), st.integers(0, 0xFFFF)))
        count = draw(st.one_of(st.integers(0, 6), st.integers(-(2**31), 2**31 - 1)))
        head = struct.pack(
            ">qiibIhiqqqhii",
            draw(st.integers(0, 2**62)),
            49 + len(body),
            draw(st.integers(-1, 5)),
            2,
            0,
            attrs - (0x10000 if attrs > 0x7FFF else 0),
            draw(st.one_of(st.integers(0, 6), st.integers(-(2**31), 2**31 - 1))),
            draw(st.integers(-(2**63), 2**63 - 1)),
            draw(st.integers(-(2**63), 2**63 - 1)),
            -1,
            -1,
            draw(st.sampled_from([-1, 0, 2**31 - 1])),
            count,
        )
        buf = bytearray(head + body)
    else:
        attrs = draw(st.one_of(st.just(0), st.integers(0, 255)))
        ts = struct.pack(">q", draw(st.integers(-(2**63), 2**63 - 1))) if magic == 1 else b""
        rest = ts + body
        buf = bytearray(
            struct.pack(
                ">qiIbb", draw(st.integers(0, 2**62)), 6 + len(rest), 0, magic, attrs - (256 if attrs > 127 else 0)
            )
            + rest
        )
    model.reseal(buf)
    return bytes(buf)


@FAST
@given(st.lists(plausible_batches(), min_size=1, max_size=3).map(b"".join))
def test_plausible_headers_over_random_bodies(buf: bytes) -> None:
    check_both(buf)


# ---------------------------------------------------------------------------------------------
# Truncation at every byte
# ---------------------------------------------------------------------------------------------


def batch_ends(buf: bytes) -> list[int]:
    ends, pos = [], 0
    while pos < len(buf):
        pos += struct.unpack_from(">i", buf, pos + 8)[0] + 12
        ends.append(pos)
    return ends


@pytest.mark.parametrize("name", NAMES)
def test_every_truncation(name: str) -> None:
    buf = UNCOMPRESSED[name]
    ends = [0] + batch_ends(buf)
    per_batch = [decode_records(buf[a:b], include_control=True) for a, b in zip(ends, ends[1:])]
    for cut in range(len(buf)):
        torn = buf[:cut]
        whole = [e for e in ends if e <= cut]
        prefix = [rec_tuple(r) for recs in per_batch[: len(whole) - 1] for r in recs]
        outcome, recs = check(torn, verify_crc=True)
        assert outcome == (OK if cut in ends else CORRUPT), cut
        for fn in (decode_records, lambda b, **k: list(iter_records(b, **k))):
            got = [rec_tuple(r) for r in fn(torn, allow_truncated=True, include_control=True)]
            assert got == prefix, f"cut at {cut}: not exactly the records of the whole batches"
        assert [h.position + h.size for h in batch_headers(torn, allow_truncated=True)] == whole[1:]
        assert len(decode_columns(torn, allow_truncated=True, include_control=True)) == len(prefix)


# ---------------------------------------------------------------------------------------------
# Every single-bit flip
# ---------------------------------------------------------------------------------------------


def unchecked_bytes(buf: bytes) -> set[int]:
    """Bytes outside every checksum: a v2 batch's baseOffset and partitionLeaderEpoch, a legacy
    message's offset."""
    out: set[int] = set()
    pos = 0
    for end in batch_ends(buf):
        out.update(range(pos, pos + 8))
        if buf[pos + 16] == 2:
            out.update(range(pos + 12, pos + 16))
        pos = end
    return out


@pytest.mark.parametrize("name", NAMES)
def test_every_bit_flip(name: str) -> None:
    buf = UNCOMPRESSED[name]
    free = unchecked_bytes(buf)
    for i in range(len(buf)):
        for bit in range(8):
            flipped = bytearray(buf)
            flipped[i] ^= 1 << bit
            flipped_b = bytes(flipped)
            outcome, _ = check(flipped_b, verify_crc=True)
            if i not in free:
                assert outcome == CORRUPT, f"flip of bit {bit} of byte {i} went undetected"
            if i % 3 == 0:  # CRC off is the expensive half: a third of the bytes is plenty
                check(flipped_b, verify_crc=False)


# ---------------------------------------------------------------------------------------------
# Byte mutations, with and without resealed checksums
# ---------------------------------------------------------------------------------------------

ALL_VALID = st.one_of(
    st.sampled_from(NAMES).map(UNCOMPRESSED.__getitem__),
    st.builds(
        lambda vals, seed: encode_batch(
            vals,
            keys=[v[:3] if v else None for v in vals],
            headers=[[("k", v)] if v and len(v) % 2 else None for v in vals],
            timestamps=random.Random(seed).randrange(-(2**40), 2**40),
            base_offset=seed,
            allow_negative_timestamps=True,
        ),
        st.lists(st.one_of(st.none(), st.binary(max_size=70)), min_size=1, max_size=6),
        st.integers(0, 2**40),
    ),
)


@st.composite
def mutated(draw: st.DrawFn, reseal: bool) -> bytes:
    buf = bytearray(draw(ALL_VALID))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["set", "set", "insert", "delete", "dup", "swap32"]))
        i = draw(st.integers(0, max(len(buf) - 1, 0)))
        if op == "set" and buf:
            buf[i] = draw(st.one_of(st.sampled_from([0, 1, 0x7F, 0x80, 0xFF]), st.integers(0, 255)))
        elif op == "insert":
            buf[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del buf[i : i + draw(st.integers(1, 8))]
        elif op == "dup":
            j = draw(st.integers(i, min(len(buf), i + 40)))
            buf[j:j] = buf[i:j]
        elif op == "swap32" and len(buf) >= i + 4:
            buf[i : i + 4] = struct.pack(
                ">i", draw(st.sampled_from([0, 1, -1, -2, 13, 14, 48, 49, 2**31 - 1, -(2**31)]))
            )
    if reseal:
        model.reseal(buf)
    return bytes(buf)


@FAST
@given(mutated(reseal=False))
def test_byte_mutations(buf: bytes) -> None:
    check_both(buf)


@FAST
@given(mutated(reseal=True))
def test_byte_mutations_with_valid_checksums(buf: bytes) -> None:
    check_both(buf)


# ---------------------------------------------------------------------------------------------
# Targeted rewrites: counts, batch lengths, record varints (checksums recomputed)
# ---------------------------------------------------------------------------------------------

INTERESTING_32 = [-(2**31), -(2**31) + 1, -2, -1, 0, 1, 2, 3, 6, 7, 63, 64, 127, 128, 2**31 - 2, 2**31 - 1]


def fix_v2_length(buf: bytearray, start: int, delta: int) -> None:
    (length,) = struct.unpack_from(">i", buf, start + 8)
    struct.pack_into(">i", buf, start + 8, length + delta)


@st.composite
def varint_rewrites(draw: st.DrawFn) -> tuple[bytes, str, int]:
    name = draw(
        st.sampled_from(
            ["ours0", "ours1", "v2_none_create_base0_ple0", "v2_none_logappend", "v2_empty_key_empty_value"]
        )
    )
    buf = UNCOMPRESSED[name]
    spans = model.v2_spans(buf).varints
    what, s, e = draw(st.sampled_from(spans))
    old, _ = model.read_zigzag(buf, s, e, 10)
    kind = draw(st.sampled_from(["value", "value", "padded", "overlong", "truncated"]))
    limit = 10 if what == "timestamp_delta" else 5  # longest encoding Kafka's reader accepts
    if kind == "value" or (kind == "padded" and e - s >= limit):
        new = zigzag_bytes(
            draw(
                st.one_of(
                    st.sampled_from(INTERESTING_32),
                    st.integers(old - 3, old + 3),
                    st.integers(-(2**63), 2**63 - 1) if what == "timestamp_delta" else st.nothing(),
                )
            )
        )
    elif kind == "padded" and e - s < limit:  # a non-canonical but valid encoding of the value
        new = zigzag_bytes(old, pad_to=draw(st.integers(e - s + 1, limit)))
    elif kind == "overlong":
        new = b"\xff" * draw(st.integers(5, 12)) + b"\x01"
    else:
        new = b"\x80" * (e - s)
    out = bytearray(buf[:s] + new + buf[e:])
    fix_v2_length(out, 0, len(new) - (e - s))
    if draw(st.booleans()):
        model.reseal(out)
    return bytes(out), f"{what}:{kind}", old


@FAST
@given(varint_rewrites())
def test_rewritten_varints(case: tuple[bytes, str, int]) -> None:
    buf, _what, _old = case
    check_both(buf)


@FAST
@given(
    name=st.sampled_from(["ours0", "ours1", "v2_none_txn_base200", "v2_commit_marker_off203"]),
    field=st.sampled_from([(8, ">i"), (23, ">i"), (57, ">i")]),
    value=st.one_of(st.sampled_from(INTERESTING_32), st.integers(-(2**31), 2**31 - 1)),
    reseal=st.booleans(),
)
def test_rewritten_header_fields(name: str, field: tuple[int, str], value: int, reseal: bool) -> None:
    """batchLength (8), lastOffsetDelta (23) and recordsCount (57) set to edge values."""
    buf = bytearray(UNCOMPRESSED[name])
    struct.pack_into(field[1], buf, field[0], value)
    if reseal:
        model.reseal(buf)
    check_both(bytes(buf))


@pytest.mark.parametrize("delta", [-1, 1, 2, -(2**31) + 5])
def test_record_count_off_by_some_is_corrupt(delta: int) -> None:
    """A count that disagrees with the records (CRC right) is corrupt, as in Kafka; 0 means none."""
    buf = bytearray(UNCOMPRESSED["ours0"])
    (count,) = struct.unpack_from(">i", buf, 57)
    struct.pack_into(">i", buf, 57, count + delta)
    model.reseal(buf)
    with pytest.raises(CorruptRecordError):
        decode_records(bytes(buf))
    with pytest.raises(CorruptRecordError):
        decode_columns(bytes(buf))
    with pytest.raises(CorruptRecordError):
        list(iter_records(bytes(buf)))


def test_legacy_length_fields() -> None:
    """Legacy key/value lengths of every interesting size, CRC right: model and ours agree."""
    base = UNCOMPRESSED["v1_none"]
    first_end = batch_ends(base)[0]
    for off in (26, 26 + 4 + 2):  # key length, value length of the first message (key 'k1')
        for value in INTERESTING_32 + [first_end]:
            buf = bytearray(base)
            struct.pack_into(">i", buf, off, value)
            model.reseal(buf)
            check_both(bytes(buf))


# ---------------------------------------------------------------------------------------------
# Compressed inputs (when the codec module is built)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(n for n in vector_names() if _is_compressed_vector(n)) + ["segment"])
def test_compressed_inputs_truncated_and_flipped(name: str) -> None:
    need_codecs(name)
    buf = corpus(compressed=True)[name]
    ends = [0] + batch_ends(buf)
    for cut in range(len(buf)):
        outcome, _ = check(buf[:cut], verify_crc=True, use_model=False)
        assert outcome == (OK if cut in ends else CORRUPT)
    free = unchecked_bytes(buf)
    rnd = random.Random(name)
    for i in range(len(buf)):
        for bit in rnd.sample(range(8), 3):
            flipped = bytearray(buf)
            flipped[i] ^= 1 << bit
            outcome, _ = check(bytes(flipped), verify_crc=True, use_model=False)
            if i not in free:
                assert outcome == CORRUPT, f"flip of bit {bit} of byte {i} went undetected"
            check(bytes(flipped), verify_crc=False, use_model=False)


@FAST
@given(data=st.data())
def test_compressed_byte_mutations(data: st.DataObject) -> None:
    need_codecs("any")
    bufs = corpus(compressed=True)
    buf = bytearray(bufs[data.draw(st.sampled_from(sorted(bufs)))])
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        model.reseal(buf)
    check_both(bytes(buf))


# ---------------------------------------------------------------------------------------------
# Regressions: each of these was a bug found by this file, fixed in _native/records.pyx
# ---------------------------------------------------------------------------------------------


# Regression test (was a bug):  decode_columns copies header-key bytes unchecked into an Arrow
# *string* child, so a key that  is not UTF-8 gives an invalid Arrow array:
# to_arrow().validate(full=True) raises ArrowInvalid  and to_pylist() raises UnicodeDecodeError.
# decode_records decodes the same key with  errors='replace' (as Kafk
def test_columns_with_non_utf8_header_key_are_valid_arrow() -> None:
    buf = encode_batch([b"v"], timestamps=0, headers=[[(b"\xff\xfe", b"x")]])
    (r,) = decode_records(buf)
    assert r.headers == [("\ufffd\ufffd", b"x")]
    table = decode_columns(buf).to_arrow()
    table.validate(full=True)
    assert table.column("headers").to_pylist() == [[{"key": "\ufffd\ufffd", "value": b"x"}]]


def test_columns_header_key_utf8_from_a_foreign_batch() -> None:
    """Same bug reached from bytes on disk (CRC right): only 'return or CorruptRecordError' is
    required of the decoders; the Arrow validity half is the xfail above."""
    buf = bytearray(UNCOMPRESSED["ours0"])
    i = buf.index("ключ".encode())
    buf[i] = 0xFF
    model.reseal(buf)
    check_both(bytes(buf))


# Regression test (was a bug):  a compressed v2 batch whose records area is empty (batchLength 49,
# recordsCount >= 1, codec  1-4, CRC right), or a compressed v0/v1 wrapper whose value is empty
# (length 0, not null),  raises ValueError('Invalid shape in axis 0: 0.') from _records_area's
# <const uint8_t[:0]> cast instead of CorruptR
@pytest.mark.parametrize("case", ["v2-gzip", "v2-snappy", "v2-lz4", "v2-zstd", "v0-gzip", "v1-gzip"])
def test_compressed_batch_with_empty_records_area_is_corrupt(case: str) -> None:
    pytest.importorskip("seglog._native.compression")
    magic, codec = case.split("-")
    cid = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[codec]
    if magic == "v2":
        # 00..00 00000031 00000000 02 <crc> 000c 00000000 0..0 0..0 ff*8 ffff ffffffff 00000001
        buf = bytearray(struct.pack(">qiibIhiqqqhii", 0, 49, 0, 2, 0, cid, 0, 0, 0, -1, -1, -1, 1))
    else:
        m = int(magic[1])
        buf = bytearray(
            struct.pack(">qiIbb", 5, 0, 0, m, cid) + (struct.pack(">q", 7) if m else b"") + struct.pack(">ii", -1, 0)
        )
        struct.pack_into(">i", buf, 8, len(buf) - 12)
    model.reseal(buf)
    for fn in (decode_records, decode_columns, lambda b: list(iter_records(b))):
        with pytest.raises(CorruptRecordError):
            fn(bytes(buf))


# Regression tests for overflow errors the debug build (Cython overflowcheck) raised from the
# intended wrap-around arithmetic on untrusted header fields (fixed with kb_wrap_add/kb_wrap_sub).
def test_timestamps_older_than_the_first_record_round_trip() -> None:
    buf = encode_batch([b"a", b"b"], timestamps=[1700000000005, 1700000000003])
    assert [r.timestamp for r in decode_records(buf)] == [1700000000005, 1700000000003]


def test_offsets_past_the_int64_range_are_returned_or_corrupt() -> None:
    buf = bytearray(UNCOMPRESSED["ours0"])  # 4 records, lastOffsetDelta 3
    struct.pack_into(">q", buf, 0, 2**63 - 2)
    for fn in (decode_records, decode_columns, batch_headers, lambda b: list(iter_records(b))):
        try:
            fn(bytes(buf))
        except CorruptRecordError:
            pass


# Regression test (was a bug):  a batchLength field >= 2147483636 (INT32_MAX - 11) makes
# _batch_size_at format  '{length + LOG_OVERHEAD}' in int32: the release build reports a negative
# size  ('length field says -2147483637 bytes'), the debug build raises OverflowError instead of
# CorruptRecordError. Format <Py_ssize_t>length + LO
def test_huge_batch_length_is_reported_correctly() -> None:
    buf = bytearray(UNCOMPRESSED["ours1"])
    struct.pack_into(">i", buf, 8, 2**31 - 1)
    with pytest.raises(CorruptRecordError, match="2147483659"):
        decode_records(bytes(buf))


# Regression test (was a bug):  max_offset=None is implemented as max_offset = 2**63 - 1, exclusive,
# so a record at offset  2**63 - 1 (Long.MAX_VALUE; kafka-python and aiokafka return it) is silently
# dropped by  decode_records, iter_records and decode_columns; a batch based there decodes to [].
def test_record_at_the_largest_offset_is_returned() -> None:
    buf = encode_batch([b"a"], base_offset=2**63 - 1, timestamps=0)
    assert [r.offset for r in decode_records(buf)] == [2**63 - 1]
    assert [r.offset for r in iter_records(buf)] == [2**63 - 1]
    assert len(decode_columns(buf)) == 1


_REENTRANT_ENCODE = r"""
import sys
from seglog.errors import CorruptRecordError
from seglog.storage.records import decode_records, encode_batch

# encode_batch reads timestamps N + 1 times while sizing (record 0 twice), then N times writing.
class Shifty:
    '''An int-like timestamp whose value changes once sizing is done.'''
    calls = 0
    def __index__(self):
        Shifty.calls += 1
        return 0 if Shifty.calls <= N + 1 else 2**62

values = [bytearray(b"x" * 10) for _ in range(N)]
if MODE == "grow-value":
    class Grow:
        seen = 0
        def __index__(self):
            Grow.seen += 1
            if Grow.seen == N + 2:          # first read while writing
                values[-1].extend(b"y" * 4096)
            return 0
    ts = [Grow() for _ in range(N)]
else:
    ts = [Shifty() for _ in range(N)]
try:
    buf = encode_batch(values, timestamps=ts)
except (TypeError, ValueError):
    sys.exit(0)                              # refusing such input is fine
recs = decode_records(buf)                   # whatever was encoded must be a valid batch
assert len(recs) == N, len(recs)
print("ok")
"""


# Regression test (was a bug):  encode_batch reads each timestamp (PyLong_AsLongLong -> __index__)
# once while sizing and  again while writing, and keeps raw pointers into the values list/bytearrays
# across those  calls: a timestamp whose value changes, or whose __index__ resizes a bytearray
# value, makes  the writer overrun the out
@pytest.mark.parametrize("mode", ["changing-timestamp", "grow-value"])
def test_encode_survives_reentrant_timestamp_objects(mode: str, tmp_path: Any) -> None:
    import subprocess
    import sys

    script = f"N = 100\nMODE = {mode!r}\n" + _REENTRANT_ENCODE
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"


_FINALIZER_ENCODE = r"""
import gc, sys
from seglog.storage.records import decode_records, encode_batch

# Exact lists of bytes are read in place. Resolving a key that is not bytes allocates, and an
# allocation can start the collector, whose finalizers run arbitrary code: here they replace the
# values (or keys) list's items with non-bytes objects and shrink it.
values = [b"v" * 20 for _ in range(N)]
keys = [memoryview(b"k" * 8) for _ in range(N)] if MODE.startswith("convert") else [b"k" * 8] * N
target = values if MODE.endswith("values") else keys

class Saboteur:
    def __init__(self):
        self.me = self                       # a cycle: only the collector frees it
    def __del__(self):
        target[:] = [12345] * (N // 2)

timestamps = None
if MODE == "timestamps-values":
    class Late:                              # runs while the timestamps are resolved
        def __index__(self):
            Saboteur(); gc.collect()
            return 0
    timestamps = [Late() for _ in range(N)]
for _ in range(50):
    Saboteur()
gc.set_threshold(1, 1, 1)
try:
    buf = encode_batch(values, keys=keys, timestamps=timestamps)
except (TypeError, ValueError) as e:
    print("refused:", e)
    sys.exit(0)
recs = decode_records(buf)
assert len(recs) == N, len(recs)
assert all(r.value == b"v" * 20 and r.key == b"k" * 8 for r in recs)
print("ok")
"""


# Exact lists of bytes are read in place (no private copy). Code that runs while the columns
# are being resolved (finalizers started by an allocation, a timestamp's __index__) must not
# leave the encoder with pointers into a list it changed.
@pytest.mark.parametrize("mode", ["convert-keys-values", "convert-keys-keys", "timestamps-values"])
def test_encode_survives_finalizers_changing_the_columns(mode: str) -> None:
    import subprocess
    import sys

    script = f"N = 200\nMODE = {mode!r}\n" + _FINALIZER_ENCODE
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    assert proc.stdout.startswith(("ok", "refused")), proc.stdout


# ---------------------------------------------------------------------------------------------
# Long runs
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
@SLOW
@given(
    st.one_of(
        st.binary(max_size=2000),
        mutated(reseal=False),
        mutated(reseal=True),
        varint_rewrites().map(lambda c: c[0]),
        st.lists(plausible_batches(), min_size=1, max_size=4).map(b"".join),
    )
)
def test_long_fuzz(buf: bytes) -> None:
    check_both(buf)


@pytest.mark.slow
def test_long_random_mutation_loop() -> None:
    """Seeded, unguided: many cheap mutations of the whole corpus, CRC off and resealed."""
    rnd = random.Random(20240601)
    bufs = list(UNCOMPRESSED.values())
    for _ in range(100_000):
        buf = bytearray(rnd.choice(bufs))
        for _ in range(rnd.randint(1, 6)):
            i = rnd.randrange(len(buf))
            r = rnd.random()
            if r < 0.6:
                buf[i] = rnd.randrange(256)
            elif r < 0.8:
                del buf[i : i + rnd.randint(1, 5)]
            else:
                buf[i:i] = rnd.randbytes(rnd.randint(1, 5))
        if rnd.random() < 0.5:
            model.reseal(buf)
        check(bytes(buf), verify_crc=rnd.random() < 0.5)
