"""Partition assignment strategies of the Kafka 0.8 ZooKeeper consumer, as pure functions.

Each consumer in a 0.8 group computes the assignment on its own from what it reads in ZooKeeper and claims
only its own share, so every strategy must be a deterministic function of the same inputs. Here each one
computes the *whole group's* assignment from an :class:`AssignmentContext`; a consumer's share is a filter
of it (:meth:`Assignment.for_consumer`), which is exactly what Kafka's per-consumer loops compute.

Strategies:

``range``               Kafka 0.8.2 ``RangeAssignor``.
``roundrobin``          Kafka 0.8.2 ``RoundRobinAssignor``: identical subscriptions required; partitions ordered by
                        the signed Java ``String.hashCode`` of ``"[topic,partition]"``.
``roundrobin-relaxed``  Kafka 0.10.2's relaxed ``RoundRobinAssignor``: the union of all threads, each partition
                        going to the next thread (circularly) that subscribes to its topic.

Differences from Kafka, on purpose (also in README "Limits"):

* Kafka walks each topic's thread list with ``indexOf`` (quadratic); we walk it once. Same result.
* Kafka 0.8.2's RoundRobin throws ``NoSuchElementException`` when nobody in the group subscribes to anything
  (``consumersForTopic.head`` of an empty map); we return an empty assignment.
* Partitions whose ``"[topic,partition]"`` hashes collide keep the order topics-by-name, partitions ascending
  (Kafka's sort is stable too, over a hash map's iteration order, which we cannot reproduce).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import NamedTuple

from .javacompat import string_hash_unsigned

log = logging.getLogger(__name__)

ROUND_ROBIN_MESSAGE = (
    "Round-robin assignment is allowed only if all consumers in the group subscribe to the same topics, "
    "AND if the stream counts across topics are identical for a given consumer instance."
)


class TopicPartition(NamedTuple):
    """Kafka's ``TopicAndPartition``; prints as ``topic-partition`` like the tools do."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def kafka_string(self) -> str:
        """``TopicAndPartition.toString``: the string RoundRobin hashes."""
        return f"[{self.topic},{self.partition}]"


#: Builds a TopicPartition from a (topic, partition) tuple without NamedTuple's Python-level __new__.
_new_tp = partial(tuple.__new__, TopicPartition)


class AssignmentError(ValueError):
    """A strategy cannot assign this group (e.g. RoundRobin's precondition)."""


class RoundRobinPreconditionError(AssignmentError):
    """Kafka's ``require`` failure in RoundRobinAssignor, with Kafka's message."""

    def __init__(self, topic: str, threads: Sequence[str], head_topic: str, head_threads: Sequence[str]) -> None:
        self.topic, self.head_topic = topic, head_topic
        self.threads, self.head_threads = sorted(threads), sorted(head_threads)
        super().__init__(
            "requirement failed: " + ROUND_ROBIN_MESSAGE + "\n"
            + f"Topic {topic} has the following available consumer streams: {_scala_set(self.threads)}\n"
            + f"Topic {head_topic} has the following available consumer streams: {_scala_set(self.head_threads)}\n"
        )


def _scala_set(items: Sequence[str]) -> str:
    return "Set(" + ", ".join(items) + ")"


@dataclass(frozen=True, eq=False)
class AssignmentContext:
    """What every consumer reads from ZooKeeper before it assigns.

    ``subscriptions``: consumer id → topic → stream count, with wildcards already resolved (Kafka's
    ``TopicCount.getConsumerThreadIdsPerTopic``). A consumer with an empty mapping takes part in nothing.
    ``partitions``: topic → partition ids (any order; sorted numerically here). A subscribed topic that is
    missing has no partitions, as in Kafka, and is reported by :attr:`missing_topics`.
    """

    subscriptions: Mapping[str, Mapping[str, int]]
    partitions: Mapping[str, Sequence[int]]

    @cached_property
    def consumers_for_topic(self) -> dict[str, list[str]]:
        """Topic → its thread ids sorted as strings (``ZkUtils.getConsumersPerTopic``).

        Topics subscribed by the same consumers with the same stream counts share one list object, which keeps
        a 1,000-topic group cheap and lets RoundRobin compare lists by identity first.
        """
        # Consumers with identical subscriptions (the usual case) are handled once, as a block.
        blocks: dict[tuple[tuple[str, int], ...], list[str]] = {}
        for consumer in sorted(self.subscriptions):
            key = tuple(sorted(self.subscriptions[consumer].items()))
            blocks.setdefault(key, []).append(consumer)
        by_topic: dict[str, list[tuple[int, int]]] = {}
        members: list[list[str]] = []
        for key, consumers in blocks.items():
            members.append(consumers)
            for topic, streams in key:
                if isinstance(streams, bool) or not isinstance(streams, int) or streams < 1:
                    raise AssignmentError(f"consumer {consumers[0]} has stream count {streams!r} for {topic}")
                by_topic.setdefault(topic, []).append((len(members) - 1, streams))
        shared: dict[tuple[tuple[int, int], ...], list[str]] = {}
        out: dict[str, list[str]] = {}
        for topic in sorted(by_topic):
            sig = tuple(by_topic[topic])
            threads = shared.get(sig)
            if threads is None:
                threads = sorted(f"{c}-{i}" for block, n in sig for c in members[block] for i in range(n))
                shared[sig] = threads
            out[topic] = threads
        return out

    @cached_property
    def sorted_partitions(self) -> dict[str, list[int]]:
        return {t: sorted(self.partitions.get(t, ())) for t in self.consumers_for_topic}

    @property
    def missing_topics(self) -> list[str]:
        return [t for t in self.consumers_for_topic if t not in self.partitions]

    @cached_property
    def thread_owner(self) -> dict[str, str]:
        """Thread id → consumer id (a thread id alone is ambiguous when consumer ids end in ``-<digits>``)."""
        return {f"{c}-{i}": c for c, subs in self.subscriptions.items()
                for i in range(max(subs.values(), default=0))}


@dataclass
class Assignment:
    """The whole group's decision: partition → owning thread id."""

    owners: dict[TopicPartition, str]
    context: AssignmentContext = field(repr=False)

    def by_thread(self) -> dict[str, list[str]]:
        """Thread id → sorted ``topic-partition`` strings, every subscribed thread present (maybe empty)."""
        out: dict[str, list[TopicPartition]] = {
            t: [] for threads in self.context.consumers_for_topic.values() for t in threads}
        for tp, tid in self.owners.items():
            out.setdefault(tid, []).append(tp)
        return {tid: [str(tp) for tp in sorted(tps)] for tid, tps in sorted(out.items())}

    def for_consumer(self, consumer_id: str) -> dict[TopicPartition, str]:
        """The share one consumer claims: what Kafka's ``assign(ctx)`` returns inside that consumer."""
        owner = self.context.thread_owner
        return {tp: tid for tp, tid in self.owners.items() if owner.get(tid) == consumer_id}

    def idle_threads(self, consumer_id: str | None = None) -> list[tuple[str, str]]:
        """(thread, topic) pairs that got no partition of a topic they subscribe to: Kafka's warning cases."""
        taken = {(tid, tp.topic) for tp, tid in self.owners.items()}
        owner = self.context.thread_owner
        return [(tid, topic) for topic, threads in self.context.consumers_for_topic.items() for tid in threads
                if (tid, topic) not in taken and (consumer_id is None or owner.get(tid) == consumer_id)]

    def warn_idle(self, consumer_id: str) -> None:
        for tid, topic in self.idle_threads(consumer_id):
            log.warning("No broker partitions consumed by consumer thread %s for topic %s", tid, topic)

    def __len__(self) -> int:
        return len(self.owners)


# ------------------------------------------------------------------------------------------------ strategies

def range_assign(ctx: AssignmentContext) -> Assignment:
    """Kafka 0.8.2 ``RangeAssignor`` for every topic of the group.

    Thread i of C (sorted as strings) takes ``P div C`` partitions, one more when ``i < P mod C``, starting at
    ``(P div C)*i + min(i, P mod C)``: a running start pointer gives the same slices without the arithmetic.
    """
    owners: dict[TopicPartition, str] = {}
    parts_by_topic = ctx.sorted_partitions
    for topic, threads in ctx.consumers_for_topic.items():
        parts = parts_by_topic[topic]
        n, extra = divmod(len(parts), len(threads))
        start = 0
        for i, tid in enumerate(threads):
            count = n + 1 if i < extra else n
            if count == 0:
                break  # every later thread gets nothing as well
            for p in parts[start:start + count]:
                owners[_new_tp((topic, p))] = tid
            start += count
    return Assignment(owners, ctx)


def hash_ordered_partitions(topics: Sequence[str], parts_by_topic: Mapping[str, Sequence[int]]
                            ) -> list[TopicPartition]:
    """All partitions sorted by the signed Java hash of ``"[topic,partition]"``; stable for collisions.

    Java's hash is a polynomial, so ``hash(prefix + suffix) = hash(prefix) * 31^len(suffix) + hash(suffix)``
    (mod 2^32): the topic prefix is hashed once per topic and each ``"<p>]"`` suffix once per partition id.
    """
    suffixes: dict[int, tuple[int, int]] = {}
    keyed: list[tuple[int, TopicPartition]] = []
    append = keyed.append
    for topic in topics:
        prefix = string_hash_unsigned("[" + topic + ",")
        for p in parts_by_topic[topic]:
            suffix = suffixes.get(p)
            if suffix is None:
                text = str(p) + "]"
                suffix = suffixes[p] = (pow(31, len(text), 1 << 32), string_hash_unsigned(text))
            h = (prefix * suffix[0] + suffix[1]) & 0xFFFFFFFF
            append((h - 0x1_0000_0000 if h & 0x8000_0000 else h, _new_tp((topic, p))))
    keyed.sort(key=_first)
    return [tp for _, tp in keyed]


def _first(pair: tuple[int, TopicPartition]) -> int:
    return pair[0]


def roundrobin_assign(ctx: AssignmentContext) -> Assignment:
    """Kafka 0.8.2 ``RoundRobinAssignor``: identical thread sets on every topic, else Kafka's error."""
    cft = ctx.consumers_for_topic
    if not cft:
        return Assignment({}, ctx)
    topics = list(cft)
    head_topic = topics[0]
    head = cft[head_topic]
    head_set: set[str] | None = None
    for topic in topics[1:]:
        threads = cft[topic]
        if threads is head:
            continue
        head_set = set(head) if head_set is None else head_set
        if set(threads) != head_set:
            raise RoundRobinPreconditionError(topic, threads, head_topic, head)
    ordered = hash_ordered_partitions(topics, ctx.sorted_partitions)
    n = len(head)
    owners = {tp: head[i % n] for i, tp in enumerate(ordered)}
    return Assignment(owners, ctx)


def roundrobin_relaxed_assign(ctx: AssignmentContext) -> Assignment:
    """Kafka 0.10.2 ``RoundRobinAssignor``: union of threads, skipping those not subscribed to the topic."""
    cft = ctx.consumers_for_topic
    if not cft:
        return Assignment({}, ctx)
    all_threads = sorted({t for threads in cft.values() for t in threads})
    n = len(all_threads)
    members = {topic: frozenset(threads) for topic, threads in cft.items()}
    ordered = hash_ordered_partitions(list(cft), ctx.sorted_partitions)
    everyone = {topic for topic, threads in cft.items() if len(threads) == n}
    owners: dict[TopicPartition, str] = {}
    pos = 0
    for tp in ordered:
        topic = tp[0]
        if topic not in everyone:
            subscribed = members[topic]
            # dropWhile(not subscribed).next: advance to the next subscribed thread, take it, stand after it
            while all_threads[pos % n] not in subscribed:
                pos += 1
        owners[tp] = all_threads[pos % n]
        pos += 1
    return Assignment(owners, ctx)


def sticky_assign(ctx: AssignmentContext, previous: Mapping[TopicPartition, str] | None = None) -> Assignment:
    """A simple sticky assignor (beyond Kafka 0.8; Kafka 0.11 added its own StickyAssignor).

    Every partition keeps its previous thread while that thread still subscribes to its topic; the others go,
    in (topic, partition) order, to the least-loaded subscribed thread (ties by thread id); then partitions
    move from the most to the least loaded thread until the counts differ by at most one where subscriptions
    allow. It needs the group's *previous* assignment as an input that every member sees identically, which
    0.8's decentralised protocol cannot guarantee (each member reads ``/owners`` at its own moment), so it is
    offered to the sweep and the analysis, not as a ``partition.assignment.strategy``.
    """
    cft = ctx.consumers_for_topic
    parts = ctx.sorted_partitions
    subscribed = {topic: set(threads) for topic, threads in cft.items()}
    load: dict[str, int] = {t: 0 for threads in cft.values() for t in threads}
    owners: dict[TopicPartition, str] = {}
    for tp, tid in sorted((previous or {}).items()):
        if tp.topic in subscribed and tp.partition in parts[tp.topic] and tid in subscribed[tp.topic]:
            owners[tp] = tid
            load[tid] += 1
    for topic in cft:
        for p in parts[topic]:
            tp = TopicPartition(topic, p)
            if tp not in owners:
                tid = min(cft[topic], key=lambda t: (load[t], t))
                owners[tp] = tid
                load[tid] += 1
    while load:
        heavy = max(load, key=lambda t: (load[t], t))
        movable = sorted(tp for tp, t in owners.items() if t == heavy)
        best: tuple[TopicPartition, str] | None = None
        for tp in reversed(movable):
            light = min(subscribed[tp.topic], key=lambda t: (load[t], t))
            if load[heavy] - load[light] > 1:
                best = (tp, light)
                break
        if best is None:
            break
        tp, light = best
        owners[tp] = light
        load[heavy] -= 1
        load[light] += 1
    return Assignment(owners, ctx)


Strategy = Callable[[AssignmentContext], Assignment]

STRATEGIES: dict[str, Strategy] = {
    "range": range_assign,
    "roundrobin": roundrobin_assign,
    "roundrobin-relaxed": roundrobin_relaxed_assign,
}


def get_strategy(name: str) -> Strategy:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise AssignmentError(
            f"unknown partition.assignment.strategy {name!r}; choose one of {', '.join(STRATEGIES)}") from None


def assign(strategy: str, ctx: AssignmentContext) -> Assignment:
    """The whole group's assignment under ``strategy``."""
    return get_strategy(strategy)(ctx)


def assign_for_consumer(strategy: str, ctx: AssignmentContext, consumer_id: str) -> dict[TopicPartition, str]:
    """One consumer's share, logging Kafka's warning for each of its threads left without a partition."""
    whole = assign(strategy, ctx)
    whole.warn_idle(consumer_id)
    return whole.for_consumer(consumer_id)
