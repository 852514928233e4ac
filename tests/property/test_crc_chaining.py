"""CRC-32C and CRC-32 are streaming checksums: any split of the input, fed piece by piece
through the running value, gives the checksum of the whole (checked against the crc32c
package and zlib, on both the dispatched and the portable CRC-32C paths)."""

from __future__ import annotations

import random
import zlib
from itertools import pairwise

import crc32c as crc32c_pkg
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog._native import crc32c as native


@st.composite
def split_data(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    # Short inputs, and inputs spanning the 768 B and 24 KiB three-stream blocks. Large byte
    # strings are generated from a drawn seed: Hypothesis draws big binaries slowly.
    length = draw(st.integers(0, 3000) | st.integers(24_000, 60_000))
    data = random.Random(draw(st.integers(0, 2**32))).randbytes(length)
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=6)))
    return data, cuts


@given(split_data(), st.integers(0, 2**32 - 1))
@settings(max_examples=200, deadline=None)
def test_pieces_chain_to_the_whole(case: tuple[bytes, list[int]], start: int) -> None:
    data, cuts = case
    bounds = [0, *cuts, len(data)]
    pieces = [data[a:b] for a, b in pairwise(bounds)]
    c = p = i = start
    for piece in pieces:
        c = native.crc32c(piece, c)
        p = native._crc32c_portable(piece, p)
        i = native.crc32(piece, i)
    assert c == p == crc32c_pkg.crc32c(data, start)
    assert i == zlib.crc32(data, start)
