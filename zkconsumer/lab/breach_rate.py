"""Rates, not anecdotes (issue 40 item 2): the same schedule run N times, each run's verdict folded into "breaks in
k of N runs" with, per invariant, the runs that broke it.

Pure (no I/O): ``zkconsumer catalogue --runs N`` (lab/catalogue.py) and ``benchmarks/nemesis.py --runs N``
(lab/nemesis_run.py) give each run's judgement as a :class:`RunVerdict`; a :class:`BreachRate` over them is what
their tables, their JSON and the catalogue's page show. A run that could not be carried out, or was not analysed,
is no verdict on the invariants: it is counted apart, never as a run that held. An invariant not judged in a run
(the commit invariants of a member whose commits its trace lacks) counts neither way in that run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from zkconsumer.errors import IllegalArgument
from zkconsumer.scenario.nemesis import Breach, Invariant


class RunStatus(StrEnum):
    """What one run gave: a verdict on the invariants, or why it gave none."""

    JUDGED = "judged"
    NOT_ANALYSED = "not analysed"
    FAILED = "failed to run"


class RateOutcome(StrEnum):
    """A rate's word: some judged run broke an invariant, every judged run held, or no run was judged."""

    BREAKS = "breaks"
    HOLDS = "holds"
    NO_VERDICT = "no verdict"


@dataclass(frozen=True)
class RunVerdict:
    """One run's judgement: per invariant judged, the violations found (0: it holds); an invariant absent from
    ``violations`` was not judged in this run. ``violations`` None: no verdict (``error`` says why the run failed;
    without one it ran but was not analysed)."""

    violations: Mapping[Invariant, int] | None
    error: str | None = None

    def __post_init__(self) -> None:
        if self.violations is not None:
            if self.error is not None:
                raise IllegalArgument("a run that failed has no violations to count")
            if any(n < 0 for n in self.violations.values()):
                raise IllegalArgument(f"violations are counts, not {dict(self.violations)}")
            object.__setattr__(self, "violations", {Invariant(i): n for i, n in self.violations.items()})

    @classmethod
    def of_breach(cls, breach: Breach | None, judged: Iterable[Invariant] = tuple(Invariant)) -> RunVerdict:
        """A nemesis run's judgement (the invariants it broke, no counts): 1 for each broken, 0 for the rest of
        those ``judged``."""
        judged = frozenset(judged) | (breach.invariants if breach else frozenset())
        return cls({i: int(breach is not None and i in breach.invariants) for i in Invariant if i in judged})

    @classmethod
    def failed(cls, error: str) -> RunVerdict:
        return cls(None, error)

    @property
    def status(self) -> RunStatus:
        if self.violations is not None:
            return RunStatus.JUDGED
        return RunStatus.FAILED if self.error is not None else RunStatus.NOT_ANALYSED

    @property
    def broken(self) -> frozenset[Invariant]:
        return frozenset(i for i, n in (self.violations or {}).items() if n)

    @property
    def text(self) -> str:
        """``holds``, ``BROKEN: <claim> (n); ...``, ``failed to run: <error>`` or ``not analysed``."""
        if self.violations is None:
            return f"{RunStatus.FAILED}: {self.error}" if self.error is not None else RunStatus.NOT_ANALYSED.value
        broken = [f"{i.claim} ({self.violations[i]})" for i in Invariant if self.violations.get(i)]
        return "BROKEN: " + "; ".join(broken) if broken else "holds"

    def as_json(self) -> dict:
        return {"status": self.status.value, "verdict": self.text, "error": self.error,
                "invariants": None if self.violations is None else {i.value: n for i, n in self.violations.items()}}


@dataclass(frozen=True)
class InvariantRate:
    """One invariant over the runs: broken in ``broken`` of the ``judged`` runs that judged it."""

    broken: int
    judged: int


@dataclass(frozen=True)
class BreachRate:
    """Runs of one schedule (a catalogue cell, a nemesis seed) folded into a rate: ``k`` of the ``n`` judged runs
    broke some invariant."""

    runs: tuple[RunVerdict, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "runs", tuple(self.runs))
        if not self.runs:
            raise IllegalArgument("a rate needs at least one run")

    @classmethod
    def pooled(cls, rates: Iterable[BreachRate]) -> BreachRate:
        """Every run of several rates as one (a variant's total over its seeds)."""
        return cls(tuple(run for rate in rates for run in rate.runs))

    def _count(self, status: RunStatus) -> int:
        return sum(1 for r in self.runs if r.status is status)

    @property
    def n(self) -> int:
        """The runs that gave a verdict."""
        return self._count(RunStatus.JUDGED)

    @property
    def k(self) -> int:
        """The judged runs that broke at least one invariant."""
        return sum(1 for r in self.runs if r.broken)

    @property
    def failed(self) -> int:
        return self._count(RunStatus.FAILED)

    @property
    def not_analysed(self) -> int:
        return self._count(RunStatus.NOT_ANALYSED)

    @property
    def outcome(self) -> RateOutcome:
        return RateOutcome.NO_VERDICT if not self.n else RateOutcome.BREAKS if self.k else RateOutcome.HOLDS

    @property
    def invariants(self) -> dict[Invariant, InvariantRate]:
        """Per invariant judged in some run (in the analysis' order): in how many of those runs it broke."""
        out = {}
        for i in Invariant:
            judged = [r for r in self.runs if r.violations is not None and i in r.violations]
            if judged:
                out[i] = InvariantRate(sum(1 for r in judged if r.violations[i]), len(judged))
        return out

    @property
    def not_judged(self) -> list[Invariant]:
        """The invariants no run judged (none when no run was judged: that is said as no verdict)."""
        return [i for i in Invariant if i not in self.invariants] if self.n else []

    @property
    def fraction(self) -> str:
        """``k/N``, the page's figure."""
        return f"{self.k}/{self.n}"

    @property
    def broken_text(self) -> str:
        """Each invariant broken, with its runs: ``never two live owners (2 of 5)``; ``of m judged`` where fewer
        runs judged it than gave a verdict."""
        return "; ".join(f"{i.claim} ({r.broken} of {r.judged}{'' if r.judged == self.n else ' judged'})"
                         for i, r in self.invariants.items() if r.broken)

    @property
    def headline(self) -> str:
        """``breaks in k of N runs``, ``holds in N of N runs`` or ``no verdict``, alone."""
        if self.outcome is RateOutcome.BREAKS:
            return f"breaks in {self.k} of {self.n} {_runs(self.n)}"
        if self.outcome is RateOutcome.HOLDS:
            return f"holds in {self.n} of {self.n} {_runs(self.n)}"
        return RateOutcome.NO_VERDICT.value

    @property
    def text(self) -> str:
        """The :attr:`headline`, then each invariant broken (``<invariant> (k_i of N); ...``), the runs that failed
        or were not analysed, and the invariants no run judged."""
        words = self.headline
        if self.outcome is RateOutcome.BREAKS:
            words += f": {self.broken_text}"
        apart = [f"{count} {status.value}" for status, count in ((RunStatus.FAILED, self.failed),
                                                                 (RunStatus.NOT_ANALYSED, self.not_analysed)) if count]
        if apart:
            words += f" ({', '.join(apart)} of {len(self.runs)})"
        if self.not_judged:
            words += f" (not judged: {', '.join(i.claim for i in self.not_judged)})"
        return words

    def as_json(self) -> dict:
        return {"k": self.k, "n": self.n, "outcome": self.outcome.value, "headline": self.headline, "text": self.text,
                "failed": self.failed, "not_analysed": self.not_analysed,
                "invariants": {i.value: {"broken": r.broken, "judged": r.judged} for i, r in self.invariants.items()},
                "not_judged": [i.value for i in self.not_judged],
                "runs": [r.as_json() for r in self.runs]}


def _runs(n: int) -> str:
    return "run" if n == 1 else "runs"


def spread(values: Iterable[int | float | None]) -> tuple[int | float, int | float] | None:
    """The lowest and highest of the figures runs measured (None: no run measured it)."""
    measured = [v for v in values if v is not None]
    return (min(measured), max(measured)) if measured else None
