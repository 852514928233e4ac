"""Kafka's wire protocol for a seglog store: a one-node broker that Kafka clients use.

``seglog.kafka.codec`` encodes and decodes the protocol's messages (generated from Kafka's
message definitions); ``seglog.kafka.server`` serves a :class:`seglog.Store`, reading each
connection's frames as ``seglog.kafka.connection`` lays them out, answering the APIs of
``seglog.kafka.apis``, after the listener security of ``seglog.kafka.security``. See
``docs/kafka-protocol.md`` for the APIs and versions served.
"""
