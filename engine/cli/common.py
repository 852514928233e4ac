"""What the ``seglog`` commands share: the one-line error, notes on stderr, the log-dir check,
progress output and Kafka's codec names."""

from __future__ import annotations

import os
import sys
import time
from typing import IO

from seglog.storage.records import CODEC_NAMES

__all__ = ["CliError", "RecordProgress", "check_log_dir", "codec_names", "note"]


class CliError(Exception):
    """A user-facing problem: printed as one line."""


def note(command: str, text: str) -> None:
    """One informational line on stderr (stdout stays the records or the dump)."""
    sys.stderr.write(f"seglog {command}: {text}\n")
    sys.stderr.flush()


def check_log_dir(path: str, *, create: bool = False, create_option: str | None = None) -> None:
    """Check that ``path`` can be a log directory before a store is opened on it: an existing
    directory, or (``create``) one that can be made. The error names the path once and says
    what it is instead; ``create_option`` is the option that would create it, if the command
    has one."""
    if os.path.isdir(path):
        return
    if os.path.exists(path):
        raise CliError(f"{path}: is a file, not a log directory")
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise CliError(f"{path}: cannot be a log directory: {parent} is a file")
    if not create:
        hint = f" (use {create_option} to create it)" if create_option else ""
        raise CliError(f"{path}: the log directory does not exist{hint}")


class RecordProgress:
    """A progress bar on a terminal; a line every 10 % otherwise."""

    def __init__(self, label: str, total: int, stream: IO[str], unit: str = "records") -> None:
        self.label = label
        self.total = max(total, 1)
        self.stream = stream
        self.unit = unit
        self.tty = stream.isatty()
        self.start = time.perf_counter()
        self.last_step = -1

    def update(self, done: int) -> None:
        frac = min(done / self.total, 1.0)
        rate = done / max(time.perf_counter() - self.start, 1e-9)
        if self.tty:
            width = 30
            bar = "#" * int(frac * width) + "." * (width - int(frac * width))
            self.stream.write(
                f"\r  {self.label} [{bar}] {frac * 100:5.1f}% {done:,}/{self.total:,} "
                f"{self.unit} ({rate / 1e6:.2f} M/s)"
            )
            self.stream.flush()
            return
        step = int(frac * 10)
        if step != self.last_step:
            self.last_step = step
            self.stream.write(f"  {self.label}: {frac * 100:3.0f}% ({done:,} of {self.total:,} {self.unit})\n")
            self.stream.flush()

    def finish(self, done: int) -> float:
        self.update(done)
        elapsed = time.perf_counter() - self.start
        if self.tty:
            self.stream.write("\n")
        return elapsed


def codec_names() -> dict[int, str]:
    """Codec id -> Kafka's name (none, gzip, snappy, lz4, zstd): the one list every command
    uses, from the records module's table (which also knows the topic-level alias
    "uncompressed" for none)."""
    by_id: dict[int, str] = {}
    for name, codec in CODEC_NAMES.items():
        by_id.setdefault(codec, name)
    return dict(sorted(by_id.items()))
