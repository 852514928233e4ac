"""Tagged fields seglog adds to Kafka's messages between its own nodes.

Kafka's messages carry almost everything seglog's nodes tell each other; what they have no
field for travels in tagged fields (KIP-482) of the flexible versions, numbered from
:data:`FIRST_TAG` so that they cannot meet a tag Kafka's definitions use (Kafka numbers its
tags from 0 and has used fewer than ten per struct). A Kafka broker or client skips them, as it
skips every tagged field it does not know; seglog's codec decodes them like Kafka's own, to
their default when absent. ``docs/kafka-protocol.md`` lists them ("Between nodes").

:data:`EXTENSIONS` maps a message name to ``(path, field)`` pairs: ``path`` names the struct
(or array of structs) the field is added to, from the message's top (``()``: the top level),
and ``field`` is a layout tuple as ``seglog.kafka.gen_schemas`` writes them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["EXTENSIONS", "FIRST_TAG", "extend"]

#: The first tag number seglog uses.
FIRST_TAG = 10000
_ALL = (0, 0x7FFF)
_Field = tuple[Any, ...]


def _tag(name: str, ftype: str, tag: int, default: object = None, children: tuple[_Field, ...] | None = None) -> _Field:
    return (name, ftype, _ALL, None, FIRST_TAG + tag, _ALL, default, children)


def _scalar(name: str, ftype: str) -> _Field:
    return (name, ftype, _ALL, None, None, None, 0 if ftype != "string" else "", None)


#: (replica, broker epoch) pairs.
_BROKER_EPOCHS = (_scalar("broker_id", "int32"), (*_scalar("broker_epoch", "int64")[:6], -1, None))
#: (topic, JSON text of its config overrides).
_TOPIC_CONFIGS = (_scalar("topic", "string"), _scalar("config", "string"))

#: The parts of a partition's replication state Kafka's partition structs have no field for.
_STATE = [
    _tag("eligible_leader_replicas", "[]int32", 0),
    _tag("broker_epochs", "[]", 1, None, _BROKER_EPOCHS),
    _tag("last_known_leaders", "[]int32", 2),
]

#: Every response: a request the node could not handle at all (seglog's ErrorResponse).
_REQUEST_ERROR = [
    _tag("request_error_code", "int16", 90, 0),
    _tag("request_error_message", "string", 91, ""),
]
#: A response whose Kafka form has an error code but no message for it.
_MESSAGE = _tag("error_message", "string", 92, "")

EXTENSIONS: dict[str, list[tuple[tuple[str, ...], _Field]]] = {
    "FetchRequest": [((), _tag("read_to_log_end", "bool", 0, False))],
    "FetchResponse": [
        (("responses", "partitions"), _tag("log_end_offset", "int64", 0, -1)),
        (("responses", "partitions"), _tag("error_message", "string", 1, "")),
    ],
    "ProduceResponse": [
        (("responses", "partition_responses"), _tag("last_offset", "int64", 0, -1)),
        (("responses", "partition_responses"), _tag("duplicate", "bool", 1, False)),
    ],
    "LeaderAndIsrRequest": [
        ((), _tag("topic_configs", "[]", 2, None, _TOPIC_CONFIGS)),
        ((), _tag("state_version", "int64", 3, -1)),
        *((("topic_states", "partition_states"), f) for f in _STATE),
    ],
    "LeaderAndIsrResponse": [((), _MESSAGE)],
    "UpdateMetadataRequest": [
        (("live_brokers",), _tag("broker_epoch", "int64", 0, -1)),
        ((), _tag("topic_configs", "[]", 1, None, _TOPIC_CONFIGS)),
        ((), _tag("state_version", "int64", 2, -1)),
        *((("topic_states", "partition_states"), f) for f in _STATE),
    ],
    "UpdateMetadataResponse": [((), _MESSAGE)],
    "StopReplicaResponse": [((), _MESSAGE)],
    "AlterPartitionResponse": [
        ((), _MESSAGE),
        *((("topics", "partitions"), f) for f in _STATE),
        (("topics", "partitions"), _tag("controller_epoch", "int32", 3, -1)),
    ],
    "MetadataResponse": [
        ((), _tag("live_broker_epochs", "[]", 0, None, _BROKER_EPOCHS)),
        (
            (),
            _tag(
                "watermarks",
                "[]",
                1,
                None,
                (
                    _scalar("topic", "string"),
                    _scalar("partition", "int32"),
                    _scalar("log_start_offset", "int64"),
                    _scalar("high_watermark", "int64"),
                    _scalar("low_watermark", "int64"),
                ),
            ),
        ),
        ((), _tag("metadata_error_code", "int16", 2, 0)),
        *((("topics", "partitions"), f) for f in _STATE),
        (("topics", "partitions"), _tag("partition_epoch", "int32", 3, 0)),
        (("topics", "partitions"), _tag("controller_epoch", "int32", 4, 0)),
    ],
    "InitProducerIdResponse": [((), _MESSAGE)],
    "CreateTopicsResponse": [
        (
            ("topics",),
            _tag(
                "assignment",
                "[]",
                0,
                None,
                (_scalar("partition_index", "int32"), ("broker_ids", "[]int32", _ALL, None, None, None, None, None)),
            ),
        )
    ],
    "CreatePartitionsResponse": [
        (
            ("results",),
            _tag("assignment", "[]", 0, None, (("broker_ids", "[]int32", _ALL, None, None, None, None, None),)),
        )
    ],
    "IncrementalAlterConfigsResponse": [
        (("responses",), _tag("config", "[]", 0, None, (_scalar("name", "string"), _scalar("value", "string"))))
    ],
    "DeleteRecordsResponse": [(("topics", "partitions"), _tag("error_message", "string", 0, ""))],
    "ElectLeadersResponse": [(("replica_election_results", "partition_result"), _tag("leader", "int32", 0, -1))],
    "ControlledShutdownResponse": [((), _MESSAGE)],
}
EXTENSIONS["DeleteTopicsResponse"] = []
for _name in [n for n in EXTENSIONS if n.endswith("Response")]:
    EXTENSIONS[_name] = [*EXTENSIONS[_name], *(((), f) for f in _REQUEST_ERROR)]


def _add(fields: tuple[_Field, ...], path: tuple[str, ...], field: _Field, where: str) -> tuple[_Field, ...]:
    if not path:
        if any(f[0] == field[0] or (f[4] is not None and f[4] == field[4]) for f in fields):
            raise ValueError(f"{where}: field {field[0]} or tag {field[4]} is there already")
        return (*fields, field)
    out = []
    found = False
    for f in fields:
        if f[0] == path[0] and f[7] is not None:
            f = (*f[:7], _add(f[7], path[1:], field, where))
            found = True
        out.append(f)
    if not found:
        raise ValueError(f"{where}: no struct {path[0]}")
    return tuple(out)


def extend(messages: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``messages`` (name -> layout) with :data:`EXTENSIONS` added (a new dict; the layouts
    given are not changed)."""
    out = dict(messages)
    for name, added in EXTENSIONS.items():
        spec = dict(out[name])
        fields = spec["fields"]
        for path, field in added:
            fields = _add(fields, path, field, name)
        spec["fields"] = fields
        out[name] = spec
    return out
