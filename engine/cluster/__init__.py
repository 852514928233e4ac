"""The cluster: replicated partitions over seglog logs, with Kafka's ISR protocol.

Built on :mod:`seglog.storage` (each replica is a :class:`~seglog.storage.log.Log`) and
:mod:`seglog.client` (the partitioner). Modules (rules in ``docs/replication.md``; the messages in ``docs/replication-protocol.md``, their
Kafka forms in ``docs/kafka-protocol.md``):

- :mod:`~seglog.cluster.partition` — one replica of one partition: high watermark, ISR,
  acks, leader epochs, follower truncation, idempotence;
- :mod:`~seglog.cluster.node` — a node: requests, ISR expiry timer, log dirs, coordinator
  session; :mod:`~seglog.cluster.fetcher` — its follower fetchers;
  :mod:`~seglog.cluster.fetch_handler` — the fetches it serves as a leader (long polls);
- :mod:`~seglog.cluster.controller` — leader election and ISR changes through the
  coordinator's compare-and-set;
- :mod:`~seglog.cluster.election` — election and placement rules as pure functions;
- :mod:`~seglog.cluster.coordinator` — the coordination service interface and its
  in-memory implementation;
- :mod:`~seglog.cluster.messages` — the requests and responses between nodes, clients and the
  controller; :mod:`~seglog.cluster.kafka_messages` — each as its Kafka request and response;
- :mod:`~seglog.cluster.transport` — the transport interface and the in-memory network;
  :mod:`~seglog.cluster.kafka_transport` — the one between processes, Kafka's protocol on each
  node's inter-broker listener; :mod:`~seglog.cluster.netloop` — the loop and socket helpers
  they share (scheduler, connecting with a deadline, listening, per-link addresses);
- :mod:`~seglog.cluster.zookeeper` — the coordinator over ZooKeeper (kazoo);
  :mod:`~seglog.cluster.zkserver` — a throwaway ZooKeeper server for tests and demos;
- :mod:`~seglog.cluster.server` — one node process (``seglog node``);
- :mod:`~seglog.cluster.factory` — :func:`start_cluster`, the one way to start a cluster for
  tests and demos: :mod:`~seglog.cluster.local` — :class:`LocalCluster`, a whole cluster in one
  process; :mod:`~seglog.cluster.process` — the same with one ``seglog node`` process per node;
  :mod:`~seglog.cluster.base` — what both share;
- :mod:`~seglog.cluster.producer`, :mod:`~seglog.cluster.consumer` — the cluster's
  :class:`ClusterProducer` and :class:`ClusterConsumer`, speaking Kafka's protocol through
  :class:`seglog.kafka.client.KafkaClient` (:mod:`~seglog.cluster.network`: what they need of
  the object that made them);
- :mod:`~seglog.cluster.client` — :class:`ClusterClient`, a cluster's producer, consumer and
  admin calls from its Kafka listeners' addresses;
- idempotent producer state and ``.snapshot`` files: the partition's log keeps them
  (``Log.producer_state``, :mod:`seglog.storage.producer_state`), as a store's logs do.
"""

from __future__ import annotations

from seglog.cluster.consumer import ClusterConsumer
from seglog.cluster.coordinator import InMemoryCoordinator
from seglog.cluster.factory import start_cluster
from seglog.cluster.local import LocalCluster
from seglog.cluster.metadata import PartitionState, ReplicaConfig
from seglog.cluster.node import ReplicaNode
from seglog.cluster.process import ProcessCluster
from seglog.cluster.producer import ClusterProducer
from seglog.cluster.transport import InMemoryNetwork

__all__ = [
    "ClusterConsumer",
    "ClusterProducer",
    "InMemoryCoordinator",
    "InMemoryNetwork",
    "LocalCluster",
    "PartitionState",
    "ProcessCluster",
    "ReplicaConfig",
    "ReplicaNode",
    "start_cluster",
]
