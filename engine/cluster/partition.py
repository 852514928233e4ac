"""One replica of one partition: the replication rules (Kafka's ``Partition`` and ``Replica``).

Rules implemented here (``docs/replication.md`` §2-§5, checklist in §10; offsets are Kafka's: LEO and HW are
exclusive):

Leader
    * It records ``(leader epoch, LEO)`` in the epoch cache (fsynced) before serving, and keeps
      that LEO as the epoch's start offset.
    * Per follower: the last fetch offset (the follower's LEO), ``lastFetchTimeMs``,
      ``lastFetchLeaderLogEndOffset`` and ``lastCaughtUpTimeMs`` with Kafka's two branches — a
      fetch at or past the live LEO is caught up now; a fetch at or past the LEO of the
      *previous* fetch was caught up at the previous fetch time.
    * HW = min LEO over the *maximal* ISR (the old ISR while a shrink is pending, the larger one
      while an expand is pending) and over caught-up, eligible non-members; it never moves
      back, and does not move at all while the committed ISR is below min.insync.replicas.
    * ISR changes are proposals to the controller (one in flight); only its answer (a
      compare-and-set on the partition epoch) commits them. Shrink: members not caught up
      within replica.lag.time.max.ms. Expand: a follower whose LEO reached both the HW and
      the epoch start offset, registered with the broker epoch it fetches with.
    * acks=all is refused before the append while the ISR is below min.insync.replicas; after
      the append the request waits until HW passes it (success if the maximal ISR is still at
      min.insync.replicas, else NOT_ENOUGH_REPLICAS_AFTER_APPEND), times out, or fails with
      NOT_LEADER_OR_FOLLOWER (after append) when leadership moves.
    * Idempotence: duplicates answer with the original offsets and still wait for HW.
    * Per follower also its log start offset, from each fetch request. The low watermark (LW)
      is the minimum log start over this replica and every follower whose node is alive (-1
      while such a follower has not fetched in this leader epoch).
    * DeleteRecords: only below (or at) HW; the leader's log start moves at once, and the
      request waits until LW reaches the offset, times out (REQUEST_TIMED_OUT, with the LW
      reached), or fails with NOT_LEADER_OR_FOLLOWER when leadership moves.

Follower
    * Fetches from its LEO with its latest epoch (KAFKA-10554); when the leader answers with a
      diverging epoch it truncates to the leader's end offset for the epoch they share,
      iterating while the leader names an epoch it does not have (KIP-101, KIP-279). It never
      truncates to its own HW.
    * HW = min(leader HW, own LEO), then log start = max(own log start, leader's log start)
      from every fetch response, in that order (Kafka's ``processPartitionData``): it never
      keeps records the leader deleted. A log that ends below the leader's log start restarts
      empty there (the OFFSET_OUT_OF_RANGE answer).
    * Producer state (the log's: ``Log.producer_state``) is updated from every replicated batch
      and rebuilt after truncation.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from seglog.cluster import mutations as mut
from seglog.cluster.messages import (
    ISOLATION_LOG_END,
    NONE,
    FetchPartition,
    FetchPartitionResponse,
)
from seglog.cluster.metadata import NO_LEADER, PartitionInfo, PartitionState, ReplicaConfig
from seglog.config import LogConfig
from seglog.errors import (
    FencedLeaderEpochError,
    InvalidRecordError,
    InvalidRequiredAcksError,
    KafkaError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerAfterAppendError,
    NotLeaderOrFollowerBeforeAppendError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RequestTimedOutError,
    UnknownLeaderEpochError,
    code_for_exception,
)
from seglog.storage.leader_epoch import UNDEFINED_EPOCH
from seglog.storage.records import batch_headers
from seglog.util.clock import Clock

if TYPE_CHECKING:
    from seglog.storage.log import Log, LogAppendInfo
    from seglog.storage.producer_state import ProducerStateManager

log = logging.getLogger("seglog.cluster.partition")


class Role(enum.Enum):
    LEADER = "leader"
    FOLLOWER = "follower"
    NONE = "none"


@dataclasses.dataclass(slots=True)
class RemoteReplica:
    """The leader's view of one follower (Kafka's ``Replica`` / ``ReplicaState``)."""

    replica_id: int
    log_end_offset: int = -1
    log_start_offset: int = -1
    last_fetch_leader_log_end_offset: int = -1
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0
    broker_epoch: int = -1

    def is_caught_up(self, leader_leo: int, now_ms: int, lag_ms: int) -> bool:
        return self.log_end_offset == leader_leo or now_ms - self.last_caught_up_time_ms <= lag_ms

    def update_fetch_state(
        self, fetch_offset: int, log_start: int, leader_leo: int, now_ms: int, broker_epoch: int
    ) -> None:
        if fetch_offset >= leader_leo:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start
        self.last_fetch_leader_log_end_offset = max(self.last_fetch_leader_log_end_offset, leader_leo)
        self.last_fetch_time_ms = now_ms
        self.broker_epoch = broker_epoch


@dataclasses.dataclass(frozen=True, slots=True)
class IsrState:
    """The committed ISR, or a change in flight (Kafka's ``PendingExpandIsr``/``PendingShrinkIsr``)."""

    isr: tuple[int, ...]
    pending: str | None = None  # None | "expand" | "shrink"
    proposed: tuple[int, ...] = ()

    @property
    def maximal(self) -> tuple[int, ...]:
        if self.pending == "expand":
            return self.isr + tuple(r for r in self.proposed if r not in self.isr)
        return self.isr


@dataclasses.dataclass(slots=True)
class DelayedDeleteRecords:
    """A DeleteRecords request waiting for the low watermark (Kafka's ``DelayedDeleteRecords``)."""

    offset: int
    respond: Callable[[int, KafkaError | None], None]
    timer: Any = None
    done: bool = False


@dataclasses.dataclass(slots=True)
class DelayedProduce:
    required_offset: int
    first_offset: int
    last_offset: int
    respond: Callable[[int, int, int, KafkaError | None, bool], None]
    duplicate: bool
    timer: Any = None
    done: bool = False


class PartitionHost(Protocol):
    """What a partition needs from the node that holds it."""

    node_id: int
    clock: Clock
    config: ReplicaConfig
    mutants: frozenset[str]
    stats: dict[str, int]

    def broker_epoch_of(self, node_id: int) -> int: ...

    def schedule(self, name: str, fn: Callable[[], object], delay_ms: int) -> Any: ...

    def cancel(self, task: Any) -> None: ...

    def submit_alter_partition(self, partition: Partition, new_isr: tuple[int, ...]) -> None: ...

    def on_log_appended(self, partition: Partition) -> None: ...

    def on_high_watermark(self, partition: Partition) -> None: ...


class Partition:
    def __init__(
        self,
        host: PartitionHost,
        topic: str,
        partition: int,
        log_: Log,
        log_config: LogConfig,
        replicas: tuple[int, ...],
    ) -> None:
        self.host = host
        self.topic = topic
        self.partition = partition
        self.log = log_
        self.log_config = log_config
        self.replicas = replicas
        self.role = Role.NONE
        self.leader = NO_LEADER
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.isr_state = IsrState(())
        self.elr: tuple[int, ...] = ()
        self.leader_epoch_start_offset = -1
        self.remotes: dict[int, RemoteReplica] = {}
        self.delayed: list[DelayedProduce] = []
        self.delayed_deletes: list[DelayedDeleteRecords] = []
        self._first_follow = True
        self._divergence_checks = True
        self.truncations: list[tuple[int, int, int]] = []  # (from LEO, to, HW then)

    @property
    def producer_state(self) -> ProducerStateManager:
        """The idempotent producers' state, the log's (loaded when it opened, with snapshots)."""
        return self.log.producer_state

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def min_isr(self) -> int:
        return min(self.log_config.min_insync_replicas, len(self.replicas))

    def _now(self) -> int:
        return self.host.clock.monotonic_ms()

    def __repr__(self) -> str:
        return (
            f"Partition({self.topic}-{self.partition}@{self.host.node_id} {self.role.value} "
            f"epoch={self.leader_epoch} isr={self.isr_state} hw={self.high_watermark} "
            f"leo={self.log_end_offset})"
        )

    # ---------------------------------------------------------------------------------------------
    # State from the controller
    # ---------------------------------------------------------------------------------------------

    def apply_state(self, info: PartitionInfo) -> bool:
        """Apply a LeaderAndIsr entry; False if it is stale (older leader or partition epoch)."""
        st = info.state
        if st.leader_epoch < self.leader_epoch:
            return False
        if st.leader_epoch == self.leader_epoch and st.partition_epoch <= self.partition_epoch:
            return False
        self.replicas = info.replicas
        me = self.host.node_id
        if st.leader == me:
            if self.role is not Role.LEADER or st.leader_epoch > self.leader_epoch:
                self._make_leader(st)
            else:
                self.partition_epoch = st.partition_epoch
                self.isr_state = IsrState(st.isr)
                self.elr = st.elr
                self.maybe_increment_high_watermark()
        elif st.leader_epoch > self.leader_epoch or self.role is Role.LEADER:
            self._make_follower(st)
        else:
            self.partition_epoch = st.partition_epoch
            self.isr_state = IsrState(st.isr)
            self.elr = st.elr
        return True

    def _make_leader(self, st: PartitionState) -> None:
        leo = self.log.log_end_offset
        # KIP-101/279: the new epoch and its start offset are durable before anything is served.
        self.log.epoch_cache.assign(st.leader_epoch, leo)
        self.role = Role.LEADER
        self.leader = self.host.node_id
        self.leader_epoch = st.leader_epoch
        self.partition_epoch = st.partition_epoch
        self.isr_state = IsrState(st.isr)
        self.elr = st.elr
        self.leader_epoch_start_offset = leo
        now = self._now()
        self.remotes = {
            r: RemoteReplica(r, last_caught_up_time_ms=now if r in st.isr else 0)
            for r in self.replicas
            if r != self.host.node_id
        }
        self._first_follow = False
        self.host.stats["became_leader"] = self.host.stats.get("became_leader", 0) + 1
        log.info(
            "%s-%d: node %d leads epoch %d from offset %d, ISR %s",
            self.topic,
            self.partition,
            self.host.node_id,
            st.leader_epoch,
            leo,
            st.isr,
        )
        self.maybe_increment_high_watermark()

    def _make_follower(self, st: PartitionState) -> None:
        if self.role is Role.LEADER:
            self.fail_delayed(
                NotLeaderOrFollowerAfterAppendError(
                    f"node {self.host.node_id} lost the leadership of {self.topic}-{self.partition} "
                    f"(epoch {st.leader_epoch} is led by {st.leader}); the records may or may not survive"
                ),
                NotLeaderOrFollowerError(
                    f"node {self.host.node_id} lost the leadership of {self.topic}-{self.partition} "
                    f"(epoch {st.leader_epoch} is led by {st.leader}) before the low watermark reached "
                    "the offset; the records are deleted on it, ask the new leader again"
                ),
            )
        self.role = Role.FOLLOWER
        self.leader = st.leader
        self.leader_epoch = st.leader_epoch
        self.partition_epoch = st.partition_epoch
        self.isr_state = IsrState(st.isr)
        self.elr = st.elr
        self.remotes = {}
        self._divergence_checks = True
        if self._first_follow and mut.TRUNCATE_TO_HW_ON_RESTART in self.host.mutants:
            # Pre-KIP-101: a restarted follower cut its log back to its own high watermark.
            self._truncate(self.log.high_watermark, reason="restart (high watermark)")
        self._first_follow = False

    def stop(self) -> None:
        """The node no longer hosts this partition, or is shutting down."""
        self.fail_delayed(
            NotLeaderOrFollowerAfterAppendError(
                f"node {self.host.node_id} stopped serving {self.topic}-{self.partition}"
            ),
            NotLeaderOrFollowerError(f"node {self.host.node_id} stopped serving {self.topic}-{self.partition}"),
        )
        self.role = Role.NONE

    # ---------------------------------------------------------------------------------------------
    # Leader: produce
    # ---------------------------------------------------------------------------------------------

    def append_as_leader(self, records: bytes, acks: int) -> LogAppendInfo:
        """Validate and append a client's batches. Raises before anything is written, or
        returns where they are (``duplicate``: they were already written by an earlier try;
        the log checks the producers' sequences)."""
        if self.role is not Role.LEADER:
            raise NotLeaderOrFollowerBeforeAppendError(
                f"node {self.host.node_id} is not the leader of {self.topic}-{self.partition} "
                f"(leader {self.leader}, epoch {self.leader_epoch})"
            )
        if acks not in (-1, 0, 1):
            raise InvalidRequiredAcksError(f"acks must be -1 (all), 0 or 1, got {acks}")
        if acks == -1 and len(self.isr_state.isr) < self.min_isr:
            raise NotEnoughReplicasError(
                f"{self.topic}-{self.partition} has {len(self.isr_state.isr)} in-sync replicas "
                f"{list(self.isr_state.isr)}, fewer than min.insync.replicas={self.min_isr}; "
                "nothing was appended"
            )
        if not batch_headers(records, verify_crc=False):
            raise InvalidRecordError("the produce request holds no record batch")
        if mut.DEDUPE_OFF in self.host.mutants:
            # The producer state is updated, never consulted: retries are appended again.
            info = self.log.append(records, assign_offsets=True, leader_epoch=self.leader_epoch)
        else:
            info = self.log.append_as_leader(records, leader_epoch=self.leader_epoch)
        if info.duplicate:
            if mut.OOS_INSTEAD_OF_DEDUPE in self.host.mutants:
                raise OutOfOrderSequenceError(
                    f"producer repeated the batch at offsets {info.first_offset}..{info.last_offset}"
                )
            self.host.stats["duplicates"] = self.host.stats.get("duplicates", 0) + 1
            return info
        self.host.on_log_appended(self)
        self.maybe_increment_high_watermark()
        return info

    def park_produce(
        self, result: LogAppendInfo, respond: Callable[[int, int, int, KafkaError | None, bool], None], timeout_ms: int
    ) -> None:
        """acks=all: answer once HW passes the last offset (or on timeout / leadership loss)."""
        if mut.ACK_ALL_ON_LEADER_APPEND in self.host.mutants:
            respond(result.first_offset, result.last_offset, result.log_append_time, None, result.duplicate)
            return
        d = DelayedProduce(
            result.last_offset + 1,
            result.first_offset,
            result.last_offset,
            lambda f, last, t, e, dup: respond(f, last, result.log_append_time, e, dup),
            result.duplicate,
        )
        if self._try_complete(d):
            return
        d.timer = self.host.schedule(
            f"produce timeout {self.topic}-{self.partition}", lambda: self._expire(d, timeout_ms), timeout_ms
        )
        self.delayed.append(d)

    def _expire(self, d: DelayedProduce, timeout_ms: int) -> None:
        if d.done:
            return
        d.done = True
        if d in self.delayed:
            self.delayed.remove(d)
        d.respond(
            d.first_offset,
            d.last_offset,
            -1,
            RequestTimedOutError(
                f"records at offsets {d.first_offset}..{d.last_offset} of {self.topic}-{self.partition} "
                f"were appended but not replicated to the ISR within {timeout_ms} ms; they may or may "
                "not become visible"
            ),
            d.duplicate,
        )

    def _try_complete(self, d: DelayedProduce) -> bool:
        if self.role is not Role.LEADER:
            return False
        if self.log.high_watermark < d.required_offset:
            return False
        d.done = True
        if d.timer is not None:
            self.host.cancel(d.timer)
        if len(self.isr_state.maximal) >= self.min_isr:
            d.respond(d.first_offset, d.last_offset, -1, None, d.duplicate)
        else:
            d.respond(
                d.first_offset,
                d.last_offset,
                -1,
                NotEnoughReplicasAfterAppendError(
                    f"offsets {d.first_offset}..{d.last_offset} of {self.topic}-{self.partition} are "
                    f"committed, but the ISR {list(self.isr_state.maximal)} is below "
                    f"min.insync.replicas={self.min_isr}"
                ),
                d.duplicate,
            )
        return True

    def _complete_delayed(self) -> None:
        if not self.delayed:
            return
        keep = []
        for d in self.delayed:
            if not d.done and not self._try_complete(d):
                keep.append(d)
        self.delayed = keep

    def fail_delayed(self, err: KafkaError, delete_err: KafkaError | None = None) -> None:
        """Fail the waiting acks=all produces with ``err``, the waiting DeleteRecords requests
        with ``delete_err`` (default ``err``): their records are gone on this replica already."""
        deletes, self.delayed_deletes = self.delayed_deletes, []
        for dd in deletes:
            if not dd.done:
                dd.done = True
                if dd.timer is not None:
                    self.host.cancel(dd.timer)
                dd.respond(-1, delete_err or err)
        delayed, self.delayed = self.delayed, []
        for d in delayed:
            if d.done:
                continue
            d.done = True
            if d.timer is not None:
                self.host.cancel(d.timer)
            d.respond(d.first_offset, d.last_offset, -1, err, d.duplicate)

    # ---------------------------------------------------------------------------------------------
    # Leader: high watermark and ISR
    # ---------------------------------------------------------------------------------------------

    def _eligible(self, r: RemoteReplica) -> bool:
        epoch = self.host.broker_epoch_of(r.replica_id)
        return epoch >= 0 and r.broker_epoch == epoch

    def maybe_increment_high_watermark(self) -> bool:
        if self.role is not Role.LEADER:
            return False
        if len(self.isr_state.isr) < self.min_isr:
            return False  # KAFKA-15583: no progress while under min.insync.replicas
        leo = self.log.log_end_offset
        now = self._now()
        lag = self.host.config.replica_lag_time_max_ms
        maximal = self.isr_state.maximal
        new_hw = leo
        for r in self.remotes.values():
            if r.log_end_offset < new_hw and (
                r.replica_id in maximal or (r.is_caught_up(leo, now, lag) and self._eligible(r))
            ):
                new_hw = r.log_end_offset
        moved = self.log.maybe_increment_high_watermark(new_hw)
        if moved:
            self._complete_delayed()
            self.host.on_high_watermark(self)
        return moved

    def maybe_shrink_isr(self) -> None:
        """The ISR expiry check (every replica.lag.time.max.ms / 2)."""
        if self.role is not Role.LEADER or self.isr_state.pending is not None:
            return
        leo = self.log.log_end_offset
        now = self._now()
        lag = self.host.config.replica_lag_time_max_ms
        out = [
            r
            for r in self.isr_state.isr
            if r != self.host.node_id and (r not in self.remotes or not self.remotes[r].is_caught_up(leo, now, lag))
        ]
        if not out:
            return
        new_isr = tuple(r for r in self.isr_state.isr if r not in out)
        log.info(
            "%s-%d: leader %d shrinks ISR %s -> %s (lagging %s)",
            self.topic,
            self.partition,
            self.host.node_id,
            self.isr_state.isr,
            new_isr,
            out,
        )
        self.host.stats["isr_shrinks_proposed"] = self.host.stats.get("isr_shrinks_proposed", 0) + 1
        if mut.LEADER_LOCAL_ISR_SHRINK in self.host.mutants:
            self.isr_state = IsrState(new_isr)
            self.maybe_increment_high_watermark()
            return
        self.isr_state = IsrState(self.isr_state.isr, "shrink", new_isr)
        self.host.submit_alter_partition(self, new_isr)

    def _maybe_expand_isr(self, r: RemoteReplica) -> None:
        if self.isr_state.pending is not None or r.replica_id in self.isr_state.isr:
            return
        if r.log_end_offset < self.log.high_watermark:
            return
        if r.log_end_offset < self.leader_epoch_start_offset and mut.ISR_JOIN_AT_HW_ONLY not in self.host.mutants:
            return  # KAFKA-7128
        if not self._eligible(r):
            return  # KIP-903: not registered with the broker epoch it fetches with
        new_isr = (*self.isr_state.isr, r.replica_id)
        log.info(
            "%s-%d: leader %d expands ISR %s -> %s",
            self.topic,
            self.partition,
            self.host.node_id,
            self.isr_state.isr,
            new_isr,
        )
        self.isr_state = IsrState(self.isr_state.isr, "expand", (r.replica_id,))
        self.host.submit_alter_partition(self, new_isr)

    def on_alter_partition_response(
        self, proposed: tuple[int, ...], sent_epoch: int, state: PartitionState | None, error: int
    ) -> None:
        if self.role is not Role.LEADER or self.partition_epoch != sent_epoch:
            return  # answered after something newer arrived
        if error == NONE and state is not None:
            if state.leader_epoch != self.leader_epoch:
                return
            self.partition_epoch = state.partition_epoch
            self.isr_state = IsrState(state.isr)
            self.elr = state.elr
            self.host.stats["isr_changes"] = self.host.stats.get("isr_changes", 0) + 1
        else:
            self.isr_state = IsrState(self.isr_state.isr)
            self.host.stats["isr_change_failures"] = self.host.stats.get("isr_change_failures", 0) + 1
        self.maybe_increment_high_watermark()

    def clear_pending_isr(self) -> None:
        if self.isr_state.pending is not None:
            self.isr_state = IsrState(self.isr_state.isr)
            self.maybe_increment_high_watermark()

    # ---------------------------------------------------------------------------------------------
    # Leader: log start, low watermark, DeleteRecords
    # ---------------------------------------------------------------------------------------------

    @property
    def low_watermark(self) -> int:
        """The leader's LW (Kafka's ``lowWatermarkIfLeader``): the minimum log start over this
        replica and every follower whose node is alive, as their fetches reported it; -1 on a
        replica that does not lead, or while a live follower has not fetched in this epoch."""
        if self.role is not Role.LEADER:
            return -1
        lw = self.log.log_start_offset
        for r in self.remotes.values():
            if self.host.broker_epoch_of(r.replica_id) >= 0 and r.log_start_offset < lw:
                lw = r.log_start_offset
        return lw

    def delete_records(self, offset: int, timeout_ms: int, respond: Callable[[int, KafkaError | None], None]) -> None:
        """Move the log start to ``offset`` (-1: the high watermark) now, then call
        ``respond(low watermark, error)`` once the LW reaches it, after ``timeout_ms`` with
        REQUEST_TIMED_OUT, or when leadership moves. Raises before anything changes when this
        replica does not lead or ``offset`` is not in ``[0, HW]``."""
        if self.role is not Role.LEADER:
            raise NotLeaderOrFollowerError(
                f"node {self.host.node_id} is not the leader of {self.topic}-{self.partition} "
                f"(leader {self.leader}, epoch {self.leader_epoch})"
            )
        hw = self.log.high_watermark
        if offset == -1:
            offset = hw
        if offset < 0 or offset > hw:
            raise OffsetOutOfRangeError(
                f"cannot delete the records of {self.topic}-{self.partition} before offset {offset}: "
                f"it must be in [0, {hw}] (the high watermark), or -1 for the high watermark"
            )
        start = self.log.delete_records(offset)
        log.info(
            "%s-%d: leader %d deletes records before %d (log start %d, low watermark %d)",
            self.topic,
            self.partition,
            self.host.node_id,
            offset,
            start,
            self.low_watermark,
        )
        dd = DelayedDeleteRecords(offset, respond)
        if self._try_complete_delete(dd):
            return
        dd.timer = self.host.schedule(
            f"delete records timeout {self.topic}-{self.partition}", lambda: self._expire_delete(dd), timeout_ms
        )
        self.delayed_deletes.append(dd)

    def _try_complete_delete(self, dd: DelayedDeleteRecords) -> bool:
        lw = self.low_watermark
        if self.role is not Role.LEADER or lw < dd.offset:
            return False
        dd.done = True
        if dd.timer is not None:
            self.host.cancel(dd.timer)
        dd.respond(lw, None)
        return True

    def _expire_delete(self, dd: DelayedDeleteRecords) -> None:
        if dd.done:
            return
        dd.done = True
        if dd in self.delayed_deletes:
            self.delayed_deletes.remove(dd)
        lw = self.low_watermark
        lagging = sorted(
            r.replica_id
            for r in self.remotes.values()
            if self.host.broker_epoch_of(r.replica_id) >= 0 and r.log_start_offset < dd.offset
        )
        dd.respond(
            lw,
            RequestTimedOutError(
                f"the low watermark of {self.topic}-{self.partition} reached {lw}, not {dd.offset}: "
                f"replicas {lagging} have not moved their log start there yet (the leader's is "
                f"{self.log.log_start_offset})"
            ),
        )

    def complete_delayed_deletes(self) -> None:
        """Answer the DeleteRecords requests the low watermark has now reached (after a
        follower's fetch, or when the live nodes change)."""
        if self.delayed_deletes:
            self.delayed_deletes = [d for d in self.delayed_deletes if not d.done and not self._try_complete_delete(d)]

    # ---------------------------------------------------------------------------------------------
    # Leader: fetches
    # ---------------------------------------------------------------------------------------------

    def _refuse_fetch(self, fp: FetchPartition) -> FetchPartitionResponse | None:
        """The answer to a fetch this replica may not serve (it does not lead, or the fetch
        names another leader epoch), or None."""
        if self.role is not Role.LEADER:
            return self.fetch_error(
                NotLeaderOrFollowerError(f"node {self.host.node_id} does not lead {self.topic}-{self.partition}")
            )
        err = self._epoch_error(fp.current_leader_epoch)
        if err is not None:
            return self.fetch_error(err)
        return None

    def _epoch_error(self, current_leader_epoch: int) -> KafkaError | None:
        if current_leader_epoch < 0:
            return None
        if current_leader_epoch < self.leader_epoch:
            return FencedLeaderEpochError(
                f"fetch names leader epoch {current_leader_epoch}; {self.topic}-{self.partition} "
                f"is at epoch {self.leader_epoch}"
            )
        if current_leader_epoch > self.leader_epoch:
            return UnknownLeaderEpochError(
                f"fetch names leader epoch {current_leader_epoch}; node {self.host.node_id} knows "
                f"only epoch {self.leader_epoch}"
            )
        return None

    def fetch_error(self, err: KafkaError) -> FetchPartitionResponse:
        """A fetch response for this partition carrying ``err`` and the log's offsets."""
        return FetchPartitionResponse(
            self.topic,
            self.partition,
            error=code_for_exception(err),
            high_watermark=self.log.high_watermark,
            log_start_offset=self.log.log_start_offset,
            log_end_offset=self.log.log_end_offset,
            message=str(err),
        )

    def fetch_for_follower(
        self, replica_id: int, broker_epoch: int, fp: FetchPartition, max_bytes: int
    ) -> FetchPartitionResponse:
        refused = self._refuse_fetch(fp)
        if refused is not None:
            return refused
        remote = self.remotes.get(replica_id)
        if remote is None:
            return self.fetch_error(
                NotLeaderOrFollowerError(
                    f"node {replica_id} is not a replica of {self.topic}-{self.partition} "
                    f"(replicas {list(self.replicas)})"
                )
            )
        leo = self.log.log_end_offset
        if fp.last_fetched_epoch >= 0:
            epoch, end = self.log.epoch_cache.end_offset_for(fp.last_fetched_epoch, leo)
            if mut.EPOCH_START_OFF_BY_ONE in self.host.mutants and 0 <= end < leo:
                end += 1  # the start of the next epoch taken as the last offset to keep
            if epoch == UNDEFINED_EPOCH or epoch < fp.last_fetched_epoch or end < fp.fetch_offset:
                return FetchPartitionResponse(
                    self.topic,
                    self.partition,
                    high_watermark=self.log.high_watermark,
                    log_start_offset=self.log.log_start_offset,
                    log_end_offset=leo,
                    diverging_epoch=epoch,
                    diverging_end_offset=end,
                )
        if fp.fetch_offset > leo or fp.fetch_offset < self.log.log_start_offset:
            return self.fetch_error(
                OffsetOutOfRangeError(
                    f"fetch offset {fp.fetch_offset} is outside [{self.log.log_start_offset}, {leo}] of "
                    f"{self.topic}-{self.partition} on node {self.host.node_id}"
                )
            )
        remote.update_fetch_state(fp.fetch_offset, fp.log_start_offset, leo, self._now(), broker_epoch)
        self._maybe_expand_isr(remote)
        self.maybe_increment_high_watermark()
        self.complete_delayed_deletes()
        return self.read(fp.fetch_offset, min(fp.max_bytes, max_bytes), ISOLATION_LOG_END)

    def fetch_for_consumer(self, fp: FetchPartition, max_bytes: int, isolation: str) -> FetchPartitionResponse:
        refused = self._refuse_fetch(fp)
        if refused is not None:
            return refused
        if mut.CONSUMER_READS_TO_LEO in self.host.mutants:
            isolation = ISOLATION_LOG_END
        bound = self.log.high_watermark if isolation != ISOLATION_LOG_END else self.log.log_end_offset
        if fp.fetch_offset > bound or fp.fetch_offset < self.log.log_start_offset:
            if fp.fetch_offset <= self.log.log_end_offset and fp.fetch_offset >= self.log.log_start_offset:
                return self.read(fp.fetch_offset, 0, isolation, empty=True)
            return self.fetch_error(
                OffsetOutOfRangeError(
                    f"fetch offset {fp.fetch_offset} is outside [{self.log.log_start_offset}, "
                    f"{self.log.log_end_offset}] of {self.topic}-{self.partition}"
                )
            )
        return self.read(fp.fetch_offset, min(fp.max_bytes, max_bytes), isolation)

    def read(self, offset: int, max_bytes: int, isolation: str, *, empty: bool = False) -> FetchPartitionResponse:
        hw = self.log.high_watermark
        if empty or max_bytes <= 0:
            records: Any = b""
        else:
            upper: str | int = "log_end" if isolation == ISOLATION_LOG_END else hw
            res = self.log.read(offset, max_bytes, upper_bound=upper)
            records = res if res else b""
        return FetchPartitionResponse(
            self.topic,
            self.partition,
            high_watermark=hw,
            log_start_offset=self.log.log_start_offset,
            log_end_offset=self.log.log_end_offset,
            records=records,
        )

    # ---------------------------------------------------------------------------------------------
    # Follower
    # ---------------------------------------------------------------------------------------------

    def fetch_partition_request(self, max_bytes: int) -> FetchPartition:
        return FetchPartition(
            self.topic,
            self.partition,
            self.log.log_end_offset,
            self.leader_epoch,
            self.log.epoch_cache.latest_epoch if self._divergence_checks else -1,
            self.log.log_start_offset,
            max_bytes,
        )

    def on_fetch_response(self, sent: FetchPartition, resp: FetchPartitionResponse) -> bool:
        """Apply the leader's answer; True if it was an error the fetcher should back off on."""
        if self.role is not Role.FOLLOWER or sent.current_leader_epoch != self.leader_epoch:
            return False
        if sent.fetch_offset != self.log.log_end_offset:
            return False  # the log moved since (truncation); fetch again
        if resp.error != NONE:
            if resp.error == OffsetOutOfRangeError.code:
                self._on_out_of_range(resp)
                return False
            return True
        if resp.diverging_epoch >= 0 or resp.diverging_end_offset >= 0:
            self._on_diverging(resp.diverging_epoch, resp.diverging_end_offset)
            return False
        data = resp.records
        if data:
            self._append_as_follower(data)
        leo = self.log.log_end_offset
        if mut.FOLLOWER_HW_UNCAPPED in self.host.mutants:
            self.log._high_watermark = max(resp.high_watermark, self.log.log_start_offset)
        else:
            self.log.update_high_watermark(min(resp.high_watermark, leo))
        # After the high watermark (which the leader's log start never passes), as Kafka's
        # replica fetcher does: records the leader deleted go here too.
        if (
            resp.log_start_offset > self.log.log_start_offset
            and mut.FOLLOWER_IGNORES_LOG_START not in self.host.mutants
        ):
            before = self.log.log_start_offset
            self.log.delete_records(resp.log_start_offset)
            log.info(
                "%s-%d: node %d moves its log start from %d to the leader's %d",
                self.topic,
                self.partition,
                self.host.node_id,
                before,
                resp.log_start_offset,
            )
        return False

    def _append_as_follower(self, data: Any) -> None:
        leo = self.log.log_end_offset
        if leo == self.log.log_start_offset:
            # An empty log starting inside the leader's first batch: the leader's log start was
            # moved into the middle of a batch (DeleteRecords), and the whole batch comes back.
            # The log restarts at the batch's base offset; the leader's log start is taken next.
            buf = data if isinstance(data, (bytes, bytearray, memoryview)) else data.to_bytes()
            heads = batch_headers(buf, verify_crc=False)
            if heads and heads[0].base_offset < leo <= heads[0].last_offset:
                log.info(
                    "%s-%d: node %d restarts its empty log at %d, the base offset of the leader's batch "
                    "holding its log start %d",
                    self.topic,
                    self.partition,
                    self.host.node_id,
                    heads[0].base_offset,
                    leo,
                )
                self.log.truncate_fully_and_start_at(heads[0].base_offset)
                data = buf
        self.log.append_as_follower(data)

    def _on_diverging(self, leader_epoch: int, leader_end: int) -> None:
        leo = self.log.log_end_offset
        if leader_end < 0:
            log.warning(
                "%s-%d: leader gave no end offset for epoch %d; fetching again",
                self.topic,
                self.partition,
                leader_epoch,
            )
            return
        if mut.NO_EPOCH_ITERATION in self.host.mutants:
            target = min(leader_end, leo)
            self._divergence_checks = False
        else:
            f_epoch, f_end = self.log.epoch_cache.end_offset_for(leader_epoch, leo)
            if f_epoch == UNDEFINED_EPOCH or f_end < 0:
                target = min(leader_end, leo)
            elif f_epoch != leader_epoch:
                target = min(f_end, leo)  # not done: the next fetch asks again (KIP-279)
            else:
                target = min(leader_end, f_end, leo)
        self._truncate(target, reason=f"diverging epoch {leader_epoch} ending at {leader_end}")

    def _on_out_of_range(self, resp: FetchPartitionResponse) -> None:
        leo = self.log.log_end_offset
        if resp.log_end_offset >= 0 and leo > resp.log_end_offset:
            self._truncate(resp.log_end_offset, reason="ahead of the leader's log end")
        elif resp.log_start_offset >= 0 and leo < resp.log_start_offset:
            start, size = self.log.log_start_offset, self.log.size
            hw = self.log.high_watermark
            self.log.truncate_fully_and_start_at(resp.log_start_offset)
            # Everything goes; nothing at or above the new start existed here.
            log.info(
                "%s-%d: node %d truncates fully from %d to %d (%d records, %d bytes), high watermark %d "
                "(behind the leader's log start %d)",
                self.topic,
                self.partition,
                self.host.node_id,
                leo,
                resp.log_start_offset,
                leo - start,
                size,
                hw,
                resp.log_start_offset,
            )
            self._count_truncation(leo - start, size)

    def _count_truncation(self, records: int, nbytes: int) -> None:
        stats = self.host.stats
        stats["truncations"] = stats.get("truncations", 0) + 1
        stats["truncated_records"] = stats.get("truncated_records", 0) + records
        stats["truncated_bytes"] = stats.get("truncated_bytes", 0) + nbytes

    def _truncate(self, offset: int, *, reason: str) -> None:
        leo = self.log.log_end_offset
        if offset >= leo:
            # Nothing to cut, but an epoch this node recorded as leader without writing to it
            # may sit at the log end and contradict the leader (Kafka's truncateTo does this too).
            self.log.epoch_cache.truncate_from_end(leo)
            return
        hw = self.log.high_watermark
        size = self.log.size
        self.log.truncate_to(offset)
        # A batch straddling ``offset`` goes whole: the log may end below ``offset`` now.
        end = self.log.log_end_offset
        records, nbytes = leo - end, size - self.log.size
        if offset < hw:
            log.warning(
                "%s-%d: node %d truncates below its high watermark %d to %d (from %d; %d records, %d bytes) (%s)",
                self.topic,
                self.partition,
                self.host.node_id,
                hw,
                offset,
                leo,
                records,
                nbytes,
                reason,
            )
            self.host.stats["truncations_below_hw"] = self.host.stats.get("truncations_below_hw", 0) + 1
        else:
            log.info(
                "%s-%d: node %d truncates from %d to %d (%d records, %d bytes), high watermark %d (%s)",
                self.topic,
                self.partition,
                self.host.node_id,
                leo,
                offset,
                records,
                nbytes,
                hw,
                reason,
            )
        self.truncations.append((leo, offset, hw))
        self._count_truncation(records, nbytes)
