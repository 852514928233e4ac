"""Kafka record batches: encode from columns, decode to records or to columns.

The work is done in :mod:`seglog._native.records`; this module is the public surface.

>>> from seglog.storage.records import encode_batch, decode_records
>>> batch = encode_batch([b"v1", None], keys=[b"k1", b"k2"], timestamps=1700000000000)
>>> [(r.offset, r.key, r.value) for r in decode_records(batch)]
[(0, b'k1', b'v1'), (1, b'k2', None)]
"""

from __future__ import annotations

from seglog._native.records import (
    CODEC_NAMES,
    CONTROL_TYPES,
    CREATE_TIME,
    LOG_APPEND_TIME,
    NO_TIMESTAMP_TYPE,
    BatchHeader,
    Columns,
    Record,
    batch_headers,
    codec_id,
    decode_columns,
    decode_records,
    encode_batch,
    encode_control_batch,
    first_at_or_after,
    iter_records,
    validate_batches,
)

__all__ = [
    "CODEC_NAMES",
    "CONTROL_TYPES",
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "NO_TIMESTAMP_TYPE",
    "BatchHeader",
    "Columns",
    "Record",
    "batch_headers",
    "codec_id",
    "decode_columns",
    "decode_records",
    "encode_batch",
    "encode_control_batch",
    "first_at_or_after",
    "iter_records",
    "validate_batches",
]
