from typing_extensions import Buffer

CRC32C_NOGIL_MIN: int
CRC32_NOGIL_MIN: int

def implementation() -> str:
    """``"vpclmulqdq"``, ``"sse4.2"``, ``"armv8"`` or ``"table"``."""

def crc32c(data: Buffer, crc: int = 0) -> int:
    """CRC-32C (Castagnoli) of ``data``, continuing from ``crc``."""

def crc32(data: Buffer, crc: int = 0) -> int:
    """CRC-32 (IEEE, as ``zlib.crc32``) of ``data``, continuing from ``crc``."""

def _crc32c_portable(data: Buffer, crc: int = 0) -> int: ...
def _crc32c_gil(data: Buffer, crc: int = 0, release: bool = False) -> int: ...
