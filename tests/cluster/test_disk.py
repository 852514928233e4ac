"""Disk fault injectors on real seglog logs: power loss driven by the node-side fsync journal
(checked against what a killed writer reported as flushed), torn and corrupt tails (checked by
reopening with seglog's recovery), and disk full on a size-limited tmpfs."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from seglog.storage.log import FSYNC_JOURNAL_ENV, Log
from seglog.storage.records import decode_records, encode_batch
from tests.cluster.disk import (
    Tmpfs,
    batches_in,
    flip_bit,
    garbage_tail,
    power_loss,
    read_journal,
    segments_of,
    tmpfs_available,
    torn_tail,
)
from tests.conftest import ROOT

CONFIG = {"segment.bytes": 4000, "index.interval.bytes": 200}

WRITER = r"""
import sys
from seglog.storage.log import Log
from seglog.storage.records import encode_batch
log = Log.open(sys.argv[1], {"segment.bytes": 4000, "index.interval.bytes": 200})
k = 0
while True:
    first = log.log_end_offset
    log.append(encode_batch([b"v%d." % (first + i) + b"x" * 40 for i in range(1 + k % 3)], timestamps=1700000000000 + k))
    k += 1
    if k % 7 == 0:
        log.flush()
        print("flushed", log.log_end_offset, flush=True)
    print("end", log.log_end_offset, flush=True)
"""


def values(d: Path) -> list[tuple[int, bytes | None]]:
    log = Log.open(d, CONFIG)
    try:
        out = []
        pos = log.log_start_offset
        while pos < log.log_end_offset:
            data = log.read(pos, 1 << 20, upper_bound="log_end").to_bytes()
            recs = list(decode_records(data))
            out += [(r.offset, r.value) for r in recs]
            pos = recs[-1].offset + 1
        return out
    finally:
        log.close()


def expected(n: int) -> list[tuple[int, bytes]]:
    return [(o, b"v%d." % o + b"x" * 40) for o in range(n)]


def _kill_writer(d: Path, journal: Path, seconds: float) -> tuple[int, int]:
    env = {
        **os.environ,
        FSYNC_JOURNAL_ENV: str(journal),
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    p = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(d)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    time.sleep(seconds)
    p.send_signal(signal.SIGKILL)
    out, err = p.communicate()
    assert b"Traceback" not in err, err.decode()
    flushed = [int(l.split()[1]) for l in out.splitlines() if l.startswith(b"flushed ")]
    ends = [int(l.split()[1]) for l in out.splitlines() if l.startswith(b"end ")]
    assert flushed and ends, out[-300:]
    return flushed[-1], ends[-1]


@pytest.mark.parametrize("seed", [1, 2])
def test_power_loss_after_sigkill_keeps_exactly_the_fsynced_prefix(tmp_path: Path, seed: int) -> None:
    d = tmp_path / "data" / "t-0"
    journal = tmp_path / "fsync.journal"
    flushed, written = _kill_writer(d, journal, 1.0 + 0.3 * seed)
    rp = read_journal(str(journal))[str(d)]
    assert flushed <= rp <= written + 3  # the journal line precedes the print; a batch may follow
    cut = power_loss(str(tmp_path / "data"), str(journal))
    assert cut[str(d)]["recovery_point"] == rp
    got = values(d)
    assert got == expected(rp), f"after the cut: {len(got)} records, journal says {rp} were fsynced"
    assert len(segments_of(str(d))) > 1  # the run crossed segment rolls


def test_power_loss_keep_random_leaves_a_prefix_between_synced_and_written(tmp_path: Path) -> None:
    d = tmp_path / "data" / "t-0"
    journal = tmp_path / "fsync.journal"
    _kill_writer(d, journal, 1.0)
    rp = read_journal(str(journal))[str(d)]
    total = written_end(d)
    power_loss(str(tmp_path / "data"), str(journal), random.Random(5), keep="random")
    got = values(d)
    assert rp <= len(got) <= total
    assert got == expected(len(got))


def written_end(d: Path) -> int:
    return max(b.last_offset + 1 for _, p in segments_of(str(d)) for b in batches_in(p))


def test_power_loss_after_truncation_forgets_the_reappended_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = tmp_path / "fsync.journal"
    monkeypatch.setenv(FSYNC_JOURNAL_ENV, str(journal))
    d = tmp_path / "data" / "t-0"
    log = Log.open(d, CONFIG)
    for i in range(20):
        log.append(encode_batch([b"v%d." % i + b"x" * 40], timestamps=1))
    log.flush()
    log.truncate_to(12)
    for i in range(12, 30):
        log.append(encode_batch([b"v%d." % i + b"x" * 40], timestamps=1))
    log.abandon()
    assert read_journal(str(journal))[str(d)] == 12
    power_loss(str(tmp_path / "data"), str(journal))
    assert values(d) == expected(12)


def test_power_loss_without_journal_uses_the_checkpointed_recovery_point(tmp_path: Path) -> None:
    d = tmp_path / "data" / "t-0"
    log = Log.open(d, CONFIG)
    for i in range(10):
        log.append(encode_batch([b"v%d." % i + b"x" * 40], timestamps=1))
    log.flush()
    log.checkpoint()
    for i in range(10, 15):
        log.append(encode_batch([b"v%d." % i + b"x" * 40], timestamps=1))
    log.abandon()
    rep = power_loss(str(tmp_path / "data"), str(tmp_path / "missing.journal"))
    assert rep[str(d)]["recovery_point"] == 10 and rep[str(d)]["lost_batches"] == 5
    assert values(d) == expected(10)


def _unflushed_log(d: Path, n: int = 30) -> None:
    log = Log.open(d, CONFIG)
    for i in range(n):
        log.append(encode_batch([b"v%d." % i + b"x" * 40], timestamps=1))
    log.abandon()  # killed: nothing flushed, so recovery scans every segment


@pytest.mark.parametrize("seed", range(4))
def test_torn_tail_is_cut_back_to_whole_batches(tmp_path: Path, seed: int) -> None:
    d = tmp_path / "t-0"
    _unflushed_log(d)
    seg = segments_of(str(d))[-1][1]
    before = batches_in(seg)
    cut = torn_tail(str(d), random.Random(seed))
    survivors = [b for b in before if b.position + b.size <= cut]
    assert len(survivors) >= len(before) - 3 and len(survivors) < len(before)
    got = values(d)
    assert got == expected(survivors[-1].last_offset + 1 if survivors else before[0].base_offset)


def test_garbage_tail_is_dropped(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    _unflushed_log(d)
    garbage_tail(str(d), random.Random(1), 300)
    assert values(d) == expected(30)


def test_bit_flip_in_the_last_batch_loses_only_that_batch(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    _unflushed_log(d)
    _, _, base = flip_bit(str(d), random.Random(3), "last")
    assert base == 29
    assert values(d) == expected(29)


def test_bit_flip_in_an_older_batch_cuts_the_log_there(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    _unflushed_log(d)
    _, _, base = flip_bit(str(d), random.Random(4), "older")
    assert base < 29
    assert values(d) == expected(base)


DISK_FULL_CHILD = r"""
import sys
from seglog.storage.log import Log
from seglog.storage.records import encode_batch
log = Log.open(sys.argv[1], {"segment.bytes": 65536, "index.interval.bytes": 512, "segment.index.bytes": 4096})
n = 0
try:
    while True:
        log.append(encode_batch([b"v%d." % n + b"x" * 200], timestamps=1))
        n += 1
        print("ack", n, flush=True)
        if n % 10 == 0:
            log.flush()
except Exception as exc:
    print("error", type(exc).__name__, str(exc).replace("\n", " ")[:200], flush=True)
"""


def test_disk_full_on_tmpfs_fails_appends_cleanly_and_keeps_acked_records(tmp_path: Path) -> None:
    reason = tmpfs_available()
    if reason is not None:
        pytest.skip(f"no size-limited tmpfs here: {reason}")
    mnt = tmp_path / "mnt"
    with Tmpfs(str(mnt), "2m") as fs:
        fs.fill(leave=300_000)
        d = mnt / "t-0"
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        r = subprocess.run([sys.executable, "-c", DISK_FULL_CHILD, str(d)], capture_output=True, timeout=60, env=env)
        lines = r.stdout.decode().splitlines()
        acked = [int(l.split()[1]) for l in lines if l.startswith("ack ")]
        errors = [l for l in lines if l.startswith("error ")]
        assert r.returncode == 0, (
            f"the writer died with {r.returncode} (SIGBUS is -7) after {len(acked)} acks: {r.stderr.decode()[-500:]}"
        )
        assert errors, lines[-5:]
        assert "Storage" in errors[0] or "OSError" in errors[0] or "No space" in errors[0], errors[0]
        fs.free()
        got = values(d)
        assert [o for o, _ in got][: acked[-1]] == list(range(acked[-1]))  # every acked record is there, intact
        for o, v in got:
            assert v == b"v%d." % o + b"x" * 200
