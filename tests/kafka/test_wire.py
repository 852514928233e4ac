"""The broker's framing and requests at the byte level: KIP-511, bad frames closing only their
own connection, nothing written for a refused request, fetch long polls and limits."""

from __future__ import annotations

import struct
import threading
import time
import uuid

import pytest

from seglog.kafka import codec
from seglog.kafka.server import API_VERSIONS
from seglog.storage.records import encode_batch

from .conftest import RawClient, assert_idle_connection_closed, fetch_body, new_topic, produce_body, raw_produce


def test_api_versions_lists_the_served_ranges(raw):
    for version in (0, 3, 4):
        msg = raw.request("ApiVersions", 18, version, {"client_software_name": "t", "client_software_version": "1"})
        assert msg["error_code"] == 0
        assert {k["api_key"]: (k["min_version"], k["max_version"]) for k in msg["api_keys"]} == API_VERSIONS


def test_api_versions_unknown_version_is_answered_in_v0(raw):
    header = struct.pack(">hhih", 18, 99, 7, -1)
    raw.send_frame(header + b"\x00whatever")
    frame = raw.read_frame()
    assert struct.unpack_from(">i", frame)[0] == 7
    msg, end = codec.decode("ApiVersionsResponse", 0, memoryview(frame), 4)
    assert end == len(frame)
    assert msg["error_code"] == 35  # UNSUPPORTED_VERSION
    assert any(k["api_key"] == 18 for k in msg["api_keys"])


@pytest.mark.parametrize(
    "payload,what",
    [
        (struct.pack(">i", 104857601), "oversize length"),
        (struct.pack(">i", 100) + b"\x00\x03\x00\x0c", "truncated frame"),
        (struct.pack(">i", 10) + struct.pack(">hhih", 999, 0, 1, -1), "unknown api key"),
        (struct.pack(">i", 10) + struct.pack(">hhih", 0, 99, 1, -1), "unsupported produce version"),
        (struct.pack(">i", 3) + b"abc", "frame shorter than a header"),
    ],
)
def test_bad_frames_close_only_their_connection(broker, raw, payload, what, caplog):
    topic = new_topic(broker)
    other = RawClient(broker.bootstrap_servers)
    try:
        raw_produce(other, topic, encode_batch([b"before"]))
        raw.sock.sendall(payload)
        if what == "truncated frame":
            raw.sock.shutdown(1)  # the rest of the frame never comes
        assert raw.closed_by_peer(), what
        # The other connection is untouched and keeps working.
        assert (
            raw_produce(other, topic, encode_batch([b"after"]))["responses"][0]["partition_responses"][0]["base_offset"]
            == 1
        )
    finally:
        other.close()


def test_malformed_produce_body_closes_and_writes_nothing(broker, raw):
    topic = new_topic(broker)
    good = codec.encode_to_bytes(
        "ProduceRequest",
        9,
        {
            "transactional_id": None,
            "acks": 1,
            "timeout_ms": 1000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": encode_batch([b"x"])}]}],
        },
    )
    header = struct.pack(">hhih", 0, 9, 5, -1) + b"\x00"
    raw.send_frame(header + good[:-3])  # cut inside the trailing tagged fields
    assert raw.closed_by_peer()
    assert broker.store.log(topic, 0).log_end_offset == 0


def test_corrupt_batch_is_refused_with_corrupt_message_and_nothing_written(broker, raw):
    topic = new_topic(broker)
    batch = bytearray(encode_batch([b"payload"]))
    batch[-1] ^= 0xFF  # breaks the CRC
    part = raw_produce(raw, topic, bytes(batch))["responses"][0]["partition_responses"][0]
    assert part["error_code"] == 2  # CORRUPT_MESSAGE
    assert part["base_offset"] == -1
    assert broker.store.log(topic, 0).log_end_offset == 0
    # The connection stays usable.
    ok = raw_produce(raw, topic, encode_batch([b"good"]))["responses"][0]["partition_responses"][0]
    assert ok["error_code"] == 0 and ok["base_offset"] == 0


def test_invalid_acks_and_unknown_topic(broker, raw):
    topic = new_topic(broker)
    part = raw_produce(raw, topic, encode_batch([b"x"]), acks=2)["responses"][0]["partition_responses"][0]
    assert part["error_code"] == 21  # INVALID_REQUIRED_ACKS
    part = raw_produce(raw, "no-such-topic-" + uuid.uuid4().hex[:6], encode_batch([b"x"]))["responses"][0][
        "partition_responses"
    ][0]
    assert part["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert broker.store.log(topic, 0).log_end_offset == 0


def test_acks_zero_gets_no_response_but_is_written(broker, raw):
    topic = new_topic(broker)
    header = struct.pack(">hhih", 0, 9, 77, -1) + b"\x00"
    raw.send_frame(
        header + codec.encode_to_bytes("ProduceRequest", 9, produce_body(topic, encode_batch([b"a", b"b"]), 0))
    )
    # The next request's answer is the first frame back.
    msg = raw.request(
        "Metadata",
        3,
        12,
        {
            "topics": [{"name": topic, "topic_id": bytes(16)}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )
    assert msg["topics"][0]["name"] == topic
    assert broker.store.log(topic, 0).log_end_offset == 2


def test_fetch_long_poll_waits_for_min_bytes_then_answers_on_append(broker, raw):
    topic = new_topic(broker)
    writer = RawClient(broker.bootstrap_servers)
    timer = threading.Timer(0.3, lambda: raw_produce(writer, topic, encode_batch([b"wake"])))
    start = time.monotonic()
    timer.start()
    try:
        msg = raw.request("Fetch", 1, 12, fetch_body(topic, max_wait_ms=5000))
    finally:
        timer.join()
        writer.close()
    elapsed = time.monotonic() - start
    part = msg["responses"][0]["partitions"][0]
    assert part["high_watermark"] == 1 and len(part["records"]) > 0
    assert 0.25 < elapsed < 3


def test_fetch_with_nothing_to_read_waits_max_wait(broker, raw):
    topic = new_topic(broker)
    start = time.monotonic()
    msg = raw.request("Fetch", 1, 12, fetch_body(topic, max_wait_ms=300))
    assert 0.28 < time.monotonic() - start < 2
    part = msg["responses"][0]["partitions"][0]
    assert part["error_code"] == 0 and len(part["records"]) == 0 and part["high_watermark"] == 0


def test_fetch_limits_sessions_and_out_of_range(broker, raw):
    topic = new_topic(broker)
    for i in range(5):
        raw_produce(raw, topic, encode_batch([b"%d" % i + b"x" * 1000]))
    one = len(encode_batch([b"0" + b"x" * 1000]))
    # partition_max_bytes below one batch: the first partition still gets one whole batch.
    body = fetch_body(topic)
    body["topics"][0]["partitions"][0]["partition_max_bytes"] = 10
    part = raw.request("Fetch", 1, 12, body)["responses"][0]["partitions"][0]
    assert len(part["records"]) == one
    # max_bytes for the whole response: whole batches up to it.
    part = raw.request("Fetch", 1, 12, fetch_body(topic, max_bytes=3 * one))["responses"][0]["partitions"][0]
    assert len(part["records"]) == 3 * one
    # A fetch session the broker never created.
    msg = raw.request("Fetch", 1, 12, fetch_body(topic, session_id=1234, session_epoch=1))
    assert msg["error_code"] == 70 and msg["session_id"] == 0  # FETCH_SESSION_ID_NOT_FOUND
    # An initial session request (epoch 0) gets a full answer and a new session
    # (tests/kafka/test_fetch_sessions.py goes on from there).
    msg = raw.request("Fetch", 1, 12, fetch_body(topic, session_epoch=0))
    assert msg["error_code"] == 0 and msg["session_id"] != 0
    part = raw.request("Fetch", 1, 12, fetch_body(topic, offset=99))["responses"][0]["partitions"][0]
    assert part["error_code"] == 1 and part["high_watermark"] == 5  # OFFSET_OUT_OF_RANGE


def test_list_offsets_special_timestamps(broker, raw):
    topic = new_topic(broker)
    for ts in (1000, 5000, 3000):
        raw_produce(raw, topic, encode_batch([b"v"], timestamps=[ts]))

    def lookup(ts: int) -> tuple[int, int]:
        msg = raw.request(
            "ListOffsets",
            2,
            8,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": ts}]}
                ],
            },
        )
        part = msg["topics"][0]["partitions"][0]
        assert part["error_code"] == 0
        return part["offset"], part["timestamp"]

    assert lookup(-2)[0] == 0
    assert lookup(-1)[0] == 3
    assert lookup(-3) == (1, 5000)
    assert lookup(2000) == (1, 5000)
    assert lookup(6000) == (-1, -1)


def test_transactions_are_answered_unsupported(raw):
    msg = raw.request(
        "InitProducerId",
        22,
        4,
        {"transactional_id": "txn", "transaction_timeout_ms": 1000, "producer_id": -1, "producer_epoch": -1},
    )
    assert msg["error_code"] == 35
    msg = raw.request(
        "InitProducerId",
        22,
        4,
        {"transactional_id": None, "transaction_timeout_ms": 1000, "producer_id": -1, "producer_epoch": -1},
    )
    assert msg["error_code"] == 0 and msg["producer_id"] >= 0
    msg = raw.request(
        "EndTxn", 26, 3, {"transactional_id": "txn", "producer_id": 1, "producer_epoch": 0, "committed": True}
    )
    assert msg["error_code"] == 35


def test_idle_connections_are_closed(tmp_path):
    from seglog import Store

    with Store.open(tmp_path) as store, store.serve(idle_ms=200) as handle:
        assert_idle_connection_closed(handle.bootstrap_servers, 0.5)


def test_acks_zero_failure_closes_the_connection(broker, raw):
    header = struct.pack(">hhih", 0, 9, 78, -1) + b"\x00"
    missing = "missing-" + uuid.uuid4().hex[:6]
    raw.send_frame(header + codec.encode_to_bytes("ProduceRequest", 9, produce_body(missing, encode_batch([b"a"]), 0)))
    assert raw.closed_by_peer()


def test_a_client_that_never_reads_does_not_stall_others(broker, raw):
    topic = new_topic(broker)
    raw_produce(raw, topic, encode_batch([b"x" * 500_000]))
    # Pipeline fetches of 500 KB each and never read the answers: the broker's writes to this
    # connection back up and its handler waits, holding one response at a time.
    header = struct.pack(">hhih", 1, 12, 1, -1) + b"\x00"
    frame = header + codec.encode_to_bytes("FetchRequest", 12, fetch_body(topic))
    raw.sock.setblocking(False)
    sent = 0
    try:
        for _ in range(200):
            raw.sock.send(struct.pack(">i", len(frame)) + frame)
            sent += 1
    except BlockingIOError:
        pass
    raw.sock.setblocking(True)
    assert sent > 10
    other = RawClient(broker.bootstrap_servers)
    try:
        start = time.monotonic()
        part = other.request("Fetch", 1, 12, fetch_body(topic))["responses"][0]["partitions"][0]
        assert len(part["records"]) > 500_000
        assert time.monotonic() - start < 2
    finally:
        other.close()


def test_read_committed_fetch_stops_at_the_lso_and_lists_aborted_transactions(broker, raw):
    from seglog.storage.records import encode_control_batch

    topic = new_topic(broker)
    store = broker.store
    store.append(
        topic, 0, encode_batch([b"a", b"b"], producer_id=500, producer_epoch=0, base_sequence=0, is_transactional=True)
    )
    store.append(
        topic,
        0,
        encode_control_batch(0, timestamp=int(time.time() * 1000), producer_id=500, producer_epoch=0),  # abort
        origin="coordinator",
    )
    store.append(topic, 0, encode_batch([b"d"]))
    store.append(
        topic, 0, encode_batch([b"c"], producer_id=501, producer_epoch=0, base_sequence=0, is_transactional=True)
    )  # still open
    store.append(topic, 0, encode_batch([b"e"]))
    part = raw.request("Fetch", 1, 12, fetch_body(topic, isolation_level=1))["responses"][0]["partitions"][0]
    assert (part["high_watermark"], part["last_stable_offset"]) == (6, 4)
    assert part["aborted_transactions"] == [{"producer_id": 500, "first_offset": 0}]
    from seglog.storage.records import decode_records

    assert [r.value for r in decode_records(bytes(part["records"]))] == [b"a", b"b", b"d"]
    # read_uncommitted reads to the high watermark and lists nothing.
    part = raw.request("Fetch", 1, 12, fetch_body(topic))["responses"][0]["partitions"][0]
    assert part["aborted_transactions"] is None
    assert [r.value for r in decode_records(bytes(part["records"]))] == [b"a", b"b", b"d", b"c", b"e"]
    # kafka-python's read_committed consumer drops the aborted records and stops at the LSO.
    kafka = pytest.importorskip("kafka")
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        isolation_level="read_committed",
        enable_auto_commit=False,
        consumer_timeout_ms=1500,
    )
    try:
        tp = kafka.TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        assert [m.value for m in consumer] == [b"d"]
        assert consumer.end_offsets([tp]) == {tp: 4}
    finally:
        consumer.close()


def test_errors_are_logged_once_per_connection(broker, caplog):
    import logging

    caplog.set_level(logging.DEBUG, logger="seglog.kafka")
    clients = [RawClient(broker.bootstrap_servers) for _ in range(2)]
    try:
        for client in clients:
            for _ in range(3):
                raw_produce(client, "missing-" + uuid.uuid4().hex[:6], encode_batch([b"x"]))
    finally:
        for client in clients:
            client.close()
    records = [r for r in caplog.records if r.name == "seglog.kafka" and "Produce to" in r.getMessage()]
    assert [r.levelno for r in records].count(logging.WARNING) == 2  # one per connection
    assert [r.levelno for r in records].count(logging.DEBUG) == 4


def test_clients_cannot_produce_to_internal_topics(broker, raw):
    part = raw_produce(raw, "__consumer_offsets", encode_batch([b"x"]))["responses"][0]["partition_responses"][0]
    assert part["error_code"] == 17  # INVALID_TOPIC_EXCEPTION


def test_malformed_header_tagged_fields_close_the_connection(broker, raw, caplog):
    header = struct.pack(">hhih", 3, 12, 9, -1) + b"\x05\x01"  # 5 tagged fields, then nothing
    raw.send_frame(header)
    assert raw.closed_by_peer()
    time.sleep(0.05)
    # A client's bad input, reported as such (a warning naming it), not as a server failure.
    mine = [r for r in caplog.records if r.name == "seglog.kafka"]
    assert mine and all(r.levelname == "WARNING" for r in mine)
    assert "tagged fields are malformed" in mine[-1].getMessage()


def test_serve_is_ready_well_under_300_ms(tmp_path):
    """Store.serve() returns once the listener accepts connections: a test suite can start one
    per test. Best of five starts, on a machine shared with other work."""
    from seglog import Store

    with Store.open(tmp_path) as store:
        times = []
        for _ in range(5):
            start = time.perf_counter()
            handle = store.serve()
            client = RawClient(handle.bootstrap_servers)
            msg = client.request("ApiVersions", 18, 3, {"client_software_name": "t", "client_software_version": "1"})
            times.append(time.perf_counter() - start)
            client.close()
            handle.close()
            assert msg["error_code"] == 0
        assert min(times) < 0.3, times


def test_the_listener_modules_import_the_server_nowhere() -> None:
    """Inside seglog.kafka only the server's users import the server: the pieces it is built
    from (security, apis, connection, codec, groups, admin) sit below it, so no import goes
    round a loop (read from the sources: module-level, in-function and TYPE_CHECKING imports)."""
    from tests.unit.test_layers import all_imports

    back = [
        f"{e.source}:{e.line}"
        for e in all_imports()
        if e.target == "seglog.kafka.server" and e.source.startswith("seglog.kafka.")
    ]
    assert not back, f"modules of seglog.kafka that import seglog.kafka.server: {back}"
