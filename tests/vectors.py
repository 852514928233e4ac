"""Shared loaders for the Kafka-generated vectors (tests/fixtures/kafka-clients-generated)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from tests.conftest import FIXTURES


@cache
def vectors_json() -> dict:
    return json.loads((FIXTURES / "kafka-clients-generated" / "vectors.json").read_text())


def vector(name: str) -> bytes:
    return bytes.fromhex(vectors_json()["vectors_hex"][name])


def vector_names() -> list[str]:
    return list(vectors_json()["vectors_hex"])


def common_columns() -> tuple[list, list, list, list]:
    """values, keys, timestamps, headers of the three records every vector holds."""
    recs = vectors_json()["common_records_utf8"]
    values = [None if r["value"] is None else r["value"].encode() for r in recs]
    keys = [None if r["key"] is None else r["key"].encode() for r in recs]
    ts = [r["timestamp"] for r in recs]
    headers = [[(k, None if v is None else v.encode()) for k, v in r["headers"]] for r in recs]
    return values, keys, ts, headers


def segment_file() -> Path:
    return FIXTURES / "kafka-clients-generated" / "00000000000000000000.log"
