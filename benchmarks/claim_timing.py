"""How soon a member reaches for owner nodes after it registers, and how often it finds them still held: the
`kafka-0.8` profile against Kafka 0.8.2.2's own consumer, read from runs the lab already made (issue 40, item 4).

A member that has just registered (a joiner, or a member back on a new session after an expiry) claims while the
members already there are releasing: a claim that comes first finds an owner node still held and costs the attempt
a ``rebalance.backoff.ms``. For every run directory of a variant under DIR (what ``zkconsumer catalogue`` or
``zkconsumer compare --scenario`` wrote: ``<scenario>/[run-<i>/]<variant>/``), each registration's wait for the
member's next claim (zkconsumer/apache_kafka/race.py: Kafka's INFO log for its own consumer, the trace for ours)
and the run's claim conflicts (summary.json). Printed: per scenario and variant, the waits' median and range over
all runs and of the later registrations alone (a member's again: on a new session after an expiry, or after a
restart; the first ones are the members' starts, for Kafka's consumer a cold JVM), the median's ratio to the first
variant's (the baseline, Kafka's own by default), and the conflicts per run. Nothing is run: it reads.

Run: .venv/bin/python benchmarks/claim_timing.py DIR [--variants kafka-0.8.2.2,zookeeper-kafka-0.8] [--json FILE]
     [--record FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from records import write_record
from rich.table import Table

from zkconsumer.apache_kafka.race import claim_delays, kafka_log_moments, trace_moments
from zkconsumer.consoles import make_console
from zkconsumer.results.record import Scope


def run_dirs(root: Path, variant: str) -> dict[str, list[Path]]:
    """Scenario → its run directories of ``variant`` (one per run), in run order."""
    out: dict[str, list[Path]] = {}
    for summary in sorted(root.glob(f"**/{variant}/summary.json")):
        run = summary.parent
        scenario = run.parent.parent.name if run.parent.name.startswith("run-") else run.parent.name
        out.setdefault(scenario, []).append(run)
    return out


def delays_of(run: Path, group: str) -> list[tuple[float, bool]]:
    """Every registration's wait for its member's next claim in one run (ms, and whether it was the member's
    start), Kafka's members or ours."""
    kafka_logs = sorted((run / "logs").glob("*.kafka.log"))
    if kafka_logs:
        return [ms for log in kafka_logs
                for ms in claim_delays(kafka_log_moments(log, f"[{group}_{log.name.removesuffix('.kafka.log')}]"))]
    return [ms for trace in sorted((run / "traces").glob("*.jsonl")) if trace.stem != "lab"
            for ms in claim_delays(trace_moments(trace))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--variants", default="kafka-0.8.2.2,zookeeper-kafka-0.8")
    ap.add_argument("--group", default="lab", help="the runs' group id (the lab's: lab)")
    ap.add_argument("--json", type=Path, help="write every figure there")
    ap.add_argument("--record", type=Path, metavar="FILE", help="write the result record (results/README.md) there")
    args = ap.parse_args()
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    found = {v: run_dirs(args.dir, v) for v in variants}
    scenarios = sorted({s for runs in found.values() for s in runs})
    if not scenarios:
        raise SystemExit(f"no run of {', '.join(variants)} under {args.dir}")
    table = Table(title="from a registration to the member's first claim (ms: median, range, registrations) and "
                        "claim conflicts per run")
    table.add_column("scenario")
    for i, v in enumerate(variants):
        table.add_column(f"{v}: to claim", justify="right")
        table.add_column("later registrations", justify="right")
        if i:
            table.add_column(f"÷ {variants[0]}", justify="right")
        table.add_column(f"{v}: conflicts", justify="right")
    doc: dict = {}
    rows: list[dict] = []  # the table's figures, a row per scenario and variant, for the record
    for scenario in scenarios:
        cells, base = [], None
        for i, v in enumerate(variants):
            runs = found[v].get(scenario, [])
            both = [d for run in runs for d in delays_of(run, args.group)]
            delays = [ms for ms, _ in both]
            later = [ms for ms, first in both if not first]
            median = statistics.median(delays) if delays else None
            conflicts = [json.loads((run / "summary.json").read_text()).get("claim_conflicts") for run in runs]
            doc.setdefault(scenario, {})[v] = {"runs": len(runs),
                                               "delays_ms": [[round(ms, 1), first] for ms, first in both],
                                               "claim_conflicts": conflicts}
            cells.append(f"{median:.0f} ({min(delays):.0f}–{max(delays):.0f}, {len(delays)})" if delays else "-")
            cells.append(f"{statistics.median(later):.0f} ({len(later)})" if later else "-")
            if i == 0:
                base = median
            else:
                cells.append(f"{median / base:.2f}x" if median is not None and base else "-")
            cells.append(" ".join("-" if c is None else str(c) for c in conflicts) or "-")
            rows.append({"scenario": scenario, "variant": v, "runs": len(runs), "registrations": len(delays),
                         "to_claim_p50_ms": median, "to_claim_min_ms": min(delays) if delays else None,
                         "to_claim_max_ms": max(delays) if delays else None,
                         "later_registrations": len(later),
                         "later_to_claim_p50_ms": statistics.median(later) if later else None,
                         "to_claim_vs_baseline": median / base if i and median is not None and base else None,
                         "claim_conflicts_per_run": conflicts})
        table.add_row(scenario, *cells)
    make_console().print(table)
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    if args.record:
        write_record(args.record, vars(args),
                     {"baseline": variants[0], "rows": rows}, Scope.LAB)


if __name__ == "__main__":
    main()
