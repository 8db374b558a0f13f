"""The herd by size, one row per design and size (issue 41 items 1, 3 and 5): 0.8's ZooKeeper rebalance in both
profiles (sim/herd.py) and the broker-side coordinator, eager and cooperative (sim/coordinator_herd.py), on the
same group: N members, one topic of 2N partitions, a cold start, then rounds of a join and the first member gone.

:func:`row` runs one design at one size and flattens what it measured per membership change into plain values;
:func:`run_spark` makes each (design, size) a Spark task and returns the rows as a DataFrame of :data:`COLUMNS`,
which ``zkconsumer sim --herd --out DIR`` writes as Parquet (analysis/herd_report.py reads it back: the table and
the log-log figure). ``benchmarks/herd_scale.py`` takes its rows from here too.
"""

from __future__ import annotations

import logging
import statistics
from dataclasses import dataclass
from typing import Any

from zkconsumer.errors import IllegalArgument
from zkconsumer.sim import coordinator_herd, herd
from zkconsumer.sim.zk_service import ServiceModel

ZOOKEEPER = ("default", "kafka-0.8")
COORDINATOR = ("eager", "cooperative")
DESIGNS = (*ZOOKEEPER, *COORDINATOR)
#: from this size on a design runs one round (a join and a crash): each costs minutes of wall there
ONE_ROUND_FROM = 1000

#: The row's columns and their Spark SQL types, in order.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("design", "string"), ("size", "int"), ("rounds", "int"), ("collapsed", "string"),
    ("starts_given_up", "int"), ("requests_per_action", "double"), ("by_kind", "map<string,double>"),
    ("notifications_per_action", "double"), ("kb_from_server_per_action", "double"),
    ("attempts_per_action", "double"), ("conflicts_per_action", "double"), ("given_up", "int"),
    ("join_ms", "double"), ("leave_ms", "double"), ("cold_ms", "bigint"), ("wall_s", "double"),
    ("wall_cold_s", "double"), ("wall_join_s", "double"), ("wall_leave_s", "double"))


def rounds_for(size: int, rounds: int) -> int:
    return rounds if size < ONE_ROUND_FROM else 1


def row(design: str, size: int, rounds: int = 3, service: ServiceModel = ServiceModel.LAB,
        detail: bool = False, joins: bool = True) -> dict[str, Any]:
    """Simulate ``design`` at ``size`` members (``rounds`` joins and crashes; one from :data:`ONE_ROUND_FROM`) and
    return the row: per action (a join or a crash) the server's requests, by kind, notifications (0.8 only),
    KB from the server, rebalance attempts (0.8) or generations (coordinator), claim conflicts, and the medians of
    the simulated convergence and of the wall each phase took. A 0.8 group that never settled has ``collapsed``
    set and no per-action figures. ``detail``: the simulator's own result under ``"detail"`` as well.
    ``joins=False`` (0.8 designs): the crashes alone, each of the first member in id order (Range then moves two
    members' partitions; after a join, whose member sorts last, the same crash moves every member's)."""
    if design not in DESIGNS:
        raise IllegalArgument(f"unknown design {design!r}; one of: {', '.join(DESIGNS)}")
    if size < 2:
        raise IllegalArgument(f"a herd has 2 members or more, not {size}")
    if not joins and design not in ZOOKEEPER:
        raise IllegalArgument("crashes alone (joins=False) are measured for the 0.8 designs only")
    logging.disable(logging.ERROR)  # a simulated member logs what a real one logs; the row says what matters
    n = rounds_for(size, rounds)
    out: dict[str, Any] = {name: None for name, _ in COLUMNS}
    out.update(design=design, size=size, rounds=n, collapsed="", starts_given_up=0, given_up=0)
    if design in ZOOKEEPER:
        r = herd.measure(design, size, n, service=service.times, joins=joins)
        walls = r.phase_wall_s
        out.update(starts_given_up=len(r.starts_given_up), cold_ms=r.cold_ms, wall_s=r.wall_s,
                   wall_cold_s=sum(walls["cold"]))
        if r.collapsed:  # the group never settled: that is the answer at this size
            out["collapsed"] = r.collapsed
        else:
            out.update(notifications_per_action=r.notifications / r.actions,
                       attempts_per_action=r.stats["attempts"] / r.actions,
                       conflicts_per_action=r.stats["claim_conflicts"] / r.actions,
                       given_up=r.stats["failed_rebalances"])
    else:
        r = coordinator_herd.measure(design, size, n, cost=coordinator_herd.LAB_COORDINATOR)
        walls = r.phase_wall_s
        out.update(cold_ms=r.cold_ms, wall_s=r.wall_s, wall_cold_s=sum(walls["cold"]),
                   attempts_per_action=sum(r.generations) / r.actions, conflicts_per_action=0.0)
    if not out["collapsed"]:
        out.update(requests_per_action=r.per_action(),
                   by_kind={k: v / r.actions for k, v in sorted(r.requests.items())},
                   kb_from_server_per_action=r.bytes_from_server / r.actions / 1024,
                   join_ms=_median(r.converge_ms["join"]), leave_ms=_median(r.converge_ms["crash"]),
                   wall_join_s=_median(walls["join"]), wall_leave_s=_median(walls["crash"]))
    if detail:
        out["detail"] = r.as_dict()
    return out


def _median(values: list[float] | list[int]) -> float | None:
    return float(statistics.median(values)) if values else None


@dataclass(frozen=True)
class HerdTask:
    design: str
    size: int
    rounds: int = 3
    service: ServiceModel = ServiceModel.LAB


def tasks(designs: list[str], sizes: list[int], rounds: int = 3, service: ServiceModel = ServiceModel.LAB
          ) -> list[HerdTask]:
    """One task per design and size, the largest first: they take the longest, and the small ones fill in."""
    for d in designs:
        if d not in DESIGNS:
            raise IllegalArgument(f"unknown design {d!r}; one of: {', '.join(DESIGNS)}")
    return sorted((HerdTask(d, s, rounds, service) for d in designs for s in sizes), key=lambda t: -t.size)


def run_task(task: HerdTask) -> dict[str, Any]:
    return row(task.design, task.size, task.rounds, task.service)


def run_spark(spark: Any, work: list[HerdTask]) -> Any:
    """Each task a Spark task; the rows as a DataFrame of :data:`COLUMNS` (lazy: writing it runs them)."""
    rdd = spark.sparkContext.parallelize(work, max(1, len(work))).map(run_task)
    schema = ", ".join(f"{name} {kind}" for name, kind in COLUMNS)
    return spark.createDataFrame(rdd.map(lambda r: tuple(r[name] for name, _ in COLUMNS)), schema)
