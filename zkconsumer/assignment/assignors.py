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

Differences from Kafka, on purpose (also in docs/exactness.md):

* Kafka walks each topic's thread list with ``indexOf`` (quadratic); we walk it once. Same result.
* Kafka 0.8.2's RoundRobin throws ``NoSuchElementException`` when nobody in the group subscribes to anything
  (``consumersForTopic.head`` of an empty map); we return an empty assignment.
* Partitions whose ``"[topic,partition]"`` hashes collide keep the order topics-by-name, partitions ascending
  (Kafka's sort is stable too, over a hash map's iteration order, which we cannot reproduce).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache, partial
from itertools import compress, cycle, filterfalse, repeat

from zkconsumer.errors import ZkConsumerError
from zkconsumer.javacompat import java_sort, java_sorted, string_hash_unsigned
from zkconsumer.types import TopicPartition, chosen  # TopicPartition: in types.py (neutral), importable here as before

log = logging.getLogger(__name__)

ROUND_ROBIN_MESSAGE = (
    "Round-robin assignment is allowed only if all consumers in the group subscribe to the same topics, "
    "AND if the stream counts across topics are identical for a given consumer instance."
)


#: Builds a TopicPartition from a (topic, partition) tuple without NamedTuple's Python-level __new__.
_new_tp = partial(tuple.__new__, TopicPartition)


class AssignmentError(ZkConsumerError, ValueError):
    """A strategy cannot assign this group (e.g. RoundRobin's precondition)."""


class RoundRobinPreconditionError(AssignmentError):
    """Kafka's ``require`` failure in RoundRobinAssignor, with Kafka's message."""

    def __init__(self, topic: str, threads: Sequence[str], head_topic: str, head_threads: Sequence[str]) -> None:
        self.topic, self.head_topic = topic, head_topic
        self.threads, self.head_threads = java_sorted(threads), java_sorted(head_threads)
        super().__init__(
            "requirement failed: " + ROUND_ROBIN_MESSAGE + "\n"
            + f"Topic {topic} has the following available consumer streams: {_scala_set(self.threads)}\n"
            + f"Topic {head_topic} has the following available consumer streams: {_scala_set(self.head_threads)}\n"
        )


def _scala_set(items: Sequence[str]) -> str:
    return "Set(" + ", ".join(items) + ")"


class _memo:  # noqa: N801 - used as a decorator, like functools.cached_property
    """``functools.cached_property`` without its per-access lock (Python 3.11 takes an RLock on every first
    access, which costs more than the small computations here when a sweep builds millions of contexts)."""

    def __init__(self, fn: Callable) -> None:
        self.fn, self.name, self.__doc__ = fn, fn.__name__, fn.__doc__

    def __get__(self, obj: object, owner: type | None = None):  # noqa: ANN204
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.fn(obj)  # later reads find the instance attribute first
        return value


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

    @_memo
    def consumers_for_topic(self) -> dict[str, list[str]]:
        """Topic → its thread ids in Java's string order (``ZkUtils.getConsumersPerTopic``).

        Topics subscribed by the same consumers with the same stream counts share one list object, which keeps
        a 1,000-topic group cheap and lets RoundRobin compare lists by identity first.
        """
        # Consumers with identical subscriptions (the usual case) are handled once, as a block.
        blocks: dict[tuple[tuple[str, int], ...], list[str]] = {}
        subscriptions = self.subscriptions
        one = self._one_mapping
        if one is not None:  # every consumer shares one mapping: one block, no per-consumer work
            blocks[tuple(sorted(one.items()))] = sorted(subscriptions)
        keys: dict[int, tuple[tuple[str, int], ...]] = {}  # by id(): a reader may share one mapping among many
        for consumer in sorted(subscriptions) if one is None else ():
            mapping = subscriptions[consumer]
            key = keys.get(id(mapping))
            if key is None:
                key = keys[id(mapping)] = tuple(sorted(mapping.items()))
            if key in blocks:
                blocks[key].append(consumer)
            else:
                blocks[key] = [consumer]
        by_topic: dict[str, list[tuple[int, int]]] = {}
        members: list[list[str]] = []
        for key, consumers in blocks.items():
            members.append(consumers)
            for topic, streams in key:
                if type(streams) is not int and (isinstance(streams, bool) or not isinstance(streams, int)) \
                        or streams < 1:
                    raise AssignmentError(f"consumer {consumers[0]} has stream count {streams!r} for {topic}")
                by_topic.setdefault(topic, []).append((len(members) - 1, streams))
        names = self.thread_names
        shared: dict[tuple[tuple[int, int], ...], list[str]] = {}
        out: dict[str, list[str]] = {}
        for topic in sorted(by_topic):
            sig = tuple(by_topic[topic])
            threads = shared.get(sig)
            if threads is None:
                threads = []
                for block, n in sig:
                    if n == 1:  # the usual case: one stream each, no slice per consumer
                        threads += [names[c][0] for c in members[block]]
                    else:
                        for c in members[block]:
                            threads += names[c][:n]
                java_sort(threads)  # ConsumerThreadId's order: String.compareTo (UTF-16 units)
                shared[sig] = threads
            out[topic] = threads
        return out

    @_memo
    def thread_names(self) -> dict[str, tuple[str, ...]]:
        """Consumer → its thread ids ``<consumer>-<i>`` (as many as its largest stream count)."""
        one = self._one_mapping
        if one is not None:
            return dict(zip(self.subscriptions, map(_thread_ids, self.subscriptions,
                                                    repeat(max(one.values(), default=0))), strict=True))
        most: dict[int, int] = {}  # by id() of a shared subscription mapping, as in consumers_for_topic
        out = {}
        for c, subs in self.subscriptions.items():
            n = most.get(id(subs))
            if n is None:
                n = most[id(subs)] = max(subs.values(), default=0)
            out[c] = _thread_ids(c, n)
        return out

    @_memo
    def _one_mapping(self) -> Mapping[str, int] | None:
        """The subscription mapping every consumer shares (one object: a rebalancing member interns them,
        consumer/zookeeper/group_view.py), else None."""
        distinct = set(map(id, self.subscriptions.values()))
        return next(iter(self.subscriptions.values())) if len(distinct) == 1 else None

    @_memo
    def sorted_partitions(self) -> dict[str, list[int]]:
        return {t: sorted(self.partitions.get(t, ())) for t in self.consumers_for_topic}

    @_memo
    def threads(self) -> list[str]:
        """Every subscribed thread id of the group in Java's string order (may be a list shared with
        :attr:`consumers_for_topic`: read it, do not change it)."""
        distinct = self.thread_lists
        if len(distinct) == 1:
            return next(iter(distinct.values()))
        return java_sorted({t for ts in distinct.values() for t in ts})

    @_memo
    def thread_lists(self) -> dict[int, list[str]]:
        """The distinct thread lists of :attr:`consumers_for_topic` by ``id`` (topics with the same threads
        share one list, so per-list work is done once)."""
        return {id(ts): ts for ts in self.consumers_for_topic.values()}

    @_memo
    def _partitions_key(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        parts = self.sorted_partitions
        return tuple((t, tuple(parts[t])) for t in self.consumers_for_topic)

    @_memo
    def hash_order(self) -> tuple[TopicPartition, ...]:
        """The group's partitions in RoundRobin's order (:func:`hash_ordered_partitions`).

        Memoised across contexts on (topic, partitions) because a sweep or a rebalancing consumer asks for the
        same topics again and again, and the Java hashes are most of RoundRobin's cost.
        """
        return _hash_order(self._partitions_key)

    @_memo
    def partition_set(self) -> frozenset[TopicPartition]:
        """Every partition of the subscribed topics."""
        return _partition_set(self._partitions_key)

    @_memo
    def topic_partitions(self) -> dict[str, tuple[TopicPartition, ...]]:
        """Subscribed topic → its partitions as :class:`TopicPartition` objects, ascending (memoised too)."""
        return {t: _topic_partitions(t, ps) for t, ps in self._partitions_key}

    @property
    def missing_topics(self) -> list[str]:
        return [t for t in self.consumers_for_topic if t not in self.partitions]

    @_memo
    def thread_owner(self) -> dict[str, str]:
        """Thread id → consumer id (a thread id alone is ambiguous when consumer ids end in ``-<digits>``)."""
        return {t: c for c, names in self.thread_names.items() for t in names}

    @_memo
    def thread_set(self) -> frozenset[str]:
        return frozenset(self.threads)

    @_memo
    def content_key(self) -> tuple | None:
        """What the assignment depends on, hashable, when that is cheap to say: every consumer shares one
        subscription mapping (the usual group), so the consumer ids, that mapping and the subscribed topics'
        partitions are all of it. None otherwise (no memo then)."""
        one = self._one_mapping
        if one is None:
            return None
        topics = tuple(sorted(one.items()))
        return (frozenset(self.subscriptions), topics,
                tuple(tuple(self.partitions.get(t, ())) for t, _ in topics))


@dataclass
class Assignment:
    """The whole group's decision: partition → owning thread id."""

    owners: dict[TopicPartition, str]
    context: AssignmentContext = field(repr=False)
    _shares: dict[str, dict[TopicPartition, str]] | None = field(default=None, init=False, repr=False,
                                                                 compare=False)

    def shares(self) -> dict[str, dict[TopicPartition, str]]:
        """Consumer → its share, in the order of :attr:`owners` (built once: every member of a group asks)."""
        if self._shares is None:
            owner_of = self.context.thread_owner
            shares: dict[str, dict[TopicPartition, str]] = {}
            for tp, tid in self.owners.items():
                shares.setdefault(owner_of[tid], {})[tp] = tid
            self._shares = shares
        return self._shares

    def by_thread(self) -> dict[str, list[str]]:
        """Thread id → sorted ``topic-partition`` strings, every subscribed thread present (maybe empty)."""
        out: dict[str, list[TopicPartition]] = {
            t: [] for threads in self.context.consumers_for_topic.values() for t in threads}
        for tp, tid in self.owners.items():
            out.setdefault(tid, []).append(tp)
        return {tid: [str(tp) for tp in sorted(out[tid])] for tid in java_sorted(out)}

    def for_consumer(self, consumer_id: str) -> dict[TopicPartition, str]:
        """The share one consumer claims: what Kafka's ``assign(ctx)`` returns inside that consumer."""
        return dict(self.shares().get(consumer_id, ()))

    def idle_threads(self, consumer_id: str | None = None) -> list[tuple[str, str]]:
        """(thread, topic) pairs that got no partition of a topic they subscribe to: Kafka's warning cases.

        For one consumer only its own threads are looked at (a rebalancing member asks on every attempt), in the
        same order as for the whole group: topics sorted, threads in Java's string order."""
        if consumer_id is None:
            taken = {(tid, tp.topic) for tp, tid in self.owners.items()}
            return [(tid, topic) for topic, threads in self.context.consumers_for_topic.items() for tid in threads
                    if (tid, topic) not in taken]
        names = self.context.thread_names.get(consumer_id, ())
        taken = {(tid, tp.topic) for tp, tid in self.shares().get(consumer_id, {}).items()}
        streams = self.context.subscriptions.get(consumer_id, {})
        return [(tid, topic) for topic in sorted(streams) for tid in java_sorted(names[:streams[topic]])
                if (tid, topic) not in taken]

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
    tps_by_topic = ctx.topic_partitions
    slices: dict[tuple[int, int], list[str]] = {}  # topics with the same threads and partition count split alike
    for topic, threads in ctx.consumers_for_topic.items():
        tps = tps_by_topic[topic]
        takers = slices.get((id(threads), len(tps)))  # the owner of each partition, in partition order
        if takers is None:
            n, extra = divmod(len(tps), len(threads))
            takers = slices[id(threads), len(tps)] = []
            for i, tid in enumerate(threads):
                count = n + 1 if i < extra else n
                if count == 0:
                    break  # every later thread gets nothing as well
                takers += [tid] * count
        owners.update(zip(tps, takers, strict=True))
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


def clear_caches() -> None:
    """Forget memoised RoundRobin orders and recent assignments (benchmarks call it so each run pays the full
    cost)."""
    _RECENT.clear()
    _hash_order.cache_clear()
    _topic_partitions.cache_clear()
    _partition_set.cache_clear()
    _thread_ids.cache_clear()


@lru_cache(maxsize=512)
def _hash_order(key: tuple[tuple[str, tuple[int, ...]], ...]) -> tuple[TopicPartition, ...]:
    return tuple(hash_ordered_partitions([t for t, _ in key], dict(key)))


@lru_cache(maxsize=512)
def _partition_set(key: tuple[tuple[str, tuple[int, ...]], ...]) -> frozenset[TopicPartition]:
    return frozenset(_new_tp((t, p)) for t, ps in key for p in ps)


@lru_cache(maxsize=4096)
def _thread_ids(consumer: str, streams: int) -> tuple[str, ...]:
    """``<consumer>-0`` … ``<consumer>-<streams-1>`` (a consumer keeps its ids from one rebalance to the next)."""
    return tuple(f"{consumer}-{i}" for i in range(streams))


@lru_cache(maxsize=4096)
def _topic_partitions(topic: str, partitions: tuple[int, ...]) -> tuple[TopicPartition, ...]:
    return tuple(_new_tp((topic, p)) for p in partitions)


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
    return Assignment(dict(zip(ctx.hash_order, cycle(head))), ctx)  # i-th partition to thread i mod n


def roundrobin_relaxed_assign(ctx: AssignmentContext) -> Assignment:
    """Kafka 0.10.2 ``RoundRobinAssignor``: union of threads, skipping those not subscribed to the topic."""
    cft = ctx.consumers_for_topic
    if not cft:
        return Assignment({}, ctx)
    all_threads = ctx.threads
    n = len(all_threads)
    ordered = ctx.hash_order
    if all(len(threads) == n for threads in cft.values()):  # nobody is skipped: plain round robin
        return Assignment(dict(zip(ordered, cycle(all_threads))), ctx)
    # For each distinct thread list, position i → (the first subscribed thread at or after i, circularly, and
    # the position after it): Kafka's dropWhile(not subscribed).next without walking the skipped threads.
    tables: dict[int, list[tuple[str, int]]] = {}
    for key, threads in ctx.thread_lists.items():
        member = set(threads)
        table: list[tuple[str, int]] = [("", 0)] * n
        nxt = next(i for i in range(n) if all_threads[i] in member) + n  # wraps around
        for i in range(n - 1, -1, -1):
            if all_threads[i] in member:
                nxt = i
            table[i] = (all_threads[nxt % n], (nxt + 1) % n)
        tables[key] = table
    by_topic = {topic: tables[id(threads)] for topic, threads in cft.items()}
    owners: dict[TopicPartition, str] = {}
    pos = 0
    for tp in ordered:
        owners[tp], pos = by_topic[tp[0]][pos]
    return Assignment(owners, ctx)


def sticky_assign(ctx: AssignmentContext, previous: Mapping[TopicPartition, str] | None = None) -> Assignment:
    """A simple sticky assignor (beyond Kafka 0.8; Kafka 0.11 added its own StickyAssignor).

    Every partition keeps its previous thread while that thread still subscribes to its topic; the others go,
    in (topic, partition) order, to the least-loaded subscribed thread (ties by thread id); then partitions
    move from the most to the least loaded thread until the counts differ by at most one where subscriptions
    allow. It needs the group's *previous* assignment as an input that every member sees identically, which
    0.8's decentralised protocol cannot guarantee (each member reads ``/owners`` at its own moment), so it is
    offered to the sweep and the analysis, not as a ``partition.assignment.strategy``.

    "Least loaded, ties by thread id" is ``min`` over a topic's thread list (sorted, so the first minimum is
    the smallest id); "most loaded, ties by the largest id" is ``max`` over the reversed list.
    """
    cft = ctx.consumers_for_topic
    everyone = ctx.threads
    if not everyone:
        return Assignment({}, ctx)
    tps_by_topic = ctx.topic_partitions
    owners: dict[TopicPartition, str] = {}
    lists = ctx.thread_lists
    if previous:
        sets = {key: set(threads) for key, threads in lists.items()}
        if len(sets) == 1:  # every topic has the same threads: keep what a live thread owned (runs in C)
            alive = next(iter(sets.values()))
            owners = dict(compress(previous.items(), map(alive.__contains__, previous.values())))
        else:
            subscribed = {topic: sets[id(threads)] for topic, threads in cft.items()}
            nobody: set[str] = set()
            owners = {tp: tid for tp, tid in previous.items() if tid in subscribed.get(tp[0], nobody)}
        if not owners.keys() <= ctx.partition_set:  # a partition that no longer exists
            owners = {tp: tid for tp, tid in owners.items() if tp in ctx.partition_set}
    load = dict.fromkeys(everyone, 0)
    load.update(Counter(owners.values()))
    weight = load.__getitem__
    for topic, threads in cft.items():
        tps = tps_by_topic[topic]
        free = list(filterfalse(owners.__contains__, tps)) if owners else tps
        if free:
            takers = _least_loaded_first(threads, load, len(free))
            owners.update(zip(free, takers, strict=True))
            for tid in takers:
                load[tid] += 1
    # balance: move the largest partition of the most loaded thread (ties: largest id) that can go to a thread
    # of its topic carrying at least two fewer, to the least loaded such thread. Whether a partition can go
    # depends only on its topic's thread list, so the search runs over (thread list, topic), not partitions.
    descending = everyone[::-1]
    lists_of: dict[str, list[int]] | None = None
    topics_of: dict[int, list[str]] = {}
    while True:
        heavy = max(descending, key=weight)
        top = load[heavy]
        if top - min(load.values()) <= 1:
            break
        if lists_of is None:
            lists_of = {t: [] for t in everyone}
            for key, ts in lists.items():
                for t in ts:
                    lists_of[t].append(key)
            for topic, ts in cft.items():
                topics_of.setdefault(id(ts), []).append(topic)
        lightest = {key: min(lists[key], key=weight) for key in lists_of[heavy]}
        candidates = sorted((topic for key, light in lightest.items() if top - load[light] > 1
                             for topic in topics_of[key]), reverse=True)
        moved = None
        for topic in candidates:  # the largest partition the heaviest thread owns in the largest such topic
            for tp in reversed(tps_by_topic[topic]):
                if owners[tp] == heavy:
                    moved = tp
                    break
            if moved is not None:
                break
        if moved is None:
            break  # nothing of the heaviest thread can go to a thread two lighter
        light = lightest[id(cft[moved[0]])]
        owners[moved] = light
        load[heavy] -= 1
        load[light] += 1
    return Assignment(owners, ctx)


def _least_loaded_first(threads: Sequence[str], load: Mapping[str, int], k: int) -> list[str]:
    """The next ``k`` picks of "least loaded thread, ties by id", each pick adding one to its thread's load.

    The picks are the ``k`` smallest (level, id) pairs with level >= a thread's load, so they come level by
    level: at level L every thread whose load is at most L, in id order (``threads`` is sorted).
    """
    picks: list[str] = []
    loads = list(map(load.__getitem__, threads))
    level, top = min(loads), max(loads)
    eligible: list[str] = []
    while len(picks) < k:
        if level <= top or not eligible:
            eligible = list(compress(threads, map(level.__ge__, loads)))
        need = k - len(picks)
        picks += eligible[:need] if len(eligible) >= need else eligible
        level += 1
    return picks


Strategy = Callable[[AssignmentContext], Assignment]

STRATEGIES: dict[str, Strategy] = {
    "range": range_assign,
    "roundrobin": roundrobin_assign,
    "roundrobin-relaxed": roundrobin_relaxed_assign,
}


def get_strategy(name: str) -> Strategy:
    """The assignor a ``partition.assignment.strategy`` names (ZooKeeper mode)."""
    return chosen(STRATEGIES, name, AssignmentError, f"unknown partition.assignment.strategy {name!r}")


#: the last few whole-group assignments, by strategy and :attr:`AssignmentContext.content_key`: the members of one
#: group that share a process (the lab's hosts run 25; the simulator's herd, thousands) decide the same thing from
#: the same view, and the assignment is a pure function of it. Read-only to every caller, as it always was.
_RECENT: dict[tuple, Assignment] = {}
RECENT_CAPACITY = 8


def assign(strategy: str, ctx: AssignmentContext) -> Assignment:
    """The whole group's assignment under ``strategy`` (computed once for equal views: :data:`_RECENT`)."""
    content = ctx.content_key
    key = (strategy, content) if content is not None else None
    if key is not None and (known := _RECENT.get(key)) is not None:
        return known
    whole = get_strategy(strategy)(ctx)
    if key is not None:
        if len(_RECENT) >= RECENT_CAPACITY:
            del _RECENT[next(iter(_RECENT))]  # the oldest
        _RECENT[key] = whole
    return whole


def assign_for_consumer(strategy: str, ctx: AssignmentContext, consumer_id: str) -> dict[TopicPartition, str]:
    """One consumer's share, logging Kafka's warning for each of its threads left without a partition."""
    whole = assign(strategy, ctx)
    whole.warn_idle(consumer_id)
    return whole.for_consumer(consumer_id)
