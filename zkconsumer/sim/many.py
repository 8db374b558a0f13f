"""Many seeds of a simulated run: on Spark (each task a slice of the seeds, each seed one simulation in the task's
Python worker), or in this process for a handful; and the table of verdicts they add up to.

Why Spark: a seed takes a fraction of a second of one core and shares nothing with the others, so thousands of
them are embarrassingly parallel, and the project's analysis already runs on Spark (``--master`` as elsewhere, a
local one by default). Each task returns plain dicts (:meth:`SeedResult.as_dict`); nothing but the job and the
seed numbers goes to the workers.

A seed's trace hash is the same in a Spark task as alone, in any process under any ``PYTHONHASHSEED``
(tests/test_sim_world.py checks it across processes): nothing a run orders comes from a set's iteration order.
"""

from __future__ import annotations

import logging
import multiprocessing
import queue
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from zkconsumer.errors import ZkConsumerError
from zkconsumer.scenario.model import LabMode
from zkconsumer.sim.checkers import Invariant
from zkconsumer.sim.runs import MigrationBreach, SeedResult, SimJob, run_seed

#: seeds per Spark task: enough to amortise a task's start, few enough for an even spread and a moving progress bar
SEEDS_PER_TASK = 10


def _quiet() -> None:
    """A simulation logs what a real member logs (lost sessions, refused claims, rebalances given up): thousands
    of seeds would drown the console; the verdicts and each seed's trace (``--seed N --trace-dir``) say it all."""
    logging.disable(logging.ERROR)


def _run_slice(job: SimJob, seeds: Iterable[int]) -> list[dict[str, Any]]:
    _quiet()
    return [run_seed(job, seed).as_dict() for seed in seeds]


def run_local(job: SimJob, seeds: Sequence[int], progress: Callable[[int], None] | None = None,
              workers: int = 1) -> list[SeedResult]:
    """Each seed here, in seed order (``progress(done)`` after each): one after the other in this process, or with
    ``workers`` > 1 each in a process of its own forked from this one, that many at a time (a seed's trace is the
    same in any process: tests/test_sim_world.py, test_sim_migration.py)."""
    if workers <= 1 or len(seeds) <= 1:
        results = []
        for i, seed in enumerate(seeds, 1):
            results.append(run_seed(job, seed))
            if progress is not None:
                progress(i)
        return results
    ctx = multiprocessing.get_context("fork")
    answers = ctx.Queue()
    pending, running, done = list(seeds), {}, {}
    while pending or running:
        while pending and len(running) < workers:
            seed = pending.pop(0)
            running[seed] = ctx.Process(target=_forked_seed, args=(job, seed, answers), daemon=True)
            running[seed].start()
        try:
            seed, result, error = answers.get(timeout=1.0)
        except queue.Empty:
            dead = [s for s, proc in running.items() if not proc.is_alive() and answers.empty()]
            if dead:
                raise ZkConsumerError(f"the process of seed {dead[0]} ended without a result "
                                   f"(exit code {running[dead[0]].exitcode})") from None
            continue
        running.pop(seed).join()
        if error is not None:
            raise ZkConsumerError(f"seed {seed} failed: {error}")
        done[seed] = SeedResult.from_dict(result)
        if progress is not None:
            progress(len(done))
    return [done[seed] for seed in seeds]


def _forked_seed(job: SimJob, seed: int, answers: Any) -> None:
    try:
        answers.put((seed, run_seed(job, seed).as_dict(), None))
    except BaseException as e:  # noqa: BLE001 - said to the parent, which raises it
        answers.put((seed, None, f"{type(e).__name__}: {e}"))


def run_spark(spark: Any, job: SimJob, seeds: Sequence[int]) -> list[SeedResult]:
    """Each slice of :data:`SEEDS_PER_TASK` seeds a Spark task; results in seed order."""
    slices = [list(seeds[i:i + SEEDS_PER_TASK]) for i in range(0, len(seeds), SEEDS_PER_TASK)]
    rdd = spark.sparkContext.parallelize(slices, len(slices))
    rows = rdd.flatMap(lambda seeds_: _run_slice(job, seeds_)).collect()
    return sorted((SeedResult.from_dict(r) for r in rows), key=lambda r: r.seed)


@dataclass
class SimSummary:
    """What a run of many seeds adds up to."""

    job: SimJob
    results: list[SeedResult]
    wall_s: float
    shrunk: list[dict[str, Any]] = field(default_factory=list)

    @property
    def runs(self) -> int:
        return len(self.results)

    @property
    def breaching(self) -> list[int]:
        return [r.seed for r in self.results if not r.ok]

    def breaches(self) -> dict[Invariant | MigrationBreach, int]:
        """Per judged invariant (and, in migrate mode, how a migration may end badly): in how many seeds it broke."""
        judged: list[Invariant | MigrationBreach] = [i for i in Invariant if i.judged]
        if self.job.mode is LabMode.MIGRATE:
            judged += list(MigrationBreach)
        return {i: sum(1 for r in self.results if i.value in r.broken) for i in judged}

    def migration_results(self) -> dict[str, int]:
        """Migrate mode: how many seeds' migrations ended each way (``done``, ``rolled back``, a failure's words)."""
        return dict(Counter(r.migration["result"] for r in self.results if r.migration is not None))

    @property
    def schedules_per_minute(self) -> float:
        return 60.0 * self.runs / self.wall_s if self.wall_s > 0 else 0.0

    def rate_text(self) -> str:
        k = len(self.breaching)
        return f"breaks in {k} of {self.runs} runs" if k else f"holds in {self.runs} of {self.runs} runs"

    def as_dict(self) -> dict[str, Any]:
        return {
            "profile": self.job.profile, "variant": self.job.variant or None, "source": self.job.label,
            "runs": self.runs,
            "breaking_runs": len(self.breaching), "verdict": self.rate_text(),
            "breaches": {i.value: n for i, n in self.breaches().items()},
            **({"mode": str(self.job.mode), "migration_results": self.migration_results()}
               if self.job.mode is LabMode.MIGRATE else {}),
            "wall_seconds": round(self.wall_s, 3), "schedules_per_minute": round(self.schedules_per_minute, 1),
            "virtual_seconds": round(sum(r.virtual_ms for r in self.results) / 1000.0, 1),
            "seeds": [{"seed": r.seed, "verdict": "holds" if r.ok else "breaks", "broken": r.broken,
                       "trace_sha256": r.trace_sha256, "scenario": r.scenario,
                       **({"member_errors": r.member_errors} if r.member_errors else {}),
                       **({"migration": r.migration} if r.migration is not None else {})} for r in self.results],
            "shrunk": self.shrunk,
        }
