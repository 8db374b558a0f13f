"""The failure catalogue in simulation: each mode's scenario over many interleavings, per profile, as rates.

For every mode of docs/failure-modes.md whose scenario the simulator can express (zkconsumer/sim/world.py
``unsupported`` says which cannot, and why), ``--seeds`` seeds of the scenario per profile on Spark: one plan, each
seed its own interleaving (packet jitter, start skew, the order of simultaneous events), judged by the simulator's
checkers after every step. Printed: each cell's rate ("breaks in k of N") with the invariants broken and in how many
seeds, and the wall time; the real catalogue's verdicts to set beside it are in docs/failure-modes.md
(``zkconsumer catalogue --runs N``), the comparison in docs/simulation.md.

``--variants`` takes the two profiles (``default``, ``kafka-0.8``) and ``zkconsumer sim --variant``'s names: the
coordinator variants (``coordinator``, ``cooperative-sticky``, ``static``) run the project's coordinator-mode members
on kafka-python against the project's broker, each skipping the actions it has no counterpart for, as the lab does.

Run: flock /tmp/zkc-bench.lock .venv/bin/python benchmarks/sim_catalogue.py [--seeds 200] [--master local[2]]
     [--modes a,b,...] [--variants default,kafka-0.8] [--zk-service none|lab] [--json FILE] [--record FILE]
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

from records import write_record
from rich.table import Table

from zkconsumer.analysis.spark import build_session
from zkconsumer.cli.sim import variant_settings
from zkconsumer.consoles import make_console
from zkconsumer.lab.catalogue import MODES, not_applicable
from zkconsumer.lab.variants import VARIANTS
from zkconsumer.results.record import Scope
from zkconsumer.sim.many import SimSummary, run_spark
from zkconsumer.sim.runs import SimJob, SourceKind
from zkconsumer.sim.world import unsupported
from zkconsumer.sim.zk_service import ServiceModel

PROFILES = ("default", "kafka-0.8")


def job_for(variant: str, scenario: str, service: ServiceModel) -> SimJob:
    """A profile's job, or a ``zkconsumer sim --variant`` one."""
    if variant in PROFILES:
        return SimJob(variant, SourceKind.SCENARIO, scenario=scenario, service=service)
    settings = variant_settings(variant)
    profile = settings.pop("profile") or "default"
    return SimJob(profile, SourceKind.SCENARIO, scenario=scenario, service=service, **settings)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--modes", help="comma-separated mode keys (default: every mode it can express)")
    ap.add_argument("--zk-service", choices=[m.value for m in ServiceModel], default=ServiceModel.NONE.value)
    ap.add_argument("--variants", default=",".join(PROFILES),
                    help="profiles and sim variants, comma-separated (default: the two profiles)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--record", type=Path, help="write the result record (results/README.md) there")
    args = ap.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    logging.disable(logging.ERROR)
    console = make_console()
    wanted = set(args.modes.split(",")) if args.modes else None
    cells = []
    seen: set[str] = set()
    for mode in MODES:
        if mode.scenario is None or mode.scenario in seen or (wanted and mode.key not in wanted):
            continue
        seen.add(mode.scenario)
        cell = {"mode": mode.key, "scenario": mode.scenario}
        for variant in variants:
            job = job_for(variant, mode.scenario, ServiceModel(args.zk_service))
            na = not_applicable(job.scenario_for(0), variant) if variant in VARIANTS else None
            why = unsupported(job.plan(job.scenario_for(0)))
            if na:  # as the real catalogue: every fault of the mode has no counterpart in the variant
                cell[variant] = {"n/a": na}
            elif why:
                cell[variant] = {"refused": "; ".join(why)}
        cells.append(cell)
    spark = build_session(args.master, "zkconsumer-sim-catalogue")
    seeds = list(range(args.seeds))
    started_all = time.perf_counter()
    try:
        for cell in cells:
            for profile in variants:
                if profile in cell:  # n/a, or refused
                    continue
                job = job_for(profile, cell["scenario"], ServiceModel(args.zk_service))
                started = time.perf_counter()
                summary = SimSummary(job, run_spark(spark, job, seeds), 0.0)
                summary.wall_s = time.perf_counter() - started
                breaches = {i.value: n for i, n in summary.breaches().items() if n}
                cell[profile] = {"k": len(summary.breaching), "n": summary.runs, "breaches": breaches,
                                 "wall_s": round(summary.wall_s, 1),
                                 "schedules_per_minute": round(summary.schedules_per_minute, 1)}
                console.print(f"{cell['mode']} {cell['scenario']} {profile}: {summary.rate_text()} "
                              f"{breaches or ''} ({summary.wall_s:.0f} s)", highlight=False)
    finally:
        spark.stop()
    table = Table(title=f"the catalogue in simulation: {args.seeds} interleavings a cell "
                        f"(zk service: {args.zk_service}; {time.perf_counter() - started_all:.0f} s in all)")
    for col in ("mode", "scenario", *variants):
        table.add_column(col)
    for cell in cells:
        table.add_row(cell["mode"], cell["scenario"], *(_text(cell[p]) for p in variants))
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps(cells, indent=2))
    if args.record:
        write_record(args.record, {"seeds": args.seeds, "variants": variants, "modes": args.modes or "all",
                                   "zk_service": args.zk_service, "master": args.master}, {"cells": cells},
                     Scope.SIM)


def _text(c: dict) -> str:
    if "refused" in c:
        return "refused: " + c["refused"]
    if "n/a" in c:
        return "n/a: " + c["n/a"]
    head = f"breaks {c['k']}/{c['n']}" if c["k"] else f"holds {c['n']}/{c['n']}"
    return head + ("".join(f"; {k} {v}" for k, v in sorted(c["breaches"].items())) if c["breaches"] else "")


if __name__ == "__main__":
    main()
