"""Open files: inactive segments open lazily and under a bound (the open-segment cache), and
partitions the open-file limit cannot hold are refused before anything is created."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from seglog import Log, Store
from seglog._native.segment import Segment, open_segment_limit, open_segments
from seglog.storage.cleaner import Cleaner
from seglog.storage.records import decode_records, encode_batch
from seglog.util.clock import ManualClock
from tests.conftest import T0, run_python


@pytest.fixture
def limit() -> Iterator[Any]:
    """Set the process-wide bound for one test; the default comes back afterwards."""
    yield open_segment_limit
    open_segment_limit(-1)


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _fill(directory: Path, batches: int, **config: Any) -> list[bytes]:
    """A log of small segments (3 records a batch, 2 batches a segment); returns the values."""
    cfg = {"segment.bytes": 700, **config}
    values = []
    with Log.open(directory, cfg) as lg:
        for i in range(batches):
            vals = [b"%06d-%d" % (i, k) + b"x" * 80 for k in range(3)]
            lg.append(encode_batch(vals, timestamps=T0 + i))
            values += vals
        assert len(lg.segments) > 5
    return values


def _files_open(seg: Segment) -> bool:
    """``seg.files_open`` read afresh: the cache closes files behind the caller's back, which a
    type checker that narrowed an earlier ``assert seg.files_open`` cannot know."""
    return seg.files_open


def _read_all(lg: Log, end: int) -> list[bytes | None]:
    out: list[bytes | None] = []
    offset = 0
    while offset < end:
        res = lg.read(offset, 300)
        recs = [r for r in decode_records(res.to_bytes()) if r.offset >= offset]
        out += [r.value for r in recs]
        offset = recs[-1].offset + 1
    return out


def test_opening_a_log_opens_only_its_active_segment(tmp_path: Path, limit: Any) -> None:
    values = _fill(tmp_path / "t-0", 60)
    limit(4)
    before = _fds()
    lg = Log.open(tmp_path / "t-0", {"segment.bytes": 700}, clean_shutdown=True)
    try:
        segs = lg.segments
        # .log + two index mappings, and the standalone Log's claim on its partition (the log
        # dir's .lock and the partition directory's flock: seglog.storage.logdir).
        assert _fds() - before == 3 + 2
        assert [s.files_open for s in segs] == [False] * (len(segs) - 1) + [True]
        assert _read_all(lg, lg.log_end_offset) == values
        assert open_segments() <= 4
        assert _fds() - before <= 3 * (4 + 1) + 2
        # Every segment was read; their state stays known after their files are closed.
        assert sum(s.files_open for s in segs[:-1]) <= 4
        assert segs[2].next_offset == segs[3].base_offset
        assert lg.offset_for_timestamp(T0 + 7) == (21, T0 + 7)
        assert lg.offset_for_timestamp(T0 + 59) == (177, T0 + 59)
    finally:
        lg.close()
    assert _fds() == before


def test_a_viewed_segment_is_never_closed_under_its_reader(tmp_path: Path, limit: Any) -> None:
    _fill(tmp_path / "t-0", 40)
    limit(1)
    with Log.open(tmp_path / "t-0", {"segment.bytes": 700}, clean_shutdown=True) as lg:
        first = lg.segments[0]
        views = lg.read(0, 100).views()
        head = bytes(views[0][:40])
        for offset in range(6, 90, 6):  # opens one older segment after another
            lg.read(offset, 100)
        assert first.files_open and first.live_views() == 1
        assert bytes(views[0][:40]) == head
        for v in views:
            v.release()
        lg.read(60, 100)
        lg.read(66, 100)
        assert not _files_open(first)
        assert open_segments() <= 1


def test_a_lazily_opened_segment_with_a_bad_index_is_rebuilt_on_first_use(tmp_path: Path, limit: Any) -> None:
    cfg = {"segment.bytes": 2000, "index.interval.bytes": 100}
    values = _fill(tmp_path / "t-0", 60, **cfg)
    index = sorted((tmp_path / "t-0").glob("*.index"))[2]
    data = bytearray(index.read_bytes())
    assert len(data) >= 16
    data[8:16] = data[0:8]  # entry 1 no longer follows entry 0
    index.write_bytes(bytes(data))
    limit(2)
    with Log.open(tmp_path / "t-0", cfg, clean_shutdown=True) as lg:
        seg = next(s for s in lg.segments if s.offset_index.path == str(index))
        seg.sanity_check()  # rebuilt when its files were opened
        assert _read_all(lg, lg.log_end_offset) == values


def test_retention_truncation_and_lookups_on_closed_segments(tmp_path: Path, limit: Any) -> None:
    values = _fill(tmp_path / "t-0", 60)
    limit(0)
    cfg = {"segment.bytes": 700, "retention.bytes": 2000, "retention.ms": -1}
    with Log.open(tmp_path / "t-0", cfg, clean_shutdown=True) as lg:
        assert not any(s.files_open for s in lg.segments[:-1])
        deleted = lg.delete_old_segments()
        assert deleted > 0 and lg.size <= 2000 + 700
        start = lg.log_start_offset
        assert _read_all_from(lg, start) == values[start:]
        # Nothing kept open between uses but the last segment read: its views were alive
        # when the read ended, and the cache looks again at its next use.
        assert open_segments() <= 1
        middle = lg.segments[1]
        cut = middle.base_offset + 3
        assert not _files_open(middle)
        assert lg.truncate_to(cut)
        assert lg.log_end_offset == cut and lg.active is middle and middle.files_open
        lg.append(encode_batch([b"new"], timestamps=T0 + 100))
        assert _read_all_from(lg, start) == values[start:cut] + [b"new"]
        assert lg.offset_for_timestamp(T0 + 100) == (cut, T0 + 100)
    # Gone files are gone; the log opens again as it was left.
    with Log.open(tmp_path / "t-0", cfg, clean_shutdown=True) as lg:
        assert _read_all_from(lg, lg.log_start_offset) == values[start:cut] + [b"new"]


def _read_all_from(lg: Log, start: int) -> list[bytes | None]:
    out: list[bytes | None] = []
    offset = start
    while offset < lg.log_end_offset:
        recs = [r for r in decode_records(lg.read(offset, 250).to_bytes()) if r.offset >= offset]
        out += [r.value for r in recs]
        offset = recs[-1].offset + 1
    return out


def test_compaction_swaps_segments_whose_files_are_closed(tmp_path: Path, limit: Any) -> None:
    clock = ManualClock(T0)
    with Store.open(tmp_path / "s", {"log.cleaner.enable": False}, clock=clock) as store:
        store.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": 600})
        producer = store.producer()
        for i in range(120):
            producer.send("c", b"v%d" % i + b"x" * 60, key=b"k%d" % (i % 5), partition=0)
        producer.flush()
    limit(0)
    with Store.open(tmp_path / "s", {"log.cleaner.enable": False}, clock=clock) as store:
        lg = store.log("c", 0)
        assert not any(s.files_open for s in lg.segments[:-1])
        res = Cleaner(clock).clean(lg, None, force=True)
        assert res is not None
        data = lg.read(lg.log_start_offset, 1 << 24, upper_bound="log_end").to_bytes()
        latest = {r.key: r.value for r in decode_records(data)}
        assert latest == {b"k%d" % k: b"v%d" % i + b"x" * 60 for i, k in ((115 + k, k) for k in range(5))}
        # The segments read last stay open while their views live; the next look closes them.
        limit(0)
        assert open_segments() == 0


def test_too_many_partitions_for_the_file_limit_are_refused_before_anything_is_created(tmp_path: Path) -> None:
    proc = run_python(
        f"""
        import json, os, resource
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        from seglog import Store
        from seglog.errors import InvalidPartitionsError
        store = Store.open({str(tmp_path / "s")!r})
        try:
            store.create_topic("big", 100)
        except InvalidPartitionsError as exc:
            print("REFUSED", exc)
        else:
            raise SystemExit("100 partitions were accepted under a limit of 256 descriptors")
        store.create_topic("small", 10)
        try:
            store.create_partitions("small", 90)
        except InvalidPartitionsError as exc:
            print("REFUSED", exc)
        store.close()
        # A store whose partitions do not fit the limit fails to open naming it.
        resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 20,
                                                    resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        try:
            Store.open({str(tmp_path / "s")!r})
        except OSError as exc:
            print("OPEN FAILED", exc)
        print("FDS", len(os.listdir("/proc/self/fd")))
    """,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    refusals = [line for line in proc.stdout.splitlines() if line.startswith("REFUSED")]
    assert len(refusals) == 2, proc.stdout
    assert "RLIMIT_NOFILE is 256" in refusals[0] and "ulimit -n" in refusals[0]
    assert "create topic 'big' with 100 partitions" in refusals[0]
    assert "grow topic 'small' from 10 to 90" in refusals[1]
    failed = next(line for line in proc.stdout.splitlines() if line.startswith("OPEN FAILED"))
    assert "too many open files" in failed and "RLIMIT_NOFILE" in failed, failed
    names = sorted(os.listdir(tmp_path / "s"))
    assert not [n for n in names if n.startswith("big-")]
    assert sorted(n for n in names if n.startswith("small-")) == sorted(f"small-{p}" for p in range(10))
    meta = json.loads((tmp_path / "s" / "seglog-metadata.json").read_text())
    assert set(meta["topics"]) == {"small"} and meta["topics"]["small"]["partitions"] == 10


def test_out_of_descriptors_idle_segments_are_closed_then_the_error_names_the_limit(tmp_path: Path) -> None:
    values = _fill(tmp_path / "t-0", 60)
    proc = run_python(
        f"""
        import os, resource
        from seglog import Log
        from seglog.errors import StorageError
        from seglog.storage.records import decode_records
        from seglog.storage.log import open_segment_limit, open_segments
        open_segment_limit(1000)           # a bound the limit below cannot hold
        base = len(os.listdir("/proc/self/fd"))
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (base + 12, hard))
        lg = Log.open({str(tmp_path / "t-0")!r}, {{"segment.bytes": 700}}, clean_shutdown=True)
        values, offset = [], 0
        while offset < lg.log_end_offset:
            recs = [r for r in decode_records(lg.read(offset, 300).to_bytes()) if r.offset >= offset]
            values += [r.value for r in recs]
            offset = recs[-1].offset + 1
        print("READ", len(values), open_segments())
        # Every open segment viewed: nothing idle to close, the next open fails clearly.
        open_segment_limit(0)
        resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 7, hard))
        held = []
        try:
            for s in lg.segments:
                held.append(lg.read(s.base_offset, 10).views())
        except StorageError as exc:
            print("HELD", len(held))
            print("ERROR", exc)
    """,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert f"READ {len(values)} " in proc.stdout, proc.stdout
    error = next(line for line in proc.stdout.splitlines() if line.startswith("ERROR"))
    assert "too many open files" in error and "RLIMIT_NOFILE" in error and "ulimit -n" in error
    assert "HELD " in proc.stdout and "HELD 0" not in proc.stdout, proc.stdout


PARTITIONS = 1500
SEGMENTS = 5
#: Under the descriptors every segment's files would take (PARTITIONS * SEGMENTS * 3), above what
#: the active segments (one a partition, always open) and the open-segment cache need.
NOFILE = 5500


def test_a_store_with_thousands_of_partitions_opens_under_a_low_file_limit(tmp_path: Path) -> None:
    """1,500 partitions of 5 segments each: 7,500 segments, 22,500 descriptors if every
    segment's files were open; the store opens and every partition reads back under 5,500."""
    d = tmp_path / "s"
    with Store.open(d, {"log.segment.bytes": 600}) as store:
        store.create_topic("t", 1)
        producer = store.producer()
        records = 0
        while len(store.log("t", 0).segments) < SEGMENTS:
            producer.send("t", b"%04d" % records + b"x" * 100, partition=0)
            producer.flush()
            records += 1
    src = d / "t-0"
    files = sorted(os.listdir(src))
    logs = sorted(f for f in files if f.endswith(".log"))
    assert len(logs) == SEGMENTS, logs
    active = logs[-1][:-4]
    # The other partitions are the same data: inactive segments' files hard-linked (they are
    # only read), the active segment's and the metadata files copied.
    for p in range(1, PARTITIONS):
        dst = d / f"t-{p}"
        dst.mkdir()
        for f in files:
            if f.startswith(active) or not f[:20].isdigit():
                (dst / f).write_bytes((src / f).read_bytes())
            else:
                os.link(src / f, dst / f)
    meta = json.loads((d / "seglog-metadata.json").read_text())
    meta["topics"]["t"]["partitions"] = PARTITIONS
    (d / "seglog-metadata.json").write_text(json.dumps(meta))
    proc = run_python(
        f"""
        import os, resource, time
        resource.setrlimit(resource.RLIMIT_NOFILE, ({NOFILE}, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        from seglog import Store
        from seglog._native.segment import open_segments, open_segment_limit
        from seglog.storage.records import decode_records
        t = time.perf_counter()
        store = Store.open({str(d)!r})
        print("OPEN", round(time.perf_counter() - t, 2), len(os.listdir("/proc/self/fd")))
        assert store.partitions_for("t") == {PARTITIONS}
        for p in range({PARTITIONS}):
            lg = store.log("t", p)
            assert len(lg.segments) == {SEGMENTS}
            assert not any(s.files_open for s in lg.segments[:-1])
            values = []
            offset = 0
            while offset < lg.log_end_offset:
                recs = [r for r in decode_records(lg.read(offset, 1 << 20).to_bytes()) if r.offset >= offset]
                values += [r.value for r in recs]
                offset = recs[-1].offset + 1
            assert values == [b"%04d" % i + b"x" * 100 for i in range({records})], p
        assert open_segments() <= open_segment_limit()
        print("READ", len(os.listdir("/proc/self/fd")), open_segments())
        store.close()
    """,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout
    assert "READ" in proc.stdout, proc.stdout


def test_threads_reading_while_the_cache_closes_segments(tmp_path: Path, limit: Any) -> None:
    """Readers of two logs on four threads, a cache of one segment: every read sees its data
    while other threads keep closing and reopening the segments' files."""
    import random
    import threading

    values = _fill(tmp_path / "a-0", 60)
    _fill(tmp_path / "b-0", 60)
    limit(1)
    logs = [Log.open(tmp_path / name, {"segment.bytes": 700}, clean_shutdown=True) for name in ("a-0", "b-0")]
    errors: list[BaseException] = []

    def reader(lg: Log, seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(400):
                offset = rng.randrange(0, lg.log_end_offset)
                recs = [r for r in decode_records(lg.read(offset, 200).to_bytes()) if r.offset >= offset]
                assert recs and recs[0].offset == offset and recs[0].value == values[offset]
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=reader, args=(logs[k % 2], k)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for lg in logs:
        lg.close()
    assert not errors, errors[0]


def test_a_read_only_log_opens_only_its_active_segment_even_without_index_files(tmp_path: Path, limit: Any) -> None:
    values = _fill(tmp_path / "t-0", 60)
    for index in sorted((tmp_path / "t-0").glob("*.index"))[:3]:
        index.unlink()  # a broker's dir may lack them: scanned instead
    limit(2)
    before = _fds()
    with Log.open(tmp_path / "t-0", read_only=True) as lg:
        assert _fds() - before <= 3  # an empty index file is not mapped
        assert not any(s.files_open for s in lg.segments[:-1])
        assert _read_all(lg, lg.log_end_offset) == values
        assert _fds() - before <= 3 * (2 + 1)
    assert _fds() == before
    assert len(list((tmp_path / "t-0").glob("*.index"))) == len(list((tmp_path / "t-0").glob("*.log"))) - 3


def test_a_failure_closing_a_segment_does_not_fail_the_read_that_made_room(
    tmp_path: Path, limit: Any, caplog: Any
) -> None:
    values = _fill(tmp_path / "t-0", 60)
    index = sorted((tmp_path / "t-0").glob("*.index"))[1]
    with open(index, "ab") as f:
        f.write(bytes(80))  # a zero tail: not trimmed, as a crash leaves it
    limit(1)
    with Log.open(tmp_path / "t-0", {"segment.bytes": 700}, clean_shutdown=True) as lg:
        seg = lg.segments[1]
        lg.read(seg.base_offset, 100)
        assert seg.files_open
        # Replaced behind its back: trimming it when the cache closes the segment fails.
        copy = index.with_suffix(".copy")
        copy.write_bytes(index.read_bytes())
        os.replace(copy, index)
        with caplog.at_level("WARNING", logger="seglog.segment"):
            assert _read_all_from(lg, lg.segments[3].base_offset) == values[lg.segments[3].base_offset :]
        assert not _files_open(seg)
        assert any("no longer the file" in r.getMessage() for r in caplog.records)
        assert _read_all(lg, lg.log_end_offset) == values
