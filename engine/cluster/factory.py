"""One way to start a cluster for tests and demos, whichever way it runs its nodes.

>>> from seglog.cluster import start_cluster
>>> with start_cluster(nodes=3) as cluster:                        # doctest: +SKIP
...     cluster.create_topic("orders", partitions=1, replication_factor=3)
>>> with start_cluster(nodes=3, coordinator="zookeeper", processes=True) as cluster:  # doctest: +SKIP
...     print(cluster.info())                    # each node's PID, port, log directory

``processes=False`` (the default) gives a :class:`~seglog.cluster.local.LocalCluster`: every
node in this process, coordinated in memory (``coordinator="memory"``, the default there) or
through ZooKeeper. ``processes=True`` gives a :class:`~seglog.cluster.process.ProcessCluster`:
one ``seglog node`` process per node, always coordinated through ZooKeeper (the default there).
Every other keyword goes to the cluster's constructor, which documents it.
"""

from __future__ import annotations

import os
from typing import Any, Literal, overload

from seglog.cluster.base import ClusterBase
from seglog.cluster.local import LocalCluster
from seglog.cluster.process import ProcessCluster

__all__ = ["start_cluster"]


@overload
def start_cluster(
    nodes: int = ...,
    dir: str | os.PathLike[str] | None = ...,
    coordinator: str | None = ...,
    *,
    processes: Literal[False] = ...,
    **options: Any,
) -> LocalCluster: ...


@overload
def start_cluster(
    nodes: int = ...,
    dir: str | os.PathLike[str] | None = ...,
    coordinator: str | None = ...,
    *,
    processes: Literal[True],
    **options: Any,
) -> ProcessCluster: ...


@overload
def start_cluster(
    nodes: int = ...,
    dir: str | os.PathLike[str] | None = ...,
    coordinator: str | None = ...,
    *,
    processes: bool,
    **options: Any,
) -> ClusterBase: ...


def start_cluster(
    nodes: int = 3,
    dir: str | os.PathLike[str] | None = None,
    coordinator: str | None = None,
    *,
    processes: bool = False,
    **options: Any,
) -> ClusterBase:
    """Start ``nodes`` nodes in ``dir`` (a temporary directory, removed at ``close``, when None)
    and return the cluster once it has a controller that knows every node (see module docs).
    ``coordinator`` None is ``"memory"`` in process and ``"zookeeper"`` with ``processes``."""
    if processes:
        return ProcessCluster(nodes, dir, "zookeeper" if coordinator is None else coordinator, **options)
    return LocalCluster(nodes, dir, "memory" if coordinator is None else coordinator, **options)
