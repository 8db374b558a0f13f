"""Randomized fault schedules on every ZooKeeper variant: N seeds each, breaches and their minimal reproducers.

Each seed draws a schedule (zkconsumer.lab.nemesis: joins, stops, kill -9, restarts, bounces, pauses on both sides
of the session timeout), runs it as a lab, judges it with the analysis' five invariants on Spark (one session for
the whole benchmark), and shrinks a breach to a minimal scenario file (zkconsumer.lab.nemesis_run). The variants:
zkconsumer's default profile, its kafka-0.8 profile, and Apache Kafka 0.8.2.2's own consumer (skipped with one line
where its jars or a JDK are missing). The seeds are the same for every variant, so a row compares the variants on
the same schedule.

Printed: per variant, runs, breaches by invariant, wall time per seed (run and shrink apart), and each minimal
reproducer with the command that replays it; then one table across variants. ``nemesis.json`` per variant under
``--out``.
Run: .venv/bin/python benchmarks/nemesis.py [--seeds 30] [--first-seed 0] [--variants ...] [--max-actions 4]
[--shrink-budget 12] [--duration 30] [--out DIR]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from rich.table import Table

from zkconsumer.consoles import make_console
from zkconsumer.lab.nemesis import Invariant, NemesisSettings, parse_kinds
from zkconsumer.lab.nemesis_run import LabJudge, SeedResult, run_nemesis
from zkconsumer.lab.variants import unavailable

ZOOKEEPER_VARIANTS = ("zookeeper-default", "zookeeper-kafka-0.8", "kafka-0.8.2.2")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=30, help="seeds per variant (default 30)")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--variants", default=",".join(ZOOKEEPER_VARIANTS))
    ap.add_argument("--actions", default="join,stop,kill,restart,bounce,pause")
    ap.add_argument("--max-actions", type=int, default=4)
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--shrink-budget", type=int, default=12, help="reruns to shrink one breach (default 12)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
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
                                  judge=judge)
            rows.append((variant, results, time.monotonic() - started))
    finally:
        if judge is not None:
            judge.close()
    console.print(across(rows, settings, len(seeds)))
    for variant, results, _ in rows:
        for r in results:
            if r.minimal:
                console.print(f"{variant} seed {r.seed}: {r.minimal}\n  {r.replay}", highlight=False, markup=False)
    console.print(f"runs under {out}", highlight=False)


def across(rows: list[tuple[str, list[SeedResult], float]], settings: NemesisSettings, seeds: int) -> Table:
    table = Table(title=f"nemesis: {seeds} seeds per variant, up to {settings.max_actions} actions of "
                        f"{','.join(settings.kinds)}, {settings.duration:g} s runs")
    table.add_column("variant")
    table.add_column("runs", justify="right")
    table.add_column("breaches", justify="right")
    for inv in Invariant:
        table.add_column(inv.value, justify="right")
    table.add_column("failed to run", justify="right")
    table.add_column("run wall p50 (s)", justify="right")
    table.add_column("shrink wall total (s)", justify="right")
    table.add_column("total (s)", justify="right")
    for variant, results, seconds in rows:
        walls = [r.seconds for r in results if not r.error]
        table.add_row(variant, str(len(results)), str(sum(1 for r in results if r.breach)),
                      *(str(sum(1 for r in results if r.breach and inv in r.breach.invariants)) for inv in Invariant),
                      str(sum(1 for r in results if r.error)),
                      f"{statistics.median(walls):.0f}" if walls else "-",
                      f"{sum(r.shrink_seconds for r in results):.0f}", f"{seconds:.0f}")
    return table


if __name__ == "__main__":
    main()
