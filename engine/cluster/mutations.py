"""Deliberate rule violations, switched on only by tests.

Each name reintroduces one known replication bug (``docs/replication.md`` §9.5, "Mutants"). The simulation's
checker must catch every one of them within a bounded number of seeds — proof that its
invariants can fail. Nodes and the controller take a ``mutants`` set; production code passes
the empty set.
"""

from __future__ import annotations

TRUNCATE_TO_HW_ON_RESTART = "truncate_to_hw_on_restart"  # KIP-101 scenario 1
NO_EPOCH_ITERATION = "no_epoch_iteration"  # KIP-279: one-shot truncation
ISR_JOIN_AT_HW_ONLY = "isr_join_at_hw_only"  # KAFKA-7128: no epoch-start check
ALLOW_OUT_OF_ISR_ELECTION = "allow_out_of_isr_election"  # unclean election without the setting
ACK_ALL_ON_LEADER_APPEND = "ack_all_on_leader_append"  # acks=all answered on the leader's append
FOLLOWER_HW_UNCAPPED = "follower_hw_uncapped"  # follower HW not capped at its LEO
CONSUMER_READS_TO_LEO = "consumer_reads_to_leo"  # consumers bounded by LEO, not HW
LEADER_LOCAL_ISR_SHRINK = "leader_local_isr_shrink"  # ISR shrink without the controller's CAS
DEDUPE_OFF = "dedupe_off"  # duplicates appended again
OOS_INSTEAD_OF_DEDUPE = "oos_instead_of_dedupe"  # duplicates refused as out of order (Redpanda #3039)
EPOCH_CACHE_NO_FSYNC = "epoch_cache_no_fsync"  # epoch cache entries lost with the page cache
EPOCH_START_OFF_BY_ONE = "epoch_start_off_by_one"  # inclusive/exclusive end offset mix
FOLLOWER_IGNORES_LOG_START = "follower_ignores_log_start"  # followers keep records the leader deleted

ALL = frozenset(
    {
        TRUNCATE_TO_HW_ON_RESTART,
        NO_EPOCH_ITERATION,
        ISR_JOIN_AT_HW_ONLY,
        ALLOW_OUT_OF_ISR_ELECTION,
        ACK_ALL_ON_LEADER_APPEND,
        FOLLOWER_HW_UNCAPPED,
        CONSUMER_READS_TO_LEO,
        LEADER_LOCAL_ISR_SHRINK,
        DEDUPE_OFF,
        OOS_INSTEAD_OF_DEDUPE,
        EPOCH_CACHE_NO_FSYNC,
        EPOCH_START_OFF_BY_ONE,
        FOLLOWER_IGNORES_LOG_START,
    }
)


def check(mutants: frozenset[str] | set[str] | tuple[str, ...]) -> frozenset[str]:
    unknown = set(mutants) - ALL
    if unknown:
        raise ValueError(f"unknown mutation(s) {sorted(unknown)}; known: {sorted(ALL)}")
    return frozenset(mutants)
