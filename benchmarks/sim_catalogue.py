"""The failure catalogue in simulation: each mode's scenario over many interleavings, per profile, as rates.

For every mode of docs/failure-modes.md whose scenario the simulator can express (zkconsumer/sim/world.py
``unsupported`` says which cannot, and why), ``--seeds`` seeds of the scenario per profile on Spark: one plan, each
seed its own interleaving (packet jitter, start skew, the order of simultaneous events), judged by the simulator's
checkers after every step. Printed: each cell's rate ("breaks in k of N") with the invariants broken and in how many
seeds, and the wall time; the real catalogue's verdicts to set beside it are in docs/failure-modes.md
(``zkconsumer catalogue --runs N``), the comparison in docs/simulation.md.

Run: flock /tmp/zkc-bench.lock .venv/bin/python benchmarks/sim_catalogue.py [--seeds 200] [--master local[2]]
     [--modes a,b,...] [--zk-service none|lab] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

from rich.table import Table

from zkconsumer.analysis.spark import build_session
from zkconsumer.consoles import make_console
from zkconsumer.lab.catalogue import MODES
from zkconsumer.scenario import reader as scenarios
from zkconsumer.scenario.plan import RunPlan
from zkconsumer.sim.many import SimSummary, run_spark
from zkconsumer.sim.runs import SimJob, SourceKind
from zkconsumer.sim.world import unsupported
from zkconsumer.sim.zk_service import ServiceModel

PROFILES = ("default", "kafka-0.8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--modes", help="comma-separated mode keys (default: every mode it can express)")
    ap.add_argument("--zk-service", choices=[m.value for m in ServiceModel], default=ServiceModel.NONE.value)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    logging.disable(logging.ERROR)
    console = make_console()
    wanted = set(args.modes.split(",")) if args.modes else None
    cells = []
    seen: set[str] = set()
    for mode in MODES:
        if mode.scenario is None or mode.scenario in seen or (wanted and mode.key not in wanted):
            continue
        seen.add(mode.scenario)
        why = unsupported(RunPlan.from_scenario(scenarios.builtin(mode.scenario)))
        if why:
            cells.append({"mode": mode.key, "scenario": mode.scenario, "refused": "; ".join(why)})
            continue
        cells.append({"mode": mode.key, "scenario": mode.scenario})
    spark = build_session(args.master, "zkconsumer-sim-catalogue")
    seeds = list(range(args.seeds))
    started_all = time.perf_counter()
    try:
        for cell in cells:
            if "refused" in cell:
                continue
            for profile in PROFILES:
                job = SimJob(profile, SourceKind.SCENARIO, scenario=cell["scenario"],
                             service=ServiceModel(args.zk_service))
                started = time.perf_counter()
                summary = SimSummary(job, run_spark(spark, job, seeds), 0.0)
                summary.wall_s = time.perf_counter() - started
                breaches = {i.value: n for i, n in summary.breaches().items() if n}
                cell[profile] = {"k": len(summary.breaching), "n": summary.runs, "breaches": breaches,
                                 "wall_s": round(summary.wall_s, 1)}
                console.print(f"{cell['mode']} {cell['scenario']} {profile}: {summary.rate_text()} "
                              f"{breaches or ''} ({summary.wall_s:.0f} s)", highlight=False)
    finally:
        spark.stop()
    table = Table(title=f"the catalogue in simulation: {args.seeds} interleavings a cell "
                        f"(zk service: {args.zk_service}; {time.perf_counter() - started_all:.0f} s in all)")
    for col in ("mode", "scenario", *PROFILES):
        table.add_column(col)
    for cell in cells:
        if "refused" in cell:
            table.add_row(cell["mode"], cell["scenario"], "refused", "refused")
            continue
        table.add_row(cell["mode"], cell["scenario"], *(_text(cell[p]) for p in PROFILES))
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps(cells, indent=2))


def _text(c: dict) -> str:
    head = f"breaks {c['k']}/{c['n']}" if c["k"] else f"holds {c['n']}/{c['n']}"
    return head + ("".join(f"; {k} {v}" for k, v in sorted(c["breaches"].items())) if c["breaches"] else "")


if __name__ == "__main__":
    main()
