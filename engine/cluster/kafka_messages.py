"""The cluster's messages (``seglog.cluster.messages``) as Kafka requests and responses.

Between nodes, every request of :mod:`seglog.cluster.messages` travels as one Kafka request in
one fixed, flexible version (:data:`NODE_APIS`; ``docs/kafka-protocol.md``, "Between nodes"):

=================================  ==========================  =======
seglog message                     Kafka API                   version
=================================  ==========================  =======
FetchRequest                       Fetch (1)                   15
ProduceRequest                     Produce (0)                 9
LeaderAndIsrRequest                LeaderAndIsr (4)            7
StopReplicaRequest                 StopReplica (5)             4
UpdateMetadataRequest              UpdateMetadata (6)          8
ControlledShutdownRequest          ControlledShutdown (7)      3
MetadataRequest                    Metadata (3)                12
CreateTopicRequest                 CreateTopics (19)           7
DeleteTopicRequest                 DeleteTopics (20)           6
DeleteRecordsRequest               DeleteRecords (21)          2
InitProducerIdRequest              InitProducerId (22)         5
CreatePartitionsRequest            CreatePartitions (37)       3
ElectLeadersRequest                ElectLeaders (43)           2
AlterTopicConfigRequest            IncrementalAlterConfigs     1
                                   (44)
AlterPartitionRequest              AlterPartition (56)         3
=================================  ==========================  =======

Kafka's fields carry what they name: a follower's Fetch has its ``replica_state`` (replica id
and broker epoch), each partition's ``current_leader_epoch``, ``last_fetched_epoch`` and
``log_start_offset``, and is answered with ``high_watermark``, ``log_start_offset`` and
``diverging_epoch``; LeaderAndIsr the controller and broker epochs, the states of the
receiver's partitions (partition epoch included) and, in ``live_leaders``, the inter-node
address of those partitions' leaders; UpdateMetadata every partition's state and every live
node with two endpoints (listener ``INTER_NODE``: where its transport listens, ``CLIENT``: its
Kafka listener);
AlterPartition the partition epoch and the new ISR with each member's broker epoch. Topics go
by name, or by their topic id (:func:`seglog.cluster.kafka_listener.topic_id`) in the versions
that have no name: the receiver maps the id back (``topic_names``), a response takes the names
of its request. What Kafka has no field for travels in the tagged fields of
:mod:`seglog.kafka.extensions` (the leader's log end offset, the controller's state version
and topic config overrides, the eligible leader replicas, ...); a request the receiver could not
handle at all (:class:`~seglog.cluster.messages.ErrorResponse`) is its API's response with the
``request_error_code`` tag set.

Config values of CreateTopics and IncrementalAlterConfigs are Kafka's strings (``true``,
``1000``, ``compact,delete``: :func:`config_string`), read back as the JSON of that string
(:func:`config_json`); the overrides in LeaderAndIsr's tagged field stay JSON.
Record data decodes as a zero-copy ``memoryview`` of the received frame.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from seglog.cluster.kafka_listener import topic_id
from seglog.cluster.messages import (
    CONSUMER_REPLICA_ID,
    ISOLATION_HIGH_WATERMARK,
    ISOLATION_LOG_END,
    NONE,
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
from seglog.kafka.codec import Message
from seglog.kafka.listener import unknown_id_name
from seglog.kafka.security import SECURITY_PROTOCOLS

__all__ = [
    "NODE_APIS",
    "NodeApi",
    "api_for",
    "api_for_key",
    "request_from_kafka",
    "request_source",
    "request_to_kafka",
    "response_from_kafka",
    "response_to_kafka",
]

#: Maps a topic id to its name (an unknown id: :func:`seglog.kafka.listener.unknown_id_name`).
TopicNames = Callable[[bytes], str]

_TOPIC_RESOURCE = 2  # IncrementalAlterConfigs' resource type of a topic
_SET, _DELETE = 0, 1  # IncrementalAlterConfigs' operations
_PREFERRED, _UNCLEAN = 0, 1  # ElectLeaders' election types


@dataclasses.dataclass(frozen=True, slots=True)
class NodeApi:
    """One Kafka API as the nodes use it: its name, key and the one version sent."""

    name: str
    key: int
    version: int
    request: type
    response: type


NODE_APIS: tuple[NodeApi, ...] = (
    NodeApi("Produce", 0, 9, ProduceRequest, ProduceResponse),
    NodeApi("Fetch", 1, 15, FetchRequest, FetchResponse),
    NodeApi("Metadata", 3, 12, MetadataRequest, MetadataResponse),
    NodeApi("LeaderAndIsr", 4, 7, LeaderAndIsrRequest, LeaderAndIsrResponse),
    NodeApi("StopReplica", 5, 4, StopReplicaRequest, StopReplicaResponse),
    NodeApi("UpdateMetadata", 6, 8, UpdateMetadataRequest, UpdateMetadataResponse),
    NodeApi("ControlledShutdown", 7, 3, ControlledShutdownRequest, ControlledShutdownResponse),
    NodeApi("CreateTopics", 19, 7, CreateTopicRequest, CreateTopicResponse),
    NodeApi("DeleteTopics", 20, 6, DeleteTopicRequest, DeleteTopicResponse),
    NodeApi("DeleteRecords", 21, 2, DeleteRecordsRequest, DeleteRecordsResponse),
    NodeApi("InitProducerId", 22, 5, InitProducerIdRequest, InitProducerIdResponse),
    NodeApi("CreatePartitions", 37, 3, CreatePartitionsRequest, CreatePartitionsResponse),
    NodeApi("ElectLeaders", 43, 2, ElectLeadersRequest, ElectLeadersResponse),
    NodeApi("IncrementalAlterConfigs", 44, 1, AlterTopicConfigRequest, AlterTopicConfigResponse),
    NodeApi("AlterPartition", 56, 3, AlterPartitionRequest, AlterPartitionResponse),
)
_BY_TYPE = {a.request: a for a in NODE_APIS}
_BY_KEY = {a.key: a for a in NODE_APIS}


def api_for(request: Any) -> NodeApi:
    """The Kafka API that carries ``request`` (a message of :mod:`seglog.cluster.messages`)."""
    api = _BY_TYPE.get(type(request))
    if api is None:
        raise TypeError(f"no Kafka API carries {type(request).__name__} between nodes")
    return api


def api_for_key(key: int) -> NodeApi | None:
    return _BY_KEY.get(key)


def request_source(request: Any) -> int | None:
    """The node a request names as its sender (Fetch's replica id, AlterPartition's and
    ControlledShutdown's broker id, the controller id of a controller request), or None."""
    if isinstance(request, FetchRequest):
        return request.replica_id if request.replica_id >= 0 else None
    if isinstance(request, (AlterPartitionRequest, ControlledShutdownRequest)):
        return request.broker_id
    if isinstance(request, (LeaderAndIsrRequest, UpdateMetadataRequest, StopReplicaRequest)):
        return request.controller_id
    return None


# -- helpers --------------------------------------------------------------------------------------


def _grouped(items: Iterable[Any], topic: Callable[[Any], str]) -> Iterator[tuple[str, list[Any]]]:
    """Runs of consecutive items of one topic, in order (so that decoding keeps the order)."""
    name: str | None = None
    run: list[Any] = []
    for item in items:
        t = topic(item)
        if run and t != name:
            yield name or "", run
            run = []
        name = t
        run.append(item)
    if run:
        yield name or "", run


def _split_address(node_id: int, address: str, host_field: str = "host") -> Message:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"node {node_id}'s address {address!r} is not host:port")
    return {"broker_id": node_id, host_field: host, "port": int(port)}


def _join_address(entry: Message, host: str = "host") -> tuple[int, str]:
    return int(entry["broker_id"]), f"{entry[host]}:{entry['port']}"


def _epochs(pairs: Iterable[tuple[int, int]]) -> list[Message]:
    return [{"broker_id": b, "broker_epoch": e} for b, e in pairs]


def _pairs(entries: list[Message] | None) -> tuple[tuple[int, int], ...]:
    return tuple((e["broker_id"], e["broker_epoch"]) for e in entries or ())


def _state_extras(st: PartitionState) -> Message:
    return {
        "eligible_leader_replicas": list(st.elr) if st.elr else None,
        "broker_epochs": _epochs(st.broker_epochs) if st.broker_epochs else None,
        "last_known_leaders": list(st.last_known) if st.last_known else None,
    }


def _state(p: Message, leader: str, partition_epoch: int, controller_epoch: int, isr: str = "isr") -> PartitionState:
    return PartitionState(
        leader=p[leader],
        leader_epoch=p["leader_epoch"],
        isr=tuple(p[isr]),
        elr=tuple(p.get("eligible_leader_replicas") or ()),
        partition_epoch=partition_epoch,
        controller_epoch=controller_epoch,
        broker_epochs=_pairs(p.get("broker_epochs")),
        last_known=tuple(p.get("last_known_leaders") or ()),
    )


def _text(s: str | None) -> str:
    return s or ""


def _null(s: str) -> str | None:
    return s or None


def config_string(value_json: str) -> str | None:
    """A topic config value of seglog's messages (JSON text) as Kafka's CreateTopics and
    IncrementalAlterConfigs carry it: a string, booleans ``true``/``false``, lists
    comma-separated."""
    v = json.loads(value_json)
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return ",".join(str(x) for x in v)
    return str(v)


def config_json(text: str | None) -> str:
    """A topic config value as Kafka's requests carry it (a string) as seglog's messages hold
    it: JSON text (of that string; every reader parses a value by its key's type)."""
    return json.dumps(text)


def _assignments(entries: list[Message] | None) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(a["broker_ids"]) for a in entries or ())


# -- requests -------------------------------------------------------------------------------------


def request_to_kafka(msg: Any) -> tuple[NodeApi, Message]:
    """``msg`` as its Kafka request: (the API, the request body for :mod:`seglog.kafka.codec`).
    Record data stays as given (bytes, or a read that the sender turns into file regions)."""
    api = api_for(msg)
    return api, _REQ_TO[type(msg)](msg)


def request_from_kafka(key: int, body: Message, topic_names: TopicNames) -> Any:
    """The seglog message a decoded Kafka request of API ``key`` carries; ``topic_names`` maps
    topic ids back to names. Raises KeyError for an API not used between nodes."""
    api = _BY_KEY[key]
    return _REQ_FROM[api.request](body, topic_names)


def _fetch_req(m: FetchRequest) -> Message:
    if m.isolation not in (ISOLATION_HIGH_WATERMARK, ISOLATION_LOG_END):
        raise ValueError(f"fetch isolation {m.isolation!r} is not {ISOLATION_HIGH_WATERMARK} or {ISOLATION_LOG_END}")
    return {
        "replica_state": {"replica_id": m.replica_id, "replica_epoch": m.broker_epoch}
        if m.replica_id != CONSUMER_REPLICA_ID or m.broker_epoch != -1
        else None,
        "max_wait_ms": m.max_wait_ms,
        "min_bytes": m.min_bytes,
        "max_bytes": m.max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,  # a full fetch outside any fetch session
        "topics": [
            {
                "topic_id": topic_id(name),
                "partitions": [
                    {
                        "partition": p.partition,
                        "current_leader_epoch": p.current_leader_epoch,
                        "fetch_offset": p.fetch_offset,
                        "last_fetched_epoch": p.last_fetched_epoch,
                        "log_start_offset": p.log_start_offset,
                        "partition_max_bytes": p.max_bytes,
                    }
                    for p in parts
                ],
            }
            for name, parts in _grouped(m.partitions, lambda p: p.topic)
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
        "read_to_log_end": m.isolation == ISOLATION_LOG_END,
    }


def _fetch_from(b: Message, names: TopicNames) -> FetchRequest:
    rs = b.get("replica_state") or {"replica_id": -1, "replica_epoch": -1}
    return FetchRequest(
        replica_id=rs["replica_id"],
        partitions=tuple(
            FetchPartition(
                topic=names(t["topic_id"]),
                partition=p["partition"],
                fetch_offset=p["fetch_offset"],
                current_leader_epoch=p["current_leader_epoch"],
                last_fetched_epoch=p["last_fetched_epoch"],
                log_start_offset=p["log_start_offset"],
                max_bytes=p["partition_max_bytes"],
            )
            for t in b["topics"]
            for p in t["partitions"]
        ),
        broker_epoch=rs["replica_epoch"],
        max_wait_ms=b["max_wait_ms"],
        min_bytes=b["min_bytes"],
        max_bytes=b["max_bytes"],
        isolation=ISOLATION_LOG_END if b.get("read_to_log_end") else ISOLATION_HIGH_WATERMARK,
    )


def _produce_req(m: ProduceRequest) -> Message:
    return {
        "transactional_id": None,
        "acks": m.acks,
        "timeout_ms": m.timeout_ms,
        "topic_data": [{"name": m.topic, "partition_data": [{"index": m.partition, "records": m.records}]}],
    }


def _produce_from(b: Message, names: TopicNames) -> ProduceRequest:
    (t,) = b["topic_data"]
    (p,) = t["partition_data"]
    records = p["records"]
    return ProduceRequest(
        t["name"], p["index"], records if records is not None else b"", acks=b["acks"], timeout_ms=b["timeout_ms"]
    )


def _partition_states(parts: Iterable[PartitionInfo], version_field: str, extra: Message) -> list[Message]:
    """The topic_states of LeaderAndIsr (``partition_epoch``) or UpdateMetadata (``zk_version``)."""
    return [
        {
            "topic_name": name,
            "topic_id": topic_id(name),
            "partition_states": [
                {
                    "partition_index": p.partition,
                    "controller_epoch": p.state.controller_epoch,
                    "leader": p.state.leader,
                    "leader_epoch": p.state.leader_epoch,
                    "isr": list(p.state.isr),
                    version_field: p.state.partition_epoch,
                    "replicas": list(p.replicas),
                    **extra,
                    **_state_extras(p.state),
                }
                for p in group
            ],
        }
        for name, group in _grouped(parts, lambda p: p.topic)
    ]


def _partitions_from(b: Message, version_field: str) -> tuple[PartitionInfo, ...]:
    return tuple(
        PartitionInfo(
            t["topic_name"],
            p["partition_index"],
            tuple(p["replicas"]),
            _state(p, "leader", p[version_field], p["controller_epoch"]),
        )
        for t in b["topic_states"]
        for p in t["partition_states"]
    )


def _topic_configs(configs: tuple[tuple[str, str], ...]) -> list[Message] | None:
    return [{"topic": t, "config": c} for t, c in configs] if configs else None


def _topic_configs_from(b: Message) -> tuple[tuple[str, str], ...]:
    return tuple((c["topic"], c["config"]) for c in b.get("topic_configs") or ())


def _leader_and_isr_req(m: LeaderAndIsrRequest) -> Message:
    return {
        "controller_id": m.controller_id,
        "is_k_raft_controller": False,
        "controller_epoch": m.controller_epoch,
        "broker_epoch": m.broker_epoch,
        "type": 0,
        "topic_states": _partition_states(
            m.partitions,
            "partition_epoch",
            {"adding_replicas": [], "removing_replicas": [], "is_new": False, "leader_recovery_state": 0},
        ),
        "live_leaders": [_split_address(n, a, "host_name") for n, a in m.live_leaders],
        "topic_configs": _topic_configs(m.topic_configs),
        "state_version": m.state_version,
    }


def _leader_and_isr_from(b: Message, names: TopicNames) -> LeaderAndIsrRequest:
    return LeaderAndIsrRequest(
        controller_id=b["controller_id"],
        controller_epoch=b["controller_epoch"],
        broker_epoch=b["broker_epoch"],
        partitions=_partitions_from(b, "partition_epoch"),
        live_leaders=tuple(_join_address(a, "host_name") for a in b["live_leaders"]),
        topic_configs=_topic_configs_from(b),
        state_version=b.get("state_version", -1),
    )


#: UpdateMetadata's listener names for a node's two endpoints: where its transport between
#: nodes listens (``addresses``) and its Kafka listener for clients (``kafka_addresses``).
INTER_NODE_LISTENER = "INTER_NODE"
CLIENT_LISTENER = "CLIENT"
#: An endpoint's ``security_protocol`` is Kafka's SecurityProtocol id: PLAINTEXT 0, SSL 1,
#: SASL_PLAINTEXT 2, SASL_SSL 3 (the order of ``SECURITY_PROTOCOLS``).
_PROTOCOL_IDS = {name: i for i, name in enumerate(SECURITY_PROTOCOLS)}


def _endpoint(node_id: int, address: str, listener: str, protocol: str) -> Message:
    out = _split_address(node_id, address)
    del out["broker_id"]
    pid = _PROTOCOL_IDS.get(protocol)
    if pid is None:
        raise ValueError(
            f"UpdateMetadata: node {node_id}'s {listener} endpoint {address} has security protocol {protocol!r}, "
            f"not one of {', '.join(SECURITY_PROTOCOLS)}"
        )
    return {**out, "listener": listener, "security_protocol": pid}


def _update_metadata_req(m: UpdateMetadataRequest) -> Message:
    live = {b for b, _ in m.live_brokers}
    for what, pairs in (("addresses", m.addresses), ("kafka_addresses", m.kafka_addresses)):
        stray = sorted(b for b, _ in pairs if b not in live)
        if stray:
            raise ValueError(f"UpdateMetadata {what} name nodes {stray} that are not live brokers {sorted(live)}")
    addresses, kafka_addresses = dict(m.addresses), dict(m.kafka_addresses)
    for what, of, pairs in (
        ("protocols", addresses, m.protocols),
        ("kafka_protocols", kafka_addresses, m.kafka_protocols),
    ):
        stray = sorted(b for b, _ in pairs if b not in of)
        if stray:
            raise ValueError(f"UpdateMetadata {what} name nodes {stray} without an address there")
    protocols, kafka_protocols = dict(m.protocols), dict(m.kafka_protocols)
    brokers = []
    for b, epoch in m.live_brokers:
        endpoints = []
        if b in addresses:
            endpoints.append(_endpoint(b, addresses[b], INTER_NODE_LISTENER, protocols.get(b, "PLAINTEXT")))
        if b in kafka_addresses:
            endpoints.append(_endpoint(b, kafka_addresses[b], CLIENT_LISTENER, kafka_protocols.get(b, "PLAINTEXT")))
        brokers.append({"id": b, "endpoints": endpoints, "rack": None, "broker_epoch": epoch})
    return {
        "controller_id": m.controller_id,
        "is_k_raft_controller": False,
        "type": 0,
        "controller_epoch": m.controller_epoch,
        "broker_epoch": m.broker_epoch,
        "topic_states": _partition_states(m.partitions, "zk_version", {"offline_replicas": []}),
        "live_brokers": brokers,
        "topic_configs": _topic_configs(m.topic_configs),
        "state_version": m.state_version,
    }


def _update_metadata_from(b: Message, names: TopicNames) -> UpdateMetadataRequest:
    addresses: list[tuple[int, str]] = []
    kafka_addresses: list[tuple[int, str]] = []
    protocols: list[tuple[int, str]] = []
    kafka_protocols: list[tuple[int, str]] = []
    for broker in b["live_brokers"]:
        for e in broker["endpoints"]:
            node_id = int(broker["id"])
            address = (node_id, f"{e['host']}:{e['port']}")
            pid = e["security_protocol"]
            if not 0 <= pid < len(SECURITY_PROTOCOLS):
                raise ValueError(
                    f"UpdateMetadata: node {node_id}'s {e['listener']} endpoint {address[1]} has security "
                    f"protocol id {pid}, not one of 0-{len(SECURITY_PROTOCOLS) - 1}"
                )
            protocol = (node_id, SECURITY_PROTOCOLS[pid])
            if e["listener"] == INTER_NODE_LISTENER:
                addresses.append(address)
                protocols.append(protocol)
            elif e["listener"] == CLIENT_LISTENER:
                kafka_addresses.append(address)
                kafka_protocols.append(protocol)
    return UpdateMetadataRequest(
        controller_id=b["controller_id"],
        controller_epoch=b["controller_epoch"],
        broker_epoch=b["broker_epoch"],
        partitions=_partitions_from(b, "zk_version"),
        live_brokers=tuple((int(x["id"]), int(x.get("broker_epoch", -1))) for x in b["live_brokers"]),
        topic_configs=_topic_configs_from(b),
        addresses=tuple(addresses),
        kafka_addresses=tuple(kafka_addresses),
        state_version=b.get("state_version", -1),
        protocols=tuple(protocols),
        kafka_protocols=tuple(kafka_protocols),
    )


def _stop_replica_req(m: StopReplicaRequest) -> Message:
    return {
        "controller_id": m.controller_id,
        "is_k_raft_controller": False,
        "controller_epoch": m.controller_epoch,
        "broker_epoch": m.broker_epoch,
        "topic_states": [
            {
                "topic_name": name,
                "partition_states": [
                    {"partition_index": p, "leader_epoch": -1, "delete_partition": m.delete} for _, p in parts
                ],
            }
            for name, parts in _grouped(m.partitions, lambda tp: tp[0])
        ],
    }


def _stop_replica_from(b: Message, names: TopicNames) -> StopReplicaRequest:
    parts = [(t["topic_name"], p) for t in b["topic_states"] for p in t["partition_states"]]
    return StopReplicaRequest(
        controller_id=b["controller_id"],
        controller_epoch=b["controller_epoch"],
        broker_epoch=b["broker_epoch"],
        partitions=tuple((t, p["partition_index"]) for t, p in parts),
        # Kafka says it per partition; seglog's controller sends one choice for all.
        delete=all(p["delete_partition"] for _, p in parts),
    )


def _alter_partition_req(m: AlterPartitionRequest) -> Message:
    epochs = m.new_isr_epochs or (-1,) * len(m.new_isr)
    if len(epochs) != len(m.new_isr):
        raise ValueError(
            f"AlterPartition of {m.topic}-{m.partition}: {len(epochs)} broker epochs for {len(m.new_isr)} ISR members"
        )
    return {
        "broker_id": m.broker_id,
        "broker_epoch": m.broker_epoch,
        "topics": [
            {
                "topic_id": topic_id(m.topic),
                "partitions": [
                    {
                        "partition_index": m.partition,
                        "leader_epoch": m.leader_epoch,
                        "new_isr_with_epochs": _epochs(zip(m.new_isr, epochs)),
                        "leader_recovery_state": 0,
                        "partition_epoch": m.partition_epoch,
                    }
                ],
            }
        ],
    }


def _alter_partition_from(b: Message, names: TopicNames) -> AlterPartitionRequest:
    (t,) = b["topics"]
    (p,) = t["partitions"]
    isr = _pairs(p["new_isr_with_epochs"])
    epochs = tuple(e for _, e in isr)
    return AlterPartitionRequest(
        broker_id=b["broker_id"],
        broker_epoch=b["broker_epoch"],
        topic=names(t["topic_id"]),
        partition=p["partition_index"],
        leader_epoch=p["leader_epoch"],
        partition_epoch=p["partition_epoch"],
        new_isr=tuple(r for r, _ in isr),
        new_isr_epochs=() if all(e == -1 for e in epochs) else epochs,
    )


def _metadata_req(m: MetadataRequest) -> Message:
    return {
        "topics": [{"topic_id": bytes(16), "name": t} for t in m.topics] if m.topics else None,
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }


def _metadata_from(b: Message, names: TopicNames) -> MetadataRequest:
    return MetadataRequest(tuple(t["name"] or names(t["topic_id"]) for t in b["topics"] or ()))


def _create_topic_req(m: CreateTopicRequest) -> Message:
    explicit = bool(m.assignment)
    return {
        "topics": [
            {
                "name": m.name,
                # Kafka's rule: with explicit replicas, both counts are -1.
                "num_partitions": -1 if explicit else m.partitions,
                "replication_factor": -1 if explicit else m.replication_factor,
                "assignments": [{"partition_index": i, "broker_ids": list(r)} for i, r in enumerate(m.assignment)],
                "configs": [{"name": k, "value": config_string(v)} for k, v in m.config],
            }
        ],
        "timeout_ms": 0,
        "validate_only": False,
    }


def _create_topic_from(b: Message, names: TopicNames) -> CreateTopicRequest:
    (t,) = b["topics"]
    assignment = tuple(tuple(a["broker_ids"]) for a in sorted(t["assignments"], key=lambda a: a["partition_index"]))
    return CreateTopicRequest(
        name=t["name"],
        partitions=len(assignment) if assignment else t["num_partitions"],
        replication_factor=len(assignment[0]) if assignment else t["replication_factor"],
        config=tuple((c["name"], config_json(c["value"])) for c in t["configs"]),
        assignment=assignment,
    )


def _create_partitions_req(m: CreatePartitionsRequest) -> Message:
    return {
        "topics": [
            {
                "name": m.name,
                "count": m.count,
                "assignments": [{"broker_ids": list(r)} for r in m.assignment] if m.assignment else None,
            }
        ],
        "timeout_ms": 0,
        "validate_only": m.validate_only,
    }


def _create_partitions_from(b: Message, names: TopicNames) -> CreatePartitionsRequest:
    (t,) = b["topics"]
    return CreatePartitionsRequest(t["name"], t["count"], _assignments(t["assignments"]), b["validate_only"])


def _delete_topic_req(m: DeleteTopicRequest) -> Message:
    return {"topics": [{"name": m.name, "topic_id": bytes(16)}], "timeout_ms": 0}


def _delete_topic_from(b: Message, names: TopicNames) -> DeleteTopicRequest:
    (t,) = b["topics"]
    return DeleteTopicRequest(t["name"] or names(t["topic_id"]))


def _alter_config_req(m: AlterTopicConfigRequest) -> Message:
    return {
        "resources": [
            {
                "resource_type": _TOPIC_RESOURCE,
                "resource_name": m.name,
                "configs": [{"name": k, "config_operation": _SET, "value": config_string(v)} for k, v in m.set]
                + [{"name": k, "config_operation": _DELETE, "value": None} for k in m.delete],
            }
        ],
        "validate_only": m.validate_only,
    }


def _alter_config_from(b: Message, names: TopicNames) -> AlterTopicConfigRequest:
    (r,) = b["resources"]
    if r["resource_type"] != _TOPIC_RESOURCE:
        raise ValueError(
            f"IncrementalAlterConfigs between nodes changes topics, not resource type {r['resource_type']}"
        )
    bad = [c["name"] for c in r["configs"] if c["config_operation"] not in (_SET, _DELETE)]
    if bad:
        raise ValueError(f"IncrementalAlterConfigs between nodes sets or deletes; not for {', '.join(bad)}")
    return AlterTopicConfigRequest(
        r["resource_name"],
        set=tuple((c["name"], config_json(c["value"])) for c in r["configs"] if c["config_operation"] == _SET),
        delete=tuple(c["name"] for c in r["configs"] if c["config_operation"] == _DELETE),
        validate_only=b["validate_only"],
    )


def _init_pid_req(m: InitProducerIdRequest) -> Message:
    return {
        "transactional_id": None,
        "transaction_timeout_ms": -1,
        "producer_id": m.producer_id,
        "producer_epoch": m.producer_epoch,
    }


def _init_pid_from(b: Message, names: TopicNames) -> InitProducerIdRequest:
    return InitProducerIdRequest(b["producer_id"], b["producer_epoch"])


def _delete_records_req(m: DeleteRecordsRequest) -> Message:
    return {
        "topics": [{"name": m.topic, "partitions": [{"partition_index": m.partition, "offset": m.offset}]}],
        "timeout_ms": m.timeout_ms,
    }


def _delete_records_from(b: Message, names: TopicNames) -> DeleteRecordsRequest:
    (t,) = b["topics"]
    (p,) = t["partitions"]
    return DeleteRecordsRequest(t["name"], p["partition_index"], p["offset"], b["timeout_ms"])


def _elect_req(m: ElectLeadersRequest) -> Message:
    return {
        "election_type": _PREFERRED if m.preferred else _UNCLEAN,
        "topic_partitions": [{"topic": m.topic, "partitions": [m.partition]}],
        "timeout_ms": 60000,
    }


def _elect_from(b: Message, names: TopicNames) -> ElectLeadersRequest:
    (t,) = b["topic_partitions"] or [None]
    if t is None or len(t["partitions"]) != 1:
        raise ValueError("ElectLeaders between nodes names one partition")
    return ElectLeadersRequest(t["topic"], t["partitions"][0], b["election_type"] == _PREFERRED)


def _shutdown_req(m: ControlledShutdownRequest) -> Message:
    return {"broker_id": m.broker_id, "broker_epoch": m.broker_epoch}


def _shutdown_from(b: Message, names: TopicNames) -> ControlledShutdownRequest:
    return ControlledShutdownRequest(b["broker_id"], b["broker_epoch"])


_REQ_TO: dict[type, Callable[[Any], Message]] = {
    FetchRequest: _fetch_req,
    ProduceRequest: _produce_req,
    LeaderAndIsrRequest: _leader_and_isr_req,
    UpdateMetadataRequest: _update_metadata_req,
    StopReplicaRequest: _stop_replica_req,
    AlterPartitionRequest: _alter_partition_req,
    MetadataRequest: _metadata_req,
    CreateTopicRequest: _create_topic_req,
    CreatePartitionsRequest: _create_partitions_req,
    DeleteTopicRequest: _delete_topic_req,
    AlterTopicConfigRequest: _alter_config_req,
    InitProducerIdRequest: _init_pid_req,
    DeleteRecordsRequest: _delete_records_req,
    ElectLeadersRequest: _elect_req,
    ControlledShutdownRequest: _shutdown_req,
}
_REQ_FROM: dict[type, Callable[[Message, TopicNames], Any]] = {
    FetchRequest: _fetch_from,
    ProduceRequest: _produce_from,
    LeaderAndIsrRequest: _leader_and_isr_from,
    UpdateMetadataRequest: _update_metadata_from,
    StopReplicaRequest: _stop_replica_from,
    AlterPartitionRequest: _alter_partition_from,
    MetadataRequest: _metadata_from,
    CreateTopicRequest: _create_topic_from,
    CreatePartitionsRequest: _create_partitions_from,
    DeleteTopicRequest: _delete_topic_from,
    AlterTopicConfigRequest: _alter_config_from,
    InitProducerIdRequest: _init_pid_from,
    DeleteRecordsRequest: _delete_records_from,
    ElectLeadersRequest: _elect_from,
    ControlledShutdownRequest: _shutdown_from,
}


# -- responses ------------------------------------------------------------------------------------


def response_to_kafka(request: Any, resp: Any) -> Message:
    """``resp``, the answer to ``request``, as the Kafka response of ``request``'s API.
    An :class:`ErrorResponse` sets the response's ``request_error_code`` tag."""
    if isinstance(resp, ErrorResponse):
        return {
            "request_error_code": resp.error,
            "request_error_message": resp.message,
            **_EMPTY[type(request)](request),
        }
    api = api_for(request)
    if not isinstance(resp, api.response):
        raise TypeError(f"{type(resp).__name__} does not answer {type(request).__name__}")
    return _RESP_TO[type(request)](request, resp)


def response_from_kafka(request: Any, body: Message) -> Any:
    """The seglog response a decoded Kafka response to ``request`` carries (names of topics
    sent by id are those of ``request``)."""
    if body.get("request_error_code"):
        return ErrorResponse(body["request_error_code"], body.get("request_error_message") or "")
    return _RESP_FROM[type(request)](request, body)


def _fetch_resp(req: FetchRequest, r: FetchResponse) -> Message:
    return {
        "throttle_time_ms": 0,
        "error_code": r.error,
        "session_id": 0,
        "responses": [
            {
                "topic_id": topic_id(name),
                "partitions": [
                    {
                        "partition_index": p.partition,
                        "error_code": p.error,
                        "high_watermark": p.high_watermark,
                        "last_stable_offset": p.high_watermark,
                        "log_start_offset": p.log_start_offset,
                        "diverging_epoch": {"epoch": p.diverging_epoch, "end_offset": p.diverging_end_offset}
                        if p.diverging_epoch != -1 or p.diverging_end_offset != -1
                        else None,
                        "current_leader": None,
                        "snapshot_id": None,
                        "aborted_transactions": None,
                        "preferred_read_replica": -1,
                        "records": p.records,
                        "log_end_offset": p.log_end_offset,
                        "error_message": p.message,
                    }
                    for p in parts
                ],
            }
            for name, parts in _grouped(r.partitions, lambda p: p.topic)
        ],
    }


def _request_names(topics: Iterable[str]) -> TopicNames:
    by_id = {topic_id(t): t for t in topics}

    def name(tid: bytes) -> str:
        return by_id.get(bytes(tid)) or unknown_id_name(bytes(tid))

    return name


def _fetch_resp_from(req: FetchRequest, b: Message) -> FetchResponse:
    names = _request_names(p.topic for p in req.partitions)
    parts = []
    for t in b["responses"]:
        topic = names(t["topic_id"])
        for p in t["partitions"]:
            div = p.get("diverging_epoch") or {"epoch": -1, "end_offset": -1}
            records = p["records"]
            parts.append(
                FetchPartitionResponse(
                    topic=topic,
                    partition=p["partition_index"],
                    error=p["error_code"],
                    high_watermark=p["high_watermark"],
                    log_start_offset=p["log_start_offset"],
                    log_end_offset=p.get("log_end_offset", -1),
                    diverging_epoch=div["epoch"],
                    diverging_end_offset=div["end_offset"],
                    records=records if records is not None else b"",
                    message=p.get("error_message") or "",
                )
            )
    return FetchResponse(tuple(parts), error=b["error_code"])


def _produce_resp(req: ProduceRequest, r: ProduceResponse) -> Message:
    return {
        "responses": [
            {
                "name": r.topic,
                "partition_responses": [
                    {
                        "index": r.partition,
                        "error_code": r.error,
                        "base_offset": r.base_offset,
                        "log_append_time_ms": r.log_append_time,
                        "log_start_offset": -1,
                        "record_errors": [],
                        "error_message": _null(r.message),
                        "last_offset": r.last_offset,
                        "duplicate": r.duplicate,
                    }
                ],
            }
        ],
        "throttle_time_ms": 0,
    }


def _produce_resp_from(req: ProduceRequest, b: Message) -> ProduceResponse:
    (t,) = b["responses"]
    (p,) = t["partition_responses"]
    return ProduceResponse(
        t["name"],
        p["index"],
        p["error_code"],
        p["base_offset"],
        p.get("last_offset", -1),
        p["log_append_time_ms"],
        _text(p["error_message"]),
        bool(p.get("duplicate")),
    )


def _plain_resp(req: Any, r: Any) -> Message:
    """LeaderAndIsr, UpdateMetadata, StopReplica, InitProducerId, ControlledShutdown: a
    top-level error code."""
    out: Message = {"error_code": r.error, "error_message": r.message}
    if isinstance(r, LeaderAndIsrResponse):
        out["topics"] = []
    elif isinstance(r, StopReplicaResponse):
        out["partition_errors"] = []
    elif isinstance(r, InitProducerIdResponse):
        out.update(throttle_time_ms=0, producer_id=r.producer_id, producer_epoch=r.producer_epoch)
    elif isinstance(r, ControlledShutdownResponse):
        out["remaining_partitions"] = [{"topic_name": t, "partition_index": p} for t, p in r.remaining]
    return out


def _plain_resp_from(req: Any, b: Message) -> Any:
    code, message = b["error_code"], b.get("error_message") or ""
    if isinstance(req, LeaderAndIsrRequest):
        return LeaderAndIsrResponse(code, message)
    if isinstance(req, UpdateMetadataRequest):
        return UpdateMetadataResponse(code, message)
    if isinstance(req, StopReplicaRequest):
        return StopReplicaResponse(code, message)
    if isinstance(req, InitProducerIdRequest):
        return InitProducerIdResponse(code, b["producer_id"], b["producer_epoch"], message)
    remaining = tuple((p["topic_name"], p["partition_index"]) for p in b["remaining_partitions"])
    return ControlledShutdownResponse(code, message, remaining)


def _alter_partition_resp(req: AlterPartitionRequest, r: AlterPartitionResponse) -> Message:
    partitions = []
    if r.state is not None:
        st = r.state
        partitions.append(
            {
                "partition_index": req.partition,
                "error_code": r.error,
                "leader_id": st.leader,
                "leader_epoch": st.leader_epoch,
                "isr": list(st.isr),
                "leader_recovery_state": 0,
                "partition_epoch": st.partition_epoch,
                "controller_epoch": st.controller_epoch,
                **_state_extras(st),
            }
        )
    return {
        "throttle_time_ms": 0,
        "error_code": r.error,
        "topics": [{"topic_id": topic_id(req.topic), "partitions": partitions}] if partitions else [],
        "error_message": r.message,
    }


def _alter_partition_resp_from(req: AlterPartitionRequest, b: Message) -> AlterPartitionResponse:
    state = None
    for t in b["topics"]:
        for p in t["partitions"]:
            state = _state(p, "leader_id", p["partition_epoch"], p.get("controller_epoch", -1))
    return AlterPartitionResponse(b["error_code"], state, b.get("error_message") or "")


def _metadata_resp(req: MetadataRequest, r: MetadataResponse) -> Message:
    return {
        "throttle_time_ms": 0,
        "brokers": [
            {"node_id": n, "host": a["host"], "port": a["port"], "rack": None}
            for n, addr in r.addresses
            for a in (_split_address(n, addr),)
        ],
        "cluster_id": None,
        "controller_id": r.controller_id,
        "topics": [
            {
                "error_code": 0,
                "name": name,
                "topic_id": topic_id(name),
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": p.partition,
                        "leader_id": p.state.leader,
                        "leader_epoch": p.state.leader_epoch,
                        "replica_nodes": list(p.replicas),
                        "isr_nodes": list(p.state.isr),
                        "offline_replicas": [],
                        "partition_epoch": p.state.partition_epoch,
                        "controller_epoch": p.state.controller_epoch,
                        **_state_extras(p.state),
                    }
                    for p in parts
                ],
                "topic_authorized_operations": -2147483648,
            }
            for name, parts in _grouped(r.partitions, lambda p: p.topic)
        ],
        "live_broker_epochs": _epochs(r.live_brokers),
        "watermarks": [
            {"topic": t, "partition": p, "log_start_offset": s, "high_watermark": h, "low_watermark": lo}
            for t, p, s, h, lo in r.watermarks
        ]
        if r.watermarks
        else None,
        # The answer's own error, which Kafka's Metadata has no top-level field for.
        "metadata_error_code": r.error,
    }


def _metadata_resp_from(req: MetadataRequest, b: Message) -> MetadataResponse:
    return MetadataResponse(
        controller_id=b["controller_id"],
        partitions=tuple(
            PartitionInfo(
                t["name"],
                p["partition_index"],
                tuple(p["replica_nodes"]),
                _state(p, "leader_id", p.get("partition_epoch", 0), p.get("controller_epoch", 0), isr="isr_nodes"),
            )
            for t in b["topics"]
            for p in t["partitions"]
        ),
        live_brokers=_pairs(b.get("live_broker_epochs")),
        addresses=tuple((a["node_id"], f"{a['host']}:{a['port']}") for a in b["brokers"]),
        error=b.get("metadata_error_code", 0),
        watermarks=tuple(
            (w["topic"], w["partition"], w["log_start_offset"], w["high_watermark"], w["low_watermark"])
            for w in b.get("watermarks") or ()
        ),
    )


def _create_topic_resp(req: CreateTopicRequest, r: CreateTopicResponse) -> Message:
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": req.name,
                "topic_id": topic_id(req.name) if r.error == NONE else bytes(16),
                "error_code": r.error,
                "error_message": _null(r.message),
                "num_partitions": len(r.assignment) if r.assignment else -1,
                "replication_factor": len(r.assignment[0]) if r.assignment else -1,
                "configs": None,
                "assignment": [{"partition_index": i, "broker_ids": list(a)} for i, a in enumerate(r.assignment)]
                if r.assignment
                else None,
            }
        ],
    }


def _create_topic_resp_from(req: CreateTopicRequest, b: Message) -> CreateTopicResponse:
    (t,) = b["topics"]
    assignment = sorted(t.get("assignment") or (), key=lambda a: a["partition_index"])
    return CreateTopicResponse(
        t["error_code"], _text(t["error_message"]), tuple(tuple(a["broker_ids"]) for a in assignment)
    )


def _create_partitions_resp(req: CreatePartitionsRequest, r: CreatePartitionsResponse) -> Message:
    return {
        "throttle_time_ms": 0,
        "results": [
            {
                "name": req.name,
                "error_code": r.error,
                "error_message": _null(r.message),
                "assignment": [{"broker_ids": list(a)} for a in r.assignment] if r.assignment else None,
            }
        ],
    }


def _create_partitions_resp_from(req: CreatePartitionsRequest, b: Message) -> CreatePartitionsResponse:
    (t,) = b["results"]
    return CreatePartitionsResponse(t["error_code"], _text(t["error_message"]), _assignments(t.get("assignment")))


def _delete_topic_resp(req: DeleteTopicRequest, r: DeleteTopicResponse) -> Message:
    return {
        "throttle_time_ms": 0,
        "responses": [
            {"name": req.name, "topic_id": topic_id(req.name), "error_code": r.error, "error_message": _null(r.message)}
        ],
    }


def _delete_topic_resp_from(req: DeleteTopicRequest, b: Message) -> DeleteTopicResponse:
    (t,) = b["responses"]
    return DeleteTopicResponse(t["error_code"], _text(t["error_message"]))


def _alter_config_resp(req: AlterTopicConfigRequest, r: AlterTopicConfigResponse) -> Message:
    return {
        "throttle_time_ms": 0,
        "responses": [
            {
                "error_code": r.error,
                "error_message": _null(r.message),
                "resource_type": _TOPIC_RESOURCE,
                "resource_name": req.name,
                "config": [{"name": k, "value": v} for k, v in r.config] if r.config else None,
            }
        ],
    }


def _alter_config_resp_from(req: AlterTopicConfigRequest, b: Message) -> AlterTopicConfigResponse:
    (t,) = b["responses"]
    config = tuple((c["name"], c["value"]) for c in t.get("config") or ())
    return AlterTopicConfigResponse(t["error_code"], _text(t["error_message"]), config)


def _delete_records_resp(req: DeleteRecordsRequest, r: DeleteRecordsResponse) -> Message:
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": r.topic,
                "partitions": [
                    {
                        "partition_index": r.partition,
                        "low_watermark": r.low_watermark,
                        "error_code": r.error,
                        "error_message": r.message,
                    }
                ],
            }
        ],
    }


def _delete_records_resp_from(req: DeleteRecordsRequest, b: Message) -> DeleteRecordsResponse:
    (t,) = b["topics"]
    (p,) = t["partitions"]
    return DeleteRecordsResponse(
        t["name"], p["partition_index"], p["error_code"], p["low_watermark"], p.get("error_message") or ""
    )


def _elect_resp(req: ElectLeadersRequest, r: ElectLeadersResponse) -> Message:
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "replica_election_results": [
            {
                "topic": req.topic,
                "partition_result": [
                    {
                        "partition_id": req.partition,
                        "error_code": r.error,
                        "error_message": _null(r.message),
                        "leader": r.leader,
                    }
                ],
            }
        ],
    }


def _elect_resp_from(req: ElectLeadersRequest, b: Message) -> ElectLeadersResponse:
    (t,) = b["replica_election_results"]
    (p,) = t["partition_result"]
    return ElectLeadersResponse(p["error_code"] or b["error_code"], p.get("leader", -1), _text(p["error_message"]))


_RESP_TO: dict[type, Callable[[Any, Any], Message]] = {
    FetchRequest: _fetch_resp,
    ProduceRequest: _produce_resp,
    LeaderAndIsrRequest: _plain_resp,
    UpdateMetadataRequest: _plain_resp,
    StopReplicaRequest: _plain_resp,
    InitProducerIdRequest: _plain_resp,
    ControlledShutdownRequest: _plain_resp,
    AlterPartitionRequest: _alter_partition_resp,
    MetadataRequest: _metadata_resp,
    CreateTopicRequest: _create_topic_resp,
    CreatePartitionsRequest: _create_partitions_resp,
    DeleteTopicRequest: _delete_topic_resp,
    AlterTopicConfigRequest: _alter_config_resp,
    DeleteRecordsRequest: _delete_records_resp,
    ElectLeadersRequest: _elect_resp,
}
_RESP_FROM: dict[type, Callable[[Any, Message], Any]] = {
    FetchRequest: _fetch_resp_from,
    ProduceRequest: _produce_resp_from,
    LeaderAndIsrRequest: _plain_resp_from,
    UpdateMetadataRequest: _plain_resp_from,
    StopReplicaRequest: _plain_resp_from,
    InitProducerIdRequest: _plain_resp_from,
    ControlledShutdownRequest: _plain_resp_from,
    AlterPartitionRequest: _alter_partition_resp_from,
    MetadataRequest: _metadata_resp_from,
    CreateTopicRequest: _create_topic_resp_from,
    CreatePartitionsRequest: _create_partitions_resp_from,
    DeleteTopicRequest: _delete_topic_resp_from,
    AlterTopicConfigRequest: _alter_config_resp_from,
    DeleteRecordsRequest: _delete_records_resp_from,
    ElectLeadersRequest: _elect_resp_from,
}
#: The empty answer of each request, which an ErrorResponse fills in.
_EMPTY: dict[type, Callable[[Any], Message]] = {
    FetchRequest: lambda q: {"responses": []},
    ProduceRequest: lambda q: {"responses": []},
    LeaderAndIsrRequest: lambda q: {"topics": []},
    UpdateMetadataRequest: lambda q: {},
    StopReplicaRequest: lambda q: {"partition_errors": []},
    InitProducerIdRequest: lambda q: {},
    ControlledShutdownRequest: lambda q: {"remaining_partitions": []},
    AlterPartitionRequest: lambda q: {"topics": []},
    MetadataRequest: lambda q: {"brokers": [], "topics": []},
    CreateTopicRequest: lambda q: {"topics": []},
    CreatePartitionsRequest: lambda q: {"results": []},
    DeleteTopicRequest: lambda q: {"responses": []},
    AlterTopicConfigRequest: lambda q: {"responses": []},
    DeleteRecordsRequest: lambda q: {"topics": []},
    ElectLeadersRequest: lambda q: {"replica_election_results": []},
}
