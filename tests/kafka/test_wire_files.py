"""Files written through the Kafka listener are Kafka's files: every client (kafka-python,
aiokafka, confluent-kafka, Kafka's Java client), every codec, idempotent producers; the store is
closed and its partition dirs are put through the checks the suite applies to the files seglog
writes: every batch's CRC (seglog's reader and kafka-python's), the records decoded by
kafka-python equal seglog's, offsets and idempotent sequences run on without gaps, the
``.index``/``.timeindex`` files equal what a rebuild from the ``.log`` writes (which is Kafka's
byte for byte: ``tests/compat/test_kafka_index_rebuild.py``), ``seglog dump --verify-index-only``
and ``--index-sanity-check`` pass, and Kafka's own ``FileRecords`` reads every batch with
``ensureValid()`` (``tests/kafka/java/WireFileCheck.java``, compiled at test time)."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from seglog import Store
from seglog._native.segment import Segment
from seglog.cli import main as cli_main
from seglog.storage.records import batch_headers
from tests.compat.kafka_oracle import kp_records, ours
from tests.conftest import KAFKA_CODECS as CODECS

from .conftest import JAVA_CLIENT_CHECK, JAVA_DIR, compile_java, java_unavailable, run_java_client_check

CHECKER = JAVA_DIR / "WireFileCheck.java"
PER_TOPIC = 600
PARTITIONS = 2
#: Small segments and batches, so that every partition rolls several segments and every
#: segment has index entries.
SEGMENT_BYTES = 32768
BATCH_BYTES = 8192


@dataclass
class Written:
    root: Path
    #: topic → (client, codec name, records sent)
    topics: dict[str, tuple[str, str, int]] = field(default_factory=dict)
    values: dict[str, set[bytes]] = field(default_factory=dict)
    java_classpath: str | None = None
    java_skip: str = ""


def _values(topic: str) -> list[tuple[bytes, bytes, list[tuple[str, str | bytes | None]]]]:
    rnd = random.Random(topic)
    out: list[tuple[bytes, bytes, list[tuple[str, str | bytes | None]]]] = []
    for i in range(PER_TOPIC):
        # Half text, half random bytes: every codec has something to compress.
        value = (
            b"%s-%05d-" % (topic.encode(), i) + b"x" * rnd.randrange(20, 200) + rnd.randbytes(rnd.randrange(20, 200))
        )
        out.append((b"key-%d" % (i % 13), value, [("i", b"%d" % i)]))
    return out


def _kafka_python(bootstrap: str, topic: str, codec: str) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        acks="all",
        compression_type=None if codec == "none" else codec,
        batch_size=BATCH_BYTES,
        linger_ms=5,
    )
    futures = [producer.send(topic, v, key=k, headers=h) for k, v, h in _values(topic)]
    producer.flush()
    for f in futures:
        f.get(timeout=30)
    producer.close()


def _aiokafka(bootstrap: str, topic: str, codec: str) -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            enable_idempotence=True,
            compression_type=None if codec == "none" else codec,
            max_batch_size=BATCH_BYTES,
            linger_ms=5,
        )
        await producer.start()
        try:
            futures = [await producer.send(topic, v, key=k, headers=h) for k, v, h in _values(topic)]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    asyncio.run(run())


def _librdkafka(bootstrap: str, topic: str, codec: str) -> None:
    import confluent_kafka as ck

    errors: list[Any] = []
    producer = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "compression.type": codec,
            "batch.size": BATCH_BYTES,
            "linger.ms": 5,
        }
    )
    for k, v, h in _values(topic):
        producer.produce(topic, v, k, headers=h, on_delivery=lambda err, _msg: errors.append(err) if err else None)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert not errors, errors


CLIENTS = {"kafka-python": _kafka_python, "aiokafka": _aiokafka, "librdkafka": _librdkafka}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Written:
    root = tmp_path_factory.mktemp("wire-files")
    out = Written(root / "data")
    reason = java_unavailable()
    if reason is not None:
        out.java_skip = reason
    else:
        out.java_classpath = compile_java(root / "classes", JAVA_CLIENT_CHECK, CHECKER)
    config = {"log.segment.bytes": SEGMENT_BYTES, "group.initial.rebalance.delay.ms": 0}
    with Store.open(out.root, config) as store, store.serve() as broker:
        for client, produce in CLIENTS.items():
            for codec in CODECS:
                topic = f"{client}-{codec}"
                store.create_topic(topic, PARTITIONS)
                produce(broker.bootstrap_servers, topic, codec)
                out.topics[topic] = (client, codec, PER_TOPIC)
                out.values[topic] = {v for _, v, _ in _values(topic)}
        if out.java_classpath is not None:
            # JavaClientCheck's producer: idempotent, acks=all, 200 records per codec over
            # three partitions (its topics are created through the AdminClient).
            run_java_client_check(out.java_classpath, broker.bootstrap_servers, "java")
            for codec in CODECS:
                out.topics[f"java-{codec}"] = ("java", codec, 200)
    return out


def _partition_dirs(w: Written, topic: str) -> list[Path]:
    dirs = sorted(w.root.glob(f"{topic}-[0-9]*"), key=lambda d: int(d.name.rsplit("-", 1)[1]))
    assert dirs, f"no partition dirs of {topic} under {w.root}"
    return dirs


def _segments(d: Path) -> list[Path]:
    return sorted(d.glob("*.log"))


def test_every_batch_is_valid_and_offsets_and_sequences_run_on(written):
    for topic, (client, codec, sent) in written.topics.items():
        total = 0
        values: set[bytes | None] = set()
        for d in _partition_dirs(written, topic):
            next_offset = 0
            sequences: dict[int, int] = {}
            for log in _segments(d):
                base = int(log.name[:20])
                assert base == next_offset, f"{log}: base offset {base}, expected {next_offset}"
                data = log.read_bytes()
                heads = batch_headers(data, verify_crc=True)
                assert heads, f"{log} is empty"
                assert sum(h.size for h in heads) == len(data), f"{log}: bytes after the last batch"
                for h in heads:
                    where = f"{log} batch at offset {h.base_offset} ({client}, {codec})"
                    assert h.base_offset == next_offset, where
                    assert h.magic == 2 and h.compression == CODECS[codec], where
                    # Idempotent producers: a producer id, and sequences without gaps.
                    assert h.producer_id >= 0 and h.base_sequence >= 0, where
                    if h.producer_id in sequences:
                        assert h.base_sequence == sequences[h.producer_id], where
                    sequences[h.producer_id] = h.base_sequence + h.records_count
                    next_offset = h.last_offset + 1
                # kafka-python reads the same records (every CRC checked, every codec decoded).
                records = kp_records(data)
                assert records == ours(data), log
                total += len(records)
                values.update(r[4] for r in records)
        assert total == sent, f"{topic}: {total} records on disk, {sent} sent"
        if topic in written.values:
            assert values == written.values[topic], topic


def test_indexes_are_what_a_rebuild_from_the_log_writes(written, tmp_path):
    segments = 0
    entries = 0
    multi = set()
    for topic in written.topics:
        for d in _partition_dirs(written, topic):
            if len(_segments(d)) > 1:
                multi.add(written.topics[topic][0])
            copy = tmp_path / d.name
            shutil.copytree(d, copy)
            for f in list(copy.glob("*.index")) + list(copy.glob("*.timeindex")):
                f.unlink()
            for log in _segments(copy):
                seg = Segment(copy, int(log.name[:20]))
                res = seg.recover()
                seg.close()
                assert (res.truncated_bytes, res.reason) == (0, None), f"{d / log.name}: {res}"
                for ext in (".index", ".timeindex"):
                    ours_ = (d / log.name).with_suffix(ext).read_bytes()
                    rebuilt = (copy / log.name).with_suffix(ext).read_bytes()
                    assert ours_ == rebuilt, f"{(d / log.name).with_suffix(ext)} differs from a rebuild"
                    entries += len(ours_)
                segments += 1
    # Small segments: every Python client's partitions rolled, and the indexes have entries.
    assert set(CLIENTS) <= multi and segments > sum(len(_partition_dirs(written, t)) for t in written.topics)
    assert entries > 0


def test_seglog_dump_verifies_every_index(written, capsys):
    files = [
        str(f)
        for topic in written.topics
        for d in _partition_dirs(written, topic)
        for f in sorted(d.glob("*.index")) + sorted(d.glob("*.timeindex"))
    ]
    capsys.readouterr()
    assert cli_main(["dump", "--verify-index-only", *files]) == 0
    out = capsys.readouterr().out
    assert out.count("index matches the log") == len(files), out[-2000:]
    assert cli_main(["dump", "--index-sanity-check", *files]) == 0
    capsys.readouterr()
    assert any(os.path.getsize(f) > 0 for f in files if f.endswith(".index"))


def test_kafka_filerecords_reads_every_segment(written, tmp_path):
    if written.java_classpath is None:
        pytest.skip(written.java_skip)
    logs = {str(log): log for topic in written.topics for d in _partition_dirs(written, topic) for log in _segments(d)}
    proc = subprocess.run(
        ["java", "-cp", written.java_classpath, "WireFileCheck", *logs], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("OK ")]
    assert len(lines) == len(logs), proc.stdout[-4000:]
    for line in lines:
        path, *fields = line[3:].split(" ")
        got = dict(f.split("=", 1) for f in fields)
        heads = batch_headers(logs[path].read_bytes())
        assert (int(got["batches"]), int(got["records"]), int(got["next"])) == (
            len(heads),
            sum(h.records_count for h in heads),
            heads[-1].last_offset + 1,
        ), line
        codec = written.topics[logs[path].parent.name.rsplit("-", 1)[0]][1]
        assert got["codecs"] == codec, line
    # The checker fails on a damaged batch: one byte of a record flipped.
    bad = tmp_path / Path(next(iter(logs))).name
    data = bytearray(Path(next(iter(logs))).read_bytes())
    data[80] ^= 0xFF
    bad.write_bytes(bytes(data))
    proc = subprocess.run(
        ["java", "-cp", written.java_classpath, "WireFileCheck", str(bad)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 1 and "FAIL" in proc.stdout and "crc" in proc.stdout, proc.stdout
