"""The simulated coordinator's herd beside the real one (issue 54, item 4): the same group of kafka-python members
on the project's broker, once on real processes, ZooKeeper and sockets (benchmarks/herd.py's harness, the members as
threads of this process: ``--in-process``) and once on the simulator (zkconsumer/sim/herd_benchmark.py: the same
members, settings, actions, convergence and counting windows on virtual time). Printed per protocol and size: the
group requests per join and per leave, real and simulated, and their ratio; the baseline of each ratio is the real
row measured in the same run. Agreement is a ratio within 5% of 1 for JoinGroup and SyncGroup.

Run: .venv/bin/python benchmarks/herd_agreement.py [--sizes 10 50] [--rounds 3] [--json F]
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from herd import ASSIGNORS, InProcessGroup, run_all
from rich.table import Table

from zkconsumer.consoles import make_console
from zkconsumer.sim import herd_benchmark

APIS = ("JoinGroup", "SyncGroup", "Heartbeat")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 50])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--protocols", nargs="+", default=list(ASSIGNORS), choices=list(ASSIGNORS))
    ap.add_argument("--json", metavar="F", help="write the rows there")
    args = ap.parse_args()
    console = make_console()
    logging.disable(logging.WARNING)
    partitions = 2 * max(args.sizes)
    real = run_all(args.protocols, args.sizes, args.rounds, console, InProcessGroup)
    rows = []
    for (protocol, size), r in real.items():
        s = herd_benchmark.measure(protocol, size, args.rounds, partitions)
        console.print(f"simulated {protocol} {size}: join p50 {s['join_ms']:.0f} ms, JoinGroup per join "
                      f"{s['join_requests']['JoinGroup']:.1f}", highlight=False)
        rows.append({"protocol": protocol, "size": size, "real": r, "simulated": s})
    table = Table(title="the coordinator's herd: real (in-process members) against simulated, per action")
    for col in ("protocol", "N", "action", *(f"{a} real / sim" for a in APIS), "JoinGroup ratio",
                "SyncGroup ratio", "p50 ms real / sim"):
        table.add_column(col, justify="right")
    for row in rows:
        for action in ("join", "leave"):
            r, s = row["real"][f"{action}_requests"], row["simulated"][f"{action}_requests"]
            ratios = [s[a] / r[a] if r[a] else float("nan") for a in ("JoinGroup", "SyncGroup")]
            table.add_row(row["protocol"], str(row["size"]), action,
                          *(f"{r[a]:.1f} / {s[a]:.1f}" for a in APIS), *(f"{x:.2f}" for x in ratios),
                          f"{row['real'][f'{action}_ms']:.0f} / {row['simulated'][f'{action}_ms']:.0f}")
    console.print(table)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=str))


if __name__ == "__main__":
    main()
