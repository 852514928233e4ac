"""Incremental fetch sessions (KIP-227): raw Fetch requests through the session's life (open,
incremental fetches that answer only what changed, forgotten partitions, epochs, errors), the
cache's limit and eviction (``seglog.kafka.fetch_sessions`` with a clock of its own), the
clients that use sessions reading everything through them; and Fetch v13+ and Metadata naming
topics by id."""

from __future__ import annotations

import base64
import subprocess
import threading
import time
from collections import Counter
from typing import Any

import pytest

from seglog import Store
from seglog.kafka.fetch_sessions import CachedPartition, FetchSessionCache, next_epoch
from seglog.storage.records import decode_records, encode_batch

from .conftest import JAVA_DIR, RawClient, compile_java, fetch_body, java_unavailable, new_topic

NOT_FOUND = 70
BAD_EPOCH = 71


def _fetch(raw: RawClient, body: dict[str, Any], version: int = 12) -> dict[str, Any]:
    return raw.request("Fetch", 1, version, body)


def _parts(resp: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(t["topic"], p["partition_index"]): p for t in resp["responses"] for p in t["partitions"]}


def _two_partitions(topic: str, offsets: tuple[int, int] = (0, 0)) -> list[dict[str, Any]]:
    return [
        {
            "topic": topic,
            "partitions": [
                {"partition": p, "fetch_offset": offsets[p], "partition_max_bytes": 1 << 20} for p in (0, 1)
            ],
        }
    ]


def test_a_session_answers_only_what_changed(broker, raw):
    topic = new_topic(broker, partitions=2)
    broker.store.append(topic, 0, encode_batch([b"a", b"b"]))
    full = _fetch(raw, fetch_body(topic, session_id=0, session_epoch=0, topics=_two_partitions(topic)))
    session = full["session_id"]
    assert full["error_code"] == 0 and session != 0
    assert set(_parts(full)) == {(topic, 0), (topic, 1)}
    assert len(decode_records(bytes(_parts(full)[(topic, 0)]["records"]))) == 2
    # Epoch 1: partition 0 moves on to offset 2 (the one listed); the session's partitions are
    # read, nothing changed, none is sent.
    moved = [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 2, "partition_max_bytes": 1 << 20}]}]
    inc = _fetch(raw, fetch_body(topic, session_id=session, session_epoch=1, topics=moved))
    assert (inc["error_code"], inc["session_id"], inc["responses"]) == (0, session, [])
    # New records on partition 1 (the session fetches it from offset 0): only it is sent.
    broker.store.append(topic, 1, encode_batch([b"c"]))
    inc = _fetch(raw, fetch_body(topic, session_id=session, session_epoch=2, topics=[]))
    assert list(_parts(inc)) == [(topic, 1)]
    assert [r.value for r in decode_records(bytes(_parts(inc)[(topic, 1)]["records"]))] == [b"c"]
    # The client moves partition 1 on to offset 1: the same high watermark, nothing to send.
    moved = [{"topic": topic, "partitions": [{"partition": 1, "fetch_offset": 1, "partition_max_bytes": 1 << 20}]}]
    inc = _fetch(raw, fetch_body(topic, session_id=session, session_epoch=3, topics=moved))
    assert inc["responses"] == []
    # Partition 0 is fetched from its cached offset 2: the new record is sent.
    broker.store.append(topic, 0, encode_batch([b"d"]))
    inc = _fetch(raw, fetch_body(topic, session_id=session, session_epoch=4, topics=[]))
    assert list(_parts(inc)) == [(topic, 0)]
    assert _parts(inc)[(topic, 0)]["high_watermark"] == 3
    assert [r.value for r in decode_records(bytes(_parts(inc)[(topic, 0)]["records"]))] == [b"d"]


def test_session_epochs_and_unknown_sessions_are_errors(broker, raw):
    topic = new_topic(broker)
    full = _fetch(raw, fetch_body(topic, session_epoch=0))
    session = full["session_id"]
    assert session != 0
    # A repeated (or skipped) epoch: INVALID_FETCH_SESSION_EPOCH, no partitions, no session id.
    for epoch in (2, 5):
        bad = _fetch(raw, fetch_body(topic, session_id=session, session_epoch=epoch, topics=[]))
        assert (bad["error_code"], bad["session_id"], bad["responses"]) == (BAD_EPOCH, 0, [])
    assert _fetch(raw, fetch_body(topic, session_id=session, session_epoch=1, topics=[]))["error_code"] == 0
    again = _fetch(raw, fetch_body(topic, session_id=session, session_epoch=1, topics=[]))
    assert again["error_code"] == BAD_EPOCH
    unknown = _fetch(raw, fetch_body(topic, session_id=session + 1, session_epoch=1, topics=[]))
    assert (unknown["error_code"], unknown["session_id"], unknown["responses"]) == (NOT_FOUND, 0, [])
    # A full fetch naming the session closes it; at epoch -1 it opens none.
    closing = _fetch(raw, fetch_body(topic, session_id=session, session_epoch=-1))
    assert (closing["error_code"], closing["session_id"]) == (0, 0)
    assert list(_parts(closing)) == [(topic, 0)]
    gone = _fetch(raw, fetch_body(topic, session_id=session, session_epoch=2, topics=[]))
    assert gone["error_code"] == NOT_FOUND
    # Fetch v4-v6 have no sessions: answered as before, and no session is made.
    before = len(broker.server.fetch_sessions)
    old = _fetch(raw, fetch_body(topic), version=6)
    assert list(_parts(old)) == [(topic, 0)]
    assert len(broker.server.fetch_sessions) == before


def test_forgotten_partitions_leave_and_an_empty_session_closes(broker, raw):
    topic = new_topic(broker, partitions=2)
    full = _fetch(raw, fetch_body(topic, session_epoch=0, topics=_two_partitions(topic)))
    session = full["session_id"]
    forget = [{"topic": topic, "partitions": [0]}]
    inc = _fetch(raw, fetch_body(topic, session_id=session, session_epoch=1, topics=[], forgotten_topics_data=forget))
    assert (inc["error_code"], inc["session_id"]) == (0, session)
    broker.store.append(topic, 0, encode_batch([b"x"]))
    broker.store.append(topic, 1, encode_batch([b"y"]))
    inc = _fetch(raw, fetch_body(topic, session_id=session, session_epoch=2, topics=[]))
    assert list(_parts(inc)) == [(topic, 1)]  # partition 0 is no longer in the session
    # The last partition forgotten: the session closes, the fetch is answered without one.
    last = [{"topic": topic, "partitions": [1]}]
    inc = _fetch(raw, fetch_body(topic, session_id=session, session_epoch=3, topics=[], forgotten_topics_data=last))
    assert (inc["error_code"], inc["session_id"], inc["responses"]) == (0, 0, [])
    assert _fetch(raw, fetch_body(topic, session_id=session, session_epoch=4, topics=[]))["error_code"] == NOT_FOUND


def test_partitions_with_data_go_last_and_errors_are_always_sent(broker, raw):
    topic = new_topic(broker, partitions=2)
    for p in (0, 1):
        broker.store.append(topic, p, encode_batch([b"%d" % p]))
    body = fetch_body(topic, session_epoch=0, topics=_two_partitions(topic))
    session = _fetch(raw, body)["session_id"]
    broker.store.append(topic, 0, encode_batch([b"0b"]))
    broker.store.append(topic, 1, encode_batch([b"1b"]))
    # The client asks partition 1 from offset 1 only; partition 0 is fetched from offset 0.
    move = [{"topic": topic, "partitions": [{"partition": 1, "fetch_offset": 1, "partition_max_bytes": 1 << 20}]}]
    inc = _fetch(raw, fetch_body(topic, session_id=session, session_epoch=1, topics=move, max_bytes=1))
    # max_bytes=1: only the first partition read gets its (one) batch; the first is partition 0.
    got = _parts(inc)
    assert len(decode_records(bytes(got[(topic, 0)]["records"]))) == 1
    assert not got[(topic, 1)]["records"]  # sent for its new high watermark, without data
    # Partition 0 returned records: it goes last; the next fetch reads partition 1 first.
    inc = _fetch(raw, fetch_body(topic, session_id=session, session_epoch=2, topics=[], max_bytes=1))
    got = _parts(inc)
    assert [r.value for r in decode_records(bytes(got[(topic, 1)]["records"]))] == [b"1b"]
    # A partition with an error is sent every time.
    gone = [{"topic": "no-such-topic", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1}]}]
    for epoch in (3, 4):
        inc = _fetch(raw, fetch_body(topic, session_id=session, session_epoch=epoch, topics=gone if epoch == 3 else []))
        assert _parts(inc)[("no-such-topic", 0)]["error_code"] != 0


def test_the_cache_holds_max_incremental_fetch_session_cache_slots(tmp_path):
    config = {"max.incremental.fetch.session.cache.slots": 2}
    with Store.open(tmp_path, config) as store, store.serve() as handle:
        store.create_topic("t", 1)
        raw = RawClient(handle.bootstrap_servers)
        try:
            ids = [_fetch(raw, fetch_body("t", session_epoch=0))["session_id"] for _ in range(3)]
        finally:
            raw.close()
        # Two sessions fit; the third finds none old enough to evict and goes without.
        assert ids[0] != 0 and ids[1] != 0 and ids[2] == 0
        assert len(handle.server.fetch_sessions) == 2


class _Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def _part(offset: int = 0) -> dict[tuple[str, int], CachedPartition]:
    return {("t", 0): CachedPartition({"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1})}


def _many(n: int) -> dict[tuple[str, int], CachedPartition]:
    return {("t", p): CachedPartition({"partition": p, "fetch_offset": 0, "partition_max_bytes": 1}) for p in range(n)}


def test_eviction_takes_stale_sessions_then_smaller_old_ones():
    clock = _Clock()
    cache = FetchSessionCache(2, eviction_ms=1000, clock=clock)
    a = cache.maybe_create(False, _many(3))
    clock.now = 10
    b = cache.maybe_create(False, _many(1))
    assert a and b
    # Young sessions: a consumer's new session evicts none.
    clock.now = 500
    assert cache.maybe_create(False, _many(5)) == 0
    # A follower's (privileged) session may evict a young consumer's: the one with the fewest
    # partitions (b).
    p = cache.maybe_create(True, _many(1))
    assert p and cache.get(b) is None and cache.get(a) is not None and cache.evictions == 1
    # a unused for longer than eviction_ms: stale, evicted by anyone.
    clock.now = 1200
    cache.touch(cache.sessions[p], clock.now)
    c = cache.maybe_create(False, _many(1))
    assert c and cache.get(a) is None
    # Old enough (touched more than eviction_ms after creation), a consumer's session is
    # evicted by a consumer's with at least as many partitions, never by a smaller one; a
    # follower's is not evicted by a consumer's.
    clock.now = 2300
    cache.touch(cache.sessions[c], clock.now)
    cache.touch(cache.sessions[p], clock.now)
    clock.now = 2400
    assert cache.maybe_create(False, {}) == 0
    d = cache.maybe_create(False, _many(2))
    assert d and cache.get(c) is None and cache.get(p) is not None
    assert cache.maybe_create(False, _many(9)) == 0  # d is young, p is a follower's
    assert cache.evictions == 3


def test_epochs_wrap_and_a_zero_slot_cache_makes_no_sessions():
    assert [next_epoch(e) for e in (-1, 0, 1, 2**31 - 1)] == [-1, 1, 2, 1]
    cache = FetchSessionCache(0)
    assert cache.maybe_create(True, _part()) == 0
    with pytest.raises(ValueError, match="cache.slots"):
        FetchSessionCache(-1)


def _produce_slowly(store: Store, topic: str, n: int, stop: threading.Event, cache: FetchSessionCache | None) -> None:
    """``n`` records, a batch every 2 ms, alternating between partitions 0 and 1; with
    ``cache``, once the consumer has opened a session (so that it fetches many times)."""
    deadline = time.monotonic() + 30
    while cache is not None and not len(cache) and time.monotonic() < deadline and not stop.is_set():
        time.sleep(0.01)
    for i in range(n):
        if stop.is_set():
            return
        store.append(topic, i % 2, encode_batch([b"v%d" % i]))
        time.sleep(0.002)


def _writer(store: Store, cache: FetchSessionCache | None) -> tuple[threading.Thread, threading.Event]:
    stop = threading.Event()
    writer = threading.Thread(target=_produce_slowly, args=(store, "t", 600, stop, cache), daemon=True)
    writer.start()
    return writer, stop


def test_kafka_python_consumer_reads_everything_through_a_session(tmp_path):
    kafka = pytest.importorskip("kafka")
    with Store.open(tmp_path) as store, store.serve() as handle:
        store.create_topic("t", 2)
        cache = handle.server.fetch_sessions
        consumer = kafka.KafkaConsumer(bootstrap_servers=handle.bootstrap_servers, fetch_max_wait_ms=50)
        writer, stop = _writer(store, cache)
        try:
            consumer.assign([kafka.TopicPartition("t", p) for p in (0, 1)])
            consumer.seek_to_beginning()
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(got) < 600 and time.monotonic() < deadline:
                for records in consumer.poll(200).values():
                    got.extend(r.value for r in records)
        finally:
            stop.set()
            writer.join(10)
            consumer.close()
        assert Counter(got) == Counter(b"v%d" % i for i in range(600))
        # Its fetches went through a session (closed when it closed).
        assert cache.incremental_fetches > 10, cache.incremental_fetches


def test_confluent_consumer_reads_everything_without_a_session(tmp_path):
    # librdkafka (2.x) does not use fetch sessions: every fetch is a full one at epoch -1.
    ck = pytest.importorskip("confluent_kafka")
    with Store.open(tmp_path) as store, store.serve() as handle:
        store.create_topic("t", 2)
        consumer = ck.Consumer(
            {"bootstrap.servers": handle.bootstrap_servers, "group.id": "s", "fetch.wait.max.ms": 50}
        )
        writer, stop = _writer(store, None)
        try:
            consumer.assign([ck.TopicPartition("t", p, 0) for p in (0, 1)])
            got: list[bytes | None] = []
            deadline = time.monotonic() + 30
            while len(got) < 600 and time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    got.append(msg.value())
        finally:
            stop.set()
            writer.join(10)
            consumer.close()
        assert Counter(got) == Counter(b"v%d" % i for i in range(600))
        assert len(handle.server.fetch_sessions) == 0


def test_java_consumer_reads_everything_through_a_session(tmp_path):
    reason = java_unavailable()
    if reason is not None:
        pytest.skip(reason)
    classpath = compile_java(tmp_path / "classes", JAVA_DIR / "RestartClient.java")
    with Store.open(tmp_path / "data") as store, store.serve() as handle:
        store.create_topic("t", 2)
        cache = handle.server.fetch_sessions
        # RestartClient's consumer reads partition 0 (every other record).
        proc = subprocess.Popen(
            ["java", "-cp", classpath, "RestartClient", "consume", handle.bootstrap_servers, "t", "300"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        writer, stop = _writer(store, cache)
        try:
            out, _ = proc.communicate(timeout=60)
        finally:
            stop.set()
            writer.join(10)
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert out.split() == ["v%d" % i for i in range(0, 600, 2)]
        assert cache.incremental_fetches > 10, cache.incremental_fetches


def _topic_id(broker: Any, topic: str) -> bytes:
    """The topic's id as the 16 bytes of its UUID (the store keeps Kafka's base64 text)."""
    return base64.urlsafe_b64decode(broker.store.topic_id(topic) + "==")


@pytest.mark.parametrize("version", [13, 15, 16, 17])
def test_fetch_by_topic_id(broker, raw, version):
    topic = new_topic(broker, partitions=2)
    tid = _topic_id(broker, topic)
    broker.store.append(topic, 0, encode_batch([b"a"]))
    unknown = bytes(range(16))
    body = fetch_body(topic, session_epoch=0, topics=_two_partitions(topic))
    body["topics"][0]["topic_id"] = tid
    body["topics"].append(
        {"topic_id": unknown, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1}]}
    )
    full = _fetch(raw, body, version)
    by_id = {t["topic_id"]: {p["partition_index"]: p for p in t["partitions"]} for t in full["responses"]}
    assert [r.value for r in decode_records(bytes(by_id[tid][0]["records"]))] == [b"a"]
    assert by_id[tid][1]["error_code"] == 0
    assert by_id[unknown][0]["error_code"] == 100  # UNKNOWN_TOPIC_ID
    session = full["session_id"]
    assert session != 0
    # The session names topics by id: an incremental fetch by name (v12) is refused, one by
    # id goes on (the unknown id is sent again: it is an error).
    refused = _fetch(raw, fetch_body(topic, session_id=session, session_epoch=1, topics=[]), 12)
    assert (refused["error_code"], refused["session_id"]) == (106, 0)  # FETCH_SESSION_TOPIC_ID_ERROR
    broker.store.append(topic, 1, encode_batch([b"b"]))
    inc = _fetch(raw, fetch_body(topic, session_id=session, session_epoch=1, topics=[]), version)
    got = {(t["topic_id"], p["partition_index"]): p for t in inc["responses"] for p in t["partitions"]}
    assert set(got) == {(tid, 0), (tid, 1), (unknown, 0)}  # partition 0 still from offset 0
    assert [r.value for r in decode_records(bytes(got[(tid, 1)]["records"]))] == [b"b"]
    # Forgetting by id.
    forget = [{"topic_id": unknown, "partitions": [0]}, {"topic_id": tid, "partitions": [0, 1]}]
    inc = _fetch(
        raw, fetch_body(topic, session_id=session, session_epoch=2, topics=[], forgotten_topics_data=forget), version
    )
    assert (inc["error_code"], inc["session_id"], inc["responses"]) == (0, 0, [])


def test_metadata_by_topic_id(broker, raw):
    topic = new_topic(broker)
    tid = _topic_id(broker, topic)
    body = {
        "topics": [{"name": None, "topic_id": tid}, {"name": None, "topic_id": bytes(range(16))}],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }
    found, unknown = raw.request("Metadata", 3, 12, body)["topics"]
    assert (found["error_code"], found["name"], found["topic_id"]) == (0, topic, tid)
    assert [p["partition_index"] for p in found["partitions"]] == [0]
    assert (unknown["error_code"], unknown["name"], unknown["topic_id"]) == (100, None, bytes(range(16)))
