"""Cluster metadata as the coordinator stores it: partition states, node registrations, topics,
and the replication settings a node runs with.

Coordinator layout (JSON values; Kafka's ZooKeeper layout, simplified)::

    /controller                              ephemeral  {"broker_id": N}
    /controller_epoch                        persistent {"epoch": E}   (its version fences writes)
    /brokers/ids/N                           ephemeral  {"clean_shutdown": bool, "address": ...,
                                                         "kafka_address": "host:port" or "",
                                                         "security_protocol": "PLAINTEXT", ...,
                                                         "kafka_security_protocol": ...,
                                                         "offline_log_dirs": [...],
                                                         "offline_replicas": [[T, P], ...]}
                                                        czxid = the node's broker epoch
    /brokers/topics/T                        persistent {"partitions": {"0": [1, 2, 3]}, "config": {...}}
    /brokers/topics/T/partitions/P/state     persistent {"leader", "leader_epoch", "isr", "elr",
                                                         "controller_epoch"}
                                                        version = the partition epoch (the CAS version)
    /latest_producer_id_block                persistent {"next": N}
    /admin/delete_topics/T                   persistent (empty) topic T is being deleted
    /log_dir_event_notification/log_dir_event_NNNNNNNNNN
                                             persistent sequential {"version": 1, "broker": N,
                                                         "event": 1}  (a log dir failed; the
                                                        controller deletes it once handled)
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from seglog.config import KEYS_BY_SCOPE, TOPIC_CONFIG_SYNONYMS, BrokerConfig

NO_LEADER = -1

CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
LOG_DIR_EVENT_PATH = "/log_dir_event_notification"
#: Topics marked for deletion, one child each (Kafka's ``/admin/delete_topics/T``).
DELETE_TOPICS_PATH = "/admin/delete_topics"
LOG_DIR_EVENT_PREFIX = LOG_DIR_EVENT_PATH + "/log_dir_event_"
PRODUCER_ID_BLOCK_SIZE = 1000

TopicPartition = tuple[str, int]


def broker_path(node_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{node_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def state_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}/state"


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def loads(data: bytes) -> Any:
    return json.loads(data.decode()) if data else None


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionState:
    """One partition's replication state (Kafka's ``LeaderAndIsr``).

    ``partition_epoch`` is the version of the state znode: every change bumps it and every
    change is a compare-and-set on it. ``leader_epoch`` is bumped on every leader change only.
    ``elr`` holds the eligible leader replicas (KIP-966): members removed from the ISR while
    it was below ``min.insync.replicas``, which therefore hold every committed record.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    elr: tuple[int, ...] = ()
    partition_epoch: int = 0
    controller_epoch: int = 0
    #: (replica, broker epoch) of the leader and the ISR and ELR members when they were elected
    #: or admitted: a registration with another broker epoch is a later incarnation (KIP-903).
    broker_epochs: tuple[tuple[int, int], ...] = ()
    #: Replicas taken out of an ISR or ELR that would otherwise be empty by an unclean restart:
    #: the last resort when nobody else is left to elect (KIP-966's "last known leader").
    last_known: tuple[int, ...] = ()

    def broker_epoch(self, replica: int) -> int:
        for r, e in self.broker_epochs:
            if r == replica:
                return e
        return -1

    def to_json(self) -> bytes:
        return dumps(
            {
                "leader": self.leader,
                "leader_epoch": self.leader_epoch,
                "isr": list(self.isr),
                "elr": list(self.elr),
                "controller_epoch": self.controller_epoch,
                "broker_epochs": {str(r): e for r, e in self.broker_epochs},
                "last_known": list(self.last_known),
            }
        )

    @classmethod
    def from_json(cls, data: bytes, version: int) -> PartitionState:
        d = loads(data)
        epochs = tuple(sorted((int(r), int(e)) for r, e in d.get("broker_epochs", {}).items()))
        return cls(
            d["leader"],
            d["leader_epoch"],
            tuple(d["isr"]),
            tuple(d.get("elr", ())),
            version,
            d.get("controller_epoch", 0),
            epochs,
            tuple(d.get("last_known", ())),
        )


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionInfo:
    """A partition's assignment with its current state (what LeaderAndIsr carries)."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    state: PartitionState

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclasses.dataclass(frozen=True, slots=True)
class ReplicaConfig:
    """Node-level replication settings (Kafka's keys; see ``docs/configuration.md``)."""

    replica_lag_time_max_ms: int = 30_000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_max_bytes: int = 1024 * 1024
    replica_fetch_response_max_bytes: int = 10 * 1024 * 1024
    replica_fetch_backoff_ms: int = 1000
    replica_socket_timeout_ms: int = 30_000
    session_timeout_ms: int = 18_000
    replica_high_watermark_checkpoint_interval_ms: int = 5000
    controller_socket_timeout_ms: int = 30_000
    request_timeout_ms: int = 30_000
    #: What CreateTopics' -1 partitions and replication factor mean (Kafka's broker keys).
    num_partitions: int = 1
    default_replication_factor: int = 1
    # Consumer groups on the node's Kafka listener (seglog.cluster.group_coordinator).
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 104_857_600
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    log_cleaner_enable: bool = True
    log_cleaner_backoff_ms: int = 15_000

    def __post_init__(self) -> None:
        if self.replica_fetch_wait_max_ms >= self.replica_lag_time_max_ms:
            raise ValueError(
                f"replica.fetch.wait.max.ms ({self.replica_fetch_wait_max_ms}) must be below "
                f"replica.lag.time.max.ms ({self.replica_lag_time_max_ms}), or idle followers "
                "drop out of the ISR"
            )
        for f in dataclasses.fields(self):
            if getattr(self, f.name) < 0:
                raise ValueError(f"{f.name.replace('_', '.')} must be >= 0, got {getattr(self, f.name)}")
        for name in (
            "num_partitions",
            "default_replication_factor",
            "offsets_topic_num_partitions",
            "offsets_topic_replication_factor",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name.replace('_', '.')} must be >= 1, got {getattr(self, name)}")

    @classmethod
    def from_broker_config(cls, cfg: BrokerConfig) -> ReplicaConfig:
        return cls(
            replica_lag_time_max_ms=cfg.replica_lag_time_max_ms,
            replica_fetch_wait_max_ms=cfg.replica_fetch_wait_max_ms,
            replica_fetch_min_bytes=cfg.replica_fetch_min_bytes,
            replica_fetch_max_bytes=cfg.replica_fetch_max_bytes,
            replica_fetch_response_max_bytes=cfg.replica_fetch_response_max_bytes,
            replica_fetch_backoff_ms=cfg.replica_fetch_backoff_ms,
            replica_socket_timeout_ms=cfg.replica_socket_timeout_ms,
            session_timeout_ms=cfg.zookeeper_session_timeout_ms,
            replica_high_watermark_checkpoint_interval_ms=cfg.replica_high_watermark_checkpoint_interval_ms,
            controller_socket_timeout_ms=cfg.controller_socket_timeout_ms,
            num_partitions=cfg.num_partitions,
            default_replication_factor=cfg.default_replication_factor,
            offsets_topic_num_partitions=cfg.offsets_topic_num_partitions,
            offsets_topic_replication_factor=cfg.offsets_topic_replication_factor,
            offsets_topic_segment_bytes=cfg.offsets_topic_segment_bytes,
            group_initial_rebalance_delay_ms=cfg.group_initial_rebalance_delay_ms,
            group_min_session_timeout_ms=cfg.group_min_session_timeout_ms,
            group_max_session_timeout_ms=cfg.group_max_session_timeout_ms,
            log_cleaner_enable=cfg.log_cleaner_enable,
            log_cleaner_backoff_ms=cfg.log_cleaner_backoff_ms,
        )

    def with_overrides(self, **kw: Any) -> ReplicaConfig:
        return dataclasses.replace(self, **kw)

    def broker_properties(self, log_defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """These settings and the topic defaults ``log_defaults`` (by topic key) as the broker
        properties that set them (what ``seglog node`` reads from its properties file)."""
        props: dict[str, Any] = {key: getattr(self, attr) for attr, key in REPLICA_KEYS.items()}
        for k, v in (log_defaults or {}).items():
            props[broker_key(k)] = v
        return props


#: The broker property that sets each :class:`ReplicaConfig` field.
REPLICA_KEYS = {
    "replica_lag_time_max_ms": "replica.lag.time.max.ms",
    "replica_fetch_wait_max_ms": "replica.fetch.wait.max.ms",
    "replica_fetch_min_bytes": "replica.fetch.min.bytes",
    "replica_fetch_max_bytes": "replica.fetch.max.bytes",
    "replica_fetch_response_max_bytes": "replica.fetch.response.max.bytes",
    "replica_fetch_backoff_ms": "replica.fetch.backoff.ms",
    "replica_socket_timeout_ms": "replica.socket.timeout.ms",
    "session_timeout_ms": "zookeeper.session.timeout.ms",
    "replica_high_watermark_checkpoint_interval_ms": "replica.high.watermark.checkpoint.interval.ms",
    "controller_socket_timeout_ms": "controller.socket.timeout.ms",
    "num_partitions": "num.partitions",
    "default_replication_factor": "default.replication.factor",
    "offsets_topic_num_partitions": "offsets.topic.num.partitions",
    "offsets_topic_replication_factor": "offsets.topic.replication.factor",
    "offsets_topic_segment_bytes": "offsets.topic.segment.bytes",
    "group_initial_rebalance_delay_ms": "group.initial.rebalance.delay.ms",
    "group_min_session_timeout_ms": "group.min.session.timeout.ms",
    "group_max_session_timeout_ms": "group.max.session.timeout.ms",
    "log_cleaner_enable": "log.cleaner.enable",
    "log_cleaner_backoff_ms": "log.cleaner.backoff.ms",
}


def broker_key(key: str) -> str:
    """A topic key (``segment.bytes``) as the broker key setting its default."""
    if key in KEYS_BY_SCOPE["broker"]:
        return key
    for k in TOPIC_CONFIG_SYNONYMS.get(key, []):
        if k.to_topic is None:
            return k.name
    raise ValueError(f"no broker property sets the default of topic key {key!r}")


def topic_record(assignment: Mapping[int, tuple[int, ...]], config: Mapping[str, Any]) -> bytes:
    return dumps({"partitions": {str(p): list(r) for p, r in sorted(assignment.items())}, "config": dict(config)})


def parse_topic_record(data: bytes) -> tuple[dict[int, tuple[int, ...]], dict[str, Any]]:
    d = loads(data)
    return ({int(p): tuple(r) for p, r in d["partitions"].items()}, dict(d.get("config", {})))
