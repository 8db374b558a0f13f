"""Assignor speed: 1,000 topics x 100 partitions, 1,000 consumer threads, whole-group assignment.

For each strategy it times zkconsumer's assignor and, in the same run, a line-by-line port of Kafka's loops
(zkconsumer.assignment.reference: indexOf lookups, per-character String.hashCode), checks both give the same answer,
and prints the ratio.
Run: .venv/bin/python benchmarks/assignors.py [--topics N --partitions N --consumers N] [--record FILE]
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import time
from pathlib import Path

from records import write_record
from rich.table import Table

from zkconsumer.assignment.assignors import AssignmentContext, assign, clear_caches
from zkconsumer.assignment.reference import PORTS
from zkconsumer.consoles import make_console
from zkconsumer.results.record import Scope


def _time(fn, repeat: int) -> tuple[float, object]:
    best, result = float("inf"), None
    samples = []
    for _ in range(repeat):
        clear_caches()  # every run pays for the Java hashes: no memoised RoundRobin order from the last one
        gc.collect()
        t0 = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - t0)
        best = min(best, samples[-1])
    return statistics.median(samples), result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--consumers", type=int, default=250)
    ap.add_argument("--streams", type=int, default=4, help="streams per consumer (threads = consumers x streams)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline-repeat", type=int, default=1)
    ap.add_argument("--record", type=Path, metavar="FILE", help="write the result record (results/README.md) there")
    args = ap.parse_args()
    topics = [f"topic-{i:04d}" for i in range(args.topics)]
    partitions = {t: list(range(args.partitions)) for t in topics}
    subs = {f"group_consumer-{c:04d}": {t: args.streams for t in topics} for c in range(args.consumers)}
    console = make_console()
    console.print(f"{args.topics} topics x {args.partitions} partitions, {args.consumers} consumers x "
                  f"{args.streams} streams = {args.consumers * args.streams} threads; CPython "
                  f"{platform.python_version()}, one core")
    table = Table(title="whole-group assignment")
    for col in ("strategy", "zkconsumer (s)", "Kafka loops port (s)", "speed-up"):
        table.add_column(col, justify="right")
    rows = []
    for strategy, port in PORTS.items():
        ours, result = _time(lambda s=strategy: assign(s, AssignmentContext(subs, partitions)), args.repeat)
        base, expected = _time(lambda p=port: p(subs, partitions), args.baseline_repeat)
        got = {(tp.topic, tp.partition): t for tp, t in result.owners.items()}
        assert got == expected, f"{strategy}: results differ from Kafka's loops"
        table.add_row(strategy, f"{ours:.3f}", f"{base:.2f}", f"{base / ours:.1f}x")
        rows.append({"strategy": strategy, "zkconsumer_s": ours, "kafka_port_s": base, "speedup": base / ours})
    console.print(table)
    if args.record:
        write_record(args.record, vars(args),
                     {"threads": args.consumers * args.streams, "partitions_total": args.topics * args.partitions,
                      "rows": rows}, Scope.LAB)


if __name__ == "__main__":
    main()
