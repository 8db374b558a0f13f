"""A map of the settings (issue 41 item 4): ``rebalance.max.retries`` × ``rebalance.backoff.ms`` ×
``zookeeper.session.timeout.ms``, many nemesis seeds at each point, on the simulator.

Kafka's FAQ gave 0.8 users one rule: retries × backoff must exceed the session timeout, so that a rebalance
outlasts the owner nodes of a member whose session is dying. This grid is how the simulator tests it: at each point
every seed draws a churn-with-faults schedule (the nemesis's default kinds: joins, stops, kill -9, restarts,
bounces, GC pauses) scaled to the point's session timeout, and the run is judged as ``zkconsumer sim`` judges one.
The same seed draws the same schedule at every point of one session timeout, so two points differ only by their
settings.

Each (profile, point, slice of seeds) is one Spark task (``--master`` as elsewhere, a local one by default); a
seed's row (:func:`run_row`) is plain values, written as Parquet that ``zkconsumer analyze`` reads back
(analysis/settings_grid.py: the rates per point and the heatmaps).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from zkconsumer.errors import IllegalArgument
from zkconsumer.scenario import nemesis
from zkconsumer.sim.checkers import JUDGED, Invariant
from zkconsumer.sim.runs import SimJob, SourceKind, run_seed

#: The axes' default values: Kafka 0.8's defaults (4 retries, a 2,000 ms backoff, a 6,000 ms session) and both
#: sides of each, from the issue's ranges.
RETRIES = (1, 4, 10)
BACKOFF_MS = (250, 2000, 5000)
SESSION_TIMEOUT_MS = (2000, 6000, 30000)
PROFILES = ("kafka-0.8", "default")
#: seeds per Spark task
SEEDS_PER_TASK = 10
#: the judged invariants a row counts, in the checker's order
ROW_INVARIANTS = tuple(i for i in Invariant if i in JUDGED)


@dataclass(frozen=True, order=True)
class GridPoint:
    """One point of the map: the three settings."""

    session_timeout_ms: int
    retries: int
    backoff_ms: int

    def __post_init__(self) -> None:
        if self.retries < 1 or self.backoff_ms < 0 or self.session_timeout_ms < 1000:
            raise IllegalArgument(f"no grid point at rebalance.max.retries={self.retries}, rebalance.backoff.ms="
                                  f"{self.backoff_ms}, zookeeper.session.timeout.ms={self.session_timeout_ms}: "
                                  "retries from 1, a backoff from 0, sessions from 1,000 ms")

    @property
    def faq_rule(self) -> bool:
        """Kafka's FAQ rule holds here: the rebalance's retries outlast a session (retries × backoff > session)."""
        return self.retries * self.backoff_ms > self.session_timeout_ms

    @property
    def properties(self) -> tuple[tuple[str, str], ...]:
        return (("rebalance.max.retries", str(self.retries)), ("rebalance.backoff.ms", str(self.backoff_ms)))


def points(retries: Iterable[int] = RETRIES, backoff_ms: Iterable[int] = BACKOFF_MS,
           session_timeout_ms: Iterable[int] = SESSION_TIMEOUT_MS) -> list[GridPoint]:
    """Every combination, in order (session, retries, backoff)."""
    return sorted({GridPoint(s, r, b) for s in session_timeout_ms for r in retries for b in backoff_ms})


def nemesis_settings(session_timeout_ms: int) -> nemesis.NemesisSettings:
    """The schedule's shape at a session timeout: the nemesis's defaults (3 members, up to 4 actions, pauses from
    a quarter of the session to 2.5 sessions), the run lengthened so that the longest pause fits, and its quiet end
    so that the last heal's deadline (a session and a second after it, where the judges look at the owners) comes
    before the members stop: 30 s at 2 s sessions (the nemesis's own shape), 37 s at 6 s, 121 s at 30 s."""
    base = nemesis.NemesisSettings(session_timeout_ms=session_timeout_ms)
    window = max(14.0, base.pause_range[1] * session_timeout_ms / 1000 + 4.0)
    settle = max(base.settle, session_timeout_ms / 1000 + 4.0)
    return dataclasses.replace(base, duration=base.first_at + window + settle, settle=settle)


def job(profile: str, point: GridPoint) -> SimJob:
    return SimJob(profile, SourceKind.NEMESIS, nemesis=nemesis_settings(point.session_timeout_ms),
                  properties=point.properties)


def run_row(profile: str, point: GridPoint, seed: int) -> dict[str, Any]:
    """One seed at one point, judged: a flat row (the Parquet schema is :data:`COLUMNS`)."""
    r = run_seed(job(profile, point), seed)
    row: dict[str, Any] = {
        "profile": profile, "session_timeout_ms": point.session_timeout_ms, "retries": point.retries,
        "backoff_ms": point.backoff_ms, "faq_rule": point.faq_rule, "seed": seed, "ok": r.ok,
        "broken": ",".join(r.broken), "rebalances": r.rebalances, "rebalances_given_up": r.rebalances_given_up,
        "settle_ms": r.settle_ms, "virtual_ms": r.virtual_ms, "wall_s": r.wall_s,
        "zookeeper_requests": r.zookeeper_requests, "trace_sha256": r.trace_sha256}
    for inv in ROW_INVARIANTS:
        row[inv.value] = int(r.counts.get(inv.value, 0))
    return row


#: The row's columns and their Spark SQL types, in order.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("profile", "string"), ("session_timeout_ms", "int"), ("retries", "int"), ("backoff_ms", "int"),
    ("faq_rule", "boolean"), ("seed", "int"), ("ok", "boolean"), ("broken", "string"), ("rebalances", "int"),
    ("rebalances_given_up", "int"), ("settle_ms", "bigint"), ("virtual_ms", "bigint"), ("wall_s", "double"),
    ("zookeeper_requests", "bigint"), ("trace_sha256", "string"),
    *((inv.value, "bigint") for inv in ROW_INVARIANTS))


@dataclass(frozen=True)
class GridTask:
    """One Spark task: a profile, a point, a slice of seeds."""

    profile: str
    point: GridPoint
    seeds: tuple[int, ...]


def grid_tasks(profiles: Sequence[str], grid: Sequence[GridPoint], seeds: Sequence[int],
               per_task: int = SEEDS_PER_TASK) -> list[GridTask]:
    """The tasks, the longest first (a 30 s session simulates three times as long as a 2 s one): the last tasks
    of a stage are then short ones, and the cores stay busy to its end."""
    out = [GridTask(p, pt, tuple(seeds[i:i + per_task])) for p in profiles for pt in grid
           for i in range(0, len(seeds), per_task)]
    return sorted(out, key=lambda t: -t.point.session_timeout_ms)


def run_task(task: GridTask) -> list[dict[str, Any]]:
    logging.disable(logging.ERROR)  # a simulated member logs what a real one logs; the rows say what matters
    return [run_row(task.profile, task.point, seed) for seed in task.seeds]


def run_spark(spark: Any, tasks_: Sequence[GridTask]) -> Any:
    """Every task a Spark task; the rows as a DataFrame of :data:`COLUMNS` (lazy: writing it runs the grid)."""
    rdd = spark.sparkContext.parallelize(list(tasks_), len(tasks_)).flatMap(run_task)
    schema = ", ".join(f"{name} {kind}" for name, kind in COLUMNS)
    return spark.createDataFrame(rdd.map(lambda row: tuple(row[name] for name, _ in COLUMNS)), schema)
