"""A consumer group member in a process of its own, for tests/kafka/test_resilience.py.

``python _group_member.py CLIENT BOOTSTRAP TOPIC GROUP SESSION_MS`` (CLIENT: kafka-python,
confluent-kafka or aiokafka) subscribes, prints one JSON line per record consumed (``[partition, offset]``)
and ``{"assigned": [...]}`` whenever its assignment changes, commits synchronously after each
poll that returned records, and on SIGTERM closes cleanly (leaving the group) and exits. The client library's log (INFO:
joins, syncs, assignments, errors) goes to stderr, which the test keeps for its failure messages.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
from collections.abc import Callable
from typing import Any

stop = False


def _stop(*_: object) -> None:
    global stop
    stop = True


def emit(obj: object) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def member(
    poll: Callable[[], list[tuple[int, int]]], commit: Callable[[], object], assignment: Callable[[], list[int]]
) -> None:
    """The loop every client runs until SIGTERM: ``poll`` for up to 100 ms, report each
    (partition, offset) consumed, ``commit`` after a poll that returned records, and report
    the assignment whenever it changes."""
    assigned: list[int] = []
    while not stop:
        consumed = poll()
        for partition, offset in consumed:
            emit([partition, offset])
        if consumed:
            try:
                commit()
            except Exception as exc:  # noqa: BLE001 - a rebalance: the records come again
                emit({"commit_failed": str(exc)})
        now = sorted(assignment())
        if now != assigned:
            assigned = now
            emit({"assigned": now})


def python_client_config(group: str, session_ms: int) -> dict[str, Any]:
    """What the kafka-python and aiokafka members are configured with alike (the two take the
    same keyword names): manual commits from the earliest offset, heartbeats at a fifth of the
    session timeout, short waits and backoffs."""
    return {
        "group_id": group,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "session_timeout_ms": session_ms,
        "heartbeat_interval_ms": max(session_ms // 5, 50),
        "fetch_max_wait_ms": 100,
        "retry_backoff_ms": 50,
    }


def kafka_python(bootstrap: str, topic: str, group: str, session_ms: int) -> None:
    from kafka import KafkaConsumer

    c = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        reconnect_backoff_ms=50,
        **python_client_config(group, session_ms),
    )
    # The topic's metadata before the first poll: kafka-python 3.0.12's leader otherwise
    # assigns without it, rejoins once it arrives, and can lose that rejoin's answer when a
    # poll times out while the broker holds the JoinGroup (see test_groups._learn_metadata).
    c.topics()
    try:
        member(
            lambda: [(tp.partition, r.offset) for tp, records in c.poll(timeout_ms=100).items() for r in records],
            c.commit,
            lambda: [tp.partition for tp in c.assignment()],
        )
    finally:
        c.close()


def confluent(bootstrap: str, topic: str, group: str, session_ms: int) -> None:
    from confluent_kafka import Consumer

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": session_ms,
            "heartbeat.interval.ms": max(session_ms // 5, 50),
            "fetch.wait.max.ms": 100,
            "reconnect.backoff.ms": 50,
            "log_level": 3,
        }
    )
    c.subscribe([topic])

    def consumed() -> list[tuple[int, int]]:
        out = []
        for m in c.consume(500, 0.1):
            if m.error() is None:
                partition, offset = m.partition(), m.offset()
                assert partition is not None and offset is not None  # set on every record
                out.append((partition, offset))
        return out

    try:
        member(
            consumed,
            lambda: c.commit(asynchronous=False),
            lambda: [tp.partition for tp in c.assignment()],
        )
    finally:
        c.close()


def aiokafka_member(bootstrap: str, topic: str, group: str, session_ms: int) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer

    # The consumer's background tasks (heartbeats, rebalances) run on this loop while a poll or
    # a commit waits on it, which is all but the moments spent printing.
    loop = asyncio.new_event_loop()

    async def start() -> AIOKafkaConsumer:
        c = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            **python_client_config(group, session_ms),
        )
        await c.start()
        return c

    c = loop.run_until_complete(start())
    try:
        member(
            lambda: [
                (tp.partition, r.offset)
                for tp, records in loop.run_until_complete(c.getmany(timeout_ms=100)).items()
                for r in records
            ],
            lambda: loop.run_until_complete(c.commit()),
            lambda: [tp.partition for tp in c.assignment()],
        )
    finally:
        loop.run_until_complete(c.stop())
        loop.close()


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    for name in ("kafka.coordinator", "aiokafka.consumer.group_coordinator"):
        logging.getLogger(name).setLevel(logging.INFO)
    signal.signal(signal.SIGTERM, _stop)
    client, bootstrap, topic, group, session = sys.argv[1:6]
    {"kafka-python": kafka_python, "confluent-kafka": confluent, "aiokafka": aiokafka_member}[client](
        bootstrap, topic, group, int(session)
    )
