"""Log.abandon: the files as a killed process leaves them."""

from __future__ import annotations

import os

from seglog.storage.log import Log
from seglog.storage.records import decode_records, encode_batch


def test_abandon_keeps_written_data_and_forces_recovery(tmp_path: os.PathLike[str]) -> None:
    d = os.path.join(tmp_path, "t-0")
    log = Log.open(d, {"flush.messages": 1 << 40})
    for i in range(5):
        log.append(encode_batch([b"v%d" % i], timestamps=1_700_000_000_000))
    assert log.recovery_point == 0
    log.abandon()
    assert log.closed
    log.abandon()  # idempotent
    assert not os.path.exists(os.path.join(tmp_path, "recovery-point-offset-checkpoint"))
    again = Log.open(d)
    try:
        assert again.recovery_summary.segments_recovered == 1
        assert again.log_end_offset == 5
        assert [r.value for r in decode_records(again.read(0, upper_bound="log_end").to_bytes())] == [
            b"v%d" % i for i in range(5)
        ]
    finally:
        again.close()


def test_abandon_with_a_live_view_closes_the_rest(tmp_path: os.PathLike[str]) -> None:
    d = os.path.join(tmp_path, "t-0")
    log = Log.open(d)
    log.append(encode_batch([b"x"], timestamps=1_700_000_000_000))
    res = log.read(0)
    views = res.views()
    log.abandon()
    assert log.closed
    assert bytes(views[0])[:8] == (0).to_bytes(8, "big")
    del views, res
