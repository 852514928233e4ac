"""Kafka's classic consumer-group protocol for the one-node broker (``seglog.kafka.server``).

A group moves through Kafka's states: ``Empty`` (no members; committed offsets may exist) →
``PreparingRebalance`` (a member joined, left or expired: every member must send JoinGroup
again) → ``CompletingRebalance`` (the new generation is formed and its leader has the members'
subscriptions; everyone waits for SyncGroup) → ``Stable`` (the leader's assignment was handed
out; members heartbeat). A rebalance completes when every known member has rejoined or when the
longest rebalance timeout passes (members that did not rejoin are removed). A member whose
heartbeats stop for its session timeout is removed and the group rebalances.

Committed offsets go through an :class:`OffsetsBackend`. The one-node broker's is
:class:`StoreOffsets`: the store's ``__consumer_offsets`` (``Store.group_offsets``), where the
embedded consumer keeps them too, so both see the same commits. A cluster node's
(:mod:`seglog.cluster.group_coordinator`) appends commits to the replicated
``__consumer_offsets`` partition the node leads and answers NOT_COORDINATOR for groups of the
partitions it does not lead; when it stops leading one, :meth:`GroupCoordinator.unload` drops
that partition's groups.

A dynamic member joining with JoinGroup v4+ and no member id is given one with
``MEMBER_ID_REQUIRED`` (KIP-394) and must join again with it; until then it is a pending
member (a rebalance waits for it), dropped after its session timeout.

Static members (``group.instance.id``, KIP-345) keep their place across restarts: a member
joining with a known instance id and no member id replaces the old member id (which is fenced
from then on: ``FENCED_INSTANCE_ID``) and, in a Stable group whose chosen protocol stays the
same, takes over the old member's assignment without a rebalance. Like every member, a static
member that goes away without LeaveGroup stays in the group until its session timeout.

A generation is written to the backend as Kafka's group metadata record (protocol type,
generation, protocol, leader, members with their subscription and assignment) when its leader's
SyncGroup hands out the assignment (the members are answered once it is durable; a failed write
is answered to every member waiting and the group rebalances), when the group empties, and when
a static member takes over a Stable group's place. A coordinator that has no group in memory
takes the last stored generation: a Stable group with its members and assignments (their session
timers start afresh), or an Empty group at its generation. So after a restart, or after the
coordinator moves, members go on heartbeating and committing with the generation they have, as
with Kafka.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from seglog.storage.group_offsets import GroupMetadata, MemberMetadata, OffsetAndMetadata
from seglog.util.loop import cancel_and_wait

if TYPE_CHECKING:
    from seglog.kafka.codec import Message
    from seglog.kafka.connection import ConnState
    from seglog.kafka.listener import Handler
    from seglog.storage.log_manager import LogManager

__all__ = ["GroupCoordinator", "OffsetsBackend", "StoreOffsets", "group_api_handlers"]

log = logging.getLogger("seglog.kafka.groups")

NONE = 0
COORDINATOR_NOT_AVAILABLE = 15
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
UNKNOWN_TOPIC_OR_PARTITION = 3
GROUP_ID_NOT_FOUND = 69
INVALID_GROUP_ID = 24
NON_EMPTY_GROUP = 68
FENCED_INSTANCE_ID = 82
MEMBER_ID_REQUIRED = 79
NOT_COORDINATOR = 16

EMPTY, PREPARING, COMPLETING, STABLE = "Empty", "PreparingRebalance", "CompletingRebalance", "Stable"

#: Kafka's ``group.min.session.timeout.ms`` and ``group.max.session.timeout.ms`` defaults.
MIN_SESSION_MS = 6000
MAX_SESSION_MS = 1800000
#: How long closing waits for group records already being written (Kafka's
#: ``offsets.commit.timeout.ms`` bounds such a write the same way).
CLOSE_WRITES_TIMEOUT_S = 5.0


class OffsetsBackend(Protocol):
    """Where a :class:`GroupCoordinator` keeps committed offsets, and which groups it serves."""

    def coordinator_error(self, group_id: str) -> int:
        """0 when this coordinator serves ``group_id`` now, else the error code to answer
        (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS)."""
        ...

    def time_ms(self) -> int:
        """The commit timestamp for a commit made now."""
        ...

    def partition_exists(self, topic: str, partition: int) -> bool:
        """Whether offsets may be committed for ``topic``-``partition``."""
        ...

    async def commit(self, group_id: str, offsets: Mapping[tuple[str, int], OffsetAndMetadata]) -> int:
        """Make ``offsets`` the group's committed offsets, durably; 0, or the error code every
        partition of the commit is answered with (nothing was committed then)."""
        ...

    def group_offsets(self, group_id: str) -> dict[tuple[str, int], OffsetAndMetadata]:
        """The group's committed offsets by (topic, partition)."""
        ...

    def groups(self) -> list[str]:
        """Every group with committed offsets that this coordinator serves."""
        ...

    def group_metadata(self, group_id: str) -> GroupMetadata | None:
        """The group's last stored generation (None: none)."""
        ...

    async def store_group(self, group_id: str, md: GroupMetadata) -> int:
        """Store ``md`` as the group's generation, durably; 0 or the error code to answer."""
        ...


class StoreOffsets:
    """The one-node broker's offsets: ``store.group_offsets``; every group is served here. The
    commit is fsynced before the answer; the fsync (milliseconds, more on a busy disk) runs on a
    worker thread so that other connections go on meanwhile."""

    def __init__(self, store: LogManager) -> None:
        self.store = store
        self._writing = asyncio.Lock()  # group records are appended in the order they are made

    def coordinator_error(self, group_id: str) -> int:
        return NONE

    def time_ms(self) -> int:
        return self.store.clock.time_ms()

    def partition_exists(self, topic: str, partition: int) -> bool:
        try:
            return 0 <= partition < self.store.partitions_for(topic)
        except Exception:  # noqa: BLE001 - unknown topic
            return False

    async def commit(self, group_id: str, offsets: Mapping[tuple[str, int], OffsetAndMetadata]) -> int:
        await asyncio.to_thread(self.store.group_offsets.commit, group_id, offsets)
        return NONE

    def group_offsets(self, group_id: str) -> dict[tuple[str, int], OffsetAndMetadata]:
        return self.store.group_offsets.group_offsets(group_id)

    def groups(self) -> list[str]:
        return self.store.group_offsets.groups()

    def group_metadata(self, group_id: str) -> GroupMetadata | None:
        return self.store.group_offsets.group_metadata(group_id)

    async def store_group(self, group_id: str, md: GroupMetadata) -> int:
        async with self._writing:
            await asyncio.to_thread(self.store.group_offsets.store_group, group_id, md)
        return NONE


def _join_error(member_id: str, code: int) -> Message:
    return {
        "error_code": code,
        "generation_id": -1,
        "protocol_name": None,
        "protocol_type": None,
        "leader": "",
        "member_id": member_id,
        "members": [],
    }


class _Member:
    __slots__ = (
        "assignment",
        "client_host",
        "client_id",
        "instance_id",
        "join",
        "last_seen",
        "member_id",
        "protocol_type",
        "protocols",
        "rebalance_ms",
        "session_ms",
        "sync",
    )

    def __init__(self, member_id: str, client_id: str, client_host: str) -> None:
        self.member_id = member_id
        self.instance_id: str | None = None
        self.client_id = client_id
        self.client_host = client_host
        self.session_ms = 10000
        self.rebalance_ms = 300000
        self.protocol_type = ""
        self.protocols: list[tuple[str, bytes]] = []
        self.assignment = b""
        self.join: asyncio.Future[Message] | None = None
        self.sync: asyncio.Future[Message] | None = None
        self.last_seen = time.monotonic()


class _Group:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.state = EMPTY
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol: str | None = None
        self.leader: str | None = None
        self.members: dict[str, _Member] = {}
        #: group.instance.id → the member id that holds it now.
        self.static: dict[str, str] = {}
        #: member ids handed out with MEMBER_ID_REQUIRED, not yet joined → expiry (monotonic).
        self.pending: dict[str, float] = {}
        self.rebalance_deadline = 0.0
        self.rebalance_task: asyncio.Task[None] | None = None


class GroupCoordinator:
    """Every group of the broker. Methods take decoded requests and return response dicts;
    JoinGroup and SyncGroup wait (asynchronously) for the rest of the group. Committed offsets
    go to ``offsets`` when given, else to ``store`` (:class:`StoreOffsets`)."""

    def __init__(
        self,
        store: LogManager | None = None,
        initial_rebalance_delay_ms: int = 0,
        min_session_ms: int = MIN_SESSION_MS,
        max_session_ms: int = MAX_SESSION_MS,
        *,
        offsets: OffsetsBackend | None = None,
    ) -> None:
        if offsets is None:
            if store is None:
                raise ValueError("a GroupCoordinator needs a store or an offsets backend")
            offsets = StoreOffsets(store)
        self.offsets = offsets
        self.initial_delay = initial_rebalance_delay_ms / 1000.0
        self.min_session_ms = min_session_ms
        self.max_session_ms = max_session_ms
        self.groups: dict[str, _Group] = {}
        self._reaper: asyncio.Task[None] | None = None
        self._writes: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._reaper = asyncio.get_running_loop().create_task(self._expire_loop())

    async def close(self) -> None:
        # A group record already being written (a group that emptied, a static member's place)
        # is finished first, so that a clean close loses none; one that cannot finish within
        # the bound is cancelled below, its record before it stays the group's last.
        if self._writes:
            await asyncio.wait(set(self._writes), timeout=CLOSE_WRITES_TIMEOUT_S)
        tasks = [t for t in [self._reaper, *self._writes] + [g.rebalance_task for g in self.groups.values()] if t]
        await cancel_and_wait(tasks, "the group coordinator's tasks")

    def unload(self, which: Callable[[str], bool]) -> list[str]:
        """Drop the groups whose id ``which`` accepts (their coordinator has moved): requests
        still waiting (JoinGroup, SyncGroup) are answered NOT_COORDINATOR, so that members find
        the new coordinator and join there. The ids dropped."""
        gone = [gid for gid in self.groups if which(gid)]
        for gid in gone:
            group = self.groups.pop(gid)
            if group.rebalance_task is not None:
                group.rebalance_task.cancel()
            for m in group.members.values():
                if m.join is not None and not m.join.done():
                    m.join.set_result(_join_error(m.member_id, NOT_COORDINATOR))
                if m.sync is not None and not m.sync.done():
                    m.sync.set_result({"error_code": NOT_COORDINATOR, "assignment": b""})
        if gone:
            log.info("groups %s unloaded: their coordinator moved", ", ".join(sorted(gone)))
        return gone

    def _group(self, gid: str) -> _Group | None:
        """The group in memory, else the one the backend stored last (None: neither)."""
        group = self.groups.get(gid)
        if group is not None:
            return group
        md = self.offsets.group_metadata(gid)
        if md is None:
            return None
        group = self.groups[gid] = _Group(gid)
        group.generation = md.generation
        group.protocol_type = md.protocol_type or None
        if not md.members:
            return group
        group.state = STABLE
        group.protocol = md.protocol
        group.leader = md.leader
        for mm in md.members:
            m = _Member(mm.member_id, mm.client_id, mm.client_host)
            m.instance_id = mm.instance_id
            m.session_ms = mm.session_timeout_ms
            m.rebalance_ms = mm.rebalance_timeout_ms
            m.protocol_type = md.protocol_type
            m.protocols = [(md.protocol or "", mm.subscription)]
            m.assignment = mm.assignment
            group.members[m.member_id] = m
            if m.instance_id is not None:
                group.static[m.instance_id] = m.member_id
        log.info("group %s: generation %d loaded with members %s", gid, group.generation, ", ".join(group.members))
        return group

    def _metadata(self, group: _Group) -> GroupMetadata:
        """The group's generation as its metadata record keeps it."""
        members = tuple(
            MemberMetadata(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_ms,
                m.session_ms,
                next((md for n, md in m.protocols if n == group.protocol), b""),
                m.assignment,
            )
            for m in group.members.values()
        )
        return GroupMetadata(
            group.protocol_type or "", group.generation, group.protocol, group.leader, self.offsets.time_ms(), members
        )

    def _store_later(self, group: _Group) -> None:
        """Write the group's generation now, answering nobody (it emptied, or a static member
        took a place); a failure is logged (the record before it stays the group's last)."""
        md = self._metadata(group)

        async def write() -> None:
            try:
                code = await self.offsets.store_group(group.group_id, md)
            except Exception:  # noqa: BLE001 - nobody waits for this write: logged
                log.exception("group %s: storing generation %d failed", group.group_id, md.generation)
                return
            if code != NONE:
                log.warning("group %s: storing generation %d failed with error %d", group.group_id, md.generation, code)

        task = asyncio.get_running_loop().create_task(write())
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    # -- JoinGroup ------------------------------------------------------------------------------

    async def join(self, version: int, req: Message, client_id: str, client_host: str) -> Message:
        gid = req["group_id"]
        member_id = req["member_id"]

        def fail(code: int) -> Message:
            return _join_error(member_id, code)

        if not gid:
            return fail(INVALID_GROUP_ID)
        if (code := self.offsets.coordinator_error(gid)) != NONE:
            return fail(code)
        session = req["session_timeout_ms"]
        if not self.min_session_ms <= session <= self.max_session_ms:
            return fail(INVALID_SESSION_TIMEOUT)
        group = self._group(gid)
        if group is None:
            group = self.groups[gid] = _Group(gid)
        protocols = [(p["name"], p["metadata"]) for p in req["protocols"]]
        if not protocols or (
            group.protocol_type is not None and group.members and req["protocol_type"] != group.protocol_type
        ):
            return fail(INCONSISTENT_GROUP_PROTOCOL)
        if group.members and group.protocol is None and not self._common_protocol(group, protocols):
            return fail(INCONSISTENT_GROUP_PROTOCOL)
        instance_id = req.get("group_instance_id")
        if member_id and member_id in group.pending and instance_id is None:
            # The second JoinGroup of a dynamic member given its id with MEMBER_ID_REQUIRED.
            del group.pending[member_id]
            member = _Member(member_id, client_id, client_host)
            group.members[member_id] = member
        elif member_id:
            code = self._validate(group, member_id, instance_id)
            if code != NONE:
                return fail(code)
            member = group.members[member_id]
        elif instance_id is not None and instance_id in group.static:
            return await self._replace_static(version, group, req, instance_id, f"{instance_id}-{uuid.uuid4()}")
        elif instance_id is not None:
            member_id = f"{instance_id}-{uuid.uuid4()}"
            member = _Member(member_id, client_id, client_host)
            group.members[member_id] = member
            group.static[instance_id] = member_id
        elif version >= 4:
            # KIP-394: the member learns its id first, so that a JoinGroup whose answer is lost
            # does not leave an unknown member behind; it must join again with the id.
            member_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            group.pending[member_id] = time.monotonic() + session / 1000.0
            log.debug("group %s: new member %s must join again with its id", gid, member_id)
            return fail(MEMBER_ID_REQUIRED)
        else:
            member_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            member = _Member(member_id, client_id, client_host)
            group.members[member_id] = member
        if member.join is not None and not member.join.done():
            # A newer JoinGroup of the same member replaces the one still waiting.
            member.join.set_result(fail(UNKNOWN_MEMBER_ID))
        elif (
            group.state in (COMPLETING, STABLE)
            and member.protocols == protocols
            and (group.state == COMPLETING or member_id != group.leader)
        ):
            # As Kafka: a known member rejoining with the same subscription while the group is
            # settled gets the current generation again; only the leader (or a changed
            # subscription) starts a rebalance.
            member.last_seen = time.monotonic()
            log.debug("group %s: member %s rejoined generation %d unchanged", gid, member_id, group.generation)
            return self._join_response(group, member)
        member.instance_id = instance_id
        self._update(group, member, req, protocols)
        log.debug("group %s: member %s joins (state %s, generation %d)", gid, member_id, group.state, group.generation)
        join: asyncio.Future[Message]
        join = member.join = asyncio.get_running_loop().create_future()
        if group.state != PREPARING:
            self._prepare_rebalance(group, first=(group.state == EMPTY))
        else:
            self._maybe_complete(group)
        return await join

    @staticmethod
    def _update(group: _Group, member: _Member, req: Message, protocols: list[tuple[str, bytes]]) -> None:
        session = req["session_timeout_ms"]
        member.session_ms = session
        member.rebalance_ms = req.get("rebalance_timeout_ms", session) or session
        member.protocol_type = req["protocol_type"]
        member.protocols = protocols
        member.last_seen = time.monotonic()
        group.protocol_type = req["protocol_type"]

    @staticmethod
    def _validate(group: _Group | None, member_id: str, instance_id: str | None) -> int:
        """Kafka's member check: a static member's instance id must be held by this member id
        (another holder fences it: ``FENCED_INSTANCE_ID``), and the member must exist."""
        if group is None:
            return UNKNOWN_MEMBER_ID
        if instance_id is not None:
            holder = group.static.get(instance_id)
            if holder is None:
                return UNKNOWN_MEMBER_ID
            if holder != member_id:
                log.info(
                    "group %s: member %s of static instance %s is fenced by member %s",
                    group.group_id,
                    member_id,
                    instance_id,
                    holder,
                )
                return FENCED_INSTANCE_ID
        return NONE if member_id in group.members else UNKNOWN_MEMBER_ID

    async def _replace_static(
        self, version: int, group: _Group, req: Message, instance_id: str, new_id: str
    ) -> Message:
        """A static member joins again without its member id (it restarted): the new member id
        takes the old one's place, assignment and leadership; the old id is fenced. A Stable
        group whose chosen protocol stays the same answers at once with the current
        generation (no rebalance); otherwise the group rebalances, as in Kafka."""
        old_id = group.static[instance_id]
        old = group.members.pop(old_id)
        fenced: Message = {
            "error_code": FENCED_INSTANCE_ID,
            "generation_id": -1,
            "protocol_name": None,
            "protocol_type": None,
            "leader": "",
            "member_id": old_id,
            "members": [],
            "skip_assignment": False,
        }
        if old.join is not None and not old.join.done():
            old.join.set_result(fenced)
        if old.sync is not None and not old.sync.done():
            old.sync.set_result(
                {"error_code": FENCED_INSTANCE_ID, "protocol_type": None, "protocol_name": None, "assignment": b""}
            )
        previous_leader = group.leader
        member = _Member(new_id, old.client_id, old.client_host)
        member.instance_id = instance_id
        member.assignment = old.assignment
        group.members[new_id] = member
        group.static[instance_id] = new_id
        if group.leader == old_id:
            group.leader = new_id
        self._update(group, member, req, [(p["name"], p["metadata"]) for p in req["protocols"]])
        log.info(
            "group %s: static member %s rejoins as %s (was %s, state %s)",
            group.group_id,
            instance_id,
            new_id,
            old_id,
            group.state,
        )
        join: asyncio.Future[Message]
        join = member.join = asyncio.get_running_loop().create_future()
        if group.state == STABLE and group.protocol == self._common_protocol(group):
            member.join = None
            self._store_later(group)
            leader = member.member_id == group.leader
            if version >= 9:
                # The leader learns it leads but must not assign again (KIP-814).
                out = self._join_response(group, member)
                out["skip_assignment"] = leader
                return out
            # Older clients are told the previous leader id, so that a rejoining leader does
            # not compute an assignment a Stable group would never hand out.
            return {**self._join_response(group, member), "leader": previous_leader, "members": []}
        if group.state == PREPARING:
            self._maybe_complete(group)
        else:
            self._prepare_rebalance(group)
        return await join

    def _common_protocol(self, group: _Group, extra: list[tuple[str, bytes]] | None = None) -> str | None:
        """The protocol every member supports, chosen by votes from each member's preferences
        (Kafka's ``selectProtocol``)."""
        lists = [[n for n, _ in m.protocols] for m in group.members.values()]
        if extra is not None:
            lists.append([n for n, _ in extra])
        if not lists:
            return None
        common = set(lists[0]).intersection(*lists[1:])
        if not common:
            return None
        votes: dict[str, int] = {}
        for names in lists:
            choice = next(n for n in names if n in common)
            votes[choice] = votes.get(choice, 0) + 1
        return max(sorted(votes), key=lambda n: votes[n])

    def _prepare_rebalance(self, group: _Group, first: bool = False) -> None:
        group.state = PREPARING
        for m in group.members.values():
            if m.sync is not None and not m.sync.done():
                m.sync.set_result({"error_code": REBALANCE_IN_PROGRESS, "assignment": b""})
            m.sync = None
        timeout = max((m.rebalance_ms for m in group.members.values()), default=0) / 1000.0
        group.rebalance_deadline = time.monotonic() + timeout
        if group.rebalance_task is not None:
            group.rebalance_task.cancel()
        group.rebalance_task = asyncio.get_running_loop().create_task(
            self._rebalance_timer(group, self.initial_delay if first else 0.0)
        )

    async def _rebalance_timer(self, group: _Group, delay: float) -> None:
        if delay > 0:
            await asyncio.sleep(delay)
        while group.state == PREPARING:
            if self._all_joined(group):
                self._complete_join(group)
                return
            remaining = group.rebalance_deadline - time.monotonic()
            if remaining <= 0:
                for mid in [mid for mid, m in group.members.items() if m.join is None or m.join.done()]:
                    gone = group.members.pop(mid)
                    if gone.instance_id is not None and group.static.get(gone.instance_id) == mid:
                        del group.static[gone.instance_id]
                self._complete_join(group)
                return
            await asyncio.sleep(min(remaining, 0.05))

    def _all_joined(self, group: _Group) -> bool:
        return not group.pending and all(m.join is not None and not m.join.done() for m in group.members.values())

    def _maybe_complete(self, group: _Group) -> None:
        task = group.rebalance_task
        if group.state == PREPARING and self._all_joined(group) and (task is None or task.done()):
            self._complete_join(group)

    def _complete_join(self, group: _Group) -> None:
        if group.rebalance_task is not None and group.rebalance_task is not asyncio.current_task():
            group.rebalance_task.cancel()
        group.rebalance_task = None
        group.generation += 1
        if not group.members:
            group.state = EMPTY
            group.protocol = group.leader = None
            self._store_later(group)
            return
        group.protocol = self._common_protocol(group)
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        group.state = COMPLETING
        log.debug(
            "group %s: generation %d formed, leader %s, members %s",
            group.group_id,
            group.generation,
            group.leader,
            list(group.members),
        )
        for m in group.members.values():
            m.last_seen = time.monotonic()
            if m.join is not None and not m.join.done():
                m.join.set_result(self._join_response(group, m))
            m.join = None

    def _join_response(self, group: _Group, member: _Member) -> Message:
        metas = []
        if member.member_id == group.leader:
            for m in group.members.values():
                meta = next((md for n, md in m.protocols if n == group.protocol), b"")
                metas.append({"member_id": m.member_id, "group_instance_id": m.instance_id, "metadata": meta})
        return {
            "error_code": NONE,
            "generation_id": group.generation,
            "protocol_type": group.protocol_type,
            "protocol_name": group.protocol,
            "leader": group.leader,
            "member_id": member.member_id,
            "skip_assignment": False,
            "members": metas,
        }

    # -- SyncGroup ------------------------------------------------------------------------------

    async def sync(self, version: int, req: Message) -> Message:
        group = self.groups.get(req["group_id"])
        log.debug(
            "group %s: sync from %s generation %d (state %s)",
            req["group_id"],
            req["member_id"],
            req["generation_id"],
            group.state if group else None,
        )
        out: Message = {"error_code": NONE, "protocol_type": None, "protocol_name": None, "assignment": b""}
        code = self.offsets.coordinator_error(req["group_id"])
        if code == NONE:
            group = self._group(req["group_id"])
            code = self._validate(group, req["member_id"], req.get("group_instance_id"))
        if code != NONE:
            return {**out, "error_code": code}
        assert group is not None
        member = group.members[req["member_id"]]
        if req["generation_id"] != group.generation:
            return {**out, "error_code": ILLEGAL_GENERATION}
        if group.state == PREPARING:
            return {**out, "error_code": REBALANCE_IN_PROGRESS}
        out["protocol_type"], out["protocol_name"] = group.protocol_type, group.protocol
        member.last_seen = time.monotonic()
        if group.state == STABLE:
            return {**out, "assignment": member.assignment}
        # CompletingRebalance: the leader's request hands out the assignment.
        if member.member_id == group.leader:
            given = {a["member_id"]: a["assignment"] for a in req["assignments"]}
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")
            generation = group.generation
            stored = await self.offsets.store_group(group.group_id, self._metadata(group))
            if self.groups.get(group.group_id) is not group:
                return {**out, "error_code": NOT_COORDINATOR}  # unloaded meanwhile
            if group.generation != generation or group.state != COMPLETING:
                # A rebalance began meanwhile (the waiting members were told so).
                return {**out, "error_code": REBALANCE_IN_PROGRESS}
            if stored != NONE:
                log.info("group %s: storing generation %d failed with error %d", group.group_id, generation, stored)
                for m in group.members.values():
                    m.assignment = b""
                    if m.sync is not None and not m.sync.done():
                        m.sync.set_result({**out, "error_code": stored, "assignment": b""})
                    m.sync = None
                self._prepare_rebalance(group)
                return {**out, "error_code": stored}
            group.state = STABLE
            for m in group.members.values():
                if m.sync is not None and not m.sync.done():
                    m.sync.set_result({**out, "assignment": m.assignment})
                m.sync = None
            return {**out, "assignment": member.assignment}
        member.sync = asyncio.get_running_loop().create_future()
        result = await member.sync
        return {**out, **result}

    # -- Heartbeat / LeaveGroup -----------------------------------------------------------------

    def heartbeat(self, version: int, req: Message) -> Message:
        if (code := self.offsets.coordinator_error(req["group_id"])) != NONE:
            return {"error_code": code}
        group = self._group(req["group_id"])
        code = self._validate(group, req["member_id"], req.get("group_instance_id"))
        if code != NONE:
            return {"error_code": code}
        assert group is not None
        member = group.members[req["member_id"]]
        member.last_seen = time.monotonic()
        if req["generation_id"] != group.generation:
            return {"error_code": ILLEGAL_GENERATION if group.state != PREPARING else REBALANCE_IN_PROGRESS}
        if group.state == PREPARING:
            return {"error_code": REBALANCE_IN_PROGRESS}
        return {"error_code": NONE}

    def leave(self, version: int, req: Message) -> Message:
        if (code := self.offsets.coordinator_error(req["group_id"])) != NONE:
            return {"error_code": code, "members": []}
        group = self._group(req["group_id"])
        if version >= 3:
            wanted = [(m["member_id"], m.get("group_instance_id")) for m in req["members"]]
        else:
            wanted = [(req["member_id"], None)]
        results = []
        for member_id, instance_id in wanted:
            if group is not None and member_id in group.pending:
                del group.pending[member_id]
                code = NONE
                self._maybe_complete(group)
            elif member_id == "" and instance_id is not None:
                # Removal by instance id alone (an administrator's, or a static member's).
                holder = group.static.get(instance_id) if group is not None else None
                code = UNKNOWN_MEMBER_ID if holder is None else NONE
                if holder is not None:
                    assert group is not None
                    self._remove(group, holder)
            else:
                code = self._validate(group, member_id, instance_id)
                if code == NONE:
                    assert group is not None
                    self._remove(group, member_id)
            results.append({"member_id": member_id, "group_instance_id": instance_id, "error_code": code})
        top = NONE if version >= 3 else results[0]["error_code"]
        return {"error_code": top, "members": results}

    def _remove(self, group: _Group, member_id: str) -> None:
        log.debug("group %s: member %s removed (state %s)", group.group_id, member_id, group.state)
        member = group.members.pop(member_id)
        if member.instance_id is not None and group.static.get(member.instance_id) == member_id:
            del group.static[member.instance_id]
        if member.join is not None and not member.join.done():
            member.join.set_result(
                {
                    "error_code": UNKNOWN_MEMBER_ID,
                    "generation_id": -1,
                    "protocol_name": None,
                    "leader": "",
                    "member_id": member_id,
                    "members": [],
                }
            )
        if member.sync is not None and not member.sync.done():
            member.sync.set_result({"error_code": UNKNOWN_MEMBER_ID, "assignment": b""})
        if not group.members and group.state != PREPARING:
            group.state = EMPTY
            group.generation += 1
            group.protocol = group.leader = None
            self._store_later(group)
        elif group.state == PREPARING:
            self._maybe_complete(group)
        else:
            self._prepare_rebalance(group)

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(0.1)
            now = time.monotonic()
            for group in list(self.groups.values()):
                expired = [mid for mid, deadline in group.pending.items() if now > deadline]
                for mid in expired:
                    log.debug("group %s: pending member %s expired", group.group_id, mid)
                    del group.pending[mid]
                if expired:
                    self._maybe_complete(group)
                for mid, m in list(group.members.items()):
                    waiting = m.join is not None and not m.join.done()
                    if not waiting and now - m.last_seen > m.session_ms / 1000.0:
                        self._remove(group, mid)

    # -- offsets ----------------------------------------------------------------------------

    async def commit(self, version: int, req: Message) -> Message:
        """OffsetCommit, answered once the backend has made the commit durable."""
        gid = req["group_id"]
        generation = req.get("generation_id_or_member_epoch", -1)
        member_id = req.get("member_id", "")
        code = self.offsets.coordinator_error(gid)
        group = self._group(gid) if code == NONE else None
        member = group.members.get(member_id) if group is not None else None
        if code != NONE:
            pass
        elif generation < 0 and not member_id:
            # A commit from outside any generation: only while the group has no members.
            code = UNKNOWN_MEMBER_ID if group is not None and group.members else NONE
        elif (code := self._validate(group, member_id, req.get("group_instance_id"))) != NONE:
            pass
        elif member is None or group is None:
            code = UNKNOWN_MEMBER_ID
        elif generation != group.generation:
            code = ILLEGAL_GENERATION
        elif group.state == COMPLETING:
            # The member has its new generation but not yet its assignment.
            code = REBALANCE_IN_PROGRESS
        else:
            # Stable, or PreparingRebalance: a member commits what it consumed as its partitions
            # are revoked (the rebalance it learns of from a heartbeat), as Kafka accepts.
            code = NONE
            member.last_seen = time.monotonic()
        offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        topics = []
        now = self.offsets.time_ms()
        for t in req["topics"]:
            parts = []
            for p in t["partitions"]:
                pcode = code
                if pcode == NONE and not self.offsets.partition_exists(t["name"], p["partition_index"]):
                    pcode = UNKNOWN_TOPIC_OR_PARTITION
                if pcode == NONE:
                    offsets[(t["name"], p["partition_index"])] = OffsetAndMetadata(
                        p["committed_offset"],
                        p.get("committed_metadata") or "",
                        p.get("committed_leader_epoch", -1),
                        now,
                    )
                parts.append({"partition_index": p["partition_index"], "error_code": pcode})
            topics.append({"name": t["name"], "partitions": parts})
        if offsets and (failed := await self.offsets.commit(gid, offsets)) != NONE:
            for t in topics:
                for row in t["partitions"]:
                    if (t["name"], row["partition_index"]) in offsets:
                        row["error_code"] = failed
        return {"throttle_time_ms": 0, "topics": topics}

    def fetch_offsets(self, group_id: str, topics: list[Any] | None) -> tuple[list[Any], int]:
        """(topics with committed offsets, error code) for one group; ``topics`` None: all. A
        group this coordinator does not serve: its error code, in every partition asked for too
        (OffsetFetch v1 has no other place for it)."""
        code = self.offsets.coordinator_error(group_id)
        if code != NONE:
            return [
                {
                    "name": t["name"],
                    "partitions": [
                        {
                            "partition_index": p,
                            "committed_offset": -1,
                            "committed_leader_epoch": -1,
                            "metadata": "",
                            "error_code": code,
                        }
                        for p in t["partition_indexes"]
                    ],
                }
                for t in topics or ()
            ], code
        committed = self.offsets.group_offsets(group_id)
        if topics is None:
            wanted: dict[str, list[int]] = {}
            for t, p in sorted(committed):
                wanted.setdefault(t, []).append(p)
        else:
            wanted = {t["name"]: list(t["partition_indexes"]) for t in topics}
        out = []
        for name, parts in wanted.items():
            rows = []
            for p in parts:
                om = committed.get((name, p))
                rows.append(
                    {
                        "partition_index": p,
                        "committed_offset": om.offset if om else -1,
                        "committed_leader_epoch": om.leader_epoch if om else -1,
                        "metadata": om.metadata if om else "",
                        "error_code": NONE,
                    }
                )
            out.append({"name": name, "partitions": rows})
        return out, NONE

    # -- DescribeGroups / ListGroups ------------------------------------------------------------

    def describe(self, version: int, req: Message) -> Message:
        out = []
        for gid in req["groups"]:
            if (code := self.offsets.coordinator_error(gid)) != NONE:
                out.append(
                    {
                        "error_code": code,
                        "group_id": gid,
                        "group_state": "",
                        "protocol_type": "",
                        "protocol_data": "",
                        "members": [],
                        "authorized_operations": -2147483648,
                    }
                )
                continue
            group = self._group(gid)
            if group is None:
                state = "Empty" if gid in self.offsets.groups() else "Dead"
                out.append(
                    {
                        "error_code": NONE,
                        "group_id": gid,
                        "group_state": state,
                        "protocol_type": "",
                        "protocol_data": "",
                        "members": [],
                        "authorized_operations": -2147483648,
                    }
                )
                continue
            members = []
            for m in group.members.values():
                meta = next((md for n, md in m.protocols if n == group.protocol), b"")
                members.append(
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": meta,
                        "member_assignment": m.assignment,
                    }
                )
            out.append(
                {
                    "error_code": NONE,
                    "group_id": gid,
                    "group_state": group.state,
                    "protocol_type": group.protocol_type or "",
                    "protocol_data": group.protocol or "",
                    "members": members,
                    "authorized_operations": -2147483648,
                }
            )
        return {"throttle_time_ms": 0, "groups": out}

    def list(self, version: int, req: Message) -> Message:
        states = {s.lower() for s in req.get("states_filter") or []}
        types = set(req.get("types_filter") or [])
        rows = {gid: (g.protocol_type or "consumer", g.state) for gid, g in self.groups.items()}
        for gid in self.offsets.groups():
            rows.setdefault(gid, ("consumer", EMPTY))
        out = []
        for gid, (ptype, state) in sorted(rows.items()):
            if states and state.lower() not in states:
                continue
            if types and "classic" not in types and "consumer" not in types:
                continue
            out.append({"group_id": gid, "protocol_type": ptype, "group_state": state, "group_type": "classic"})
        return {"throttle_time_ms": 0, "error_code": NONE, "groups": out}


def group_api_handlers(groups: GroupCoordinator) -> dict[int, Handler]:
    """A listener's handlers, by API key, of the group APIs answered by ``groups``: OffsetCommit,
    OffsetFetch, JoinGroup, Heartbeat, LeaveGroup, SyncGroup, DescribeGroups, ListGroups
    (FindCoordinator is the listener's own: it knows where coordinators are)."""

    async def join_group(version: int, req: Message, state: ConnState) -> Message:
        host = state.peer[0] if isinstance(state.peer, tuple) else ""
        out = await groups.join(version, req, state.client_id, f"/{host}")
        out["throttle_time_ms"] = 0
        return out

    async def sync_group(version: int, req: Message, state: ConnState) -> Message:
        out = await groups.sync(version, req)
        out["throttle_time_ms"] = 0
        return out

    async def heartbeat(version: int, req: Message, state: ConnState) -> Message:
        return {"throttle_time_ms": 0, **groups.heartbeat(version, req)}

    async def leave_group(version: int, req: Message, state: ConnState) -> Message:
        return {"throttle_time_ms": 0, **groups.leave(version, req)}

    async def offset_commit(version: int, req: Message, state: ConnState) -> Message:
        return await groups.commit(version, req)

    async def offset_fetch(version: int, req: Message, state: ConnState) -> Message:
        if version >= 8:
            out = []
            for g in req["groups"]:
                topics, code = groups.fetch_offsets(g["group_id"], g["topics"])
                out.append({"group_id": g["group_id"], "topics": topics, "error_code": code})
            return {"throttle_time_ms": 0, "groups": out}
        topics, code = groups.fetch_offsets(req["group_id"], req["topics"])
        return {"throttle_time_ms": 0, "topics": topics, "error_code": code}

    async def describe_groups(version: int, req: Message, state: ConnState) -> Message:
        return groups.describe(version, req)

    async def list_groups(version: int, req: Message, state: ConnState) -> Message:
        return groups.list(version, req)

    return {
        8: offset_commit,
        9: offset_fetch,
        11: join_group,
        12: heartbeat,
        13: leave_group,
        14: sync_group,
        15: describe_groups,
        16: list_groups,
    }
