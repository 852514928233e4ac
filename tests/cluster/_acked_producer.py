"""kafka-python's producer in a process of its own, for tests/cluster/test_kafka_faults.py,
speaking the protocol of tests/kafka/java/AckedProducer.java:
``python _acked_producer.py BOOTSTRAP TOPIC PARTITIONS PREFIX`` sends ``PREFIX-000000``,
``PREFIX-000001``, ... round-robin over the partitions (acks=all, retries, one request in flight,
no idempotence) until its standard input closes, then flushes and exits. It prints
``ACK partition offset value`` per acknowledged record, ``FAIL value error`` per failed one and
``SENT n`` last. (A process of its own: kafka-python leaves the sockets of refused connections
unclosed, which would warn inside the test run.)"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

lock = threading.Lock()


def emit(line: str) -> None:
    with lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def main(bootstrap: str, topic: str, partitions: int, prefix: str) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=False,  # kafka-python 3 turns it on by default
        retries=1_000_000,
        max_in_flight_requests_per_connection=1,
        linger_ms=2,
        request_timeout_ms=5000,
        retry_backoff_ms=50,
        reconnect_backoff_ms=50,
        metadata_max_age_ms=1000,
        max_block_ms=60000,
    )
    eof = threading.Event()

    def until_stdin_closes() -> None:
        sys.stdin.read()
        eof.set()

    threading.Thread(target=until_stdin_closes, daemon=True).start()
    n = 0
    while not eof.is_set():
        value = f"{prefix}-{n:06d}"

        def ok(md: Any, value: str = value) -> None:
            emit(f"ACK {md.partition} {md.offset} {value}")

        def bad(exc: Any, value: str = value) -> None:
            emit(f"FAIL {value} {exc!r}")

        producer.send(topic, value.encode(), partition=n % partitions).add_callback(ok).add_errback(bad)
        n += 1
        if n % 20 == 0:
            time.sleep(0.005)
    producer.flush(60)
    producer.close(10)
    emit(f"SENT {n}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
