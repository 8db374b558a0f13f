"""The simulator's checkers (zkconsumer/sim/checkers.py) judge the lab's five invariants as the Spark analysis does:
on the same trace directory, the same counts of lost records, overlaps, duplicates (of committed records, and all
of them), commits moving back and partitions unowned after a heal, heal by heal.

The traces: hand-built ones (a clean faulted run, one breaking all five, a kill after a heal, a consumer's two
lives, ...), whose Spark figures are asserted here too (one analysis for all: each used to cost a Spark run of its
own), a synthetic group's (the benchmarks' generator) with faults added, and random traces built to be messy
(owners that overlap, commits that go back in one millisecond, skipped and repeated offsets, resets, session
expiries, kills and restarts, faults healed and not)."""

from __future__ import annotations

import io
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from rich.console import Console

from zkconsumer.analysis.invariants import judged_deadlines as spark_deadlines
from zkconsumer.analysis.pipeline import run_analysis
from zkconsumer.analysis.synthetic import generate
from zkconsumer.sim.checkers import LAB_EVENTS, LAB_INVARIANTS, Invariant, SimVerdict, judge, judged_deadlines


def records_of(trace_dir: Path, group: str | None = None) -> list[dict[str, Any]]:
    """Every line of a trace directory (of one group), merged as a simulation would have emitted them: by time,
    then consumer and seq (each file is in seq order)."""
    lines = [json.loads(line) for f in sorted(trace_dir.glob("*.jsonl")) for line in f.read_text().splitlines()]
    return sorted((r for r in lines if group is None or r["group"] == group),
                  key=lambda r: (r["ts"], r["consumer"], r["seq"]))


def clean(tb) -> None:
    """A clean faulted run: a kill -9, the survivor takes over; one redelivery of uncommitted work."""
    a, b = "clean_a", "clean_b"
    tb.rebalance(a, 100, 1, ["t-0", "t-1"], cause="startup")
    for o in range(3):
        tb.deliver(a, 110 + o, "t", 0, o)
    tb.commit(a, 120, "t", 0, 2)
    tb.emit("clean_lab", 150, "fault_injected", fault="kill", target=a)
    tb.emit(b, 160, "session_expired")
    tb.rebalance(b, 200, 1, ["t-0", "t-1"], cause="session_expired")
    tb.deliver(b, 210, "t", 0, 2)
    tb.deliver(b, 211, "t", 0, 3)
    tb.commit(b, 220, "t", 0, 4)
    tb.emit("clean_lab", 230, "fault_healed", fault="kill", session_timeout_ms=1000)
    tb.deliver(b, 3000, "t", 1, 0)
    tb.commit(b, 3001, "t", 1, 1)
    tb.emit(b, 3002, "shutdown", committed=True)


def broken(tb) -> None:
    """A run breaking all five: a cut-off owner still delivering, a redelivery of committed work, a gap, a commit
    going back, a partition nobody owns at the heal's deadline."""
    a, b = "broken_a", "broken_b"
    tb.rebalance(a, 100, 1, ["t-0"], cause="startup")
    for o in range(5):
        tb.deliver(a, 110 + o, "t", 0, o)
    tb.commit(a, 120, "t", 0, 5)
    tb.emit("broken_lab", 150, "fault_injected", fault="cut", target=a)
    tb.emit(a, 160, "connection_suspended")
    tb.rebalance(b, 200, 1, ["t-0"], cause="ids_changed")
    tb.deliver(b, 210, "t", 0, 3)
    tb.deliver(a, 211, "t", 0, 5)
    tb.deliver(b, 212, "t", 0, 7)
    tb.commit(b, 220, "t", 0, 4)
    tb.emit("broken_lab", 230, "fault_healed", fault="cut", session_timeout_ms=1000)
    tb.emit(a, 240, "session_expired")
    tb.emit(b, 250, "shutdown", committed=True)


def killed(tb) -> None:
    """A kill -9 after a heal, judged on the settled group: at the pause's own deadline the killed member still owns
    t-0 (its session has not expired yet); judged from the kill, the survivor owns it."""
    a, b = "killed_a", "killed_b"
    tb.rebalance(a, 100, 1, ["t-0"], cause="startup")
    tb.deliver(a, 110, "t", 0, 0)
    tb.emit("killed_lab", 200, "fault_injected", fault="pause", target=a)
    tb.emit("killed_lab", 300, "fault_healed", fault="pause", target=a, session_timeout_ms=1000)
    tb.emit("killed_lab", 2000, "lab_step", step="kill", target=a)
    tb.deliver(a, 2100, "t", 0, 1)
    tb.rebalance(b, 3500, 1, ["t-0"], cause="ids_changed")
    tb.deliver(b, 3600, "t", 0, 2)
    tb.emit(b, 5000, "shutdown", committed=False)


def lives(tb) -> None:
    """A consumer killed and started again under its id (test_a_restarted_consumer_starts_a_new_life), with a fault
    healed while A's first life is dead and before B takes t-0 over."""
    a, b = "lives_A", "lives_B"
    tb.emit(a, 1000, "registered", subscription={"t": 1}, pattern="static")
    tb.rebalance(a, 1000, 1, ["t-0", "t-1"], cause="startup", done_ts=1010)
    tb.emit(b, 2000, "registered", subscription={"t": 1}, pattern="static")
    tb.rebalance(b, 2000, 1, ["t-1"], cause="startup", done_ts=2020)
    tb.rebalance(a, 2001, 2, ["t-0"], released=["t-0", "t-1"], done_ts=2015)
    tb.deliver(a, 2300, "t", 0, 0)
    tb.commit(a, 2400, "t", 0, 1)
    tb.deliver(a, 2450, "t", 0, 1)  # then: kill -9
    tb.emit("lives_lab", 2500, "fault_injected", fault="kill", target=a)
    tb.emit("lives_lab", 2600, "fault_healed", fault="kill", target=a, session_timeout_ms=100)
    tb.rebalance(b, 4000, 2, ["t-0", "t-1"], released=["t-1"], done_ts=4010)
    tb.emit(a, 4990, "registered", subscription={"t": 1}, pattern="static")
    tb.rebalance(a, 5000, 1, ["t-0"], cause="startup", done_ts=5015)
    tb.rebalance(b, 5001, 3, ["t-1"], released=["t-0", "t-1"], done_ts=5012)
    tb.emit(a, 6000, "shutdown", committed=True)


def idle_killed(tb) -> None:
    """An owner with nothing to do writes no line: killed 20 ms after a heal's deadline, it owned t-0 at the
    deadline, long after its last line (issue 39's reproducer 108)."""
    a, b = "idle_a", "idle_b"
    tb.emit(a, 100, "registered", subscription={"t": 1}, pattern="static")
    tb.rebalance(a, 100, 1, ["t-0"], cause="startup")
    tb.emit(b, 150, "registered", subscription={"t": 1}, pattern="static")
    tb.rebalance(b, 150, 1, ["t-1"], cause="startup")
    tb.deliver(a, 200, "t", 0, 0)
    tb.deliver(b, 210, "t", 1, 0)
    tb.emit("idle_lab", 500, "fault_injected", fault="kill-zk", target="zk3")
    tb.emit("idle_lab", 1000, "fault_healed", fault="kill-zk", session_timeout_ms=1000)
    tb.deliver(b, 2500, "t", 1, 1)
    tb.emit("idle_lab", 3020, "lab_step", step="kill", target=a)
    tb.rebalance(b, 8000, 2, ["t-0", "t-1"], released=["t-1"])
    tb.emit(b, 9000, "shutdown", committed=False)


def reclaimed(tb) -> None:
    """A member releases t-0 in a rebalance it gives up, another owns it for a while, and the first claims it back
    and delivers before its ``rebalance_done``: the release ends its stint, so the two never owned it at once
    (issue 39, nemesis seed 24)."""
    a, b = "reclaimed_a", "reclaimed_b"
    tb.rebalance(a, 100, 1, ["t-0"], cause="startup")
    for o in range(3):
        tb.deliver(a, 110 + o, "t", 0, o)
    tb.emit(a, 200, "rebalance_triggered", cause="ids_changed")
    tb.emit(a, 201, "attempt_started", rebalance=2, attempt=1, ids_cversion=2)
    tb.emit(a, 202, "released", rebalance=2, partitions=["t-0"])
    tb.emit(a, 260, "rebalance_failed", rebalance=2, attempts=1)
    tb.rebalance(b, 300, 1, ["t-0"], cause="startup")
    for o in range(3, 6):
        tb.deliver(b, 310 + o, "t", 0, o)
    tb.rebalance(b, 400, 2, [], released=["t-0"])
    tb.emit(a, 500, "rebalance_triggered", cause="ids_changed")
    tb.emit(a, 501, "attempt_started", rebalance=3, attempt=1, ids_cversion=3)
    tb.emit(a, 502, "claimed", rebalance=3, attempt=1, partitions={"t-0": "reclaimed_a-0"})
    tb.deliver(a, 510, "t", 0, 6)
    tb.deliver(a, 511, "t", 0, 7)
    tb.emit(a, 520, "rebalance_done", rebalance=3, attempts=1, duration_ms=20, owned=["t-0"])
    tb.deliver(a, 530, "t", 0, 8)
    tb.emit(a, 600, "shutdown", committed=False)


def synthetic(trace: Path) -> None:
    """The benchmarks' generator (rebalances, at-least-once duplicates), with faults struck and healed around
    it, one while the group rebalances."""
    generate(trace, 4000, consumers=4, topics=2, partitions=4, changes=4, seed=3, group="synth")
    records = records_of(trace, "synth")
    first, last = records[0]["ts"], records[-1]["ts"]
    dones = [r["ts"] for r in records if r["event"] == "rebalance_done"]
    lab = [(first + 5, "fault_injected", {"fault": "pause", "target": "synth_c1"}),
           (first + 30, "fault_healed", {"fault": "pause", "target": "synth_c1", "session_timeout_ms": 10}),
           (dones[len(dones) // 2] - 10, "fault_injected", {"fault": "cut", "target": "synth_c2"}),
           (dones[len(dones) // 2] - 5, "fault_healed", {"fault": "cut", "target": "synth_c2",
                                                         "session_timeout_ms": 1}),
           (last - 3, "lab_step", {"step": "stop", "target": "synth_c0"})]
    with open(trace / "synth_lab.jsonl", "w") as f:
        for seq, (ts, event, fields) in enumerate(lab, 1):
            f.write(json.dumps({"v": 1, "ts": ts, "event": event, "group": "synth", "consumer": "synth_lab",
                                "seq": seq, **fields}) + "\n")


HAND_BUILT = {"clean": clean, "broken": broken, "killed": killed, "lives": lives, "idle_killed": idle_killed,
              "reclaimed": reclaimed}
SEEDS = (1, 2, 3)
GROUPS = (*HAND_BUILT, "synth", *(f"r{seed}" for seed in SEEDS))


@dataclass
class Judged:
    """One Spark analysis of every trace (a group each: one JVM run for all), and what each group emitted."""

    trace_dir: Path
    invariants: Any  # InvariantCounts
    tables: dict[str, pd.DataFrame]
    emitted: dict[str, list[dict[str, Any]]]  # the messy runs' records in emission order


@pytest.fixture(scope="module")
def judged(spark, tmp_path_factory, trace_builder_class) -> Judged:
    root = tmp_path_factory.mktemp("agree")
    trace = root / "traces"
    for group, build in HAND_BUILT.items():
        build(trace_builder_class(trace, group=group))
    synthetic(trace)
    emitted = {f"r{seed}": MessyRun(trace, seed).run(600) for seed in SEEDS}
    res = run_analysis(spark, str(trace), root / "out", Console(file=io.StringIO()), from_zero=True,
                       plots_and_report=False)
    tables = {name: pd.read_parquet(root / "out" / "tables" / f"{name}.parquet")
              for name in ("partitions", "duplicates_committed", "commits_backwards", "faults")}
    return Judged(trace, res.invariants, tables, emitted)


def spark_counts(j: Judged, group: str) -> dict[str, Any]:
    """The Spark analysis' figures for one group, from its tables."""
    t = {name: df[df["group"] == group] for name, df in j.tables.items()}
    parts = t["partitions"]
    heals = t["faults"][t["faults"]["healed"].notna()]
    return {"lost": int(parts["lost_below_committed"].sum() + parts["lost_gap"].sum()),
            "overlaps": int(parts["overlaps"].sum()), "duplicates": int(parts["duplicate_deliveries"].sum()),
            "duplicates_committed": len(t["duplicates_committed"]), "commits_backwards": len(t["commits_backwards"]),
            "unowned_after_heal": int(heals["unowned_at_deadline"].sum()),
            "heals": sorted((r.fault, int(r.healed), int(r.deadline), int(r.unowned_at_deadline))
                            for r in heals.itertuples())}


def sim_counts(v: SimVerdict) -> dict[str, Any]:
    return {**{i.value: v.counts[i] for i in (*LAB_INVARIANTS, Invariant.DUPLICATES)},
            "heals": sorted((h.fault, h.healed, h.deadline, len(h.unowned)) for h in v.heals)}


def lab_lines(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"group": r["group"], "ts": r["ts"], "event": r["event"], "fault": r.get("fault"),
             "target": r.get("target"), "session_timeout_ms": r.get("session_timeout_ms")}
            for r in records if r["event"] in LAB_EVENTS]


def verdict(records: list[dict[str, Any]]) -> SimVerdict:
    return judge(records, {}, records[-1]["ts"])


@pytest.mark.parametrize("group", GROUPS)
def test_the_checker_counts_what_spark_counts(judged: Judged, group: str) -> None:
    records = judged.emitted.get(group) or records_of(judged.trace_dir, group)
    v = verdict(records)
    assert sim_counts(v) == spark_counts(judged, group)
    assert judged_deadlines(lab_lines(records)) == spark_deadlines(lab_lines(records))  # the copy has not drifted


def test_over_the_whole_directory_too(judged: Judged) -> None:
    v = verdict(records_of(judged.trace_dir))
    inv = judged.invariants
    assert {i.value: v.counts[i] for i in LAB_INVARIANTS} == {i.value: getattr(inv, i.value) for i in LAB_INVARIANTS}
    assert v.counts[Invariant.DUPLICATES] == inv.duplicates and v.lab_ok == inv.ok


def test_what_each_trace_shows(judged: Judged) -> None:
    """The traces test what they were built for: else agreeing on zeros would prove little."""
    v = {g: verdict(judged.emitted.get(g) or records_of(judged.trace_dir, g)) for g in GROUPS}
    # the Spark analysis' own figures for the three hand-built runs (test_analysis_invariants.py's, once judged there
    # a run each): the clean kill judged at heal + session + 1 s, each of the five breaches once, the settled group
    spark = {g: spark_counts(judged, g) for g in ("clean", "broken", "killed")}
    assert spark["clean"]["heals"] == [("kill", 230, 230 + 1000 + 1000, 0)]
    assert (spark["clean"]["duplicates"], spark["clean"]["duplicates_committed"]) == (1, 0)
    assert {i.value: spark["broken"][i.value] for i in LAB_INVARIANTS} == {i.value: 1 for i in LAB_INVARIANTS}
    assert spark["killed"]["heals"] == [("pause", 300, 2000 + 2000, 0)]
    assert v["clean"].ok and v["clean"].counts[Invariant.DUPLICATES] == 1 and len(v["clean"].heals) == 1
    assert {i for i in LAB_INVARIANTS if v["broken"].counts[i]} == LAB_INVARIANTS
    assert v["killed"].lab_ok and v["killed"].heals[0].deadline == 4000
    assert v["lives"].counts[Invariant.UNOWNED_AFTER_HEAL] == 1  # t-0 at 3700: A's first life ended at 2400
    assert v["idle_killed"].lab_ok and v["idle_killed"].heals[0].deadline == 3000  # a owned t-0 until 3020
    assert v["reclaimed"].lab_ok and v["reclaimed"].counts[Invariant.OVERLAPS] == 0
    assert v["synth"].counts[Invariant.DUPLICATES] > 0 and len(v["synth"].heals) == 2
    for seed in SEEDS:
        messy = v[f"r{seed}"]
        assert not messy.lab_ok and messy.out_of_order == 0
        assert sum(messy.counts[i] > 0 for i in LAB_INVARIANTS) >= 3, messy.counts  # messy enough


def test_a_restarted_consumer_starts_a_new_life(judged: Judged) -> None:
    """A consumer started again under its id (a deploy's restart, a ``kill -9`` and a start) appends to its trace and
    counts its rebalances from 1 again: the analysis keeps its lives apart (docs/trace.md, "How the analysis reads
    it"). The ``lives`` story: A alone at 1000, B joins at 2000 and takes t-1, A commits at 2400 and is killed, B owns
    both at 4000, A starts again at 5000 (its rebalance 1 again) and takes t-0 back."""
    tables = judged.trace_dir.parent / "out" / "tables"

    def rows(name: str) -> pd.DataFrame:
        df = pd.read_parquet(tables / f"{name}.parquet")
        return df[df["group"] == "lives"]

    crb = rows("consumer_rebalances")
    a = crb[crb.consumer == "lives_A"].sort_values("start")
    assert list(a.rebalance) == [1, 2, 3]  # the second life's rebalance 1 is numbered on
    assert list(a.status) == ["done"] * 3 and list(a.end) == [1010, 2015, 5015]
    assert len(rows("group_rebalances")) == 4  # 1000, 2000, 4000, 5000: not one rebalance spanning both lives
    own = rows("ownership")
    first_life = own[(own.consumer == "lives_A") & (own.partition == 0) & (own.owned_from == 2015)].iloc[0]
    # killed: its ownership ends with its last line, not when the next life owns t-0 again
    assert first_life.owned_to == 2400 and first_life.end_reason.startswith("its process ended"), first_life
    unowned = rows("unowned")
    taken_by_b = unowned[(unowned.partition == 0) & (unowned.new_owner == "lives_B")].iloc[0]
    assert taken_by_b.unowned_ms == 4010 - 2400


@pytest.mark.parametrize("seed", SEEDS)
def test_emission_order_and_the_merged_files_judge_alike(judged: Judged, seed: int) -> None:
    """Everything but zombie deliveries is judged in Spark's orders (per consumer by seq; commits of one
    millisecond by consumer), not in the order lines came. A zombie delivery is a delivery emitted after
    another member's commit: within one millisecond, merging the files by consumer may reorder the two."""
    group = f"r{seed}"
    emitted, merged = verdict(judged.emitted[group]).counts, verdict(records_of(judged.trace_dir, group)).counts
    for counts in (emitted, merged):
        del counts[Invariant.ZOMBIE_DELIVERIES]
    assert emitted == merged


class MessyRun:
    """A random trace in the schema, built to break things: consumers own partitions they were not given, skip
    and repeat offsets, commit backwards (several in one millisecond), reset, expire, are killed and restarted;
    the lab strikes and heals faults, some never healed. Lines are written in emission order."""

    PARTITIONS = ("t-0", "t-1", "u-x-0")  # a topic with dashes in its name

    def __init__(self, directory: Path, seed: int) -> None:
        self.rng = random.Random(seed)
        self.dir = directory
        self.group = f"r{seed}"
        self.lab = f"{self.group}_lab"
        self.ts = 1000
        self.seq: dict[str, int] = {}
        self.records: list[dict[str, Any]] = []
        self.consumers = [f"{self.group}_c{i}" for i in range(4)]
        self.alive: dict[str, bool] = {}
        self.rebalance: dict[str, int] = {}
        self.owned: dict[str, list[str]] = {}
        self.position: dict[tuple[str, str], int] = {}
        self.committed: dict[str, int] = {}
        self.open_faults: list[tuple[str, str]] = []

    def emit(self, consumer: str, event: str, **fields: Any) -> None:
        self.seq[consumer] = self.seq.get(consumer, 0) + 1
        record = {"v": 1, "ts": self.ts, "event": event, "group": self.group, "consumer": consumer,
                  "seq": self.seq[consumer], **fields}
        self.records.append(record)
        with open(self.dir / f"{consumer}.jsonl", "a") as f:
            f.write(json.dumps(record) + "\n")

    def start(self, c: str) -> None:
        self.alive[c], self.rebalance[c], self.owned[c] = True, 0, []
        self.emit(c, "registered", subscription={"t": 1, "u-x": 1}, pattern="static")
        self.rebalance_of(c, "startup")

    def rebalance_of(self, c: str, cause: str) -> None:
        self.rebalance[c] += 1
        n = self.rebalance[c]
        self.emit(c, "rebalance_triggered", cause=cause)
        self.emit(c, "attempt_started", rebalance=n, attempt=1, ids_cversion=n)
        if self.owned[c] and self.rng.random() < 0.8:
            self.emit(c, "released", rebalance=n, partitions=self.owned[c])
        share = sorted(self.rng.sample(self.PARTITIONS, self.rng.randrange(0, 3)))
        self.emit(c, "assigned", rebalance=n, attempt=1, assignment={p: f"{c}-0" for p in share}, strategy="range")
        self.emit(c, "claimed", rebalance=n, attempt=1, partitions={p: f"{c}-0" for p in share})
        self.ts += self.rng.choice((0, 1, 3))
        self.emit(c, "rebalance_done", rebalance=n, attempts=1, duration_ms=3, owned=share)
        self.owned[c] = share
        for p in share:
            self.position[(c, p)] = self.committed.get(p, 0)

    def step(self) -> None:
        rng, c = self.rng, self.rng.choice(self.consumers)
        self.ts += rng.choice((0, 0, 1, 1, 2, 7, 40))
        if not self.alive.get(c):
            if rng.random() < 0.05:
                self.start(c)
            return
        roll = rng.random()
        if roll < 0.6:
            p = rng.choice(self.owned[c]) if self.owned[c] and rng.random() < 0.93 else rng.choice(self.PARTITIONS)
            o = self.position.get((c, p), self.committed.get(p, 0))
            o = max(0, o + rng.choice((0,) * 16 + (1, 2, -1, -2)))
            topic, partition = p.rsplit("-", 1)
            self.emit(c, "record_delivered", topic=topic, partition=int(partition), offset=o, thread=f"{c}-0")
            self.position[(c, p)] = o + 1
        elif roll < 0.75 and self.owned[c]:
            p = rng.choice(self.owned[c])
            o = max(0, self.position.get((c, p), 0) - rng.choice((0, 0, 0, 1, 3)))
            topic, partition = p.rsplit("-", 1)
            store = {"store": "kafka"} if rng.random() < 0.3 else {}
            self.emit(c, "offset_committed", topic=topic, partition=int(partition), offset=o, **store)
            self.committed[p] = o
        elif roll < 0.83:
            self.rebalance_of(c, "ids_changed")
        elif roll < 0.85:
            self.emit(c, "session_expired")
        elif roll < 0.86 and self.owned[c]:
            p = rng.choice(self.owned[c])
            topic, partition = p.rsplit("-", 1)
            old = self.position.get((c, p), 0)
            new = rng.choice((0, old + 5))
            self.emit(c, "offset_reset", topic=topic, partition=int(partition), from_offset=old, to_offset=new,
                      reset="smallest")
            self.position[(c, p)] = new
        elif roll < 0.88:
            self.alive[c] = False  # kill -9: not a line more from this life
            self.emit(self.lab, "lab_step", step="kill", target=c)
        elif roll < 0.93:
            if self.open_faults and rng.random() < 0.7:
                fault, target = self.open_faults.pop(rng.randrange(len(self.open_faults)))
                self.emit(self.lab, "fault_healed", fault=fault, target=target,
                          session_timeout_ms=rng.choice((20, 100, 400)))
            else:
                fault = rng.choice(("pause", "cut-zk"))
                self.open_faults.append((fault, c))
                self.emit(self.lab, "fault_injected", fault=fault, target=c)
        elif roll < 0.94:
            self.emit(c, "connection_suspended")
        elif roll < 0.96 and self.owned[c]:  # a rebalance given up after releasing some: they may still deliver
            gone = sorted(self.rng.sample(self.owned[c], self.rng.randrange(1, len(self.owned[c]) + 1)))
            self.emit(c, "released", rebalance=self.rebalance[c], partitions=gone)

    def run(self, steps: int) -> list[dict[str, Any]]:
        for c in self.consumers[:3]:
            self.start(c)
        for _ in range(steps):
            self.step()
        for c in self.consumers:
            if self.alive.get(c) and self.rng.random() < 0.7:
                self.emit(c, "shutdown", committed=True)
        return self.records
