"""``zkconsumer analyze`` of a lab-sized trace from a cold start: what a user waits for after a lab run (issue 12
item 3).

A synthetic trace of ``--events`` lines (``zkconsumer.analysis.synthetic.generate``, 8 consumers, 2 topics, 16
partitions, 6 membership changes: the size of a lab run's traces) is analysed ``--runs`` times, each by a new
``zkconsumer analyze`` process, so each pays the JVM's start as a user does. Three ways, alternating run by run so a
change of the machine's load falls on all of them alike:

- ``cds``: the JVM maps the class-data archive kept in ``~/.cache/zkconsumer/jvm/`` (written by a first run before
  the timed ones, which this benchmark does not count);
- ``no-cds``: ``ZKCONSUMER_CDS=0``, the JVM loads every class itself;
- ``baseline``: the analysis of the same trace in one JVM already warm (``--warm``, in this process), the floor
  under both: the analysis without any start-up.

Printed and recorded per way: the wall of the whole command (median, min, max) and the analysis's own time as the
command reports it (its "report: ... (N s)" line), and each cold way's wall as a multiple of the warm analysis.

Run: .venv/bin/python benchmarks/analyze_cold.py [--runs 5] [--events 3000] [--record FILE]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from records import write_record
from rich.table import Table

from zkconsumer.analysis.synthetic import generate
from zkconsumer.consoles import make_console
from zkconsumer.results.record import Scope

WAYS = ("cds", "no-cds")
#: the analysis's own time, as ``zkconsumer analyze`` prints it on its last line
REPORTED = re.compile(r"^report: .*\(([\d.]+) s\)$", re.M)


def analyze_once(trace: Path, out: Path, cds: bool) -> tuple[float, float]:
    """One ``zkconsumer analyze`` in a new process: its wall and the analysis time it reports."""
    env = {**os.environ, "ZKCONSUMER_CDS": "1" if cds else "0"}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "zkconsumer", "analyze", str(trace), "--out", str(out)],
                          env={**env, "COLUMNS": "400"}, capture_output=True, text=True)
    wall = time.perf_counter() - started
    reported = REPORTED.search(done.stdout)
    if done.returncode or reported is None:
        raise SystemExit(f"zkconsumer analyze failed ({done.returncode}):\n{done.stdout[-1000:]}{done.stderr[-2000:]}")
    return wall, float(reported.group(1))


def warm_analysis(trace: Path, out: Path) -> float:
    """The same analysis in this process's JVM, after one run that warms it: the time without any start-up."""
    from rich.console import Console

    from zkconsumer.analysis.pipeline import run_analysis
    from zkconsumer.analysis.spark import build_session

    spark = build_session("local[2]", "zkconsumer-analyze-cold-baseline")
    quiet = Console(quiet=True)
    try:
        run_analysis(spark, str(trace), out / "warm-up", quiet)
        started = time.perf_counter()
        run_analysis(spark, str(trace), out / "warm", quiet)
        return time.perf_counter() - started
    finally:
        spark.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5, help="cold runs of each way")
    ap.add_argument("--events", type=int, default=3000, help="trace lines (a lab run's size)")
    ap.add_argument("--record", type=Path, metavar="FILE", help="write the result record (results/README.md) there")
    args = ap.parse_args()
    console = make_console()
    with tempfile.TemporaryDirectory(prefix="zkconsumer-analyze-cold-") as tmp:
        trace = Path(tmp) / "trace"
        lines = generate(trace, args.events, consumers=8, topics=2, partitions=16, changes=6)
        console.print(f"trace: {lines:,} lines", highlight=False)
        analyze_once(trace, Path(tmp) / "first", cds=True)  # writes the class-data archive if it is missing
        runs: dict[str, list[tuple[float, float]]] = {w: [] for w in WAYS}
        for i in range(args.runs):
            for way in WAYS:
                runs[way].append(analyze_once(trace, Path(tmp) / f"{way}-{i}", cds=way == "cds"))
                console.print(f"run {i + 1}/{args.runs} {way}: {runs[way][-1][0]:.1f} s wall", highlight=False)
        warm_s = warm_analysis(trace, Path(tmp))
    rows = []
    for way, got in runs.items():
        walls, analyses = [w for w, _ in got], [a for _, a in got]
        rows.append({"way": way, "runs": len(got), "wall_p50_s": statistics.median(walls), "wall_min_s": min(walls),
                     "wall_max_s": max(walls), "analysis_p50_s": statistics.median(analyses),
                     "wall_vs_warm": statistics.median(walls) / warm_s})
    table = Table(title=f"zkconsumer analyze of a {lines:,}-line trace, a new process each time")
    for col in ("way", "runs", "wall p50 (s)", "wall min–max (s)", "analysis p50 (s)", "wall ÷ warm analysis"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["way"], str(r["runs"]), f"{r['wall_p50_s']:.1f}",
                      f"{r['wall_min_s']:.1f}–{r['wall_max_s']:.1f}", f"{r['analysis_p50_s']:.1f}",
                      f"{r['wall_vs_warm']:.2f}")
    console.print(table)
    console.print(f"baseline: the same analysis in a warm JVM, {warm_s:.1f} s", highlight=False)
    if args.record:
        write_record(args.record, vars(args), {"lines": lines, "warm_analysis_s": warm_s, "rows": rows}, Scope.LAB)


if __name__ == "__main__":
    main()
