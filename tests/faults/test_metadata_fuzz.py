"""Damaged checkpoint and metadata files of every kind: the store and the log either recover
with a warning where Kafka recovers, or raise a seglog error naming the file; never a bare
codec or parser exception (UnicodeDecodeError, ValueError from int(), JSONDecodeError,
KeyError, TypeError, AttributeError)."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from seglog import Store
from seglog.errors import KafkaStorageError, SeglogError
from seglog.storage.checkpoints import (
    CorruptCheckpointError,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    read_checkpoint,
    read_meta_properties,
)
from seglog.storage.log import Log
from seglog.storage.producer_state import ProducerStateManager
from seglog.storage.records import decode_records, encode_batch
from tests.conftest import T0

DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "empty": lambda b: b"",
    "truncated": lambda b: b[: max(1, len(b) // 2)],
    "torn-last-line": lambda b: b[:-2] if len(b) > 2 else b"0",
    "garbage": lambda b: bytes(range(256)) * 2,
    "nul": lambda b: b"\x00" * 40,
    "invalid-utf8-first-line": lambda b: b"\xff\xfe" + b,
    "invalid-utf8-entry": lambda b: b + b"t\xc3 0 1\n",
    "wrong-version": lambda b: b"7" + b[1:] if b[:1].isdigit() else b.replace(b'"version": 1', b'"version": 9'),
    "wrong-count-high": lambda b: b.replace(b"\n", b"\n9", 1) if b[:1].isdigit() else b,
    "wrong-count-negative": lambda b: b"0\n-1\n",
    "unicode-digits": lambda b: "٠\n١\nt ٠ ٣\n".encode(),
    "python-int-syntax": lambda b: b"0\n1\nt 0 1_000\n",
    "plus-sign": lambda b: b"+0\n1\nt 0 +5\n",
    "extra-fields": lambda b: b"0\n1\nt 0 1 2 3\n",
    "json-list": lambda b: b"[1, 2, 3]",
    "json-wrong-types": lambda b: b'{"version": 1, "topics": {"t": {"partitions": "two"}}}',
    "json-topics-not-a-map": lambda b: b'{"version": 1, "topics": [1]}',
    "json-deep": lambda b: b"[" * 100_000,
    "directory": lambda b: b"",  # replaced by a directory below
}

FILES = [
    "recovery-point-offset-checkpoint",
    "replication-offset-checkpoint",
    "log-start-offset-checkpoint",
    "cleaner-offset-checkpoint",
    "seglog-metadata.json",
    "t-0/leader-epoch-checkpoint",
    "t-0/partition.metadata",
    "t-1/partition.metadata",
]

BARE = (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, AttributeError, IndexError, RecursionError)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pristine") / "store"
    with Store.open(d) as s:
        s.create_topic("t", 2, {"cleanup.policy": "compact"})
        for p in range(2):
            s.append("t", p, encode_batch([b"v%d" % p], keys=[b"k"], timestamps=T0))
        s.checkpoint()
    return d


def _damage(root: Path, rel: str, kind: str) -> Path:
    path = root / rel
    if kind == "directory":
        path.unlink(missing_ok=True)
        path.mkdir()
        return path
    data = path.read_bytes() if path.exists() else b""
    path.write_bytes(DAMAGE[kind](data))
    return path


@pytest.mark.parametrize("kind", sorted(DAMAGE))
@pytest.mark.parametrize("rel", FILES)
def test_store_opens_or_names_the_file(
    pristine: Path, tmp_path: Path, rel: str, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    d = tmp_path / "store"
    shutil.copytree(pristine, d)
    path = _damage(d, rel, kind)
    caplog.set_level(logging.WARNING)
    try:
        store = Store.open(d)
    except BARE as exc:  # pragma: no cover - the failure this test exists for
        pytest.fail(f"{rel} ({kind}): bare {type(exc).__name__}: {exc}")
    except (SeglogError, OSError) as exc:
        assert str(path) in str(exc) or os.path.basename(rel) in str(exc), str(exc)
        return
    with store:
        # Whatever was recovered, the data is all there and readable.
        for p in range(2):
            got = [r.value for r in decode_records(store.log("t", p).read(0).to_bytes())]
            assert got == [b"v%d" % p]
        store.append("t", 0, encode_batch([b"more"], keys=[b"k"], timestamps=T0))


@pytest.mark.parametrize("kind", sorted(set(DAMAGE) - {"directory"}))
def test_checkpoint_readers_raise_corrupt_checkpoint_naming_file_and_line(tmp_path: Path, kind: str) -> None:
    good = tmp_path / "good"
    OffsetCheckpointFile(str(good)).write({("t", 0): 5, ("u", 3): 7})
    for reader in (OffsetCheckpointFile, LeaderEpochCheckpointFile):
        path = tmp_path / f"{reader.__name__}-{kind}"
        path.write_bytes(DAMAGE[kind](good.read_bytes()))
        try:
            reader(str(path)).read()
        except CorruptCheckpointError as exc:
            assert str(path) in str(exc)
        except BARE + (ValueError,) as exc:  # pragma: no cover
            pytest.fail(f"{kind}: bare {type(exc).__name__}: {exc}")


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_bytes(b"0\n2\nt 0 5\nt\xff 1 6\n")
    with pytest.raises(CorruptCheckpointError, match=r"line 4 is not valid UTF-8 \(byte 0xff at byte 11\)"):
        read_checkpoint(str(path))


def test_unreadable_files_raise_the_readers_own_errors_naming_the_file(tmp_path: Path) -> None:
    """A checkpoint file that cannot be read is a storage error, a meta.properties that cannot
    be read a corrupt one; either names the file and chains the OSError. A missing one is None."""
    path = tmp_path / "unreadable"
    path.mkdir()
    with pytest.raises(
        KafkaStorageError, match=f"^cannot read checkpoint file {re.escape(str(path))}: Is a directory$"
    ) as info:
        read_checkpoint(str(path))
    assert isinstance(info.value.__cause__, IsADirectoryError)
    with pytest.raises(
        CorruptCheckpointError,
        match=f"^corrupt checkpoint file {re.escape(str(path))}: cannot read it: Is a directory$",
    ) as corrupt:
        read_meta_properties(str(path))
    assert isinstance(corrupt.value.__cause__, IsADirectoryError) and corrupt.value.path == str(path)
    assert read_checkpoint(str(tmp_path / "missing")) is None
    assert read_meta_properties(str(tmp_path / "missing")) is None


@pytest.mark.parametrize(
    "text,match",
    [
        (b"0\n1\nt 0 \xd9\xa3\n", r"line 3: entry 1 't 0 ٣' has a non-integer field"),
        (b"0\n1\nt 0 1_0\n", r"line 3: entry 1 't 0 1_0' has a non-integer field"),
        (b"0\n1\nt 0\n", r"line 3: entry 1 't 0' is not 'topic partition offset'"),
        (b"x\n1\nt 0 1\n", r"line 1: bad version 'x'"),
        (b"0\n-1\n", r"line 2: expected -1 entries, found 0"),
        (b"0\n3\nt 0 1\n", r"line 2: expected 3 entries, found 1"),
    ],
)
def test_offset_checkpoint_errors_say_what_and_where(tmp_path: Path, text: bytes, match: str) -> None:
    path = tmp_path / "cp"
    path.write_bytes(text)
    with pytest.raises(CorruptCheckpointError, match=match):
        OffsetCheckpointFile(str(path)).read()


def test_standalone_log_with_damaged_checkpoints_recovers(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    with Log.open(d) as log:
        log.append(encode_batch([b"a", b"b"], timestamps=T0))
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint"):
        (tmp_path / name).write_bytes(b"\xff\xfe garbage")
    (d / "leader-epoch-checkpoint").write_bytes(b"0\n1\n\xff 0\n")
    with Log.open(d) as log:
        assert [r.value for r in decode_records(log.read(0).to_bytes())] == [b"a", b"b"]


@pytest.mark.parametrize("kind", ["empty", "truncated", "garbage", "bitflip", "directory"])
def test_damaged_producer_snapshot_is_dropped_and_state_rebuilt(
    tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    d = str(tmp_path / "t-0")
    log = Log.open(d, replicated=True)
    ps = ProducerStateManager(d)
    info = log.append(encode_batch([b"x"], timestamps=T0, producer_id=5, producer_epoch=0, base_sequence=0))
    ps.update(5, 0, 0, 0, info.first_offset, info.last_offset, T0)
    ps.take_snapshot(log.log_end_offset)
    (snap,) = [f for f in os.listdir(d) if f.endswith(".snapshot")]
    path = Path(d) / snap
    data = path.read_bytes()
    if kind == "directory":
        path.unlink()
        path.mkdir()
    else:
        path.write_bytes(
            {
                "empty": b"",
                "truncated": data[:7],
                "garbage": b"\xff" * len(data),
                "bitflip": data[:-1] + bytes([data[-1] ^ 1]),
            }[kind]
        )
    caplog.set_level(logging.WARNING)
    fresh = ProducerStateManager(d)
    if kind == "directory":  # cannot be removed: a storage error naming it
        with pytest.raises(KafkaStorageError, match=f"cannot remove the damaged producer snapshot {path}"):
            fresh.load(log)
        log.close()
        return
    fresh.load(log)  # no AttributeError / ValueError escapes
    assert fresh.producers[5].last_seq == 0 and fresh.snapshots_loaded == 0
    assert any(snap in r.getMessage() for r in caplog.records)
    log.close()
