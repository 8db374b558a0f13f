"""Randomized fault schedules on every ZooKeeper variant: N seeds each, breaches and their minimal reproducers.

Each seed draws a schedule (zkconsumer.scenario.nemesis: joins, stops, kill -9, restarts, bounces, pauses on both sides
of the session timeout), runs it as a lab, judges it with the analysis' five invariants on Spark (one session for
the whole benchmark), and shrinks a breach to a minimal scenario file (zkconsumer.lab.nemesis_run). The variants:
zkconsumer's default profile, its kafka-0.8 profile, and Apache Kafka 0.8.2.2's own consumer (skipped with one line
where its jars or a JDK are missing). The seeds are the same for every variant, so a row compares the variants on
the same schedule.

``--runs N`` runs each seed's schedule N times: a seed's verdict is then a rate, "breaks in k of N runs" with the
invariants broken and in how many runs (zkconsumer.lab.breach_rate), a variant's total the same over all its runs,
and one more table puts each seed's k/N on every variant side by side.

Printed: per variant, runs, breaches by invariant, wall time per seed (run and shrink apart), and each minimal
reproducer with the command that replays it; then one table across variants. ``nemesis.json`` per variant under
``--out`` (with ``--runs``, each seed's rate and every run's verdict).
Run: .venv/bin/python benchmarks/nemesis.py [--seeds 30] [--first-seed 0] [--runs 1] [--variants ...]
[--max-actions 4] [--shrink-budget 12] [--duration 30] [--out DIR] [--record FILE]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from rich.table import Table

from zkconsumer.consoles import make_console
from zkconsumer.lab.breach_rate import BreachRate
from zkconsumer.lab.nemesis_run import LabJudge, SeedResult, run_nemesis
from zkconsumer.lab.variants import unavailable
from zkconsumer.results.record import Scope
from zkconsumer.scenario.nemesis import Invariant, NemesisSettings, parse_kinds

ZOOKEEPER_VARIANTS = ("zookeeper-default", "zookeeper-kafka-0.8", "kafka-0.8.2.2")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=30, help="seeds per variant (default 30)")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--runs", type=int, default=1,
                    help="runs of each seed's schedule (default 1): its verdict 'breaks in k of N runs'")
    ap.add_argument("--variants", default=",".join(ZOOKEEPER_VARIANTS))
    ap.add_argument("--actions", default="join,stop,kill,restart,bounce,pause")
    ap.add_argument("--max-actions", type=int, default=4)
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--shrink-budget", type=int, default=12, help="reruns to shrink one breach (default 12)")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--record", type=Path, metavar="FILE", help="write the result record (results/README.md) there")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error(f"--runs takes a whole number of runs per seed, 1 or more, not {args.runs}")
    if args.record:
        # imported here, as the run starts (records.py reads the commit and the source's fingerprints on import):
        # tests load this file as a module, without benchmarks/ on sys.path
        from records import write_record
    console = make_console()
    out = args.out or Path(tempfile.mkdtemp(prefix="zkconsumer-nemesis-"))
    settings = NemesisSettings(duration=args.duration, max_actions=args.max_actions,
                               kinds=parse_kinds(args.actions))
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    rows: list[tuple[str, list[SeedResult], float]] = []
    judge: LabJudge | None = None
    try:
        for variant in [v.strip() for v in args.variants.split(",") if v.strip()]:
            reason = unavailable(variant)
            if reason:
                console.print(f"[yellow]skipped[/] {reason}", highlight=False)
                continue
            judge = LabJudge(variant) if judge is None else judge.with_variant(variant)
            started = time.monotonic()
            results = run_nemesis(seeds, settings, variant, out / variant, console, budget=args.shrink_budget,
                                  judge=judge, repeats=args.runs)
            rows.append((variant, results, time.monotonic() - started))
    finally:
        if judge is not None:
            judge.close()
    console.print(across(rows, settings, len(seeds), args.runs))
    if args.runs > 1 and rows:
        console.print(per_seed(rows, seeds))
    for variant, results, _ in rows:
        for r in results:
            if r.minimal:
                console.print(f"{variant} seed {r.seed}: {r.minimal}\n  {r.replay}", highlight=False, markup=False)
    console.print(f"runs under {out}", highlight=False)
    if args.record:
        write_record(args.record, vars(args),
                     {"rows": record_rows(rows, args.runs)}, Scope.LAB)


def _key(inv: Invariant) -> str:
    return inv.value.replace("-", "_")


def record_rows(rows: list[tuple[str, list[SeedResult], float]], runs: int) -> list[dict]:
    """The tables' figures for the result record: :func:`across`'s row per variant, with :func:`per_seed`'s rates
    and the minimal reproducers."""
    out = []
    for variant, results, seconds in rows:
        walls = [t for r in results for t in r.run_seconds] if runs > 1 else [r.seconds for r in results
                                                                               if not r.error]
        pooled = BreachRate.pooled(r.rate for r in results) if results else None
        out.append({
            "variant": variant, "seeds": len(results), "breaching_seeds": sum(1 for r in results if r.broken),
            "breaking_runs": pooled.k if pooled else 0, "judged_runs": pooled.n if pooled else 0,
            "failed_runs": pooled.failed if pooled else 0,
            "seeds_by_invariant": {_key(inv): sum(1 for r in results if inv in r.broken) for inv in Invariant},
            "runs_by_invariant": {_key(inv): {"broken": rate.broken, "judged": rate.judged}
                                  for inv, rate in (pooled.invariants if pooled else {}).items()},
            "failed_to_run_seeds": sum(1 for r in results if r.error),
            "run_wall_p50_s": statistics.median(walls) if walls else None,
            "shrink_wall_total_s": sum(r.shrink_seconds for r in results), "total_s": seconds,
            "per_seed": [{"seed": r.seed, "breaking_runs": r.rate.k, "judged_runs": r.rate.n,
                          "broken": sorted(_key(inv) for inv in r.broken), "rate": r.rate.text} for r in results],
            "reproducers": [{"seed": r.seed, "minimal": str(r.minimal), "replay": r.replay}
                            for r in results if r.minimal]})
    return out


def across(rows: list[tuple[str, list[SeedResult], float]], settings: NemesisSettings, seeds: int,
           runs: int = 1) -> Table:
    """One row per variant: seeds run, seeds that breached, per invariant the seeds that broke it. With several
    runs a seed, the variant's total over all its runs ("breaks in k of N runs") and, per invariant, the runs
    that broke it after the seeds."""
    table = Table(title=f"nemesis: {seeds} seeds per variant" + (f", {runs} runs each" if runs > 1 else "")
                        + f", up to {settings.max_actions} actions of {','.join(settings.kinds)}, "
                          f"{settings.duration:g} s runs",
                  caption="per invariant: seeds that broke it (runs that broke it, of those judged)" if runs > 1
                  else None)
    table.add_column("variant")
    table.add_column("runs", justify="right")
    table.add_column("breaches", justify="right")
    if runs > 1:
        table.add_column("every run", justify="left")
    for inv in Invariant:
        table.add_column(inv.value, justify="right")
    table.add_column("failed to run", justify="right")
    table.add_column("run wall p50 (s)", justify="right")
    table.add_column("shrink wall total (s)", justify="right")
    table.add_column("total (s)", justify="right")
    for variant, results, seconds in rows:
        walls = [t for r in results for t in r.run_seconds] if runs > 1 else [r.seconds for r in results
                                                                               if not r.error]
        pooled = BreachRate.pooled(r.rate for r in results) if results else None
        by_inv = pooled.invariants if pooled else {}
        table.add_row(variant, str(len(results)), str(sum(1 for r in results if r.broken)),
                      *((pooled.headline if pooled else "-",) if runs > 1 else ()),
                      *(str(sum(1 for r in results if inv in r.broken))
                        + (f" ({by_inv[inv].broken} of {by_inv[inv].judged})" if runs > 1 and inv in by_inv else "")
                        for inv in Invariant),
                      str(sum(1 for r in results if r.error)) if runs == 1 else
                      f"{sum(1 for r in results if r.error)} ({pooled.failed if pooled else 0} runs)",
                      f"{statistics.median(walls):.0f}" if walls else "-",
                      f"{sum(r.shrink_seconds for r in results):.0f}", f"{seconds:.0f}")
    return table


def per_seed(rows: list[tuple[str, list[SeedResult], float]], seeds: list[int]) -> Table:
    """Each seed's k/N on every variant, side by side (the same schedule in a row), with the invariants broken."""
    table = Table(title="nemesis: breaks in k of N runs, seed by seed")
    table.add_column("seed", justify="right")
    for variant, _, _ in rows:
        table.add_column(variant)
    by = {(variant, r.seed): r for variant, results, _ in rows for r in results}
    for seed in seeds:
        cells = []
        for variant, _, _ in rows:
            r = by.get((variant, seed))
            cells.append("-" if r is None else r.rate.text)
        table.add_row(str(seed), *cells)
    return table


if __name__ == "__main__":
    main()
