"""What the config classes share (Kafka's ``AbstractConfig``).

:class:`AbstractConfig` builds a config from dotted Kafka keys, a ``.properties`` file or
keywords, makes copies with overrides and writes it back as a dict or ``.properties`` text;
:func:`bind_table` attaches a scope's rows of the table to a frozen dataclass and checks that its
fields match them. An unknown key is refused with the nearest valid one
(:func:`unknown_key_error`).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, cast

from seglog.config.definition import ConfigKey, Scope
from seglog.config.keys import KEYS_BY_SCOPE, TOPIC_CONFIG_SYNONYMS
from seglog.config.properties import (
    format_properties,
    parse_properties_entries,
    read_properties_text,
)
from seglog.errors import ConfigError

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["AbstractConfig", "bind_table", "unknown_key_error"]


def unknown_key_error(scope: Scope, cls_name: str, key: Any) -> ConfigError:
    """The error for a key that ``scope`` does not have, naming the nearest valid key: the
    dotted form of an attribute name, the topic-level form of a broker key (or the other way
    round), or the closest spelling."""
    if not isinstance(key, str):
        return ConfigError(f"{cls_name}: configuration keys are strings, got {key!r}", key=None, value=key)
    valid = list(KEYS_BY_SCOPE[scope])
    normalized = {k.lower(): k for k in valid}
    exact = normalized.get(key.strip().lower().replace("_", "."))
    notes = []
    if exact is not None:
        suggestion: str | None = exact
        notes.append(f"did you mean {exact!r}? (keys are dotted and lower-case)")
    else:
        elsewhere = [s for s, keys in KEYS_BY_SCOPE.items() if s != scope and key in keys]
        synonym_target = None
        if scope == "topic" and "broker" in elsewhere:
            synonym_target = KEYS_BY_SCOPE["broker"][key].topic_key
        close = difflib.get_close_matches(key, valid, n=1, cutoff=0.0)
        suggestion = synonym_target or (close[0] if close else None)
        if elsewhere:
            names = list(elsewhere)
            where = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
            notes.append(f"{key!r} is a {where} key, not a {scope} key")
        if synonym_target is not None:
            notes.append(f"its topic-level form is {synonym_target!r}")
        elif scope == "broker" and key in TOPIC_CONFIG_SYNONYMS:
            brokers = ", ".join(repr(k.name) for k in TOPIC_CONFIG_SYNONYMS[key])
            suggestion = TOPIC_CONFIG_SYNONYMS[key][0].name
            notes.append(f"the broker-wide default of topic key {key!r} is set with {brokers}")
        elif suggestion is not None:
            ratio = difflib.SequenceMatcher(None, key, suggestion).ratio()
            if ratio >= 0.6:
                notes.append(f"did you mean {suggestion!r}?")
            else:
                notes.append(f"the closest valid key is {suggestion!r}; docs/configuration.md lists them all")
    message = f"Unknown {scope} configuration key {key!r} for {cls_name}"
    if notes:
        message += ": " + "; ".join(notes)
    return ConfigError(message, key=key, value=None, suggestion=suggestion)


class AbstractConfig:
    """Shared behaviour of the config dataclasses (built from :data:`CONFIG_KEYS`)."""

    __slots__ = ()

    SCOPE: ClassVar[Scope]
    _keys: ClassVar[dict[str, ConfigKey]]
    _attrs: ClassVar[dict[str, ConfigKey]]

    def __post_init__(self) -> None:
        for attr, key in self._attrs.items():
            value = getattr(self, attr)
            converted = key.convert(value)
            if converted is not value:
                object.__setattr__(self, attr, converted)
        self._check()

    def _check(self) -> None:
        """Rules that involve more than one key."""

    def _broken_rule(self, key: str, message: str) -> ConfigError:
        """The error for a rule of :meth:`_check` that this config breaks: ``message``, naming
        ``key`` and this config's value of it."""
        return ConfigError(message, key=key, value=getattr(self, self._keys[key].attr))

    # -- construction ------------------------------------------------------------------

    @classmethod
    def definitions(cls) -> tuple[ConfigKey, ...]:
        """The table entries behind this class, in order."""
        return tuple(cls._keys.values())

    @classmethod
    def _kwargs(cls, mapping: Mapping[str, Any]) -> dict[str, Any]:
        kwargs = {}
        for name, value in mapping.items():
            key = cls._keys.get(name)
            if key is None:
                raise unknown_key_error(cls.SCOPE, cls.__name__, name)
            kwargs[key.attr] = value
        return kwargs

    @classmethod
    def from_dict(cls, mapping: Mapping[str, Any]) -> Self:
        """Build from dotted Kafka keys; values typed or as strings; absent keys default."""
        return cls(**cls._kwargs(mapping))

    @classmethod
    def coerce(cls, config: Self | Mapping[str, Any] | None) -> Self:
        """``config`` itself when it is already this class; else built from it as a mapping of
        dotted Kafka keys (:meth:`from_dict`), or all defaults when it is None."""
        if isinstance(config, cls):
            return config
        # Not narrowed by mypy (isinstance against cls, not Self): what is left is the mapping.
        return cls.from_dict(cast("Mapping[str, Any]", config or {}))

    @classmethod
    def from_properties(
        cls, text: str, *, source: str | None = None, exclude: Callable[[str], bool] | None = None
    ) -> Self:
        """Build from the text of a Java ``.properties`` file (see :func:`parse_properties`).

        ``source`` (a file name) is named in errors along with the line. Keys for which
        ``exclude`` is true belong to someone else (a listener's security keys) and are left out.
        """
        entries = parse_properties_entries(text, source)
        values = {key: value for key, (value, _line) in entries.items() if exclude is None or not exclude(key)}
        try:
            return cls.from_dict(values)
        except ConfigError as exc:
            if exc.key is None or exc.key not in entries:
                raise
            line = entries[exc.key][1]
            where = f"line {line}" if source is None else f"in {source}, line {line}"
            raise ConfigError(
                f"{exc.message} ({where})",
                key=exc.key,
                value=exc.value,
                suggestion=exc.suggestion,
                path=source,
            ) from exc

    @classmethod
    def from_properties_file(
        cls, path: str | os.PathLike[str], *, exclude: Callable[[str], bool] | None = None
    ) -> Self:
        """Build from a Java ``.properties`` file (``exclude``: as :meth:`from_properties`).

        The file is read as UTF-8, or as ISO-8859-1 (Java's encoding for properties
        streams) when it is not valid UTF-8.
        """
        return cls.from_properties(read_properties_text(path), source=os.fspath(path), exclude=exclude)

    def with_overrides(self, mapping: Mapping[str, Any] | None = None, /, **attrs: Any) -> Self:
        """A copy with some values replaced: dotted keys in ``mapping``, attribute names
        as keywords (``cfg.with_overrides({"segment.bytes": 1 << 20}, retention_ms=-1)``)."""
        kwargs = {attr: getattr(self, attr) for attr in self._attrs}
        if mapping is not None:
            kwargs.update(self._kwargs(mapping))
        for attr, value in attrs.items():
            if attr not in self._attrs:
                close = difflib.get_close_matches(attr, list(self._attrs), n=1, cutoff=0.0)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ConfigError(
                    f"{type(self).__name__} has no setting {attr!r}{hint}",
                    key=attr.replace("_", "."),
                    suggestion=self._attrs[close[0]].name if close else None,
                )
            kwargs[attr] = value
        return type(self)(**kwargs)

    # -- output -----------------------------------------------------------------------

    def to_dict(self, *, changed_only: bool = False) -> dict[str, Any]:
        """The values by dotted key (typed); ``changed_only`` drops those at their default."""
        out = {}
        for attr, key in self._attrs.items():
            value = getattr(self, attr)
            if changed_only and value == key.default:
                continue
            out[key.name] = value
        return out

    def to_properties(self, *, changed_only: bool = False) -> str:
        """The values as ``.properties`` text that :meth:`from_properties` reads back.

        Unset (``None``) values are left out.
        """
        return format_properties({k: v for k, v in self.to_dict(changed_only=changed_only).items() if v is not None})


def bind_table(cls: type[AbstractConfig], scope: Scope) -> None:
    """Attach the table to a config dataclass and check that its fields match it."""
    keys = KEYS_BY_SCOPE[scope]
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    attrs = {k.attr: k for k in keys.values()}
    if list(fields) != list(attrs):  # pragma: no cover - a table/class mismatch
        raise RuntimeError(
            f"{cls.__name__} fields must be the {scope} keys in table order: {list(fields)} != {list(attrs)}"
        )
    for attr, key in attrs.items():
        if fields[attr].default != key.default:  # pragma: no cover
            raise RuntimeError(f"{cls.__name__}.{attr} default differs from the table")
    cls.SCOPE = scope
    cls._keys = dict(keys)
    cls._attrs = {k.attr: k for k in keys.values()}
