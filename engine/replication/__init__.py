"""Replication: Kafka's ISR protocol over seglog partition logs.

Modules (rules in ``docs/replication.md``; the wire format in ``docs/replication-protocol.md``):

- :mod:`~seglog.replication.partition` — one replica of one partition: high watermark, ISR,
  acks, leader epochs, follower truncation, idempotence;
- :mod:`~seglog.replication.node` — a node: requests, follower fetchers, ISR expiry timer,
  coordinator session;
- :mod:`~seglog.replication.controller` — leader election and ISR changes through the
  coordinator's compare-and-set;
- :mod:`~seglog.replication.election` — election and placement rules as pure functions;
- :mod:`~seglog.replication.coordinator` — the coordination service interface and its
  in-memory implementation;
- :mod:`~seglog.replication.transport` — the transport interface and the in-memory network;
  :mod:`~seglog.replication.tcp` — asyncio TCP;
- idempotent producer state and ``.snapshot`` files: :mod:`seglog.producer_state` (shared
  with the store).
"""

from __future__ import annotations

from seglog.replication.coordinator import InMemoryCoordinator
from seglog.replication.metadata import PartitionState, ReplicaConfig
from seglog.replication.node import ReplicaNode
from seglog.replication.transport import InMemoryNetwork

__all__ = ["InMemoryCoordinator", "InMemoryNetwork", "PartitionState", "ReplicaConfig", "ReplicaNode"]
