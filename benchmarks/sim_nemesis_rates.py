"""The nemesis's schedules in simulation, each as a rate: every seed's schedule over many interleavings, per profile.

``benchmarks/nemesis.py`` runs each seed's drawn schedule once on the real lab, and ``zkconsumer sim --seeds N``
runs each seed once in simulation (the seed draws both the schedule and the interleaving). One run a seed is a coin
toss where a mechanism fires at a rate (a short pause that expires a session only in some phases of the pings), so
this benchmark fixes each seed's schedule (a scenario file, as ``zkconsumer lab --nemesis`` prints it) and runs it
over ``--interleavings`` seeds on Spark: "breaks in k of N" per nemesis seed and profile, with the invariants
broken. The real runs to set beside it: ``benchmarks/nemesis.py --first-seed S --seeds 1 --runs N``; the comparison
is in docs/simulation.md ("The nemesis's 30 schedules").

Run: flock /tmp/zkc-bench.lock .venv/bin/python benchmarks/sim_nemesis_rates.py [--seeds 30] [--first-seed 0]
     [--interleavings 20] [--duration 26] [--master local[2]] [--json FILE] [--record FILE]
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

from records import write_record
from rich.progress import Progress
from rich.table import Table

from zkconsumer.analysis.spark import build_session
from zkconsumer.consoles import make_console
from zkconsumer.results.record import Scope
from zkconsumer.scenario import nemesis, writer
from zkconsumer.sim.many import SimSummary, run_spark
from zkconsumer.sim.runs import SimJob, SourceKind

PROFILES = ("kafka-0.8", "default")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=30, help="nemesis seeds (default 30: benchmarks/nemesis.py's)")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--interleavings", type=int, default=20, help="simulated runs of each schedule (default 20)")
    ap.add_argument("--duration", type=float, default=26.0, help="as benchmarks/nemesis.py ran them (default 26)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--json", type=Path, help="write every figure there")
    ap.add_argument("--record", type=Path, metavar="FILE", help="write the result record (results/README.md) there")
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    console = make_console()
    settings = nemesis.NemesisSettings(duration=args.duration)
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    spark = build_session(args.master, "zkconsumer-sim-nemesis-rates")
    rows: dict[str, dict[int, dict]] = {p: {} for p in PROFILES}
    started = time.perf_counter()
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task("schedules", total=len(PROFILES) * len(seeds))
        for profile in PROFILES:
            for seed in seeds:
                text = writer.dumps(nemesis.draw(seed, settings))
                job = SimJob(profile, SourceKind.SCENARIO, scenario_text=text, scenario_source=f"nemesis-{seed}")
                summary = SimSummary(job, run_spark(spark, job, list(range(args.interleavings))), 0.0)
                rows[profile][seed] = {"breaking": len(summary.breaching),
                                       "per_invariant": {i.value: n for i, n in summary.breaches().items() if n}}
                bar.advance(task)
    wall = time.perf_counter() - started
    spark.stop()
    n = args.interleavings
    table = Table(title=f"nemesis schedules in simulation: breaking interleavings of {n}, per seed "
                        f"({wall:.0f} s wall)")
    table.add_column("seed", justify="right")
    for profile in PROFILES:
        table.add_column(profile)
    for seed in seeds:
        cells = []
        for profile in PROFILES:
            row = rows[profile][seed]
            broken = ", ".join(f"{i} {k}" for i, k in sorted(row["per_invariant"].items(), key=lambda x: -x[1]))
            cells.append(f"{row['breaking']}/{n}" + (f": {broken}" if broken else ""))
        table.add_row(str(seed), *cells)
    console.print(table)
    totals = []
    for profile in PROFILES:
        k = sum(r["breaking"] for r in rows[profile].values())
        hit = [s for s, r in rows[profile].items() if r["breaking"]]
        console.print(f"{profile}: {k} of {n * len(seeds)} interleavings break; seeds breaking at least once: "
                      f"{', '.join(map(str, hit)) or 'none'}", highlight=False)
        totals.append({"profile": profile, "breaking_interleavings": k, "interleavings": n * len(seeds),
                       "seeds_breaking": hit})
    if args.record:
        write_record(args.record, vars(args),
                     {"interleavings_per_seed": n, "wall_s": wall, "totals": totals,
                      "rows": [{"profile": p, "seed": s, "breaking_interleavings": r["breaking"],
                                "per_invariant": r["per_invariant"]} for p in PROFILES for s, r in rows[p].items()]},
                     Scope.SIM)
    if args.json:
        args.json.write_text(json.dumps({"interleavings": n, "duration": args.duration, "wall_seconds": round(wall, 1),
                                         "seeds": {p: {str(s): r for s, r in v.items()} for p, v in rows.items()}},
                                        indent=1))


if __name__ == "__main__":
    main()
