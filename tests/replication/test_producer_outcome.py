"""ClusterProducer's final error says "not written" only when no attempt may have appended."""

from __future__ import annotations

import asyncio
from typing import Any

from seglog.cluster.producer import ClusterProducer
from seglog.config import ProducerConfig
from seglog.errors import NotEnoughReplicasError, RequestTimedOutError, make_error
from seglog.util.clock import ManualClock


class _Client:
    """Answers produce requests from a script: an exception to raise or an error code (as
    :meth:`seglog.kafka.client.KafkaClient.produce_once` raises a broker's error)."""

    def __init__(self, script: list[Any]) -> None:
        self.script = script
        self.requests = 0
        self.topic_partitions = {"t": 1}

    async def refresh_metadata(self, topics: Any = None) -> None:
        return None

    async def produce_once(self, topic: str, partition: int, records: Any, **options: Any) -> Any:
        step = self.script[min(self.requests, len(self.script) - 1)]
        self.requests += 1
        if isinstance(step, BaseException):
            raise step
        raise make_error(step, "scripted")


class _Cluster:
    def __init__(self, client: _Client, loop: asyncio.AbstractEventLoop) -> None:
        self.client = client
        self.clock = ManualClock()
        self.loop = loop

    def _client(self) -> _Client:
        return self.client


def _outcome(script: list[Any]) -> BaseException:
    async def go() -> BaseException:
        cfg = ProducerConfig.from_dict(
            {
                "acks": "all",
                "enable.idempotence": False,
                "retry.backoff.ms": 1,
                "retry.backoff.max.ms": 1,
                "delivery.timeout.ms": 300,
                "request.timeout.ms": 100,
                "linger.ms": 0,
            }
        )
        p = ClusterProducer(_Cluster(_Client(script), asyncio.get_running_loop()), cfg)  # type: ignore[arg-type]
        fut = p.send("t", b"v", partition=0)
        for _ in range(500):
            if fut.done():
                break
            await asyncio.sleep(0.01)
        exc = fut.exception(timeout=0)
        assert exc is not None
        return exc

    return asyncio.run(go())


NER = NotEnoughReplicasError.code  # refused before appending: definitely not written


def test_only_refusals_end_as_not_written() -> None:
    exc = _outcome([NER])
    assert isinstance(exc, NotEnoughReplicasError) and exc.definitely_not_written


def test_a_refusal_after_a_timed_out_attempt_is_indeterminate() -> None:
    exc = _outcome([RequestTimedOutError("lost response"), NER])
    assert isinstance(exc, RequestTimedOutError) and not exc.definitely_not_written
    assert "may have been appended" in str(exc)
    assert isinstance(exc.__cause__, NotEnoughReplicasError)
