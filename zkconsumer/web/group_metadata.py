"""A coordinator group's latest GroupMetadata record, picked out of its ``__consumer_offsets`` partition (pure).

The generation of a classic group is in no answer a non-member can ask for (coordinator_source.py), but every
coordinator (ours, Kafka 0.9 to 4.x for classic groups) writes it to the group's partition of
``__consumer_offsets`` at each completed rebalance: a GroupMetadata record whose value carries the protocol type,
generation, protocol, leader, the time of the state change and the members. The latest such record of the group
is what the coordinator itself would load; a tombstone (null value) means the group was deleted, and resets it.

The partition holds every group that hashes to it and, mostly, offset commits: those records, and any that do not
decode (a format from a later Kafka, a foreign writer), are counted and skipped, never fatal.
"""

from __future__ import annotations

from dataclasses import dataclass

from zkconsumer.coordinator.offsets_codec import GroupKey, OffsetKey, decode_group_value, decode_key
from zkconsumer.coordinator.store import GroupSnapshot


@dataclass(frozen=True)
class Latest:
    """The group's latest GroupMetadata: ``snapshot`` (None: none read, or a tombstone, then ``deleted``),
    ``offset`` of its record, and ``at_ms``: when the group changed state (the value's timestamp; before value
    v2, the record's own)."""

    snapshot: GroupSnapshot | None = None
    offset: int | None = None
    at_ms: int | None = None
    deleted: bool = False


@dataclass
class GroupMetadataFold:
    """Records of one ``__consumer_offsets`` partition, in offset order, folded into ``group``'s :class:`Latest`."""

    group: str
    latest: Latest = Latest()
    group_records: int = 0
    offset_commits: int = 0
    other_groups: int = 0
    undecodable: int = 0

    def apply(self, offset: int, key: bytes | None, value: bytes | None, timestamp_ms: int = -1) -> None:
        try:
            decoded = decode_key(key) if key is not None else None
        except ValueError:  # CodecError, or bytes that are not UTF-8
            decoded = None
        if isinstance(decoded, OffsetKey):
            self.offset_commits += 1
        elif isinstance(decoded, GroupKey) and decoded.group != self.group:
            self.other_groups += 1
        elif decoded is None:
            self.undecodable += 1
        elif value is None:
            self.group_records += 1
            self.latest = Latest(None, offset, timestamp_ms if timestamp_ms >= 0 else None, deleted=True)
        else:
            try:
                snapshot = decode_group_value(value)
            except ValueError:
                self.undecodable += 1
                return
            self.group_records += 1
            at = snapshot.current_state_timestamp_ms if snapshot.current_state_timestamp_ms >= 0 else timestamp_ms
            self.latest = Latest(snapshot, offset, at if at >= 0 else None)

    @property
    def records(self) -> int:
        return self.group_records + self.offset_commits + self.other_groups + self.undecodable

    def counts_text(self) -> str:
        """``12 records read: 2 of the group, 9 offset commits, 1 of other groups`` (the zero counts left out)."""
        parts = [f"{n} {what}" for n, what in ((self.group_records, "of the group"),
                                               (self.offset_commits, "offset commits"),
                                               (self.other_groups, "of other groups"),
                                               (self.undecodable, "undecodable")) if n]
        return f"{self.records} records read" + (": " + ", ".join(parts) if parts else "")


@dataclass(frozen=True)
class View:
    """What a reader of the partition knows now: the group's :class:`Latest`, the partition read (``name``, e.g.
    ``__consumer_offsets-12``; None: not known yet), ``problem``: why it cannot be read now ("" when it can), and
    ``counts``: :meth:`GroupMetadataFold.counts_text`."""

    latest: Latest
    name: str | None
    problem: str
    counts: str

    def note(self) -> str:
        """Where the generation shown comes from, or why there is none (the page's tooltip on it)."""
        latest, where = self.latest, self.name or "its partition"
        if latest.snapshot is not None:
            text = f"from the GroupMetadata record at {where} offset {latest.offset} ({self.counts})"
        elif latest.deleted:
            text = f"the group was deleted: a tombstone at {where} offset {latest.offset}"
        elif self.name is not None and not self.problem:
            text = f"no GroupMetadata record of the group in {where} yet ({self.counts})"
        else:
            text = ""
        if self.problem:
            return f"{text}; now {self.problem}" if text else self.problem
        return text
