"""The interface between the group coordinator and where it keeps committed offsets and group metadata.

Two implementations: ``MemoryOffsetStore`` (here; a broker without persistence, and unit tests) and the
``__consumer_offsets`` topic in the broker's own log (offsets_log.py), which survives a restart. The coordinator
validates membership and generations; a store only keeps what it is given, latest value wins.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from zkconsumer import runtime
from zkconsumer.assignment.assignors import TopicPartition


@dataclass(frozen=True)
class CommittedOffset:
    """One committed offset, as Kafka's OffsetAndMetadata."""

    offset: int
    metadata: str = ""
    commit_timestamp_ms: int = -1
    #: Set only by OffsetCommit v1 (a per-partition timestamp) and v2-v4 (retention_time): -1 means "by group rule".
    expire_timestamp_ms: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True)
class MemberSnapshot:
    """A member as the GroupMetadata value record stores it."""

    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes
    group_instance_id: str | None = None


@dataclass(frozen=True)
class GroupSnapshot:
    """A group's metadata as written after each completed rebalance (Kafka's GroupMetadata value)."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int = -1
    members: tuple[MemberSnapshot, ...] = field(default_factory=tuple)


class OffsetStore(Protocol):
    """What the coordinator needs from its storage. Calls come from many connection threads: implementations lock."""

    def load(self) -> None:
        """Read everything stored (at broker start); the coordinator answers COORDINATOR_LOAD_IN_PROGRESS until
        this returns."""

    def commit(self, group: str, offsets: Mapping[TopicPartition, CommittedOffset]) -> None:
        """Store offsets durably before returning (the OffsetCommit response follows)."""

    def fetch(self, group: str, partitions: Iterable[TopicPartition] | None = None) -> dict[TopicPartition,
                                                                                              CommittedOffset]:
        """The group's committed offsets, all of them when ``partitions`` is None; absent partitions are left out."""

    def delete_offsets(self, group: str, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Remove offsets (expiry, DeleteGroups); the topic store writes tombstones."""

    def store_group(self, group: str, snapshot: GroupSnapshot | None) -> None:
        """Record a group's metadata after a rebalance; None deletes it (the group became Dead)."""

    def groups(self) -> dict[str, GroupSnapshot | None]:
        """Every group with stored metadata or offsets (a group known only by its offsets maps to None)."""


class MemoryOffsetStore:
    """Offsets and group metadata in memory: gone when the broker stops. The topic store
    (offsets_log.OffsetsLog) extends it: this is its cache, which it updates after each append to the log."""

    def __init__(self) -> None:
        self._lock = runtime.Lock()
        self._offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        self._groups: dict[str, GroupSnapshot] = {}

    def load(self) -> None:
        pass

    def commit(self, group: str, offsets: Mapping[TopicPartition, CommittedOffset]) -> None:
        with self._lock:
            self._offsets.setdefault(group, {}).update(offsets)

    def fetch(self, group: str, partitions: Iterable[TopicPartition] | None = None) -> dict[TopicPartition,
                                                                                              CommittedOffset]:
        with self._lock:
            held = self._offsets.get(group, {})
            if partitions is None:
                return dict(held)
            return {tp: held[tp] for tp in partitions if tp in held}

    def delete_offsets(self, group: str, partitions: Iterable[TopicPartition] | None = None) -> None:
        with self._lock:
            held = self._offsets.get(group, {})
            for tp in list(held) if partitions is None else partitions:
                held.pop(tp, None)
            if not held:
                self._offsets.pop(group, None)

    def _held(self, group: str, partitions: Iterable[TopicPartition] | None = None) -> list[TopicPartition]:
        """Those of ``partitions`` (all when None) the group has an offset for: what a deletion removes."""
        with self._lock:
            held = self._offsets.get(group, {})
            return list(held) if partitions is None else [tp for tp in partitions if tp in held]

    def store_group(self, group: str, snapshot: GroupSnapshot | None) -> None:
        with self._lock:
            if snapshot is None:
                self._groups.pop(group, None)
            else:
                self._groups[group] = snapshot

    def groups(self) -> dict[str, GroupSnapshot | None]:
        with self._lock:
            out: dict[str, GroupSnapshot | None] = {g: None for g in self._offsets}
            out.update(self._groups)
            return out
