"""What a source saw happen, from the states it read one after another: ownership changes and the event log.

A source that only sees states (a ZooKeeper group read on each watch, a coordinator group polled) gives each one
to :class:`History`, which keeps the differences: a :class:`Change` for each partition that changed hands (the
page's timeline), and an :class:`Event` per read that changed something (the page's log): the members that came
and went, then the partitions released and claimed, grouped by owner, so that one rebalance reads as a few lines
rather than one per partition. :class:`Settling` follows a rebalance from its first change to the group settled
again and sums it up in one line (the lab's page uses it too). Pure: the caller passes the time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from zkconsumer.web.snapshot import Change, Event

#: how much of the past a long watch keeps: the page draws the latest
MAX_EVENTS = 2000
MAX_CHANGES = 20000
#: partitions named in one "released by"/"claimed by" clause before "and N more" (a big group's line stays short)
MAX_LISTED = 16


def partition_key(name: str) -> tuple[str, int]:
    """``orders-10`` after ``orders-9``: a partition name's sort key."""
    topic, _, partition = name.rpartition("-")
    return (topic, int(partition)) if partition.isdecimal() else (name, -1)


def membership_text(before: Iterable[str], after: Iterable[str]) -> str | None:
    """``+c3 -c1`` for members that joined and left; None when none did."""
    old, new = set(before), set(after)
    parts = [f"+{m}" for m in sorted(new - old)] + [f"-{m}" for m in sorted(old - new)]
    return " ".join(parts) or None


def listed(partitions: Iterable[str]) -> str:
    names = sorted(partitions, key=partition_key)
    more = len(names) - MAX_LISTED
    return ", ".join(names[:MAX_LISTED]) + (f" and {more} more" if more > 0 else "")


def moves_text(moves: Iterable[tuple[str, str | None, str | None]]) -> str | None:
    """One read's owner changes (partition, old owner, new owner; None: no owner) as one line, grouped by owner:
    ``released by c1-0: t-0, t-1; claimed by c2-0: t-0, t-1``; None when nothing moved."""
    released: dict[str, list[str]] = {}
    claimed: dict[str, list[str]] = {}
    for partition, old, new in moves:
        if old is not None:
            released.setdefault(old, []).append(partition)
        if new is not None:
            claimed.setdefault(new, []).append(partition)
    clauses = ([f"released by {o}: {listed(ps)}" for o, ps in sorted(released.items())]
               + [f"claimed by {o}: {listed(ps)}" for o, ps in sorted(claimed.items())])
    return "; ".join(clauses) or None


class Began(StrEnum):
    """What opened a rebalance, as the summary names it."""

    MEMBERS = "the ids change"
    RELEASE = "the first release"
    CLAIM = "the first claim"


@dataclass(frozen=True)
class Settled:
    """A rebalance, seen from its owners, once the group settled again (epoch ms): opened at ``began`` (by what
    ``began_with`` says), its last change at ``last``, a claim unless ``last_claimed`` is False. ``moved``: the
    partitions whose owner differs from the one before (no owner counts as one); ``unowned``: those of them left
    with none; ``returned``: released and claimed back by the same owner; ``longest_unowned_ms``: the longest a
    partition was seen without an owner (0: every move seen as one step)."""

    began: int
    began_with: Began
    last: int
    last_claimed: bool
    moved: int
    unowned: int = 0
    returned: int = 0
    longest_unowned_ms: int = 0

    def text(self, after: tuple[int, str] | None = None) -> str:
        """``group settled: 12 partitions changed hands, 153 ms from the ids change to the last claim; longest a
        partition sat unowned: 120 ms``; ``after``: (when, what) the step that caused it, said with the time from
        it to the last change (``group settled 6.1 s after c1 killed with SIGKILL: ...``)."""
        head = "group settled" + (f" {(self.last - after[0]) / 1000:.1f} s after {after[1]}" if after else "")
        if not self.moved and not self.returned:
            return f"{head}: no partition changed hands"
        parts = [f"{self.moved} partition{'s' if self.moved != 1 else ''} changed hands"
                 + (f" ({self.unowned} to no owner)" if self.unowned else "")
                 + (f", {self.returned} released and claimed back" if self.returned else "")]
        last = "claim" if self.last_claimed else "release"
        parts.append(f"{self.last - self.began} ms from {self.began_with} to the last {last}")
        return (f"{head}: {', '.join(parts)}; longest a partition sat unowned: {self.longest_unowned_ms} ms")


class Settling:
    """The rebalance under way (none until :meth:`begin` or :meth:`change`): what it has moved so far. The caller
    says when the group has settled (:meth:`settle`): a ZooKeeper group when every partition is owned by a member,
    a coordinator group when it is Stable, the lab's when its running members own all."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.began: int | None = None
        self._began_with = Began.MEMBERS
        self._before: dict[str, str | None] = {}  # each partition's owner before its first change
        self._now: dict[str, str | None] = {}
        self._unowned_since: dict[str, int] = {}
        self._longest = 0
        self._returned: set[str] = set()
        self._last: tuple[int, bool] | None = None

    @property
    def open(self) -> bool:
        return self.began is not None

    def begin(self, ts: int, why: Began = Began.MEMBERS) -> None:
        if self.began is None:
            self.began, self._began_with = ts, why

    def change(self, ts: int, partition: str, old: str | None, new: str | None) -> None:
        self.begin(ts, Began.RELEASE if old is not None else Began.CLAIM)
        self._before.setdefault(partition, old)
        self._now[partition] = new
        if new is None:
            self._unowned_since.setdefault(partition, ts)
        else:
            since = self._unowned_since.pop(partition, None)
            if since is not None:
                self._longest = max(self._longest, ts - since)
                if new == self._before[partition]:
                    self._returned.add(partition)
        self._last = (ts, new is not None)

    def settle(self, ts: int) -> Settled | None:
        """The group has settled at ``ts``: the rebalance's summary (None when none was under way), and the next
        change opens the next."""
        if self.began is None:
            return None
        moved = [p for p, owner in self._now.items() if owner != self._before[p]]
        longest = max([self._longest, *(ts - since for since in self._unowned_since.values())])
        last, claimed = self._last or (self.began, False)
        out = Settled(self.began, self._began_with, last, claimed, len(moved),
                      sum(self._now[p] is None for p in moved), len(self._returned - set(moved)), longest)
        self._reset()
        return out


class History:
    """The changes and events since the first state seen. ``members`` and ``owners`` are the last state seen
    (None before the first)."""

    def __init__(self, max_events: int = MAX_EVENTS, max_changes: int = MAX_CHANGES) -> None:
        self.changes: list[Change] = []
        self.events: list[Event] = []
        self.members: set[str] | None = None
        self.owners: dict[str, str | None] | None = None
        self.settling = Settling()
        self._max_events, self._max_changes = max_events, max_changes

    def note(self, ts: int, kind: str, text: str) -> None:
        self.events.append(Event(ts, kind, text))
        del self.events[:-self._max_events]

    def observe(self, ts: int, members: Iterable[str], owners: Mapping[str, str | None], settled: bool,
                what: str = "ids changed") -> None:
        """One read of the group at ``ts`` (:meth:`observe_members`, :meth:`observe_owners`); ``settled``: the
        source's judgement that the group is whole (every partition owned by a member; Stable). A read that
        changed nothing in a settled group ends the rebalance under way with its summary: a quiet read, so that
        a read caught between the ids change and the first release does not end it at once."""
        changed = self.observe_members(ts, members, what)
        changed = self.observe_owners(ts, owners) or changed
        if settled and not changed:
            summary = self.settling.settle(ts)
            if summary is not None:
                self.note(ts, "rebalance", summary.text())

    def observe_members(self, ts: int, members: Iterable[str], what: str = "ids changed") -> bool:
        """A membership read at ``ts``: an event ``<what>: +new -gone`` when it differs from the last, which
        opens a rebalance. Whether it did."""
        members = set(members)
        text = membership_text(self.members, members) if self.members is not None else None
        if text:
            self.note(ts, "rebalance", f"{what}: {text}")
            self.settling.begin(ts)
        self.members = members
        return text is not None

    def observe_owners(self, ts: int, owners: Mapping[str, str | None]) -> bool:
        """Owners read at ``ts`` (partition name → owner, None or missing: unowned): a change per partition whose
        owner differs from the last read, and one event for all of them. The first read opens every owned
        partition's stretch, with no event (it is where the watch started, not a move). Whether any moved."""
        first = self.owners is None
        before = self.owners or {}
        after = {p: o for p, o in owners.items() if o is not None}
        moves = [(p, before.get(p), after.get(p)) for p in sorted(set(before) | set(after), key=partition_key)
                 if before.get(p) != after.get(p)]
        for partition, old, new in moves:
            self.changes.append(Change(ts, partition, new))
            if not first:
                self.settling.change(ts, partition, old, new)
        del self.changes[:-self._max_changes]
        self.owners = after
        text = None if first else moves_text(moves)
        if text:
            self.note(ts, "rebalance", text)
        return text is not None
