"""The listener's data paths: fetched record data sent from the segment files (``os.sendfile``,
or a block buffer where a transport cannot), produce appends that run off the event loop when
they fsync, and the listener's limits read from the broker config."""

from __future__ import annotations

import os
import threading
import time
import uuid

import pytest

from seglog import Store
from seglog.kafka.server import SENDFILE_MIN
from seglog.storage.records import encode_batch

from .conftest import RawClient, assert_idle_connection_closed, fetch_body, raw_produce


def _fill(store: Store, topic: str, batches: int, value_size: int = 1000) -> bytes:
    """Append ``batches`` batches of 100 records; returns the bytes the log holds."""
    store.create_topic(topic, 1)
    for b in range(batches):
        store.append(topic, 0, encode_batch([os.urandom(value_size) for _ in range(100)]))
    lg = store.log(topic, 0)
    return lg.read(0, 1 << 30, upper_bound=lg.high_watermark).to_bytes()


@pytest.fixture
def sendfile_calls(monkeypatch):
    """Bytes the process sent with os.sendfile while the test ran."""
    sent: list[int] = []
    real = os.sendfile

    def counting(out_fd, in_fd, offset, count, *args, **kwargs):
        n = real(out_fd, in_fd, offset, count, *args, **kwargs)
        sent.append(n)
        return n

    monkeypatch.setattr(os, "sendfile", counting)
    return sent


def test_large_fetches_are_sent_from_the_segment_files(broker, raw, sendfile_calls):
    topic = "sf-" + uuid.uuid4().hex[:8]
    data = _fill(broker.store, topic, 4)
    assert len(data) > SENDFILE_MIN
    msg = raw.request("Fetch", 1, 12, fetch_body(topic))
    part = msg["responses"][0]["partitions"][0]
    assert part["error_code"] == 0 and bytes(part["records"]) == data
    assert sum(sendfile_calls) == len(data)
    # read_committed goes the same way (the aborted-transaction bound reads the last batch).
    msg = raw.request("Fetch", 1, 12, fetch_body(topic, isolation_level=1))
    part = msg["responses"][0]["partitions"][0]
    assert bytes(part["records"]) == data and part["aborted_transactions"] == []
    assert sum(sendfile_calls) == 2 * len(data)


def test_a_fetch_larger_than_the_socket_buffers_is_sent_whole(broker, raw, sendfile_calls):
    """A region is sent with os.sendfile at once as far as the socket takes it, the rest
    through the loop once the socket drains, from where the first part ended."""
    topic = "big-" + uuid.uuid4().hex[:8]
    data = _fill(broker.store, topic, 120)  # ~12 MB: more than loopback's socket buffers hold
    size = 1 << 25
    body = fetch_body(topic, max_bytes=size)
    body["topics"][0]["partitions"][0]["partition_max_bytes"] = size
    msg = raw.request("Fetch", 1, 12, body)
    part = msg["responses"][0]["partitions"][0]
    assert part["error_code"] == 0 and bytes(part["records"]) == data
    assert sum(sendfile_calls) == len(data)
    assert len(sendfile_calls) > 1  # the socket filled up part-way


def test_small_fetches_are_copied_not_sendfiled(broker, raw, sendfile_calls):
    topic = "small-" + uuid.uuid4().hex[:8]
    data = _fill(broker.store, topic, 1, value_size=10)
    assert len(data) < SENDFILE_MIN
    msg = raw.request("Fetch", 1, 12, fetch_body(topic))
    assert bytes(msg["responses"][0]["partitions"][0]["records"]) == data
    assert sendfile_calls == []


def test_a_transport_without_sendfile_gets_the_data_through_a_buffer(broker, raw, sendfile_calls, monkeypatch):
    """What a TLS transport does: asyncio cannot sendfile to it, the file is read in blocks."""
    from asyncio import constants

    monkeypatch.setattr(
        "asyncio.selector_events._SelectorSocketTransport._sendfile_compatible", constants._SendfileMode.UNSUPPORTED
    )
    topic = "nosf-" + uuid.uuid4().hex[:8]
    data = _fill(broker.store, topic, 4)
    msg = raw.request("Fetch", 1, 12, fetch_body(topic))
    assert bytes(msg["responses"][0]["partitions"][0]["records"]) == data
    assert sendfile_calls == []


def test_a_fetched_segment_deleted_before_sending_is_still_sent_whole(tmp_path, sendfile_calls, monkeypatch):
    """The response holds its own descriptors: retention may delete the segment meanwhile."""
    config = {"log.segment.bytes": 150_000}
    with Store.open(tmp_path, config) as store, store.serve() as handle:
        data = _fill(store, "t", 4)
        lg = store.log("t", 0)
        assert len(lg.segments) > 1
        results = []
        from seglog.kafka import server as server_mod

        real_send = server_mod.KafkaServer._send

        async def delete_then_send(self, writer, response):
            # Every segment but the active one goes, as retention would, before the data is sent.
            store.delete_records("t", 0, lg.segments[-1].base_offset)
            results.append(len(lg.segments))
            await real_send(self, writer, response)

        with monkeypatch.context() as patched:
            patched.setattr(server_mod.KafkaServer, "_send", delete_then_send)
            client = RawClient(handle.bootstrap_servers)
            try:
                msg = client.request("Fetch", 1, 12, fetch_body("t", max_bytes=1 << 22))
            finally:
                client.close()
        part = msg["responses"][0]["partitions"][0]
        assert results == [1]
        assert bytes(part["records"]) == data[: len(bytes(part["records"]))]
        assert len(bytes(part["records"])) >= SENDFILE_MIN


def test_produce_keeps_the_request_frame_memory(broker, raw, monkeypatch):
    """The records reach Store.append as a view into the request frame, not a copy."""
    topic = "zc-" + uuid.uuid4().hex[:8]
    broker.store.create_topic(topic, 1)
    seen = []
    real = type(broker.store).append

    def spy(self, t, p, records):
        seen.append(type(records))
        return real(self, t, p, records)

    monkeypatch.setattr(type(broker.store), "append", spy)
    assert (
        raw_produce(raw, topic, encode_batch([b"x" * 50_000]))["responses"][0]["partition_responses"][0]["error_code"]
        == 0
    )
    assert seen == [memoryview]


def _slow_flush(monkeypatch, seconds: float) -> list[str]:
    """Make every log flush take ``seconds``; returns the threads that flushed."""
    from seglog.storage.log import Log

    threads: list[str] = []
    real = Log.flush

    def slow(self, *args, **kwargs):
        threads.append(threading.current_thread().name)
        time.sleep(seconds)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Log, "flush", slow)
    return threads


def _answer_time(bootstrap: str) -> float:
    client = RawClient(bootstrap)
    try:
        t = time.monotonic()
        client.request("ApiVersions", 18, 3, {"client_software_name": "t", "client_software_version": "1"})
        return time.monotonic() - t
    finally:
        client.close()


def test_a_slow_fsync_on_produce_does_not_stall_other_connections(tmp_path, monkeypatch):
    with Store.open(tmp_path, {"group.initial.rebalance.delay.ms": 0}) as store, store.serve() as handle:
        store.create_topic("durable", 1, {"flush.messages": 1})
        store.create_topic("plain", 1)
        threads = _slow_flush(monkeypatch, 1.0)
        producer = RawClient(handle.bootstrap_servers)
        done = threading.Event()

        def produce():
            raw_produce(producer, "durable", encode_batch([b"a"]))
            done.set()

        t = threading.Thread(target=produce)
        t.start()
        time.sleep(0.2)
        try:
            assert not done.is_set()
            assert _answer_time(handle.bootstrap_servers) < 0.5
            # An append that does not reach flush.messages stays on the loop thread.
            other = RawClient(handle.bootstrap_servers)
            try:
                out = raw_produce(other, "plain", encode_batch([b"b"]))
            finally:
                other.close()
            assert out["responses"][0]["partition_responses"][0]["error_code"] == 0
        finally:
            t.join(10)
            producer.close()
        assert done.is_set()
        assert threads and not any(name.startswith("seglog-kafka") for name in threads)
        assert store.log("durable", 0).high_watermark == 1
        monkeypatch.undo()


def test_a_slow_offset_commit_fsync_does_not_stall_other_connections(tmp_path, monkeypatch):
    with Store.open(tmp_path, {"offsets.topic.num.partitions": 1}) as store, store.serve() as handle:
        store.create_topic("t", 1)
        _slow_flush(monkeypatch, 1.0)
        committer = RawClient(handle.bootstrap_servers)
        result = {}

        def commit():
            result["msg"] = committer.request(
                "OffsetCommit",
                8,
                8,
                {
                    "group_id": "g",
                    "generation_id_or_member_epoch": -1,
                    "member_id": "",
                    "group_instance_id": None,
                    "topics": [
                        {
                            "name": "t",
                            "partitions": [
                                {
                                    "partition_index": 0,
                                    "committed_offset": 5,
                                    "committed_leader_epoch": -1,
                                    "committed_metadata": "",
                                }
                            ],
                        }
                    ],
                },
            )

        t = threading.Thread(target=commit)
        t.start()
        time.sleep(0.2)
        try:
            assert "msg" not in result
            assert _answer_time(handle.bootstrap_servers) < 0.5
        finally:
            t.join(10)
            committer.close()
        assert result["msg"]["topics"][0]["partitions"][0]["error_code"] == 0
        committed = store.group_offsets.committed("g", "t", 0)
        assert committed is not None and committed.offset == 5
        monkeypatch.undo()


def test_listener_limits_come_from_the_broker_config(tmp_path):
    config = {
        "connections.max.idle.ms": 300,
        "socket.request.max.bytes": 1000,
        "group.min.session.timeout.ms": 100,
        "group.max.session.timeout.ms": 2000,
        "group.initial.rebalance.delay.ms": 0,
    }
    with Store.open(tmp_path, config) as store, store.serve() as handle:
        server = handle.server
        assert server.idle_ms == 300 and server.max_request_bytes == 1000
        assert (server.groups.min_session_ms, server.groups.max_session_ms, server.groups.initial_delay) == (
            100,
            2000,
            0,
        )
        assert_idle_connection_closed(handle.bootstrap_servers, 0.6)
        # A session timeout below the configured floor of 100 ms is refused.
        client = RawClient(handle.bootstrap_servers)
        try:
            msg = client.request(
                "JoinGroup",
                11,
                5,
                {
                    "group_id": "g",
                    "session_timeout_ms": 50,
                    "rebalance_timeout_ms": 1000,
                    "member_id": "",
                    "group_instance_id": None,
                    "protocol_type": "consumer",
                    "protocols": [{"name": "range", "metadata": b""}],
                },
            )
            assert msg["error_code"] == 26  # INVALID_SESSION_TIMEOUT
            msg = client.request(
                "JoinGroup",
                11,
                5,
                {
                    "group_id": "g",
                    "session_timeout_ms": 5000,
                    "rebalance_timeout_ms": 1000,
                    "member_id": "",
                    "group_instance_id": None,
                    "protocol_type": "consumer",
                    "protocols": [{"name": "range", "metadata": b""}],
                },
            )
            assert msg["error_code"] == 26
        finally:
            client.close()
    # Options of serve() override the file.
    with Store.open(tmp_path, config) as store, store.serve(idle_ms=10_000) as handle:
        assert handle.server.idle_ms == 10_000


def test_the_initial_rebalance_delay_defaults_to_kafkas(tmp_path):
    with Store.open(tmp_path) as store, store.serve() as handle:
        assert handle.server.groups.initial_delay == 3.0
        assert handle.server.idle_ms == 600000


def test_appends_that_wait_for_the_disk_run_on_a_worker_thread(tmp_path, monkeypatch):
    """A log's first append (leader epoch checkpoint), one that reserves the next disk blocks
    or rolls a segment go to a worker thread; an ordinary append stays on the loop."""
    from seglog.storage.log import Log

    threads: list[str] = []
    real = Log.append

    def spy(self, *args, **kwargs):
        threads.append(threading.current_thread().name)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Log, "append", spy)
    with Store.open(tmp_path, {"log.segment.bytes": 20_000}) as store, store.serve() as handle:
        store.create_topic("t", 1)
        client = RawClient(handle.bootstrap_servers)
        try:
            for _ in range(8):
                raw_produce(client, "t", encode_batch([b"x" * 3000]))
        finally:
            client.close()
        assert store.log("t", 0).high_watermark == 8
        assert len(store.log("t", 0).segments) == 2
    on_loop = [name.startswith("seglog-kafka") for name in threads]
    # The 1st append is the log's first; six batches of about 3 KB fill the 20 KB segment, so
    # the 7th rolls a new one (and reserves its blocks); the others stay on the loop.
    assert on_loop == [False, True, True, True, True, True, False, True]
