"""The APIs the Kafka listener serves: their names, the range of versions served of each, and
the ApiVersions answer that tells clients so (before and after SASL authentication alike).

See ``docs/kafka-protocol.md`` for the APIs and versions served.
"""

from __future__ import annotations

from typing import Any

from seglog.errors import InvalidRequestError, UnsupportedVersionError
from seglog.kafka import codec
from seglog.kafka.connection import INT32, CloseConnection, ConnState, skip_tagged

__all__ = ["API_NAMES", "API_VERSIONS", "api_versions_response"]

#: api key -> Kafka's name of the API (its messages are ``<name>Request`` / ``<name>Response``).
API_NAMES = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    15: "DescribeGroups",
    16: "ListGroups",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    21: "DeleteRecords",
    22: "InitProducerId",
    32: "DescribeConfigs",
    37: "CreatePartitions",
    43: "ElectLeaders",
    44: "IncrementalAlterConfigs",
    24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn",
    26: "EndTxn",
    28: "TxnOffsetCommit",
    17: "SaslHandshake",
    36: "SaslAuthenticate",
    # Between the nodes of a cluster (seglog.cluster.kafka_messages); not in API_VERSIONS.
    4: "LeaderAndIsr",
    5: "StopReplica",
    6: "UpdateMetadata",
    7: "ControlledShutdown",
    23: "OffsetForLeaderEpoch",
    56: "AlterPartition",
}

#: api key -> (lowest, highest) version served. Floors are Kafka 4.0's (KIP-896); ceilings are
#: the highest versions of Kafka's definitions whose fields the server fills in.
API_VERSIONS: dict[int, tuple[int, int]] = {
    0: (3, 11),  # Produce
    1: (4, 17),  # Fetch
    2: (1, 10),  # ListOffsets
    3: (0, 12),  # Metadata
    8: (2, 8),  # OffsetCommit (v9 is for KIP-848 consumer groups)
    9: (1, 8),  # OffsetFetch (v9 is for KIP-848 consumer groups)
    10: (0, 5),  # FindCoordinator (v6 adds share groups)
    11: (2, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 5),  # DescribeGroups
    16: (0, 5),  # ListGroups
    18: (0, 4),  # ApiVersions
    19: (2, 7),  # CreateTopics
    20: (1, 6),  # DeleteTopics
    21: (0, 2),  # DeleteRecords
    32: (1, 4),  # DescribeConfigs
    37: (0, 3),  # CreatePartitions
    44: (0, 1),  # IncrementalAlterConfigs
    22: (0, 5),  # InitProducerId
    24: (0, 3),  # AddPartitionsToTxn (answered: transactions are not supported)
    25: (0, 4),  # AddOffsetsToTxn (answered: transactions are not supported)
    26: (0, 4),  # EndTxn (answered: transactions are not supported)
    28: (0, 4),  # TxnOffsetCommit (answered: transactions are not supported)
    17: (0, 1),  # SaslHandshake (seglog.kafka.security; after authentication ILLEGAL_SASL_STATE)
    36: (0, 2),  # SaslAuthenticate (likewise)
}


def api_versions_response(
    frame: memoryview,
    pos: int,
    version: int,
    correlation_id: int,
    state: ConnState,
    versions: dict[int, tuple[int, int]] = API_VERSIONS,
) -> list[Any]:
    """The response frame's parts for an ApiVersions request (``frame``, its body from
    ``pos``), listing ``versions`` (api key -> lowest and highest version served). Always response header v0; a version not served is answered in v0 with
    UNSUPPORTED_VERSION and the versions served (KIP-511). Raises :class:`CloseConnection` for
    a body that does not parse."""
    keys = [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in sorted(versions.items())]
    lo, hi = versions[18]
    out: list[Any] = [bytearray(INT32.pack(correlation_id))]  # always response header v0
    if not lo <= version <= hi:
        # KIP-511: an unknown version is answered in v0 with the versions served.
        state.warn(f"ApiVersions v{version} is not served; answering v0 UNSUPPORTED_VERSION")
        return codec.encode(
            "ApiVersionsResponse", 0, {"error_code": UnsupportedVersionError.code, "api_keys": keys}, out
        )
    if codec.is_flexible("ApiVersionsRequest", version):
        try:
            pos = skip_tagged(frame, pos)
            codec.decode("ApiVersionsRequest", version, frame, pos)
        except (InvalidRequestError, IndexError) as exc:
            raise CloseConnection(f"ApiVersions v{version}: {exc}") from None
    return codec.encode("ApiVersionsResponse", version, {"error_code": 0, "api_keys": keys, "throttle_time_ms": 0}, out)
