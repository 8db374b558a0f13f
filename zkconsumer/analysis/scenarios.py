"""Sweep scenarios and their result rows: the pure core of the assignment sweep (no Spark, no I/O).

A *scenario* is a group shape (consumers, streams per consumer, topics, partitions per topic, subscription
pattern) plus a sequence of membership changes. It is a pure function of (seed, scenario id), so Spark
tasks build their own scenarios from ``spark.range`` ids (nothing big is shipped from the driver) and a
plain Python loop can recompute any of them for comparison. Here, the loop (:func:`run_scenario`) calls
:func:`zkconsumer.assignment.assignors.assign` per step: it is the oracle that the batched numpy computation
(:mod:`zkconsumer.analysis.sweep_batch`) is checked against row for row. The drivers (local loop, Spark) are
:mod:`zkconsumer.analysis.sweep`.

Leave and crash both remove a member (the assignment cannot tell them apart); the kind is recorded.
RoundRobin's precondition failure becomes a ``precondition_failed`` row, as Kafka's rebalance would fail.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from operator import ne

import pyarrow as pa

from zkconsumer.assignment.assignors import (
    STRATEGIES,
    AssignmentContext,
    RoundRobinPreconditionError,
    assign,
    sticky_assign,
)
from zkconsumer.errors import IllegalArgument

PATTERNS = ("all-same", "random-subsets", "disjoint")
CHANGE_KINDS = ("join", "leave", "crash")

GRID_FULL: dict[str, tuple] = {
    "consumers": (2, 4, 8, 16), "streams": (1, 2), "topics": (1, 3, 8), "partitions": (4, 12, 32),
    "pattern": PATTERNS,
}
GRID_QUICK: dict[str, tuple] = {
    "consumers": (2, 3), "streams": (1, 2), "topics": (1, 2), "partitions": (3, 8), "pattern": PATTERNS,
}

RESULT_SCHEMA = (
    "scenario_id long, seed long, consumers int, streams int, topics int, partitions_per_topic int, "
    "pattern string, strategy string, step int, change string, member string, members int, threads int, "
    "partitions int, assigned int, status string, balance int, max_per_thread int, min_per_thread int, "
    "moved int, moved_forced int, moved_consumer int, error string")


@dataclass(frozen=True)
class SweepConfig:
    grid: dict[str, tuple]
    seed: int = 1
    changes: int = 3
    strategies: tuple[str, ...] = (*STRATEGIES, "sticky")

    @property
    def cells(self) -> list[tuple]:
        keys = ("consumers", "streams", "topics", "partitions", "pattern")
        return list(itertools.product(*(self.grid[k] for k in keys)))


@dataclass
class Scenario:
    scenario_id: int
    consumers: int
    streams: int
    topics: int
    partitions: int
    pattern: str
    members: dict[str, dict[str, int]]
    #: (kind, consumer id, its subscription for a join else None)
    changes: list[tuple[str, str, dict[str, int] | None]] = field(default_factory=list)

    @property
    def topic_partitions(self) -> dict[str, list[int]]:
        return {f"t{i}": list(range(self.partitions)) for i in range(self.topics)}


def _subscription(pattern: str, index: int, consumers: int, topics: int, streams: int,
                  rng: random.Random) -> dict[str, int]:
    names = [f"t{i}" for i in range(topics)]
    if pattern == "all-same":
        chosen = names
    elif pattern == "random-subsets":
        chosen = [t for t in names if rng.random() < 0.5] or [rng.choice(names)]
    elif pattern == "disjoint":  # topics split among members; more members than topics share one
        chosen = [t for i, t in enumerate(names) if i % consumers == index % consumers] or [names[index % topics]]
    else:
        raise IllegalArgument(f"unknown subscription pattern {pattern!r}")
    return dict.fromkeys(chosen, streams)


def make_scenario(cfg: SweepConfig, scenario_id: int, cells: list[tuple] | None = None) -> Scenario:
    """The scenario for an id: its grid cell is ``id mod cells``, the rest comes from a seeded RNG.

    ``random.Random`` seeded with an int is stable across processes and Python hash seeds (and seeding it is
    cheaper than with a string, which is hashed with SHA-512).
    """
    cells = cells or cfg.cells
    consumers, streams, topics, partitions, pattern = cells[scenario_id % len(cells)]
    rng = random.Random((cfg.seed << 48) ^ scenario_id)
    index = itertools.count()

    def new_id() -> str:  # random ids, so a joiner sorts anywhere among the threads, as in Kafka
        return f"c{rng.getrandbits(32):08x}"

    members = {new_id(): _subscription(pattern, next(index), consumers, topics, streams, rng)
               for _ in range(consumers)}
    sc = Scenario(scenario_id, consumers, streams, topics, partitions, pattern, members)
    alive = list(members)
    for _ in range(cfg.changes):
        kind = rng.choice(CHANGE_KINDS) if len(alive) > 1 else "join"
        if kind == "join":
            cid = new_id()
            sub = _subscription(pattern, next(index), consumers, topics, streams, rng)
            alive.append(cid)
            sc.changes.append((kind, cid, sub))
        else:
            cid = alive.pop(rng.randrange(len(alive)))
            sc.changes.append((kind, cid, None))
    return sc


def _metrics(owners: dict, threads: set[str], prev: dict | None, thread_owner: dict[str, str],
             prev_thread_owner: dict[str, str] | None, one_thread_each: bool = False,
             ) -> tuple[int, int, int, int, int | None, int | None, int | None]:
    """(assigned, balance, max, min, moved, moved_forced, moved_consumer) for one step.

    Balance counts every subscribed thread (an idle one counts as 0). Moves compare with the previous step,
    partition by partition, in ``map`` chains that run in C: a million scenarios make this the sweep's
    hottest loop after the assignors. A partition whose thread is gone is a forced move (it always moved);
    one that nobody owns now counts as moved, and as moved to another consumer. ``one_thread_each``: every
    consumer has a single thread in both steps, so a partition changes consumer exactly when it changes thread.
    """
    counts = Counter(owners.values()).values()
    top = max(counts, default=0)
    low = min(counts, default=0) if len(counts) == len(threads) else 0  # some thread got nothing
    if prev is None or prev_thread_owner is None:
        return len(owners), top - low, top, low, None, None, None
    new_owner = list(map(owners.get, prev))
    old_owner = prev.values()
    moved = sum(map(ne, new_owner, old_owner))
    forced = len(prev) - sum(map(threads.__contains__, old_owner))
    moved_consumer = moved if one_thread_each else sum(
        map(ne, map(thread_owner.get, new_owner), map(prev_thread_owner.__getitem__, old_owner)))
    return len(owners), top - low, top, low, moved, forced, moved_consumer


def run_scenario(sc: Scenario, strategies: tuple[str, ...], seed: int = 0) -> list[tuple]:
    """Rows (one per strategy and step, in ``RESULT_SCHEMA`` order) for a scenario: the initial assignment, then one
    per change. Steps are the outer loop so every strategy shares one :class:`AssignmentContext` per step
    (thread lists, RoundRobin's hash order and the thread → consumer map are computed once)."""
    rows: list[tuple] = []
    parts = sc.topic_partitions
    shape = (sc.scenario_id, seed, sc.consumers, sc.streams, sc.topics, sc.partitions, sc.pattern)
    members = dict(sc.members)
    prev: dict[str, dict | None] = dict.fromkeys(strategies)
    prev_owner_of: dict[str, str] | None = None
    for step, (kind, cid, sub) in enumerate([("initial", "", None), *sc.changes]):
        if kind == "join":
            members[cid] = sub or {}
        elif kind in ("leave", "crash"):
            members.pop(cid, None)
        ctx = AssignmentContext(members, parts)
        threads = ctx.thread_set
        owner_of = ctx.thread_owner
        n_parts = sum(map(len, ctx.sorted_partitions.values()))  # of the subscribed topics
        for strategy in strategies:
            head = (*shape, strategy, step, kind, cid, len(members))
            try:
                # sticky is given the previous assignment (the sweep sees the whole group, consistently)
                result = sticky_assign(ctx, prev[strategy]) if strategy == "sticky" else assign(strategy, ctx)
            except RoundRobinPreconditionError as e:
                n_threads = sum(max(s.values(), default=0) for s in members.values())
                rows.append((*head, n_threads, n_parts, 0, "precondition_failed", None, None, None, None, None,
                             None, str(e).splitlines()[0][:120]))
                prev[strategy] = None
                continue
            assigned, balance, top, low, moved, forced, moved_consumer = _metrics(
                result.owners, threads, prev[strategy], owner_of, prev_owner_of, sc.streams == 1)
            rows.append((*head, len(threads), n_parts, assigned, "ok", balance, top, low, moved, forced,
                         moved_consumer, None))
            prev[strategy] = result.owners
        prev_owner_of = owner_of
    return rows


def iter_rows(cfg: SweepConfig, ids: Iterator[int]) -> Iterator[tuple]:
    cells = cfg.cells
    for i in ids:
        yield from run_scenario(make_scenario(cfg, int(i), cells), cfg.strategies, cfg.seed)



INT_COLS = ("balance", "max_per_thread", "min_per_thread", "moved", "moved_forced", "moved_consumer")

_ARROW_TYPES = {"long": pa.int64(), "int": pa.int32(), "string": pa.string()}
ARROW_SCHEMA = pa.schema([(name, _ARROW_TYPES[kind]) for name, kind in
                          (c.split() for c in RESULT_SCHEMA.split(", "))])


def arrow_batch(rows: list[tuple]) -> pa.RecordBatch:
    """Rows to one Arrow batch, column by column (the metric columns hold nulls for precondition failures and
    initial steps). Arrow straight from lists costs about half of going through pandas."""
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(ARROW_SCHEMA)
    return pa.RecordBatch.from_arrays([pa.array(col, type=f.type) for col, f in zip(columns, ARROW_SCHEMA,
                                                                                      strict=True)],
                                      schema=ARROW_SCHEMA)
