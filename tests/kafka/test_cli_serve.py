"""`seglog serve DIR --listen HOST:PORT`: a broker process that Kafka clients use, stopped
cleanly by SIGTERM with its records in the log dir."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from typing import Any

import pytest

from seglog import Store
from seglog.storage.records import decode_records

from .conftest import serve_process

kafka = pytest.importorskip("kafka")


def test_serve_process_takes_records_and_stops_on_sigterm(tmp_path):
    from kafka import KafkaProducer

    config = tmp_path / "broker.properties"
    config.write_text("num.partitions=2\n")
    with serve_process(tmp_path / "data", "--listen", "127.0.0.1:0", "--config", str(config)) as (proc, address):
        producer = KafkaProducer(bootstrap_servers=address, acks="all")
        # The topic is created on first use with num.partitions from the config file.
        for i in range(10):
            producer.send("auto", b"v%d" % i, partition=i % 2)
        producer.flush()
        producer.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert proc.stderr is not None and "stopped" in proc.stderr.read()
    with Store.open(tmp_path / "data") as store:
        assert store.partitions_for("auto") == 2
        values = Counter(r.value for p in range(2) for r in decode_records(store.log("auto", p).read(0).to_bytes()))
        assert values == Counter(b"v%d" % i for i in range(10))


@pytest.mark.parametrize("listen", ["9092", "host:port", "h:99999"])
def test_serve_rejects_a_bad_listen_address(tmp_path, listen):
    result = subprocess.run(
        [sys.executable, "-m", "seglog.cli", "serve", str(tmp_path), "--listen", listen],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ},
    )
    assert result.returncode == 1
    assert "expected HOST:PORT" in result.stderr


def test_the_benchmark_harness_finds_the_address_seglog_serve_announces(tmp_path):
    # seglog bench starts `seglog serve` and the null broker in child processes and takes the
    # address from the line each writes once it accepts connections.
    from seglog.benchmarks.kafka import start_seglog_serve

    broker = start_seglog_serve(tmp_path / "data", tmp_path / "serve.log")
    try:
        host, _, port = broker.bootstrap.rpartition(":")
        assert host == "127.0.0.1" and int(port) > 0
    finally:
        broker.close()


def test_the_null_broker_serves_until_sigterm_as_seglog_serve_does(tmp_path):
    # The null broker runs seglog serve's serving loop: it announces its address once it accepts
    # connections, answers Kafka clients, and ends cleanly (status 0) on SIGTERM.
    from kafka import KafkaConsumer, TopicPartition

    from seglog.benchmarks.kafka import start_null_broker

    broker = start_null_broker(["t"], 3000, tmp_path / "null.log")
    try:
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
        tp = TopicPartition("t", 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        offsets = []
        for _ in range(50):
            for records in consumer.poll(timeout_ms=200).values():
                offsets += [r.offset for r in records]
            if len(offsets) >= 3000:
                break
        consumer.close()
        assert offsets == list(range(3000))
    finally:
        broker.close()
    assert broker.proc.returncode == 0
    assert "null broker: serving on " in (tmp_path / "null.log").read_text()


def test_the_cluster_clients_work_against_seglog_serve(tmp_path):
    # ClusterClient, ClusterProducer and ClusterConsumer speak only Kafka's protocol, so a
    # single store behind `seglog serve` is a cluster of one to them: CreateTopics, idempotent
    # acks=all produce (columns and single records), fetch, ListOffsets and DeleteRecords for
    # the watermarks; ElectLeaders, which a store does not serve, fails with a clear error.
    from seglog.cluster.client import ClusterClient
    from seglog.errors import UnsupportedVersionError

    with serve_process(tmp_path / "data", "--listen", "127.0.0.1:0") as (proc, address):
        with ClusterClient(address, metadata_timeout_s=20) as client:
            client.create_topic("t", partitions=2, replication_factor=1)
            assert [(p.topic, p.partition) for p in client.describe_topics(["t"])] == [("t", 0), ("t", 1)]
            assert client.leader("t", 1) is not None
            producer = client.producer(acks="all", enable_idempotence=True)
            results = producer.send_batch("t", [b"c%03d" % i for i in range(100)], partition=0)
            assert (results[0].first_offset, results[-1].last_offset) == (0, 99)
            meta = [producer.send("t", b"s%d" % i, partition=1) for i in range(5)]
            producer.flush(30)
            assert [f.result().offset for f in meta] == list(range(5))
            producer.close()
            consumer = client.consumer()
            consumer.assign([("t", 0), ("t", 1)])
            got: list[Any] = []
            deadline = time.monotonic() + 20
            while len(got) < 105 and time.monotonic() < deadline:
                got.extend(consumer.poll(timeout_ms=500))
            consumer.close()
            assert sorted((r.partition, r.offset, r.value) for r in got) == [
                (0, i, b"c%03d" % i) for i in range(100)
            ] + [(1, i, b"s%d" % i) for i in range(5)]
            assert client.delete_records("t", 0, 40, timeout_ms=10_000) == 40
            assert client.watermarks("t", 0) == (40, 100, 40)
            with pytest.raises(UnsupportedVersionError, match="ElectLeaders"):
                client.elect_preferred_leader("t", 0)
