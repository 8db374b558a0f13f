"""The migration fault matrix as schedules, in both worlds: each cell's scenario on the simulator over many
interleavings, and on the real lab run after run, their rates side by side (issue 54 item 3).

The real matrix (``zkconsumer lab --mode migrate --faults``, docs/migration.md) strikes each fault once, on a
condition (c2 is switching, c1 is bridged); a schedule strikes it at a time, and the interleavings decide what is
under way then. Its six faults are schedules here, shipped as scenarios (zkconsumer/scenario/shipped/):

* ``migration-driver-kill`` (``migrate-kill``): the driver killed with SIGKILL mid-way, ``migrate`` run again;
* ``migration-member-kill`` (``member-kill-switching``): c2 killed mid-migration, restarted after it;
* ``migration-zk-expiry`` (``bridge-zk-expiry``): the first member moved loses its ZooKeeper session, bridged;
* ``migration-broker-restart`` (``broker-restart``): the broker killed mid-migration, restarted 3 s later;
* ``migration-rollback-mid`` (``rollback-mid``): ``migrate --rollback`` run while the migration runs;
* ``migration-stranger`` (``stranger-joins``): c4 started without ``--migratable`` mid-migration.

A run holds when every invariant holds (the lab's five, judged on Spark for real runs, by the simulator's checkers
for simulated ones: zombie deliveries and poll skips too) and the migration ended as asked (the lab's ``verify ok``:
its ownership verdict and ``done`` after every driver; the simulator's: never a mixed group, the verdict held).

Run: flock /tmp/zkc-bench.lock .venv/bin/python benchmarks/sim_migration_matrix.py [--seeds 40] [--real-runs 3]
     [--cells migration-driver-kill,...] [--record results/sim-migration-matrix.json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from records import write_record
from rich.table import Table

from zkconsumer.consoles import make_console
from zkconsumer.scenario.model import LabMode
from zkconsumer.sim.many import SimSummary, run_local
from zkconsumer.sim.runs import SimJob, SourceKind

#: scenario → the real matrix's fault it puts on a schedule
CELLS = {
    "migration-driver-kill": "migrate-kill",
    "migration-member-kill": "member-kill-switching",
    "migration-zk-expiry": "bridge-zk-expiry",
    "migration-broker-restart": "broker-restart",
    "migration-rollback-mid": "rollback-mid",
    "migration-stranger": "stranger-joins",
}
INVARIANT_LINE = re.compile(r"^- (?P<name>[^:]+): (?P<verdict>.*?)(?: \(\[|$)")


def simulated(scenario: str, seeds: int) -> dict:
    job = SimJob(kind=SourceKind.SCENARIO, scenario=scenario, mode=LabMode.MIGRATE)
    started = time.perf_counter()
    summary = SimSummary(job, run_local(job, list(range(seeds)), workers=os.cpu_count() or 1), 0.0)
    summary.wall_s = time.perf_counter() - started
    return {"k": len(summary.breaching), "n": summary.runs,
            "breaches": {i.value: n for i, n in summary.breaches().items() if n},
            "migrations": summary.migration_results(), "wall_s": round(summary.wall_s, 1),
            "schedules_per_minute": round(summary.schedules_per_minute, 1)}


def real_run(scenario: str, out: Path) -> dict:
    """One ``zkconsumer lab --mode migrate --scenario NAME --analyze``: its summary and the analysis's verdicts."""
    proc = subprocess.run([sys.executable, "-m", "zkconsumer", "lab", "--mode", "migrate", "--scenario", scenario,
                           "--analyze", "--out", str(out)], capture_output=True, text=True)
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    report = out / "report" / "report.md"
    broken = []
    if report.exists():
        text = report.read_text().split("## Invariants", 1)[-1].split("\n## ", 1)[0]
        for line in text.splitlines():
            m = INVARIANT_LINE.match(line.strip())
            if m and "holds" not in m["verdict"]:
                broken.append(m["name"])
    ok = proc.returncode == 0 and bool(summary.get("verify_ok")) and report.exists() and not broken
    return {"ok": ok, "exit": proc.returncode, "migration": summary.get("migration"),
            "verify_ok": summary.get("verify_ok"), "broken": broken, "lost": summary.get("lost"),
            "duplicates": summary.get("duplicates")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--real-runs", type=int, default=0)
    ap.add_argument("--cells", help="comma-separated scenario names (default: all four)")
    ap.add_argument("--record", type=Path, help="write the result record (results/README.md) there")
    args = ap.parse_args()
    logging.disable(logging.ERROR)
    console = make_console()
    cells = args.cells.split(",") if args.cells else list(CELLS)
    rows = []
    for scenario in cells:
        row = {"scenario": scenario, "fault": CELLS.get(scenario, ""), "simulated": simulated(scenario, args.seeds)}
        sim = row["simulated"]
        if sim["n"]:
            console.print(f"{scenario}: simulated breaks in {sim['k']} of {sim['n']} {sim['breaches'] or ''} "
                          f"{sim['migrations']} ({sim['wall_s']:.0f} s)", highlight=False)
        else:
            console.print(f"{scenario}: not simulated (--seeds 0)", highlight=False)
        runs = []
        with tempfile.TemporaryDirectory(prefix="zkc-matrix-") as tmp:
            for i in range(args.real_runs):
                runs.append(real_run(scenario, Path(tmp) / f"run-{i}"))
                console.print(f"  real run {i + 1}: {'holds' if runs[-1]['ok'] else 'breaks'} {runs[-1]}",
                              highlight=False)
        row["real"] = {"k": sum(not r["ok"] for r in runs), "n": len(runs), "runs": runs}
        rows.append(row)
    table = Table(title=f"the migration fault matrix as schedules: {args.seeds} interleavings, "
                        f"{args.real_runs} real runs a cell")
    for col in ("scenario", "fault (docs/migration.md)", "simulated", "real", "migrations (simulated)"):
        table.add_column(col)
    for row in rows:
        sim, real = row["simulated"], row["real"]
        simulated_text = (_rate(sim) + "".join(f"; {k} {v}" for k, v in sorted(sim["breaches"].items()))
                          if sim["n"] else "not run")
        table.add_row(row["scenario"], row["fault"], simulated_text,
                      _rate(real) if real["n"] else "not run",
                      ", ".join(f"{k} {v}" for k, v in sorted(sim["migrations"].items())))
    console.print(table)
    if args.record:
        write_record(args.record, {"seeds": args.seeds, "real_runs": args.real_runs, "cells": cells}, {"cells": rows})


def _rate(c: dict) -> str:
    return f"breaks in {c['k']} of {c['n']}" if c["k"] else f"holds in {c['n']} of {c['n']}"


if __name__ == "__main__":
    main()
