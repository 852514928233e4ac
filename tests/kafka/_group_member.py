"""A consumer group member in a process of its own, for tests/kafka/test_resilience.py.

``python _group_member.py CLIENT BOOTSTRAP TOPIC GROUP SESSION_MS`` (CLIENT: kafka-python,
confluent-kafka or aiokafka) subscribes, prints one JSON line per record consumed (``[partition, offset]``)
and ``{"assigned": [...]}`` whenever its assignment changes, commits synchronously after each
poll that returned records, and on SIGTERM closes cleanly (leaving the group) and exits.
"""

from __future__ import annotations

import json
import signal
import sys

stop = False


def _stop(*_: object) -> None:
    global stop
    stop = True


def emit(obj: object) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def kafka_python(bootstrap: str, topic: str, group: str, session_ms: int) -> None:
    from kafka import KafkaConsumer

    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                      enable_auto_commit=False, auto_offset_reset="earliest",
                      session_timeout_ms=session_ms, heartbeat_interval_ms=max(session_ms // 5, 50),
                      fetch_max_wait_ms=100, reconnect_backoff_ms=50, retry_backoff_ms=50)
    assigned: list[int] = []
    try:
        while not stop:
            batch = c.poll(timeout_ms=100)
            for tp, records in batch.items():
                for r in records:
                    emit([tp.partition, r.offset])
            if batch:
                try:
                    c.commit()
                except Exception as exc:  # noqa: BLE001 - a rebalance: the records come again
                    emit({"commit_failed": str(exc)})
            now = sorted(tp.partition for tp in c.assignment())
            if now != assigned:
                assigned = now
                emit({"assigned": now})
    finally:
        c.close()


def confluent(bootstrap: str, topic: str, group: str, session_ms: int) -> None:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": session_ms,
                  "heartbeat.interval.ms": max(session_ms // 5, 50), "fetch.wait.max.ms": 100,
                  "reconnect.backoff.ms": 50, "log_level": 3})
    c.subscribe([topic])
    assigned: list[int] = []
    try:
        while not stop:
            msgs = c.consume(500, 0.1)
            got = False
            for m in msgs:
                if m.error() is None:
                    emit([m.partition(), m.offset()])
                    got = True
            if got:
                try:
                    c.commit(asynchronous=False)
                except Exception as exc:  # noqa: BLE001 - a rebalance: the records come again
                    emit({"commit_failed": str(exc)})
            now = sorted(tp.partition for tp in c.assignment())
            if now != assigned:
                assigned = now
                emit({"assigned": now})
    finally:
        c.close()


def aiokafka_member(bootstrap: str, topic: str, group: str, session_ms: int) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer

    async def run() -> None:
        c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             session_timeout_ms=session_ms,
                             heartbeat_interval_ms=max(session_ms // 5, 50),
                             fetch_max_wait_ms=100, retry_backoff_ms=50)
        await c.start()
        assigned: list[int] = []
        try:
            while not stop:
                batch = await c.getmany(timeout_ms=100)
                for tp, records in batch.items():
                    for r in records:
                        emit([tp.partition, r.offset])
                if batch:
                    try:
                        await c.commit()
                    except Exception as exc:  # noqa: BLE001 - a rebalance: the records come again
                        emit({"commit_failed": str(exc)})
                now = sorted(tp.partition for tp in c.assignment())
                if now != assigned:
                    assigned = now
                    emit({"assigned": now})
        finally:
            await c.stop()

    asyncio.run(run())


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _stop)
    client, bootstrap, topic, group, session = sys.argv[1:6]
    {"kafka-python": kafka_python, "confluent-kafka": confluent, "aiokafka": aiokafka_member}[client](
        bootstrap, topic, group, int(session))
