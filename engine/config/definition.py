"""A configuration key's definition (Kafka's ``ConfigDef``): :class:`ConfigKey` and its validators.

A key has a dotted Kafka name, a Java type, a default, an optional validator, a scope (``topic``,
``broker``, ``producer`` or ``consumer``) and a description. :meth:`ConfigKey.convert` turns a
typed value, or a string as a ``.properties`` file holds it, into the key's Python type and
checks it, raising :class:`~seglog.errors.ConfigError` that names the key, the value and the
valid values.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from seglog.errors import ConfigError

__all__ = [
    "INT_MAX",
    "INT_MIN",
    "LONG_MAX",
    "LONG_MIN",
    "SHORT_MAX",
    "SHORT_MIN",
    "ConfigKey",
    "ConfigType",
    "Importance",
    "Range",
    "RangeOr",
    "Scope",
    "ValidList",
    "ValidString",
    "Validator",
]

ConfigType = Literal["boolean", "short", "int", "long", "double", "string", "list"]
Scope = Literal["topic", "broker", "producer", "consumer"]
Importance = Literal["high", "medium", "low"]

SHORT_MIN, SHORT_MAX = -(2**15), 2**15 - 1
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1

_INTEGER_BOUNDS = {
    "short": (SHORT_MIN, SHORT_MAX),
    "int": (INT_MIN, INT_MAX),
    "long": (LONG_MIN, LONG_MAX),
}
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_LIST_SPLIT = re.compile(r"\s*,\s*")


# --------------------------------------------------------------------------------------
# Validators (Kafka's ConfigDef.Range, ValidString, ValidList)
# --------------------------------------------------------------------------------------


class Validator:
    """Checks a parsed, non-null value."""

    __slots__ = ()

    def problem(self, value: Any) -> str | None:
        """What is wrong with ``value``, or ``None`` when it is valid."""
        raise NotImplementedError

    def describe(self) -> str:
        """The valid values, written the way Kafka's documentation writes them."""
        raise NotImplementedError


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 2**63 else repr(x)


@dataclass(frozen=True, slots=True)
class Range(Validator):
    """``low <= value <= high``; either bound may be open (``None``)."""

    low: float | None = None
    high: float | None = None

    @classmethod
    def at_least(cls, low: float) -> Range:
        return cls(low, None)

    @classmethod
    def between(cls, low: float, high: float) -> Range:
        return cls(low, high)

    def problem(self, value: Any) -> str | None:
        if self.low is not None and value < self.low:
            if self.high is None:
                return f"must be at least {_num(self.low)}"
            return f"must be between {_num(self.low)} and {_num(self.high)}"
        if self.high is not None and value > self.high:
            if self.low is None:
                return f"must be at most {_num(self.high)}"
            return f"must be between {_num(self.low)} and {_num(self.high)}"
        return None

    def describe(self) -> str:
        low = "" if self.low is None else _num(self.low) + ","
        high = "" if self.high is None else "," + _num(self.high)
        return f"[{low}...{high}]"


@dataclass(frozen=True, slots=True)
class RangeOr(Validator):
    """A range, or one extra value outside it (Kafka's gzip level: ``[1,...,9] or -1``)."""

    range: Range
    also: int

    def problem(self, value: Any) -> str | None:
        if value == self.also or self.range.problem(value) is None:
            return None
        return f"must be in {self.range.describe()} or be {self.also}"

    def describe(self) -> str:
        return f"{self.range.describe()} or {self.also}"


@dataclass(frozen=True, slots=True)
class ValidString(Validator):
    """One of a fixed set of strings (case-sensitive, as in Kafka)."""

    values: tuple[str, ...]

    def problem(self, value: Any) -> str | None:
        if value in self.values:
            return None
        return f"must be one of {self.describe()}"

    def describe(self) -> str:
        return "[" + ", ".join(self.values) + "]"


@dataclass(frozen=True, slots=True)
class ValidList(Validator):
    """Every item of a list is one of a fixed set of strings."""

    values: tuple[str, ...]

    def problem(self, value: Any) -> str | None:
        bad = [item for item in value if item not in self.values]
        if not bad:
            return None
        return f"{bad[0]!r} is not allowed; each item must be one of {self.describe()}"

    def describe(self) -> str:
        return "[" + ", ".join(self.values) + "]"


# --------------------------------------------------------------------------------------
# The key
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One configuration key: name, type, default, validator, scope and description."""

    name: str
    type: ConfigType
    default: Any
    doc: str
    scope: Scope
    validator: Validator | None = None
    importance: Importance = "medium"
    #: For a broker key: the topic key it supplies the broker-wide default of.
    topic_key: str | None = None
    #: For a broker key with a ``topic_key``: converts its value to the topic key's unit.
    to_topic: Callable[[Any], Any] | None = None
    #: False for keys accepted only so that Kafka's own files load; seglog ignores them.
    used: bool = True
    #: How the docs show the default, where the stored default alone would mislead.
    default_doc: str | None = None

    @property
    def attr(self) -> str:
        """The dataclass attribute name: the key with dots replaced by underscores."""
        return self.name.replace(".", "_")

    @property
    def nullable(self) -> bool:
        """Whether the key may be unset (``None``); true exactly when its default is."""
        return self.default is None

    def valid_values(self) -> str:
        """The valid values as the docs show them."""
        if self.validator is not None:
            return self.validator.describe()
        if self.type == "boolean":
            return "true, false"
        return ""

    # -- parsing -------------------------------------------------------------------------

    def _fail(self, value: Any, problem: str) -> ConfigError:
        allowed = self.valid_values()
        hint = f" (valid values: {allowed})" if allowed and allowed not in problem else ""
        return ConfigError(
            f"Invalid value {value!r} for configuration {self.name}: {problem}{hint}",
            key=self.name,
            value=value,
        )

    def parse(self, value: Any) -> Any:
        """``value`` (typed, or a string as in a properties file) as this key's Python type.

        Raises :class:`ConfigError` for a value of the wrong type; does not apply the
        validator (see :meth:`convert`).
        """
        if value is None:
            if self.nullable:
                return None
            raise self._fail(value, "a value is required (this key cannot be unset)")
        t = self.type
        if t == "boolean":
            if isinstance(value, bool):
                return value
            if isinstance(value, str):
                word = value.strip().lower()
                if word in ("true", "false"):
                    return word == "true"
            raise self._fail(value, "expected a boolean (true or false)")
        if t in _INTEGER_BOUNDS:
            low, high = _INTEGER_BOUNDS[t]
            if isinstance(value, bool):
                raise self._fail(value, f"expected a whole number (Java {t}), not a boolean")
            if isinstance(value, str):
                text = value.strip()
                if not _JAVA_INTEGER.fullmatch(text):
                    raise self._fail(value, f"expected a whole number (Java {t})")
                number = int(text)
            elif isinstance(value, int):
                number = int(value)
            else:
                raise self._fail(value, f"expected a whole number (Java {t})")
            if not low <= number <= high:
                raise self._fail(value, f"out of range for a Java {t}, which holds [{low}, {high}]")
            return number
        if t == "double":
            if isinstance(value, bool):
                raise self._fail(value, "expected a number, not a boolean")
            if isinstance(value, (int, float)):
                number_f = float(value)
            elif isinstance(value, str):
                try:
                    if "_" in value:  # Python's float() takes "1_0"; Java's parser does not
                        raise ValueError(value)
                    number_f = float(value.strip())
                except ValueError:
                    raise self._fail(value, "expected a number") from None
            else:
                raise self._fail(value, "expected a number")
            if math.isnan(number_f):
                raise self._fail(value, "expected a number, not NaN")
            return number_f
        if t == "string":
            if isinstance(value, bool):
                raise self._fail(value, "expected a string, not a boolean")
            if isinstance(value, int):
                return str(value)
            if isinstance(value, str):
                return value.strip()
            raise self._fail(value, "expected a string")
        if t == "list":
            items: Sequence[Any]
            if isinstance(value, str):
                text = value.strip()
                items = [] if not text else _LIST_SPLIT.split(text)
            elif isinstance(value, (list, tuple)):
                items = value
            else:
                raise self._fail(value, "expected a comma-separated string or a list of strings")
            out = []
            for item in items:
                if not isinstance(item, str):
                    raise self._fail(value, f"list items must be strings, got {item!r}")
                item = item.strip()
                if not item:
                    raise self._fail(value, "the list has an empty item")
                out.append(item)
            return tuple(out)
        raise AssertionError(f"unknown config type {t!r}")  # pragma: no cover

    def problem(self, value: Any) -> str | None:
        """What the validator finds wrong with a parsed value (``None``: valid)."""
        if value is None or self.validator is None:
            return None
        return self.validator.problem(value)

    def convert(self, value: Any) -> Any:
        """Parse and validate; raise :class:`ConfigError` naming key, value and range."""
        parsed = self.parse(value)
        problem = self.problem(parsed)
        if problem is not None:
            raise self._fail(parsed if not isinstance(value, str) else value, problem)
        return parsed
