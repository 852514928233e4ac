"""CRC-32C (group ``crc32c``): seglog's native checksum beside the crc32c and google-crc32c
packages, seglog's portable fallback and ``memcpy`` of the same buffer."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from pathlib import Path

from seglog._native import crc32c as native

from .inputs import MEMCPY, SEGLOG, memcpy_of
from .registry import Benchmark, Contender, Goal, Work


def _prepare_crc32c(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    data = random.Random(p["bytes"]).randbytes(p["bytes"])
    calls: dict[str, Callable[[], object]] = {SEGLOG: lambda: native.crc32c(data)}
    if "crc32c" in available:
        import crc32c as pkg

        calls["crc32c"] = lambda: pkg.crc32c(data)
        if pkg.crc32c(data) != native.crc32c(data):
            raise AssertionError("seglog and the crc32c package disagree")
    if "google-crc32c" in available:
        import importlib

        google_value = importlib.import_module("google_crc32c").value
        calls["google-crc32c"] = lambda: google_value(data)
    calls["portable table"] = lambda: native._crc32c_portable(data)
    calls[MEMCPY] = memcpy_of(data)
    return Work(items=len(data), calls=calls, nbytes=len(data))


def _crc_bench(label: str, size: int) -> Benchmark:
    return Benchmark(
        name=f"crc32c-{label}",
        group="crc32c",
        unit="bytes",
        title=f"CRC-32C of a {label} buffer",
        contenders=(
            Contender(SEGLOG, "seglog"),
            Contender("crc32c", "peer", ("crc32c",), "crc32c"),
            Contender("google-crc32c", "peer", ("google_crc32c",), "google-crc32c"),
            Contender("portable table", "seglog", note="seglog's fallback without SSE4.2/ARMv8 CRC"),
            Contender(MEMCPY, "limit"),
        ),
        goals=(Goal("≥0.9× crc32c package", "ratio", 0.9, "crc32c"),),
        prepare=_prepare_crc32c,
        quick={"bytes": size},
        full={"bytes": size},
        full_round_seconds=0.5,
    )


def crc32c_benches() -> list[Benchmark]:
    return [_crc_bench("100B", 100), _crc_bench("4KiB", 4096), _crc_bench("1MiB", 1 << 20)]
