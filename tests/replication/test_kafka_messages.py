"""Every message between nodes survives its Kafka form: dataclass -> Kafka request or response
bytes (seglog.cluster.kafka_messages, seglog.kafka.codec) -> the equal dataclass."""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

import pytest

from seglog.cluster import kafka_messages as km
from seglog.cluster.kafka_listener import topic_id
from seglog.cluster.messages import (
    ISOLATION_LOG_END,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterTopicConfigRequest,
    AlterTopicConfigResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicRequest,
    CreateTopicResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicRequest,
    DeleteTopicResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ErrorResponse,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from seglog.cluster.metadata import PartitionInfo, PartitionState
from seglog.kafka import codec
from seglog.kafka.extensions import EXTENSIONS, FIRST_TAG
from seglog.storage.records import encode_batch

RECORDS = encode_batch([b"v" * 100, b"w"], keys=[b"k", None], timestamps=1700000000000)
BIG = encode_batch([bytes(range(256)) * 100], timestamps=1700000000000)
STATE = PartitionState(
    leader=2,
    leader_epoch=5,
    isr=(2, 3),
    elr=(1,),
    partition_epoch=9,
    controller_epoch=4,
    broker_epochs=((1, 100), (2, 200), (3, 300)),
    last_known=(1,),
)
INFOS = (
    PartitionInfo("a", 0, (1, 2, 3), STATE),
    PartitionInfo("a", 1, (2, 3), PartitionState(3, 1, (3,))),
    PartitionInfo("b.x", 0, (1,), PartitionState(-1, 0, ())),
    PartitionInfo("a", 2, (3, 1), STATE),  # a topic again, after another
)
TOPICS = ["a", "b.x", "c"]

# (request, its responses)
CASES: list[tuple[Any, list[Any]]] = [
    (
        FetchRequest(
            2,
            (
                FetchPartition(
                    "a", 0, 17, current_leader_epoch=5, last_fetched_epoch=4, log_start_offset=3, max_bytes=999
                ),
                FetchPartition("b.x", 3, 0),
                FetchPartition("a", 1, 5),
            ),
            broker_epoch=77,
            max_wait_ms=500,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation=ISOLATION_LOG_END,
        ),
        [
            FetchResponse(
                (
                    FetchPartitionResponse(
                        "a", 0, high_watermark=10, log_start_offset=3, log_end_offset=12, records=RECORDS
                    ),
                    FetchPartitionResponse("b.x", 3, error=6, message="not the leader"),
                    FetchPartitionResponse("a", 1, diverging_epoch=3, diverging_end_offset=40, high_watermark=2),
                )
            ),
            FetchResponse((FetchPartitionResponse("a", 0, records=BIG, high_watermark=1, log_end_offset=1),)),
            FetchResponse((), error=58),
        ],
    ),
    (FetchRequest(-1, (FetchPartition("c", 0, 0),)), [FetchResponse(())]),
    (
        ProduceRequest("a", 1, RECORDS, acks=-1, timeout_ms=1500),
        [
            ProduceResponse("a", 1, base_offset=10, last_offset=11, log_append_time=123, duplicate=True),
            ProduceResponse("a", 1, error=19, message="NOT_ENOUGH_REPLICAS"),
        ],
    ),
    (ProduceRequest("b.x", 0, BIG, acks=0), [ProduceResponse("b.x", 0)]),
    (
        LeaderAndIsrRequest(
            1,
            4,
            300,
            INFOS,
            live_leaders=((1, "127.0.0.1:4001"), (3, "[::1]:4003")),
            topic_configs=(("a", '{"retention.ms":1000}'),),
            state_version=42,
        ),
        [LeaderAndIsrResponse(), LeaderAndIsrResponse(11, "controller epoch 3 is older than 4")],
    ),
    (LeaderAndIsrRequest(1, 1, 1, ()), [LeaderAndIsrResponse()]),
    (
        UpdateMetadataRequest(
            1,
            4,
            300,
            INFOS,
            ((1, 100), (2, 200), (3, 300)),
            topic_configs=(("a", '{"retention.ms":1000}'), ("b.x", "{}")),
            addresses=((1, "127.0.0.1:4001"), (2, "[::1]:4002")),
            kafka_addresses=((1, "127.0.0.1:9092"), (2, "localhost:9093"), (3, "[::1]:9094")),
            state_version=43,
            protocols=((1, "SASL_SSL"), (2, "SASL_SSL")),
            kafka_protocols=((1, "PLAINTEXT"), (2, "SSL"), (3, "SASL_PLAINTEXT")),
        ),
        [UpdateMetadataResponse(), UpdateMetadataResponse(11, "controller epoch 3 is older than 4")],
    ),
    (UpdateMetadataRequest(1, 1, 1, (), ()), [UpdateMetadataResponse()]),
    (
        StopReplicaRequest(1, 4, 300, (("a", 0), ("a", 1), ("b.x", 2)), delete=True),
        [StopReplicaResponse(), StopReplicaResponse(78, "stale broker epoch")],
    ),
    (StopReplicaRequest(1, 4, 300, (("a", 0),), delete=False), [StopReplicaResponse()]),
    (
        AlterPartitionRequest(2, 200, "b.x", 0, 5, 9, (2, 3), (200, 300)),
        [
            AlterPartitionResponse(state=STATE),
            AlterPartitionResponse(95, None, "partition epoch 8 is not 9"),
            AlterPartitionResponse(95, PartitionState(2, 5, (2,), partition_epoch=10), "stale"),
        ],
    ),
    (AlterPartitionRequest(2, 200, "a", 3, 5, 9, (2,)), [AlterPartitionResponse()]),
    (
        MetadataRequest(("a", "b.x")),
        [
            MetadataResponse(
                3,
                INFOS,
                ((1, 100), (3, 300)),
                addresses=((1, "h1:1"), (3, "h3:3")),
                watermarks=(("a", 0, 0, 10, -1), ("b.x", 0, 3, 4, 3)),
            ),
            MetadataResponse(-1, (), (), error=5),
        ],
    ),
    (MetadataRequest(), [MetadataResponse(1, (), ((1, 1),))]),
    (
        CreateTopicRequest("t", 3, 2, config=(("cleanup.policy", '"compact"'),)),
        [CreateTopicResponse(assignment=((1, 2), (2, 3), (3, 1))), CreateTopicResponse(36, "topic t exists")],
    ),
    (CreateTopicRequest("t", 2, 3, assignment=((1, 2, 3), (2, 3, 1))), [CreateTopicResponse()]),
    (
        CreatePartitionsRequest("t", 5, assignment=((1, 2), (2, 3)), validate_only=True),
        [CreatePartitionsResponse(assignment=((1, 2), (2, 3))), CreatePartitionsResponse(37, "count 2 < 3")],
    ),
    (CreatePartitionsRequest("t", 5), [CreatePartitionsResponse()]),
    (DeleteTopicRequest("t"), [DeleteTopicResponse(), DeleteTopicResponse(3, "no topic t")]),
    (
        AlterTopicConfigRequest("t", set=(("retention.ms", '"1000"'),), delete=("cleanup.policy",), validate_only=True),
        [AlterTopicConfigResponse(config=(("retention.ms", "1000"),)), AlterTopicConfigResponse(40, "bad value")],
    ),
    (
        InitProducerIdRequest(),
        [InitProducerIdResponse(producer_id=1000, producer_epoch=0), InitProducerIdResponse(15, message="later")],
    ),
    (InitProducerIdRequest(1000, 3), [InitProducerIdResponse(producer_id=1000, producer_epoch=4)]),
    (
        DeleteRecordsRequest("a", 1, 50, timeout_ms=900),
        [DeleteRecordsResponse("a", 1, low_watermark=50), DeleteRecordsResponse("a", 1, 7, 20, "timed out")],
    ),
    (
        ElectLeadersRequest("a", 0, preferred=False),
        [ElectLeadersResponse(leader=3), ElectLeadersResponse(84, -1, "no live replica")],
    ),
    (ElectLeadersRequest("a", 0), [ElectLeadersResponse(leader=1)]),
    (
        ControlledShutdownRequest(3, 300),
        [ControlledShutdownResponse(), ControlledShutdownResponse(0, "", (("a", 0), ("b.x", 1)))],
    ),
]


def names(tid: bytes) -> str:
    for t in TOPICS:
        if topic_id(t) == tid:
            return t
    raise AssertionError(f"unknown topic id {tid.hex()}")


def wire_request(req: Any) -> tuple[km.NodeApi, bytes]:
    api, body = km.request_to_kafka(req)
    return api, codec.encode_to_bytes(api.name + "Request", api.version, body)


def wire_response(req: Any, resp: Any) -> bytes:
    api = km.api_for(req)
    return codec.encode_to_bytes(api.name + "Response", api.version, km.response_to_kafka(req, resp))


def decode_response(req: Any, data: bytes) -> Any:
    api = km.api_for(req)
    body, end = codec.decode(api.name + "Response", api.version, memoryview(data))
    assert end == len(data)
    return km.response_from_kafka(req, body)


@pytest.mark.parametrize("req, responses", CASES, ids=[f"{type(c[0]).__name__}-{i}" for i, c in enumerate(CASES)])
def test_round_trip(req: Any, responses: list[Any]) -> None:
    api, data = wire_request(req)
    body, end = codec.decode(api.name + "Request", api.version, memoryview(data))
    assert end == len(data)
    assert km.request_from_kafka(api.key, body, names) == req
    for resp in [*responses, ErrorResponse(35, f"cannot handle {type(req).__name__}")]:
        back = decode_response(req, wire_response(req, resp))
        assert back == resp
        assert type(back) is type(resp)


def test_every_api_and_message_is_covered() -> None:
    sent = {type(c[0]) for c in CASES}
    assert sent == {a.request for a in km.NODE_APIS}
    for api in km.NODE_APIS:
        assert codec.is_flexible(api.name + "Request", api.version), api
        lo, hi = codec.message_versions(api.name + "Request")
        assert lo <= api.version <= hi


def test_fetched_records_are_a_view_of_the_received_frame() -> None:
    req = CASES[0][0]
    data = bytearray(wire_response(req, CASES[0][1][1]))
    back = decode_response(req, bytes(data))
    rec = back.partitions[0].records
    assert isinstance(rec, memoryview) and bytes(rec) == BIG
    assert type(rec.obj) is bytes and len(rec.obj) > len(BIG)  # a slice of the whole frame


def test_seglog_tags_are_numbered_apart_from_kafkas() -> None:
    for added in EXTENSIONS.values():
        for _, field in added:
            assert field[4] >= FIRST_TAG


def test_a_follower_fetch_is_kafkas_fetch_v15_with_replica_state() -> None:
    """Byte level: the header fields as Kafka's FetchRequest v15 lays them out."""
    req = FetchRequest(2, (FetchPartition("a", 0, 17, 5, 4, 3, 999),), broker_epoch=77, max_wait_ms=500)
    api, data = wire_request(req)
    assert (api.key, api.version) == (1, 15)
    # max_wait_ms, min_bytes, max_bytes, isolation_level, session_id, session_epoch
    assert struct.unpack_from(">iiibii", data, 0) == (500, 1, 10 << 20, 0, 0, -1)
    assert data[21] == 2 and data[22:38] == topic_id("a")  # one topic (compact array), by id
    # partition, current_leader_epoch, fetch_offset, last_fetched_epoch, log_start_offset,
    # partition_max_bytes
    assert struct.unpack_from(">iiqiqi", data, 39) == (0, 5, 17, 4, 3, 999)
    body, _ = codec.decode("FetchRequest", 15, memoryview(data))
    assert body["replica_state"] == {"replica_id": 2, "replica_epoch": 77}
    assert body["read_to_log_end"] is False


def test_alter_partition_answers_a_stale_partition_epoch_with_kafkas_code() -> None:
    req = AlterPartitionRequest(2, 200, "a", 0, 5, 8, (2, 3))
    data = wire_response(req, AlterPartitionResponse(95, None, "partition epoch 8 is not 9"))
    # throttle_time_ms, then the top-level error code: INVALID_UPDATE_VERSION (95)
    assert struct.unpack_from(">ih", data, 0) == (0, 95)


def test_config_values_travel_as_kafkas_strings() -> None:
    """CreateTopics and IncrementalAlterConfigs carry config values as Kafka's strings, as a
    Kafka broker reads them (not seglog's JSON text): booleans true/false, lists comma-separated."""
    typed = (
        ("retention.ms", "1000"),
        ("unclean.leader.election.enable", "true"),
        ("cleanup.policy", '["compact", "delete"]'),
    )
    api, data = wire_request(CreateTopicRequest("t", 1, 1, config=(*typed, ("compression.type", '"zstd"'))))
    body, _ = codec.decode(api.name + "Request", api.version, memoryview(data))
    sent = {c["name"]: c["value"] for c in body["topics"][0]["configs"]}
    assert sent == {
        "retention.ms": "1000",
        "unclean.leader.election.enable": "true",
        "cleanup.policy": "compact,delete",
        "compression.type": "zstd",
    }
    back = km.request_from_kafka(api.key, body, names)
    assert dict(back.config)["compression.type"] == '"zstd"'
    api, data = wire_request(AlterTopicConfigRequest("t", set=typed))
    body, _ = codec.decode(api.name + "Request", api.version, memoryview(data))
    assert [c["value"] for c in body["resources"][0]["configs"]] == ["1000", "true", "compact,delete"]


def test_update_metadata_is_kafkas_v8_with_each_nodes_two_endpoints() -> None:
    """Kafka's own fields carry the partition states (partition epoch as ``zk_version``) and
    every live node with its endpoints: the inter-node one and the Kafka listener, by listener
    name; the broker epochs, configs and state version travel in seglog's tags."""
    req = UpdateMetadataRequest(
        1,
        4,
        300,
        INFOS[:2],
        ((1, 100), (2, 200)),
        topic_configs=(("a", "{}"),),
        addresses=((1, "h1:4001"), (2, "h2:4002")),
        kafka_addresses=((2, "k2:9093"),),
        state_version=7,
        protocols=((1, "SASL_SSL"), (2, "SSL")),
        kafka_protocols=((2, "SASL_PLAINTEXT"),),
    )
    api, data = wire_request(req)
    assert (api.key, api.version) == (6, 8)
    # controller_id, is_k_raft_controller, controller_epoch, broker_epoch (v8's ``type`` is a tag)
    assert struct.unpack_from(">i?iq", data, 0) == (1, False, 4, 300)
    body, _ = codec.decode("UpdateMetadataRequest", 8, memoryview(data))
    (topic,) = body["topic_states"]
    assert topic["topic_name"] == "a" and topic["topic_id"] == topic_id("a")
    assert [p["zk_version"] for p in topic["partition_states"]] == [9, 0]
    brokers = {b["id"]: b for b in body["live_brokers"]}
    # Kafka's SecurityProtocol ids: PLAINTEXT 0, SSL 1, SASL_PLAINTEXT 2, SASL_SSL 3.
    assert [(e["listener"], e["host"], e["port"], e["security_protocol"]) for e in brokers[1]["endpoints"]] == [
        (km.INTER_NODE_LISTENER, "h1", 4001, 3)
    ]
    assert [(e["listener"], e["host"], e["port"], e["security_protocol"]) for e in brokers[2]["endpoints"]] == [
        (km.INTER_NODE_LISTENER, "h2", 4002, 1),
        (km.CLIENT_LISTENER, "k2", 9093, 2),
    ]
    assert (brokers[1]["broker_epoch"], brokers[2]["broker_epoch"]) == (100, 200)
    assert body["state_version"] == 7


def test_update_metadata_refuses_an_address_of_a_node_that_is_not_live() -> None:
    req = UpdateMetadataRequest(1, 4, 300, (), ((1, 100),), kafka_addresses=((2, "k2:9093"),))
    with pytest.raises(ValueError, match=r"kafka_addresses name nodes \[2\]"):
        wire_request(req)


def test_update_metadata_endpoints_without_a_protocol_are_plaintext_and_bad_ones_refused() -> None:
    live = ((1, 100), (2, 200))
    req = UpdateMetadataRequest(1, 4, 300, (), live, addresses=((1, "h1:1"),), kafka_addresses=((2, "k2:2"),))
    _, data = wire_request(req)
    body, _ = codec.decode("UpdateMetadataRequest", 8, memoryview(data))
    assert [e["security_protocol"] for b in body["live_brokers"] for e in b["endpoints"]] == [0, 0]
    back = km.request_from_kafka(6, body, names)
    assert (back.protocols, back.kafka_protocols) == (((1, "PLAINTEXT"),), ((2, "PLAINTEXT"),))
    with pytest.raises(ValueError, match=r"node 1's INTER_NODE endpoint h1:1 has security protocol 'TLS'"):
        wire_request(dataclasses.replace(req, protocols=((1, "TLS"),)))
    with pytest.raises(ValueError, match=r"kafka_protocols name nodes \[1\] without an address there"):
        wire_request(dataclasses.replace(req, kafka_protocols=((1, "SSL"),)))
    body["live_brokers"][0]["endpoints"][0]["security_protocol"] = 4
    with pytest.raises(ValueError, match=r"node 1's INTER_NODE endpoint h1:1 has security protocol id 4"):
        km.request_from_kafka(6, body, names)


def test_leader_and_isr_names_its_leaders_in_live_leaders() -> None:
    req = LeaderAndIsrRequest(1, 4, 300, INFOS[:1], live_leaders=((1, "h1:4001"),), state_version=3)
    api, data = wire_request(req)
    assert (api.key, api.version) == (4, 7)
    body, _ = codec.decode("LeaderAndIsrRequest", 7, memoryview(data))
    assert body["live_leaders"] == [{"broker_id": 1, "host_name": "h1", "port": 4001}]
    assert "live_broker_epochs" not in body and "node_addresses" not in body
