"""What a group coordinator answers about its groups rather than to them: DescribeGroups, ListGroups,
DeleteGroups, and the requests it counted. A part of :class:`~zkconsumer.coordinator.manager.GroupCoordinator`
(its base class), kept apart from the membership protocol the manager drives.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from zkconsumer.coordinator.clock import Clock
from zkconsumer.coordinator.group import Group, GroupState
from zkconsumer.coordinator.store import OffsetStore
from zkconsumer.errors import KafkaCode


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupDescription:
    error: int
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    generation: int
    leader: str | None
    members: tuple[MemberDescription, ...]


class GroupAdmin:
    """DescribeGroups, ListGroups and DeleteGroups over the coordinator's groups (under its lock)."""

    groups: dict[str, Group]
    store: OffsetStore
    clock: Clock
    requests: Counter
    _lock: Any  # runtime.RLock(): the coordinator's one lock

    def _not_ready(self) -> int | None:
        raise NotImplementedError

    def describe(self, group_id: str) -> GroupDescription:
        error = self._not_ready()
        if error is not None:
            return GroupDescription(error, group_id, "", "", "", -1, None, ())
        with self._lock:
            group = self.groups.get(group_id)
            if group is None:
                return GroupDescription(KafkaCode.NONE, group_id, GroupState.DEAD.value, "", "", -1, None, ())
            stable = group.is_(GroupState.STABLE)
            members = tuple(MemberDescription(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.metadata(group.protocol_name) if stable and group.protocol_name else b"",
                m.assignment if stable else b"") for m in group.members.values())
            return GroupDescription(KafkaCode.NONE, group_id, group.state.value, group.protocol_type or "",
                                    group.protocol_name or "" if stable else "", group.generation, group.leader_id,
                                    members)

    def list_groups(self, states: Iterable[str] | None = None) -> tuple[int, list[tuple[str, str, str]]]:
        error = self._not_ready()
        if error is not None:
            return error, []
        wanted = {s.lower() for s in states} if states else None
        with self._lock:
            out = [(g.group_id, g.protocol_type or "", g.state.value) for g in self.groups.values()
                   if not g.is_(GroupState.DEAD) and (wanted is None or g.state.value.lower() in wanted)]
        return KafkaCode.NONE, sorted(out)

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, int]:
        out = {}
        with self._lock:
            for gid in group_ids:
                group = self.groups.get(gid)
                if group is None:
                    out[gid] = KafkaCode.GROUP_ID_NOT_FOUND if not self.store.fetch(gid) else KafkaCode.NONE
                    if out[gid] == KafkaCode.NONE:
                        self.store.delete_offsets(gid)
                elif not group.is_(GroupState.EMPTY):
                    out[gid] = KafkaCode.NON_EMPTY_GROUP
                else:
                    group.transition(GroupState.DEAD, self.clock.now_ms())
                    del self.groups[gid]
                    self.store.delete_offsets(gid)
                    self.store.store_group(gid, None)
                    out[gid] = KafkaCode.NONE
        return out

    def request_counts(self, group_id: str | None = None) -> dict[str, int]:
        with self._lock:
            out: Counter[str] = Counter()
            for (gid, api), n in self.requests.items():
                if group_id is None or gid == group_id:
                    out[api] += n
            return dict(out)
