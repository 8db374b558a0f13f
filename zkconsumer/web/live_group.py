"""The state a polling or watching source keeps between reads, shared by its reader threads and the server.

Each read of a group (:meth:`LiveGroup.update`) replaces the members and partitions and feeds the
:class:`~zkconsumer.web.history.History`; the log-end offsets come from another thread (:meth:`set_ends`); a
source that loses its group says so (:meth:`down`) and keeps the last data, which the status then dates. Thread
safe; no I/O.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from zkconsumer.errors import IllegalArgument
from zkconsumer.types import tp_str
from zkconsumer.web.history import History
from zkconsumer.web.snapshot import GroupInfo, Member, PartitionRow, Snapshot, SourceKind, Status


def clock_text(epoch_s: float) -> str:
    """``10:02:03``: how the status banner dates things (local time, as the page's clocks)."""
    return time.strftime("%H:%M:%S", time.localtime(epoch_s))


@dataclass(frozen=True)
class Read:
    """One partition as a read found it: its owner and committed offset (None: none)."""

    topic: str
    partition: int
    owner: str | None
    offset: int | None


def lag(offset: int | None, end: int | None) -> int | None:
    """How far the committed offset is behind the log end (never below 0); None when either is unknown."""
    return None if offset is None or end is None else max(end - offset, 0)


class LiveGroup:
    """What a source shows: the last read, its history, the log ends, whether the group is reachable now.

    ``where``: what the status names when it is not, what then where (``ZooKeeper localhost:2181``, ``broker
    host:9092``): the log says ``ZooKeeper back (localhost:2181)``, short up front for the timeline's label."""

    def __init__(self, title: str, kind: SourceKind, group: str, where: str,
                 now: Callable[[], float] = time.time) -> None:
        self.title, self.kind, self.where = title, kind, where
        self._now = now
        self._lock = threading.Lock()
        self._history = History()
        self._group = GroupInfo(group)
        self._members: list[Member] = []
        self._reads: list[Read] = []
        self._ends: dict[tuple[str, int], int] = {}
        self._down_since: float | None = None
        self._down_why = ""
        self._read_at: float | None = None
        self._since = self.now_ms()  # the history's start: the page says "no rebalance seen since" then

    def now_ms(self) -> int:
        return int(self._now() * 1000)

    # ---------------------------------------------------------------------------------------------- reads
    def update(self, members: Iterable[Member], reads: Iterable[Read], group: GroupInfo | None = None,
               membership: str = "ids changed", settled: bool | None = None) -> None:
        """A read of the whole group: the members' ids changing is a ``rebalance: <membership>`` event, the owner
        changes a change each and one event; ``group``: the group's own fields, when the source has them;
        ``settled``: whether the group is whole now, as the source judges it (default: every partition read has
        an owner), which ends a rebalance under way with its summary (:meth:`History.observe`)."""
        members, reads = list(members), list(reads)
        if settled is None:
            settled = all(r.owner is not None for r in reads)
        now = self._now()
        ts = int(now * 1000)
        with self._lock:
            if group is not None and self._group.state is not None and group.state != self._group.state:
                self._history.note(ts, "rebalance", f"state: {self._group.state} → {group.state}")
            self._history.observe(ts, [m.id for m in members],
                                  {tp_str((r.topic, r.partition)): r.owner for r in reads}, settled, membership)
            self._members, self._reads = members, reads
            self._group = group or self._group
            self._read_at = now

    def set_ends(self, ends: Mapping[tuple[str, int], int]) -> None:
        with self._lock:
            self._ends = dict(ends)

    def partitions(self) -> list[tuple[str, int]]:
        with self._lock:
            return [(r.topic, r.partition) for r in self._reads]

    def note(self, kind: str, text: str) -> None:
        with self._lock:
            self._history.note(self.now_ms(), kind, text)

    # --------------------------------------------------------------------------------------------- status
    def down(self, why: str) -> None:
        """The group cannot be read now (``why``: what went away); the first call dates it and logs it."""
        with self._lock:
            if self._down_since is None:
                self._down_since = self._now()
                self._history.note(int(self._down_since * 1000), "source", f"{why} ({self.where})")
            self._down_why = why

    def up(self) -> None:
        with self._lock:
            if self._down_since is not None:
                self._down_since = None
                what, _, address = self.where.partition(" ")
                self._history.note(self.now_ms(), "source", f"{what} back ({address})" if address else f"{what} back")

    @property
    def is_up(self) -> bool:
        return self._down_since is None

    def status(self) -> Status:
        with self._lock:
            return self._status()

    def _status(self) -> Status:
        if self._down_since is None:
            return Status()
        shown = (f"; showing the data read at {clock_text(self._read_at)}" if self._read_at is not None
                 else "; nothing read yet")
        return Status(False, f"{self._down_why} since {clock_text(self._down_since)} ({self.where}){shown}")

    # ------------------------------------------------------------------------------------------- snapshot
    def snapshot(self) -> Snapshot:
        with self._lock:
            rows = [PartitionRow(r.topic, r.partition, r.owner, r.offset, end, lag(r.offset, end))
                    for r in self._reads for end in [self._ends.get((r.topic, r.partition))]]
            return Snapshot(title=self.title, kind=self.kind, ts=self.now_ms(), group=self._group,
                            status=self._status(), members=list(self._members), partitions=rows,
                            changes=list(self._history.changes), events=list(self._history.events),
                            since=self._since)


class WatchedGroup:
    """The read-only half of a :class:`~zkconsumer.web.snapshot.LiveSource` that watches a group it does not run:
    its snapshot is its :class:`LiveGroup`'s, and it takes no action."""

    live: LiveGroup

    def snapshot(self) -> Snapshot:
        return self.live.snapshot()

    def act(self, action: str, member: str | None) -> str:
        raise IllegalArgument("zkconsumer watch only watches the group: it takes no action")
