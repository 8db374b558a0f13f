"""Seeds of a simulated lab run: what to run (:class:`SimJob`), one seed judged (:func:`run_seed`), a breach shrunk
(:func:`shrink`).

A job is a profile and a source of plans: a scenario (a shipped name or a file's text: the same plan for every
seed, each seed its own interleaving), or the nemesis (each seed draws its own fault schedule with
``scenario/nemesis.py``'s rules, as ``benchmarks/nemesis.py`` draws them for the real lab). :func:`run_seed` runs one
seed in :class:`~zkconsumer.sim.world.SimWorld` with a :class:`~zkconsumer.sim.checkers.Checker` watching every trace
line as it is written, and returns a :class:`SeedResult`: plain data, so that a Spark task can return it.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from zkconsumer.config import PROFILES
from zkconsumer.errors import IllegalArgument
from zkconsumer.scenario import nemesis, writer
from zkconsumer.scenario import reader as scenarios
from zkconsumer.scenario.model import Action, ActionKind, LabMode, Scenario
from zkconsumer.scenario.plan import RunPlan
from zkconsumer.sim.checkers import JUDGED, Checker, SimVerdict
from zkconsumer.sim.world import SimWorld
from zkconsumer.sim.zk_service import ServiceModel


class SourceKind(StrEnum):
    SCENARIO = "scenario"  # one plan for every seed; the seed picks the interleaving
    NEMESIS = "nemesis"  # each seed draws its own schedule


@dataclass(frozen=True)
class SimJob:
    """What every seed of a ``zkconsumer sim`` run runs. Picklable: Spark ships it to its tasks."""

    profile: str = "default"
    kind: SourceKind = SourceKind.NEMESIS
    #: the scenario: a shipped name, or a file's text (``scenario_source`` names the file in messages)
    scenario: str = ""
    scenario_text: str | None = None
    scenario_source: str = ""
    nemesis: nemesis.NemesisSettings = field(default_factory=nemesis.NemesisSettings)
    #: the simulated ZooKeeper's service times (``none``: requests served on arrival)
    service: ServiceModel = ServiceModel.NONE
    #: consumer properties every member takes on top of the scenario's (Kafka's names; the settings grid's
    #: ``rebalance.max.retries`` and ``rebalance.backoff.ms``: sim/grid.py)
    properties: tuple[tuple[str, str], ...] = ()
    #: the variant's name (``zkconsumer compare``'s: lab/variants.py), and what of it the plan takes: the group's
    #: mode, the assignment strategy (empty: the plan's), static members, and the actions it has no counterpart for
    #: (skipped, with why, as the lab skips them). The CLI fills them from the variant (sim cannot import lab/).
    variant: str = ""
    mode: LabMode = LabMode.ZOOKEEPER
    strategy: str = ""
    static_members: bool = False
    absent: tuple[tuple[ActionKind, str], ...] = ()

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise IllegalArgument(f"unknown profile {self.profile!r}; one of: {', '.join(PROFILES)}")

    def scenario_for(self, seed: int) -> Scenario:
        if self.kind is SourceKind.NEMESIS:
            drawn = nemesis.draw(seed, self.nemesis)
            return with_migration(drawn, seed, self.nemesis) if self.mode is LabMode.MIGRATE else drawn
        if self.scenario_text is not None:
            return scenarios.loads(self.scenario_text, self.scenario_source or "<scenario>")
        return scenarios.builtin(self.scenario)

    def plan(self, scenario: Scenario) -> RunPlan:
        plan = RunPlan.from_scenario(scenario, profile=self.profile, properties=self.properties or None)
        if not self.variant and self.mode is LabMode.ZOOKEEPER:
            return plan
        return dataclasses.replace(plan, mode=self.mode, strategy=self.strategy or plan.strategy,
                                   static_members=self.static_members, absent=self.absent)

    @property
    def who(self) -> str:
        """What runs, as a breach's note and the tables name it: the variant, else the profile."""
        if self.mode is LabMode.MIGRATE:
            return f"mode migrate (profile {self.profile})"
        return f"variant {self.variant}" if self.variant else f"profile {self.profile}"

    @property
    def flag(self) -> str:
        """The ``zkconsumer sim``/``lab`` flags that name what runs."""
        if self.mode is LabMode.MIGRATE:
            return f"--mode migrate --profile {self.profile}"
        return f"--variant {self.variant}" if self.variant else f"--profile {self.profile}"

    @property
    def label(self) -> str:
        if self.kind is SourceKind.NEMESIS:
            return "nemesis"
        return self.scenario or self.scenario_source or "scenario"


#: the migration's own steps, which a migrate-mode nemesis schedule gets besides its faults
MIGRATION_KINDS = (ActionKind.MIGRATE, ActionKind.ROLLBACK, ActionKind.KILL_DRIVER)
#: a rollback follows the migration in this share of the seeds (the lab runs it once the migration has ended)
ROLLBACK_SHARE = 0.25
#: in this share of the seeds without a rollback, the driver is killed mid-way and ``migrate`` run again (the fault
#: matrix's ``migrate-kill``)
DRIVER_KILL_SHARE = 1 / 3


def with_migration(drawn: Scenario, seed: int, settings: nemesis.NemesisSettings) -> Scenario:
    """A nemesis schedule for ``zkconsumer sim --mode migrate``: the drawn faults, plus ``migrate`` at a time drawn
    between ``first_at`` and half-way through the run, and in a quarter of the seeds a ``rollback`` 2-8 s later; in a
    third of the others the driver is killed 1-6 s after it started and ``migrate`` run again 0.5-3 s after that.
    Drawn from a stream of its own (``migrate-<seed>``), so the faults are the seed's as in any other mode."""
    rng = random.Random(f"migrate-{seed}")
    step = settings.resolution
    at = round(rng.uniform(settings.first_at, max(settings.first_at, settings.duration / 2)) / step) * step
    actions = [Action(at=at, kind=ActionKind.MIGRATE)]
    if rng.random() < ROLLBACK_SHARE:
        actions.append(Action(at=at + round(rng.uniform(2, 8) / step) * step, kind=ActionKind.ROLLBACK))
    else:
        # a stream of its own: the seeds drawn before the driver could be killed keep their schedules
        kill = random.Random(f"driver-kill-{seed}")
        if kill.random() < DRIVER_KILL_SHARE:
            killed = at + round(kill.uniform(1, 6) / step) * step
            actions += [Action(at=killed, kind=ActionKind.KILL_DRIVER),
                        Action(at=killed + round(kill.uniform(0.5, 3) / step) * step, kind=ActionKind.MIGRATE)]
    return _with_steps(drawn, actions)


def _at(action: Action) -> float:
    return float(action.at) if not isinstance(action.at, str) else 0.0


def _with_steps(scenario: Scenario, steps: Iterable[Action]) -> Scenario:
    """``scenario`` with ``steps`` added among its actions, in time order."""
    return dataclasses.replace(scenario, actions=tuple(sorted((*scenario.actions, *steps), key=_at)))


def split_migration(scenario: Scenario) -> tuple[Scenario, tuple[Action, ...]]:
    """(the schedule without its migration steps, those steps): the shrinker shrinks the faults and keeps them."""
    steps = tuple(a for a in scenario.actions if a.kind in MIGRATION_KINDS)
    faults = tuple(a for a in scenario.actions if a.kind not in MIGRATION_KINDS)
    return dataclasses.replace(scenario, actions=faults), steps


class MigrationBreach(StrEnum):
    """What a migrate-mode run breaks beyond the trace's invariants: how the migration ended (issue 54 item 2)."""

    #: the run ended with members in both modes and no migration step held (the lab's "never a mixed group")
    LEFT_MIXED = "migration_left_mixed"
    #: the driver's own ownership verdict (owner nodes, or the coordinator once done) did not hold at the end
    NOT_OWNED = "migration_not_owned"


#: every kind a simulated run can break, by the name ``broken`` lists (``--shrink-keep`` takes these)
BREACH_KINDS = frozenset({i.value for i in JUDGED} | {m.value for m in MigrationBreach})


@dataclass
class SeedResult:
    """One seed's run, judged: plain values (a Spark task returns it as a dict, :meth:`as_dict`)."""

    seed: int
    ok: bool
    broken: list[str]
    counts: dict[str, int]
    first: dict[str, dict[str, Any]]
    trace_sha256: str
    wall_s: float
    virtual_ms: int
    zookeeper_requests: int
    trace_lines: int
    scenario: str
    member_errors: dict[str, str] = field(default_factory=dict)
    #: the breach found after this step, with the virtual time at which it became visible
    first_breach_ms: int | None = None
    #: the members' rebalances done, and given up (``rebalance_failed``: ``rebalance.max.retries`` spent)
    rebalances: int = 0
    rebalances_given_up: int = 0
    #: from the schedule's last disturbance (an action, a fault's heal) to the last rebalance done after it: how
    #: long the group took to settle (None: nothing happened after the start, or nothing rebalanced after it)
    settle_ms: int | None = None
    #: migrate mode: how the migration ended (sim/migration_side.py MigrationOutcome as a dict)
    migration: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SeedResult:
        return cls(**data)


def run_seed(job: SimJob, seed: int, trace_dir: Path | None = None, scenario: Scenario | None = None) -> SeedResult:
    """Run ``seed`` of ``job`` (or ``scenario``, a shrinking candidate, with that seed's interleaving), judged after
    every step by a :class:`Checker`; the trace written to ``trace_dir`` when given."""
    scenario = scenario if scenario is not None else job.scenario_for(seed)
    checker = Checker()
    first_breach: list[int] = []
    tally = _Tally()

    def observe(line: dict[str, Any]) -> None:
        if checker.observe(line) and not first_breach:
            first_breach.append(int(line["ts"]))
        tally.observe(line)

    started = time.perf_counter()
    world = SimWorld(job.plan(scenario), seed, observers=(observe,),
                     service=job.service.times)
    outcome = world.run()
    verdict: SimVerdict = checker.finish(outcome.log_end, outcome.ended_ms)
    if trace_dir is not None:
        outcome.write(trace_dir)
        (trace_dir / "scenario.toml").write_text(writer.dumps(scenario))
    broken = [i.value for i in verdict.broken()]
    migration = outcome.migration
    if migration is not None:
        broken += [b.value for b, failed in ((MigrationBreach.LEFT_MIXED, not migration.whole),
                                             (MigrationBreach.NOT_OWNED, not migration.owned)) if failed]
    return SeedResult(
        seed=seed, ok=verdict.ok and (migration is None or migration.ok), broken=broken,
        counts={i.value: n for i, n in verdict.counts.items()},
        first={i.value: b.as_dict() for i, b in verdict.first.items()},
        trace_sha256=outcome.trace_sha256, wall_s=round(time.perf_counter() - started, 4),
        virtual_ms=outcome.virtual_ms, zookeeper_requests=outcome.zookeeper_requests, trace_lines=len(outcome.lines),
        scenario=scenario.name, member_errors=outcome.member_errors,
        first_breach_ms=(first_breach[0] - outcome.started_ms) if first_breach else None,
        rebalances=tally.done, rebalances_given_up=tally.given_up, settle_ms=tally.settle_ms,
        migration=dataclasses.asdict(migration) if migration is not None else None)


class _Tally:
    """A run's rebalances, and when the group last settled after the last disturbance, from its trace lines."""

    __slots__ = ("done", "given_up", "disturbed", "settled")

    def __init__(self) -> None:
        self.done = self.given_up = 0
        self.disturbed: int | None = None
        self.settled: int | None = None

    def observe(self, line: dict[str, Any]) -> None:
        event = line["event"]
        if event == "rebalance_done":
            self.done += 1
            if self.disturbed is not None:
                self.settled = int(line["ts"])
        elif event == "rebalance_failed":
            self.given_up += 1
        elif event == "lab_step" or event == "fault_healed":
            self.disturbed, self.settled = int(line["ts"]), None

    @property
    def settle_ms(self) -> int | None:
        if self.disturbed is None or self.settled is None:
            return None
        return self.settled - self.disturbed


@dataclass(frozen=True)
class Shrunk:
    """A breach's smallest schedule found: its scenario (as TOML: it replays in the simulator and on the real lab),
    what was removed or shortened, and how many candidate runs it took."""

    seed: int
    invariants: tuple[str, ...]
    scenario: Scenario
    steps: tuple[str, ...]
    tries: int

    @property
    def toml(self) -> str:
        return writer.dumps(self.scenario)


def shrink(job: SimJob, result: SeedResult, budget: int = 60,
           progress: Callable[[int], None] | None = None, keep: frozenset[str] = frozenset()) -> Shrunk | None:
    """Shrink a breaching nemesis seed: try :func:`nemesis.candidates` (fewer actions, shorter pauses, fewer
    members, a shorter run), keep the first candidate that breaks one of the same invariants under the same seed,
    and go on from it until none does or ``budget`` candidate runs are spent. With ``keep`` (breach kinds), a
    candidate must break every one of them: a reproducer of *that* breach, not of whichever breaks most easily
    (a seed breaking commits-backwards and two-live-owners otherwise shrinks to the owners alone). None for a
    scenario job (its file is the user's: the nemesis's drawing rules, which keep a candidate meaningful, do not
    apply to it), a seed that held, or one that does not break every kind of ``keep``."""
    if result.ok or job.kind is not SourceKind.NEMESIS or not keep <= set(result.broken):
        return None
    wanted = set(keep or result.broken)
    current, migration = split_migration(job.scenario_for(result.seed))  # the migration's steps are kept as drawn
    steps: list[str] = []
    tries = 0
    improved = True
    while improved and tries < budget:
        improved = False
        for candidate in nemesis.candidates(current, job.nemesis):
            whole = _with_steps(candidate.scenario, migration)
            if migration and (candidate.scenario.duration or 0) <= max(_at(a) for a in migration):
                continue  # a run ending before its migration starts shows nothing of it
            tries += 1
            if progress is not None:
                progress(tries)
            rerun = run_seed(job, result.seed, scenario=whole)
            if (keep <= set(rerun.broken)) if keep else (wanted & set(rerun.broken)):
                current = candidate.scenario
                steps.append(candidate.change)
                improved = True
                break
            if tries >= budget:
                break
    name = f"sim-{'migrate' if job.mode is LabMode.MIGRATE else job.variant or job.profile}-{result.seed}"
    flag = job.flag
    current = _with_steps(current, migration)
    shrunk = dataclasses.replace(current, name=name, description=(
        f"shrunk by zkconsumer sim {flag} from nemesis seed {result.seed}: breaks "
        f"{', '.join(sorted(wanted))} in simulation ({len(steps)} steps: {'; '.join(steps) or 'as drawn'})"))
    return Shrunk(result.seed, tuple(sorted(wanted)), shrunk, tuple(steps), tries)
