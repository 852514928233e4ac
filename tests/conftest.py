from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Files written by Apache Kafka (its client library and real brokers); provenance and checksums
# in tests/fixtures/README.md.
FIXTURES = Path(__file__).resolve().parent / "fixtures"
#: Kafka's compression codecs: name (compression.type) -> id (a batch's attributes bits 0-2).
KAFKA_CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
#: The wall-clock time (ms) the tests' records and manual clocks start at (2023-11-14T22:13:20Z).
T0 = 1_700_000_000_000


def wrong(value: object) -> Any:
    """``value``, typed as anything: an argument of the wrong type that a test passes on purpose
    (to check the error it gets) without telling the type checker otherwise."""
    return value


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.fail(f"the Kafka-written fixtures are missing: expected them at {FIXTURES}")
    return FIXTURES


@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator[Any]:
    """One ZooKeeper server (Debian's package) on a free loopback port for the whole session;
    tests that need it skip, saying why, when it is not installed."""
    from seglog.cluster.zkserver import ZooKeeperServer, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    server = ZooKeeperServer().start()
    try:
        yield server
    finally:
        server.stop()


_chroots = itertools.count()


@pytest.fixture
def zookeeper_chroot(zookeeper_server: Any) -> str:
    """A connect string to the session's ZooKeeper server under a chroot no other test uses, so
    that each test's cluster starts from an empty tree."""
    return f"{zookeeper_server.connect_string}/seglog-test-{os.getpid()}-{next(_chroots)}"


def run_python(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``code`` (dedented) in a fresh interpreter from the repository root with ``args`` as
    its ``sys.argv[1:]``; its output is captured as text."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(ROOT),
    )


#: Marks of tests outside the default suite: ``slow`` (simulation and fault profiles, long
#: state machines and fuzz loops, each running for a fixed time) and ``heavy`` (fault scenarios
#: on process clusters and other tests of 20 s and more, which CI runs in a stage of their own),
#: with the environment variable that runs them too.
OPT_IN = {"slow": "SEGLOG_SLOW", "heavy": "SEGLOG_HEAVY"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` or ``heavy`` run only when asked for: ``-m slow`` / ``-m heavy``
    (any ``-m`` expression naming the mark) or ``SEGLOG_SLOW=1`` / ``SEGLOG_HEAVY=1``."""
    expr = config.getoption("markexpr") or ""
    for mark, env in OPT_IN.items():
        if os.environ.get(env) == "1" or mark in expr:
            continue
        skip = pytest.mark.skip(reason=f"{'long' if mark == 'slow' else mark}: run with -m {mark} or {env}=1")
        for item in items:
            if mark in item.keywords:
                item.add_marker(skip)


def make_kafka_broker_dir(fixtures: Path, dst: Path) -> Path:
    """A log dir laid out as a stopped Kafka broker leaves one: real broker-written partition
    files (``kafka-real``), a ``.lock``, the clean-shutdown marker, ``meta.properties`` and the
    four dir-level checkpoint files, with every index file a broker keeps beside its segments."""
    real = fixtures / "kafka-real"
    dst.mkdir(parents=True)
    sources = [
        real / "LDI-POC" / "TestTopicPatient-0",
        real / "LDI-POC" / "__consumer_offsets-6",
        real / "kafka-connect-spooldir" / "_confluent-command-0",
        real / "kafka-connect-spooldir" / "_confluent-controlcenter-5-1-2-1-monitoring-message-rekey-0",
    ]
    ends = {}
    for src in sources:
        d = dst / src.name
        shutil.copytree(src, d)
        for p in [d, *d.iterdir()]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        topic, _, part = src.name.rpartition("-")
        # A broker trims the indexes of a cleanly closed segment; where the fixture has none,
        # the empty files stand for a segment too small for an index entry.
        for ext in ("index", "timeindex"):
            f = d / f"{0:020d}.{ext}"
            if not f.exists():
                f.write_bytes(b"")
        if not (d / "leader-epoch-checkpoint").exists():
            (d / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
        from seglog.storage.records import batch_headers

        heads = batch_headers((d / f"{0:020d}.log").read_bytes())
        ends[(topic, int(part))] = heads[-1].last_offset + 1 if heads else 0
    (dst / ".lock").write_bytes(b"")
    (dst / ".kafka_cleanshutdown").write_bytes(b"")
    (dst / "meta.properties").write_text("#\nversion=0\nbroker.id=0\ncluster.id=mrPEwOJ1S8uZU6k4y9Ikmg\n")

    def checkpoint(name: str, entries: dict[tuple[str, int], int]) -> None:
        lines = ["0", str(len(entries))] + [f"{t} {p} {o}" for (t, p), o in sorted(entries.items())]
        (dst / name).write_text("\n".join(lines) + "\n")

    checkpoint("recovery-point-offset-checkpoint", ends)
    checkpoint("replication-offset-checkpoint", ends)
    checkpoint("log-start-offset-checkpoint", {})
    checkpoint("cleaner-offset-checkpoint", {("__consumer_offsets", 6): 13})
    return dst


def snapshot_tree(root: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file and directory under ``root`` (``root`` itself included): bytes, mtime, mode."""
    out = {}
    for p in [root, *sorted(root.rglob("*"))]:
        st = p.lstat()
        data = p.read_bytes() if p.is_file() else b""
        out[str(p.relative_to(root))] = (data, st.st_mtime_ns, st.st_mode)
    return out


@pytest.fixture
def kafka_broker_dir(fixtures_dir: Path, tmp_path: Path) -> Path:
    return make_kafka_broker_dir(fixtures_dir, tmp_path / "kafka-logs")
