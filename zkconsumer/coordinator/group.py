"""One consumer group as Kafka 2.x's GroupMetadata keeps it: members, generation, protocol, leader, and the state
machine Empty → PreparingRebalance → CompletingRebalance → Stable (→ Dead).

Pure logic: no sockets, no threads, no clocks (times are passed in), so every transition is unit-tested. The
manager (manager.py) holds the lock, the timers and the waiting requests; the join phase's deadline and initial
delays are delayed_join.py's.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from zkconsumer import runtime
from zkconsumer.coordinator.store import GroupSnapshot, MemberSnapshot
from zkconsumer.errors import IllegalArgument, ZkConsumerError


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


#: Kafka's GroupState.validPreviousStates.
VALID_PREVIOUS = {
    GroupState.PREPARING_REBALANCE: {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY},
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
    GroupState.DEAD: set(GroupState),
}


class IllegalStateTransition(ZkConsumerError, RuntimeError):
    pass


@dataclass
class Member:
    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    group_instance_id: str | None = None
    assignment: bytes = b""
    awaiting_join: bool = False
    awaiting_sync: bool = False
    is_new: bool = False
    last_heartbeat_ms: int = 0

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise IllegalArgument(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """Kafka's MemberMetadata.vote: the first of this member's protocols that every member supports."""
        for name in self.protocol_names:
            if name in candidates:
                return name
        raise IllegalArgument(f"member {self.member_id} supports none of {sorted(candidates)}")

    def session_expired(self, now_ms: int) -> bool:
        return now_ms - self.last_heartbeat_ms > self.session_timeout_ms


class RandomBits(Protocol):
    """What a member id draws from: ``random.Random``'s ``getrandbits`` (``runtime.Random()``)."""

    def getrandbits(self, k: int) -> int: ...


def new_member_id(client_id: str, rng: RandomBits | None = None) -> str:
    """Kafka's ``clientId + "-" + UUID``: a random (version 4) UUID, drawn from ``rng`` when given (the
    coordinator's, from the runtime seam: seeded in a simulation, so a seed names the same members)."""
    if rng is None:
        return f"{client_id}-{runtime.uuid4()}"
    return f"{client_id}-{uuid.UUID(int=rng.getrandbits(128), version=4)}"


@dataclass
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    #: Member ids handed out with MEMBER_ID_REQUIRED (JoinGroup v4+, KIP-394) and not yet back with them.
    pending_members: dict[str, int] = field(default_factory=dict)
    state_timestamp_ms: int = -1
    #: When the group last became Empty (offsets expire counted from then, Kafka 2.1+).
    empty_since_ms: int | None = None

    # ------------------------------------------------------------------------------------------- states
    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition(self, to: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[to]:
            raise IllegalStateTransition(f"group {self.group_id} cannot go from {self.state.value} to {to.value}")
        self.state = to
        self.state_timestamp_ms = now_ms
        self.empty_since_ms = now_ms if to is GroupState.EMPTY else None

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # ------------------------------------------------------------------------------------------ members
    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member_id == self.leader_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def static_member(self, instance_id: str | None) -> Member | None:
        if instance_id is None:
            return None
        return next((m for m in self.members.values() if m.group_instance_id == instance_id), None)

    def is_static_member_fenced(self, instance_id: str | None, member_id: str) -> bool:
        """KIP-345: ``instance_id`` belongs to a static member now known under another member id (it restarted)."""
        member = self.static_member(instance_id)
        return member is not None and member.member_id != member_id

    def replace_static_member(self, instance_id: str, new_member_id: str) -> tuple[Member, str]:
        """A static member back under a new member id (Kafka's ``replaceStaticMember``): it keeps its assignment,
        its protocols and its place as leader. Returns the member and its old id."""
        member = self.static_member(instance_id)
        if member is None:
            raise IllegalArgument(f"group {self.group_id} has no static member {instance_id}")
        old_id = member.member_id
        del self.members[old_id]
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_member_id
        return member, old_id

    def all_joined(self) -> bool:
        """Kafka's hasAllMembersJoined: every known member sent its JoinGroup, no member id outstanding."""
        return all(m.awaiting_join for m in self.members.values()) and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ---------------------------------------------------------------------------------------- protocols
    def candidate_protocols(self) -> set[str]:
        members = list(self.members.values())
        if not members:
            return set()
        common = set(members[0].protocol_names)
        for m in members[1:]:
            common &= set(m.protocol_names)
        return common

    def supports(self, protocol_type: str, protocols: Iterable[str]) -> bool:
        """Kafka's supportsProtocols: an empty group takes any non-empty protocol list; otherwise the type must
        match and one protocol must be one every member supports."""
        names = set(protocols)
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """Kafka's selectProtocol: each member votes for its preferred candidate, most votes wins; a tie goes to
        the protocol the earliest member prefers (Kafka leaves ties to a hash map's order)."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = m.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])  # dict order = first voter first: stable ties

    def init_next_generation(self, now_ms: int) -> None:
        """Kafka's initNextGeneration: a new generation with the chosen protocol, or Empty without members."""
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition(GroupState.EMPTY, now_ms)

    def subscribed_topics(self) -> frozenset[str] | None:
        """Kafka 2.4+'s GroupMetadata.computeSubscribedTopics (KIP-496): the union of the members' subscriptions
        for a "consumer" group with members and a protocol, None when unknown (other protocol types, or a
        subscription that does not parse). Offset expiry uses it for Stable groups."""
        if self.protocol_type != "consumer" or not self.members or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            found = consumer_subscription_topics(m.metadata(self.protocol_name))
            if found is None:
                return None
            topics |= found
        return frozenset(topics)

    # ------------------------------------------------------------------------------------------ storing
    def snapshot(self) -> GroupSnapshot:
        members = tuple(MemberSnapshot(m.member_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                                       m.session_timeout_ms,
                                       m.metadata(self.protocol_name) if self.protocol_name else b"",
                                       m.assignment, m.group_instance_id)
                        for m in self.members.values())
        return GroupSnapshot(self.protocol_type or "", self.generation, self.protocol_name, self.leader_id,
                             self.state_timestamp_ms, members)

    @classmethod
    def restore(cls, group_id: str, snapshot: GroupSnapshot | None, now_ms: int) -> Group:
        """A group loaded from the store, as Kafka's ``GroupMetadata.loadGroup``: Stable with its stored members,
        generation, protocol, leader and assignments, or Empty when the record has no members (or there is only
        offsets). A loaded member supports just the protocol it was chosen with, carrying its stored subscription;
        the coordinator schedules every loaded member's session from the load (Kafka's ``onGroupLoaded``), so a
        member that heartbeats after a broker restart finds its generation and keeps its partitions, and one that
        died meanwhile is removed one session timeout after the load."""
        group = cls(group_id, state_timestamp_ms=now_ms, empty_since_ms=now_ms)
        if snapshot is None:
            return group
        group.generation = snapshot.generation
        group.protocol_type = snapshot.protocol_type or None
        if snapshot.current_state_timestamp_ms >= 0:
            # Written when the group became Empty (or Stable): an Empty group's offsets' retention counts from
            # then, not from this restart.
            group.state_timestamp_ms = snapshot.current_state_timestamp_ms
        if not snapshot.members or snapshot.protocol is None:
            group.empty_since_ms = group.state_timestamp_ms
            return group
        group.state, group.empty_since_ms = GroupState.STABLE, None
        group.protocol_name = snapshot.protocol
        for m in snapshot.members:
            group.members[m.member_id] = Member(
                m.member_id, m.client_id, m.client_host, m.rebalance_timeout_ms, m.session_timeout_ms,
                group.protocol_type or "", [(snapshot.protocol, m.subscription)], m.group_instance_id,
                assignment=m.assignment, last_heartbeat_ms=now_ms)
        group.leader_id = snapshot.leader if snapshot.leader in group.members else next(iter(group.members))
        return group


def consumer_subscription_topics(metadata: bytes) -> frozenset[str] | None:
    """The topics of a consumer protocol Subscription (``version:int16, topics:[string], ...``): every version
    starts with version 0's fields, which is how Kafka reads it too. None when the bytes do not parse."""
    try:
        count = int.from_bytes(metadata[2:6], "big", signed=True)
        if len(metadata) < 6 or count < 0:
            return None
        pos, topics = 6, set()
        for _ in range(count):
            n = int.from_bytes(metadata[pos:pos + 2], "big", signed=True)
            if n < 0 or pos + 2 + n > len(metadata):
                return None
            topics.add(metadata[pos + 2:pos + 2 + n].decode("utf-8"))
            pos += 2 + n
        return frozenset(topics)
    except UnicodeDecodeError:
        return None
