"""The storage layer's log dir (``seglog.storage.log_manager.LogManager``, Kafka's ``LogManager``)
stands without the client layer; ``seglog.Store`` is it with the embedded clients on top."""

from __future__ import annotations

from pathlib import Path

import pytest

import seglog
from seglog.storage.log_manager import LogManager
from seglog.storage.records import decode_records, encode_batch
from seglog.storage.topic import StoredPartition
from seglog.store import Store


def test_the_log_manager_holds_topics_without_clients(tmp_path: Path) -> None:
    with LogManager.open(tmp_path) as logs:
        assert type(logs) is LogManager and repr(logs).startswith("LogManager(")
        logs.create_topic("t", 2)
        assert logs.append("t", 1, encode_batch([b"a", b"b"])).last_offset == 1
        part = logs.partition("t", 1)
        assert isinstance(part, StoredPartition)
        assert part.log is logs.log("t", 1)
        assert [r.value for r in decode_records(part.log.read(0).to_bytes())] == [b"a", b"b"]
        for name in ("producer", "consumer", "serve"):
            assert not hasattr(logs, name)
    with pytest.raises(TypeError, match=r"use LogManager.open\(directory\)"):
        LogManager()


def test_the_store_is_the_log_manager_with_its_clients(tmp_path: Path) -> None:
    assert seglog.Store is Store and issubclass(Store, LogManager)
    with Store.open(tmp_path) as store:
        assert type(store) is Store and repr(store).startswith("Store(")
        store.create_topic("t", 1)
        assert store.producer().send("t", b"x", partition=0).offset == 0
        consumer = store.consumer(auto_offset_reset="earliest")
        consumer.assign([seglog.TopicPartition("t", 0)])
        assert [r.value for r in consumer.poll(timeout_ms=100)] == [b"x"]
    with LogManager.open(tmp_path) as logs:  # the same dir, through the storage layer
        assert logs.log("t", 0).log_end_offset == 1
    with pytest.raises(TypeError, match=r"use Store.open\(directory\)"):
        Store()
