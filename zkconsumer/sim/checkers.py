"""The simulator's judge: the lab's five invariants and Jepsen's consumer checks, computed in pure Python from the
trace a simulated run emits, step by step.

A simulation runs thousands of seeds; each needs a verdict in milliseconds, so Spark (which judges the lab's real
runs, ``zkconsumer/analysis/``) is out of the loop. :class:`Checker` takes every trace record in emission order
(``observe``, the dicts :class:`zkconsumer.trace.TraceWriter` hands its observers) and says at each step which
breaches that record proves, so a run can stop, or be shrunk, at the first one; ``finish`` adds what can only be
judged at the end (loss, ownership after a heal, unseen records) and returns a :class:`SimVerdict`.

The five lab invariants are the Spark analysis' own definitions, re-expressed incrementally, so the counts agree
with ``InvariantCounts`` on the same trace (tests/analysis/test_sim_checkers_agree.py holds them to it):

* ``lost`` (partitions.py ``lost_offsets``): per (group, topic, partition), the offsets from 0 (``from_zero``, what
  the lab uses) or from the first delivered offset, up to below max(highest commit, last delivered + 1), that no
  line delivered.
* ``overlaps`` (partitions.py ``stints``/``overlaps``): a consumer's deliveries of a partition are cut into
  *stints* by its ``rebalance_done`` and ``session_expired`` lines and its ``released`` lines naming the partition;
  a stint spans [first, last] delivery time;
  every pair of stints of two different consumers on one partition whose spans intersect (inclusively) is one
  overlap. Online, a pair is reported by the delivery that proves the intersection: the first delivery of a new
  stint inside another consumer's span, or the other consumer's next delivery after it (until then its span might
  have ended before the new one began).
* ``duplicates_committed`` (invariants.py ``duplicates_of_committed``): an extra delivery of an offset (every
  delivery after its first) when a commit of the partition, any store, with a strictly earlier ``ts`` was above it.
* ``commits_backwards`` (``commits_moving_back``): per partition and store, commits ordered by (ts, consumer,
  seq), one below the maximum before it; partitions with any ``offset_reset`` in the run are exempt. Commits of
  one millisecond are ordered by consumer as Spark orders them, whatever order they were emitted in, so a commit
  may be shown backwards by a later one of its millisecond (the breach names the earlier commit). ``observe``
  reports a backwards commit unless its partition was reset already; a reset coming later takes it out of the
  verdict, as Spark's exemption covers the whole run.
* ``unowned_after_heal`` (``reowned_after_heal``): per ``fault_healed`` line and judged deadline
  (analysis/deadlines.py's :func:`judged_deadlines`, the analysis' own), the partitions of the group (delivered,
  committed or owned in the run) that no effective ownership covers at the deadline. Ownership (rebalances.py
  ``ownership``) runs from a ``rebalance_done`` owning the partition to the consumer's next ``released`` or
  ``rebalance_done`` naming it, else to its last line; a life followed by another (a restart under the same id) ends
  at its own last non-delivery line; one that ended so, without a release, goes on to a ``kill`` step of its owner
  after that line and before the owner's next ``registered`` line; and it is cut at the owner's first
  ``session_expired`` after it began (``effective_ownership``). As in Spark, a partition the group's trace never
  names is not judged, and a deadline after the run's end is judged on ownerships ending at each consumer's last
  line: a simulation should run past its last heal's deadline.

Beyond Spark, judged too (a breach fails :attr:`SimVerdict.ok`, not :attr:`SimVerdict.lab_ok`):

* ``zombie_deliveries``: a record handed out after *another* member committed its partition past it (a member
  that lost the partition still delivering), in emission order: a commit emitted before the delivery counts
  even in the same millisecond. Deliveries of a partition after an ``offset_reset`` of it are not judged: the
  log moved, rereading below a commit is what ``auto.offset.reset=smallest`` does. Spark has no such check; such
  a delivery is mostly also a duplicate of a committed record, but not when nobody had delivered it before.
* ``poll_skips`` and ``nonmonotonic_polls`` (Jepsen's kafka checkers), within one stint: a delivery more than
  one above the stint's previous one while some offset between had been delivered by nobody, and a delivery not
  above the previous one. The first delivery after the consumer's own ``offset_reset`` of the partition is not
  compared with the one before it.

Figures, not judged: ``duplicates`` (every extra delivery, as the analysis counts them) and Jepsen's ``unseen``,
split into offsets below the partition's frontier (max of last delivered + 1, highest commit, highest reset
target) never delivered (``unseen_never_readable``: skipped, committed past, reset over) and offsets at or above
it (``unseen_unread``: the run ended before anyone read them).

**Order.** Records must come in nondecreasing ``ts`` (a simulation's emission order; a trace directory merged by
(ts, consumer, seq)), and each consumer's in ``seq`` order. Ties in ``ts`` are handled as Spark handles them. A
record whose ``ts`` goes back is counted in :attr:`SimVerdict.out_of_order`; the checks stay sound but a figure
that depends on time order (which delivery of an offset is the extra one) may then differ from Spark's.

Pure: no I/O, no Spark; a 50,000-event run is judged in about 50 ms.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from zkconsumer.analysis import unseen
from zkconsumer.analysis.deadlines import GRACE_MS, judged_deadlines
from zkconsumer.types import LabelledStrEnum, tp_str

#: A commit line without ``store`` went to ZooKeeper (docs/trace.md).
ZOOKEEPER_STORE = "zookeeper"
#: The lab's own lines (``zkconsumer.trace.LAB_EVENTS``; this module imports only ``types``, and a test holds the two
#: equal).
LAB_EVENTS = frozenset({"fault_injected", "fault_healed", "lab_step"})
#: A ``lab_step`` that ends a member's process without a line of its own (invariants.py ``KILL_STEP``).
KILL_STEP = "kill"

PartitionKey = tuple[str, str, int]  # (group, topic, partition)
Record = Mapping[str, Any]


class Invariant(LabelledStrEnum):
    """What a verdict counts. The values of the first five are the names of the Spark analysis'
    ``InvariantCounts`` fields, so the two can be compared field by field."""

    LOST = "lost", "records lost"
    OVERLAPS = "overlaps", "times two live owners"
    DUPLICATES_COMMITTED = "duplicates_committed", "duplicates of committed records"
    COMMITS_BACKWARDS = "commits_backwards", "commits moving back"
    UNOWNED_AFTER_HEAL = "unowned_after_heal", "partitions unowned at heal + session timeout + 1 s"
    ZOMBIE_DELIVERIES = "zombie_deliveries", "records delivered after another member committed past them"
    POLL_SKIPS = "poll_skips", "deliveries skipping offsets nobody had read"
    NONMONOTONIC_POLLS = "nonmonotonic_polls", "deliveries going back within a stint"
    DUPLICATES = "duplicates", "extra deliveries"
    UNSEEN_NEVER_READABLE = "unseen_never_readable", "offsets below the readers' frontier never delivered"
    UNSEEN_UNREAD = "unseen_unread", "offsets still unread when the run ended"

    @property
    def judged(self) -> bool:
        """True when a breach fails the run (:attr:`SimVerdict.ok`); the rest are figures."""
        return self in JUDGED


#: The lab's five invariants, judged on Spark from the same trace (:attr:`SimVerdict.lab_ok`).
LAB_INVARIANTS = frozenset({Invariant.LOST, Invariant.OVERLAPS, Invariant.DUPLICATES_COMMITTED,
                            Invariant.COMMITS_BACKWARDS, Invariant.UNOWNED_AFTER_HEAL})
#: Every invariant a breach of which fails a simulated run.
JUDGED = LAB_INVARIANTS | {Invariant.ZOMBIE_DELIVERIES, Invariant.POLL_SKIPS, Invariant.NONMONOTONIC_POLLS}


@dataclass(frozen=True)
class Breach:
    """One breach, with where and when it became visible: what a shrinker compares and a message names."""

    invariant: Invariant
    ts: int
    group: str
    consumer: str | None
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"invariant": self.invariant.value, "ts": self.ts, "group": self.group, "consumer": self.consumer,
                "topic": self.topic, "partition": self.partition, "offset": self.offset, "detail": self.detail}

    def __str__(self) -> str:
        where = f" {self.topic}-{self.partition}" if self.topic is not None else ""
        at = f" offset {self.offset}" if self.offset is not None else ""
        who = f" by {self.consumer}" if self.consumer else ""
        return f"{self.invariant.label} at {self.ts}{where}{at}{who}" + (f": {self.detail}" if self.detail else "")


@dataclass(frozen=True)
class JudgedHeal:
    """One ``fault_healed`` line the ownership invariant judged: the partitions unowned at its deadline."""

    group: str
    fault: str
    healed: int
    deadline: int
    partitions: int
    unowned: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"group": self.group, "fault": self.fault, "healed": self.healed, "deadline": self.deadline,
                "partitions": self.partitions, "unowned": list(self.unowned)}


@dataclass
class SimVerdict:
    """A run's verdict: a count per :class:`Invariant` (every member present), the first breach of each one
    breached, the heals judged, and how much was read."""

    counts: dict[Invariant, int]
    first: dict[Invariant, Breach] = field(default_factory=dict)
    heals: list[JudgedHeal] = field(default_factory=list)
    events: int = 0
    deliveries: int = 0
    out_of_order: int = 0
    ended_ms: int = 0

    @property
    def ok(self) -> bool:
        """No judged invariant broken (the lab's five, zombie deliveries, Jepsen's poll checks)."""
        return not any(self.counts[i] for i in JUDGED)

    @property
    def lab_ok(self) -> bool:
        """The lab's five invariants hold: what Spark's ``InvariantCounts.ok`` would say of this trace."""
        return not any(self.counts[i] for i in LAB_INVARIANTS)

    def broken(self) -> list[Invariant]:
        """The judged invariants broken, in the enum's order."""
        return [i for i in Invariant if i in JUDGED and self.counts[i]]

    def violations(self) -> list[str]:
        """The broken invariants in words, each with its first breach."""
        return [f"{self.counts[i]} {i.label} (first: {self.first[i]})" if i in self.first
                else f"{self.counts[i]} {i.label}" for i in self.broken()]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: invariants by value."""
        return {"ok": self.ok, "lab_ok": self.lab_ok, "counts": {i.value: n for i, n in self.counts.items()},
                "first": {i.value: b.as_dict() for i, b in self.first.items()},
                "heals": [h.as_dict() for h in self.heals], "events": self.events, "deliveries": self.deliveries,
                "out_of_order": self.out_of_order, "ended_ms": self.ended_ms}


# ------------------------------------------------------------------------------------------------ state
class _Stint:
    """One consumer's deliveries of one partition between two of its ``rebalance_done``/``session_expired``
    lines: the span Spark's overlap check compares, and the previous offset Jepsen's poll checks compare with."""

    __slots__ = ("member", "part", "index", "from_ts", "last_ts", "prev", "closed")

    def __init__(self, member: _Member, part: _Partition, index: int, ts: int) -> None:
        self.member = member
        self.part = part
        self.index = index  # its number on the partition: pairs are kept as number pairs
        self.from_ts = ts
        self.last_ts = ts
        self.prev: int | None = None  # None: nothing to compare the next delivery with (start, or after a reset)
        self.closed = False  # its consumer's rebalance or session expiry ended it


class _StoreCommits:
    """The commits of one partition to one store, judged for going backwards as the Spark analysis judges them
    (``commits_moving_back``): a commit is behind when its offset is below one that took effect before it was
    sent: answered (``ts``) strictly before its ``sent_ts`` (its ``ts`` when it has none), or its own consumer's
    previous commit. Commits come in nondecreasing ``ts``; one that does not is filed in its place."""

    __slots__ = ("answered", "running", "offsets", "own")

    def __init__(self) -> None:
        self.answered: list[int] = []  # answer times, sorted
        self.offsets: list[int] = []  # their offsets, in the same order
        self.running: list[int] = []  # the highest offset answered up to each
        self.own: dict[str, int] = {}  # each consumer's highest commit so far

    def add(self, ts: int, consumer: str, seq: int, offset: int,
            sent: int | None = None) -> list[tuple[int, str, int, int, int]]:
        """Record one commit; return it, with the highest offset it fell below, if it went backwards."""
        i = bisect.bisect_left(self.answered, ts if sent is None else sent)
        before = max(self.running[i - 1] if i else -1, self.own.get(consumer, -1))
        at = bisect.bisect_right(self.answered, ts)
        self.answered.insert(at, ts)
        self.offsets.insert(at, offset)
        self.running[at:] = list(itertools.accumulate(self.offsets[at:], max,
                                                      initial=self.running[at - 1] if at else -1))[1:]
        self.own[consumer] = max(self.own.get(consumer, -1), offset)
        return [(ts, consumer, seq, offset, before)] if offset < before else []


class _Partition:
    """Everything judged per (group, topic, partition)."""

    __slots__ = ("key", "delivered", "lo", "hi", "extra", "stints", "n_stints", "pairs", "last_stint", "max_from",
                 "commits", "cmax", "dc_ts", "dc_before", "best", "best_by", "second", "stores", "resets", "owned",
                 "jumps")

    def __init__(self, key: PartitionKey) -> None:
        self.key = key
        self.delivered: set[int] = set()
        self.lo = -1  # lowest and highest delivered offset (-1: none yet)
        self.hi = -1
        self.extra = 0  # deliveries of an offset delivered before
        self.stints: list[_Stint] = []  # the stints that may still be part of an overlap not yet found
        self.n_stints = 0
        self.pairs: set[tuple[int, int]] = set()  # overlapping stints (indexes into stints, smaller first)
        self.last_stint: _Stint | None = None  # the stint of the partition's latest delivery
        self.max_from = -1  # the latest span start among stints (an upper bound): the overlap fast path's test
        self.commits: list[tuple[int, int]] = []  # (ts, offset), every store, in emission order
        self.cmax = -1  # the highest commit, every store
        self.dc_ts = -1  # the latest commit millisecond, and the highest commit of earlier milliseconds
        self.dc_before = -1
        self.best = -1  # the highest commit, who made it, and the highest by anyone else (zombie deliveries)
        self.best_by: str | None = None
        self.second = -1
        self.stores: dict[str, _StoreCommits] = {}
        self.resets: list[tuple[int, int]] = []  # (from_offset, to_offset)
        self.owned = False  # named in some rebalance_done's owned
        self.jumps: list[tuple[int, int, int]] = []  # (ts, first, last): offsets a new highest delivery passed over

    def committed_before(self, ts: int) -> int:
        """The highest commit (any store) with a ``ts`` strictly before ``ts`` (-1: none)."""
        if ts > self.dc_ts:
            return self.cmax
        if ts == self.dc_ts:
            return self.dc_before
        return max((o for t, o in self.commits if t < ts), default=-1)

    @property
    def in_analysis(self) -> bool:
        """Spark's ``partitions`` table holds it: delivered, committed or owned."""
        return bool(self.delivered or self.commits or self.owned)


@dataclass(slots=True)
class _Member:
    """One consumer id of one group, across its lives: its current stints, and the lines ownership needs."""

    group: str
    consumer: str
    current: list[tuple[str, str, str, int]] = field(default_factory=list)  # its keys in Checker._current
    stints: list[_Stint] = field(default_factory=list)
    marks: list[tuple[int, int, bool, tuple[tuple[str, int], ...]]] = field(default_factory=list)  # (ts, life,
    # owns?, partitions) per rebalance_done (owns) and released line, in seq order
    expired: list[int] = field(default_factory=list)  # session_expired times
    life: int = 0  # startup triggers so far (Spark's _with_life)
    life_end: dict[int, int] = field(default_factory=dict)  # life → its last non-delivery, non-registered ts
    last_ts: int = -1  # its last non-delivery line (deliveries: their stints' last_ts)
    registered: list[int] = field(default_factory=list)  # its registered lines' ts (a process each)
    kills: list[int] = field(default_factory=list)  # the lab's kill steps of it

    def killed_after(self, ts: int) -> int | None:
        """The first kill of it at or after ``ts`` and before its next process registered (None: none)."""
        nxt = min((r for r in self.registered if r > ts), default=None)
        return min((k for k in self.kills if k >= ts and (nxt is None or k <= nxt)), default=None)


def _pair(a: _Stint, b: _Stint) -> tuple[int, int]:
    """Two stints of one partition, as the key of their overlap."""
    return (a.index, b.index) if a.index < b.index else (b.index, a.index)


def _tp(text: str) -> tuple[str, int]:
    """``"topic-partition"`` → (topic, partition); topics may contain dashes, the partition is the tail."""
    topic, _, partition = text.rpartition("-")
    return topic, int(partition)


# -------------------------------------------------------------------------------------------- the checker
class Checker:
    """Judges one run: ``observe`` each record in emission order, ``finish`` once at the end.

    ``from_zero`` counts never-delivered offsets below the first delivered one as lost (the lab's setting: its
    topics start empty); ``grace_ms`` is the analysis' grace after the session timeout."""

    def __init__(self, from_zero: bool = True, grace_ms: int = GRACE_MS) -> None:
        self.from_zero = from_zero
        self.grace_ms = grace_ms
        self._parts: dict[PartitionKey, _Partition] = {}
        self._members: dict[tuple[str, str], _Member] = {}
        self._lab: list[dict[str, Any]] = []
        self._online = dict.fromkeys((Invariant.OVERLAPS, Invariant.DUPLICATES_COMMITTED,
                                      Invariant.ZOMBIE_DELIVERIES, Invariant.POLL_SKIPS,
                                      Invariant.NONMONOTONIC_POLLS), 0)
        self._first: dict[Invariant, Breach] = {}
        self._backwards: list[Breach] = []  # every backwards commit: a later offset_reset may exempt it
        self._current: dict[tuple[str, str, str, int], _Stint] = {}  # (consumer, group, topic, partition)
        self._events = 0  # every line but the deliveries (those are counted per partition)
        self._out_of_order = 0
        self._clock = -1
        self._handlers: dict[str, Callable[[Record, _Member], list[Breach]]] = {
            "offset_committed": self._committed, "offset_reset": self._reset,
            "rebalance_done": self._done, "session_expired": self._expired, "released": self._released,
        }

    # ---------------------------------------------------------------------------------------- per record
    def observe(self, r: Record) -> list[Breach]:
        """Take the next record; return the breaches it proves (usually none).

        Nearly every line is a delivery, so this is the deliveries' hot path, inline: the common case (the same
        stint as the partition's previous delivery, the next offset, nothing committed past it) is one dictionary
        lookup and a few attribute reads; everything else is left to the methods it calls."""
        if r["event"] != "record_delivered":
            return self._control(r)
        ts, offset = r["ts"], r["offset"]
        in_order = ts >= self._clock
        if in_order:
            self._clock = ts
        else:
            self._out_of_order += 1
        st = self._current.get((r["consumer"], r["group"], r["topic"], r["partition"]))
        if st is None:
            st = self._new_stint(r)
        part = st.part
        found: list[Breach] = []
        # (a) two live owners. In order, with no other delivery of the partition since this stint's previous one
        # and no span starting after that one: no pair can have become intersecting
        if in_order and part.last_stint is st and part.max_from <= st.last_ts:
            st.last_ts = ts
        else:
            self._moved(part, st, r, found)
        prev = st.prev
        st.prev = offset
        if prev is not None and offset != prev + 1:
            self._poll(part, prev, r, found)
        delivered = part.delivered
        if offset in delivered:
            self._again(part, r, found)
        else:
            delivered.add(offset)
            hi = part.hi
            if offset > hi:
                part.hi = offset
                if offset > hi + 1:
                    part.jumps.append((ts, hi + 1, offset - 1))
                if hi < 0:
                    part.lo = offset
            elif offset < part.lo:
                part.lo = offset
        if part.best > offset and not part.resets:
            self._zombie(part, r, found)
        return found

    def _tick(self, ts: int) -> None:
        if ts < self._clock:
            self._out_of_order += 1
        else:
            self._clock = ts

    def _control(self, record: Record) -> list[Breach]:
        """Every line but a delivery: the lab's lines are kept for the heal deadlines; a consumer's feed its
        lives, its last line, and the handler of its event."""
        self._events += 1
        ts, event = record["ts"], record["event"]
        self._tick(ts)
        if event in LAB_EVENTS:
            self._lab.append({"group": record["group"], "ts": ts, "event": event, "fault": record.get("fault"),
                              "target": record.get("target"),
                              "session_timeout_ms": record.get("session_timeout_ms"), "step": record.get("step")})
            if event == "lab_step" and record.get("step") == KILL_STEP:
                self._member(record["group"], record.get("target") or "").kills.append(ts)
            return []
        member = self._member(record["group"], record["consumer"])
        if event == "rebalance_triggered" and record.get("cause") == "startup":
            member.life += 1
        elif event == "registered":
            member.registered.append(ts)
        if ts > member.last_ts:
            member.last_ts = ts
        if event != "registered" and ts > member.life_end.get(member.life, -1):
            member.life_end[member.life] = ts
        handler = self._handlers.get(event)
        return handler(record, member) if handler is not None else []

    def _member(self, group: str, consumer: str) -> _Member:
        m = self._members.get((group, consumer))
        if m is None:
            m = self._members[(group, consumer)] = _Member(group, consumer)
        return m

    def _part(self, key: PartitionKey) -> _Partition:
        p = self._parts.get(key)
        if p is None:
            p = self._parts[key] = _Partition(key)
        return p

    def _breach(self, found: list[Breach], breach: Breach) -> None:
        """Count an online breach, keep the first of its invariant, add it to this step's answer."""
        self._online[breach.invariant] += 1
        self._first.setdefault(breach.invariant, breach)
        found.append(breach)

    def _new_stint(self, r: Record) -> _Stint:
        group, consumer, ts = r["group"], r["consumer"], r["ts"]
        m = self._member(group, consumer)
        part = self._part((group, r["topic"], r["partition"]))
        st = _Stint(m, part, part.n_stints, ts)
        part.n_stints += 1
        key = (consumer, group, part.key[1], part.key[2])
        self._current[key] = st
        m.current.append(key)
        part.stints.append(st)
        m.stints.append(st)
        if ts > part.max_from:
            part.max_from = ts
        return st

    def _moved(self, part: _Partition, st: _Stint, r: Record, found: list[Breach]) -> None:
        """The partition's previous delivery was another stint's (or time went back): widen this stint's span
        and look for the pairs that now intersect."""
        ts = r["ts"]
        if ts > st.last_ts:
            st.last_ts = ts
        elif ts < st.from_ts:
            st.from_ts = ts
        part.last_stint = st
        self._overlaps(part, st, r, found)

    def _poll(self, part: _Partition, prev: int, r: Record, found: list[Breach]) -> None:
        """Jepsen's nonmonotonic-poll and poll-skip, within one stint."""
        offset = r["offset"]
        if offset <= prev:
            self._breach(found, Breach(Invariant.NONMONOTONIC_POLLS, r["ts"], part.key[0], r["consumer"],
                                       part.key[1], part.key[2], offset, f"after offset {prev} in the same stint"))
        elif not all(o in part.delivered for o in range(prev + 1, offset)):
            self._breach(found, Breach(Invariant.POLL_SKIPS, r["ts"], part.key[0], r["consumer"], part.key[1],
                                       part.key[2], offset,
                                       f"after offset {prev}: offsets {prev + 1}..{offset - 1} skipped"))

    def _again(self, part: _Partition, r: Record, found: list[Breach]) -> None:
        """An extra delivery: a duplicate, and a breach when a commit of an earlier millisecond covered it."""
        part.extra += 1
        offset = r["offset"]
        committed = part.committed_before(r["ts"])
        if committed > offset:
            self._breach(found, Breach(Invariant.DUPLICATES_COMMITTED, r["ts"], part.key[0], r["consumer"],
                                       part.key[1], part.key[2], offset,
                                       f"delivered again after offset {committed} was committed"))

    def _zombie(self, part: _Partition, r: Record, found: list[Breach]) -> None:
        """(c) a record handed out after another member committed its partition past it."""
        offset, consumer = r["offset"], r["consumer"]
        other = part.second if part.best_by == consumer else part.best
        if other > offset:
            self._breach(found, Breach(Invariant.ZOMBIE_DELIVERIES, r["ts"], part.key[0], consumer, part.key[1],
                                       part.key[2], offset, f"another member had committed offset {other}"))

    def _overlaps(self, part: _Partition, st: _Stint, r: Record, found: list[Breach]) -> None:
        """Pairs of this stint with other consumers' stints of the partition whose spans now intersect.

        Spans only grow, so a pair is found by the delivery that makes it intersect. A closed stint that ended
        before now and can pair with none of the open stints any more (paired already, or begun after it ended)
        can meet no stint again (records in time order): it is dropped, so that a partition handed back and forth
        many times is not searched through all its history at every handover."""
        prune = not self._out_of_order
        clock, pairs = self._clock, part.pairs
        opened = [s for s in part.stints if not s.closed]
        kept = []
        for other in part.stints:
            if prune and other.closed and other.last_ts < clock and all(
                    x.member is other.member or x.from_ts > other.last_ts or _pair(x, other) in pairs
                    for x in opened):
                continue
            kept.append(other)
            if other.member is st.member or not (other.from_ts <= st.last_ts and st.from_ts <= other.last_ts):
                continue
            pair = _pair(other, st)
            if pair not in pairs:
                pairs.add(pair)
                self._breach(found, Breach(
                    Invariant.OVERLAPS, r["ts"], st.member.group, st.member.consumer, part.key[1], part.key[2],
                    r["offset"], f"{other.member.consumer} delivered it from {other.from_ts} to {other.last_ts}, "
                                 f"{st.member.consumer} from {st.from_ts}"))
        part.stints = kept

    def _committed(self, r: Record, m: _Member) -> list[Breach]:
        ts, offset, consumer = r["ts"], r["offset"], r["consumer"]
        part = self._part((r["group"], r["topic"], r["partition"]))
        part.commits.append((ts, offset))
        if ts > part.dc_ts:
            part.dc_before, part.dc_ts = part.cmax, ts
        elif ts < part.dc_ts:
            part.dc_before = max(part.dc_before, offset)
        if offset > part.cmax:
            part.cmax = offset
        if consumer == part.best_by:  # the highest commit by anyone, and by anyone but its maker
            part.best = max(part.best, offset)
        elif offset > part.best:
            part.second, part.best, part.best_by = part.best, offset, consumer
        elif offset > part.second:
            part.second = offset
        store = r.get("store") or ZOOKEEPER_STORE
        log = part.stores.get(store)
        if log is None:
            log = part.stores[store] = _StoreCommits()
        found: list[Breach] = []
        for t, c, _, o, high in log.add(ts, consumer, r["seq"], offset, r.get("sent_ts")):
            breach = Breach(Invariant.COMMITS_BACKWARDS, t, part.key[0], c, part.key[1], part.key[2], o,
                            f"store {store}: below {high} committed before")
            self._backwards.append(breach)
            if not part.resets:  # a reset of the partition exempts it (it may also come later)
                found.append(breach)
        return found

    def _reset(self, r: Record, m: _Member) -> list[Breach]:
        key = (r["group"], r["topic"], r["partition"])
        self._part(key).resets.append((r["from_offset"], r["to_offset"]))
        st = self._current.get((m.consumer, *key))
        if st is not None:
            st.prev = None  # the consumer moved on purpose: its next delivery is not compared with the last
        return []

    def _end_stints(self, m: _Member) -> None:
        """Its next delivery of any partition begins a new stint."""
        for key in m.current:
            self._current.pop(key).closed = True
        m.current.clear()

    def _done(self, r: Record, m: _Member) -> list[Breach]:
        tps = tuple(_tp(t) for t in r["owned"])
        m.marks.append((r["ts"], m.life, True, tps))
        for topic, partition in tps:
            self._part((m.group, topic, partition)).owned = True
        self._end_stints(m)
        return []

    def _expired(self, r: Record, m: _Member) -> list[Breach]:
        m.expired.append(r["ts"])
        self._end_stints(m)
        return []

    def _released(self, r: Record, m: _Member) -> list[Breach]:
        """Its ownership of those partitions ends, and with it their stints (the others' go on)."""
        tps = tuple(_tp(t) for t in r["partitions"])
        m.marks.append((r["ts"], m.life, False, tps))
        for topic, partition in tps:
            key = (m.consumer, m.group, topic, partition)
            st = self._current.pop(key, None)
            if st is not None:
                st.closed = True
                m.current.remove(key)
        return []

    # ------------------------------------------------------------------------------------------ the end
    def finish(self, log_end: Mapping[tuple[str, int], int], ended_ms: int) -> SimVerdict:
        """The verdict: the online counts plus the end checks. ``log_end``: per (topic, partition), the records
        produced (offsets 0 .. n-1); ``ended_ms``: when the run stopped. Pure: call it again after more records."""
        counts = dict.fromkeys(Invariant, 0)
        counts.update(self._online)
        first = dict(self._first)
        backwards = [b for b in self._backwards if not self._parts[(b.group, b.topic, b.partition)].resets]
        counts[Invariant.COMMITS_BACKWARDS] = len(backwards)
        first.pop(Invariant.COMMITS_BACKWARDS, None)
        if backwards:
            first[Invariant.COMMITS_BACKWARDS] = min(backwards, key=lambda b: b.ts)
        for part in self._parts.values():
            counts[Invariant.DUPLICATES] += part.extra
            lost, breach = self._lost(part, ended_ms)
            counts[Invariant.LOST] += lost
            if breach is not None and (Invariant.LOST not in first or breach.ts < first[Invariant.LOST].ts):
                first[Invariant.LOST] = breach
        heals = self._heals()
        counts[Invariant.UNOWNED_AFTER_HEAL] = sum(len(h.unowned) for h in heals)
        for h in heals:
            if h.unowned:
                topic, partition = _tp(h.unowned[0])
                first.setdefault(Invariant.UNOWNED_AFTER_HEAL, Breach(
                    Invariant.UNOWNED_AFTER_HEAL, h.deadline, h.group, None, topic, partition,
                    detail=f"{h.fault} healed at {h.healed}: {len(h.unowned)} of {h.partitions} unowned"))
        for invariant, n, breach in self._unseen(log_end, ended_ms):
            counts[invariant] += n
            first.setdefault(invariant, breach)
        deliveries = sum(len(p.delivered) + p.extra for p in self._parts.values())
        return SimVerdict(counts, first, heals, self._events + deliveries, deliveries, self._out_of_order, ended_ms)

    def _lost(self, part: _Partition, ended_ms: int) -> tuple[int, Breach | None]:
        """Spark's ``lost_offsets`` of one partition: every offset of [0 or first delivered, max(highest commit,
        last delivered + 1)) no line delivered. Delivered offsets all lie in that range, so it is a subtraction."""
        if not part.delivered and not part.commits:
            return 0, None
        upper = max(part.hi + 1, part.cmax)
        lower = 0 if self.from_zero else (part.lo if part.delivered else upper)
        lost = upper - lower - len(part.delivered)
        if lost <= 0:
            return 0, None
        offset = next(o for o in range(lower, upper) if o not in part.delivered)
        # when it became visible: the first commit past it, or the first delivery that passed over it
        committed = next((t for t, o in part.commits if o > offset), ended_ms)
        ts = min(committed, next((t for t, a, b in part.jumps if a <= offset <= b), ended_ms))
        group, topic, partition = part.key
        return lost, Breach(Invariant.LOST, ts, group, None, topic, partition, offset,
                            f"{lost} offsets of [{lower}, {upper}) never delivered")

    def _heals(self) -> list[JudgedHeal]:
        """Spark's ``reowned_after_heal``: per judged deadline, the group's partitions no effective ownership
        covers at it."""
        deadlines = judged_deadlines(self._lab, self.grace_ms)
        if not deadlines:
            return []
        owned = self._ownership()
        parts: dict[str, list[tuple[str, int]]] = {}
        for (group, topic, partition), part in sorted(self._parts.items()):
            if part.in_analysis:
                parts.setdefault(group, []).append((topic, partition))
        out = []
        for group, fault, healed, deadline in deadlines:
            mine = parts.get(group, [])
            unowned = tuple(tp_str(tp) for tp in mine
                            if not any(f <= deadline <= t for f, t in owned.get((group, *tp), ())))
            out.append(JudgedHeal(group, fault, healed, deadline, len(mine), unowned))
        return out

    def _ownership(self) -> dict[PartitionKey, list[tuple[int, int]]]:
        """Effective ownership intervals per partition (rebalances.py ``ownership`` cut by invariants.py
        ``effective_ownership``)."""
        out: dict[PartitionKey, list[tuple[int, int]]] = {}
        for m in self._members.values():
            last_ts = max(m.last_ts, max((s.last_ts for s in m.stints), default=-1))

            def close(key: PartitionKey, start: int, life: int, next_ts: int | None, m: _Member = m,
                      last_ts: int = last_ts) -> None:
                ended = m.life_end[life]
                if next_ts is not None and not (life < m.life and next_ts > ended):
                    to = next_ts  # released, or owned again, in the same life
                else:  # its process ended (a later one took the id) or its lines stop: a kill after is the end
                    to = ended if life < m.life else last_ts
                    killed = m.killed_after(to)
                    if killed is not None:
                        to = killed
                expiry = min((e for e in m.expired if e >= start), default=None)
                out.setdefault(key, []).append((start, to if expiry is None else min(to, expiry)))

            open_: dict[tuple[str, int], tuple[int, int]] = {}
            for ts, life, owns, tps in m.marks:
                for tp in tps:
                    held = open_.pop(tp, None)
                    if held is not None:
                        close((m.group, *tp), held[0], held[1], ts)
                    if owns:
                        open_[tp] = (ts, life)
            for tp, (start, life) in open_.items():
                close((m.group, *tp), start, life, None)
        return out

    def _unseen(self, log_end: Mapping[tuple[str, int], int], ended_ms: int
                ) -> list[tuple[Invariant, int, Breach]]:
        """Jepsen's ``unseen``, per group reading the topic (a group that delivered, committed, owned or reset
        one of its partitions; every group when none did): offsets below the log end nobody delivered."""
        by_topic: dict[str, set[str]] = {}
        for (group, topic, _), part in self._parts.items():
            if part.in_analysis or part.resets:
                by_topic.setdefault(topic, set()).add(group)
        every = {m.group for m in self._members.values()}
        out = []
        for (topic, partition), end in sorted(log_end.items()):
            for group in sorted(by_topic.get(topic) or every):
                part = self._parts.get((group, topic, partition)) or _Partition((group, topic, partition))
                reset_to = max((to for _, to in part.resets), default=0)
                front = unseen.frontier(part.hi, part.cmax, reset_to)
                split = unseen.split(part.delivered, end, part.cmax, reset_to)
                never, unread = split.never_readable, split.unread
                if never > 0:
                    offset = next(o for o in range(min(front, end)) if o not in part.delivered)
                    out.append((Invariant.UNSEEN_NEVER_READABLE, never, Breach(
                        Invariant.UNSEEN_NEVER_READABLE, ended_ms, group, None, topic, partition, offset,
                        f"{never} offsets below {front} never delivered")))
                if unread > 0:
                    out.append((Invariant.UNSEEN_UNREAD, unread, Breach(
                        Invariant.UNSEEN_UNREAD, ended_ms, group, None, topic, partition, front,
                        f"offsets {front}..{end - 1} unread")))
        return out


def judge(records: Iterable[Record], log_end: Mapping[tuple[str, int], int], ended_ms: int,
          from_zero: bool = True) -> SimVerdict:
    """A whole run's verdict at once."""
    checker = Checker(from_zero=from_zero)
    for r in records:
        checker.observe(r)
    return checker.finish(log_end, ended_ms)


# ----------------------------------------------------------------------- the heal deadlines (a copy)
