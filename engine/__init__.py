"""seglog: an embedded, replicated commit log in Apache Kafka's on-disk format."""

from __future__ import annotations

try:
    from seglog._native import crc32c as _crc32c_mod  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only on a broken install
    raise ImportError(
        "seglog's native extensions are not built. Install the package with "
        "`pip install .` (or `pip install -e .` for development) from the source tree; "
        f"the import failed with: {exc}"
    ) from exc

from seglog import errors  # noqa: E402,F401  (installs the native error classes)
from seglog._native.crc32c import crc32c as crc32c
from seglog.storage.log import Log as Log
from seglog.storage.topic import TopicPartition as TopicPartition
from seglog.store import Store as Store

# The one place the version is written: pyproject.toml reads it from here (setuptools' attr:
# directive, without importing the package), so the installed metadata always agrees.
__version__ = "0.1.0"
