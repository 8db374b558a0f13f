"""``zkconsumer sweep --out DIR``: every strategy over a grid of group shapes and membership changes, on Spark."""

from __future__ import annotations

import argparse

from zkconsumer.assignment.assignors import STRATEGIES
from zkconsumer.cli.analyze import add_spark_args, start_spark
from zkconsumer.cli.output import CliError, console


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep", help="compare assignment strategies over many group shapes and membership changes (Spark)",
        description="Builds scenarios (consumers, streams, topics, partitions, subscription pattern, then "
                    "join/leave/crash changes) deterministically from --seed, runs the project's assignors "
                    "inside Spark tasks and writes balance and moved-partition tables, plots and a report.")
    p.add_argument("--out", required=True, metavar="DIR")
    add_spark_args(p)
    p.add_argument("--quick", action="store_true", help="a small grid (48 shapes, 2 scenarios each)")
    p.add_argument("--seed", type=int, default=1, help="scenario seed (default 1)")
    p.add_argument("--repeats", type=int, default=None, metavar="R",
                   help="scenarios per group shape (default 4, 2 with --quick)")
    p.add_argument("--scenarios", type=int, default=None, metavar="N",
                   help="total scenarios, cycling over the shapes (overrides --repeats)")
    p.add_argument("--changes", type=int, default=3, metavar="K", help="membership changes per scenario")
    p.add_argument("--strategy", action="append", choices=[*sorted(STRATEGIES), "sticky"], dest="strategies",
                   help="repeat to choose (default: all four: range, roundrobin, roundrobin-relaxed, sticky)")
    p.add_argument("--no-csv", action="store_true", help="write Parquet only")
    p.add_argument("--no-results-csv", action="store_true",
                   help="skip the CSV of the per-step results (large sweeps); summaries still get CSV")
    p.set_defaults(func=cmd_sweep)


def cmd_sweep(args: argparse.Namespace) -> int:
    from zkconsumer.analysis.sweep import GRID_FULL, GRID_QUICK, SweepConfig
    from zkconsumer.analysis.sweep_pipeline import run_sweep

    if args.changes < 0 or (args.scenarios is not None and args.scenarios < 1) or (
            args.repeats is not None and args.repeats < 1):
        raise CliError("--changes must be >= 0, --scenarios and --repeats >= 1", code=2)
    cfg = SweepConfig(GRID_QUICK if args.quick else GRID_FULL, seed=args.seed, changes=args.changes,
                      strategies=tuple(dict.fromkeys(args.strategies or (*STRATEGIES, "sticky"))))
    n = args.scenarios or len(cfg.cells) * (args.repeats or (2 if args.quick else 4))
    owns, spark = start_spark(args, "zkconsumer-sweep")
    try:
        res = run_sweep(spark, cfg, n, args.out, console, csv=not args.no_csv,
                        results_csv=not args.no_results_csv)
    finally:
        if owns:
            spark.stop()
    console.print(f"report: {res.report_md}  {res.report_html}  ({res.seconds:.1f} s, "
                  f"{n / max(res.compute_seconds, 1e-9):,.0f} scenarios/s)", highlight=False)
    return 0
