"""decode_columns/decode_records ``aborted=`` (read_committed) and ``values=False``.

The oracle decides each transactional batch's fate the way Kafka's transaction coordinator
does: by the type of the next marker its producer writes after it. The decoder instead gets
Kafka's ``(producer_id, first_offset, last_offset)`` ranges, which the test derives separately.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.storage.records import decode_columns, decode_records, encode_batch, encode_control_batch
from tests.conftest import T0 as T
from tests.conftest import wrong

ABORT, COMMIT = 0, 1


def build(ops):
    """ops: ("data", pid, n) with pid -1 for non-transactional, or ("marker", pid, type).
    Returns (bytes, expected offsets under read_committed, aborted ranges)."""
    parts, offset = [], 0
    batches: list[tuple[str, int, int, int]] = []  # ("data", pid or -1, first, last) and ("marker", pid, offset, kind)
    for op in ops:
        if op[0] == "data":
            _, pid, n = op
            txn = pid >= 0
            parts.append(
                encode_batch(
                    [b"v%d" % (offset + i) for i in range(n)],
                    timestamps=T,
                    base_offset=offset,
                    producer_id=pid if txn else -1,
                    producer_epoch=0 if txn else -1,
                    is_transactional=txn,
                )
            )
            batches.append(("data", pid, offset, offset + n - 1))
            offset += n
        else:
            _, pid, kind = op
            parts.append(encode_control_batch(kind, base_offset=offset, timestamp=T, producer_id=pid, producer_epoch=0))
            batches.append(("marker", pid, offset, kind))
            offset += 1
    # Fate of each data batch: the next marker of its producer (none yet = still open, kept
    # here; read_committed's last-stable-offset bound is the caller's business).
    expected: list[int] = []
    for i, b in enumerate(batches):
        if b[0] != "data":
            continue
        _, pid, first, last = b
        fate = COMMIT
        if pid >= 0:
            for later in batches[i + 1 :]:
                if later[0] == "marker" and later[1] == pid:
                    fate = later[3]
                    break
        if fate == COMMIT:
            expected.extend(range(first, last + 1))
    # Kafka's aborted-transaction ranges: first offset of the producer's open transaction up to
    # its ABORT marker.
    ranges: list[tuple[int, int, int]] = []
    open_first: dict[int, int] = {}
    for b in batches:
        if b[0] == "data" and b[1] >= 0:
            open_first.setdefault(b[1], b[2])
        elif b[0] == "marker":
            txn_first = open_first.pop(b[1], None)
            if b[3] == ABORT and txn_first is not None:
                ranges.append((b[1], txn_first, b[2]))
    return b"".join(parts), expected, ranges


def offsets(cols):
    return np.frombuffer(cols.offsets, dtype=np.int64).tolist()


def test_aborted_transaction_is_dropped():
    buf, expected, ranges = build(
        [
            ("data", 7, 3),
            ("data", -1, 2),
            ("data", 8, 2),
            ("marker", 7, ABORT),
            ("data", 8, 1),
            ("marker", 8, COMMIT),
            ("data", 7, 2),
            ("marker", 7, COMMIT),
        ]
    )
    assert ranges == [(7, 0, 7)]
    assert expected == [3, 4, 5, 6, 8, 10, 11]
    assert offsets(decode_columns(buf, aborted=ranges)) == expected
    assert [r.offset for r in decode_records(buf, aborted=ranges)] == expected
    assert len(decode_records(buf)) == 10  # without the ranges every data record is returned
    # Markers stay visible with include_control, even the ABORT marker inside its own range.
    assert 7 in offsets(decode_columns(buf, aborted=ranges, include_control=True))


def test_aborted_needs_triples():
    buf, _, _ = build([("data", 1, 1)])
    with pytest.raises(TypeError, match="triples"):
        decode_columns(buf, aborted=wrong([(1, 2)]))
    assert offsets(decode_columns(buf, aborted=[])) == [0]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("data"), st.integers(-1, 3), st.integers(1, 4)),
            st.tuples(st.just("marker"), st.integers(0, 3), st.sampled_from([ABORT, COMMIT])),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_aborted_matches_marker_model(ops):
    buf, expected, ranges = build(ops)
    if not buf:
        return
    assert offsets(decode_columns(buf, aborted=ranges, keys=False, headers=False)) == expected


def test_values_false_skips_the_value_column():
    buf = encode_batch([b"a", None, b"ccc"], keys=[b"k", b"k", None], timestamps=T)
    cols = decode_columns(buf, values=False, headers=False)
    assert cols.value_offsets is None and cols.value_data is None
    batch = cols.to_arrow()
    assert batch.column_names == ["offset", "timestamp", "timestampType", "leaderEpoch", "key"]
    assert batch.column("key").to_pylist() == [b"k", b"k", None]
    assert offsets(cols) == [0, 1, 2]
