"""Spark schemas: the columns a read produces as a ``StructType``, the columns a user's
``.schema(...)`` asks for, and the DataFrame a write accepts."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from seglog.bindings.arrow import COLUMNS, check_columns
from seglog.errors import ConfigError


def _spark_type(name: str) -> DataType:
    if name in ("key", "value"):
        return BinaryType()
    if name == "topic":
        return StringType()
    if name in ("partition", "timestampType", "leaderEpoch"):
        return IntegerType()
    if name == "offset":
        return LongType()
    if name == "timestamp":
        return TimestampType()
    if name == "headers":
        return ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
    raise ValueError(name)


def spark_schema(columns: Sequence[str]) -> StructType:
    """The Spark schema of ``columns`` (all nullable, as Spark's Kafka source declares them)."""
    return StructType([StructField(c, _spark_type(c), True) for c in columns])


def columns_of(schema: StructType) -> tuple[str, ...]:
    """The columns a schema given with ``.schema(...)`` asks for, checked against their types."""
    cols = []
    for f in schema.fields:
        if f.name not in COLUMNS:
            raise ConfigError(
                f"seglog: the schema names column {f.name!r}; the source can produce {', '.join(COLUMNS)}", key="schema"
            )
        want = _spark_type(f.name)
        got = f.dataType
        if isinstance(want, ArrayType) and isinstance(got, ArrayType):
            same = (
                [(x.name, type(x.dataType)) for x in got.elementType.fields]
                == [("key", StringType), ("value", BinaryType)]
                if isinstance(got.elementType, StructType)
                else False
            )
        else:
            same = type(got) is type(want)
        if not same:
            raise ConfigError(
                f"seglog: column {f.name!r} must be {want.simpleString()}, the schema says {got.simpleString()}",
                key="schema",
            )
        cols.append(f.name)
    check_columns(cols)
    return tuple(cols)


def check_write_schema(schema: StructType, topic_option: str | None) -> None:
    """Refuse a DataFrame the writer cannot take: no ``value``, a column of the wrong type, or
    no topic (neither a ``topic`` column nor ``topic_option``)."""
    names = {f.name: f.dataType for f in schema.fields}
    if "value" not in names:
        raise ConfigError("seglog: the DataFrame to write needs a 'value' column (binary or string)", key="value")
    for col in ("key", "value"):
        if col in names and not isinstance(names[col], (BinaryType, StringType)):
            raise ConfigError(
                f"seglog: column {col!r} must be binary or string, not {names[col].simpleString()}", key=col
            )
    if "topic" in names and not isinstance(names["topic"], StringType):
        raise ConfigError(f"seglog: column 'topic' must be string, not {names['topic'].simpleString()}", key="topic")
    if "topic" not in names and not topic_option:
        raise ConfigError("seglog: no topic to write to: set option topic or give a 'topic' column", key="topic")
    if "partition" in names and not isinstance(names["partition"], (IntegerType, LongType)):
        raise ConfigError(
            f"seglog: column 'partition' must be int, not {names['partition'].simpleString()}", key="partition"
        )
    if "timestamp" in names and not isinstance(names["timestamp"], TimestampType):
        raise ConfigError(
            f"seglog: column 'timestamp' must be timestamp, not {names['timestamp'].simpleString()}", key="timestamp"
        )
    if "headers" in names:
        t = names["headers"]
        ok = (
            isinstance(t, ArrayType)
            and isinstance(t.elementType, StructType)
            and [f.name for f in t.elementType.fields] == ["key", "value"]
        )
        if not ok:
            raise ConfigError(
                f"seglog: column 'headers' must be array<struct<key: string, value: binary>>, not {t.simpleString()}",
                key="headers",
            )
