"""Crashes of a writing process (``os._exit`` in a child, no close): what was fsynced or
committed survives, a torn tail is cut, an interrupted cleaning is completed or undone."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from seglog import Store
from seglog.storage.records import decode_records
from tests.conftest import run_python


def _all(store: Store, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    lg = store.log(topic, 0)
    if lg.log_end_offset == lg.log_start_offset:
        return []
    return [(r.offset, r.key, r.value) for r in decode_records(lg.read(lg.log_start_offset, 1 << 30).to_bytes())]


def test_crash_keeps_flushed_records_and_commits(tmp_path: Path) -> None:
    out = run_python(f"""
        import os
        from seglog import Store
        s = Store.open({str(tmp_path)!r})
        s.create_topic("t", 1, {{"segment.bytes": 4096}})
        p = s.producer()
        p.send_batch("t", [b"flushed-%d" % i for i in range(500)], partition=0)
        s.flush()
        c = s.consumer(group_id="g", auto_offset_reset="earliest", enable_auto_commit=False)
        c.assign([("t", 0)])
        c.poll(max_records=123)
        c.commit()
        p.send_batch("t", [b"unflushed-%d" % i for i in range(10)], partition=0)
        os._exit(7)
    """)
    assert out.returncode == 7, out.stderr
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    # Tear the tail of the active segment: a half-written batch.
    seg = sorted((tmp_path / "t-0").glob("*.log"))[-1]
    with open(seg, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x01\x00garbage")
    with Store.open(tmp_path) as store:
        recs = _all(store, "t")
        assert [v for _, _, v in recs[:500]] == [b"flushed-%d" % i for i in range(500)]
        # The unflushed batch was in the page cache, so it survived the process crash; the
        # garbage after it did not.
        assert len(recs) == 510 and [o for o, _, _ in recs] == list(range(510))
        c = store.consumer(group_id="g")
        c.assign([("t", 0)])
        assert c.position(("t", 0)) == 123


CLEAN_CHILD = """
import os, random
from seglog import Store
from seglog.storage.cleaner import Cleaner
step = {step!r}
s = Store.open({path!r}, config={{"log.cleaner.enable": False}})
s.create_topic("c", 1, {{"cleanup.policy": "compact", "segment.bytes": 1500}})
p = s.producer()
rng = random.Random(5)
for i in range(400):
    k = b"k%d" % rng.randrange(25)
    p.send("c", None if i % 13 == 0 else b"v%d" % i, key=k)
s.flush()
lg = s.log("c", 0)
calls = []
def hook(name):
    calls.append(name)
    if name == step and len(calls) > 3:
        os._exit(9)
Cleaner(s.clock, crash_hook=hook).clean(lg, None, force=True)
os._exit(0)
"""


def _model(path: Path) -> dict[bytes, tuple[int, bytes | None]]:
    # The writes of CLEAN_CHILD, replayed: the latest (offset, value) of each key.
    import random

    rng = random.Random(5)
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    for i in range(400):
        k = b"k%d" % rng.randrange(25)
        latest[k] = (i, None if i % 13 == 0 else b"v%d" % i)
    return latest


@pytest.mark.parametrize("step", ["cleaned", "swap", "replaced"])
def test_crash_in_the_middle_of_cleaning(tmp_path: Path, step: str) -> None:
    out = run_python(CLEAN_CHILD.format(step=step, path=str(tmp_path)))
    assert out.returncode == 9, out.stderr
    names = os.listdir(tmp_path / "c-0")
    assert any(n.endswith((".cleaned", ".swap", ".deleted")) for n in names), names
    with Store.open(tmp_path) as store:
        names = os.listdir(tmp_path / "c-0")
        assert not any(n.endswith((".cleaned", ".swap")) for n in names), names
        recs = _all(store, "c")
        offsets = [o for o, _, _ in recs]
        assert offsets == sorted(set(offsets))  # no offset twice, in order
        latest: dict[bytes, tuple[int, bytes | None]] = {}
        for o, k, v in recs:
            assert k is not None
            latest[k] = (o, v)
        # Whatever was or was not cleaned, a reader sees the same latest value per key at the
        # same offset, and every record it sees was written at that offset.
        assert latest == _model(tmp_path)
        written = {i: (None if i % 13 == 0 else b"v%d" % i) for i in range(400)}
        assert all(written[o] == v for o, _, v in recs)
        # The log is consistent enough to clean again and to keep appending.
        from seglog.storage.cleaner import Cleaner

        Cleaner(store.clock).clean(store.log("c", 0), None, force=True)
        assert store.producer().send("c", b"after", key=b"z").offset == 400


def test_leftover_cleaner_files_are_removed_on_open(tmp_path: Path) -> None:
    with Store.open(tmp_path) as store:
        store.create_topic("c", 1, {"cleanup.policy": "compact"})
        store.producer().send("c", b"v", key=b"k")
    d = tmp_path / "c-0"
    (d / "00000000000000000000.log.cleaned").write_bytes(b"partial")
    (d / "00000000000000000000.index.cleaned").write_bytes(b"")
    with Store.open(tmp_path) as store:
        assert _all(store, "c") == [(0, b"k", b"v")]
    assert not any(n.endswith(".cleaned") for n in os.listdir(d))
    meta = json.loads((tmp_path / "seglog-metadata.json").read_text())
    assert meta["topics"]["c"]["config"] == {"cleanup.policy": "compact"}


EMPTY_GROUP_CHILD = """
import os
from seglog import Store
from seglog.storage.cleaner import Cleaner
step = {step!r}
s = Store.open({path!r}, config={{"log.cleaner.enable": False}})
s.create_topic("c", 1, {{"cleanup.policy": "compact", "segment.bytes": 600}})
p = s.producer()
for i in range(30):
    p.send("c", b"v%d-" % i + b"x" * 60, key=b"k%d" % (i % 3))
s.flush()
lg = s.log("c", 0)
lg.roll()
calls = []
def hook(name):
    calls.append(name)
    if name == step:
        os._exit(9)
Cleaner(s.clock, crash_hook=hook).clean(lg, None, force=True)
os._exit(0)
"""


@pytest.mark.parametrize("step", ["cleaned", "swap", "replaced"])
def test_crash_while_swapping_in_an_empty_cleaned_segment(tmp_path: Path, step: str) -> None:
    # The first group's records are all superseded: its cleaned segment is empty. Wherever the
    # swap stops, the log start offset stays 0 and the latest value of each key is readable.
    out = run_python(EMPTY_GROUP_CHILD.format(step=step, path=str(tmp_path)))
    assert out.returncode == 9, out.stderr
    with Store.open(tmp_path, config={"log.cleaner.enable": False}) as store:
        names = os.listdir(tmp_path / "c-0")
        assert not any(n.endswith((".cleaned", ".swap", ".deleted")) for n in names), names
        lg = store.log("c", 0)
        assert lg.log_start_offset == 0
        recs = _all(store, "c")
        offsets = [o for o, _, _ in recs]
        assert offsets == sorted(set(offsets)) and offsets[-3:] == [27, 28, 29]
        assert all(v == b"v%d-" % o + b"x" * 60 for o, _, v in recs)
        latest = {k: o for o, k, _ in recs}
        assert latest == {b"k0": 27, b"k1": 28, b"k2": 29}
        if step != "cleaned":
            assert lg.segments[0].base_offset == 0 and lg.segments[0].size == 0
        c = store.consumer(auto_offset_reset="earliest")
        c.assign([("c", 0)])
        assert [r.offset for r in c.poll(max_records=1000)] == offsets
        from seglog.storage.cleaner import Cleaner

        Cleaner(store.clock).clean(lg, None, force=True)
        assert lg.log_start_offset == 0
        assert [o for o, _, _ in _all(store, "c")] == [27, 28, 29]
