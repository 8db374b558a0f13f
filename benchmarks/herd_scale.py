"""The herd at internet scale, in simulation: 0.8's ZooKeeper rebalance (both profiles) against the broker-side
coordinator (eager and cooperative), one member joining and one leaving, 10 to 10,000 members (issue 41).

Each design runs the same group as benchmarks/rebalance.py's: N members, one topic of 2N partitions, a cold start,
then ``--rounds`` × (a join, the first member in id order gone). 0.8: zkconsumer's own connector on the simulated
ZooKeeper (zkconsumer/sim/herd.py), the server charging its measured service times (``--zk-service lab``). The
coordinator: zkconsumer's coordinator-mode members (kafka-python's group client) against zkconsumer's broker, both
on virtual time (zkconsumer/sim/coordinator_herd.py), the broker charging the CPU per request measured on this machine
(``LAB_COORDINATOR``; ``--fit-coordinator`` measures it again). The members' own CPU is free on both sides: each is
on a host of its own.

Printed per design and size: the server's requests per action (by kind), the watch notifications (0.8), the bytes
from the server, rebalance attempts (0.8) or generations (the coordinator) per action, the simulated convergence
time, the rebalances given up, and the wall time (cold start / per join / per crash). A size runs only when the
last one's wall, scaled by ``(size ratio)^SCALE_EXPONENT``, fits ``--budget-s``; a skipped size says what it would
have taken. Each row's ratios are to the default profile's row of the same size in the same run. ``--plot``
draws the log-log figure: requests per action and convergence time against members.

The same rows as ``zkconsumer sim --herd`` (sim/herd_scale.py), which runs each design and size as a Spark task and
writes them as Parquet; this benchmark runs them one after the other, so that a size over the budget is skipped.

Run: .venv/bin/python benchmarks/herd_scale.py [--sizes 10 50 200 1000 5000 10000]
     [--designs default kafka-0.8 eager cooperative] [--rounds 3] [--budget-s 600] [--json F] [--plot F.png]
     [--fit-coordinator] [--from F.json ... --plot F.png] [--record FILE]
"""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import asdict
from pathlib import Path

from records import write_record
from rich.table import Table

from zkconsumer.analysis.herd_report import loglog
from zkconsumer.consoles import make_console
from zkconsumer.results.record import Scope
from zkconsumer.sim import herd_scale
from zkconsumer.sim.coordinator_fit import measure_cost
from zkconsumer.sim.zk_service import ServiceModel

ZOOKEEPER, COORDINATOR = herd_scale.ZOOKEEPER, herd_scale.COORDINATOR
#: how a design's wall grows with N, for skipping a size that would not fit the budget: a herd's rounds are
#: N members × O(N) each (measured: 1,500 → 3,000 members took 2.1× per join and 1.2× per crash, the cold start 2×)
SCALE_EXPONENT = 2.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 50, 200, 1000, 5000, 10000])
    ap.add_argument("--designs", nargs="+", default=[*ZOOKEEPER, *COORDINATOR],
                    choices=[*ZOOKEEPER, *COORDINATOR])
    ap.add_argument("--rounds", type=int, default=3, help="joins and leaves per size (1 from 1,000 members on)")
    ap.add_argument("--budget-s", type=float, default=600.0, help="wall seconds a size may take")
    ap.add_argument("--zk-service", choices=[m.value for m in ServiceModel], default=ServiceModel.LAB.value)
    ap.add_argument("--fit-coordinator", action="store_true",
                    help="measure the broker's CPU per group request on the live coordinator, print it and stop")
    ap.add_argument("--crashes-only", action="store_true",
                    help="no joins: each round the first member in id order crashes (0.8 designs; the 10,000-member "
                         "crash of issue 41's done-when)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--plot", type=Path)
    ap.add_argument("--from", dest="sources", type=Path, nargs="+",
                    help="draw --plot from these --json files (runs of other sizes or designs) instead of simulating")
    ap.add_argument("--record", type=Path, metavar="FILE",
                    help="write the result record (results/README.md) there: the table's rows (--fit-coordinator: "
                         "the samples and the fit)")
    args = ap.parse_args()
    if args.record and args.sources:
        ap.error("--record measures: not with --from, which only draws")
    settings = {**vars(args), "sources": None if args.sources is None else [str(f) for f in args.sources]}
    console = make_console()
    logging.disable(logging.ERROR)
    if args.fit_coordinator:
        with console.status("measuring the live coordinator at 10, 100 and 1,000 members, twice..."):
            cost, samples = measure_cost()
        for s in samples:
            console.print(f"{s.size:>5} members  {s.api:<10} {s.requests:>5} requests  "
                          f"{s.cpu_us / s.requests:8.1f} µs each  {s.bytes / s.requests:7.1f} B each", highlight=False)
        console.print(f"fit: {cost}", highlight=False)
        if args.record:
            write_record(args.record, settings,
                         {"samples": [{"size": s.size, "api": s.api, "requests": s.requests,
                                       "cpu_us_per_request": s.cpu_us / s.requests,
                                       "bytes_per_request": s.bytes / s.requests} for s in samples],
                          "fit": asdict(cost)}, Scope.SIM)
        return
    if args.sources:
        rows = [r for f in args.sources for r in json.loads(f.read_text())]
        if args.plot:
            loglog(rows, args.plot)
            console.print(f"plot: {args.plot} ({len(rows)} rows)")
        return
    service = ServiceModel(args.zk_service)
    table = Table(title="The herd, simulated: requests per join or leave, by design and size")
    for col in ("design", "members", "server requests / action", "by kind", "notifications / action",
                "KB from server / action", "attempts or generations / action", "join / leave (ms, sim)",
                "given up", "÷ default (same run, size): requests / join time", "wall: cold / join / leave (s)"):
        table.add_column(col)
    out = []
    baseline: dict[int, dict] = {}  # the default profile's rows, by size: the ratios' baseline
    ratios: dict[tuple[str, int], dict[str, float]] = {}  # the ratios to it, as numbers, for the record
    for design in args.designs:
        last: tuple[int, float] | None = None
        for size in args.sizes:
            if last is not None and (estimate := last[1] * (size / last[0]) ** SCALE_EXPONENT) > args.budget_s:
                console.print(f"{design}: {size:,} members skipped: about {estimate:,.0f} s of wall time "
                              f"({last[0]:,} took {last[1]:,.0f} s), over --budget-s {args.budget_s:g}",
                              highlight=False)
                out.append({"design": design, "size": size, "skipped_estimate_s": round(estimate)})
                continue
            with console.status(f"simulating {design}, {size:,} members..."):
                row = herd_scale.row(design, size, args.rounds, service, detail=True, joins=not args.crashes_only)
            last = (size, row["wall_s"])
            out.append(row)
            if row["collapsed"]:
                given_up = row["detail"]["starts_given_up"]
                console.print(f"{design}, {size:,} members: collapsed: {row['collapsed']}; starts given up "
                              f"{len(given_up)}, the first {given_up[:1]}", highlight=False)
                last = (size, float("inf"))  # larger groups would not settle either
                if args.json:
                    args.json.write_text(json.dumps(out, indent=2))
                continue
            if design == "default":
                baseline[size] = row
            base = baseline.get(size)
            first = "join_ms" if row["join_ms"] is not None else "leave_ms"  # crashes only: no join
            ratio = "–" if base is None else (f"{row['requests_per_action'] / base['requests_per_action']:.2f} / "
                                              f"{row[first] / max(1, base[first]):.2f}")
            row["vs_default"] = ratio
            if base is not None:
                ratios[(design, size)] = {
                    "requests_vs_default": row["requests_per_action"] / base["requests_per_action"],
                    f"{first}_vs_default": row[first] / max(1, base[first])}
            table.add_row(design, f"{size:,}", f"{row['requests_per_action']:,.1f}",
                          ", ".join(f"{k} {v:,.1f}" for k, v in row["by_kind"].items()),
                          "–" if row["notifications_per_action"] is None else f"{row['notifications_per_action']:,.1f}",
                          f"{row['kb_from_server_per_action']:,.1f}", f"{row['attempts_per_action']:,.2f}",
                          f"{_n(row['join_ms'], ',.0f')} / {row['leave_ms']:,.0f}", str(row["given_up"]), ratio,
                          f"{row['wall_cold_s']:.1f} / {_n(row['wall_join_s'], '.1f')} / {row['wall_leave_s']:.1f}")
            if args.json:
                args.json.write_text(json.dumps(out, indent=2))
    console.print(table)
    if args.plot:
        loglog(out, args.plot)
        console.print(f"plot: {args.plot}")
    if args.record:
        rows = [{**{k: v for k, v in r.items() if k not in ("detail", "vs_default")},
                 **ratios.get((r["design"], r["size"]), {})} for r in out]
        write_record(args.record, settings, {"rows": rows}, Scope.SIM)


def _n(value: float | None, fmt: str) -> str:
    return "–" if value is None else format(value, fmt)


if __name__ == "__main__":
    main()
