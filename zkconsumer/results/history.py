"""The headline figures across the recorded runs: each a series of (record, value) points in the order the records
were made, so a regression is seen as on a benchmark dashboard (issue 55 item 3). Pure: records in, series out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from zkconsumer.results.record import Record
from zkconsumer.scenario.model import MemberKind


@dataclass(frozen=True)
class Point:
    record: Record
    value: float
    detail: str = ""


@dataclass
class Series:
    label: str
    points: list[Point] = field(default_factory=list)


@dataclass(frozen=True)
class Headline:
    """A figure followed across runs: its title, its unit, how to get it (series by label from one record), and
    what to run when no record has it yet."""

    key: str
    title: str
    unit: str
    extract: Callable[[Record], Iterator[tuple[str, float, str]]]
    how: str

    def series(self, records: list[Record]) -> list[Series]:
        out: dict[str, Series] = {}
        for r in sorted(records, key=lambda r: (r.data.get("date", ""), r.name)):
            for label, value, detail in self.extract(r):
                out.setdefault(label, Series(label)).points.append(Point(r, value, detail))
        return list(out.values())


def nemesis_summaries(r: Record) -> Iterator[tuple[str, dict[str, Any]]]:
    """The nemesis summaries a record holds (``zkconsumer sim``'s results.json, alone or one per world), each with
    the world it ran: a 0.8 profile, a coordinator variant, or ``migrate``."""
    figures = r.figures
    if not isinstance(figures, dict):
        return
    def world_of(s: dict[str, Any]) -> str:
        return "migrate" if s.get("mode") == "migrate" else (s.get("variant") or s.get("profile") or "?")

    candidates = [(world_of(figures), figures)] if "runs" in figures else \
        [(k, v) for k, v in figures.items() if isinstance(v, dict)]  # one summary per world, named by its key
    for world, s in candidates:
        if s.get("source", "nemesis") == "nemesis" and "runs" in s and "schedules_per_minute" in s:
            yield world, s


def _speed(r: Record) -> Iterator[tuple[str, float, str]]:
    for world, s in nemesis_summaries(r):
        yield world, float(s["schedules_per_minute"]), f"{s['runs']:,} seeds"


def _breaks(r: Record) -> Iterator[tuple[str, float, str]]:
    for world, s in nemesis_summaries(r):
        if s["runs"]:
            yield world, 1000.0 * s["breaking_runs"] / s["runs"], s["verdict"]


def _test_time(r: Record) -> Iterator[tuple[str, float, str]]:
    f = r.figures
    if isinstance(f, dict) and "make_test_seconds" in f:
        yield "make test (fresh clone, setup included)", f["make_test_seconds"] / 60.0, f.get("tests", "")


def _rebalance(r: Record) -> Iterator[tuple[str, float, str]]:
    """Join p50 over ZooKeeper's floor, one series per profile, size and topic layout (a group with 2 partitions a
    member moves fewer partitions a join than one on a 200-partition topic: two layouts are two series)."""
    f = r.figures
    if isinstance(f, dict):
        per_member = (r.data.get("settings") or {}).get("partitions_per_consumer")
        layout = f", {per_member} partitions each" if per_member else ""
        for row in f.get("rebalance_vs_floor", []):
            yield f"{row['profile']} at {row['consumers']}{layout}", float(row["ratio"]), f"p50 {row['p50_ms']} ms"


def _oracle(r: Record) -> Iterator[tuple[str, float, str]]:
    """Seeds where the profile and Kafka's own consumer reach the same verdict: an agreement record's count, or
    ``benchmarks/nemesis.py``'s rows for both (a seed breaks when one of its runs broke)."""
    f = r.figures
    if not isinstance(f, dict):
        return
    if "same_verdict" in f and f.get("seeds"):
        yield "kafka-0.8 against Kafka 0.8.2.2", 100.0 * f["same_verdict"] / f["seeds"], \
            f"{f['same_verdict']} of {f['seeds']} seeds"
        return
    rows = {row.get("variant"): row for row in f.get("rows", []) if isinstance(row, dict) and "per_seed" in row}
    ours, kafka = rows.get(f"zookeeper-{MemberKind.KAFKA_08}"), rows.get(MemberKind.KAFKA_0822)
    if ours and kafka:
        a = {s["seed"]: s["breaking_runs"] > 0 for s in ours["per_seed"]}
        b = {s["seed"]: s["breaking_runs"] > 0 for s in kafka["per_seed"]}
        both = sorted(a.keys() & b.keys())
        if both:
            same = sum(a[s] == b[s] for s in both)
            yield "kafka-0.8 against Kafka 0.8.2.2", 100.0 * same / len(both), f"{same} of {len(both)} seeds"


def _oracle_time(r: Record) -> Iterator[tuple[str, float, str]]:
    """``benchmarks/rebalance.py`` with Kafka's own consumer in the run: the profile's join p50 over Kafka's, per
    group size (1.0: Kafka's own timing)."""
    f = r.figures
    runs = f.get("runs") if isinstance(f, dict) else None
    if not isinstance(runs, list):  # a nemesis summary's "runs" is a count
        return
    runs = [x for x in runs if isinstance(x, dict) and "profile" in x and "size" in x]
    kafka = {x["size"]: x for x in runs if x.get("profile") == MemberKind.KAFKA_0822 and x.get("join_p50_ms")}
    for x in runs:
        if x.get("profile") == MemberKind.KAFKA_08 and x["size"] in kafka and x.get("join_p50_ms"):
            k = kafka[x["size"]]["join_p50_ms"]
            yield f"join at {x['size']}", x["join_p50_ms"] / k, f"{x['join_p50_ms']:.0f} against {k:.0f} ms"


HEADLINES = [
    Headline("speed", "Simulated schedules a minute", "schedules a minute", _speed,
             "benchmarks/sim_rates.py --worlds kafka-0.8,default,coordinator --record results/…"),
    Headline("breaks", "Nemesis seeds that break, per 1,000", "breaking seeds per 1,000", _breaks,
             "benchmarks/sim_rates.py --record results/…"),
    Headline("rebalance", "Rebalance p50 as a multiple of ZooKeeper's floor", "× the floor", _rebalance,
             "a rebalance benchmark record with rebalance_vs_floor rows"),
    Headline("oracle", "kafka-0.8 against Kafka 0.8.2.2: nemesis seeds with the same verdict", "% of seeds",
             _oracle, "benchmarks/nemesis.py --variants zookeeper-kafka-0.8,kafka-0.8.2.2 --record results/…"),
    Headline("oracle-time", "kafka-0.8's rebalance time as a multiple of Kafka 0.8.2.2's own", "× Kafka's",
             _oracle_time, "benchmarks/rebalance.py --record results/… (Kafka's own consumer in the run)"),
    Headline("tests", "make test's time", "minutes", _test_time, "benchmarks/ci_time.py --record results/…"),
]
