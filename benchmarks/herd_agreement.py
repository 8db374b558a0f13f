"""The simulated coordinator's herd beside the real one (issue 54, item 4): the same group of kafka-python members
on the project's broker, once on real processes, ZooKeeper and sockets (benchmarks/herd.py's harness, the members as
threads of this process: ``--in-process``) and once on the simulator (zkconsumer/sim/herd_benchmark.py: the same
members, settings, actions, convergence and counting windows on virtual time). Printed per protocol and size: the
group requests per join and per leave, real and simulated, and their ratio; the baseline of each ratio is the real
row measured in the same run. Agreement is a ratio within 5% of 1 for JoinGroup and SyncGroup.

The real members' time between two polls of a join in flight (kafka-python's join wait timing out, then its next look
at the join: the main thread and its IO thread handing over under one GIL) is measured on the real side and replayed
by the simulated members (``--no-gaps``: not, as the first measurements were). It decides how often kafka-python
3.0 sends a JoinGroup twice: a join that completes in that gap is not taken up, a new JoinGroup is sent
(``BaseCoordinator.join_group_async`` replaces a finished join task), and when the sender is the group's leader the
coordinator starts another generation.

Run: .venv/bin/python benchmarks/herd_agreement.py [--sizes 10 50] [--rounds 3] [--json F] [--record F]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from herd import ASSIGNORS, InProcessGroup, run_all
from records import write_record
from rich.table import Table

from zkconsumer.consoles import make_console
from zkconsumer.sim import herd_benchmark

APIS = ("JoinGroup", "SyncGroup", "Heartbeat")


@contextlib.contextmanager
def poll_gaps() -> Iterator[list[int]]:
    """Microseconds from each timed-out wait for a join to the same member's next look at it (kafka-python's
    ``join_group_async`` returning False, then entered again), over every member while the block runs."""
    from kafka.coordinator.base import BaseCoordinator

    original = BaseCoordinator.join_group_async
    gaps: list[int] = []
    timed_out: dict[int, float] = {}
    lock = threading.Lock()

    async def timed(self, timeout_ms=None):  # noqa: ANN001, ANN202 - kafka-python's signature
        entered = time.monotonic()
        with lock:
            left = timed_out.pop(id(self), None)
            if left is not None:
                gaps.append(int((entered - left) * 1e6))
        joined = await original(self, timeout_ms)
        if not joined:
            with lock:
                timed_out[id(self)] = time.monotonic()
        return joined

    BaseCoordinator.join_group_async = timed
    try:
        yield gaps
    finally:
        BaseCoordinator.join_group_async = original


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 50])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--protocols", nargs="+", default=list(ASSIGNORS), choices=list(ASSIGNORS))
    ap.add_argument("--json", metavar="F", help="write the rows there")
    ap.add_argument("--no-gaps", action="store_true", help="simulated members spend no time between polls")
    ap.add_argument("--record", type=Path, help="write the result record (results/README.md) there")
    args = ap.parse_args()
    console = make_console()
    logging.disable(logging.WARNING)
    partitions = 2 * max(args.sizes)
    real, gaps = {}, {}
    for protocol in args.protocols:
        for size in args.sizes:
            with poll_gaps() as measured:
                real.update(run_all([protocol], [size], args.rounds, console, InProcessGroup,
                                    partitions=partitions))
            gaps[(protocol, size)] = tuple(measured)
            if measured:
                console.print(f"real {protocol} {size}: {len(measured)} gaps between polls of a join, median "
                              f"{statistics.median(measured)} µs, p90 {sorted(measured)[len(measured) * 9 // 10]} µs",
                              highlight=False)
    rows = []
    for (protocol, size), r in real.items():
        replay = () if args.no_gaps else gaps[(protocol, size)]
        s = herd_benchmark.measure(protocol, size, args.rounds, partitions, gaps_us=replay)
        console.print(f"simulated {protocol} {size}: join p50 {s['join_ms']:.0f} ms, JoinGroup per join "
                      f"{s['join_requests']['JoinGroup']:.1f}", highlight=False)
        rows.append({"protocol": protocol, "size": size, "real": r, "simulated": s,
                     "gaps_us": {"n": len(replay), "median": statistics.median(replay) if replay else 0,
                                 "p90": sorted(replay)[len(replay) * 9 // 10] if replay else 0}})
    table = Table(title="the coordinator's herd: real (in-process members) against simulated, per action")
    for col in ("protocol", "N", "action", *(f"{a} real / sim" for a in APIS), "JoinGroup ratio",
                "SyncGroup ratio", "p50 ms real / sim", "JoinGroup a round, real | sim"):
        table.add_column(col, justify="right")
    for row in rows:
        for action in ("join", "leave"):
            r, s = row["real"][f"{action}_requests"], row["simulated"][f"{action}_requests"]
            ratios = [s[a] / r[a] if r[a] else float("nan") for a in ("JoinGroup", "SyncGroup")]
            table.add_row(row["protocol"], str(row["size"]), action,
                          *(f"{r[a]:.1f} / {s[a]:.1f}" for a in APIS), *(f"{x:.2f}" for x in ratios),
                          f"{row['real'][f'{action}_ms']:.0f} / {row['simulated'][f'{action}_ms']:.0f}",
                          " ".join(map(str, row["real"].get(f"{action}_joingroups", []))) + " | "
                          + " ".join(map(str, row["simulated"].get(f"{action}_joingroups", []))))
    console.print(table)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=str))
    if args.record:
        write_record(args.record, {"sizes": args.sizes, "rounds": args.rounds, "protocols": args.protocols,
                                   "gaps_replayed": not args.no_gaps},
                     {"rows": json.loads(json.dumps(rows, default=str))})


if __name__ == "__main__":
    main()
