"""``zkconsumer analyze TRACE_DIR --out REPORT_DIR``: what happened across a whole group, on Spark."""

from __future__ import annotations

import argparse
import importlib
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from zkconsumer.cli.output import CliError, console

if TYPE_CHECKING:
    from zkconsumer.analysis.jvm import JvmPlan


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "analyze", help="analyse a directory of run traces with Spark: rebalances, duplicates, loss, overlap",
        description="Reads <consumer>.jsonl traces (docs/trace.md) with Spark and writes tables (Parquet + "
                    "CSV), PNG plots and report.md / report.html to --out. Local by default; "
                    "--master spark://host:7077 runs the same job on a cluster (docs/analysis.md).")
    p.add_argument("trace_dir", metavar="TRACE_DIR",
                   help="directory holding <consumer id>.jsonl files (or the --out of zkconsumer sim --grid or "
                        "--herd: its Parquet rows are reported again)")
    p.add_argument("--out", required=True, metavar="REPORT_DIR", help="where tables, plots and the report go")
    add_spark_args(p)
    p.add_argument("--from-zero", action="store_true",
                   help="expect every partition from offset 0 (default: from its first delivered offset)")
    p.add_argument("--max-plot-partitions", type=int, default=48, metavar="N",
                   help="partitions shown in the ownership chart (default 48)")
    p.add_argument("--no-csv", action="store_true", help="write Parquet only")
    p.set_defaults(func=cmd_analyze)


def add_spark_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--master", default=None,
                   help="Spark master: local[*] (default; spark-submit's own --master when run by it), "
                        "local[N], spark://host:7077, yarn, k8s://…")
    p.add_argument("--driver-memory", default="2g", help="driver memory for local runs (default 2g)")
    p.add_argument("--shuffle-partitions", type=int, default=None, metavar="N",
                   help="spark.sql.shuffle.partitions (default: 2 x local cores, 64 on a cluster)")


def start_spark(args: argparse.Namespace, app: str, java_options: str | None = None):
    """(whether we own it, session). A session already running in this process (tests, notebooks) is
    reused and left running; ``java_options`` only reach a JVM started here."""
    from pyspark.sql import SparkSession

    from zkconsumer.analysis.spark import build_session

    owns = SparkSession.getActiveSession() is None
    with console.status("[bold]starting Spark[/] " + (args.master or "")):
        return owns, build_session(args.master, app, args.shuffle_partitions, args.driver_memory,
                                   java_options=java_options if owns else None)


def one_shot_jvm(args: argparse.Namespace) -> JvmPlan | None:
    """The one-shot JVM options (``analysis/jvm.py``) when this command will start a local JVM for a small
    trace on a local disk; None otherwise (a running session, a cluster, spark-submit, a large trace)."""
    from pyspark.sql import SparkSession

    from zkconsumer.analysis.jvm import plan_one_shot
    from zkconsumer.analysis.spark import is_local, under_spark_submit
    from zkconsumer.analysis.traces import is_small

    if SparkSession.getActiveSession() is not None or under_spark_submit():
        return None
    if args.master is not None and not is_local(args.master):
        return None
    if not is_small(args.trace_dir):
        return None  # a large trace is worth C2's time; a remote one's size is not known here
    plan = plan_one_shot()
    if plan.partial is not None:
        console.print(f"[dim]first small run with this Java and Spark: the JVM saves its classes to {plan.archive} "
                      "when it exits (~190 MB, once; later runs start faster; ZKCONSUMER_CDS=0 turns this off)[/]",
                      highlight=False)
    return plan


def cmd_analyze(args: argparse.Namespace) -> int:
    from zkconsumer.analysis.traces import TraceInputError, trace_files

    tables = Path(args.trace_dir) / "tables"
    if (tables / "grid_results.parquet").exists():
        return _analyze_results(args, "grid")
    if (tables / "herd_results.parquet").exists():
        return _analyze_results(args, "herd")
    try:
        trace_files(args.trace_dir)  # fail fast, before a JVM starts
    except TraceInputError as e:
        raise CliError(str(e), code=2) from None
    # pandas, pyarrow and matplotlib (~0.7 s) load while the JVM starts: Python only polls for it meanwhile
    loading = threading.Thread(target=importlib.import_module, args=("zkconsumer.analysis.pipeline",),
                               name="import-pipeline", daemon=True)
    loading.start()
    plan = one_shot_jvm(args)
    owns, spark = start_spark(args, "zkconsumer-analyze", plan.java_options if plan else None)
    loading.join()
    from zkconsumer.analysis.pipeline import run_analysis

    try:
        res = run_analysis(spark, args.trace_dir, args.out, console, from_zero=args.from_zero,
                           max_plot_partitions=args.max_plot_partitions, csv=not args.no_csv,
                           narrow_small=args.shuffle_partitions is None)
    except TraceInputError as e:
        raise CliError(str(e), code=2) from None
    finally:
        if owns:
            spark.stop()
    console.print(f"report: {res.report_md}  {res.report_html}  ({res.seconds:.1f} s)", highlight=False)
    if res.bad_lines:
        console.print(f"[yellow]{res.bad_lines} malformed line(s) skipped — listed in the report[/]",
                      highlight=False)
    return 0



def _analyze_results(args: argparse.Namespace, kind: str) -> int:
    """The directory of ``zkconsumer sim --grid`` or ``--herd``: its Parquet rows reported again."""
    owns, spark = start_spark(args, f"zkconsumer-analyze-{kind}")
    from zkconsumer.analysis import herd_report, settings_grid

    try:
        if kind == "grid":
            grid = settings_grid.report_grid(spark, args.trace_dir, args.out, console, csv=not args.no_csv)
            res, said = grid, f"settings grid: {grid.seeds:,} seeds at {grid.points} points"
        else:
            herd = herd_report.report_herd(spark, args.trace_dir, args.out, console, csv=not args.no_csv)
            res, said = herd, f"herd: {herd.rows} rows"
    except (settings_grid.GridInputError, herd_report.HerdInputError) as e:
        raise CliError(str(e), code=2) from None
    finally:
        if owns:
            spark.stop()
    console.print(f"{said}; report: {res.report_md}  {res.report_html}  ({res.seconds:.1f} s)", highlight=False)
    return 0
