"""``seglog bench``: argument errors, --only, the JSON it writes, the arithmetic behind its
ratios and goal verdicts (on fake registry entries with made-up timings), the chart."""

from __future__ import annotations

import functools
import io
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from seglog.benchmarks import BENCHMARKS, Benchmark, Contender, Goal, Work, cases, summarize
from seglog.benchmarks.runner import (
    SCHEMA,
    BenchProgress,
    Options,
    SelectionError,
    measure,
    render_markdown,
    render_table,
    report_benchmark,
    run,
    select,
)
from seglog.cli import main


def _fake(
    name: str = "fake", goals: tuple[Goal, ...] = (), extra: tuple[Contender, ...] = (), fail: bool = False
) -> Benchmark:
    def prepare(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
        if fail:
            raise RuntimeError("prepare broke")
        data = bytes(p["n"])
        return Work(
            items=len(data),
            nbytes=len(data),
            calls={"ours": lambda: bytes(data), "peer": lambda: bytearray(data), "limit": lambda: data[:]},
        )

    return Benchmark(
        name=name,
        title="a fake benchmark",
        unit="bytes",
        contenders=(Contender("ours", "seglog"), Contender("peer", "peer"), *extra, Contender("limit", "limit")),
        goals=goals,
        prepare=prepare,
        quick={"n": 1000},
        full={"n": 2000},
    )


# -------------------------------------------------------------------------------------------------
# Arguments
# -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv", [["bench", "--rounds", "0"], ["bench", "--rounds", "x"], ["bench", "--records", "-5"], ["bench", "--bogus"]]
)
def test_bad_arguments_are_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error:" in err and "Traceback" not in err


def test_unknown_only_lists_the_valid_names(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["bench", "--only", "encode-100B", "nope", "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "unknown benchmark 'nope'" in err
    for b in BENCHMARKS:
        assert b.name in err
    assert not (tmp_path / "o").exists()


def test_out_must_be_a_directory(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["bench", "--quick", "--only", "crc32c-100B", "--out", str(f)]) == 1
    assert "not a directory" in capsys.readouterr().err


def test_select_names_groups_and_patterns() -> None:
    assert [b.name for b in select(BENCHMARKS, ["encode-*"])] == [
        "encode-100B-stream",
        "encode-1KiB-stream",
        "encode-100B",
        "encode-1KiB",
    ]
    assert [b.name for b in select(BENCHMARKS, ["*-stream"])][-5:] == [
        "append-1KiB-stream",
        "read-1KiB-stream",
        "append-batches-stream",
        "lookup-offset-stream",
        "lookup-timestamp-stream",
    ]
    assert [b.name for b in select(BENCHMARKS, ["spark"])] == ["spark-count", "spark-aggregate"]
    # registry order, duplicates once
    assert [b.name for b in select(BENCHMARKS, ["send", "crc32c-1MiB", "send"])] == ["crc32c-1MiB", "send"]
    assert select(BENCHMARKS, None) == list(BENCHMARKS)
    with pytest.raises(SelectionError, match="valid names: crc32c-100B"):
        select(BENCHMARKS, ["crc32"])


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--list"]) == 0
    out = capsys.readouterr().out
    assert "encode-100B" in out and "≥5× aiokafka" in out and "replication-zookeeper" in out


def test_registry_is_consistent() -> None:
    """Names unique; each goal names a contender of its benchmark; the issue's goals are there."""
    assert len({b.name for b in BENCHMARKS}) == len(BENCHMARKS)
    for b in BENCHMARKS:
        names = {c.name for c in b.contenders}
        assert len(names) == len(b.contenders), b.name
        assert sum(c.role == "limit" for c in b.contenders) <= 1, b.name
        assert not b.self_timed or b.variant == "stream", b.name  # only a stream is made between timings
        for g in b.goals:
            assert (g.subject or b.primary) in names, (b.name, g)
            assert g.kind != "ratio" or g.versus in names, (b.name, g)
    goals = {(b.name, g.text) for b in BENCHMARKS for g in b.goals}
    for expected in [
        ("crc32c-1MiB", "≥0.9× crc32c package"),
        ("encode-100B", "≥5× aiokafka"),
        ("encode-100B-stream", "≥5× aiokafka"),
        ("columns-100B-stream", "≥10× aiokafka"),
        ("append-100B-stream", "≥0.8× floor (within 1.25×)"),
        ("columns-100B", "≥10× aiokafka"),
        ("append-batches", "≥0.8× plain write()"),
        ("append-batches-stream", "≥0.8× plain write()"),
        ("append-100B", "≥15× sqlite3"),
        ("append-100B", "≥10× LMDB"),
        ("read-100B", "≥10× sqlite3"),
        ("lookup-offset", "<1 µs per Log.read(offset, 1)"),
        ("lookup-timestamp", "<2 µs per lookup"),
        ("lookup-offset-stream", "<1 µs per Log.read(offset, 1)"),
        ("lookup-timestamp-stream", "<2 µs per lookup"),
        ("send", "≥1.5 M records/s"),
        ("send_batch", "≥0.7× raw append"),
        ("poll_columns", "≥10 M records/s"),
        ("spark-aggregate", "full row ≥0.9× Parquet"),
    ]:
        assert expected in goals
    assert cases("send")[0] == ("send", "Producer.send")


def test_registry_names_and_order() -> None:
    """The names ``seglog bench`` runs and writes to results.json, in its order, with each
    benchmark's group (results from earlier runs are compared by these names)."""
    assert [(b.name, b.group) for b in BENCHMARKS] == [
        ("crc32c-100B", "crc32c"),
        ("crc32c-4KiB", "crc32c"),
        ("crc32c-1MiB", "crc32c"),
        ("encode-100B-stream", "records"),
        ("decode-100B-stream", "records"),
        ("columns-100B-stream", "records"),
        ("encode-1KiB-stream", "records"),
        ("decode-1KiB-stream", "records"),
        ("columns-1KiB-stream", "records"),
        ("encode-100B", "records"),
        ("decode-100B", "records"),
        ("columns-100B", "records"),
        ("encode-1KiB", "records"),
        ("decode-1KiB", "records"),
        ("columns-1KiB", "records"),
        ("append-100B-stream", "log"),
        ("read-100B-stream", "log"),
        ("append-1KiB-stream", "log"),
        ("read-1KiB-stream", "log"),
        ("append-batches-stream", "log"),
        ("append-batches", "log"),
        ("append-100B", "log"),
        ("read-100B", "log"),
        ("append-1KiB", "log"),
        ("read-1KiB", "log"),
        ("lookup-offset-stream", "log"),
        ("lookup-timestamp-stream", "log"),
        ("lookup-offset", "log"),
        ("lookup-timestamp", "log"),
        ("send", "store"),
        ("send_batch", "store"),
        ("poll_columns", "store"),
        ("spark-count", "spark"),
        ("spark-aggregate", "spark"),
        ("replication", "replication"),
        ("replication-zookeeper", "replication"),
        ("kafka-produce-confluent-kafka", "kafka"),
        ("kafka-consume-confluent-kafka", "kafka"),
        ("kafka-produce-kafka-python", "kafka"),
        ("kafka-consume-kafka-python", "kafka"),
        ("kafka-produce-aiokafka", "kafka"),
        ("kafka-consume-aiokafka", "kafka"),
        ("kafka-serve-start", "kafka"),
    ]


# -------------------------------------------------------------------------------------------------
# Arithmetic
# -------------------------------------------------------------------------------------------------


def test_summary_quartiles() -> None:
    s = summarize([4.0, 1.0, 3.0, 2.0, 100.0], items=10)
    assert (s.median, s.min, s.max) == (3.0, 1.0, 100.0)
    assert (s.q1, s.q3, s.iqr) == (2.0, 4.0, 2.0)
    assert s.rate == pytest.approx(10 / 3)
    one = summarize([0.5], items=1)
    assert one.iqr == 0 and one.rate == 2.0
    with pytest.raises(ValueError):
        summarize([], 1)


def test_ratios_and_goals_on_a_fake_entry() -> None:
    goals = (
        Goal("≥1.5× peer", "ratio", 1.5, "peer"),
        Goal("≥3× peer", "ratio", 3.0, "peer"),
        Goal("≤20 ms per byte", "max_seconds_per_item", 0.02),
        Goal("≥150 bytes/s", "min_items_per_second", 150.0),
        Goal("≥1× the missing one", "ratio", 1.0, "absent"),
        Goal("limit ≥ 1.5× ours", "ratio", 1.5, "ours", subject="limit"),
    )
    bench = _fake(
        goals=goals,
        extra=(Contender("slow peer", "peer"), Contender("absent", "peer", ("no_such_module_here",), "absent-pkg")),
    )
    work = Work(items=100, calls={}, nbytes=1000)
    samples = {"ours": [1.0, 1.1, 0.9], "peer": [2.0, 2.0, 2.0], "slow peer": [4.0, 4.0, 4.0], "limit": [0.5, 0.5, 0.5]}
    doc = report_benchmark(bench, {"n": 100}, work, samples, {}, {"absent": "not found"}, {})
    by = {c["name"]: c for c in doc["contenders"]}
    assert by["ours"]["items_per_s"] == 100.0 and by["ours"]["bytes_per_s"] == 1000.0
    assert by["ours"]["best_peer"] == "peer" and by["ours"]["vs_best_peer"] == 2.0
    assert by["ours"]["limit"] == "limit" and by["ours"]["vs_limit"] == 0.5
    assert by["slow peer"]["vs_best_peer"] == 0.5 and by["limit"]["vs_limit"] == 1.0
    assert by["ours"]["median_s"] == 1.0 and by["ours"]["min_s"] == 0.9 and by["ours"]["max_s"] == 1.1
    assert by["absent"]["status"] == "not installed" and by["absent"]["pip"] == "absent-pkg"
    verdicts = [(g["text"], g["measured"], g["met"]) for g in doc["goals"]]
    assert verdicts == [
        ("≥1.5× peer", 2.0, True),
        ("≥3× peer", 2.0, False),
        ("≤20 ms per byte", 0.01, True),
        ("≥150 bytes/s", 100.0, False),
        ("≥1× the missing one", None, None),
        ("limit ≥ 1.5× ours", 2.0, True),
    ]
    table = render_table(
        {
            "mode": "quick",
            "rounds": 3,
            "load_average_start": [1.0],
            "load_average_end": [1.0],
            "machine": {
                "cpu": "cpu",
                "cores": 2,
                "memory": "1 GiB",
                "kernel": "k",
                "python": "p",
                "crc32c_implementation": "x",
            },
            "benchmarks": [doc],
        }
    )
    assert "not installed (pip install absent-pkg)" in table
    assert "goal ≥3× peer: 2.00× (ours) — NOT met" in table
    assert "goal ≥1.5× peer: 2.00× (ours) — met" in table


def test_rounds_alternate_contenders() -> None:
    seen: list[str] = []
    work = Work(items=1, calls={n: functools.partial(seen.append, n) for n in "ABC"}, repeatable=False)
    samples, loops = measure(work, ["A", "B", "C", "D"], rounds=3, min_sample=0.0)
    assert seen == list("ABC") + list("ABC") + list("BCA") + list("CAB")  # warm-up, then rotated rounds
    assert {k: len(v) for k, v in samples.items()} == {"A": 3, "B": 3, "C": 3}
    assert loops == {"A": 1, "B": 1, "C": 1}


def test_timed_inside_calls_report_their_own_seconds_and_warm_up_apart() -> None:
    seen: list[str] = []

    def call(name: str) -> float:
        seen.append(name)
        return 0.25

    work = Work(
        items=1,
        calls={"A": lambda: call("A"), "B": lambda: call("B")},
        warmup={"A": lambda: seen.append("warm A")},
        repeatable=False,
        timed_inside=True,
    )
    samples, _ = measure(work, ["A", "B"], rounds=2, min_sample=0.0)
    assert samples == {"A": [0.25, 0.25], "B": [0.25, 0.25]}
    assert seen == ["warm A", "B", "A", "B", "B", "A"]


def test_peak_rss_is_per_contender() -> None:
    """A contender that holds 64 MB at its peak is charged about that; one beside it that
    allocates nothing is charged next to nothing (the peak is reset before each call)."""
    from seglog.benchmarks import memory

    if memory.start() is None:
        pytest.skip("no /proc/self/clear_refs here")

    def big() -> int:
        block = bytearray(64 << 20)
        block[::4096] = b"x" * len(block[::4096])  # touch every page
        return len(block)

    work = Work(items=1, calls={"big": big, "small": lambda: 1}, repeatable=False)
    rss: dict[str, list[int]] = {}
    measure(work, ["big", "small"], rounds=2, min_sample=0.0, rss=rss)
    assert all(x > 60 << 20 for x in rss["big"]), rss
    assert all(x < 8 << 20 for x in rss["small"]), rss


def test_stream_inputs_are_distinct_and_in_producer_batches() -> None:
    from seglog.benchmarks.inputs import T0, Stream, producer_batch_size
    from seglog.storage.records import decode_columns, encode_batch

    stream = Stream(5_000, 100)
    assert producer_batch_size() == 16_384
    seen_values: set[bytes] = set()
    offsets: list[int] = []
    stream.prime(encoded=True)
    for chunk in stream.chunks(encoded=True):
        for base, vals, keys, stamps, enc in chunk:
            assert len(enc) <= 16_384 and len(vals) <= stream.per_batch
            assert enc == encode_batch(vals, keys=keys, timestamps=stamps)
            assert decode_columns(enc, headers=False).count == len(vals)
            assert all(len(v) == 100 for v in vals)
            assert keys == [i.to_bytes(8, "big") for i in range(base, base + len(vals))]
            assert stamps == list(range(T0 + base, T0 + base + len(vals)))
            seen_values.update(vals)
            offsets.extend(range(base, base + len(vals)))
    assert offsets == list(range(5_000)) and len(seen_values) == 5_000
    # The producer's batch is full: one more record would not fit in 16 KiB.
    more = stream.per_batch + 1
    assert len(encode_batch([bytes(100)] * more, keys=[bytes(8)] * more, timestamps=T0)) > 16_384
    assert stream.n_chunks >= 1 and sum(len(c) for c in stream.chunks()) == stream.batches


def test_markdown_leads_with_the_streams(tmp_path: Path) -> None:
    doc, _, _ = _run(tmp_path, [_fake("hot"), _fake("other"), _fake("streamed")])
    variants = {"hot": "hot batch", "streamed": "stream"}
    for b in doc["benchmarks"]:
        b["variant"] = variants.get(b["name"])
    rows = [line.split("|")[1].strip() for line in render_markdown(doc).splitlines() if line.startswith("| ")]
    assert rows[1:] == ["streamed (stream)", "hot (hot batch)", "other"]


# -------------------------------------------------------------------------------------------------
# A run: JSON, table, chart
# -------------------------------------------------------------------------------------------------


def _run(tmp_path: Path, benches: list[Benchmark]) -> tuple[dict[str, Any], str, str]:
    out, err = io.StringIO(), io.StringIO()
    doc = run(
        benches,
        Options(quick=True, rounds=2, min_sample=0.001),
        tmp_path / "out",
        progress=BenchProgress(len(benches), err),
        argv=["seglog", "bench", "--quick"],
        stdout=out,
    )
    return doc, out.getvalue(), err.getvalue()


def test_json_schema(tmp_path: Path) -> None:
    missing = Contender("missing peer", "peer", ("no_such_module_here",), "no-such-pkg")
    doc, out, err = _run(tmp_path, [_fake(extra=(missing,)), _fake("broken", fail=True)])
    on_disk = json.loads((tmp_path / "out" / "results.json").read_text())
    assert on_disk == json.loads(json.dumps(doc))
    assert doc["schema"] == SCHEMA and doc["mode"] == "quick" and doc["rounds"] == 2 and doc["complete"]
    assert doc["command"] == ["seglog", "bench", "--quick"]
    m = doc["machine"]
    for key in ("cpu", "cores", "memory_bytes", "kernel", "python", "crc32c_implementation", "versions"):
        assert m[key], key
    assert m["versions"]["seglog"]
    assert {"crc32c", "aiokafka", "kafka-python", "lmdb", "pyarrow", "pyspark"} <= set(m["versions"])
    assert len(doc["load_average_start"]) == 3 and len(doc["load_average_end"]) == 3
    fake, broken = doc["benchmarks"]
    assert fake["status"] == "ok" and fake["items_per_call"] == 1000 and fake["params"] == {"n": 1000}
    by = {c["name"]: c for c in fake["contenders"]}
    assert by["missing peer"] == {
        "name": "missing peer",
        "role": "peer",
        "status": "not installed",
        "pip": "no-such-pkg",
        "reason": "module 'no_such_module_here' not found (pip install no-such-pkg)",
    }
    for name in ("ours", "peer", "limit"):
        c = by[name]
        assert c["status"] == "ok" and len(c["samples_s"]) == 2 and c["calls_per_sample"] >= 1
        assert c["min_s"] <= c["q1_s"] <= c["median_s"] <= c["q3_s"] <= c["max_s"]
        assert c["items_per_s"] == pytest.approx(1000 / c["median_s"])
    assert broken["status"] == "error"
    assert all(c["status"] == "error" and "prepare broke" in c["reason"] for c in broken["contenders"])
    assert "fake — a fake benchmark" in out and "results:" in out
    md = (tmp_path / "out" / "results.md").read_text()
    assert (
        "| fake | ours |" in md
        and "| broken | error: RuntimeError: prepare broke |" in md
        and "seglog bench --quick" in md
    )
    assert "broken: error: RuntimeError: prepare broke" in err
    assert "[2/2] broken done" in err  # not a terminal: one line per benchmark


def test_chart_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    doc, out, _ = _run(tmp_path, [_fake(goals=(Goal("≥0.1× peer", "ratio", 0.1, "peer"),))])
    png = tmp_path / "out" / "ratios.png"
    assert doc["chart"] == str(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"chart:   {png}" in out


def test_chart_skipped_without_matplotlib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    doc, out, _ = _run(tmp_path, [_fake()])
    assert doc["chart"] is None and "matplotlib is not installed" in doc["chart_skipped"]
    assert not (tmp_path / "out" / "ratios.png").exists()
    assert (tmp_path / "out" / "results.json").exists()
    assert "chart:   skipped (matplotlib is not installed" in out


def test_cli_runs_a_real_benchmark(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--quick", "--rounds", "2", "--only", "crc32c-100B", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "results.json").read_text())
    (b,) = doc["benchmarks"]
    assert b["name"] == "crc32c-100B" and b["unit"] == "bytes"
    roles = {c["name"]: (c["role"], c["status"]) for c in b["contenders"]}
    assert roles["seglog"] == ("seglog", "ok") and roles["memcpy"] == ("limit", "ok")
    assert doc["command"] == [
        "seglog",
        "bench",
        "--quick",
        "--rounds",
        "2",
        "--only",
        "crc32c-100B",
        "--out",
        str(tmp_path),
    ]
    assert "crc32c-100B — CRC-32C of a 100B buffer" in capsys.readouterr().out


def test_cli_fails_when_a_benchmark_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import seglog.benchmarks

    monkeypatch.setattr(seglog.benchmarks, "BENCHMARKS", (_fake(), _fake("broken", fail=True)))
    assert main(["bench", "--quick", "--rounds", "1", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.rstrip().splitlines()[-1].startswith("seglog bench: error: 1 benchmark(s) failed: broken")
    assert json.loads((tmp_path / "results.json").read_text())["benchmarks"][0]["status"] == "ok"
