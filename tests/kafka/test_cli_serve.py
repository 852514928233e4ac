"""`seglog serve DIR --listen HOST:PORT`: a broker process that Kafka clients use, stopped
cleanly by SIGTERM with its records in the log dir."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter

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
