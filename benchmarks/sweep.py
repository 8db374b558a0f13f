"""Spark analysis throughput: sweep scenarios per second and analyze events per second.

1. sweep, per strategy on one core: the scalar loop (``run_scenario``: the project's assignors called per
   scenario, the previous approach and the oracle) against the batched numpy computation (``sweep_batch``), and
   the check that both give identical rows; then all four strategies: the scalar loop, the batched loop, and
   both inside Spark tasks at --master (local[2] by default, output discarded with the ``noop`` sink); ratios.
2. the largest sweep: --scenarios (default 1,000,000) scenarios to Parquet, batched, timed end to end.
3. analyze: a synthetic trace of --events lines (default 10,000,000; zkconsumer.analysis.synthetic) is
   generated to a temp dir, then the whole ``analyze`` pipeline runs on it; prints events per second. A tiny,
   lab-sized trace (--tiny-events) runs first: it warms the JVM and measures the fixed cost. With --baseline REF
   the same traces are also analysed by the code of git ref REF (``git archive`` into a temp dir, run in its own
   Python and JVM, warmed up the same way) right after, and the row says the ratio and whether every output
   table (CSV) is byte-identical.

Run: .venv/bin/python benchmarks/sweep.py [--scenarios N] [--events N] [--compare N] [--master local[2]] [--record FILE]
     .venv/bin/python benchmarks/sweep.py --compare 0 --scenarios 0 --baseline main   # analyze, old vs new
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from records import write_record
from rich.console import Console
from rich.table import Table

from zkconsumer.analysis.pipeline import run_analysis
from zkconsumer.analysis.spark import build_session
from zkconsumer.analysis.sweep import GRID_FULL, SweepConfig, run_local, run_spark
from zkconsumer.analysis.sweep_batch import run_batched
from zkconsumer.analysis.synthetic import generate
from zkconsumer.consoles import make_console
from zkconsumer.results.record import Scope


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--compare", type=int, default=20_000, help="scenarios for the loop-vs-Spark comparison")
    ap.add_argument("--scenarios", type=int, default=1_000_000, help="largest sweep (0 to skip)")
    ap.add_argument("--events", type=int, default=10_000_000, help="synthetic trace lines for analyze (0 to skip)")
    ap.add_argument("--tiny-events", type=int, default=3_000, help="a lab-sized trace for analyze's fixed cost")
    ap.add_argument("--changes", type=int, default=3)
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--tmp", default=None, help="where the trace and outputs go (default: a temp dir)")
    ap.add_argument("--baseline", default=None, metavar="GIT_REF",
                    help="also analyze with the code of this git ref (e.g. main) and print the ratio")
    ap.add_argument("--record", type=Path, metavar="FILE", help="write the result record (results/README.md) there")
    args = ap.parse_args()
    console = make_console()
    tmp = Path(args.tmp or tempfile.mkdtemp(prefix="zkc-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    cfg = SweepConfig(GRID_FULL, seed=1, changes=args.changes)
    spark = build_session(args.master, "zkconsumer-bench", driver_memory=args.driver_memory)
    table = Table(title=f"zkconsumer Spark benchmark — {args.master}, {platform.python_version()}, "
                        f"{platform.machine()}")
    for col in ("measure", "size", "seconds", "rate"):
        table.add_column(col, justify="right" if col != "measure" else "left")
    figures: dict[str, Any] = {}
    try:
        n = args.compare
        if n:
            figures["comparison"] = sweep_comparison(table, spark, cfg, n, args.master)
            console.print(table)
        if args.scenarios:
            out = tmp / "sweep.parquet"
            t0 = time.perf_counter()
            run_spark(spark, cfg, args.scenarios).write.mode("overwrite").parquet(str(out))
            big_s = time.perf_counter() - t0
            rows = spark.read.parquet(str(out)).count()
            table.add_row(f"largest sweep → Parquet ({rows:,} rows)", f"{args.scenarios:,} scenarios",
                          f"{big_s:.1f}", f"{args.scenarios / big_s:,.0f} scenarios/s")
            figures["largest_sweep"] = {"scenarios": args.scenarios, "parquet_rows": rows, "seconds": big_s,
                                        "scenarios_per_s": args.scenarios / big_s}
            console.print(table)
        base = baseline_code(args.baseline, tmp) if args.baseline else None
        if args.tiny_events:  # the fixed cost: a lab run's traces are this small
            figures["analyze_tiny"] = analyze_row(table, spark, console, tmp / "tiny", args.tiny_events,
                                                  "analyze, tiny trace (fixed cost)", baseline=base, args=args)
        if args.events:
            figures["analyze"] = analyze_row(table, spark, console, tmp / "big", args.events,
                                             "analyze (all stages: tables, plots, report)", stages=True,
                                             baseline=base, args=args,
                                             warm=tmp / "tiny" / "trace" if args.tiny_events else None)
    finally:
        spark.stop()
        if not args.tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    console.print(table)
    if args.record:
        write_record(args.record, vars(args), figures,
                     Scope.LAB)


def analyze_row(table: Table, spark, console, where: Path, events: int, label: str,  # noqa: ANN001
                stages: bool = False, baseline: Path | None = None, args=None,  # noqa: ANN001
                warm: Path | None = None) -> dict[str, Any]:
    """Generate a synthetic trace, analyze it, and add its time, rate and Spark job count to ``table``; with
    ``baseline`` (a directory holding an older ``zkconsumer``), the same for that code and the ratio. Returns the
    figures, for the record."""
    t0 = time.perf_counter()
    lines = generate(where / "trace", events, consumers=8, topics=2, partitions=16, changes=6)
    gen_s = time.perf_counter() - t0
    table.add_row("synthetic trace generation", f"{lines:,} lines", f"{gen_s:.1f}", f"{lines / gen_s:,.0f} lines/s")
    if warm is None:  # the first analysis of a JVM pays its JIT and class loading: not what is measured
        run_analysis(spark, str(where / "trace"), where / "report-warm", Console(quiet=True))
    sc = spark.sparkContext
    group = f"bench-analyze-{where.name}"
    sc.setJobGroup(group, label)
    t0 = time.perf_counter()
    res = run_analysis(spark, str(where / "trace"), where / "report", console)
    an_s = time.perf_counter() - t0
    jobs = len(sc.statusTracker().getJobIdsForGroup(group))
    sc.setJobGroup("bench", "benchmark")
    table.add_row(f"{label}, {jobs} Spark jobs", f"{lines:,} events", f"{an_s:.1f}", f"{lines / an_s:,.0f} events/s")
    figures: dict[str, Any] = {"events": lines, "generation_s": gen_s, "generation_lines_per_s": lines / gen_s,
                               "spark_jobs": jobs, "analyze_s": an_s, "events_per_s": lines / an_s}
    if stages:
        for name, took, _ in res.stages:
            table.add_row(f"  {name}", "", f"{took:.1f}", "")
        figures["stages"] = [{"stage": name, "seconds": took} for name, took, _ in res.stages]
    if baseline is None:
        return figures
    old = run_baseline(baseline, where / "trace", where / "report-baseline", args, warm or where / "trace")
    same = same_tables(where / "report", where / "report-baseline")
    table.add_row(f"  same, previous code ({args.baseline}), {old['jobs']} Spark jobs; tables {same}",
                  f"{lines:,} events", f"{old['seconds']:.1f}",
                  f"{lines / old['seconds']:,.0f} events/s  (new {old['seconds'] / an_s:.2f}x faster)")
    figures["baseline"] = {"ref": args.baseline, "spark_jobs": old["jobs"], "analyze_s": old["seconds"],
                           "events_per_s": lines / old["seconds"], "speedup": old["seconds"] / an_s,
                           "tables_identical": same == "identical", "tables": same}
    if stages:
        for name, took in old["stages"]:
            table.add_row(f"    previous: {name}", "", f"{took:.1f}", "")
        figures["baseline"]["stages"] = [{"stage": name, "seconds": took} for name, took in old["stages"]]
    return figures


#: Runs in the baseline's own interpreter: warm up on one trace, then time ``analyze`` on another.
_BASELINE = """
import json, sys, time, zkconsumer
from rich.console import Console
from zkconsumer.analysis.pipeline import run_analysis
from zkconsumer.analysis.spark import build_session
trace, out, master, memory, warm = sys.argv[1:6]
spark = build_session(master, "zkconsumer-bench-baseline", driver_memory=memory)
quiet = Console(quiet=True)
run_analysis(spark, warm, out + "-warm", quiet)
sc = spark.sparkContext
sc.setJobGroup("baseline", "baseline")
t0 = time.perf_counter()
res = run_analysis(spark, trace, out, quiet)
took = time.perf_counter() - t0
print(json.dumps({"seconds": took, "jobs": len(sc.statusTracker().getJobIdsForGroup("baseline")),
                  "stages": [(n, t) for n, t, _ in res.stages], "code": zkconsumer.__file__}))
spark.stop()
"""


def baseline_code(ref: str, tmp: Path) -> Path:
    """``git archive`` the zkconsumer package of ``ref`` into a directory (the checkout itself is not touched)."""
    dest = tmp / f"baseline-{ref.replace('/', '_')}"
    dest.mkdir(parents=True, exist_ok=True)
    repo = Path(__file__).resolve().parents[1]
    archive = subprocess.run(["git", "-C", str(repo), "archive", ref, "zkconsumer"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def run_baseline(code: Path, trace: Path, out: Path, args, warm: Path) -> dict:  # noqa: ANN001
    env = {**os.environ, "PYTHONPATH": str(code)}
    done = subprocess.run([sys.executable, "-c", _BASELINE, str(trace), str(out), args.master, args.driver_memory,
                           str(warm)], env=env, cwd=code, check=True, capture_output=True, text=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"].startswith(str(code)), f"baseline ran {result['code']}, not the archived code"
    return result


def same_tables(new: Path, old: Path) -> str:
    """``identical`` when every CSV table of ``old`` is byte-identical in ``new``; else which differ."""
    differ = [p.name for p in sorted((old / "tables").glob("*.csv"))
              if not (new / "tables" / p.name).exists() or (new / "tables" / p.name).read_bytes() != p.read_bytes()]
    return "identical" if not differ else "DIFFERENT: " + ", ".join(differ)


def _timed(fn, *args, **kwargs):  # noqa: ANN001, ANN202
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def sweep_comparison(table: Table, spark, cfg: SweepConfig, n: int, master: str) -> dict[str, Any]:  # noqa: ANN001
    """Scalar loop (the previous approach) against the batched computation, per strategy and for all four, on
    one core and in Spark; every batched result is checked equal to the scalar one. Returns the figures, for the
    record."""
    rows = []
    for strategy in cfg.strategies:
        one = replace(cfg, strategies=(strategy,))
        ref, scalar_s = _timed(run_local, one, n)
        got, batch_s = _timed(run_batched, one, n, chunk=5000)
        same = "identical" if got.equals(ref) else "DIFFERENT"
        table.add_row(f"sweep {strategy}, scalar loop (1 core)", f"{n:,} scenarios", f"{scalar_s:.1f}",
                      f"{n / scalar_s:,.0f} scenarios/s")
        table.add_row(f"sweep {strategy}, batched (1 core), rows {same}", f"{n:,} scenarios", f"{batch_s:.1f}",
                      f"{n / batch_s:,.0f} scenarios/s  ({scalar_s / batch_s:.1f}x)")
        rows.append(_comparison_row(strategy, n, scalar_s, batch_s, same))
    ref, scalar_s = _timed(run_local, cfg, n)
    got, batch_s = _timed(run_batched, cfg, n, chunk=5000)
    same = "identical" if got.equals(ref) else "DIFFERENT"
    table.add_row("sweep all 4, scalar loop (1 core)", f"{n:,} scenarios", f"{scalar_s:.1f}",
                  f"{n / scalar_s:,.0f} scenarios/s")
    table.add_row(f"sweep all 4, batched (1 core), rows {same}", f"{n:,} scenarios", f"{batch_s:.1f}",
                  f"{n / batch_s:,.0f} scenarios/s  ({scalar_s / batch_s:.1f}x)")
    run_spark(spark, cfg, 2_000).write.format("noop").mode("overwrite").save()  # warm the workers
    _, spark_scalar_s = _timed(lambda: run_spark(spark, cfg, n, scalar=True).write.format("noop")
                               .mode("overwrite").save())
    table.add_row(f"sweep all 4, scalar loop in Spark {master} (noop sink)", f"{n:,} scenarios",
                  f"{spark_scalar_s:.1f}", f"{n / spark_scalar_s:,.0f} scenarios/s")
    _, spark_s = _timed(lambda: run_spark(spark, cfg, n).write.format("noop").mode("overwrite").save())
    table.add_row(f"sweep all 4, batched in Spark {master} (noop sink)", f"{n:,} scenarios", f"{spark_s:.1f}",
                  f"{n / spark_s:,.0f} scenarios/s  ({spark_scalar_s / spark_s:.1f}x)")
    rows.append({**_comparison_row("all", n, scalar_s, batch_s, same),
                 "spark_scalar_s": spark_scalar_s, "spark_scalar_per_s": n / spark_scalar_s,
                 "spark_batched_s": spark_s, "spark_batched_per_s": n / spark_s,
                 "spark_speedup": spark_scalar_s / spark_s})
    return {"scenarios": n, "rows": rows}


def _comparison_row(strategy: str, n: int, scalar_s: float, batch_s: float, same: str) -> dict[str, Any]:
    return {"strategy": strategy, "scalar_s": scalar_s, "scalar_per_s": n / scalar_s, "batched_s": batch_s,
            "batched_per_s": n / batch_s, "speedup": scalar_s / batch_s, "identical": same == "identical"}


if __name__ == "__main__":
    main()
