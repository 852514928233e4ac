"""The command line: demo, describe, dump, produce, consume; one-line errors."""

from __future__ import annotations

import io
import json
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest

from seglog import Store
from seglog.cli import build_parser, main

LDI = Path("kafka-real/LDI-POC")


def run(capsys: Any, *argv: str, stdin: bytes | None = None, monkeypatch: Any = None) -> tuple[int, str, str]:
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def one_line_error(err: str) -> None:
    assert err.count("\n") == 1 and "Traceback" not in err and "error" in err


def test_parser_has_every_command() -> None:
    subparsers = build_parser()._subparsers
    assert subparsers is not None
    names = subparsers._group_actions[0].choices
    assert isinstance(names, dict)
    assert {"demo", "describe", "dump", "produce", "consume"} <= set(names)


def test_demo_single(tmp_path: Path, capsys: Any) -> None:
    rc, out, err = run(capsys, "demo", "--single", "--dir", str(tmp_path), "--records", "3000", "--partitions", "2")
    assert rc == 0, err
    assert "produced 3,000 records" in out and "consumed 3,000 records" in out
    assert "verified: every one of the 3,000 records came back exactly once" in out
    assert "produce: 100%" in out and "consume: 100%" in out  # progress while it ran
    assert "demo-events" in out and "00000000000000000000.log" in out
    with Store.open(tmp_path / "store", read_only=True) as store:
        assert store.describe("demo-events")[0].records == 3000
    # Running it again in the same directory starts over.
    assert run(capsys, "demo", "--single", "--dir", str(tmp_path), "--records", "100")[0] == 0


def _cluster_demo_ok(out: str, n: int) -> None:
    assert "killing the leader" in out
    assert "the ISR shrank to" in out and "was elected leader" in out
    assert "rejoined the ISR" in out
    assert f"consumed {2 * n:,} records" in out and "0 lost or moved, 0 duplicated, 0 unexpected" in out
    assert "produce: 100%" in out and "consume: 100%" in out  # progress while it ran


def test_demo_three_replicas_without_spark(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    # As on a machine without Java: one line saying so and how to get it, and still success.
    monkeypatch.setattr("seglog.cli.demo._spark_missing", lambda: "no Java runtime found (install one)")
    rc, out, err = run(capsys, "demo", "--dir", str(tmp_path), "--records", "3000")
    assert rc == 0, err
    _cluster_demo_ok(out, 3000)
    skipped = [line for line in out.splitlines() if "Spark" in line and "skipped" in line]
    assert skipped == ["  Spark: skipped, no Java runtime found (install one)"]
    with Store.open(tmp_path / "cluster" / "node-0", read_only=True) as store:
        assert store.describe("orders")[0].partitions[0].log_end_offset == 6000


def test_spark_missing_names_the_extra(monkeypatch: Any) -> None:
    import importlib.util

    from seglog.cli import demo

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert demo._spark_missing() == 'pyspark is not installed (pip install "seglog[spark]")'


@pytest.mark.spark
def test_demo_three_replicas_with_spark(tmp_path: Path, capsys: Any) -> None:
    from seglog.cli import demo

    missing = demo._spark_missing()
    if missing:
        pytest.skip(missing)
    rc, out, err = run(capsys, "demo", "--dir", str(tmp_path), "--records", "2000")
    assert rc == 0, err
    _cluster_demo_ok(out, 2000)
    for node in range(3):
        assert f"load('node-{node}').count() = 4,000" in out
    assert "Spark read 4,000 records from each of the three replicas" in out


def test_describe(tmp_path: Path, capsys: Any, fixtures_dir: Path) -> None:
    rc, out, _ = run(capsys, "describe", str(fixtures_dir / LDI))
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].split() == [
        "TOPIC",
        "PARTITION",
        "LOG-START",
        "HIGH-WATERMARK",
        "LOG-END",
        "RECOVERY-POINT",
        "SEGMENTS",
        "SIZE",
    ]
    assert lines[1].split()[:5] == ["TestTopicPatient", "0", "0", "3", "3"]
    rc, out, _ = run(capsys, "describe", str(fixtures_dir / LDI), "--internal")
    assert "__consumer_offsets" in out and "13" in out
    rc, _, err = run(capsys, "describe", str(tmp_path / "missing"))
    assert rc == 1
    one_line_error(err)


def test_dump_log_of_a_kafka_broker(capsys: Any, fixtures_dir: Path) -> None:
    path = fixtures_dir / LDI / "TestTopicPatient-0/00000000000000000000.log"
    rc, out, _ = run(capsys, "dump", str(path))
    assert rc == 0
    batches = [line for line in out.splitlines() if line.startswith("baseOffset:")]
    assert len(batches) == 3
    assert "producerId: 1 producerEpoch: 0" in batches[0] and "baseSequence: 0" in batches[0]
    assert all("isvalid: true" in b and "compresscodec: none" in b for b in batches)
    rc, out, _ = run(capsys, "dump", "--print-data-log", str(path))
    recs = [line for line in out.splitlines() if line.startswith("| offset:")]
    assert [r.split()[2] for r in recs] == ["0", "1", "2"]
    assert all("payload: {" in r for r in recs)


def test_dump_index_files(capsys: Any, fixtures_dir: Path) -> None:
    d = fixtures_dir / LDI / "__consumer_offsets-6"
    rc, out, _ = run(capsys, "dump", str(d / "00000000000000000000.index"))
    assert rc == 0
    assert "offset: 3 position: 4730" in out and "offset: 7 position: 9571" in out
    rc, out, _ = run(capsys, "dump", str(d / "00000000000000000000.timeindex"))
    assert rc == 0 and "offset: 12" in out
    rc, out, _ = run(
        capsys,
        "dump",
        "--verify-index-only",
        str(d / "00000000000000000000.index"),
        str(d / "00000000000000000000.timeindex"),
    )
    assert rc == 0 and out.count("index matches the log") == 2
    rc, out, _ = run(capsys, "dump", str(d / "00000000000000000013.snapshot"), str(d / "leader-epoch-checkpoint"))
    assert rc == 0 and "0\n1\n0 0\n" in out
    rc, out, _ = run(capsys, "dump", "--print-data-log", str(d / "00000000000000000000.log"))
    assert rc == 0 and out.count("| offset:") == 13


def test_dump_reports_corruption(tmp_path: Path, capsys: Any, fixtures_dir: Path) -> None:
    src = fixtures_dir / LDI / "__consumer_offsets-6"
    dst = tmp_path / "p-0"
    shutil.copytree(src, dst)
    log = dst / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[5000] ^= 0xFF  # inside the second batch's records: a CRC mismatch
    data += b"\x00" * 20  # and a torn tail
    log.chmod(0o644)
    log.write_bytes(bytes(data))
    rc, out, err = run(capsys, "dump", str(log))
    assert rc == 1
    assert "isvalid: false" in out
    assert f"Found a corrupt batch at position {len(data) - 20}" in out
    assert "problem(s) found" in err
    idx = dst / "00000000000000000000.index"
    idx.chmod(0o644)
    idx.write_bytes(idx.read_bytes()[:8] + (3 << 32 | 4000).to_bytes(8, "big"))
    rc, out, _ = run(capsys, "dump", "--verify-index-only", str(idx))
    assert rc == 1 and "entry 1" in out and "position 4000" in out


def test_dump_errors(tmp_path: Path, capsys: Any) -> None:
    rc, _, err = run(capsys, "dump", str(tmp_path / "none.log"))
    assert rc == 1
    one_line_error(err)
    (tmp_path / "x.txt").write_text("hi")
    rc, _, err = run(capsys, "dump", str(tmp_path / "x.txt"))
    assert rc == 1 and "not a segment file" in err
    one_line_error(err)
    bad = tmp_path / "00000000000000000000.snapshot"
    bad.write_bytes(b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00")
    rc, _, err = run(capsys, "dump", str(bad))
    assert rc == 1 and "CRC mismatch" in err


def test_produce_and_consume(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    d = str(tmp_path / "s")
    lines = b"".join(b"user-%d=event %d\n" % (i % 3, i) for i in range(20))
    rc, _, err = run(
        capsys,
        "produce",
        d,
        "events",
        "--create",
        "--partitions",
        "2",
        "--key-separator",
        "=",
        stdin=lines,
        monkeypatch=monkeypatch,
    )
    assert rc == 0 and "produced 20 record(s)" in err
    rc, out, _ = run(capsys, "consume", d, "events", "--format", "json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert sorted(r["value"] for r in rows) == sorted(f"event {i}" for i in range(20))
    assert {r["key"] for r in rows} == {"user-0", "user-1", "user-2"}
    assert all(r["topic"] == "events" and r["partition"] in (0, 1) for r in rows)
    p0 = [r for r in rows if r["partition"] == 0]
    rc, out, _ = run(
        capsys,
        "consume",
        d,
        "events",
        "--partition",
        "0",
        "--offset",
        "1",
        "--max-messages",
        "2",
        "--print-key",
        "--key-separator",
        "|",
    )
    assert out.splitlines() == [f"{r['key']}|{r['value']}" for r in p0[1:3]]
    ts = max(r["timestamp"] for r in rows)  # the records may straddle a millisecond
    rc, out, _ = run(capsys, "consume", d, "events", "--timestamp", str(ts + 1))
    assert out == ""
    # A group starts at its committed offsets and commits at the end.
    rc, out, _ = run(capsys, "consume", d, "events", "--group", "g", "--from-beginning")
    assert len(out.splitlines()) == 20
    rc, out, _ = run(capsys, "consume", d, "events", "--group", "g")
    assert out == ""
    # From a file, binary values come out as base64 in JSON.
    f = tmp_path / "in.txt"
    f.write_bytes(b"\xff\xfe\n")
    assert run(capsys, "produce", d, "events", "--file", str(f), "--partition", "1")[0] == 0
    rc, out, _ = run(capsys, "consume", d, "events", "--partition", "1", "--offset", "-1", "--format", "json")
    assert json.loads(out)["value"] == {"base64": "//4="}


def test_produce_and_consume_errors(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    d = str(tmp_path / "s")
    rc, _, err = run(capsys, "produce", d, "t", stdin=b"x\n", monkeypatch=monkeypatch)
    assert rc == 1 and "no such" not in err
    one_line_error(err)
    rc, _, err = run(
        capsys, "produce", d, "t", "--create", "--key-separator", ":", stdin=b"nokey\n", monkeypatch=monkeypatch
    )
    assert rc == 1 and "line 1" in err
    one_line_error(err)
    rc, _, err = run(capsys, "produce", d, "t", "--file", str(tmp_path / "missing"))
    assert rc == 1 and "missing" in err
    rc, _, err = run(capsys, "produce", d, "bad/name", "--create", stdin=b"x\n", monkeypatch=monkeypatch)
    assert rc == 1 and "illegal" in err
    one_line_error(err)
    rc, _, err = run(capsys, "consume", d, "nope")
    assert rc == 1 and "nope" in err
    rc, _, err = run(capsys, "consume", d, "t", "--offset", "1", "--timestamp", "2")
    assert rc == 1 and "at most one" in err
    rc, _, err = run(capsys, "consume", str(tmp_path / "nodir"), "t")
    assert rc == 1
    one_line_error(err)
    with pytest.raises(SystemExit) as exc:
        main(["consume"])
    assert exc.value.code == 2
    _, err = capsys.readouterr()
    one_line_error(err)


def test_a_file_where_a_log_dir_is_expected(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    f = tmp_path / "afile"
    f.write_text("not a dir")
    for argv in (["describe", str(f)], ["consume", str(f), "t"], ["produce", str(f), "t", "--create"]):
        rc, _, err = run(capsys, *argv, stdin=b"x\n", monkeypatch=monkeypatch)
        assert rc == 1
        one_line_error(err)
        assert f"{f}: is a file, not a log directory" in err
        assert err.count(str(f)) == 1, "the path is named once"
    rc, _, err = run(capsys, "produce", str(f / "sub"), "t", "--create", stdin=b"x\n", monkeypatch=monkeypatch)
    assert rc == 1 and f"{f} is a file" in err and "Errno" not in err
    one_line_error(err)
    missing = tmp_path / "missing"
    rc, _, err = run(capsys, "produce", str(missing), "t", stdin=b"x\n", monkeypatch=monkeypatch)
    assert rc == 1 and err.count(str(missing)) == 1 and "use --create" in err
    one_line_error(err)
    rc, _, err = run(capsys, "consume", str(missing), "t")
    assert rc == 1 and err.count(str(missing)) == 1 and "--create" not in err
    one_line_error(err)
    assert not missing.exists()


def test_consume_offset_past_the_end_starts_at_the_end(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    d = str(tmp_path / "s")
    run(capsys, "produce", d, "ev", "--create", stdin=b"a\nb\nc\n", monkeypatch=monkeypatch)
    rc, out, err = run(capsys, "consume", d, "ev", "--offset", "10")
    assert rc == 0 and out == "", "an offset past the end does not replay from 0"
    assert (
        err == "seglog consume: --offset 10 is past the end: ev-0 holds offsets 0 to 2; starting at its end, offset 3\n"
    )
    rc, out, err = run(capsys, "consume", d, "ev", "--offset", "3")  # the end itself: no note
    assert (rc, out, err) == (0, "", "")
    rc, out, err = run(capsys, "consume", d, "ev", "--offset", "1")
    assert (rc, out, err) == (0, "b\nc\n", "")
    # An empty partition says so.
    run(capsys, "produce", d, "empty", "--create", stdin=b"", monkeypatch=monkeypatch)
    rc, out, err = run(capsys, "consume", d, "empty", "--offset", "5")
    assert rc == 0 and out == "" and "empty-0 holds no records (its log end is offset 0)" in err


def test_consume_new_group_says_it_starts_at_the_end(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    d = str(tmp_path / "s")
    run(
        capsys,
        "produce",
        d,
        "ev",
        "--create",
        "--partitions",
        "2",
        "--partition",
        "1",
        stdin=b"a\nb\n",
        monkeypatch=monkeypatch,
    )
    rc, out, err = run(capsys, "consume", d, "ev", "--group", "g")
    assert rc == 0 and out == ""
    assert err.count("\n") == 1 and "group 'g' has no committed offset yet: starting at the end" in err
    assert "ev-0 at offset 0, ev-1 at offset 2" in err and "--from-beginning" in err
    # Once the group has committed, it resumes silently.
    run(capsys, "produce", d, "ev", "--partition", "1", stdin=b"c\n", monkeypatch=monkeypatch)
    rc, out, err = run(capsys, "consume", d, "ev", "--group", "g")
    assert (rc, out, err) == (0, "c\n", "")
    # --from-beginning on a new group: no note.
    rc, out, err = run(capsys, "consume", d, "ev", "--group", "g2", "--from-beginning")
    assert rc == 0 and out == "a\nb\nc\n" and err == ""


def test_dump_of_random_bytes_talks_about_the_content(tmp_path: Path, capsys: Any) -> None:
    import random

    rng = random.Random(7)
    log = tmp_path / "00000000000000000000.log"
    data = bytearray(rng.randbytes(3000))
    data[8:12] = (5_000_000).to_bytes(4, "big")
    data[16] = 77
    log.write_bytes(bytes(data))
    rc, out, err = run(capsys, "dump", str(log))
    assert rc == 1 and "Traceback" not in err
    assert (
        "Not a Kafka log segment: the first batch, at position 0, declares length 5000000 "
        "(only 2988 bytes follow) and magic 77 (Kafka's are 0, 1 and 2); none of its 3000 bytes "
        "read as record batches"
    ) in out
    data[16] = 2
    data[8:12] = (100).to_bytes(4, "big")
    data[23:27] = (-5).to_bytes(4, "big", signed=True)  # lastOffsetDelta
    log.write_bytes(bytes(data))
    rc, out, _ = run(capsys, "dump", str(log))
    assert rc == 1 and "declares length 100 and magic 2, but negative lastOffsetDelta -5" in out
    log.write_bytes(b"\x01\x02\x03")
    rc, out, _ = run(capsys, "dump", str(log))
    assert rc == 1 and "Not a Kafka log segment: the file holds 3 byte(s), fewer than the 17" in out
    ckpt = tmp_path / "leader-epoch-checkpoint"
    ckpt.write_bytes(bytes(data[:200]))
    rc, out, _ = run(capsys, "dump", str(ckpt))
    assert rc == 1 and "not a checkpoint file" in out and len(out.splitlines()) == 2
    snap = tmp_path / "00000000000000000000.snapshot"
    snap.write_bytes(bytes(data[:100]))
    rc, _, err = run(capsys, "dump", str(snap))
    assert rc == 1 and "not a producer snapshot: it declares version" in err
    one_line_error(err)


def test_dump_dir_star_skips_what_is_not_a_segment_file(tmp_path: Path, capsys: Any, fixtures_dir: Path) -> None:
    d = tmp_path / "__consumer_offsets-6"
    shutil.copytree(fixtures_dir / LDI / "__consumer_offsets-6", d)
    (d / ".lock").write_bytes(b"")
    (d / "00000000000000000000.log.deleted").write_bytes(b"")
    (d / "sub").mkdir()
    files = sorted(str(p) for p in d.iterdir())  # what the shell makes of DIR/*
    rc, out, err = run(capsys, "dump", *files)
    assert rc == 0, err
    assert out.count("Dumping ") == 5 and out.count("baseOffset:") == 13
    assert err.splitlines() == [
        f"seglog dump: skipping {d / '.lock'}: not a segment file",
        f"seglog dump: skipping {d / '00000000000000000000.log.deleted'}: not a segment file",
        f"seglog dump: skipping {d / 'partition.metadata'}: not a segment file",
        f"seglog dump: skipping 1 directory ({d / 'sub'}): dump reads the files in them",
    ]
    rc, _, err = run(capsys, "dump", str(d / ".lock"), str(d / "partition.metadata"))
    assert rc == 1 and "none of the 2 files is a segment file" in err.splitlines()[-1]


@pytest.mark.parametrize("after", ["created topic", "consume:"])
def test_demo_ctrl_c_exits_with_one_line_and_removes_its_data(tmp_path: Path, after: str) -> None:
    import os
    import signal
    import subprocess
    import sys

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "seglog.cli", "demo", "--single", "--records", "3000000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp)},
        # A shell without job control starts background commands with SIGINT ignored; a
        # terminal's Ctrl-C reaches a foreground process with the default disposition.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if after in line:
                break
        else:
            pytest.fail(f"the demo ended before printing {after!r}: {''.join(seen)}")
        assert len(os.listdir(tmp)) == 1, "the demo works in a temporary directory"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130
    assert err == "seglog demo: interrupted\n" and "Traceback" not in err
    assert os.listdir(tmp) == [], "the temporary data is removed"


def test_demo_removes_its_temporary_data_unless_keep(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    rc, out, err = run(capsys, "demo", "--single", "--records", "100", "--partitions", "1")
    assert rc == 0, err
    assert list(tmp_path.iterdir()) == [] and "is removed now (--keep keeps it" in out
    rc, out, err = run(capsys, "demo", "--single", "--records", "100", "--partitions", "1", "--keep")
    assert rc == 0, err
    (kept,) = tmp_path.iterdir()
    assert f"(kept in {kept})" in out and "seglog describe" in out
    with Store.open(kept / "store", read_only=True) as store:
        assert store.describe("demo-events")[0].records == 100


def test_compression_names_are_kafkas_in_every_command(tmp_path: Path, capsys: Any) -> None:
    subparsers = build_parser()._subparsers
    assert subparsers is not None
    commands = subparsers._group_actions[0].choices
    assert isinstance(commands, dict)
    kafka = ["none", "gzip", "snappy", "lz4", "zstd"]
    for name in ("demo", "produce"):
        (opt,) = [a for a in commands[name]._actions if a.dest == "compression"]
        assert list(opt.choices) == kafka and opt.default == "none"
    rc, out, err = run(
        capsys,
        "demo",
        "--single",
        "--dir",
        str(tmp_path),
        "--records",
        "500",
        "--partitions",
        "1",
        "--compression",
        "zstd",
    )
    assert rc == 0, err
    rc, out, _ = run(capsys, "dump", str(tmp_path / "store" / "demo-events-0" / "00000000000000000000.log"))
    codecs = {line.split("compresscodec: ")[1].split()[0] for line in out.splitlines() if "compresscodec" in line}
    assert codecs == {"zstd"}


def test_ctrl_c_while_the_package_loads_is_one_line(capsys: Any, monkeypatch: Any) -> None:
    """The ``seglog`` script's entry point runs before the package is imported, so Ctrl-C in
    those first few tenths of a second is one line and status 130 as well."""
    import builtins
    from importlib.metadata import entry_points

    import _seglog_command

    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "seglog"]
    assert script.value == "_seglog_command:main"
    real_import = builtins.__import__

    def interrupted_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "seglog.cli":
            raise KeyboardInterrupt
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", interrupted_import)
    assert _seglog_command.main(["demo", "--single"]) == 130
    monkeypatch.setattr(builtins, "__import__", real_import)
    _, err = capsys.readouterr()
    assert err == "seglog demo: interrupted\n"
    # Past the import, seglog.cli answers as usual.
    assert _seglog_command.main(["describe", "--bootstrap", "x:1", "/tmp"]) == 1


def test_verify_index_only_checks_each_entry_against_its_batch(tmp_path: Path, capsys: Any) -> None:
    # Kafka's DumpLogSegments rule: an offset-index entry names the last offset of the batch at
    # its position; a time-index entry the last offset of a batch with its largest timestamp.
    from seglog import Log
    from seglog.storage.records import batch_headers, encode_batch

    d = tmp_path / "t-0"
    lg = Log.open(d, {"index.interval.bytes": 300})
    t0 = 1_700_000_000_000
    buf = b"".join(encode_batch([b"v" * 100] * 2, timestamps=t0 + i) for i in range(40))
    lg.append(buf)  # one append of 40 batches
    lg.append(buf)
    lg.close()
    idx, tidx = d / "00000000000000000000.index", d / "00000000000000000000.timeindex"
    rc, out, _ = run(capsys, "dump", "--verify-index-only", str(idx), str(tidx))
    assert rc == 0 and out.count("index matches the log") == 2, out
    entries = [struct.unpack(">ii", idx.read_bytes()[i : i + 8]) for i in range(0, len(idx.read_bytes()), 8)]
    assert len(entries) > 10  # batch by batch, not one entry per append
    heads = {h.position: h for h in batch_headers((d / "00000000000000000000.log").read_bytes())}
    assert all(heads[pos].last_offset == rel for rel, pos in entries)
    rc, out, _ = run(capsys, "dump", "--index-sanity-check", str(idx), str(tidx))
    assert rc == 0 and out.count("passed sanity check.") == 2
    # An entry as a whole-append index would write it: the append's last offset at its first
    # batch's position. Reported with file, entry number, offset and position.
    data = bytearray(idx.read_bytes())
    rel, pos = entries[3]
    data[24:32] = struct.pack(">ii", entries[4][0], pos)
    idx.write_bytes(bytes(data))
    rc, out, err = run(capsys, "dump", "--verify-index-only", str(idx))
    assert rc == 1 and "problem(s) found" in err
    assert f"{idx}: entry 3 (offset {entries[4][0]}, position {pos}): the batch there ends at offset {rel}" in out
    # A time-index entry whose timestamp is not its batch's.
    tdata = bytearray(tidx.read_bytes())
    ts, trel = struct.unpack(">qi", tdata[12:24])
    tdata[12:20] = struct.pack(">q", ts + 1000)
    tidx.write_bytes(bytes(tdata))
    rc, out, _ = run(capsys, "dump", "--verify-index-only", str(tidx))
    assert rc == 1 and f"entry 1 (timestamp {ts + 1000}, offset {trel})" in out
    assert f"has largest timestamp {ts}" in out
    # The sanity check finds structural faults only.
    tidx.write_bytes(bytes(tdata[:12]) + struct.pack(">qi", t0 - 5, 1) + bytes(tdata[24:]))
    rc, out, _ = run(capsys, "dump", "--index-sanity-check", str(tidx))
    assert rc == 1 and "failed the sanity check" in out and str(tidx) in out
