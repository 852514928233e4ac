"""CRC-32C and CRC-32 against independent implementations: the ``crc32c`` package (CRC-32C),
``zlib.crc32`` (CRC-32), and our own portable table path. The environment variable
``SEGLOG_CRC32C`` forces the table path (``=table``) or, on a CPU with AVX-512 VPCLMULQDQ, the
plain SSE 4.2 path (``=sse4.2``); both are exercised in subprocesses."""

from __future__ import annotations

import array
import json
import mmap
import os
import random
import subprocess
import sys
import textwrap
import threading
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, cast

import crc32c as crc32c_pkg
import numpy as np
import pytest

import seglog
from seglog._native import crc32c as native
from seglog._native.crc32c import crc32, crc32c

if TYPE_CHECKING:
    from typing_extensions import Buffer

RNG = random.Random(0x5E6106)
POOL = RNG.randbytes(4 << 20)
# Lengths around the three-stream block boundaries (SHORT = 256 B and LONG = 8 KiB per stream)
# and the folding path's (from 1 KiB; 256-byte rounds, then 64-byte blocks, then < 64 bytes).
BOUNDARY_LENGTHS = sorted(
    {
        n + d
        for n in (
            8,
            16,
            767,
            768,
            3 * 768,
            24576,
            24576 + 768,
            2 * 24576,
            24576 + 767,
            1024,
            1024 + 64,
            1024 + 192,
            1280,
            1280 + 63,
            4096,
            4096 + 255,
            65536 + 128,
        )
        for d in (-9, -8, -1, 0, 1, 7, 8, 9)
    }
)
LARGE_LENGTHS = [(1 << 20) + 1, (1 << 20) + 4093, 3 * (1 << 20) + 7, (4 << 20) - 17]


def aligned_views(length: int) -> Iterator[tuple[int, memoryview]]:
    """For every address alignment 0..15, a view of ``length`` random bytes starting at an
    address with that remainder mod 16."""
    base = np.frombuffer(POOL, dtype=np.uint8)
    addr = base.ctypes.data
    for align in range(16):
        start = (align - addr) % 16
        view = memoryview(POOL)[start : start + length]
        assert (addr + start) % 16 == align
        yield align, view


def pkg_crc32c(data: bytes | memoryview, crc: int = 0) -> int:
    return int(crc32c_pkg.crc32c(data, crc))


def check_all(length: int) -> None:
    for align, view in aligned_views(length):
        want_c = pkg_crc32c(view)
        want = zlib.crc32(view)
        assert crc32c(view) == want_c, (length, align)
        assert native._crc32c_portable(view) == want_c, (length, align)
        assert crc32(view) == want, (length, align)


def test_kafka_vectors(fixtures_dir: Path) -> None:
    vec = json.loads((fixtures_dir / "kafka-clients-generated" / "vectors.json").read_text())["crc32c"]
    inputs = {
        "123456789": b"123456789",
        "zeros32": bytes(32),
        "ff32": b"\xff" * 32,
        "inc32": bytes(range(32)),
        "dec32": bytes(range(31, -1, -1)),
        "SomeString": b"Some String",
        "empty": b"",
        "zeros4": bytes(4),
    }
    for name, data in inputs.items():
        want = vec[name]
        want = int(want) if name == "SomeString" else int(want, 16)
        assert crc32c(data) == want, name
        assert native._crc32c_portable(data) == want, name


def test_check_values() -> None:
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32(b"123456789") == 0xCBF43926
    assert crc32c(b"") == 0 and crc32(b"") == 0
    assert crc32c(b"", 0xDEADBEEF) == 0xDEADBEEF
    assert crc32(b"", 0xDEADBEEF) == 0xDEADBEEF


def test_top_level_export() -> None:
    assert seglog.crc32c is crc32c


def test_implementation_matches_cpu() -> None:
    impl = native.implementation()
    assert impl in ("vpclmulqdq", "sse4.2", "armv8", "table")
    forced = os.environ.get("SEGLOG_CRC32C")
    if forced in ("table", "sse4.2"):
        assert impl == forced
        return
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        pytest.skip("no /proc/cpuinfo to compare the detection with")
    words = set(cpuinfo.split())
    if {"sse4_2", "avx512f", "avx512vl", "vpclmulqdq"} <= words:
        assert impl == "vpclmulqdq"
    elif "sse4_2" in words:
        assert impl == "sse4.2"
    elif "crc32" in words and os.uname().machine == "aarch64":
        assert impl == "armv8"


@pytest.mark.parametrize("chunk", range(0, 301, 50))
def test_every_length_and_alignment(chunk: int) -> None:
    for length in range(chunk, min(chunk + 50, 301)):
        check_all(length)


def test_block_boundaries() -> None:
    for length in BOUNDARY_LENGTHS:
        check_all(length)


@pytest.mark.parametrize("length", LARGE_LENGTHS)
def test_large_buffers(length: int) -> None:
    for align in (0, 3, 8, 13):
        view = next(v for a, v in aligned_views(length) if a == align)
        assert crc32c(view) == pkg_crc32c(view), (length, align)
        assert native._crc32c_portable(view) == pkg_crc32c(view), (length, align)
        assert crc32(view) == zlib.crc32(view), (length, align)


def test_running_value_continues() -> None:
    data = POOL[:5000]
    for start in (0, 1, 0xFFFFFFFF, 0x12345678):
        assert crc32c(data, start) == pkg_crc32c(data, start)
        assert native._crc32c_portable(data, start) == pkg_crc32c(data, start)
        assert crc32(data, start) == zlib.crc32(data, start)


def test_chaining() -> None:
    rng = random.Random(7)
    data = POOL[:200_000]
    cuts = [0, 1, 7, 255, 768, 769, 24576, 24577, 100_000, len(data) - 1, len(data)]
    cuts += [rng.randrange(len(data) + 1) for _ in range(30)]
    whole_c = crc32c(data)
    whole = crc32(data)
    for cut in cuts:
        a, b = data[:cut], data[cut:]
        assert crc32c(b, crc32c(a)) == whole_c, cut
        assert native._crc32c_portable(b, native._crc32c_portable(a)) == whole_c, cut
        assert crc32(b, crc32(a)) == whole, cut
    # Three pieces through a mix of both CRC-32C paths.
    a, b, c = data[:1000], data[1000:50_000], data[50_000:]
    assert crc32c(c, native._crc32c_portable(b, crc32c(a))) == whole_c


def buffer_kinds(data: bytes) -> Iterator[tuple[str, Buffer]]:
    yield "bytes", data
    yield "bytearray", bytearray(data)
    yield "memoryview", memoryview(data)
    yield "memoryview slice", memoryview(b"xx" + data + b"yy")[2:-2]
    yield "readonly memoryview of bytearray", memoryview(bytearray(data)).toreadonly()
    # (numpy declares the buffer protocol to type checkers only from Python 3.12)
    yield "numpy uint8", cast("Buffer", np.frombuffer(data, dtype=np.uint8))
    yield "numpy writable uint8", cast("Buffer", np.array(np.frombuffer(data, dtype=np.uint8)))
    yield "array('B')", array.array("B", data)


@pytest.mark.parametrize("length", [0, 1, 100, 100_000])
def test_buffer_kinds(length: int) -> None:
    data = POOL[:length]
    want_c, want = pkg_crc32c(data), zlib.crc32(data)
    for name, buf in buffer_kinds(data):
        assert crc32c(buf) == want_c, name
        assert crc32(buf) == want, name
        assert native._crc32c_portable(buf) == want_c, name


@pytest.mark.parametrize("length", [1, 5000, 300_000])
def test_mmap(tmp_path: Path, length: int) -> None:
    data = POOL[:length]
    path = tmp_path / "seg.log"
    path.write_bytes(data)
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as ro:
        assert crc32c(ro) == pkg_crc32c(data)
        assert crc32(ro) == zlib.crc32(data)
        view = memoryview(ro)
        try:
            assert crc32c(view[1:]) == pkg_crc32c(data[1:])
        finally:
            view.release()
    with path.open("r+b") as fw, mmap.mmap(fw.fileno(), 0) as rw:
        assert crc32c(rw) == pkg_crc32c(data)


@pytest.mark.parametrize(
    ("bad", "exc"),
    [
        (None, TypeError),
        ("123456789", TypeError),
        (12, TypeError),
        (np.zeros(4, dtype=np.int32), ValueError),  # not a byte buffer
        (memoryview(bytes(range(10)))[::2], (ValueError, BufferError)),  # not contiguous
    ],
)
def test_rejects_non_buffers(bad: object, exc: type[Exception]) -> None:
    for func in (crc32c, crc32):
        with pytest.raises(exc):
            func(bad)  # type: ignore[arg-type]


def test_rejects_out_of_range_running_value() -> None:
    with pytest.raises(OverflowError):
        crc32c(b"x", -1)
    with pytest.raises(OverflowError):
        crc32c(b"x", 1 << 32)


def test_threads_with_gil_released() -> None:
    size = 4 * native.CRC32C_NOGIL_MIN + 3
    bufs = [POOL[i * size : (i + 1) * size] for i in range(8)]
    want = [pkg_crc32c(b) for b in bufs]
    errors: list[str] = []

    def work(fn: Callable[[bytes], int]) -> None:
        for _ in range(20):
            for b, w in zip(bufs, want):
                if fn(b) != w:
                    errors.append(f"{fn} mismatch")

    threads = [threading.Thread(target=work, args=(f,)) for f in (crc32c, crc32c, native._crc32c_portable)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_gil_policy_variants_agree() -> None:
    for length in (0, 1, 4096, native.CRC32C_NOGIL_MIN, 100_003):
        data = POOL[:length]
        want = pkg_crc32c(data)
        assert native._crc32c_gil(data, 0, True) == want
        assert native._crc32c_gil(data, 0, False) == want


FORCED_SCRIPT = textwrap.dedent(
    """
    import random, zlib, sys
    import crc32c as pkg
    from seglog._native import crc32c as native
    assert native.implementation() == sys.argv[1], native.implementation()
    pool = random.Random(3).randbytes(3 << 20)
    mv = memoryview(pool)
    lengths = list(range(301)) + [767, 768, 769, 1023, 1024, 1025, 1343, 24575, 24576, 24577,
                                  (1 << 20) + 1, 3 * (1 << 20) - 5]
    for n in lengths:
        for a in range(16):
            v = mv[a : a + n]
            assert native.crc32c(v) == pkg.crc32c(v), (n, a)
            assert native.crc32(v) == zlib.crc32(v), (n, a)
    a, b = pool[:777], pool[777:100000]
    assert native.crc32c(b, native.crc32c(a)) == pkg.crc32c(pool[:100000])
    print("ok")
    """
)


def _run_python(args: list[str], env: dict[str, str | None], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter run with ``args``, in this environment changed by ``env`` (None
    removes a variable); its output as text."""
    environ = dict(os.environ)
    for name, value in env.items():
        if value is None:
            environ.pop(name, None)
        else:
            environ[name] = value
    return subprocess.run(
        [sys.executable, *args], env=environ, capture_output=True, text=True, timeout=timeout_s, check=False
    )


@pytest.mark.parametrize("impl", ["table", "sse4.2"])
def test_path_forced_by_environment(impl: str) -> None:
    """``SEGLOG_CRC32C=table`` runs the portable path anywhere; ``=sse4.2`` matters on a CPU that
    gets the folding path, whose short buffers and tails the plain SSE 4.2 path still serves."""
    if impl == "sse4.2" and native.implementation() != "vpclmulqdq":
        pytest.skip(f"this CPU runs {native.implementation()!r}: no folding path to step around")
    out = _run_python(["-c", FORCED_SCRIPT, impl], {"SEGLOG_CRC32C": impl}, timeout_s=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_other_environment_values_mean_detect() -> None:
    code = "from seglog._native import crc32c as n; print(n.implementation())"
    out = _run_python(["-c", code], {"SEGLOG_CRC32C": "auto"}, timeout_s=60)
    assert out.returncode == 0, out.stderr
    plain = _run_python(["-c", code], {"SEGLOG_CRC32C": None}, timeout_s=60)
    assert out.stdout == plain.stdout
