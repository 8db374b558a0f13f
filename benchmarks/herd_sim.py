"""ZooKeeper requests per join and crash: the simulator against the real benchmark, measured in the same run.

The simulated group (zkconsumer/sim/herd.py) is benchmarks/rebalance.py's: N members with fetching off, 2N
partitions, Range, a join then a crash of the first member in id order, `--rounds` times, every request ZooKeeper
received counted (pings included) over the actions. The real side runs benchmarks/rebalance.py's own scenario
(benchmarks/rebalancing/) on a real ZooKeeper for `--real-sizes`, one process per 25 members as that benchmark's
scaling runs do. Printed: per profile and size, requests per action simulated and real, their ratio, the simulated
requests by kind, the watch notifications and bytes the server sent per action, the convergence times (simulated
without ``--zk-service lab``, a floor) and the simulator's wall time.

Large groups: each size runs only when the one before it, scaled by the square of the size ratio (every member
reads every registration at a cold start, so a simulated herd costs N² in wall time), fits ``--budget-s``; a size
skipped says what it would have taken. The walls of the cold start, the joins and the crashes are printed apart.

Run: .venv/bin/python benchmarks/herd_sim.py [--sizes 10 50 200] [--real-sizes 10 50] [--rounds 3]
     [--budget-s 600] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
from pathlib import Path

from rebalancing.scenario import run_scenario
from rich.table import Table

from zkconsumer.consoles import make_console
from zkconsumer.sim.herd import measure
from zkconsumer.sim.zk_service import ServiceModel
from zkconsumer.zk.server import ZooKeeperServer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 50, 200])
    ap.add_argument("--real-sizes", type=int, nargs="*", default=[10, 50])
    ap.add_argument("--profiles", nargs="+", default=["default", "kafka-0.8"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--zk-service", choices=[m.value for m in ServiceModel], default=ServiceModel.NONE.value,
                    help="the simulated server's service times (none: answered at once; lab: measured)")
    ap.add_argument("--budget-s", type=float, default=600.0,
                    help="skip a size whose estimated wall time (the last size's, scaled by N²) exceeds this")
    ap.add_argument("--json", type=Path, help="write every figure there")
    args = ap.parse_args()
    console = make_console()
    logging.disable(logging.ERROR)
    real: dict[tuple[str, int], dict] = {}
    if args.real_sizes:
        with ZooKeeperServer(quick_start=False) as server, console.status("real groups..."):
            for size in args.real_sizes:
                for profile in args.profiles:
                    real[(profile, size)] = run_scenario(server.connect_string, profile, size, 2 * size, args.rounds,
                                                         max(1, size // 25))
    table = Table(title="ZooKeeper requests per join or crash: simulated and real (same run)")
    for col in ("profile", "members", "simulated", "real", "sim ÷ real", "simulated by kind (per action)",
                "notifications / KB from server (per action)", "join / crash, sim (ms)",
                "join / crash p50, real (ms)", "sim wall: cold / join / crash (s)"):
        table.add_column(col)
    out = []
    for profile in args.profiles:
        last: tuple[int, float] | None = None
        for size in args.sizes:
            if last is not None and (estimate := last[1] * (size / last[0]) ** 2) > args.budget_s:
                console.print(f"{profile}: {size} members skipped: about {estimate:,.0f} s of wall time "
                              f"({last[0]} members took {last[1]:,.0f} s; N² from there), over --budget-s "
                              f"{args.budget_s:g}", highlight=False)
                out.append({"profile": profile, "size": size, "skipped_estimate_s": round(estimate)})
                continue
            with console.status(f"simulating {profile}, {size} members..."):
                sim = measure(profile, size, args.rounds, service=ServiceModel(args.zk_service).times)
            last = (size, sim.wall_s)
            r = real.get((profile, size))
            figures = sim.as_dict()
            kinds = ", ".join(f"{k} {n:g}" for k, n in figures["requests_by_kind"].items())
            real_n = r["zk_requests"] if r else None
            walls = figures["phase_wall_s"]
            table.add_row(profile, str(size), f"{sim.per_action():,.1f}", f"{real_n:,.1f}" if real_n else "–",
                          f"{sim.per_action() / real_n:.3f}" if real_n else "–", kinds,
                          f"{figures['notifications_per_action']:,.1f} / "
                          f"{figures['bytes_from_server_per_action'] / 1024:,.1f}",
                          f"{statistics.median(sim.converge_ms['join']):g} / "
                          f"{statistics.median(sim.converge_ms['crash']):g}",
                          f"{r['join_p50_ms']:.0f} / {r['crash_p50_ms']:.0f}" if r else "–",
                          f"{sum(walls['cold']):.1f} / {statistics.median(walls['join']):.1f} / "
                          f"{statistics.median(walls['crash']):.1f}")
            out.append({**figures, "real": r})
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2, default=str))


if __name__ == "__main__":
    main()
