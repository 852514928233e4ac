"""Java ``.properties`` text, read as ``java.util.Properties.load`` reads it and written as
``Properties.store`` escapes it."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from seglog.errors import ConfigError

__all__ = [
    "format_properties",
    "format_value",
    "parse_properties",
    "parse_properties_entries",
    "read_properties_text",
]


_PROP_WHITESPACE = " \t\f"
_PROP_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str, source: str | None, line: int) -> str:
    out = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i >= n:  # a lone trailing backslash (only at end of input) is dropped
            break
        c = text[i]
        i += 1
        if c == "u":
            digits = text[i : i + 4]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                where = f"line {line}" if source is None else f"in {source}, line {line}"
                escape = "\\u" + digits
                raise ConfigError(f"malformed \\uXXXX escape {escape!r} ({where})", path=source)
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_PROP_ESCAPES.get(c, c))
    # Surrogate pairs written as two \u escapes become one character.
    joined = "".join(out)
    if any("\ud800" <= ch <= "\udfff" for ch in joined):
        joined = joined.encode("utf-16", "surrogatepass").decode("utf-16")
    return joined


def _logical_lines(text: str) -> Iterable[tuple[str, int]]:
    """Java Properties' logical lines: comments and blank lines dropped, backslash-newline
    continuations joined (the continuation's leading whitespace removed)."""
    natural = re.split(r"\r\n|\r|\n", text)
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(natural, start=1):
        line = raw.lstrip(_PROP_WHITESPACE)
        if not pending:
            if not line or line[0] in "#!":
                continue
            start = number
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending.append(line[:-1])
            continue
        pending.append(line)
        yield "".join(pending), start
        pending = []
    if pending:
        yield "".join(pending), start


def parse_properties_entries(text: str, source: str | None = None) -> dict[str, tuple[str, int]]:
    """:func:`parse_properties` with the line each entry starts on: key -> (value, line).

    ``source`` (a file name) is named, with the line, in the error for a malformed ``\\uXXXX``
    escape."""
    entries: dict[str, tuple[str, int]] = {}
    for line, number in _logical_lines(text):
        key_end = len(line)
        value_start = len(line)
        has_sep = False
        backslash = False
        for i, c in enumerate(line):
            if not backslash and c in "=:":
                key_end, value_start, has_sep = i, i + 1, True
                break
            if not backslash and c in _PROP_WHITESPACE:
                key_end, value_start = i, i + 1
                break
            backslash = (not backslash) if c == "\\" else False
        while value_start < len(line):
            c = line[value_start]
            if c not in _PROP_WHITESPACE:
                if not has_sep and c in "=:":
                    has_sep = True
                else:
                    break
            value_start += 1
        key = _unescape(line[:key_end], source, number)
        value = _unescape(line[value_start:], source, number)
        entries[key] = (value, number)  # a repeated key: the last one wins, as in Java
    return entries


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text the way ``java.util.Properties.load`` does.

    ``#`` and ``!`` start comment lines; the key ends at the first unescaped ``=``, ``:`` or
    whitespace; a line ending in an odd number of backslashes continues on the next;
    ``\\t \\n \\r \\f \\uXXXX`` are escapes and a backslash before any other character
    stands for that character. A repeated key keeps its last value.
    """
    return {key: value for key, (value, _line) in parse_properties_entries(text).items()}


def _escape(text: str, *, is_key: bool) -> str:
    out = []
    for i, c in enumerate(text):
        if c == " ":
            out.append("\\ " if is_key or i == 0 else " ")
        elif c in "\\=:#!":
            out.append("\\" + c)
        elif c in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[c])
        elif " " < c <= "~":
            out.append(c)
        else:
            for unit in range(0, len(c.encode("utf-16-be")), 2):
                code = int.from_bytes(c.encode("utf-16-be")[unit : unit + 2], "big")
                out.append(f"\\u{code:04X}")
    return "".join(out)


def format_value(value: Any) -> str:
    """A typed value as Kafka writes it in a ``.properties`` file and in DescribeConfigs:
    ``true``/``false``, a list comma-separated, a float as Python's repr, else ``str``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return ",".join(str(v) for v in value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def format_properties(values: Mapping[str, Any]) -> str:
    """``values`` as ``.properties`` text (escaped as ``Properties.store`` escapes)."""
    return "".join(
        f"{_escape(key, is_key=True)}={_escape(format_value(value), is_key=False)}\n" for key, value in values.items()
    )


def read_properties_text(path: str | os.PathLike[str]) -> str:
    """The text of a ``.properties`` file: UTF-8, or ISO-8859-1 (Java's encoding for properties
    streams) when it is not valid UTF-8."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("iso-8859-1")
