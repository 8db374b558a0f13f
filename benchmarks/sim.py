"""The simulator's speed: nemesis schedules a minute, in one process and on Spark, against the real lab's.

Each seed draws a nemesis schedule (3 members, 2 topics, ``--duration`` simulated seconds, 4 s sessions) and runs
it on the simulator with its checkers (zkconsumer/sim/). The baseline, measured in the same run: the same kind of
schedule run for real by ``benchmarks/nemesis.py``'s machinery (a lab of real processes, judged on Spark), for
``--real-seeds`` seeds. Printed: schedules a minute each way, the ratios, each profile's breach rate.
Run: .venv/bin/python benchmarks/sim.py [--seeds 200] [--duration 60] [--real-seeds 1] [--master local[*]]
     [--variants default,kafka-0.8,coordinator,cooperative-sticky,static] [--record FILE]
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path

from records import write_record
from rich.table import Table

from zkconsumer.analysis.spark import build_session
from zkconsumer.cli.sim import variant_settings
from zkconsumer.config import PROFILES
from zkconsumer.consoles import make_console
from zkconsumer.lab.nemesis_run import LabJudge, run_nemesis
from zkconsumer.results.record import Scope
from zkconsumer.scenario.nemesis import NemesisSettings
from zkconsumer.sim.many import SimSummary, run_local, run_spark
from zkconsumer.sim.runs import SimJob, SourceKind


def real_schedules_per_minute(seeds: int, settings: NemesisSettings, console) -> float:  # noqa: ANN001
    out = Path(tempfile.mkdtemp(prefix="zkconsumer-sim-baseline-"))
    judge = LabJudge("zookeeper-default")
    try:
        started = time.perf_counter()
        run_nemesis(list(range(seeds)), settings, "zookeeper-default", out, console, budget=0, judge=judge)
        return 60.0 * seeds / (time.perf_counter() - started)
    finally:
        judge.close()


def _job(name: str, settings: NemesisSettings) -> SimJob:
    """A profile's job, or a variant's as ``zkconsumer sim --variant`` builds it."""
    if name in PROFILES:
        return SimJob(name, SourceKind.NEMESIS, nemesis=settings)
    variant = variant_settings(name)
    return SimJob(variant.pop("profile"), SourceKind.NEMESIS, nemesis=settings, **variant)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--duration", type=float, default=60.0, help="simulated seconds per schedule (default 60)")
    ap.add_argument("--real-seeds", type=int, default=1, help="real lab runs for the baseline (0: none)")
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--variants", default="default,kafka-0.8",
                    help="profiles (default, kafka-0.8) or zkconsumer sim's variants (coordinator, cooperative-sticky, "
                         "static), comma-separated (default: the two profiles)")
    ap.add_argument("--record", type=Path, metavar="FILE", help="write the result record (results/README.md) there")
    args = ap.parse_args()
    console = make_console()
    logging.disable(logging.WARNING)
    settings = NemesisSettings(duration=args.duration)
    seeds = list(range(args.seeds))
    rows = []
    spark = build_session(args.master, "zkconsumer-sim-benchmark")
    try:
        for profile in [v.strip() for v in args.variants.split(",") if v.strip()]:
            job = _job(profile, settings)
            started = time.perf_counter()
            local = SimSummary(job, run_local(job, seeds[: max(1, len(seeds) // 4)]), 0.0)
            local.wall_s = time.perf_counter() - started
            started = time.perf_counter()
            on_spark = SimSummary(job, run_spark(spark, job, seeds), 0.0)
            on_spark.wall_s = time.perf_counter() - started
            rows.append((profile, local, on_spark))
    finally:
        spark.stop()
    real = real_schedules_per_minute(args.real_seeds, NemesisSettings(duration=26.0), console) \
        if args.real_seeds else None
    table = Table(title=f"simulated nemesis schedules ({args.duration:g} s each, 3 members, 2 topics)")
    for col in ("profile", "verdict (Spark run)", "one process /min", f"Spark {args.master} /min",
                "× real lab" if real else "real lab: not measured"):
        table.add_column(col)
    for profile, local, on_spark in rows:
        ratio = f"{on_spark.schedules_per_minute / real:,.0f}×" if real else "–"
        table.add_row(profile, on_spark.rate_text(), f"{local.schedules_per_minute:,.0f}",
                      f"{on_spark.schedules_per_minute:,.0f}", ratio)
    console.print(table)
    if real:
        console.print(f"baseline: {real:.2f} real schedules a minute (26 s runs, judged on Spark), this run",
                      highlight=False)
    if args.record:
        figures = {"rows": [{"variant": profile, "runs": on_spark.runs, "breaking_runs": len(on_spark.breaching),
                             "verdict": on_spark.rate_text(),
                             "breaches": {str(i.value): n for i, n in on_spark.breaches().items()},
                             "local_runs": local.runs, "local_wall_s": local.wall_s,
                             "local_schedules_per_minute": local.schedules_per_minute,
                             "spark_wall_s": on_spark.wall_s,
                             "spark_schedules_per_minute": on_spark.schedules_per_minute,
                             "spark_to_real_lab": on_spark.schedules_per_minute / real if real else None}
                            for profile, local, on_spark in rows],
                   "real_seeds": args.real_seeds, "real_schedules_per_minute": real}
        write_record(args.record, vars(args), figures,
                     Scope.SIM_AND_LAB if real else Scope.SIM)


if __name__ == "__main__":
    main()
