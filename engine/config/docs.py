"""The configuration reference, ``docs/configuration.md``, rendered from the table.

``python -m seglog.config > docs/configuration.md`` regenerates it; a test checks that the file
is current.
"""

from __future__ import annotations

from seglog.config.definition import INT_MAX, LONG_MAX, ConfigKey, Scope
from seglog.config.keys import CONFIG_KEYS, DAY_MS, IGNORED_DOC, TOPIC_CONFIG_SYNONYMS, WEEK_MS
from seglog.config.properties import format_value

__all__ = ["configuration_markdown"]

_UNITS_MS = (
    (WEEK_MS, "week"),
    (DAY_MS, "day"),
    (3_600_000, "hour"),
    (60_000, "minute"),
    (1000, "second"),
)
_UNITS_BYTES = ((1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB"))


def _render_default(key: ConfigKey) -> str:
    if key.default_doc is not None:
        return key.default_doc
    value = key.default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{'true' if value else 'false'}`"
    if isinstance(value, tuple):
        return f"`{','.join(value)}`" if value else '`""` (empty)'
    if isinstance(value, str):
        return f"`{value}`" if value else '`""` (empty)'
    text = f"`{format_value(value)}`"
    if value == LONG_MAX:
        return text + " (Long.MAX_VALUE)"
    if value == INT_MAX:
        return text + " (Integer.MAX_VALUE)"
    if isinstance(value, int) and value > 0:
        if key.name.endswith(".ms"):
            for size, unit in _UNITS_MS:
                if value >= size and value % size == 0:
                    count = value // size
                    return f"{text} ({count} {unit}{'s' if count != 1 else ''})"
        if key.name.endswith(".bytes"):
            for size, unit in _UNITS_BYTES:
                if value >= size and value % size == 0:
                    return f"{text} ({value // size} {unit})"
    return text


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


_SECTIONS: tuple[tuple[Scope, str, str], ...] = (
    (
        "topic",
        "Topic settings — `LogConfig`",
        (
            "Per-topic settings of each partition's log. A topic without an override takes the "
            "broker-wide default named in the last column."
        ),
    ),
    (
        "broker",
        "Node settings — `BrokerConfig`",
        (
            "Settings of one node (`seglog node --config node.properties`). A key with an "
            "entry under *Topic default of* supplies the broker-wide default of that topic key; "
            "where several supply the same one, the first that is set wins, in the order listed."
        ),
    ),
    (
        "producer",
        "Producer settings — `ProducerConfig`",
        "Settings of the embedded producer.",
    ),
    (
        "consumer",
        "Consumer settings — `ConsumerConfig`",
        "Settings of the embedded consumer.",
    ),
)


def configuration_markdown() -> str:
    """The Markdown reference of every key (``docs/configuration.md``)."""
    lines = [
        "# Configuration reference",
        "",
        (
            "<!-- Generated from the table in engine/config/keys.py by "
            "`python -m seglog.config > docs/configuration.md`; do not edit by hand. -->"
        ),
        "",
        (
            "seglog takes Apache Kafka's property names, defaults and valid ranges (as of Kafka "
            "3.9), so a Kafka `server.properties` or a topic's config overrides mean the same "
            "here. Each class below is a frozen dataclass whose attributes are the keys with "
            "dots replaced by underscores (`segment.bytes` → `segment_bytes`). Build one with "
            "`from_dict({...})`, `from_properties_file(path)` or keyword arguments; change one "
            "with `with_overrides(...)`; read it back with `to_dict()` or `to_properties()`. "
            "Unknown keys and invalid values raise `seglog.errors.ConfigError`, naming the key, "
            "the value and the valid range or the nearest valid key."
        ),
        "",
        (
            "Ranges are written as Kafka writes them: `[1,...]` means at least 1, "
            "`[0,...,1]` between 0 and 1. Types are Java's: `int` holds 32 bits, `long` 64, "
            "`short` 16; a `list` is comma-separated in a properties file and a tuple of "
            "strings in Python."
        ),
    ]
    for scope, title, intro in _SECTIONS:
        keys = [k for k in CONFIG_KEYS if k.scope == scope]
        lines += ["", f"## {title}", "", intro, ""]
        if scope == "topic":
            header = "| Key | Type | Default | Valid values | Broker default | Description |"
        elif scope == "broker":
            header = "| Key | Type | Default | Valid values | Topic default of | Description |"
        else:
            header = "| Key | Type | Default | Valid values | Description |"
        lines.append(header)
        lines.append("|" + "---|" * header.count(" | ") + "---|")
        for key in keys:
            cells = [
                f"`{key.name}`",
                key.type,
                _render_default(key),
                f"`{key.valid_values()}`" if key.valid_values() else "",
            ]
            if scope == "topic":
                cells.append(", ".join(f"`{b.name}`" for b in TOPIC_CONFIG_SYNONYMS.get(key.name, [])))
            elif scope == "broker":
                cells.append(f"`{key.topic_key}`" if key.topic_key else "")
            doc = key.doc if key.used or key.doc == IGNORED_DOC else f"{key.doc} {IGNORED_DOC}"
            cells.append(doc)
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    lines.append("")
    return "\n".join(lines)
