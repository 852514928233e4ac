"""Damaged files: flipped bits, a torn last batch (every byte of it), zeroed / cut / deleted /
scrambled indexes, a full disk in the middle of an append. Every reopen keeps exactly the valid
prefix (compared with the records written) or fails with a clear error."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from seglog.errors import CorruptRecordError, KafkaStorageError, StorageError
from seglog.storage.log import Log
from seglog.storage.records import batch_headers, decode_records
from tests.conftest import T0
from tests.logkit import batch

CONFIG = {"segment.bytes": 2000, "index.interval.bytes": 100, "segment.index.bytes": 4096}


def write_log(root, n=60, name="t-0"):
    """A closed log of ``n`` single-record batches; returns (dir, values)."""
    log = Log.open(root / name, CONFIG)
    vals = []
    for k in range(n):
        b = batch(1, ts=T0 + k, size=20 + k % 30, tag=k)
        log.append(b)
        vals.append(decode_records(b)[0].value)
    log.close()
    return root / name, vals


def read_all(log):
    out, off = [], log.log_start_offset
    while off < log.log_end_offset:
        recs = decode_records(log.read(off, 1 << 20, upper_bound="log_end").to_bytes(), verify_crc=True, min_offset=off)
        out += [(r.offset, r.value) for r in recs]
        off = recs[-1].offset + 1
    return out


def unclean(root):
    """Forget the recovery point, as after a crash before any checkpoint."""
    p = root / "recovery-point-offset-checkpoint"
    if p.exists():
        p.unlink()


def segment_files(d):
    return sorted(p for p in d.iterdir() if p.suffix == ".log")


def flip(path, position, mask=0x01):
    with open(path, "r+b") as f:
        f.seek(position)
        b = f.read(1)[0]
        f.seek(position)
        f.write(bytes([b ^ mask]))


# -- bit flips ---------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["old", "last"])
def test_bit_flip_keeps_the_valid_prefix(tmp_path, which):
    d, vals = write_log(tmp_path)
    logs = segment_files(d)
    target = logs[1] if which == "old" else logs[-1]
    heads = batch_headers(target.read_bytes())
    h = heads[len(heads) // 2] if which == "old" else heads[-1]
    flip(target, h.position + h.size - 3)  # inside the record data
    unclean(tmp_path)
    size = target.stat().st_size
    later_bytes = sum(p.stat().st_size for p in logs if p > target)
    log = Log.open(d, CONFIG)
    s = log.recovery_summary
    assert s.bytes_truncated == size - h.position
    # Everything recovery removed: the cut tail and the later segments, in bytes and records.
    assert s.bytes_removed == size - h.position + later_bytes
    assert s.records_removed == len(vals) - h.base_offset
    assert s.segments_deleted == len(logs) - 1 - logs.index(target)
    assert any("CRC mismatch" in r and str(target) in r for r in s.reasons)
    assert read_all(log) == list(enumerate(vals))[: h.base_offset]
    assert log.log_end_offset == h.base_offset
    assert os.path.getsize(target) == h.position
    # Every later segment went with it; appends continue at the cut.
    assert [p for p in segment_files(d) if p > target] == []
    assert log.append(batch(1)).first_offset == h.base_offset
    log.close()


def test_bit_flip_in_a_header_length(tmp_path):
    d, vals = write_log(tmp_path)
    target = segment_files(d)[0]
    h = batch_headers(target.read_bytes())[3]
    flip(target, h.position + 8, 0x40)  # batchLength grows by 2**30
    unclean(tmp_path)
    log = Log.open(d, CONFIG)
    assert log.log_end_offset == h.base_offset == 3
    assert read_all(log) == list(enumerate(vals))[:3]
    log.close()


def test_bit_flip_below_the_recovery_point_is_caught_by_the_reader(tmp_path):
    """A segment below the recovery point is not re-validated on open (as in Kafka); its
    corruption reaches the reader as a CRC error naming the position, never as records."""
    d, vals = write_log(tmp_path)
    target = segment_files(d)[0]
    h = batch_headers(target.read_bytes())[2]
    flip(target, h.position + h.size - 2)
    log = Log.open(d, CONFIG)
    assert log.recovery_summary.bytes_truncated == 0
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_records(log.read(h.base_offset, 1).to_bytes(), verify_crc=True)
    log.close()
    # Forcing full recovery keeps the valid prefix.
    unclean(tmp_path)
    log = Log.open(d, CONFIG)
    assert read_all(log) == list(enumerate(vals))[: h.base_offset]
    log.close()


# -- torn last batch ---------------------------------------------------------------------------


def test_torn_last_batch_at_every_byte(tmp_path):
    d, vals = write_log(tmp_path, n=8)
    last = segment_files(d)[-1]
    data = last.read_bytes()
    h = batch_headers(data)[-1]
    keep = tmp_path / "pristine"
    shutil.copytree(d, keep)
    for cut in range(h.position, h.position + h.size):
        shutil.rmtree(d)
        shutil.copytree(keep, d)
        os.truncate(d / last.name, cut)
        unclean(tmp_path)
        log = Log.open(d, CONFIG)
        assert log.log_end_offset == h.base_offset, cut
        assert os.path.getsize(d / last.name) == h.position
        assert read_all(log) == list(enumerate(vals))[: h.base_offset]
        log.close()


def test_garbage_after_the_last_batch(tmp_path):
    d, vals = write_log(tmp_path, n=8)
    last = segment_files(d)[-1]
    size = last.stat().st_size
    for junk in (b"\0" * 100, os.urandom(5), os.urandom(3000)):
        with open(last, "ab") as f:
            f.write(junk)
        unclean(tmp_path)
        log = Log.open(d, CONFIG)
        assert read_all(log) == list(enumerate(vals))
        assert last.stat().st_size == size
        log.close()


# -- indexes -----------------------------------------------------------------------------------


def index_files(d):
    return {p.name: p.read_bytes() for p in d.iterdir() if p.suffix in (".index", ".timeindex")}


@pytest.mark.parametrize("damage", ["zero", "cut", "delete", "garbage", "empty"])
@pytest.mark.parametrize("kind", [".index", ".timeindex"])
def test_damaged_index_is_rebuilt(tmp_path, damage, kind):
    d, vals = write_log(tmp_path)
    original = index_files(d)
    victim = sorted(p for p in d.iterdir() if p.suffix == kind)[1]
    size = victim.stat().st_size
    assert size > 0
    if damage == "zero":
        victim.write_bytes(bytes(size))
    elif damage == "cut":
        os.truncate(victim, size - 3)
    elif damage == "delete":
        victim.unlink()
    elif damage == "garbage":
        victim.write_bytes(os.urandom(size))
    else:
        victim.write_bytes(b"")
    log = Log.open(d, CONFIG)
    assert read_all(log) == list(enumerate(vals))
    for off in range(len(vals)):
        assert decode_records(log.read(off, 1).to_bytes())[0].offset == off
    ts = log.offset_for_timestamp(T0 + 31)
    assert ts == (31, T0 + 31)
    log.close()
    got = index_files(d)
    if damage == "zero" or damage == "empty":
        # An all-zero or empty file is a valid index without entries: lookups still work
        # (they scan), and the file is not rebuilt.
        assert {k: v for k, v in got.items() if k != victim.name} == {
            k: v for k, v in original.items() if k != victim.name
        }
    else:
        assert got == original


# -- full disk ---------------------------------------------------------------------------------


def _mount(args, what):
    r = subprocess.run(["mount", *args], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount {what} here (needs root/CAP_SYS_ADMIN): {r.stderr.strip()}")


@pytest.fixture(params=["tmpfs", "ext4"])
def small_disk(tmp_path, request):
    """A tiny file system: tmpfs, or ext4 on a loop device. On ext4 appends allocate blocks
    ahead with fallocate, so a full disk first refuses an allocation; its 1 KiB blocks are
    smaller than a page, so a store through an index mapping faults in four blocks at once."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if request.param == "tmpfs":
        _mount(["-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], "a size-limited tmpfs")
    else:
        if shutil.which("mkfs.ext4") is None:
            pytest.skip("mkfs.ext4 is not installed")
        image = tmp_path / "disk.img"
        with open(image, "wb") as f:
            f.truncate(512 * 1024)
        subprocess.run(
            ["mkfs.ext4", "-q", "-F", "-b", "1024", "-O", "^has_journal", str(image)], check=True, capture_output=True
        )
        _mount(["-o", "loop", str(image), str(mnt)], "an ext4 image on a loop device")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill_disk(root, leave_pages):
    fd = os.open(root / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\1" * 65536)
    except OSError:
        pass
    try:
        while True:
            os.write(fd, b"\1" * 4096)
    except OSError:
        pass
    os.close(fd)
    os.truncate(root / "filler", os.path.getsize(root / "filler") - leave_pages * 4096)


@pytest.mark.parametrize("leave_pages", [0, 1, 2, 3, 5, 8, 13, 20, 30, 40])
def test_disk_full_in_the_middle_of_an_append(small_disk, leave_pages):
    fill_disk(small_disk, leave_pages)
    d = small_disk / "t-0"
    written = []
    try:
        log = Log.open(d, {**CONFIG, "segment.bytes": 60_000})
    except StorageError as exc:  # no room even for the first segment
        assert "t-0" in str(exc)
        return
    error = None
    for k in range(400):
        b = batch(4, ts=T0 + k, size=300, tag=k)
        try:
            info = log.append(b)
        except KafkaStorageError as exc:
            error = exc
            break
        written += [(info.first_offset + i, r.value) for i, r in enumerate(decode_records(b))]
    assert error is not None, "the disk never filled"
    assert isinstance(error, StorageError)
    assert error.path and str(d) in str(error.path) and str(error.path) in str(error)
    assert "No space left on device" in str(error)
    # Exactly the earlier records, nothing of the failed append.
    assert log.log_end_offset == len(written)
    assert read_all(log) == written
    for _ in range(3):  # still failing cleanly, nothing half written
        with pytest.raises(KafkaStorageError):
            log.append(batch(4, size=300))
    assert read_all(log) == written
    try:
        log.close()
    except StorageError as exc:  # the checkpoint may not fit either: named
        assert str(small_disk) in str(exc)
    assert log.closed
    cfg = {**CONFIG, "segment.bytes": 60_000}
    try:
        log = Log.open(d, cfg)
    except StorageError as exc:
        # Recovery must write index entries; with no room it fails, naming the file...
        assert str(d) in str(exc) and "No space left on device" in str(exc)
        log = Log.open(d, cfg, read_only=True)  # ...and the data is still readable.
    assert read_all(log) == written
    try:
        log.close()
    except StorageError as exc:
        assert str(small_disk) in str(exc)
    # With room again, the log opens with exactly those records and appends continue.
    (small_disk / "filler").unlink()
    log = Log.open(d, cfg)
    assert read_all(log) == written
    assert log.append(batch(1)).first_offset == len(written)
    log.close()
