"""Strategies compared over many group shapes and membership changes, with the project's own assignors.

A *scenario* is a group shape (consumers, streams per consumer, topics, partitions per topic, subscription
pattern) plus a sequence of membership changes. It is a pure function of (seed, scenario id), so Spark
tasks build their own scenarios from ``spark.range`` ids (nothing big is shipped from the driver) and a
plain Python loop can recompute any of them for comparison. Each task imports
:func:`zkconsumer.assignors.assign` and runs it (``mapInPandas``): the assignors are not rewritten here.

Leave and crash both remove a member (the assignment cannot tell them apart); the kind is recorded.
RoundRobin's precondition failure becomes a ``precondition_failed`` row, as Kafka's rebalance would fail.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import pandas as pd

from ..assignors import STRATEGIES, AssignmentContext, RoundRobinPreconditionError, assign, sticky_assign

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
        raise ValueError(f"unknown subscription pattern {pattern!r}")
    return dict.fromkeys(chosen, streams)


def make_scenario(cfg: SweepConfig, scenario_id: int, cells: list[tuple] | None = None) -> Scenario:
    """The scenario for an id: its grid cell is ``id mod cells``, the rest comes from a seeded RNG.

    ``random.Random`` seeded with a string is stable across processes and Python hash seeds.
    """
    cells = cells or cfg.cells
    consumers, streams, topics, partitions, pattern = cells[scenario_id % len(cells)]
    rng = random.Random(f"zkconsumer-sweep:{cfg.seed}:{scenario_id}")
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
             prev_thread_owner: dict[str, str] | None) -> dict[str, int | None]:
    """Balance over every subscribed thread (idle ones count as 0) and moves against the previous step.

    Counts come straight from ``owners`` rather than ``Assignment.by_thread()``, whose sorted string lists
    would cost more than the assignment itself at a million scenarios.
    """
    counts = Counter(owners.values())
    per_thread = [counts.get(t, 0) for t in threads]
    out: dict[str, int | None] = {
        "threads": len(threads), "assigned": len(owners),
        "balance": (max(per_thread) - min(per_thread)) if per_thread else 0,
        "max_per_thread": max(per_thread, default=0), "min_per_thread": min(per_thread, default=0),
        "moved": None, "moved_forced": None, "moved_consumer": None}
    if prev is not None and prev_thread_owner is not None:
        get, consumer_of = owners.get, thread_owner.get
        moved = forced = moved_consumer = 0
        for tp, tid in prev.items():
            new = get(tp)
            if new != tid:
                moved += 1
                forced += tid not in threads
            moved_consumer += consumer_of(new) != prev_thread_owner[tid]
        out.update(moved=moved, moved_forced=forced, moved_consumer=moved_consumer)
    return out


def run_scenario(sc: Scenario, strategies: tuple[str, ...], seed: int = 0) -> list[dict]:
    """Rows (one per strategy and step) for a scenario: the initial assignment, then one per change."""
    rows: list[dict] = []
    parts = sc.topic_partitions
    for strategy in strategies:
        members = dict(sc.members)
        prev: dict | None = None
        prev_owner_of: dict[str, str] | None = None
        steps = [("initial", "", None)] + list(sc.changes)
        for step, (kind, cid, sub) in enumerate(steps):
            if kind == "join":
                members[cid] = sub or {}
            elif kind in ("leave", "crash"):
                members.pop(cid, None)
            ctx = AssignmentContext(members, parts)
            subscribed = {t for s in members.values() for t in s}
            row = {"scenario_id": sc.scenario_id, "seed": seed, "consumers": sc.consumers, "streams": sc.streams,
                   "topics": sc.topics, "partitions_per_topic": sc.partitions, "pattern": sc.pattern,
                   "strategy": strategy, "step": step, "change": kind, "member": cid, "members": len(members),
                   "partitions": sum(len(parts[t]) for t in subscribed), "error": None}
            try:
                # sticky is given the previous assignment (the sweep sees the whole group, consistently)
                result = sticky_assign(ctx, prev) if strategy == "sticky" else assign(strategy, ctx)
            except RoundRobinPreconditionError as e:
                row.update(status="precondition_failed",
                           threads=sum(max(s.values(), default=0) for s in members.values()),
                           assigned=0, balance=None, max_per_thread=None, min_per_thread=None, moved=None,
                           moved_forced=None, moved_consumer=None, error=str(e).splitlines()[0][:120])
                prev, prev_owner_of = None, None
                rows.append(row)
                continue
            threads: set[str] = set()
            for ts in {id(v): v for v in ctx.consumers_for_topic.values()}.values():  # lists are shared
                threads.update(ts)
            owner_of = ctx.thread_owner
            row.update(status="ok", **_metrics(result.owners, threads, prev, owner_of, prev_owner_of))
            prev, prev_owner_of = result.owners, owner_of
            rows.append(row)
    return rows


def iter_rows(cfg: SweepConfig, ids: Iterator[int]) -> Iterator[dict]:
    cells = cfg.cells
    for i in ids:
        yield from run_scenario(make_scenario(cfg, int(i), cells), cfg.strategies, cfg.seed)


def run_local(cfg: SweepConfig, n: int, start: int = 0) -> pd.DataFrame:
    """The same sweep in a plain Python loop: the benchmark baseline and the tests' reference."""
    return _frame(list(iter_rows(cfg, iter(range(start, start + n)))))


_INT_COLS = ("balance", "max_per_thread", "min_per_thread", "moved", "moved_forced", "moved_consumer")


_COLUMNS = [c.split()[0] for c in RESULT_SCHEMA.split(", ")]


def _frame(rows: list[dict]) -> pd.DataFrame:
    """Columns built directly (faster than a frame of dicts); metric columns are nullable integers because
    precondition failures and initial steps have no value."""
    data = {c: [r[c] for r in rows] for c in _COLUMNS}
    for c in _INT_COLS:
        data[c] = pd.array(data[c], dtype="Int32")
    return pd.DataFrame(data, columns=_COLUMNS)


def run_spark(spark, cfg: SweepConfig, n: int, partitions: int | None = None):  # -> DataFrame
    """``n`` scenarios as a Spark DataFrame of result rows, computed in Python workers (mapInPandas)."""
    sc = spark.sparkContext
    partitions = partitions or max(2, sc.defaultParallelism * 4)

    def compute(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            yield _frame(list(iter_rows(cfg, iter(batch["id"].tolist()))))

    return spark.range(0, n, numPartitions=partitions).mapInPandas(compute, RESULT_SCHEMA)
