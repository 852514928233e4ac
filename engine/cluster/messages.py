"""Requests and responses between nodes, clients and the controller.

The same message objects travel over both transports: the simulation's in-memory one passes
them as objects, the one between processes (:mod:`seglog.cluster.kafka_transport`) as the
Kafka requests and responses :mod:`seglog.cluster.kafka_messages` maps them to.

Errors travel as Kafka error codes (``error``, 0 for none) with an optional message, so a
client can always tell "not written" from "indeterminate" (:mod:`seglog.errors`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from seglog.cluster.metadata import PartitionInfo, PartitionState

NONE = 0
# AlterPartition's compare-and-set failure (Kafka's INVALID_UPDATE_VERSION); kept as a plain code
# because seglog.errors registers only the codes its clients raise.
INVALID_UPDATE_VERSION = 95

ISOLATION_LOG_END = "log_end"
ISOLATION_HIGH_WATERMARK = "high_watermark"
CONSUMER_REPLICA_ID = -1


@dataclasses.dataclass(frozen=True, slots=True)
class FetchPartition:
    topic: str
    partition: int
    fetch_offset: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1
    max_bytes: int = 1 << 20


@dataclasses.dataclass(frozen=True, slots=True)
class FetchRequest:
    replica_id: int  # CONSUMER_REPLICA_ID for consumers
    partitions: tuple[FetchPartition, ...]
    broker_epoch: int = -1
    max_wait_ms: int = 0
    min_bytes: int = 1
    max_bytes: int = 10 << 20
    isolation: str = ISOLATION_HIGH_WATERMARK


@dataclasses.dataclass(frozen=True, slots=True)
class FetchPartitionResponse:
    topic: str
    partition: int
    error: int = NONE
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    diverging_epoch: int = -1  # with diverging_end_offset: the leader's (epoch, end offset)
    diverging_end_offset: int = -1
    records: Any = b""  # bytes, or a LogReadResult on the sending side (zero copy)
    message: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class FetchResponse:
    partitions: tuple[FetchPartitionResponse, ...]
    error: int = NONE


@dataclasses.dataclass(frozen=True, slots=True)
class ProduceRequest:
    topic: str
    partition: int
    records: bytes
    acks: int = -1
    timeout_ms: int = 30_000


@dataclasses.dataclass(frozen=True, slots=True)
class ProduceResponse:
    topic: str
    partition: int
    error: int = NONE
    base_offset: int = -1
    last_offset: int = -1
    log_append_time: int = -1
    message: str = ""
    duplicate: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class LeaderAndIsrRequest:
    """Controller to node: the state of the partitions the receiver replicates (Kafka's
    LeaderAndIsr); the node opens its replicas and takes their leader or follower role from it."""

    controller_id: int
    controller_epoch: int
    broker_epoch: int  # the receiver's registered broker epoch; a stale one is refused
    partitions: tuple[PartitionInfo, ...]
    #: (node id, "host:port" of its inter-node listener) of the leaders of ``partitions``: a
    #: follower can fetch before UpdateMetadata tells it every node's address.
    live_leaders: tuple[tuple[int, str], ...] = ()
    topic_configs: tuple[tuple[str, str], ...] = ()  # (topic, JSON config overrides) of those topics
    #: The controller's state version this request carries (it grows with every change): a node
    #: ignores an older version of the same controller epoch that arrives after a newer one.
    state_version: int = -1


@dataclasses.dataclass(frozen=True, slots=True)
class LeaderAndIsrResponse:
    error: int = NONE
    message: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class UpdateMetadataRequest:
    """Controller to node: every partition's state, every live node and the topic configs
    (Kafka's UpdateMetadata); what the node's Metadata answers and its view of the cluster
    come from."""

    controller_id: int
    controller_epoch: int
    broker_epoch: int  # the receiver's registered broker epoch; a stale one is refused
    partitions: tuple[PartitionInfo, ...]
    live_brokers: tuple[tuple[int, int], ...]  # (node id, broker epoch)
    topic_configs: tuple[tuple[str, str], ...] = ()  # (topic, JSON config overrides)
    addresses: tuple[tuple[int, str], ...] = ()  # (node id, "host:port") where each node's transport listens
    #: (node id, "host:port") of every live node's Kafka listener (what Metadata names).
    kafka_addresses: tuple[tuple[int, str], ...] = ()
    #: As LeaderAndIsr's, counted with it (one controller change counter, compared per kind).
    state_version: int = -1
    #: (node id, security protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL) of the listener
    #: at each node's ``addresses`` / ``kafka_addresses`` entry, as the node registered it; an
    #: address without one is PLAINTEXT.
    protocols: tuple[tuple[int, str], ...] = ()
    kafka_protocols: tuple[tuple[int, str], ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class UpdateMetadataResponse:
    error: int = NONE
    message: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class AlterPartitionRequest:
    broker_id: int
    broker_epoch: int
    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    new_isr_epochs: tuple[int, ...] = ()  # the broker epoch each member fetched with


@dataclasses.dataclass(frozen=True, slots=True)
class AlterPartitionResponse:
    error: int = NONE
    state: PartitionState | None = None
    message: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class MetadataRequest:
    topics: tuple[str, ...] = ()  # empty: all


@dataclasses.dataclass(frozen=True, slots=True)
class MetadataResponse:
    controller_id: int
    partitions: tuple[PartitionInfo, ...]
    live_brokers: tuple[tuple[int, int], ...]
    addresses: tuple[tuple[int, str], ...] = ()
    error: int = NONE
    #: (topic, partition, log start offset, high watermark, low watermark) of every partition
    #: the answering node leads; the low watermark is -1 until every live follower has fetched
    #: in the current leader epoch.
    watermarks: tuple[tuple[str, int, int, int, int], ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class DeleteRecordsRequest:
    """Move the partition's log start to ``offset`` (Kafka's DeleteRecords); sent to its leader.
    ``offset`` -1 means the high watermark."""

    topic: str
    partition: int
    offset: int
    timeout_ms: int = 30_000


@dataclasses.dataclass(frozen=True, slots=True)
class DeleteRecordsResponse:
    """The low watermark the partition reached: at or above the requested offset on success,
    below it with REQUEST_TIMED_OUT."""

    topic: str
    partition: int
    error: int = NONE
    low_watermark: int = -1
    message: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class InitProducerIdRequest:
    producer_id: int = -1
    producer_epoch: int = -1


@dataclasses.dataclass(frozen=True, slots=True)
class InitProducerIdResponse:
    error: int = NONE
    producer_id: int = -1
    producer_epoch: int = -1
    message: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class CreateTopicRequest:
    name: str
    partitions: int
    replication_factor: int
    config: tuple[tuple[str, str], ...] = ()  # (key, JSON value)
    assignment: tuple[tuple[int, ...], ...] = ()  # explicit replicas per partition, or empty


@dataclasses.dataclass(frozen=True, slots=True)
class CreateTopicResponse:
    error: int = NONE
    message: str = ""
    assignment: tuple[tuple[int, ...], ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class CreatePartitionsRequest:
    """Grow topic ``name`` to ``count`` partitions (Kafka's CreatePartitions, answered by the
    controller); ``validate_only``: check and place them, write nothing."""

    name: str
    count: int
    assignment: tuple[tuple[int, ...], ...] = ()  # explicit replicas of each new partition, or empty
    validate_only: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class CreatePartitionsResponse:
    error: int = NONE
    message: str = ""
    assignment: tuple[tuple[int, ...], ...] = ()  # the new partitions' replicas


@dataclasses.dataclass(frozen=True, slots=True)
class DeleteTopicRequest:
    """Delete topic ``name`` (Kafka's DeleteTopics, answered by the controller once the topic
    is marked for deletion)."""

    name: str


@dataclasses.dataclass(frozen=True, slots=True)
class DeleteTopicResponse:
    error: int = NONE
    message: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class AlterTopicConfigRequest:
    """Change topic ``name``'s config overrides (Kafka's IncrementalAlterConfigs on a topic,
    answered by the controller): ``set`` (key, JSON value) pairs, then ``delete`` keys removed."""

    name: str
    set: tuple[tuple[str, str], ...] = ()
    delete: tuple[str, ...] = ()
    validate_only: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class AlterTopicConfigResponse:
    error: int = NONE
    message: str = ""
    config: tuple[tuple[str, str], ...] = ()  # the topic's overrides now (key, JSON value)


@dataclasses.dataclass(frozen=True, slots=True)
class StopReplicaRequest:
    """Controller to node: stop serving ``partitions`` and, with ``delete``, remove their
    directories (Kafka's StopReplica), fenced by the controller and broker epochs."""

    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[tuple[str, int], ...]
    delete: bool = True


@dataclasses.dataclass(frozen=True, slots=True)
class StopReplicaResponse:
    error: int = NONE
    message: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class ElectLeadersRequest:
    topic: str
    partition: int
    preferred: bool = True


@dataclasses.dataclass(frozen=True, slots=True)
class ElectLeadersResponse:
    error: int = NONE
    leader: int = -1
    message: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class ControlledShutdownRequest:
    """A node about to stop asks the controller to move its leaderships and ISR memberships
    away first (Kafka's ControlledShutdown)."""

    broker_id: int
    broker_epoch: int


@dataclasses.dataclass(frozen=True, slots=True)
class ControlledShutdownResponse:
    error: int = NONE
    message: str = ""
    remaining: tuple[tuple[str, int], ...] = ()  # partitions the node still leads


@dataclasses.dataclass(frozen=True, slots=True)
class ErrorResponse:
    """A request that could not be handled at all (unknown kind, node shutting down)."""

    error: int
    message: str = ""


def materialize(msg: Any) -> Any:
    """The message with every LogReadResult replaced by its bytes (copied now, so a later
    truncation of the segment cannot change what was sent)."""
    if isinstance(msg, FetchResponse):
        parts = tuple(
            dataclasses.replace(p, records=p.records.to_bytes()) if not isinstance(p.records, bytes) else p
            for p in msg.partitions
        )
        return dataclasses.replace(msg, partitions=parts)
    return msg


def error_message(code: int, message: str = "") -> str:
    from seglog.errors import error_for_code

    if code == INVALID_UPDATE_VERSION:
        name = "INVALID_UPDATE_VERSION"
    else:
        name = error_for_code(code).error_name
    return f"{name}: {message}" if message else name
