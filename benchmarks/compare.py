"""Every generation of the rebalance protocol side by side: the same workload, in one run.

Each variant is a full lab run (zkconsumer.lab.compare):
- the ZooKeeper group (both profiles);
- the classic coordinator, eager, on zkconsumer's broker and on Kafka 3.9.1's;
- cooperative-sticky;
- static members;
- the consumer protocol of KIP-848 on Kafka 4.1.1.

Each run has its own servers and consumer processes and is analysed on Spark. Printed: the comparison table and,
for every measure, each variant's ratio to the ZooKeeper default profile (the baseline of this run). A variant
this machine cannot run (no Kafka jars and no Maven, no confluent-kafka) is skipped with one line.
Run: .venv/bin/python benchmarks/compare.py [--variants all] [--workload churn|rolling-restart|scale-out]
[--consumers 3] [--duration 30] [--no-analyze] [--record FILE]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from records import write_record
from rich.table import Table

from zkconsumer.consoles import make_console
from zkconsumer.lab.compare import MEASURES, run_compare
from zkconsumer.results.record import Scope
from zkconsumer.scenario.plan import WORKLOADS, RunPlan

BASELINE = "zookeeper-default"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--consumers", type=int, default=3)
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--no-analyze", action="store_true")
    ap.add_argument("--variants", default="all", help="comma-separated variant names, or all")
    ap.add_argument("--workload", choices=WORKLOADS, default="churn")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--record", type=Path, metavar="FILE", help="write the result record (results/README.md) there")
    args = ap.parse_args()
    console = make_console()
    out = args.out or Path(tempfile.mkdtemp(prefix="zkconsumer-compare-"))
    plan = RunPlan(consumers=args.consumers, duration=args.duration, rate=args.rate, workload=args.workload)
    names = ["all"] if args.variants == "all" else [v.strip() for v in args.variants.split(",") if v.strip()]
    if BASELINE not in names and names != ["all"]:
        names.insert(0, BASELINE)  # the ratios need their baseline in the same run
    results = run_compare(plan, out, names, console, analyze=not args.no_analyze)
    base = next(r for r in results if r.name == BASELINE)
    table = Table(title=f"ratio to {BASELINE} (same run)")
    table.add_column("measure")
    for r in results:
        if r is not base:
            table.add_column(r.name, justify="right")
    ratios: dict[str, dict[str, float | None]] = {r.name: {} for r in results if r is not base}
    for key, label in MEASURES:
        b = base.measures.get(key)
        if not isinstance(b, (int, float)) or isinstance(b, bool):
            continue
        cells = []
        for r in results:
            if r is base:
                continue
            v = r.measures.get(key)
            if key in r.not_applicable:  # the measure means nothing for this variant (footnoted in the table)
                cells.append("n/a")
            else:
                cells.append("-" if v is None else ("n/a (baseline 0)" if b == 0 else f"{v / b:.2f}x"))
            ratios[r.name][key] = v / b if v is not None and b != 0 and key not in r.not_applicable else None
        table.add_row(label, *cells)
    console.print(table)
    if args.record:
        rows = [{"variant": r.name, **{key: r.measures.get(key) for key, _ in MEASURES},
                 "not_applicable": sorted(m.value for m in r.not_applicable),
                 "invariants": None if r.invariants is None else {i.value.replace("-", "_"): n
                                                                  for i, n in r.invariants.items()},
                 "ratio_to_baseline": ratios.get(r.name)} for r in results]
        write_record(args.record, vars(args),
                     {"baseline": BASELINE, "workload": args.workload, "rows": rows}, Scope.LAB)
    console.print(f"runs, reports, compare.csv and compare.png under {out}")


if __name__ == "__main__":
    main()
