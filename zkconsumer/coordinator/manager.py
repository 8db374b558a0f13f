"""GroupCoordinator: Kafka 2.x's group coordinator for the groups this broker coordinates.

The broker serves each connection on its own thread, so a JoinGroup or SyncGroup simply blocks its thread until
its answer is ready: it waits on a :class:`~.purgatory.Pending` that whatever settles it completes (Kafka parks it
in a purgatory; same observable behaviour). One lock guards every group. Every timeout is a keyed timer
(:class:`~.timer.KeyedTimer`): a group's join phase (:class:`~.delayed_join.DelayedJoins`: initial delay,
rebalance timeout), each member's session, each KIP-394 member id handed out, the offsets retention check.
Transitions follow GroupCoordinator.scala (Kafka 2.8): the names of the methods below are Kafka's where they do
the same thing.

Time comes from an injected :class:`~.clock.Clock` (Kafka's ``Time``): the wall clock by default, with one thread
that sleeps until the next timer is due; tests pass a :class:`~.clock.ManualClock`, start the coordinator without
that thread and call :meth:`GroupCoordinator.tick` themselves, which runs the timers due at the clock's time.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from zkconsumer import runtime
from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.coordinator.admin import GroupAdmin
from zkconsumer.coordinator.clock import Clock, SystemClock
from zkconsumer.coordinator.delayed_join import DelayedJoins
from zkconsumer.coordinator.group import Group, GroupState, Member, new_member_id
from zkconsumer.coordinator.purgatory import Pending, Purgatory
from zkconsumer.coordinator.retention import OffsetRetention
from zkconsumer.coordinator.sessions import Sessions
from zkconsumer.coordinator.store import CommittedOffset, MemoryOffsetStore, OffsetStore
from zkconsumer.coordinator.timer import KeyedTimer
from zkconsumer.errors import KafkaCode
from zkconsumer.javacompat import kafka_abs, string_hash

log = logging.getLogger(__name__)

# Kafka error codes (kafka.errors has them as classes; plain ints keep the answers readable).

OFFSETS_TOPIC = "__consumer_offsets"


_SYSTEM_CLOCK = SystemClock()


def now_ms() -> int:
    """The wall clock in ms (for importers outside the coordinator; the coordinator reads ``self.clock``)."""
    return _SYSTEM_CLOCK.now_ms()


@dataclass(frozen=True)
class CoordinatorConfig:
    """Kafka's broker settings for groups, with Kafka's defaults."""

    offsets_topic_num_partitions: int = 50
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600000


@dataclass
class JoinResult:
    error: int
    member_id: str = ""
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass
class SyncResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


def partition_for(group_id: str, num_partitions: int = 50) -> int:
    """``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions``: the ``__consumer_offsets`` partition whose
    leader coordinates the group."""
    return kafka_abs(string_hash(group_id)) % num_partitions


class GroupCoordinator(GroupAdmin):
    def __init__(self, config: CoordinatorConfig | None = None, store: OffsetStore | None = None,
                 clock: Clock | None = None) -> None:
        self.config = config or CoordinatorConfig()
        self.store: OffsetStore = store or MemoryOffsetStore()
        #: Every reading of time in the coordinator; the wall clock unless a test injects a ManualClock.
        self.clock: Clock = clock or _SYSTEM_CLOCK
        self.groups: dict[str, Group] = {}
        self._lock = runtime.RLock()
        self._ids = runtime.Random()  # member ids' UUIDs: seeded in a simulation
        #: Every timeout, keyed by what it belongs to: a group's join, a member's session, a pending member id,
        #: the retention check.
        self.timer = KeyedTimer(self.clock)
        self.delayed_joins = DelayedJoins(self.timer, self.config.group_initial_rebalance_delay_ms,
                                          self._on_complete_join)
        self.sessions = Sessions(self.timer, self.groups, self._remove_member_and_update_group,
                                 self.delayed_joins.try_complete)
        self.retention = OffsetRetention(self.store, self.groups, self._lock, self.clock, self.timer,
                                         self.config.offsets_retention_check_interval_ms)
        #: JoinGroups waiting for their group's join to complete, and followers' SyncGroups waiting for the
        #: leader's, by (group, member).
        self._parked_joins: Purgatory[tuple[str, str], JoinResult] = Purgatory(self._lock)
        self._parked_syncs: Purgatory[tuple[str, str], SyncResult] = Purgatory(self._lock)
        self._stop = runtime.Event()
        self._loaded = runtime.Event()
        self._load_failed = False  # the store did not load: the coordinator answers COORDINATOR_NOT_AVAILABLE
        self._timer_thread: runtime.Task | None = None
        #: Requests handled, by group and API name (what ``zkconsumer compare`` reads).
        self.requests: Counter[tuple[str, str]] = Counter()

    # ------------------------------------------------------------------------------------------ lifecycle
    def start(self, timers: bool = True) -> GroupCoordinator:
        """Load the store (in the background) and, unless ``timers`` is False, start the thread that runs the
        timers when they are due. Without it nothing expires or completes on its own: the caller (a test with a
        ManualClock) drives time with :meth:`tick`."""
        first_retention_check_ms = self.clock.now_ms() + self.config.offsets_retention_check_interval_ms
        if timers:
            self._timer_thread = runtime.spawn(self._run_timers, name="group-coordinator-timers")
        runtime.spawn(self._load, first_retention_check_ms, name="group-coordinator-load")
        return self

    def _load(self, first_retention_check_ms: int) -> None:
        try:
            self.store.load()
            now = self.clock.now_ms()
            with self._lock:
                for gid, snapshot in self.store.groups().items():
                    if gid not in self.groups:
                        self.groups[gid] = group = Group.restore(gid, snapshot, now)
                        self._on_group_loaded(group, now)
        except Exception:  # noqa: BLE001 - coordinator unusable: say why, answer COORDINATOR_NOT_AVAILABLE
            log.exception("loading the group coordinator's store failed")
            self._load_failed = True
        finally:
            # offsets expire once loaded: a check that fell due during the load runs at the next timer run
            self.retention.start(first_retention_check_ms)
            self._loaded.set()

    def _on_group_loaded(self, group: Group, now: int) -> None:
        """Kafka's ``onGroupLoaded``: every loaded member's session runs from the load."""
        if group.members:
            log.info("loaded group %s in generation %d (%s, %d members, leader %s)", group.group_id,
                     group.generation, group.protocol_name, len(group.members), group.leader_id)
        for member in group.members.values():
            self.sessions.heard_from(group, member, now)

    @property
    def loaded(self) -> bool:
        return self._loaded.is_set()

    def stop(self) -> None:
        self._stop.set()
        with self._lock:  # blocked requests, and any that would block from now on, are answered at once
            self._parked_joins.close(lambda key: JoinResult(KafkaCode.COORDINATOR_NOT_AVAILABLE, key[1]))
            self._parked_syncs.close(lambda key: SyncResult(KafkaCode.COORDINATOR_NOT_AVAILABLE))
        self.timer.wake()
        if self._timer_thread is not None:
            self._timer_thread.join(5)

    def count(self, group_id: str, api: str) -> None:
        with self._lock:
            self.requests[(group_id, api)] += 1

    def _not_ready(self) -> int | None:
        if self._stop.is_set():
            return KafkaCode.COORDINATOR_NOT_AVAILABLE
        if not self._loaded.is_set():
            return KafkaCode.COORDINATOR_LOAD_IN_PROGRESS
        if self._load_failed:
            return KafkaCode.COORDINATOR_NOT_AVAILABLE
        return None

    # --------------------------------------------------------------------------------------------- timers
    def _run_timers(self) -> None:
        while not self._stop.is_set():
            self.timer.wait_for_due(max_wait_s=1.0)
            if not self._stop.is_set():
                self.tick()

    def tick(self) -> None:
        """Run the timers due at the clock's current time, once: expire sessions and pending member ids, complete
        joins whose deadline passed (initial rebalance delay, rebalance timeout), and expire offsets when
        ``offsets.retention.check.interval.ms`` has passed since the last check (once loaded).

        The timer thread calls this when a timer is due; tests that start the coordinator with ``timers=False``
        call it after advancing their ManualClock (Kafka's ``MockTimer.advanceClock``)."""
        with self._lock:
            self.timer.run_due(self.clock.now_ms())

    def expire_offsets(self, now: int | None = None) -> dict[str, list[TopicPartition]]:
        """Offsets of groups Empty for ``offsets.retention.minutes`` (Kafka 2.1+), via the store's tombstones."""
        return self.retention.expire(now)

    # ------------------------------------------------------------------------------------------ JoinGroup
    def join(self, group_id: str, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
             session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
             protocols: list[tuple[str, bytes]], require_known_member_id: bool) -> JoinResult:
        self.count(group_id, "JoinGroup")
        error = self._not_ready()
        if error is not None:
            return JoinResult(error, member_id)
        if not group_id:
            return JoinResult(KafkaCode.INVALID_GROUP_ID, member_id)
        if not (self.config.group_min_session_timeout_ms <= session_timeout_ms
                <= self.config.group_max_session_timeout_ms):
            return JoinResult(KafkaCode.INVALID_SESSION_TIMEOUT, member_id)
        with self._lock:
            now = self.clock.now_ms()
            group = self.groups.get(group_id)
            if group is None:
                if member_id:
                    return JoinResult(KafkaCode.UNKNOWN_MEMBER_ID, member_id)
                group = self.groups[group_id] = Group(group_id, state_timestamp_ms=now, empty_since_ms=now)
            if group.is_(GroupState.DEAD):
                # the group was removed meanwhile (e.g. deleted): the client finds the coordinator again
                return JoinResult(KafkaCode.COORDINATOR_NOT_AVAILABLE, member_id)
            if not group.supports(protocol_type, (name for name, _ in protocols)):
                return JoinResult(KafkaCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
            if not member_id and group.static_member(group_instance_id) is not None:
                return self._static_member_rejoins(group, group_instance_id, client_id, client_host,
                                                   session_timeout_ms, rebalance_timeout_ms, protocols, now)
            if member_id and group.is_static_member_fenced(group_instance_id, member_id):
                return JoinResult(KafkaCode.FENCED_INSTANCE_ID, member_id)
            if not member_id:
                member_id = new_member_id(client_id, self._ids)
                if require_known_member_id and group_instance_id is None:
                    # KIP-394: hand the id out and count it as a pending member until it comes back
                    self.sessions.add_pending(group, member_id, now, session_timeout_ms)
                    return JoinResult(KafkaCode.MEMBER_ID_REQUIRED, member_id)
                member = Member(member_id, client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                                protocol_type, protocols, group_instance_id, is_new=True, last_heartbeat_ms=now)
                pending = self._add_member_and_rebalance(group, member, now)
            elif member_id in group.pending_members:
                del group.pending_members[member_id]
                member = Member(member_id, client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                                protocol_type, protocols, group_instance_id, is_new=True, last_heartbeat_ms=now)
                pending = self._add_member_and_rebalance(group, member, now)
            elif not group.has(member_id):
                return JoinResult(KafkaCode.UNKNOWN_MEMBER_ID, member_id)
            else:
                member = group.members[member_id]
                if group.is_(GroupState.PREPARING_REBALANCE):
                    pending = self._update_member_and_rebalance(group, member, protocols, now)
                elif group.is_(GroupState.COMPLETING_REBALANCE):
                    if member.matches(protocols):  # a retried join of the current generation: same answer
                        return self._join_answer(group, member_id)
                    pending = self._update_member_and_rebalance(group, member, protocols, now)
                elif group.is_(GroupState.STABLE):
                    if group.is_leader(member_id) or not member.matches(protocols):
                        # the leader's join (metadata changed) or new protocols: a new generation
                        pending = self._update_member_and_rebalance(group, member, protocols, now)
                    else:  # a follower rejoining the same generation: just the current answer
                        self.sessions.heard_from(group, member, now)
                        return self._join_answer(group, member_id)
                else:  # Empty: the member left or expired
                    return JoinResult(KafkaCode.UNKNOWN_MEMBER_ID, member_id)
            self.delayed_joins.try_complete(group, now)
            return pending.wait()

    def _static_member_rejoins(self, group: Group, instance_id: str, client_id: str, client_host: str,
                               session_timeout_ms: int, rebalance_timeout_ms: int, protocols: list[tuple[str, bytes]],
                               now: int) -> JoinResult:
        """KIP-345, as Kafka's ``updateStaticMemberAndRebalance``: a static member restarted (a join with no member id
        and a known ``group.instance.id``). It takes a new member id and keeps its assignment. Its old id is
        fenced (FENCED_INSTANCE_ID), and the join or sync the old id had in flight ends with that error. In a Stable
        group whose protocol does not change, nothing rebalances: the member gets the current generation and
        leader, and its SyncGroup answers its assignment. Otherwise the rebalance goes on with it."""
        new_id = new_member_id(client_id, self._ids)
        member, old_id = group.replace_static_member(instance_id, new_id)
        key = (group.group_id, old_id)
        self._parked_joins.complete(key, JoinResult(KafkaCode.FENCED_INSTANCE_ID, old_id))
        self._parked_syncs.complete(key, SyncResult(KafkaCode.FENCED_INSTANCE_ID))
        self.sessions.forget(*key)
        log.info("static member %s of group %s is back as %s (was %s)", instance_id, group.group_id, new_id, old_id)
        member.client_id, member.client_host = client_id, client_host
        member.session_timeout_ms, member.rebalance_timeout_ms = session_timeout_ms, rebalance_timeout_ms
        self.sessions.heard_from(group, member, now)
        if group.is_(GroupState.STABLE):
            previous = member.protocols
            member.protocols = protocols
            if group.select_protocol() == group.protocol_name:
                self._store_group(group)
                return self._join_answer(group, new_id)
            member.protocols = previous
        pending = self._update_member_and_rebalance(group, member, protocols, now)
        self.delayed_joins.try_complete(group, now)
        return pending.wait()

    def _add_member_and_rebalance(self, group: Group, member: Member, now: int) -> Pending[JoinResult]:
        group.add(member)
        member.awaiting_join = True
        self.delayed_joins.member_added(group.group_id)
        pending = self._parked_joins.park((group.group_id, member.member_id))
        self._maybe_prepare_rebalance(group, now, f"adding new member {member.member_id}")
        return pending

    def _update_member_and_rebalance(self, group: Group, member: Member, protocols: list[tuple[str, bytes]],
                                     now: int) -> Pending[JoinResult]:
        member.protocols = protocols
        member.awaiting_join = True
        member.last_heartbeat_ms = now
        key = (group.group_id, member.member_id)
        # a join replaced by a newer one of the same member
        self._parked_joins.complete(key, JoinResult(KafkaCode.REBALANCE_IN_PROGRESS, member.member_id))
        pending = self._parked_joins.park(key)
        self._maybe_prepare_rebalance(group, now, f"updating metadata for member {member.member_id}")
        return pending

    def _maybe_prepare_rebalance(self, group: Group, now: int, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, now, reason)

    def _prepare_rebalance(self, group: Group, now: int, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            # waiting SyncGroups learn that the generation is over; the session of each member whose wait ends
            # here starts again now (Kafka's propagateAssignment → completeAndScheduleNextHeartbeatExpiration).
            # Restarted from its last heartbeat instead, every member that got its JoinGroup answer at the instant
            # the leader did expired in the same millisecond as the silent leader whose expiry ended the wait: the
            # simulator found a group of three emptied by one dead leader (issue 54)
            for m in group.members.values():
                m.awaiting_sync = False
                if self._parked_syncs.complete((group.group_id, m.member_id),
                                               SyncResult(KafkaCode.REBALANCE_IN_PROGRESS)):
                    self.sessions.heard_from(group, m, now)
                else:
                    self.sessions.restart(group, m)
        was_empty = group.is_(GroupState.EMPTY)
        group.transition(GroupState.PREPARING_REBALANCE, now)
        self.delayed_joins.begin(group, now, from_empty=was_empty)
        log.info("preparing to rebalance group %s in state %s with old generation %d (reason: %s)",
                 group.group_id, group.state.value, group.generation, reason)

    def _on_complete_join(self, group: Group, now: int) -> None:
        """The join phase is over (DelayedJoins decided): the next generation, or Empty."""
        for m in group.not_yet_rejoined():  # did not rejoin within the rebalance timeout
            log.info("member %s of group %s did not rejoin in time: removed", m.member_id, group.group_id)
            group.remove(m.member_id)
            self.sessions.forget(group.group_id, m.member_id)
        group.pending_members.clear()  # their timers find nothing to do
        group.init_next_generation(now)
        if group.is_(GroupState.EMPTY):
            log.info("group %s with generation %d is now empty", group.group_id, group.generation)
            self._store_group(group)
        else:
            log.info("stabilized group %s generation %d (protocol %s) with %d members", group.group_id,
                     group.generation, group.protocol_name, len(group.members))
            for m in group.members.values():
                m.awaiting_join = False
                m.is_new = False
                self.sessions.heard_from(group, m, now)
                self._parked_joins.complete((group.group_id, m.member_id), self._join_answer(group, m.member_id))

    def _join_answer(self, group: Group, member_id: str) -> JoinResult:
        members = []
        if group.is_leader(member_id):
            members = [(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                       for m in group.members.values()]
        return JoinResult(KafkaCode.NONE, member_id, group.generation, group.protocol_type, group.protocol_name,
                          group.leader_id or "", members)

    # ------------------------------------------------------------------------------------------ SyncGroup
    def sync(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None,
             protocol_type: str | None, protocol_name: str | None,
             assignments: Mapping[str, bytes]) -> SyncResult:
        self.count(group_id, "SyncGroup")
        error = self._not_ready()
        if error is not None:
            return SyncResult(error)
        with self._lock:
            group = self.groups.get(group_id)
            if group is None:
                return SyncResult(KafkaCode.UNKNOWN_MEMBER_ID)
            if group.is_(GroupState.DEAD):
                return SyncResult(KafkaCode.COORDINATOR_NOT_AVAILABLE)
            if group.is_static_member_fenced(group_instance_id, member_id):
                return SyncResult(KafkaCode.FENCED_INSTANCE_ID)
            if not group.has(member_id):
                return SyncResult(KafkaCode.UNKNOWN_MEMBER_ID)
            if generation != group.generation:
                return SyncResult(KafkaCode.ILLEGAL_GENERATION)
            if (protocol_type is not None and protocol_type != group.protocol_type) or \
                    (protocol_name is not None and protocol_name != group.protocol_name):
                return SyncResult(KafkaCode.INCONSISTENT_GROUP_PROTOCOL)
            if group.is_(GroupState.EMPTY):
                return SyncResult(KafkaCode.UNKNOWN_MEMBER_ID)
            if group.is_(GroupState.PREPARING_REBALANCE):
                return SyncResult(KafkaCode.REBALANCE_IN_PROGRESS)
            member = group.members[member_id]
            if group.is_(GroupState.STABLE):
                self.sessions.heard_from(group, member, self.clock.now_ms())
                return SyncResult(KafkaCode.NONE, group.protocol_type, group.protocol_name, member.assignment)
            # CompletingRebalance: a follower waits for the leader's assignment; the leader's releases them all
            member.awaiting_sync = True
            if not group.is_leader(member_id):
                # answered by the leader's SyncGroup, a new rebalance, or its removal or fencing
                return self._parked_syncs.park((group_id, member_id)).wait()
            now = self.clock.now_ms()
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            group.transition(GroupState.STABLE, now)
            for m in group.members.values():
                m.awaiting_sync = False
                self.sessions.heard_from(group, m, now)
                self._parked_syncs.complete((group_id, m.member_id), SyncResult(
                    KafkaCode.NONE, group.protocol_type, group.protocol_name, m.assignment))
            self._store_group(group)
            return SyncResult(KafkaCode.NONE, group.protocol_type, group.protocol_name, member.assignment)

    # ------------------------------------------------------------------------------------------ Heartbeat
    def heartbeat(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None = None) -> int:
        self.count(group_id, "Heartbeat")
        error = self._not_ready()
        if error is not None:
            return error
        with self._lock:
            group = self.groups.get(group_id)
            if group is None:
                return KafkaCode.UNKNOWN_MEMBER_ID
            if group.is_(GroupState.DEAD):
                return KafkaCode.COORDINATOR_NOT_AVAILABLE
            if group.is_static_member_fenced(group_instance_id, member_id):
                return KafkaCode.FENCED_INSTANCE_ID
            if group.is_(GroupState.EMPTY) or not group.has(member_id):
                return KafkaCode.UNKNOWN_MEMBER_ID
            if generation != group.generation:
                return KafkaCode.ILLEGAL_GENERATION
            self.sessions.heard_from(group, group.members[member_id], self.clock.now_ms())
            if group.is_(GroupState.PREPARING_REBALANCE):
                return KafkaCode.REBALANCE_IN_PROGRESS
            return KafkaCode.NONE  # Stable, and CompletingRebalance (a member may heartbeat before its SyncGroup)

    # ----------------------------------------------------------------------------------------- LeaveGroup
    def leave(self, group_id: str, members: Iterable[tuple[str, str | None]]) -> tuple[int, list[tuple[str, str | None,
                                                                                                          int]]]:
        self.count(group_id, "LeaveGroup")
        error = self._not_ready()
        if error is not None:
            return error, []
        with self._lock:
            group = self.groups.get(group_id)
            if group is None or group.is_(GroupState.DEAD):
                return (KafkaCode.UNKNOWN_MEMBER_ID if group is None else KafkaCode.COORDINATOR_NOT_AVAILABLE), []
            now = self.clock.now_ms()
            out = []
            for member_id, instance_id in members:
                if not member_id and instance_id is not None:
                    m = group.static_member(instance_id)
                    member_id = m.member_id if m is not None else ""
                if member_id in group.pending_members:
                    del group.pending_members[member_id]
                    self.delayed_joins.try_complete(group, now)
                    out.append((member_id, instance_id, KafkaCode.NONE))
                elif instance_id is not None and group.is_static_member_fenced(instance_id, member_id):
                    out.append((member_id, instance_id, KafkaCode.FENCED_INSTANCE_ID))
                elif group.has(member_id):
                    log.info("member %s has left group %s", member_id, group_id)
                    self._remove_member_and_update_group(group, group.members[member_id], now)
                    out.append((member_id, instance_id, KafkaCode.NONE))
                else:
                    out.append((member_id, instance_id, KafkaCode.UNKNOWN_MEMBER_ID))
            return KafkaCode.NONE, out

    def _remove_member_and_update_group(self, group: Group, member: Member, now: int) -> None:
        key = (group.group_id, member.member_id)
        self._parked_joins.complete(key, JoinResult(KafkaCode.UNKNOWN_MEMBER_ID, member.member_id))
        self._parked_syncs.complete(key, SyncResult(KafkaCode.UNKNOWN_MEMBER_ID))
        self.sessions.forget(*key)
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, now, f"removing member {member.member_id}")
        # as Kafka's tryCompleteElseWatch: the last member gone, the join completes now (the group is Empty)
        self.delayed_joins.try_complete(group, now)

    # -------------------------------------------------------------------------------------------- offsets
    def commit_offsets(self, group_id: str, generation: int, member_id: str,
                       offsets: Mapping[TopicPartition, CommittedOffset], group_instance_id: str | None = None) -> int:
        """Kafka's handleCommitOffsets: a member's commit must carry the current generation; generation -1 with
        no member id is a "simple" commit, allowed while the group has no members (e.g. a 0.8 group keeping its
        offsets in the broker, or tools)."""
        self.count(group_id, "OffsetCommit")
        error = self._not_ready()
        if error is not None:
            return error
        if not group_id:
            return KafkaCode.INVALID_GROUP_ID
        with self._lock:
            group = self.groups.get(group_id)
            if group is None:
                if generation >= 0:
                    return KafkaCode.ILLEGAL_GENERATION
                now = self.clock.now_ms()
                group = self.groups[group_id] = Group(group_id, state_timestamp_ms=now, empty_since_ms=now)
            if group.is_(GroupState.DEAD):
                return KafkaCode.COORDINATOR_NOT_AVAILABLE
            if group.is_static_member_fenced(group_instance_id, member_id):
                return KafkaCode.FENCED_INSTANCE_ID
            if generation < 0 and group.is_(GroupState.EMPTY):
                pass  # simple commit
            elif group.is_(GroupState.COMPLETING_REBALANCE):
                return KafkaCode.REBALANCE_IN_PROGRESS
            elif not group.has(member_id):
                return KafkaCode.UNKNOWN_MEMBER_ID
            elif generation != group.generation:
                return KafkaCode.ILLEGAL_GENERATION
            else:
                self.sessions.heard_from(group, group.members[member_id], self.clock.now_ms())
            self.store.commit(group_id, offsets)
            return KafkaCode.NONE

    def fetch_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None
                      ) -> tuple[int, dict[TopicPartition, CommittedOffset]]:
        self.count(group_id, "OffsetFetch")
        error = self._not_ready()
        if error is not None:
            return error, {}
        return KafkaCode.NONE, self.store.fetch(group_id, None if partitions is None else list(partitions))

    def _store_group(self, group: Group) -> None:
        try:
            self.store.store_group(group.group_id, group.snapshot())
        except Exception:  # noqa: BLE001 - the group works on; its metadata is stored at the next generation
            log.warning("storing the metadata of group %s failed", group.group_id, exc_info=True)
