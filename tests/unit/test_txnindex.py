"""The transaction index file (.txnindex): byte layout per docs/kafka-format.md §7.4, ordering, truncation,
torn tails, and Kafka's collectAbortedTxns search.

No public fixture holds a .txnindex (docs/kafka-format.md §12) and kafka-python reads no index files, so
the bytes are checked against entries packed by hand with struct from the spec's layout."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.errors import CorruptIndexError, InvalidOffsetError, KafkaStorageError
from seglog.storage.txnindex import ENTRY_SIZE, AbortedTxn, TransactionIndex
from tests.logkit import txnindex_entry as entry


def index(tmp_path, base: int = 0) -> TransactionIndex:
    return TransactionIndex(tmp_path / f"{base:020d}.txnindex", base)


# Kafka's TransactionIndexTest cases (the aborted transactions of testCollectAbortedTransactions).
KAFKA_CASE = [AbortedTxn(0, 0, 10, 11), AbortedTxn(1, 5, 15, 13), AbortedTxn(2, 18, 35, 25), AbortedTxn(3, 32, 50, 40)]


def test_entry_bytes_match_the_spec_layout(tmp_path):
    idx = index(tmp_path, 100)
    assert not idx.exists  # created on the first append, never before
    assert idx.all_entries() == [] and len(idx) == 0 and idx.last_offset is None
    idx.reset()
    idx.truncate_to(0)
    assert not idx.exists
    txns = [AbortedTxn(7, 100, 104, 105), AbortedTxn(2**40 + 3, 101, 230, 180), AbortedTxn(9, 95, 2**62, 2**62 + 1)]
    for t in txns:
        idx.append(t)
    want = entry(7, 100, 104, 105) + entry(2**40 + 3, 101, 230, 180) + entry(9, 95, 2**62, 2**62 + 1)
    assert ENTRY_SIZE == 34 and len(want) == 3 * 34
    assert idx.path.endswith("00000000000000000100.txnindex")
    assert Path(idx.path).read_bytes() == want
    assert txns[0].to_bytes() == want[:34]
    assert AbortedTxn.from_bytes(want, 34) == txns[1]
    # A second reader of the same file sees the same entries.
    assert index(tmp_path, 100).all_entries() == txns
    # Spot-check one field against an independent packing.
    assert struct.unpack_from(">hqqqq", want, 68) == (0, 9, 95, 2**62, 2**62 + 1)


def test_out_of_range_fields_are_rejected():
    with pytest.raises(ValueError, match="first_offset = 18446744073709551616 does not fit an int64"):
        AbortedTxn(1, 2**64, 2**64, 0).to_bytes()
    with pytest.raises(ValueError, match="version 1"):
        AbortedTxn.from_bytes(entry(1, 2, 3, 4, version=1))


def test_last_offsets_must_strictly_increase(tmp_path):
    idx = index(tmp_path, 10)
    idx.append(AbortedTxn(1, 10, 20, 21))
    before = Path(idx.path).read_bytes()
    with pytest.raises(InvalidOffsetError, match=r"20 is not above the last entry's 20") as exc:
        idx.append(AbortedTxn(2, 12, 20, 21))
    assert idx.path in str(exc.value)
    with pytest.raises(InvalidOffsetError, match="19 is not above"):
        idx.append(AbortedTxn(2, 12, 19, 21))
    with pytest.raises(InvalidOffsetError, match="below the segment's base offset 10"):
        TransactionIndex(tmp_path / "other.txnindex", 10).append(AbortedTxn(2, 1, 9, 10))
    assert not os.path.exists(tmp_path / "other.txnindex")
    assert Path(idx.path).read_bytes() == before
    # The order is checked against what the file holds when reopened, too.
    again = index(tmp_path, 10)
    with pytest.raises(InvalidOffsetError):
        again.append(AbortedTxn(3, 15, 18, 30))
    again.append(AbortedTxn(3, 15, 21, 30))
    assert Path(idx.path).read_bytes() == before + entry(3, 15, 21, 30)


def test_truncate_to_and_reset(tmp_path):
    idx = index(tmp_path)
    kafka_truncate_case = [
        AbortedTxn(0, 0, 10, 2),
        AbortedTxn(1, 5, 15, 16),
        AbortedTxn(2, 18, 35, 25),
        AbortedTxn(3, 32, 50, 40),
    ]
    for t in kafka_truncate_case:
        idx.append(t)
    idx.truncate_to(51)
    assert idx.collect_aborted(0, 100).aborted == kafka_truncate_case
    idx.truncate_to(50)
    assert idx.collect_aborted(0, 100).aborted == kafka_truncate_case[:3]
    assert os.path.getsize(idx.path) == 3 * 34
    idx.truncate_to(16)
    assert idx.all_entries() == kafka_truncate_case[:2] and idx.last_offset == 15
    assert Path(idx.path).read_bytes() == entry(0, 0, 10, 2) + entry(1, 5, 15, 16)
    idx.append(AbortedTxn(4, 16, 16, 17))  # the order restarts from the new last entry
    assert index(tmp_path).all_entries() == kafka_truncate_case[:2] + [AbortedTxn(4, 16, 16, 17)]
    idx.reset()
    assert idx.collect_aborted(0, 100).aborted == []
    assert os.path.exists(idx.path) and os.path.getsize(idx.path) == 0  # emptied, not deleted
    idx.append(AbortedTxn(5, 0, 3, 4))
    assert Path(idx.path).read_bytes() == entry(5, 0, 3, 4)


def test_collect_aborted_follows_kafka(tmp_path):
    idx = index(tmp_path)
    for t in KAFKA_CASE:
        idx.append(t)
    a = KAFKA_CASE
    # (fetch offset, upper bound) -> (expected, complete), worked out by hand from the rule:
    # keep lastOffset >= fetch and firstOffset < bound; stop at the first LSO >= bound.
    cases = {
        (0, 100): (a, False),
        (0, 32): (a[:3], True),  # entry 3 starts at the bound; its LSO 40 >= 32 ends the search
        (0, 35): (a, True),
        (10, 35): (a, True),
        (11, 35): (a[1:], True),  # entry 0 ended at 10
        (20, 41): (a[2:], False),  # no LSO reaches 41
        (0, 12): (a[:2], True),  # entry 1 (LSO 13) ends it; entry 2 starts at 18
        (51, 100): ([], False),
        (0, 1): ([a[0]], True),  # LSO 11 >= 1 at the first entry
    }
    for (fetch, bound), (want, complete) in cases.items():
        got = idx.collect_aborted(fetch, bound)
        assert (got.aborted, got.is_complete) == (want, complete), (fetch, bound)
        aborted, is_complete = got  # unpacks as Kafka's (list, isComplete)
        assert is_complete == complete


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 30), st.integers(1, 40), st.integers(0, 40)), max_size=12),
    st.integers(0, 300),
    st.integers(0, 300),
)
def test_collect_aborted_matches_an_overlap_model(tmp_path_factory, shape, fetch, bound):
    """Model (Kafka's TransactionIndex.collectAbortedTxns): an entry is collected when
    last >= fetch and first < bound — the ranges intersect whenever fetch < bound, and an empty
    fetch (fetch == bound) still collects a transaction spanning it, as Kafka does; the search
    stops after the first entry whose LSO is at or past the bound."""
    idx = TransactionIndex(tmp_path_factory.mktemp("t") / "0.txnindex", 0)
    txns, last = [], -1
    for pid, (span, gap, lso_gap) in enumerate(shape):
        last += gap
        first = max(0, last - span)
        txns.append(AbortedTxn(pid, first, last, last + lso_gap))
        idx.append(txns[-1])
    stop = next((i for i, t in enumerate(txns) if t.last_stable_offset >= bound), None)
    scanned = txns if stop is None else txns[: stop + 1]
    want = [t for t in scanned if t.last_offset >= fetch and t.first_offset < bound]
    got = idx.collect_aborted(fetch, bound)
    assert got.aborted == want and got.is_complete == (stop is not None)


def test_torn_tail_is_reported_and_ignored_by_readers(tmp_path):
    idx = index(tmp_path, 5)
    idx.append(AbortedTxn(1, 5, 6, 7))
    idx.append(AbortedTxn(2, 5, 9, 10))
    data = Path(idx.path).read_bytes()
    torn = data + entry(3, 11, 12, 13)[:20]  # a crash mid-append
    Path(idx.path).write_bytes(torn)
    fresh = index(tmp_path, 5)
    with pytest.raises(
        CorruptIndexError,
        match=r"length 88 is not a multiple of the 34-byte entry size: "
        r"entry 2 at position 68 is torn \(20 bytes\)",
    ) as exc:
        fresh.sanity_check()
    assert fresh.path in str(exc.value)
    # As Kafka's iterator, a reader takes the whole entries only...
    assert fresh.all_entries() == [AbortedTxn(1, 5, 6, 7), AbortedTxn(2, 5, 9, 10)]
    # ...but appending behind a torn entry would misalign the file: refused until rebuilt.
    with pytest.raises(CorruptIndexError, match="holds 88 bytes"):
        fresh.append(AbortedTxn(3, 11, 12, 13))
    assert Path(idx.path).read_bytes() == torn
    fresh.reset()
    fresh.sanity_check()


@pytest.mark.parametrize(
    "content, fault",
    [
        (entry(1, 5, 6, 7) + entry(2, 5, 9, 10, version=1), r"entry 1 at position 34: version 1, expected 0"),
        (
            entry(1, 5, 9, 10) + entry(2, 5, 9, 10),
            r"entry 1 at position 34: last offset 9 does not follow "
            r"the previous entry's 9",
        ),
        (entry(1, 5, 9, 10) + entry(2, 5, 8, 10), r"entry 1 at position 34: last offset 8 does not follow"),
        (entry(1, 0, 4, 5), r"entry 0 at position 0: last offset 4 is below the segment's base offset 5"),
        (entry(1, 8, 7, 9), r"entry 0 at position 0: first offset 8 is after the last offset 7"),
    ],
)
def test_sanity_check_names_file_and_entry(tmp_path, content, fault):
    idx = index(tmp_path, 5)
    Path(idx.path).write_bytes(content)
    with pytest.raises(CorruptIndexError, match=fault) as exc:
        idx.sanity_check()
    assert str(exc.value).startswith(f"transaction index {idx.path}: ")


def test_unknown_version_fails_readers(tmp_path):
    idx = index(tmp_path)
    Path(idx.path).write_bytes(entry(1, 0, 1, 2, version=3))
    with pytest.raises(CorruptIndexError, match="entry 0 at position 0: unknown aborted transaction version 3"):
        idx.collect_aborted(0, 10)


def test_flush_rename_delete_close(tmp_path):
    idx = index(tmp_path, 0)
    idx.flush()  # nothing written: nothing to do
    idx.append(AbortedTxn(1, 0, 3, 4))
    idx.flush()
    idx.flush()
    new = str(tmp_path / "00000000000000000000.txnindex.deleted")
    idx.rename_to(new)
    assert idx.path == new and os.path.exists(new)
    assert not os.path.exists(tmp_path / "00000000000000000000.txnindex")
    assert idx.all_entries() == [AbortedTxn(1, 0, 3, 4)]
    idx.append(AbortedTxn(1, 0, 5, 6))
    assert os.path.getsize(new) == 68
    idx.close()
    idx.close()
    with pytest.raises(KafkaStorageError, match="is closed"):
        idx.append(AbortedTxn(1, 0, 7, 8))
    assert idx.collect_aborted(0, 10).aborted == [AbortedTxn(1, 0, 3, 4), AbortedTxn(1, 0, 5, 6)]
    assert idx.delete() is True and not os.path.exists(new)
    assert idx.delete() is False
    absent = index(tmp_path, 7)
    absent.rename_to(tmp_path / "x.txnindex")  # nothing to rename: just follows the name
    assert absent.path == str(tmp_path / "x.txnindex") and not absent.exists
