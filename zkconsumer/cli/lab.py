"""``zkconsumer lab``: what ``make demo`` runs — a group with churn, live, then verify and a summary."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.table import Table

from . import CliError, console


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lab", help="run a live group with joins, stops and kill -9 on a local ZooKeeper + broker")
    p.add_argument("--consumers", type=int, default=3, help="consumer processes at the start (default 3)")
    p.add_argument("--duration", type=float, default=30.0, help="seconds of churn (default 30)")
    p.add_argument("--profile", choices=("default", "kafka-0.8"), default="default",
                   help="kafka-0.8 reproduces the original timing and its weaknesses")
    p.add_argument("--compare", action="store_true", help="run kafka-0.8 then default and compare them")
    p.add_argument("--strategy", default="range", choices=("range", "roundrobin", "roundrobin-relaxed"))
    p.add_argument("--rate", type=float, default=200.0, help="records per second produced during the run")
    p.add_argument("--out", type=Path, help="run directory (default lab-runs/<time>)")
    p.add_argument("--zookeeper", help="use this ZooKeeper instead of starting one")
    p.add_argument("--bootstrap-server", help="use this Kafka cluster instead of the local broker")
    p.add_argument("--analyze", action="store_true", help="turn the traces into a Spark report afterwards")
    p.add_argument("--master", help="Spark master for --analyze (default local[*])")
    p.add_argument("--faults", nargs="*", metavar="FAULT",
                   help="run the fault matrix instead (all faults, or the ones named: "
                        "zk-leader zk-follower zk-quorum zk-cut broker-kill consumers-kill herd-30) and print one "
                        "verdict per fault; --profile / --compare choose the profiles")
    p.set_defaults(func=cmd_lab)


def cmd_lab(args: argparse.Namespace) -> int:
    from ..lab import Lab, LabPlan

    if args.consumers < 1 or args.duration <= 0:
        raise CliError("--consumers must be >= 1 and --duration > 0")
    base = args.out or Path("lab-runs") / time.strftime("%Y%m%d-%H%M%S")
    profiles = ["kafka-0.8", "default"] if args.compare else [args.profile]
    if args.faults is not None:
        return _faults(args, base, profiles)
    summaries = []
    for profile in profiles:
        plan = LabPlan(consumers=args.consumers, duration=args.duration, profile=profile, strategy=args.strategy,
                       rate=args.rate)
        out = base / profile if args.compare else base
        console.rule(f"[bold]lab: {profile} profile")
        summaries.append(Lab(plan, out, args.zookeeper, args.bootstrap_server, console).run(args.analyze,
                                                                                             args.master))
    if args.compare:
        table = Table(title="kafka-0.8 vs default, same workload")
        table.add_column("measure")
        for s in summaries:
            table.add_column(s["profile"], justify="right")
        for key in ("consumer_rebalances", "failed_rebalances", "claim_conflicts", "rebalance_ms_p50",
                    "rebalance_ms_max", "duplicates", "lost", "verify_ok"):
            table.add_row(key.replace("_", " "), *(str(s.get(key)) for s in summaries))
        console.print(table)
    return 0 if all(s.get("verify_ok") and s.get("lost") == 0 for s in summaries) else 1


def _faults(args: argparse.Namespace, base: Path, profiles: list[str]) -> int:
    from ..faults.cli import run_matrix
    from ..faults.matrix import FAULTS

    names = args.faults or list(FAULTS)
    unknown = [n for n in names if n not in FAULTS]
    if unknown:
        raise CliError(f"unknown fault(s) {', '.join(unknown)}; known: {', '.join(FAULTS)}")
    verdicts = run_matrix(names, profiles, base, console, args.master)
    return 0 if all(v.ok for v in verdicts) else 1
