"""Leader election and replica placement rules, as pure functions (Kafka's
``PartitionLeaderElectionAlgorithms``, KIP-966's eligible leader replicas, and
``AdminUtils.assignReplicasToBrokers`` without racks).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Collection, Sequence

from seglog.errors import InvalidReplicationFactorError

NO_LEADER = -1


@dataclasses.dataclass(frozen=True, slots=True)
class Election:
    leader: int
    isr: tuple[int, ...]
    elr: tuple[int, ...]
    unclean: bool = False


def offline_election(
    assignment: Sequence[int],
    isr: Sequence[int],
    elr: Sequence[int],
    live: Collection[int],
    *,
    unclean_enabled: bool,
    allow_out_of_isr: bool = False,
) -> Election:
    """Choose a leader for a partition whose leader is gone.

    1. the first replica in assignment order that is alive and in the ISR;
    2. else the first live eligible leader replica (KIP-966): it holds every committed record;
       it becomes the ISR alone;
    3. else, only with ``unclean.leader.election.enable``, the first live replica (committed
       records may be lost);
    4. else no leader: the ISR is kept as it is (never emptied), the partition is offline.

    ``allow_out_of_isr`` reintroduces the unclean choice without the setting (a mutation the
    simulation must catch).
    """
    for r in assignment:
        if r in live and r in isr:
            return Election(r, tuple(isr), tuple(elr))
    for r in assignment:
        if r in live and r in elr:
            return Election(r, (r,), tuple(x for x in elr if x != r))
    if unclean_enabled or allow_out_of_isr:
        for r in assignment:
            if r in live:
                return Election(r, (r,), (), unclean=True)
    return Election(NO_LEADER, tuple(isr), tuple(elr))


def preferred_election(assignment: Sequence[int], isr: Sequence[int], live: Collection[int]) -> int:
    """The preferred replica (the first assigned) if it is alive and in the ISR, else -1."""
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0]
    return NO_LEADER


def shrink_with_elr(
    isr: Sequence[int], elr: Sequence[int], removed: Collection[int], min_isr: int, *, keep_last: bool = True
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The ISR without ``removed``, and the ELR after it (KIP-966): members removed while the
    resulting ISR is below ``min.insync.replicas`` become eligible leader replicas (the high
    watermark cannot have advanced without them); once the ISR is back at ``min_isr`` the ELR
    is cleared. With ``keep_last`` the ISR is never emptied (its last member stays)."""
    new_isr = tuple(r for r in isr if r not in removed)
    if not new_isr and keep_last:
        last = next((r for r in isr if r in removed), None)
        new_isr = (last,) if last is not None else ()
    gone = [r for r in isr if r not in new_isr]
    if len(new_isr) >= min_isr:
        new_elr: tuple[int, ...] = ()
    else:
        new_elr = tuple(dict.fromkeys([r for r in elr if r not in new_isr] + gone))
    return new_isr, new_elr


def expand_with_elr(
    isr: Sequence[int], elr: Sequence[int], added: Collection[int], min_isr: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    new_isr = tuple(isr) + tuple(r for r in added if r not in isr)
    new_elr = () if len(new_isr) >= min_isr else tuple(r for r in elr if r not in new_isr)
    return new_isr, new_elr


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_replicas(
    n_partitions: int,
    replication_factor: int,
    brokers: Sequence[int],
    *,
    start_index: int = -1,
    start_partition: int = 0,
    rng: random.Random | None = None,
) -> list[tuple[int, ...]]:
    """Kafka's rack-unaware placement: the first replica of partition p goes to broker
    ``(p + start) % n`` (``start`` random unless given), the others follow at a shift that grows
    by one every ``n`` partitions, so leaders and followers spread over the brokers.

    >>> [list(r) for r in assign_replicas(5, 3, [0, 1, 2, 3, 4], start_index=0)]
    [[0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 0], [4, 0, 1]]
    """
    ids = sorted(brokers)
    n = len(ids)
    if replication_factor <= 0:
        raise InvalidReplicationFactorError(f"replication factor must be at least 1, got {replication_factor}")
    if replication_factor > n:
        raise InvalidReplicationFactorError(
            f"replication factor {replication_factor} is larger than the {n} available nodes"
        )
    if n_partitions <= 0:
        raise ValueError(f"a topic needs at least one partition, got {n_partitions}")
    r = rng or random.Random()
    start = start_index if start_index >= 0 else r.randrange(n)
    shift = start_index if start_index >= 0 else r.randrange(n)
    out = []
    p = max(0, start_partition)
    for _ in range(n_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [ids[first]]
        for j in range(replication_factor - 1):
            replicas.append(ids[_replica_index(first, shift, j, n)])
        out.append(tuple(replicas))
        p += 1
    return out
