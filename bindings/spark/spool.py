"""What a write task has encoded for one partition, held until the task appends it."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from typing import Any

from seglog.storage.records import batch_headers


class Spool:
    """Encoded batches of one partition, in memory up to a limit, then in a temporary file."""

    LIMIT = 64 << 20

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.file: Any = None

    def add(self, data: bytes) -> None:
        if self.file is None and self.size + len(data) > self.LIMIT:
            self.file = tempfile.TemporaryFile(prefix="seglog-spool-")  # noqa: SIM115 - kept open until close()
            for c in self.chunks:
                self.file.write(c)
            self.chunks = []
        if self.file is not None:
            self.file.write(data)
        else:
            self.chunks.append(data)
        self.size += len(data)

    def pieces(self, max_bytes: int) -> Iterator[bytes]:
        """The batches again, grouped into appends of about ``max_bytes``."""
        if self.file is None:
            group: list[bytes] = []
            n = 0
            for c in self.chunks:
                group.append(c)
                n += len(c)
                if n >= max_bytes:
                    yield b"".join(group)
                    group, n = [], 0
            if group:
                yield b"".join(group)
            return
        self.file.seek(0)
        buf = b""
        while True:
            data = self.file.read(max_bytes)
            if not data:
                break
            buf += data
            heads = batch_headers(buf, allow_truncated=True)
            if heads:
                cut = heads[-1].position + heads[-1].size
                yield buf[:cut]
                buf = buf[cut:]
        if buf:
            yield buf

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
