"""ZooKeeper mode (default and kafka-0.8 profiles) against coordinator mode: the same workload and churn, in one run.

Each variant is a full lab run (zkconsumer.lab.compare): its own ZooKeeper, broker and consumer processes, a join,
a graceful stop, a kill -9 and a join at the same moments, analysed on Spark. Printed: the comparison table and,
for every measure, each variant's ratio to the ZooKeeper default profile (the baseline of this run).
Run: .venv/bin/python benchmarks/compare.py [--consumers 3] [--duration 30] [--no-analyze]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from rich.table import Table

from zkconsumer.consoles import make_console
from zkconsumer.lab.compare import MEASURES, VARIANTS, run_compare
from zkconsumer.lab.runner import LabPlan

BASELINE = "zookeeper-default"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--consumers", type=int, default=3)
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--no-analyze", action="store_true")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    console = make_console()
    out = args.out or Path(tempfile.mkdtemp(prefix="zkconsumer-compare-"))
    plan = LabPlan(consumers=args.consumers, duration=args.duration, rate=args.rate)
    results = run_compare(plan, out, list(VARIANTS), console, analyze=not args.no_analyze)
    base = next(r for r in results if r.name == BASELINE)
    table = Table(title=f"ratio to {BASELINE} (same run)")
    table.add_column("measure")
    for r in results:
        if r is not base:
            table.add_column(r.name, justify="right")
    for key, label in MEASURES:
        b = base.measures.get(key)
        if not isinstance(b, (int, float)) or isinstance(b, bool):
            continue
        cells = []
        for r in results:
            if r is base:
                continue
            v = r.measures.get(key)
            cells.append("-" if v is None else ("n/a (baseline 0)" if b == 0 else f"{v / b:.2f}x"))
        table.add_row(label, *cells)
    console.print(table)
    console.print(f"runs, reports, compare.csv and compare.png under {out}")


if __name__ == "__main__":
    main()
