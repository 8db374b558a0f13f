"""Members' sessions and KIP-394's pending member ids on keyed timers (Kafka's heartbeat expiration).

A member silent for its ``session.timeout.ms`` is removed, though not while its JoinGroup or SyncGroup waits (the
coordinator owes it an answer): whatever ends that wait restarts its session. A member id handed out with
MEMBER_ID_REQUIRED counts as a member for one session timeout, until the member comes back with it. A timer looks
its member up by group and member id when it fires, so one whose member left or was fenced meanwhile does nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from zkconsumer.coordinator.group import Group, Member
from zkconsumer.coordinator.timer import KeyedTimer

log = logging.getLogger(__name__)


class Sessions:
    """The session timers of the coordinator's members (keys ``("session", group, member)``) and of its pending
    member ids (``("pending", group, member)``). Used with the coordinator's lock held, as its timers run."""

    def __init__(self, timer: KeyedTimer, groups: Mapping[str, Group], remove: Callable[[Group, Member, int], None],
                 pending_gone: Callable[[Group, int], None]) -> None:
        self._timer = timer
        self._groups = groups
        self._remove = remove  # the coordinator's removeMemberAndUpdateGroup
        self._pending_gone = pending_gone  # one member fewer to wait for: the join may complete

    def heard_from(self, group: Group, member: Member, now: int) -> None:
        """A sign of life (Kafka's completeAndScheduleNextHeartbeatExpiration): the member's session restarts."""
        member.last_heartbeat_ms = now
        self.restart(group, member)

    def restart(self, group: Group, member: Member) -> None:
        """Time the member's session from its last heartbeat: it expires 1 ms after ``session.timeout.ms``."""
        gid, mid = group.group_id, member.member_id
        self._timer.schedule(("session", gid, mid), member.last_heartbeat_ms + member.session_timeout_ms + 1,
                             lambda now: self._expire(gid, mid, now))

    def forget(self, group_id: str, member_id: str) -> None:
        """The member is gone (or known under another id): its session timer goes."""
        self._timer.cancel(("session", group_id, member_id))

    def add_pending(self, group: Group, member_id: str, now: int, session_timeout_ms: int) -> None:
        """A member id handed out with MEMBER_ID_REQUIRED (KIP-394), pending for one session timeout."""
        gid, expires = group.group_id, now + session_timeout_ms
        group.pending_members[member_id] = expires
        self._timer.schedule(("pending", gid, member_id), expires + 1,
                             lambda at: self._expire_pending(gid, member_id, at))

    def _expire(self, group_id: str, member_id: str, now: int) -> None:
        group = self._groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member is None or member.awaiting_join or member.awaiting_sync or not member.session_expired(now):
            return  # gone meanwhile, or waiting in a JoinGroup or SyncGroup
        log.info("member %s in group %s has failed (session timeout %d ms), removing it from the group",
                 member_id, group_id, member.session_timeout_ms)
        self._remove(group, member, now)

    def _expire_pending(self, group_id: str, member_id: str, now: int) -> None:
        group = self._groups.get(group_id)
        if group is not None and group.pending_members.pop(member_id, None) is not None:  # nobody came back with it
            self._pending_gone(group, now)
