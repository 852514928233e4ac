"""Kafka's keyed partitioner, bit for bit: the partition a Kafka producer (Java client) picks
for a record with a key.

    partition = (murmur2(serialized_key) & 0x7fffffff) % num_partitions

``num_partitions`` counts every partition of the topic. Records without a key (``None``) are
not hashed: Kafka's producer spreads them with its sticky partitioner, which depends on live
batching and cannot be reproduced offline, so the choice is left to the caller.

>>> from seglog.client.partitioner import murmur2, partition_for_key, partitions_for_keys
>>> murmur2(b"21")
-973932308
>>> partition_for_key(b"abc", 1000)
107
>>> partitions_for_keys([b"", b"a", None], 1000)
array('i', [681, 524, -1])

The functions are the native ones from ``seglog._native.partition``; they are re-exported here
unwrapped, so a call costs one C call (about 40 ns for a short key), and
``partitions_for_keys`` about 5 ns a key.
"""

from __future__ import annotations

from seglog._native.partition import murmur2, partition_for_key, partitions_for_keys

__all__ = ["murmur2", "partition_for_key", "partitions_for_keys"]
