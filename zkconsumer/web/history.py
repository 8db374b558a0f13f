"""What a source saw happen, from the states it read one after another: ownership changes and the event log.

A source that only sees states (a ZooKeeper group read on each watch, a coordinator group polled) gives each one
to :class:`History`, which keeps the differences: a :class:`Change` for each partition that changed hands (the
page's timeline), an :class:`Event` for each change of membership or owner (the page's log). Pure: the caller
passes the time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from zkconsumer.web.snapshot import Change, Event

#: how much of the past a long watch keeps: the page draws the latest
MAX_EVENTS = 2000
MAX_CHANGES = 20000


def partition_name(topic: str, partition: int) -> str:
    """The ``topic-partition`` name the snapshot uses for a partition (Kafka's ``TopicPartition.toString``)."""
    return f"{topic}-{partition}"


def membership_text(before: Iterable[str], after: Iterable[str]) -> str | None:
    """``+c3 -c1`` for members that joined and left; None when none did."""
    old, new = set(before), set(after)
    parts = [f"+{m}" for m in sorted(new - old)] + [f"-{m}" for m in sorted(old - new)]
    return " ".join(parts) or None


class History:
    """The changes and events since the first state seen. ``members`` and ``owners`` are the last state seen
    (None before the first)."""

    def __init__(self, max_events: int = MAX_EVENTS, max_changes: int = MAX_CHANGES) -> None:
        self.changes: list[Change] = []
        self.events: list[Event] = []
        self.members: set[str] | None = None
        self.owners: dict[str, str | None] | None = None
        self._max_events, self._max_changes = max_events, max_changes

    def note(self, ts: int, kind: str, text: str) -> None:
        self.events.append(Event(ts, kind, text))
        del self.events[:-self._max_events]

    def observe_members(self, ts: int, members: Iterable[str], what: str = "ids changed") -> None:
        """A membership read at ``ts``: an event ``rebalance: <what>: +new -gone`` when it differs from the last."""
        members = set(members)
        if self.members is not None:
            text = membership_text(self.members, members)
            if text:
                self.note(ts, "rebalance", f"{what}: {text}")
        self.members = members

    def observe_owners(self, ts: int, owners: Mapping[str, str | None]) -> None:
        """Owners read at ``ts`` (partition name → owner, None or missing: unowned): a change and an event per
        partition whose owner differs from the last read. The first read opens every owned partition's stretch,
        with no event (it is where the watch started, not a move)."""
        first = self.owners is None
        before = self.owners or {}
        after = {p: o for p, o in owners.items() if o is not None}
        for partition in sorted(set(before) | set(after), key=_partition_key):
            old, new = before.get(partition), after.get(partition)
            if old == new:
                continue
            self.changes.append(Change(ts, partition, new))
            if not first:
                self.note(ts, "rebalance", f"{partition}: {old or 'none'} → {new or 'none'}")
        del self.changes[:-self._max_changes]
        self.owners = after


def _partition_key(name: str) -> tuple[str, int]:
    topic, _, partition = name.rpartition("-")
    return (topic, int(partition)) if partition.isdecimal() else (name, -1)
