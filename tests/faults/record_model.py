"""A plain-Python model of the record decoder: the oracle for the fuzz tests.

It follows Kafka's readers (``DefaultRecordBatch`` / ``DefaultRecord.readFrom`` for v2,
``LegacyRecord`` for v0/v1) with the checks seglog documents as deliberate tightenings:

* a key, value or header value length below -1 is corrupt (Java reads any negative as null);
* a legacy value must end exactly at the end of its message (Java does not check);
* a record count that cannot fit the batch is corrupt before any record is read.

It decodes uncompressed data only; a compressed batch or wrapper makes it raise
:class:`NeedsCodec` (the fuzz tests then check only "return or CorruptRecordError").
Arithmetic wraps as Java's ``long``/``int`` does.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

import crc32c as crc32c_pkg


class ModelCorrupt(Exception):
    pass


class NeedsCodec(Exception):
    pass


def wrap64(x: int) -> int:
    return (x + 2**63) % 2**64 - 2**63


def read_zigzag(buf: bytes, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """ByteUtils.readVarint (max_bytes 5) / readVarlong (10): over-long or truncated is corrupt."""
    u, shift = 0, 0
    for _ in range(max_bytes):
        if pos >= end:
            raise ModelCorrupt("varint runs past the end")
        b = buf[pos]
        pos += 1
        u |= (b & 0x7F) << shift
        if not b & 0x80:
            u &= (1 << (32 if max_bytes == 5 else 64)) - 1
            return (u >> 1) ^ -(u & 1), pos
        shift += 7
    raise ModelCorrupt("varint too long")


@dataclass
class Spans:
    """Where the varints and fixed fields of a v2 batch lie (for targeted mutation)."""

    varints: list[tuple[str, int, int]] = field(default_factory=list)  # (what, start, end)


# Record tuple order: offset, timestamp, timestamp_type, key, value, headers, leader_epoch,
# producer_id, producer_epoch, sequence, is_transactional, is_control, magic.
Rec = tuple


def decode(
    buf: bytes,
    *,
    verify_crc: bool = True,
    include_control: bool = True,
    allow_truncated: bool = False,
    spans: Spans | None = None,
) -> list[Rec]:
    out: list[Rec] = []
    pos, end = 0, len(buf)
    while pos < end:
        remaining = end - pos
        if remaining < 17:
            if allow_truncated:
                break
            raise ModelCorrupt("fewer than 17 bytes left")
        (length,) = struct.unpack_from(">i", buf, pos + 8)
        magic = buf[pos + 16]
        if length < 14 or magic > 2 or (magic == 2 and length < 49):
            raise ModelCorrupt("bad length or magic")
        if length + 12 > remaining:
            if allow_truncated:
                break
            raise ModelCorrupt("truncated")
        b = buf[pos : pos + length + 12]
        if magic == 2:
            _v2(b, out, verify_crc, include_control, spans, pos)
        else:
            _legacy(b, out, verify_crc)
        pos += length + 12
    return out


def _v2(b: bytes, out: list, verify_crc: bool, include_control: bool, spans: Spans | None, at: int) -> None:
    (base, length, ple, _magic, crc, attrs, last_delta, base_ts, max_ts, pid, epoch, base_seq, count) = (
        struct.unpack_from(">qiibIHiqqqhii", b)
    )
    if verify_crc and crc32c_pkg.crc32c(b[21:]) != crc:
        raise ModelCorrupt("crc")
    codec = attrs & 7
    if count < 0 or last_delta < 0 or codec > 4:
        raise ModelCorrupt("header")
    if codec == 0 and count > (length - 49) // 7:
        raise ModelCorrupt("count cannot fit")
    control = bool(attrs & 0x20)
    if (control and not include_control) or count == 0:
        return
    if codec:
        raise NeedsCodec
    log_append = bool(attrs & 0x08)
    p, end = 61, len(b)
    for _ in range(count):
        rec_start = p
        rlen, p = read_zigzag(b, p, end, 5)
        if rlen < 0 or rlen > end - p or rlen < 1:
            raise ModelCorrupt("record length")
        if spans is not None:
            spans.varints.append(("record_length", at + rec_start, at + p))
        body_end = p + rlen
        p += 1  # attributes
        s = p
        ts_delta, p = read_zigzag(b, p, body_end, 10)
        if spans is not None:
            spans.varints.append(("timestamp_delta", at + s, at + p))
        s = p
        off_delta, p = read_zigzag(b, p, body_end, 5)
        if spans is not None:
            spans.varints.append(("offset_delta", at + s, at + p))
        fields = []
        for what in ("key_length", "value_length"):
            s = p
            n, p = read_zigzag(b, p, body_end, 5)
            if n < -1 or n > body_end - p:
                raise ModelCorrupt(what)
            if spans is not None:
                spans.varints.append((what, at + s, at + p))
            fields.append(None if n < 0 else bytes(b[p : p + n]))
            p += max(n, 0)
        s = p
        hcount, p = read_zigzag(b, p, body_end, 5)
        if hcount < 0:
            raise ModelCorrupt("header count")
        if spans is not None:
            spans.varints.append(("header_count", at + s, at + p))
        headers = []
        for _h in range(hcount):
            s = p
            hk, p = read_zigzag(b, p, body_end, 5)
            if hk < 0 or hk > body_end - p:
                raise ModelCorrupt("header key length")
            if spans is not None:
                spans.varints.append(("header_key_length", at + s, at + p))
            key = bytes(b[p : p + hk]).decode("utf-8", "replace")
            p += hk
            s = p
            hv, p = read_zigzag(b, p, body_end, 5)
            if hv < -1 or hv > body_end - p:
                raise ModelCorrupt("header value length")
            if spans is not None:
                spans.varints.append(("header_value_length", at + s, at + p))
            headers.append((key, None if hv < 0 else bytes(b[p : p + hv])))
            p += max(hv, 0)
        if p != body_end:
            raise ModelCorrupt("record length does not match")
        ts = max_ts if log_append else wrap64(base_ts + ts_delta)
        seq = -1 if base_seq < 0 else (base_seq + off_delta) % 2**31
        out.append(
            (
                wrap64(base + off_delta),
                ts,
                1 if log_append else 0,
                fields[0],
                fields[1],
                tuple(headers),
                ple,
                pid,
                epoch,
                seq,
                bool(attrs & 0x10),
                control,
                2,
            )
        )
    if p != end:
        raise ModelCorrupt("bytes left after the records")


def _legacy(b: bytes, out: list, verify_crc: bool) -> None:
    size = len(b)
    magic, attrs = b[16], b[17]
    hdr = 18 if magic == 0 else 26
    if size < hdr + 8:
        raise ModelCorrupt("legacy message too short")
    (offset,) = struct.unpack_from(">q", b, 0)
    if verify_crc and zlib.crc32(b[16:]) != struct.unpack_from(">I", b, 12)[0]:
        raise ModelCorrupt("crc32")
    (klen,) = struct.unpack_from(">i", b, hdr)
    if klen < -1 or klen > size - hdr - 8:
        raise ModelCorrupt("legacy key length")
    vp = hdr + 4 + max(klen, 0)
    (vlen,) = struct.unpack_from(">i", b, vp)
    vp += 4
    if vlen < -1 or vp + max(vlen, 0) != size:
        raise ModelCorrupt("legacy value length")
    codec = attrs & 7
    if codec:
        if codec > 3 or vlen < 0:
            raise ModelCorrupt("legacy codec")
        raise NeedsCodec
    ts = struct.unpack_from(">q", b, 18)[0] if magic == 1 else -1
    tt = -1 if magic == 0 else (1 if attrs & 0x08 else 0)
    key = None if klen < 0 else bytes(b[hdr + 4 : hdr + 4 + klen])
    value = None if vlen < 0 else bytes(b[vp : vp + vlen])
    out.append((offset, ts, tt, key, value, (), -1, -1, -1, -1, False, False, magic))


def v2_spans(buf: bytes) -> Spans:
    """Varint spans of every record of the (uncompressed, valid) v2 batches in ``buf``."""
    spans = Spans()
    decode(buf, spans=spans)
    return spans


def reseal(buf: bytearray) -> None:
    """Recompute every batch's checksum (CRC-32C for v2, CRC-32 for v0/v1) while the lengths
    still delimit whole batches; stop at the first that does not."""
    pos = 0
    while len(buf) - pos >= 17:
        (length,) = struct.unpack_from(">i", buf, pos + 8)
        if length < 14 or length + 12 > len(buf) - pos:
            return
        magic = buf[pos + 16]
        if magic == 2 and length >= 49:
            struct.pack_into(">I", buf, pos + 17, crc32c_pkg.crc32c(bytes(buf[pos + 21 : pos + 12 + length])))
        elif magic < 2:
            struct.pack_into(">I", buf, pos + 12, zlib.crc32(bytes(buf[pos + 16 : pos + 12 + length])))
        else:
            return
        pos += length + 12
