"""Spark over the log dirs of a running three-node cluster (node processes on ZooKeeper): once
a DeleteRecords request has completed (the low watermark passed its offset), no node's
directory yields a record below the offset."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.replication.clients import delete_records_with_a_paused_follower, paused_follower_cluster

pytestmark = pytest.mark.cluster


def test_no_node_dir_yields_a_record_below_the_deleted_offset(spark: Any, zookeeper_chroot: str, tmp_path: Any) -> None:
    with paused_follower_cluster(tmp_path, zookeeper_chroot) as cluster:
        delete_records_with_a_paused_follower(cluster, records=100, offset=60)
        for i in cluster.ids:
            # Read while the node runs; its high watermark checkpoint (what Spark reads up to)
            # is written every second.
            deadline = time.monotonic() + 15
            while True:
                rows = spark.read.format("seglog").load(cluster.node_dir(i)).where("topic = 't'").select("offset")
                offsets = sorted(r.offset for r in rows.collect())
                assert not offsets or offsets[0] >= 60, f"node {i} yields offsets from {offsets[0]}"
                if offsets == list(range(60, 100)):
                    break
                assert time.monotonic() < deadline, f"node {i} yields {offsets[:3]}..{offsets[-3:]}"
                time.sleep(0.5)
