"""A writer killed with SIGKILL at random moments, in a loop: with ``flush.messages=1`` every
record whose append returned (acknowledged on stdout) is there after reopen, with its value, and
the next writer continues from the recovered end."""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time

from seglog.storage.log import Log
from seglog.storage.records import decode_records
from tests.conftest import ROOT

CHILD = r"""
import sys
from seglog.storage.log import Log
from seglog.storage.records import encode_batch

log = Log.open(sys.argv[1], {"flush.messages": 1, "segment.bytes": 20000, "index.interval.bytes": 500})
print("start", log.log_end_offset, flush=True)
k = 0
while True:
    n = 1 + k % 5
    first = log.log_end_offset
    vals = [b"o%d." % (first + i) + b"x" * (k % 300) for i in range(n)]
    info = log.append(encode_batch(vals, timestamps=1700000000000 + k))
    assert info.first_offset == first
    print("ack", info.last_offset, flush=True)
    k += 1
"""

CONFIG = {"segment.bytes": 20000, "index.interval.bytes": 500}


def run_round(d, rng, deadline):
    """Start a writer, kill it after a random time; return (start offset, acked offsets)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.Popen([sys.executable, "-c", CHILD, str(d)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert p.stdout is not None and p.stderr is not None
    stdout, stderr = p.stdout, p.stderr
    start, acked = None, []
    kill_at = None
    buf = b""
    try:
        while True:
            now = time.monotonic()
            if (kill_at is not None and now >= kill_at) or now > deadline:
                break
            r, _, _ = select.select([stdout], [], [], 0.01)
            if r:
                chunk = os.read(stdout.fileno(), 65536)
                if not chunk:
                    break
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    word, value = line.split()
                    if word == b"start":
                        start = int(value)
                        kill_at = time.monotonic() + rng.uniform(0.02, 0.4)
                    else:
                        acked.append(int(value))
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    # Lines written before the kill count as acknowledged too; a line the kill cut short (no
    # newline yet) names no offset for sure, so it is left out.
    rest = buf + stdout.read()
    for line in rest.split(b"\n")[:-1]:
        if line.startswith(b"ack "):
            acked.append(int(line.split()[1]))
    err = stderr.read().decode()
    stdout.close()
    stderr.close()
    assert start is not None, f"the writer did not start: {err}"
    assert "Traceback" not in err, err
    return start, acked


def test_acknowledged_records_survive_sigkill(tmp_path):
    d = tmp_path / "k-0"
    rng = random.Random(int(os.environ.get("SEGLOG_SIGKILL_SEED", "20240611")))
    deadline = time.monotonic() + 60
    expected_start = 0
    max_acked = -1
    total_acked = 0
    for _ in range(10):
        if time.monotonic() > deadline:
            break
        start, acked = run_round(d, rng, deadline)
        assert start == expected_start, "the writer must continue from the recovered end"
        total_acked += len(acked)
        if acked:
            assert acked == sorted(acked) and acked[0] >= start
            max_acked = max(max_acked, acked[-1])
        log = Log.open(d, CONFIG)
        try:
            assert log.log_end_offset > max_acked
            off = 0
            seen = 0
            while off < log.log_end_offset:
                recs = decode_records(log.read(off, 1 << 20).to_bytes(), verify_crc=True, min_offset=off)
                for r in recs:
                    assert r.offset == off + (r.offset - off)
                    assert r.value is not None and r.value.startswith(b"o%d." % r.offset), (r.offset, r.value)
                seen += len(recs)
                off = recs[-1].offset + 1
            assert seen == log.log_end_offset  # contiguous from 0
            expected_start = log.log_end_offset
        finally:
            log.close()
    assert total_acked > 0, "no append was acknowledged in any round"
