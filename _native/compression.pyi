from typing import Final

from typing_extensions import Buffer

NONE: Final[int]
GZIP: Final[int]
SNAPPY: Final[int]
LZ4: Final[int]
ZSTD: Final[int]
CODEC_NAMES: Final[dict[int, str]]
DEFAULT_LEVELS: Final[dict[int, int]]
LEVEL_RANGES: Final[dict[int, tuple[int, int]]]

def codec_from_name(name: str) -> int: ...
def codec_name(codec: int) -> str: ...
def compress(codec: int, data: Buffer, level: int | None = None, *, magic: int = 2) -> Buffer: ...
def decompress(codec: int, data: Buffer, *, magic: int = 2, max_size: int | None = None) -> Buffer: ...
def xxh32(data: Buffer, seed: int = 0) -> int: ...
