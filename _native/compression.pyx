"""Compression codecs of Kafka record batches (kafka-clients ``CompressionType`` and
``org.apache.kafka.common.compress.*``).

Called once per batch: ``compress`` turns the concatenated records of a batch into what
Kafka's Java producer writes there; ``decompress`` turns any stream Kafka's readers accept
back into the records. The compressed region is bytes [61, end) of a v2 batch, or the value
of a legacy (magic 0/1) wrapper message.

=====  ====  ================================================  ====================================
codec  attr  written                                           read (each as Kafka's Java reader)
=====  ====  ================================================  ====================================
none   0     the records                                       the records
gzip   1     one RFC 1952 member, zlib level 6 (Kafka's -1)    members back to back; bytes after a
                                                               member that do not start another
                                                               member are ignored (GZIPInputStream)
snappy 2     xerial stream, 32 KiB chunks (snappy-java)        xerial stream (concatenated streams
                                                               too), or one raw snappy block
lz4    3     one LZ4 frame, Kafka's flags (below)              one LZ4 frame; bytes after its end
                                                               mark are ignored (Lz4BlockInputStream)
zstd   4     one zstd frame, level 3, with content size        zstd and skippable frames back to
                                                               back (zstd-jni streaming); magic 2 only
=====  ====  ================================================  ====================================

xerial snappy stream (snappy-java ``SnappyOutputStream`` / ``SnappyInputStream``), big-endian:

====  ====  ==========================================================================
off   size  field
====  ====  ==========================================================================
0     8     magic ``82 53 4e 41 50 50 59 00``
8     4     int32 version (1)              not checked on read: some producers write
12    4     int32 minimum compatible (1)   these two little-endian
16    ...   chunks: int32 compressed length > 0, then one raw snappy block (varint32
            uncompressed length, then elements). A "length" whose 8 bytes are the magic
            starts a concatenated stream: a 16-byte header again.
====  ====  ==========================================================================

LZ4 frame (Kafka ``Lz4BlockOutputStream`` / ``Lz4BlockInputStream``), little-endian:

====  ====  ==========================================================================
off   size  field
====  ====  ==========================================================================
0     4     magic 0x184D2204 (``04 22 4d 18``)
4     1     FLG: bits 7-6 version 01; 5 independent blocks (Kafka requires 1); 4 block
            checksum; 3 content size; 2 content checksum; 1-0 reserved (must be 0)
5     1     BD: bits 6-4 block maximum 4..7 = 64 KiB, 256 KiB, 1 MiB, 4 MiB; others 0
6     0/8   uint64 content size when FLG bit 3; skipped (Kafka ignores it)
6/14  1     HC = (xxh32(FLG .. content size, seed 0) >> 8) & 0xff. Kafka before 0.10
            hashed the magic as well (KIP-57): for magic 0 Kafka writes that broken byte
            and never checks HC on read; magic 1 and 2 must carry the right one.
...         blocks: uint32 size (bit 31 set = stored uncompressed) | data | uint32
            xxh32(data) when FLG bit 4. Size 0 (bit 31 ignored, as Kafka does) is the end
            mark, followed by uint32 xxh32(all content) when FLG bit 2.
====  ====  ==========================================================================

Written: FLG 0x60, BD 0x40 (64 KiB independent blocks; no block checksum, no content
checksum, no content size) -- byte for byte Kafka's layout. Checksums are left out because
Kafka never writes them (a reader built for Kafka's output need not handle them) and the
batch CRC (CRC-32C for v2, CRC-32 for legacy wrappers) already covers every compressed
byte; on read they are verified whenever present.

zstd (RFC 8878) frames, little-endian: magic 0xFD2FB528 | frame header descriptor |
[window descriptor] | [dictionary id] | [content size] | blocks, each a 3-byte header (bit 0
last block, bits 1-2 type raw/RLE/compressed/reserved, bits 3-23 size) and its data |
[4-byte checksum]. Skippable frames: magic 0x184D2A5? | uint32 size | data. Before handing a
stream to the library, ``decompress`` walks these headers: that rejects truncated or foreign
input early and yields an upper bound of the output size (raw and RLE blocks exactly,
compressed blocks at most min(window, 128 KiB)), which sizes the one-shot output buffer and
enforces ``max_size`` without decoding a byte.

Libraries (measured choice, see docs/architecture.md "Compression libraries"): stdlib zlib
for gzip, cramjam's raw snappy and raw LZ4 block functions under our own framing, and
zstandard for zstd (a per-thread context; contexts are not thread-safe). Outputs are bytes
or bytearray, both buffer-protocol objects, written in place wherever the library allows.
"""

from libc.stdint cimport uint8_t, uint32_t, uint64_t, int32_t
from libc.string cimport memcmp, memcpy
from cpython.bytearray cimport (
    PyByteArray_AS_STRING,
    PyByteArray_FromStringAndSize,
    PyByteArray_Resize,
)
from cpython.buffer cimport PyBUF_READ, PyBUF_WRITE
from cpython.memoryview cimport PyMemoryView_FromMemory

cdef extern from "xxh32.h" nogil:
    uint32_t seglog_xxh32(const uint8_t *p, size_t n, uint32_t seed)

import threading
import zlib

import cramjam
import lz4.block
import zstandard

from seglog._native import _errors

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
_BY_NAME = {"none": NONE, "uncompressed": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4,
            "zstd": ZSTD}

# Kafka's defaults and valid ranges (CompressionType.{default,min,max}Level, KIP-390).
# gzip -1 is zlib's default, level 6.
DEFAULT_LEVELS = {GZIP: -1, LZ4: 9, ZSTD: 3}
LEVEL_RANGES = {GZIP: (1, 9), LZ4: (1, 17), ZSTD: (-131072, 22)}

cdef enum:
    NOGIL_MIN = 65536           # byte loops at least this long run without the GIL
    SNAPPY_CHUNK = 32768        # snappy-java's default block size
    LZ4_BLOCK = 65536           # BD 0x40
    ZSTD_BLOCK_MAX = 131072     # RFC 8878 Block_Maximum_Size cap
    # No raw snappy element expands more than 64 output bytes from 3 input bytes.
    SNAPPY_MAX_RATIO = 22
    # An LZ4 block expands at most 255-fold (one length byte adds at most 255 bytes).
    LZ4_MAX_RATIO = 255
    # After the first gzip member, later members are fed in windows of this size, so
    # finding each member's end copies at most one window (zlib hands back the unread
    # rest only as a bytes copy).
    GZIP_WINDOW = 65536

cdef extern from *:
    """
    #define SEGLOG_LZ4_MAGIC 0x184D2204u
    #define SEGLOG_LZ4_STORED 0x80000000u
    #define SEGLOG_ZSTD_MAGIC 0xFD2FB528u
    #define SEGLOG_ZSTD_ONESHOT_MAX (64u * 1024u * 1024u)
    """
    const uint32_t LZ4_MAGIC "SEGLOG_LZ4_MAGIC"
    const uint32_t LZ4_STORED "SEGLOG_LZ4_STORED"
    const uint32_t ZSTD_MAGIC "SEGLOG_ZSTD_MAGIC"
    # Above this bound the one-shot zstd path is not used: the bound counts every
    # compressed block at its maximum, so it would over-allocate.
    const uint32_t ZSTD_ONESHOT_MAX "SEGLOG_ZSTD_ONESHOT_MAX"

cdef bytes _XERIAL_MAGIC = b"\x82SNAPPY\x00"
cdef bytes _XERIAL_HEADER = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01"

_tls = threading.local()


# ---------------------------------------------------------------------------------------
# byte access and buffers

cdef inline uint32_t _le32(const uint8_t *p) noexcept nogil:
    return <uint32_t>p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24)


cdef inline uint32_t _be32(const uint8_t *p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3]


cdef inline void _put_le32(uint8_t *p, uint32_t v) noexcept nogil:
    p[0] = v & 0xff
    p[1] = (v >> 8) & 0xff
    p[2] = (v >> 16) & 0xff
    p[3] = (v >> 24) & 0xff


cdef inline void _put_be32(uint8_t *p, uint32_t v) noexcept nogil:
    p[0] = (v >> 24) & 0xff
    p[1] = (v >> 16) & 0xff
    p[2] = (v >> 8) & 0xff
    p[3] = v & 0xff


cdef inline uint32_t _xxh32(const uint8_t *p, size_t n) noexcept:
    cdef uint32_t h
    if n >= NOGIL_MIN:
        with nogil:
            h = seglog_xxh32(p, n, 0)
        return h
    return seglog_xxh32(p, n, 0)


cdef inline void _copy(uint8_t *dst, const uint8_t *src, size_t n) noexcept:
    if n >= NOGIL_MIN:
        with nogil:
            memcpy(dst, src, n)
    else:
        memcpy(dst, src, n)


cdef inline object _rview(const uint8_t *p, Py_ssize_t n):
    # A read-only view of caller-owned memory, for one library call; the typed
    # memoryview of the input keeps that memory alive for the whole call.
    return PyMemoryView_FromMemory(<char *>p, n, PyBUF_READ)


cdef inline object _wview(object out, Py_ssize_t start, Py_ssize_t n):
    # A writable window into a bytearray we own and have not handed out. It takes no
    # buffer export, so the bytearray can be shrunk afterwards; windows never outlive
    # the library call they are passed to.
    return PyMemoryView_FromMemory(PyByteArray_AS_STRING(out) + start, n, PyBUF_WRITE)


cdef inline uint8_t *_wptr(object out) noexcept:
    return <uint8_t *>PyByteArray_AS_STRING(out)


cdef object _new_bytearray(Py_ssize_t n):
    # Uninitialised: every byte up to the final length is written before it is returned.
    return PyByteArray_FromStringAndSize(NULL, n)


cdef object _corrupt(str codec, str message, object position):
    return _errors.corrupt(f"{codec}: {message}", position)


cdef object _too_large(str codec, Py_ssize_t limit):
    return _errors.corrupt(
        f"{codec}: decompressed data exceeds max_size={limit} bytes", None, limit=limit)


cdef int _check_magic(int magic) except -1:
    if magic < 0 or magic > 2:
        raise ValueError(f"magic must be 0, 1 or 2, not {magic}")
    return 0


# ---------------------------------------------------------------------------------------
# codec names and levels

def codec_from_name(name):
    """Return the codec id for a Kafka ``compression.type`` name (case-insensitive):
    ``none``/``uncompressed``, ``gzip``, ``snappy``, ``lz4``, ``zstd``."""
    if isinstance(name, str):
        codec = _BY_NAME.get(name.lower())
        if codec is not None:
            return codec
    raise _errors.make(
        "unsupported_compression",
        f"unknown compression type {name!r}; valid names: "
        "none, uncompressed, gzip, snappy, lz4, zstd")


def codec_name(int codec):
    """The Kafka name of a codec id (0..4)."""
    try:
        return CODEC_NAMES[codec]
    except KeyError:
        raise _errors.make(
            "unsupported_compression",
            f"unknown compression codec id {codec}; valid ids: 0 none, 1 gzip, 2 snappy, "
            "3 lz4, 4 zstd") from None


cdef int _level(int codec, object level) except? -999999:
    cdef str name = CODEC_NAMES[codec]
    if codec not in DEFAULT_LEVELS:
        if level is not None:
            raise ValueError(f"{name} has no compression levels (got level={level!r})")
        return 0
    if level is None:
        return DEFAULT_LEVELS[codec]
    if isinstance(level, bool) or not isinstance(level, int):
        raise TypeError(f"compression level must be an int or None, not {type(level).__name__}")
    lo, hi = LEVEL_RANGES[codec]
    if codec == GZIP and level == -1:
        return -1
    if not lo <= level <= hi:
        extra = " or -1 (default)" if codec == GZIP else ""
        raise ValueError(f"{name} level must be in [{lo}, {hi}]{extra}, not {level}")
    return level


# ---------------------------------------------------------------------------------------
# public entry points

def compress(int codec, data, level=None, *, int magic=2):
    """Compress the records region of one batch as Kafka's Java producer does.

    ``level``: None for Kafka's default (gzip -1 = zlib 6, lz4 9, zstd 3); snappy and none
    take no level. ``magic`` matters only for lz4 (magic 0 writes the pre-0.10 header
    checksum) and zstd (magic 2 only). Returns bytes or bytearray; codec NONE returns
    ``data`` itself."""
    cdef const uint8_t[::1] view
    cdef Py_ssize_t n
    cdef const uint8_t *p
    cdef int lvl
    if data is None:
        raise TypeError("data must be a bytes-like object, not None")
    view = data
    n = view.shape[0]
    p = &view[0] if n > 0 else NULL
    _check_magic(magic)
    if codec < 0 or codec > 4:
        codec_name(codec)
    lvl = _level(codec, level)
    if codec == NONE:
        return data
    if codec == GZIP:
        c = zlib.compressobj(lvl, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        return _snappy_compress(p, n)
    if codec == LZ4:
        return _lz4_compress(p, n, lvl, magic)
    if magic < 2:
        raise _errors.make(
            "unsupported_compression",
            f"zstd compression needs magic 2 (record batches); magic {magic} message sets "
            "cannot carry it")
    return _zstd_compressor(lvl).compress(data)


def decompress(int codec, data, *, int magic=2, max_size=None):
    """Decompress the compressed region of one batch (v2: bytes [61, end); magic 0/1: the
    wrapper message's value).

    ``magic`` selects legacy rules: lz4 ignores the frame header checksum for magic 0 (Kafka
    before 0.10 computed it wrongly); zstd is invalid below magic 2. ``max_size`` bounds the
    output. Malformed input, a codec id outside 0..4 and output above ``max_size`` raise the
    native corrupt-record error (``position`` is relative to the start of ``data``). Returns
    a bytes-like object (bytes or bytearray); codec NONE returns ``data`` itself."""
    cdef const uint8_t[::1] view
    cdef Py_ssize_t n
    cdef Py_ssize_t limit = -1
    cdef const uint8_t *p
    if data is None:
        raise TypeError("data must be a bytes-like object, not None")
    view = data
    n = view.shape[0]
    _check_magic(magic)
    if max_size is not None:
        if max_size < 0:
            raise ValueError(f"max_size must be >= 0 or None, not {max_size}")
        # Beyond 2^62 bytes no allocation can succeed anyway; treat it as unbounded so
        # that limit + slack never overflows.
        if max_size < (1 << 62):
            limit = max_size
    if codec < 0 or codec > 4:
        raise _errors.corrupt(
            f"unknown compression codec id {codec} (attributes bits 0-2 must be 0..4)", None)
    name = CODEC_NAMES[codec]
    if codec == NONE:
        if limit >= 0 and n > limit:
            raise _too_large(name, limit)
        return data
    if codec == ZSTD and magic < 2:
        raise _errors.corrupt(
            f"zstd: compression codec 4 is not valid in a magic {magic} message set", None)
    if n == 0:
        raise _corrupt(name, "empty compressed data", 0)
    p = &view[0]
    if codec == GZIP:
        return _gzip_decompress(data, p, n, limit)
    if codec == SNAPPY:
        return _snappy_decompress(p, n, limit)
    if codec == LZ4:
        return _lz4_decompress(p, n, limit, magic)
    return _zstd_decompress(data, p, n, limit)


def xxh32(data, uint32_t seed=0):
    """XXH32 of ``data`` (the LZ4 frame checksum), computed by the built-in implementation."""
    cdef const uint8_t[::1] view
    cdef Py_ssize_t n
    cdef uint32_t h
    if data is None:
        raise TypeError("data must be a bytes-like object, not None")
    view = data
    n = view.shape[0]
    if n == 0:
        return seglog_xxh32(NULL, 0, seed)
    with nogil:
        h = seglog_xxh32(&view[0], n, seed)
    return h


# ---------------------------------------------------------------------------------------
# gzip

cdef object _gzip_decompress(object data, const uint8_t *p, Py_ssize_t n, Py_ssize_t limit):
    cdef Py_ssize_t total = 0
    cdef Py_ssize_t pos = 0
    cdef Py_ssize_t member = 0
    cdef Py_ssize_t end
    cdef bint first = True
    parts = []
    d = zlib.decompressobj(31)
    while True:
        if first:
            end = n
            src = data
        else:
            end = n if n - pos <= GZIP_WINDOW else pos + GZIP_WINDOW
            src = _rview(p + pos, end - pos)
        try:
            out = d.decompress(src, limit - total + 1) if limit >= 0 else d.decompress(src)
        except zlib.error as exc:
            raise _corrupt("gzip", f"invalid member: {exc}", member) from None
        first = False
        total += len(out)
        if limit >= 0 and total > limit:
            raise _too_large("gzip", limit)
        if out:
            parts.append(out)
        if not d.eof:
            if end == n:
                raise _corrupt("gzip", "truncated member (no end of stream)", n)
            pos = end
            continue
        pos = end - len(d.unused_data)
        # GZIPInputStream reads another member only where one starts; anything else
        # after a complete member is ignored.
        if n - pos < 3 or p[pos] != 0x1f or p[pos + 1] != 0x8b or p[pos + 2] != 8:
            break
        member = pos
        d = zlib.decompressobj(31)
    if len(parts) == 1:
        return parts[0]
    return b"".join(parts)


# ---------------------------------------------------------------------------------------
# snappy

cdef Py_ssize_t _snappy_declared(const uint8_t *p, Py_ssize_t n, Py_ssize_t at) except -1:
    """Uncompressed length declared by the raw snappy block p[0:n] (at = its position)."""
    cdef uint64_t value = 0
    cdef int shift = 0
    cdef Py_ssize_t i = 0
    cdef uint8_t b
    while True:
        if i >= n:
            raise _corrupt("snappy", "block ends inside its length varint", at + i)
        if i == 5:
            raise _corrupt("snappy", "block length varint longer than 5 bytes", at)
        b = p[i]
        value |= (<uint64_t>(b & 0x7f)) << shift
        i += 1
        if b < 0x80:
            break
        shift += 7
    if value > 0xFFFFFFFF:
        raise _corrupt("snappy", f"block declares {value} bytes, more than 2^32 - 1", at)
    if value > <uint64_t>SNAPPY_MAX_RATIO * <uint64_t>n:
        raise _corrupt(
            "snappy", f"block of {n} bytes declares {value} uncompressed bytes, more than "
            "snappy can encode in it", at)
    return <Py_ssize_t>value


cdef int _snappy_block(const uint8_t *p, Py_ssize_t n, Py_ssize_t at, object out,
                       Py_ssize_t o, Py_ssize_t declared) except -1:
    try:
        got = cramjam.snappy.decompress_raw_into(_rview(p, n), _wview(out, o, declared))
    except MemoryError:
        raise
    except Exception as exc:
        raise _corrupt("snappy", f"invalid block: {exc}", at) from None
    if got != declared:
        raise _corrupt("snappy", f"block decodes to {got} bytes, declared {declared}", at)
    return 0


cdef inline bint _is_xerial(const uint8_t *p, Py_ssize_t n) noexcept:
    return n >= 8 and memcmp(p, <const char *>_XERIAL_MAGIC, 8) == 0


cdef object _snappy_decompress(const uint8_t *p, Py_ssize_t n, Py_ssize_t limit):
    cdef Py_ssize_t pos, clen, declared, o
    cdef uint64_t total = 0
    cdef int pass_
    if not _is_xerial(p, n):
        declared = _snappy_declared(p, n, 0)
        if limit >= 0 and declared > limit:
            raise _too_large("snappy", limit)
        out = _new_bytearray(declared)
        _snappy_block(p, n, 0, out, 0, declared)
        return out
    if n < 16:
        raise _corrupt("snappy", f"xerial header truncated ({n} of 16 bytes)", n)
    # Pass 0 validates the chunk structure and sums the declared sizes, so the output
    # is allocated once, at its exact size, and max_size is enforced before decoding.
    # Pass 1 decodes each chunk straight into its place.
    out = None
    o = 0
    for pass_ in range(2):
        pos = 16
        while pos < n:
            if _is_xerial(p + pos, n - pos):
                if n - pos < 16:
                    raise _corrupt("snappy", "concatenated xerial header truncated", pos)
                pos += 16
                continue
            if n - pos < 4:
                raise _corrupt("snappy", f"chunk length truncated ({n - pos} of 4 bytes)", pos)
            clen = <int32_t>_be32(p + pos)
            if clen <= 0:
                raise _corrupt("snappy", f"invalid chunk length {clen}", pos)
            if clen > n - pos - 4:
                raise _corrupt(
                    "snappy", f"chunk of {clen} bytes truncated ({n - pos - 4} left)", pos)
            if pass_ == 0:
                total += <uint64_t>_snappy_declared(p + pos + 4, clen, pos + 4)
            else:
                declared = _snappy_declared(p + pos + 4, clen, pos + 4)
                _snappy_block(p + pos + 4, clen, pos + 4, out, o, declared)
                o += declared
            pos += 4 + clen
        if pass_ == 0:
            if limit >= 0 and total > <uint64_t>limit:
                raise _too_large("snappy", limit)
            out = _new_bytearray(<Py_ssize_t>total)
    return out


cdef object _snappy_compress(const uint8_t *p, Py_ssize_t n):
    cdef Py_ssize_t nchunks = (n + SNAPPY_CHUNK - 1) // SNAPPY_CHUNK
    # snappy's worst case for a chunk of c bytes is 32 + c + c / 6.
    cdef Py_ssize_t cap = 16 + nchunks * (4 + 32 + SNAPPY_CHUNK + SNAPPY_CHUNK // 6)
    cdef Py_ssize_t i = 0, o = 16, c, got
    out = _new_bytearray(cap)
    memcpy(_wptr(out), <const char *>_XERIAL_HEADER, 16)
    while i < n:
        c = n - i if n - i < SNAPPY_CHUNK else SNAPPY_CHUNK
        got = cramjam.snappy.compress_raw_into(_rview(p + i, c), _wview(out, o + 4, cap - o - 4))
        _put_be32(_wptr(out) + o, <uint32_t>got)
        o += 4 + got
        i += c
    PyByteArray_Resize(out, o)
    return out


# ---------------------------------------------------------------------------------------
# lz4

cdef object _lz4_decompress(const uint8_t *p, Py_ssize_t n, Py_ssize_t limit, int magic):
    cdef uint8_t flg, bd, hc, want
    cdef Py_ssize_t blockmax, desc_end, start, pos, size, o, frame_end
    cdef uint32_t word
    cdef bint stored, block_ck, content_ck
    cdef uint64_t bound = 0, blockbound
    cdef Py_ssize_t alloc, window
    if n < 7:
        raise _corrupt("lz4", f"frame header truncated ({n} bytes)", n)
    if _le32(p) != LZ4_MAGIC:
        raise _corrupt("lz4", f"not an LZ4 frame (magic {_le32(p):#010x}, want 0x184d2204)", 0)
    flg = p[4]
    bd = p[5]
    if (flg >> 6) != 1:
        raise _corrupt("lz4", f"unsupported frame version {flg >> 6} (FLG {flg:#04x})", 4)
    if not (flg & 0x20):
        raise _corrupt("lz4", "dependent blocks (FLG bit 5 clear) are not supported", 4)
    if flg & 0x03:
        raise _corrupt("lz4", f"reserved FLG bits set (FLG {flg:#04x})", 4)
    if (bd & 0x8f) or ((bd >> 4) & 7) < 4:
        raise _corrupt("lz4", f"invalid block descriptor BD {bd:#04x}", 5)
    blockmax = 1 << (2 * ((bd >> 4) & 7) + 8)
    block_ck = (flg & 0x10) != 0
    content_ck = (flg & 0x04) != 0
    desc_end = 14 if flg & 0x08 else 6
    if n < desc_end + 1:
        raise _corrupt("lz4", f"frame header truncated ({n} bytes)", n)
    hc = p[desc_end]
    if magic != 0:
        want = (seglog_xxh32(p + 4, desc_end - 4, 0) >> 8) & 0xff
        if hc != want:
            raise _corrupt(
                "lz4", f"frame header checksum {hc:#04x}, expected {want:#04x} (the broken "
                "pre-0.10 checksum is accepted only in magic 0 message sets)", desc_end)
    start = desc_end + 1

    # Pass 0: block structure, block checksums and an output bound.
    pos = start
    while True:
        if n - pos < 4:
            raise _corrupt("lz4", "frame truncated before its end mark", pos)
        word = _le32(p + pos)
        size = word & 0x7fffffff
        stored = (word & LZ4_STORED) != 0
        if size == 0:
            pos += 4
            break
        if size > blockmax:
            raise _corrupt("lz4", f"block of {size} bytes exceeds the frame's maximum {blockmax}", pos)
        if size + (4 if block_ck else 0) > n - pos - 4:
            raise _corrupt("lz4", f"block of {size} bytes truncated", pos)
        if block_ck and _xxh32(p + pos + 4, size) != _le32(p + pos + 4 + size):
            raise _corrupt("lz4", "block checksum mismatch", pos)
        if stored:
            bound += <uint64_t>size
        else:
            blockbound = <uint64_t>size * LZ4_MAX_RATIO + 64
            bound += blockbound if blockbound < <uint64_t>blockmax else <uint64_t>blockmax
        pos += 4 + size + (4 if block_ck else 0)
    if content_ck and n - pos < 4:
        raise _corrupt("lz4", "content checksum truncated", pos)
    frame_end = pos

    # The allocation never exceeds max_size by more than one block: a block window is
    # cut short only once the output is already past the limit.
    alloc = <Py_ssize_t>bound
    if limit >= 0 and bound > <uint64_t>(limit + blockmax):
        alloc = limit + blockmax
    out = _new_bytearray(alloc)
    o = 0
    pos = start
    while pos < frame_end:
        word = _le32(p + pos)
        size = word & 0x7fffffff
        if size == 0:
            break
        if word & LZ4_STORED:
            if size > alloc - o:
                raise _too_large("lz4", limit)
            _copy(_wptr(out) + o, p + pos + 4, size)
            o += size
        else:
            window = alloc - o
            blockbound = <uint64_t>size * LZ4_MAX_RATIO + 64
            if <uint64_t>window > blockbound:
                window = <Py_ssize_t>blockbound
            if window > blockmax:
                window = blockmax
            try:
                got = cramjam.lz4.decompress_block_into(
                    _rview(p + pos + 4, size), _wview(out, o, window), output_len=window)
            except MemoryError:
                raise
            except Exception as exc:
                # Never a too-small window: while o <= limit the window is the block's
                # full bound, so a failure means a malformed block.
                raise _corrupt("lz4", f"invalid block: {exc}", pos) from None
            o += got
        if limit >= 0 and o > limit:
            raise _too_large("lz4", limit)
        pos += 4 + size + (4 if block_ck else 0)
    if content_ck and _xxh32(_wptr(out), o) != _le32(p + frame_end):
        raise _corrupt("lz4", "content checksum mismatch", frame_end)
    PyByteArray_Resize(out, o)
    return out


cdef object _lz4_compress(const uint8_t *p, Py_ssize_t n, int level, int magic):
    cdef Py_ssize_t nblocks = (n + LZ4_BLOCK - 1) // LZ4_BLOCK
    # A block takes at most 4 + 64 KiB: anything that does not shrink is stored as is.
    cdef Py_ssize_t cap = 7 + nblocks * (4 + LZ4_BLOCK) + 4
    cdef Py_ssize_t i = 0, o = 7, c, got
    cdef uint8_t *w
    cdef bytes block
    out = _new_bytearray(cap)
    w = _wptr(out)
    _put_le32(w, LZ4_MAGIC)
    w[4] = 0x60
    w[5] = 0x40
    # Kafka before 0.10 hashed the magic too; it still writes that byte for magic 0.
    w[6] = ((seglog_xxh32(w, 6, 0) if magic == 0 else seglog_xxh32(w + 4, 2, 0)) >> 8) & 0xff
    # Kafka's default level 9 selects lz4-java's fast compressor (LZ4_compress_default);
    # any other level selects its high-compression compressor at that level.
    if level == 9:
        kwargs = {"mode": "default"}
    else:
        kwargs = {"mode": "high_compression", "compression": level}
    while i < n:
        c = n - i if n - i < LZ4_BLOCK else LZ4_BLOCK
        block = lz4.block.compress(_rview(p + i, c), store_size=False, **kwargs)
        got = len(block)
        w = _wptr(out)
        if got >= c:
            # Incompressible: stored as is, flagged by bit 31 (Kafka does the same).
            _put_le32(w + o, <uint32_t>c | LZ4_STORED)
            memcpy(w + o + 4, p + i, c)
            o += 4 + c
        else:
            _put_le32(w + o, <uint32_t>got)
            memcpy(w + o + 4, <const char *>block, got)
            o += 4 + got
        i += c
    _put_le32(_wptr(out) + o, 0)
    o += 4
    PyByteArray_Resize(out, o)
    return out


# ---------------------------------------------------------------------------------------
# zstd

cdef object _zstd_decompressor():
    try:
        return _tls.zd
    except AttributeError:
        zd = zstandard.ZstdDecompressor()
        _tls.zd = zd
        return zd


cdef object _zstd_compressor(int level):
    try:
        cache = _tls.zc
    except AttributeError:
        cache = {}
        _tls.zc = cache
    zc = cache.get(level)
    if zc is None:
        zc = zstandard.ZstdCompressor(level=level, write_content_size=True, write_checksum=False)
        cache[level] = zc
    return zc


cdef struct ZstdScan:
    uint64_t bound       # upper bound of the decompressed size
    Py_ssize_t frames    # zstd frames
    Py_ssize_t skippable  # skippable frames


cdef int _zstd_scan(const uint8_t *p, Py_ssize_t n, ZstdScan *s) except -1:
    cdef Py_ssize_t pos = 0, frame_start, fsize, dsize
    cdef uint32_t m, bh, bsize
    cdef uint8_t fhd, wd, btype
    cdef uint64_t window, base, fcs, did, blockmax, fbound
    cdef bint single, has_fcs, last
    cdef int k
    s.bound = 0
    s.frames = 0
    s.skippable = 0
    while pos < n:
        frame_start = pos
        if n - pos < 4:
            raise _corrupt("zstd", f"{n - pos} trailing bytes are not a frame", pos)
        m = _le32(p + pos)
        if (m & 0xFFFFFFF0) == 0x184D2A50:
            if n - pos < 8:
                raise _corrupt("zstd", "skippable frame header truncated", pos)
            fsize = _le32(p + pos + 4)
            if fsize > n - pos - 8:
                raise _corrupt("zstd", f"skippable frame of {fsize} bytes truncated", pos)
            pos += 8 + fsize
            s.skippable += 1
            continue
        if m != ZSTD_MAGIC:
            raise _corrupt("zstd", f"not a zstd frame (magic {m:#010x})", pos)
        pos += 4
        if pos >= n:
            raise _corrupt("zstd", "frame header truncated", pos)
        fhd = p[pos]
        pos += 1
        single = (fhd >> 5) & 1
        if fhd & 0x08:
            raise _corrupt("zstd", f"reserved bit set in frame header descriptor {fhd:#04x}", pos - 1)
        window = 0
        if not single:
            if pos >= n:
                raise _corrupt("zstd", "frame header truncated", pos)
            wd = p[pos]
            pos += 1
            base = (<uint64_t>1) << (10 + (wd >> 3))
            window = base + (base >> 3) * (wd & 7)
        dsize = 4 if (fhd & 3) == 3 else (fhd & 3)          # 0, 1, 2, 4 bytes
        if fhd >> 6 == 0:
            fsize = 1 if single else 0
        else:
            fsize = 1 << (fhd >> 6)                              # 2, 4, 8 bytes
        if n - pos < dsize + fsize:
            raise _corrupt("zstd", "frame header truncated", pos)
        did = 0
        for k in range(dsize):
            did |= (<uint64_t>p[pos + k]) << (8 * k)
        if did != 0:
            raise _corrupt("zstd", f"frame needs dictionary {did}, none is available", pos)
        pos += dsize
        fcs = 0
        for k in range(fsize):
            fcs |= (<uint64_t>p[pos + k]) << (8 * k)
        if fsize == 2:
            fcs += 256
        pos += fsize
        has_fcs = fsize > 0
        if single:
            window = fcs
        blockmax = window if window < ZSTD_BLOCK_MAX else ZSTD_BLOCK_MAX
        fbound = 0
        while True:
            if n - pos < 3:
                raise _corrupt("zstd", "frame truncated (block header missing)", pos)
            bh = <uint32_t>p[pos] | (<uint32_t>p[pos + 1] << 8) | (<uint32_t>p[pos + 2] << 16)
            last = bh & 1
            btype = (bh >> 1) & 3
            bsize = bh >> 3
            if btype == 3:
                raise _corrupt("zstd", "reserved block type", pos)
            if bsize > blockmax:
                raise _corrupt(
                    "zstd", f"block of {bsize} bytes exceeds the frame's maximum {blockmax}", pos)
            pos += 3
            if btype == 1:
                if n - pos < 1:
                    raise _corrupt("zstd", "RLE block truncated", pos)
                pos += 1
                fbound += bsize
            else:
                if n - pos < bsize:
                    raise _corrupt("zstd", f"block of {bsize} bytes truncated", pos)
                pos += bsize
                fbound += bsize if btype == 0 else blockmax
            if last:
                break
        if fhd & 0x04:
            if n - pos < 4:
                raise _corrupt("zstd", "frame checksum truncated", pos)
            pos += 4
        if has_fcs:
            if fcs > fbound:
                raise _corrupt(
                    "zstd", f"frame declares {fcs} bytes but its blocks hold at most {fbound}",
                    frame_start)
            fbound = fcs
        s.bound += fbound
        s.frames += 1
    return 0


cdef object _zstd_decompress(object data, const uint8_t *p, Py_ssize_t n, Py_ssize_t limit):
    cdef ZstdScan s
    cdef Py_ssize_t total
    _zstd_scan(p, n, &s)
    if s.frames == 0:
        raise _corrupt("zstd", "no zstd frame (only skippable frames)", 0)
    zd = _zstd_decompressor()
    if limit < 0 or s.bound <= <uint64_t>limit:
        try:
            if s.frames == 1 and s.skippable == 0 and 0 < s.bound <= ZSTD_ONESHOT_MAX:
                # One frame spanning all of data (the scan checked that): decode into one
                # buffer of the bound's size; the library checks that it is big enough.
                return zd.decompress(data, max_output_size=<Py_ssize_t>s.bound)
            return zd.decompressobj(read_across_frames=True).decompress(data)
        except MemoryError:
            raise
        except Exception as exc:
            raise _corrupt("zstd", f"invalid frame: {exc}", None) from None
    # The bound is only an upper bound: decode, but stop one byte past the limit.
    parts = []
    total = 0
    try:
        with zd.stream_reader(data, read_across_frames=True) as reader:
            while total <= limit:
                chunk = reader.read(limit + 1 - total)
                if not chunk:
                    break
                total += len(chunk)
                parts.append(chunk)
    except MemoryError:
        raise
    except Exception as exc:
        raise _corrupt("zstd", f"invalid frame: {exc}", None) from None
    if total > limit:
        raise _too_large("zstd", limit)
    return parts[0] if len(parts) == 1 else b"".join(parts)
