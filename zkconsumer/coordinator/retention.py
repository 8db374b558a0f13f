"""Offset retention: the offsets of groups Empty for ``offsets.retention.minutes`` expire (Kafka 2.1+), checked
every ``offsets.retention.check.interval.ms`` on a keyed timer, and an Empty group left without offsets is Dead
(Kafka's GroupMetadataManager.cleanupGroupMetadata). Kept apart from the membership protocol the manager drives.
"""

from __future__ import annotations

import logging
from typing import Any

from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.coordinator.clock import Clock
from zkconsumer.coordinator.group import Group, GroupState
from zkconsumer.coordinator.store import OffsetStore
from zkconsumer.coordinator.timer import KeyedTimer

log = logging.getLogger(__name__)

#: The key of the retention check's timer.
RETENTION_CHECK = "offsets-retention-check"


class OffsetRetention:
    """Expires the offsets of the coordinator's groups, under its lock."""

    def __init__(self, store: OffsetStore, groups: dict[str, Group], lock: Any, clock: Clock,
                 timer: KeyedTimer, check_interval_ms: int) -> None:
        self._store, self._groups, self._lock, self._clock = store, groups, lock, clock
        self._timer = timer
        self._check_interval_ms = check_interval_ms

    def start(self, first_check_ms: int) -> None:
        """Check at ``first_check_ms`` (already past: at the next timer run), then every check interval."""
        self._timer.schedule(RETENTION_CHECK, first_check_ms, self._check)

    def _check(self, now: int) -> None:
        self._timer.schedule(RETENTION_CHECK, now + self._check_interval_ms, self._check)
        self.expire(now)

    def expire(self, now: int | None = None) -> dict[str, list[TopicPartition]]:
        """Offsets of groups Empty for ``offsets.retention.minutes`` (Kafka 2.1+), via the store's tombstones."""
        expire = getattr(self._store, "expire", None)
        if expire is None:
            return {}
        now = self._clock.now_ms() if now is None else now
        with self._lock:
            # Empty since a time; None: has members; left out: no protocol (simple commits only): per commit time.
            empty_since = {gid: g.empty_since_ms if g.is_(GroupState.EMPTY) else None
                           for gid, g in self._groups.items()
                           if g.protocol_type is not None or not g.is_(GroupState.EMPTY)}
            subscribed = {gid: topics for gid, g in self._groups.items()
                          if g.is_(GroupState.STABLE) and (topics := g.subscribed_topics()) is not None}
            expired = expire(now, empty_since, subscribed)
            for gid, tps in expired.items():
                log.info("expired %d offsets of group %s", len(tps), gid)
            # Kafka's cleanupGroupMetadata: an Empty group left without offsets is Dead; its metadata gets a
            # tombstone unless it never had a generation (a group that only stored offsets).
            for gid, group in list(self._groups.items()):
                if group.is_(GroupState.EMPTY) and not self._store.fetch(gid):
                    group.transition(GroupState.DEAD, now)
                    del self._groups[gid]
                    log.info("group %s transitioned to Dead in generation %d", gid, group.generation)
                    if group.generation > 0:
                        self._store.store_group(gid, None)
        return expired
