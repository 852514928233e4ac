"""The generated Kafka protocol codec: kio (generated from the same Kafka definitions by other
people) reads what we write and we read what it writes; malformed input is refused cleanly."""

from __future__ import annotations

import importlib
import io

import pytest

from seglog.errors import InvalidRequestError
from seglog.kafka import codec

kio_serial = pytest.importorskip("kio.serial")

PRODUCE = {
    "transactional_id": None,
    "acks": -1,
    "timeout_ms": 1500,
    "topic_data": [
        {"name": "orders", "partition_data": [{"index": 0, "records": b"\x01" * 40000}, {"index": 3, "records": None}]}
    ],
}
METADATA = {
    "throttle_time_ms": 0,
    "brokers": [{"node_id": 1, "host": "h", "port": 9, "rack": None}],
    "cluster_id": "c",
    "controller_id": 1,
    "topics": [
        {
            "error_code": 0,
            "name": "t",
            "topic_id": bytes(range(16)),
            "is_internal": False,
            "partitions": [
                {
                    "error_code": 0,
                    "partition_index": 0,
                    "leader_id": 1,
                    "leader_epoch": 0,
                    "replica_nodes": [1],
                    "isr_nodes": [1],
                    "offline_replicas": [],
                }
            ],
            "topic_authorized_operations": -1,
        }
    ],
}
ALTER_PARTITION = {
    "broker_id": 2,
    "broker_epoch": 77,
    "topics": [
        {
            "topic_id": bytes(range(16)),
            "partitions": [
                {
                    "partition_index": 1,
                    "leader_epoch": 4,
                    "new_isr_with_epochs": [{"broker_id": 2, "broker_epoch": 77}, {"broker_id": 3, "broker_epoch": 9}],
                    "leader_recovery_state": 0,
                    "partition_epoch": 12,
                }
            ],
        }
    ],
}
OFFSET_FOR_LEADER_EPOCH = {
    "replica_id": 3,
    "topics": [{"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": 5, "leader_epoch": 4}]}],
}
OFFSET_FOR_LEADER_EPOCH_RESPONSE = {
    "throttle_time_ms": 0,
    "topics": [
        {"topic": "t", "partitions": [{"error_code": 0, "partition": 0, "leader_epoch": 4, "end_offset": 1234}]}
    ],
}


@pytest.mark.parametrize(
    "name,version,kio_path,message",
    [
        ("ProduceRequest", 3, "produce.v3.request", PRODUCE),
        ("ProduceRequest", 9, "produce.v9.request", PRODUCE),
        ("MetadataResponse", 12, "metadata.v12.response", METADATA),
        ("MetadataResponse", 7, "metadata.v7.response", METADATA),
        # Between a cluster's nodes.
        ("AlterPartitionRequest", 3, "alter_partition.v3.request", ALTER_PARTITION),
        ("OffsetForLeaderEpochRequest", 4, "offset_for_leader_epoch.v4.request", OFFSET_FOR_LEADER_EPOCH),
        ("OffsetForLeaderEpochRequest", 3, "offset_for_leader_epoch.v3.request", OFFSET_FOR_LEADER_EPOCH),
        (
            "OffsetForLeaderEpochResponse",
            4,
            "offset_for_leader_epoch.v4.response",
            OFFSET_FOR_LEADER_EPOCH_RESPONSE,
        ),
    ],
)
def test_kio_reads_and_writes_the_same_bytes(name, version, kio_path, message):
    parts = codec.encode(name, version, message)
    if name == "ProduceRequest":
        # 40,000 record bytes are over COPY_LIMIT: passed on as their own buffer, not copied.
        assert any(p is message["topic_data"][0]["partition_data"][0]["records"] for p in parts)
    wire = b"".join(parts)
    kio_type = getattr(importlib.import_module(f"kio.schema.{kio_path}"), name)
    obj, size = kio_serial.entity_reader(kio_type)(wire, 0)
    assert size == len(wire)
    buf = io.BytesIO()
    kio_serial.entity_writer(kio_type)(buf, obj)
    assert buf.getvalue() == wire
    back, end = codec.decode(name, version, memoryview(wire))
    assert end == len(wire)
    assert codec.encode_to_bytes(name, version, back) == wire


def test_records_decode_as_views_of_the_frame():
    wire = bytearray(codec.encode_to_bytes("ProduceRequest", 9, PRODUCE))
    msg, _ = codec.decode("ProduceRequest", 9, memoryview(wire))
    records = msg["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(records, memoryview) and records.obj is wire


def test_every_truncation_is_refused_with_the_message_named():
    wire = codec.encode_to_bytes("ProduceRequest", 9, PRODUCE)
    for cut in list(range(40)) + [len(wire) - 1]:
        with pytest.raises(InvalidRequestError, match="malformed ProduceRequest v9"):
            codec.decode("ProduceRequest", 9, memoryview(wire[:cut]))


def test_huge_array_count_is_refused_before_allocating():
    # Metadata v1 request: topics array of 2^31-1 elements in a 4-byte message.
    with pytest.raises(InvalidRequestError, match="cannot fit"):
        codec.decode("MetadataRequest", 1, memoryview(b"\x7f\xff\xff\xff"))


def test_tagged_fields_round_trip_and_unknown_tags_are_skipped():
    msg = {
        "error_code": 0,
        "api_keys": [{"api_key": 0, "min_version": 3, "max_version": 11}],
        "throttle_time_ms": 0,
        "finalized_features_epoch": 7,
        "supported_features": [{"name": "metadata.version", "min_version": 1, "max_version": 20}],
    }
    wire = codec.encode_to_bytes("ApiVersionsResponse", 3, msg)
    back, _ = codec.decode("ApiVersionsResponse", 3, memoryview(wire))
    assert back["finalized_features_epoch"] == 7
    assert back["supported_features"][0]["name"] == "metadata.version"
    # An unknown tag (99, two bytes of data) in the top-level tagged fields is skipped.
    plain = codec.encode_to_bytes("ApiVersionsResponse", 3, {"api_keys": [], "error_code": 0})
    assert plain.endswith(b"\x00")
    extended = plain[:-1] + b"\x01\x63\x02ab"
    back, end = codec.decode("ApiVersionsResponse", 3, memoryview(extended))
    assert end == len(extended) and back["api_keys"] == []


def test_controller_requests_round_trip_in_every_version():
    """LeaderAndIsr, StopReplica and UpdateMetadata (no outside codec has them: they left Kafka
    with ZooKeeper): what is encoded decodes to the same fields and encodes to the same bytes."""
    state = {
        "topic_name": "t",
        "partition_index": 2,
        "controller_epoch": 3,
        "leader": 1,
        "leader_epoch": 7,
        "isr": [1, 2],
        "partition_epoch": 9,
        "replicas": [1, 2, 3],
        "adding_replicas": [],
        "removing_replicas": [],
        "is_new": False,
        "leader_recovery_state": 0,
    }
    leader_and_isr = {
        "controller_id": 1,
        "controller_epoch": 3,
        "broker_epoch": 40,
        "type": 0,
        "ungrouped_partition_states": [state],
        "topic_states": [{"topic_name": "t", "topic_id": bytes(range(16)), "partition_states": [state]}],
        "live_leaders": [{"broker_id": 1, "host_name": "h", "port": 9092}],
    }
    stop_replica = {
        "controller_id": 1,
        "controller_epoch": 3,
        "broker_epoch": 40,
        "delete_partitions": True,
        "ungrouped_partitions": [{"topic_name": "t", "partition_index": 2}],
        "topics": [{"name": "t", "partition_indexes": [2]}],
        "topic_states": [
            {
                "topic_name": "t",
                "partition_states": [{"partition_index": 2, "leader_epoch": 7, "delete_partition": True}],
            }
        ],
    }
    for name, message in (("LeaderAndIsrRequest", leader_and_isr), ("StopReplicaRequest", stop_replica)):
        lo, hi = codec.message_versions(name)
        for version in range(lo, hi + 1):
            wire = codec.encode_to_bytes(name, version, message)
            back, end = codec.decode(name, version, memoryview(wire))
            assert end == len(wire)
            assert codec.encode_to_bytes(name, version, back) == wire
            assert back["controller_epoch"] == 3
    back, _ = codec.decode("LeaderAndIsrRequest", 7, codec.encode_to_bytes("LeaderAndIsrRequest", 7, leader_and_isr))
    assert back["topic_states"][0]["partition_states"][0]["isr"] == [1, 2]
    assert back["topic_states"][0]["topic_id"] == bytes(range(16))
    lo, hi = codec.message_versions("UpdateMetadataRequest")
    assert (lo, hi) == (0, 8)
