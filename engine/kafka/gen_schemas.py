"""Generate ``engine/kafka/_schemas.py`` from Kafka's message definitions.

Kafka describes every protocol message in JSON files
(``clients/src/main/resources/common/message/*.json`` in an Apache Kafka checkout). This
script reads the messages seglog serves and writes their layouts as plain Python tables, which
``seglog.kafka.codec`` compiles into encoders and decoders. The JSON files are not part of this
repository; run the script against a Kafka checkout to refresh the tables::

    python -m seglog.kafka.gen_schemas /path/to/kafka > engine/kafka/_schemas.py

Each field becomes a tuple ``(name, type, versions, nullable_versions, tag, tagged_versions,
default, fields)``: ``name`` in snake_case, ``type`` Kafka's type name (``"int32"``,
``"string"``, ``"records"``, ``"[]int32"``; ``"[]"`` for an array of structs and ``"{}"`` for
a struct, whose fields follow), version ranges as ``(low, high)`` pairs (``None`` for none).
"""

from __future__ import annotations

import json
import os
import pprint
import re
import sys
from typing import Any

#: The messages seglog encodes and decodes (request and response of each).
MESSAGES = [
    "Produce",
    "Fetch",
    "ListOffsets",
    "Metadata",
    "OffsetCommit",
    "OffsetFetch",
    "FindCoordinator",
    "JoinGroup",
    "Heartbeat",
    "LeaveGroup",
    "SyncGroup",
    "DescribeGroups",
    "ListGroups",
    "SaslHandshake",
    "ApiVersions",
    "CreateTopics",
    "DeleteTopics",
    "DeleteRecords",
    "InitProducerId",
    "AddPartitionsToTxn",
    "AddOffsetsToTxn",
    "EndTxn",
    "TxnOffsetCommit",
    "DescribeConfigs",
    "CreatePartitions",
    "IncrementalAlterConfigs",
    "SaslAuthenticate",
    "ElectLeaders",
    # Between the nodes of a cluster: follower truncation, and the controller's requests.
    "OffsetForLeaderEpoch",
    "LeaderAndIsr",
    "StopReplica",
    "UpdateMetadata",
    "AlterPartition",
    "ControlledShutdown",
]

_MAX = 0x7FFF


def _versions(text: str | None) -> tuple[int, int] | None:
    if text is None or text == "none":
        return None
    if text.endswith("+"):
        return int(text[:-1]), _MAX
    if "-" in text:
        lo, hi = text.split("-")
        return int(lo), int(hi)
    return int(text), int(text)


def _snake(name: str) -> str:
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)
    return s.lower()


def _default(field: dict[str, Any], ftype: str) -> object:
    d = field.get("default")
    if ftype.startswith("[]") or ftype in ("records", "bytes", "{}"):
        return None
    if d is None:
        if ftype == "string":
            return ""
        if ftype == "bool":
            return False
        if ftype == "uuid":
            return bytes(16)
        if ftype == "float64":
            return 0.0
        return 0
    if d == "null":
        return None
    if ftype == "bool":
        return d == "true" if isinstance(d, str) else bool(d)
    if ftype == "string":
        return d
    if ftype == "float64":
        return float(d)
    if ftype == "uuid":
        return bytes(16)
    return int(d, 0) if isinstance(d, str) else int(d)


def _field(field: dict[str, Any], common: dict[str, list[Any]]) -> tuple[Any, ...]:
    ftype = field["type"]
    children = None
    if ftype.startswith("[]"):
        inner = ftype[2:]
        if "fields" in field or inner in common:
            children = [_field(f, common) for f in field.get("fields") or common[inner]]
            ftype = "[]"
    elif ftype not in (
        "int8",
        "int16",
        "uint16",
        "int32",
        "int64",
        "float64",
        "bool",
        "string",
        "bytes",
        "records",
        "uuid",
        "uint32",
    ):
        children = [_field(f, common) for f in field.get("fields") or common[ftype]]
        ftype = "{}"
    tag = field.get("tag")
    return (
        _snake(field["name"]),
        ftype,
        _versions(field.get("versions")),
        _versions(field.get("nullableVersions")),
        tag,
        _versions(field.get("taggedVersions")) if tag is not None else None,
        _default(field, ftype),
        tuple(children) if children is not None else None,
    )


def load(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"^\s*//.*$", "", f.read(), flags=re.M)
    spec = json.loads(text)
    common = {s["name"]: s["fields"] for s in spec.get("commonStructs", [])}
    return {
        "name": spec["name"],
        "api_key": spec.get("apiKey"),
        "type": spec["type"],
        "valid": _versions(spec["validVersions"]),
        "flexible": _versions(spec["flexibleVersions"]),
        "fields": tuple(_field(f, common) for f in spec["fields"]),
    }


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    base = os.path.join(argv[1], "clients", "src", "main", "resources", "common", "message")
    out: dict[str, dict[str, Any]] = {}
    for name in MESSAGES:
        for suffix in ("Request", "Response"):
            spec = load(os.path.join(base, name + suffix + ".json"))
            out[spec["name"]] = spec
    print('"""Layouts of the Kafka protocol messages seglog serves, generated by')
    print('seglog.kafka.gen_schemas from Apache Kafka\'s message definitions. Do not edit."""')
    print()
    print("from typing import Any")
    print()
    print("# fmt: off")
    print("MESSAGES: dict[str, dict[str, Any]] = " + pprint.pformat(out, width=160, sort_dicts=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
