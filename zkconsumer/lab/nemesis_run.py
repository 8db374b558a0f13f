"""``zkconsumer lab --nemesis``: the I/O around scenario/nemesis.py. Each seed's drawn schedule runs as a lab, is judged
by the analysis' invariants on Spark, and a breach is shrunk, rerunning each candidate, to a minimal scenario file
written beside the run with the command that replays it.

A seed's schedule may be run several times (``repeats``: benchmarks/nemesis.py ``--runs``): the seed's verdict is
then a rate, "breaks in k of N runs" with the invariants broken (lab/breach_rate.py), and the first breach is the
one shrunk.

Layout of ``--out``: ``seed-<S>/schedule.toml`` (the drawn schedule), ``seed-<S>/run/`` (its lab run: traces, logs,
``console.txt``, the analysis' tables under ``report/``; ``run-<i>/`` for each of several repeats),
``seed-<S>/shrink-<NN>/`` (each candidate's run), ``seed-<S>/minimal.toml`` (after a breach), and ``nemesis.json``
(every seed's outcome).

One Spark session judges every run of the process: starting one costs a lab run's analysis several times over.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import shlex
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from zkconsumer.errors import IllegalArgument
from zkconsumer.lab.breach_rate import BreachRate, RunVerdict
from zkconsumer.lab.faults.scenario_lab import lab_for
from zkconsumer.lab.variants import VARIANTS, unavailable
from zkconsumer.scenario.model import Scenario
from zkconsumer.scenario.nemesis import (
    COMMIT_INVARIANTS,
    Breach,
    Candidate,
    Invariant,
    NemesisSettings,
    Shrunk,
    draw,
    invariant_counts,
    minimal_name,
    minimise,
)
from zkconsumer.scenario.plan import RunPlan
from zkconsumer.scenario.writer import dumps

#: The variants a nemesis runs: those the lab runs alone, with its own servers (the others need Apache Kafka's
#: broker, which compare starts around the lab).
NEMESIS_VARIANTS = tuple(name for name, v in VARIANTS.items() if v.kafka is None)
#: ``--profile`` as a variant
PROFILE_VARIANTS = {"default": "zookeeper-default", "kafka-0.8": "zookeeper-kafka-0.8"}


def breach_of(counts: Any, judge_commits: bool = True) -> Breach | None:
    """The invariants an analysis found broken (``analysis.invariants.InvariantCounts``), or None. Without
    ``judge_commits`` (members whose commits the traces lack: Kafka 0.8.2.2's own), none about commits."""
    invariants = frozenset(i for i, n in invariant_counts(counts).items()
                           if n and (judge_commits or i not in COMMIT_INVARIANTS))
    return Breach(invariants, "; ".join(counts.violations())) if invariants else None


def replay_command(path: Path, variant: str, flags: dict[str, Any]) -> str:
    """The command that runs ``path`` again on ``variant`` and prints the invariants' verdicts: ``lab --analyze``
    for zkconsumer's profiles, ``compare`` for the variants ``lab`` has no flag for."""
    profile = next((p for p, v in PROFILE_VARIANTS.items() if v == variant), None)
    extra = [f"--{k.replace('_', '-')} {shlex.quote(str(v))}" for k, v in flags.items() if v is not None]
    if profile is not None:
        return " ".join(["zkconsumer lab --scenario", shlex.quote(str(path)), "--profile", profile, *extra,
                         "--analyze"])
    return " ".join(["zkconsumer compare --scenario", shlex.quote(str(path)), "--variants", variant, *extra])


class LabJudge:
    """Runs a scenario as a lab of ``variant`` and judges its traces with the invariants (tables only: no plots,
    no report). The Spark session is started at the first judgement and kept for the rest."""

    def __init__(self, variant: str, flags: dict[str, Any] | None = None, master: str | None = None) -> None:
        if variant not in NEMESIS_VARIANTS:
            raise IllegalArgument(f"unknown variant {variant!r} for a nemesis; one of: {', '.join(NEMESIS_VARIANTS)}")
        self.variant = variant
        self.flags = {k: v for k, v in (flags or {}).items() if v is not None}
        self.master = master
        self._spark = None
        self._own_spark = False

    def plan(self, scenario: Scenario) -> RunPlan:
        v = VARIANTS[self.variant]
        settings = {"profile": v.profile, "mode": v.mode, "client": v.client, "static_members": v.static_members,
                    "properties": v.properties, **self.flags}
        if v.strategy:
            settings["strategy"] = v.strategy
        return RunPlan.from_scenario(scenario, **settings)

    def spark(self):  # noqa: ANN201 - pyspark is imported only when a run is judged
        if self._spark is None:
            from pyspark.sql import SparkSession

            from zkconsumer.analysis.spark import build_session

            existing = SparkSession.getActiveSession()
            self._own_spark = existing is None
            self._spark = existing or build_session(self.master or "local[2]", "zkconsumer-nemesis",
                                                    shuffle_partitions=2, driver_memory="1g")
        return self._spark

    def with_variant(self, variant: str) -> LabJudge:
        """A judge of ``variant`` taking over this one's Spark session (a benchmark over variants starts one)."""
        judge = LabJudge(variant, self.flags, self.master)
        judge._spark, judge._own_spark = self._spark, self._own_spark
        self._spark, self._own_spark = None, False
        return judge

    def close(self) -> None:
        """Stop the Spark session if this judge started it (one found running belongs to someone else)."""
        if self._spark is not None and self._own_spark:
            self._spark.stop()
        self._spark = None

    def run(self, scenario: Scenario, out: Path) -> tuple[Breach | None, dict]:
        """Run and judge; the lab's own output goes to ``out/console.txt``. A run that could not be carried out
        raises: it is no verdict on the invariants."""
        from zkconsumer.analysis.pipeline import run_analysis

        out.mkdir(parents=True, exist_ok=True)
        (out / "scenario.toml").write_text(dumps(scenario))
        with open(out / "console.txt", "w") as log:
            summary = lab_for(self.plan(scenario), out, console=Console(file=log, width=120)).run()
        result = run_analysis(self.spark(), summary["trace_dir"], out / "report", Console(file=io.StringIO()),
                              from_zero=True, plots_and_report=False)
        return breach_of(result.invariants, judge_commits=not summary.get("commits_untraced")), summary


def judged_invariants(summary: dict | None) -> tuple[Invariant, ...]:
    """The invariants a run's verdict speaks for: none about commits where its members' commits are untraced."""
    untraced = bool(summary and summary.get("commits_untraced"))
    return tuple(i for i in Invariant if not (untraced and i in COMMIT_INVARIANTS))


@dataclass
class SeedResult:
    """One seed's outcome: its schedule run once or more (``verdicts``, ``run_seconds``: one per run), the first
    breach found (the one shrunk), and ``error`` when no run of it could be carried out."""

    seed: int
    scenario: Scenario
    out: Path
    seconds: float = 0.0
    breach: Breach | None = None
    error: str | None = None
    shrunk: Shrunk | None = None
    shrink_seconds: float = 0.0
    minimal: Path | None = None
    replay: str | None = None
    verdicts: list[RunVerdict] = dataclasses.field(default_factory=list)
    run_seconds: list[float] = dataclasses.field(default_factory=list)

    @property
    def rate(self) -> BreachRate:
        """The seed's runs as a rate (one run: a rate of 1)."""
        return BreachRate(tuple(self.verdicts) or (RunVerdict.failed(self.error or "not run"),))

    @property
    def broken(self) -> frozenset[Invariant]:
        """Every invariant some run of the seed broke."""
        return frozenset(i for v in self.verdicts for i in v.broken) | (self.breach.invariants if self.breach
                                                                          else frozenset())

    def as_json(self) -> dict:
        return {"seed": self.seed, "out": str(self.out), "actions": len(self.scenario.actions),
                "seconds": round(self.seconds, 1), "error": self.error,
                "breached": [i.value for i in Invariant if i in self.broken],
                "rate": self.rate.as_json(), "run_seconds": [round(t, 1) for t in self.run_seconds],
                "detail": self.breach.detail if self.breach else "",
                "shrink": None if self.shrunk is None else {
                    "target": self.shrunk.target.value, "tried": self.shrunk.tried, "steps": self.shrunk.steps,
                    "minimal": self.shrunk.minimal, "actions": len(self.shrunk.scenario.actions),
                    "seconds": round(self.shrink_seconds, 1)},
                "minimal": str(self.minimal) if self.minimal else None, "replay": self.replay}


def run_nemesis(seeds: list[int], settings: NemesisSettings, variant: str, out: Path, console: Console,
                budget: int = 30, flags: dict[str, Any] | None = None, master: str | None = None,
                judge: LabJudge | None = None, confirm: int = 1, repeats: int = 1) -> list[SeedResult]:
    """Each seed: draw, print the schedule, run and judge it ``repeats`` times; on a breach shrink within
    ``budget`` reruns (a candidate kept only if it breaches ``confirm`` runs in a row) and write ``minimal.toml``.
    Prints a summary; writes ``nemesis.json``."""
    reason = unavailable(variant) if variant in VARIANTS else None
    if reason:
        raise IllegalArgument(reason)
    if repeats < 1:
        raise IllegalArgument(f"a seed's schedule runs at least once, not {repeats} times")
    # the lab's producer and monitors log every broken connection of a member being killed: keep the verdicts
    # readable (the members' logs keep theirs)
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    own_judge = judge is None
    judge = judge or LabJudge(variant, flags, master)
    results: list[SeedResult] = []
    try:
        for seed in seeds:
            results.append(_one_seed(seed, settings, judge, out / f"seed-{seed}", console, budget, confirm,
                                     repeats))
    finally:
        if own_judge:
            judge.close()
    print_summary(results, console, variant)
    out.mkdir(parents=True, exist_ok=True)
    (out / "nemesis.json").write_text(json.dumps({"variant": variant, "settings": _settings_json(settings),
                                                  "runs": [r.as_json() for r in results]}, indent=2))
    return results


def _settings_json(settings: NemesisSettings) -> dict:
    return {k: (list(map(str, v)) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(settings).items()}


def _one_seed(seed: int, settings: NemesisSettings, judge: LabJudge, out: Path, console: Console,
              budget: int, confirm: int = 1, repeats: int = 1) -> SeedResult:
    scenario = draw(seed, settings)
    out.mkdir(parents=True, exist_ok=True)
    text = dumps(scenario)
    (out / "schedule.toml").write_text(text)
    console.rule(f"[bold]nemesis seed {seed}[/] ({judge.variant}): {len(scenario.actions)} action(s)"
                 + (f", {repeats} runs" if repeats > 1 else ""))
    console.print(text.rstrip(), highlight=False, markup=False)
    result = SeedResult(seed, scenario, out)
    errors = []
    for i in range(1, repeats + 1):
        what = f"seed {seed}" if repeats == 1 else f"seed {seed} run {i} of {repeats}"
        started = time.monotonic()
        try:
            with console.status(f"{what}: running the schedule and judging it…"):
                breach, summary = judge.run(scenario, out / ("run" if repeats == 1 else f"run-{i}"))
        except Exception as e:  # noqa: BLE001 - one seed's broken run is reported, the next run or seed still runs
            errors.append(f"{type(e).__name__}: {e}")
            result.verdicts.append(RunVerdict.failed(errors[-1]))
            console.print(f"[red]{what}: the run failed[/]: {escape(errors[-1])}")
            continue
        finally:
            result.run_seconds.append(time.monotonic() - started)
        result.verdicts.append(RunVerdict.of_breach(breach, judged_invariants(summary)))
        result.breach = result.breach or breach
        console.print(_verdict(what, breach, result.run_seconds[-1], summary), highlight=False)
    result.seconds = sum(result.run_seconds)
    if len(errors) == repeats:  # no verdict at all: the seed failed to run
        result.error = errors[0]
        return result
    if repeats > 1:
        colour = "bold red" if result.rate.k else "green"
        console.print(f"[{colour}]seed {seed}: {escape(result.rate.text)}[/]", highlight=False)
    if result.breach is None or budget <= 0:
        return result
    _shrink(result, settings, judge, console, budget, confirm)
    return result


def _verdict(what: str, breach: Breach | None, seconds: float, summary: dict | None = None) -> str:
    figures = f" ({seconds:.0f} s" + (f", {summary.get('duplicates', 0)} duplicates" if summary else "") + ")"
    if breach is None:
        return f"[green]{what}: every invariant holds[/]{figures}"
    return (f"[bold red]{what}: broken: {', '.join(i.claim for i in Invariant if i in breach.invariants)}[/]"
            f"{figures}: {escape(breach.detail)}")


def _shrink(result: SeedResult, settings: NemesisSettings, judge: LabJudge, console: Console, budget: int,
            confirm: int = 1) -> None:
    assert result.breach is not None
    target = result.breach.first
    console.print(f"shrinking while it breaches '{target.claim}' (at most {budget} reruns)…", highlight=False)
    runs: Iterator[int] = iter(range(1, budget + 1))

    def judge_candidate(scenario: Scenario) -> Breach | None:
        n = next(runs)
        try:
            breach, _ = judge.run(scenario, result.out / f"shrink-{n:02d}")
        except Exception as e:  # noqa: BLE001 - a candidate that cannot run does not breach: it is not kept
            console.print(f"  [yellow]shrink {n}: the run failed[/]: {escape(f'{type(e).__name__}: {e}')}")
            return None
        return breach

    def on_try(n: int, candidate: Candidate, breach: Breach | None) -> None:
        kept = breach is not None and target in breach.invariants
        console.print(f"  shrink {n:2d}: {escape(candidate.change)}: "
                      + ("[red]still breaches[/], kept" if kept else
                         "[green]holds[/]" if breach is None else
                         f"breaches only {', '.join(i for i in Invariant if i in breach.invariants)}, not kept"),
                      highlight=False)

    started = time.monotonic()
    shrunk = minimise(result.scenario, result.breach, judge_candidate, settings, target=target, budget=budget,
                      confirm=confirm, on_try=on_try)
    result.shrink_seconds = time.monotonic() - started
    result.shrunk = shrunk
    result.minimal = result.out / "minimal.toml"
    result.minimal.write_text(dumps(minimal_name(shrunk.scenario)))
    result.replay = replay_command(result.minimal, judge.variant, judge.flags)
    state = "minimal" if shrunk.minimal else f"smallest found within {budget} reruns"
    console.print(f"{state}: {len(shrunk.scenario.actions)} action(s) after {shrunk.tried} reruns "
                  f"({result.shrink_seconds:.0f} s), breaching '{target.claim}'", highlight=False)
    console.print(dumps(minimal_name(shrunk.scenario)).rstrip(), highlight=False, markup=False)
    console.print(f"written to {result.minimal}; replay it:\n  {result.replay}", highlight=False, markup=False)


def print_summary(results: list[SeedResult], console: Console, variant: str) -> None:
    """One row per seed (with several runs a seed, its rate), the breaches by invariant, and the reproducers."""
    repeated = any(len(r.verdicts) > 1 for r in results)
    table = Table(title=f"nemesis on {variant}: {len(results)} run(s)" if not repeated else
                  f"nemesis on {variant}: {len(results)} seed(s), {sum(len(r.verdicts) for r in results)} runs")
    columns = ("seed", "actions", "verdict", *(("runs",) if repeated else ()), "wall (s)", "shrink reruns",
               "minimal actions", "reproducer")
    for column in columns:
        table.add_column(column, justify="right" if column in ("seed", "actions", "wall (s)") else "left")
    for r in results:
        verdict = (f"[red]{escape(r.error)}[/]" if r.error else "holds" if not r.broken else
                   "[bold red]" + ", ".join(i.value for i in Invariant if i in r.broken) + "[/]")
        table.add_row(str(r.seed), str(len(r.scenario.actions)), verdict,
                      *((escape(r.rate.text),) if repeated else ()), f"{r.seconds:.0f}",
                      str(r.shrunk.tried) if r.shrunk else "", str(len(r.shrunk.scenario.actions)) if r.shrunk else "",
                      escape(str(r.minimal)) if r.minimal else "")
    console.print(table)
    by_invariant = Counter(i for r in results for i in r.broken)
    pooled = BreachRate.pooled(r.rate for r in results)
    breaches = sum(1 for r in results if r.broken)
    failed = sum(1 for r in results if r.error)
    console.print(f"runs: {len(results)}, breaches: {breaches}, runs that failed to run: {failed}", highlight=False)
    if repeated:
        console.print(f"every run of every seed: {pooled.text}", highlight=False)
    for inv in Invariant:
        if by_invariant[inv]:
            runs = f" ({pooled.invariants[inv].broken} of {pooled.invariants[inv].judged} runs)" if repeated else ""
            console.print(f"  {inv.claim}: broken in {by_invariant[inv]} {'seed(s)' if repeated else 'run(s)'}{runs}",
                          highlight=False)
    for r in results:
        if r.replay:
            console.print(f"reproducer of seed {r.seed}: {r.minimal}\n  {r.replay}", highlight=False, markup=False)
