"""The Kafka listener's administrative APIs on a store: CreatePartitions, DeleteRecords,
DescribeConfigs and IncrementalAlterConfigs. Each function takes the decoded request and
returns the response body (see ``seglog.kafka.server``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from seglog.config import BrokerConfig, ConfigKey, LogConfig
from seglog.config import format_value as _format_value
from seglog.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidRequestError,
    SeglogError,
    code_for_exception,
)

if TYPE_CHECKING:
    from seglog.kafka.codec import Message
    from seglog.storage.log_manager import LogManager

__all__ = [
    "create_partitions",
    "created_topic_configs",
    "delete_records",
    "describe_config_resources",
    "describe_configs",
    "incremental_alter_configs",
    "topic_config_changes",
    "topic_configs_created",
]

TOPIC, BROKER = 2, 4
# Kafka's DescribeConfigsResponse.ConfigSource values.
TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
_CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7}
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _error(exc: BaseException) -> tuple[int, str]:
    return code_for_exception(exc), str(exc)


def create_partitions(store: LogManager, version: int, req: Message) -> Message:
    results = []
    for t in req["topics"]:
        out = {"name": t["name"], "error_code": 0, "error_message": None}
        try:
            if t.get("assignments"):
                raise InvalidRequestError("replica assignments are not supported: this broker is the only replica")
            have = store.partitions_for(t["name"])
            if t["count"] <= have:
                raise InvalidPartitionsError(
                    f"topic {t['name']!r} has {have} partitions; the new total {t['count']} must be larger"
                )
            if not req.get("validate_only"):
                store.create_partitions(t["name"], t["count"])
        except SeglogError as exc:
            out["error_code"], out["error_message"] = _error(exc)
        results.append(out)
    return {"throttle_time_ms": 0, "results": results}


def delete_records(store: LogManager, version: int, req: Message) -> Message:
    topics = []
    for t in req["topics"]:
        parts = []
        for p in t["partitions"]:
            out = {"partition_index": p["partition_index"], "low_watermark": -1, "error_code": 0}
            try:
                log = store.log(t["name"], p["partition_index"])
                offset = p["offset"]
                if offset == -1:  # Kafka: -1 deletes up to the high watermark
                    offset = log.high_watermark
                if offset < 0 or offset > log.high_watermark:
                    from seglog.errors import OffsetOutOfRangeError

                    raise OffsetOutOfRangeError(
                        f"cannot delete records of {t['name']}-{p['partition_index']} before "
                        f"offset {offset}: the high watermark is {log.high_watermark}"
                    )
                out["low_watermark"] = store.delete_records(t["name"], p["partition_index"], offset)
            except SeglogError as exc:
                out["error_code"] = code_for_exception(exc)
            parts.append(out)
        topics.append({"name": t["name"], "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}


def _entry(
    key: ConfigKey, value: Any, source: int, read_only: bool, version: int, synonyms: bool, documentation: bool
) -> Message:
    text = None if value is None else _format_value(value)
    return {
        "name": key.name,
        "value": text,
        "read_only": read_only,
        "is_default": source == DEFAULT_CONFIG,
        "config_source": source,
        "is_sensitive": False,
        "synonyms": [{"name": key.name, "value": text, "source": source}] if synonyms else [],
        "config_type": _CONFIG_TYPES.get(key.type, 0),
        "documentation": key.doc if documentation else None,
    }


def _config_entries(
    config: Any, overrides: Any, defaults: LogConfig, version: int, synonyms: bool, docs: bool
) -> list[Message]:
    """Every topic key of ``config`` with its value and source: ``overrides`` (the topic's own
    keys), ``defaults`` (the server-wide topic config) where it differs from the built-in
    default."""
    entries = []
    for key in LogConfig.definitions():
        value = getattr(config, key.attr)
        if key.name in overrides:
            source = TOPIC_CONFIG
        elif getattr(defaults, key.attr) != key.default:
            source = STATIC_BROKER_CONFIG
        else:
            source = DEFAULT_CONFIG
        entries.append(_entry(key, value, source, False, version, synonyms, docs))
    return entries


def created_topic_configs(store: LogManager, name: str | None, overrides: Mapping[str, Any]) -> list[Message]:
    """The ``configs`` of a CreateTopics response (v5+): every key of the new topic with its
    value and source, as Kafka answers (the Java AdminClient reads them). ``name`` None: the
    topic was only validated, its config is the store's defaults with ``overrides``."""
    config = store.topic_config(name) if name is not None else store.config.topic_config(overrides)
    return topic_configs_created(config, overrides, store.config.topic_config())


def topic_configs_created(config: LogConfig, overrides: Mapping[str, Any], defaults: LogConfig) -> list[Message]:
    """The ``configs`` of a CreateTopics response (v5+) for a topic of ``config``, made with
    ``overrides`` where the server-wide topic config is ``defaults``."""
    return [
        {k: e[k] for k in ("name", "value", "read_only", "config_source", "is_sensitive")}
        for e in _config_entries(config, overrides, defaults, 5, False, False)
    ]


def describe_configs(store: LogManager, node_id: int, version: int, req: Message) -> Message:
    def topic(name: str) -> tuple[LogConfig, Mapping[str, Any]]:
        return store.topic_config(name), store.describe(name)[0].config_overrides

    return describe_config_resources(version, req, node_id, store.config, store.config.topic_config(), topic)


def describe_config_resources(
    version: int,
    req: Message,
    node_id: int,
    broker: BrokerConfig,
    defaults: LogConfig,
    topic: Callable[[str], tuple[LogConfig, Mapping[str, Any]]],
) -> Message:
    """A DescribeConfigs response: topic resources by ``topic`` (a name's config and its own
    overrides; a :class:`SeglogError` for a topic it does not have) where the server-wide topic
    config is ``defaults``, the broker resource (``node_id`` or "") from ``broker``."""
    synonyms = bool(req.get("include_synonyms"))
    docs = bool(req.get("include_documentation"))
    results = []
    for r in req["resources"]:
        rtype, name = r["resource_type"], r["resource_name"]
        wanted = r.get("configuration_keys")
        out: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "resource_type": rtype,
            "resource_name": name,
            "configs": [],
        }
        try:
            if rtype == TOPIC:
                config, overrides = topic(name)
                entries = _config_entries(config, overrides, defaults, version, synonyms, docs)
            elif rtype == BROKER:
                if name not in ("", str(node_id)):
                    raise InvalidRequestError(f"this broker is node {node_id}, not {name!r}")
                entries = []
                for key in BrokerConfig.definitions():
                    value = getattr(broker, key.attr)
                    source = DEFAULT_CONFIG if value == key.default else STATIC_BROKER_CONFIG
                    entries.append(_entry(key, value, source, True, version, synonyms, docs))
            else:
                raise InvalidRequestError(
                    f"resource type {rtype} is not described by this broker (topics: 2, brokers: 4)"
                )
            if wanted is not None:
                entries = [e for e in entries if e["name"] in wanted]
            out["configs"] = entries
        except SeglogError as exc:
            out["error_code"], out["error_message"] = _error(exc)
        results.append(out)
    return {"throttle_time_ms": 0, "results": results}


def incremental_alter_configs(store: LogManager, version: int, req: Message) -> Message:
    responses = []
    for r in req["resources"]:
        rtype, name = r["resource_type"], r["resource_name"]
        out = {"error_code": 0, "error_message": None, "resource_type": rtype, "resource_name": name}
        try:
            if rtype != TOPIC:
                raise InvalidRequestError(
                    f"resource type {rtype} cannot be altered: only topic configs (2) can; broker "
                    "configs come from the store's config at open"
                )
            overrides = dict(store.describe(name)[0].config_overrides)
            to_set, to_delete = topic_config_changes(r["configs"], store.topic_config(name))
            # Validate everything before changing anything.
            trial = {k: v for k, v in overrides.items() if k not in to_delete}
            trial.update(to_set)
            store.config.topic_config(trial)
            if not req.get("validate_only"):
                store.alter_topic_config(name, set=to_set, delete=to_delete)
        except SeglogError as exc:
            out["error_code"], out["error_message"] = _error(exc)
        responses.append(out)
    return {"throttle_time_ms": 0, "responses": responses}


def topic_config_changes(configs: list[Message], config: LogConfig) -> tuple[dict[str, Any], list[str]]:
    """An IncrementalAlterConfigs resource's ``configs`` on a topic whose config is ``config``:
    the keys to set (APPEND and SUBTRACT of list keys resolved against ``config``) and the
    keys to delete."""
    to_set: dict[str, Any] = {}
    to_delete: list[str] = []
    for c in configs:
        key, op, value = c["name"], c["config_operation"], c["value"]
        if op == SET:
            to_set[key] = value
        elif op == DELETE:
            to_delete.append(key)
        elif op in (APPEND, SUBTRACT):
            definition = {k.name: k for k in LogConfig.definitions()}.get(key)
            if definition is None or definition.type != "list":
                raise InvalidConfigError(f"{key} is not a list config: APPEND and SUBTRACT apply to list configs only")
            current = list(getattr(config, definition.attr) or ())
            items = [v for v in (value or "").split(",") if v]
            if op == APPEND:
                current += [v for v in items if v not in current]
            else:
                current = [v for v in current if v not in items]
            to_set[key] = ",".join(current)
        else:
            raise InvalidRequestError(f"unknown config operation {op} for {key}")
    return to_set, to_delete
