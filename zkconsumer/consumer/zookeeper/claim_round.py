"""The default profile's pipelined claim of owner nodes, as a pure step: which nodes to create and which to read
(with a watch) next, from what the previous requests answered. No I/O and no lock: the driver
(:meth:`claims.OwnerNodes.claim_pipelined`) sends each :class:`Batch`, feeds the answers and the watch events back,
and serialises every call (the watches fire on kazoo's thread, the answers arrive on the rebalance's).

Each partition to claim goes through named states::

    HELD ──its holder's first node freed──▶ FREED ──sent──▶ CREATING ──created──▶ CREATED
      (a follower: not read)                  ▲                 │
    TO_READ ──sent with a watch──▶ WATCHED ───┘ watch fired     └── taken ──▶ TO_READ (a conflict if not predicted)
                                      └── the node names us ──▶ CREATED

A partition whose previous owner is still a member (``held``) waits for that owner's release instead of failing on
it, as Kafka trunk's ``UNRELEASED_PARTITIONS`` do. A member releases everything it gives up in one multi-op, so of
the nodes one member holds for us only the first is read and watched (``TO_READ``); the others (``HELD``) are
tried the moment that one is freed. A create that finds the node taken reads it with a watch; a conflict is a node
taken by someone not predicted to hold it (counted, as Kafka's conflicts are, but waited for all the same).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from zkconsumer.assignment.assignors import TopicPartition


class NodeState(Enum):
    HELD = "held"  # its predicted holder has not freed its first node yet: not read, not tried
    TO_READ = "to_read"  # to read with a data watch in the next batch
    WATCHED = "watched"  # read with a watch: someone holds it; freed when the watch fires
    FREED = "freed"  # to create in the next batch
    CREATING = "creating"  # its create was sent
    CREATED = "created"  # ours


@dataclass(frozen=True)
class Batch:
    """The next requests: ``create`` in one multi-op (one create alone when it is one), ``read`` with a watch."""

    create: tuple[TopicPartition, ...]
    read: tuple[TopicPartition, ...]
    #: creating ``create`` finishes the claim: the read of the start offsets may travel right behind it
    completes: bool


@dataclass(frozen=True)
class Conflict:
    """A node one of our creates found taken, held by someone our last assignment did not predict."""

    tp: TopicPartition
    thread: str  # our thread id that claims it
    holder: str | None


class ClaimRound:
    """One attempt's claim of ``decision`` (partition → our thread id). ``held``: partition → the thread id of its
    previous owner, a member still in the group (``members``: thread id → consumer id)."""

    def __init__(self, decision: Mapping[TopicPartition, str], held: Mapping[TopicPartition, str] | None = None,
                 members: Mapping[str, str] | None = None) -> None:
        self.decision = dict(decision)
        self._held = {tp: tid for tp, tid in (held or {}).items() if tp in self.decision}
        members = members or {}
        self.state = {tp: NodeState.FREED for tp in self.decision if tp not in self._held}
        by_member: dict[str, list[TopicPartition]] = {}
        for tp in sorted(self._held):
            by_member.setdefault(members.get(self._held[tp], self._held[tp]), []).append(tp)
        self._look: list[TopicPartition] = []  # TO_READ, in the order they became so
        self._followers: dict[TopicPartition, list[TopicPartition]] = {}  # tried when that node is freed
        for first, *rest in by_member.values():
            self._to_read(first)
            self._followers[first] = rest
            self.state.update(dict.fromkeys(rest, NodeState.HELD))
        self._hopeful: set[TopicPartition] = set()  # tried because another node of their holder was freed
        self._tried: set[TopicPartition] = set()  # a create of ours found these taken

    # ------------------------------------------------------------------------------------------------ queries
    @property
    def done(self) -> bool:
        return all(s is NodeState.CREATED for s in self.state.values())

    @property
    def has_work(self) -> bool:
        """A batch can be sent now (else the driver waits for a watch)."""
        return bool(self._look) or NodeState.FREED in self.state.values()

    def created(self) -> dict[TopicPartition, str]:
        """What this round created (deleted again by a driver that gives up)."""
        return {tp: self.decision[tp] for tp, s in self.state.items() if s is NodeState.CREATED}

    # ------------------------------------------------------------------------------------------------- steps
    def next_batch(self) -> Batch:
        """The requests to send now: every freed node created, every node to read read (the states advance as if
        sent)."""
        create = tuple(sorted(tp for tp, s in self.state.items() if s is NodeState.FREED))
        self.state.update(dict.fromkeys(create, NodeState.CREATING))
        read, self._look = tuple(self._look), []
        self.state.update({tp: NodeState.WATCHED for tp in read if self.state[tp] is NodeState.TO_READ})
        pending = sum(s is not NodeState.CREATED for s in self.state.values())
        return Batch(create, read, completes=bool(create) and len(create) == pending)

    def on_created(self, tps: Iterable[TopicPartition]) -> None:
        self.state.update(dict.fromkeys(tps, NodeState.CREATED))

    def on_taken(self, tp: TopicPartition) -> None:
        """Our create found the node there: read it (with a watch) to learn who holds it."""
        self._tried.add(tp)
        self._to_read(tp)

    def on_freed(self, tp: TopicPartition) -> None:
        """The node is free (its watch fired, a read found none, or its parent must be created again): create it
        with the next batch, and try the other nodes its holder held for us."""
        if self.state.get(tp) in (None, NodeState.CREATED):
            return  # not ours to claim, or ours already
        self.state[tp] = NodeState.FREED
        self._wake_followers(tp)

    def on_read(self, tp: TopicPartition, holder: str | None) -> Conflict | None:
        """The node as read (``None``: there is none, so it is free). Its watch is set unless it was free."""
        if holder is None:
            self.on_freed(tp)
            return None
        mine = self.decision[tp]
        conflict = None
        if holder == mine:  # our own node, from an earlier attempt cut short
            self.state[tp] = NodeState.CREATED
        elif tp in self._tried and not (tp in self._hopeful and holder == self._held.get(tp)):
            conflict = Conflict(tp, mine, holder)  # a create failed on it, and not for the holder predicted
        if holder != self._held.get(tp):  # not held by the member predicted: the others may be free
            self._wake_followers(tp)
        self._hopeful.discard(tp)  # watched on its own from now on
        return conflict

    # --------------------------------------------------------------------------------------------- internals
    def _to_read(self, tp: TopicPartition) -> None:
        self.state[tp] = NodeState.TO_READ
        self._look.append(tp)

    def _wake_followers(self, tp: TopicPartition) -> None:
        for other in self._followers.pop(tp, ()):
            if self.state[other] is not NodeState.CREATED:
                self.state[other] = NodeState.FREED
                self._hopeful.add(other)
