"""ZooKeeper requests per join and crash: the simulator against the real benchmark, measured in the same run.

The simulated group (zkconsumer/sim/herd.py) is benchmarks/rebalance.py's: N members with fetching off, 2N
partitions, Range, a join then a crash of the first member in id order, `--rounds` times, every request ZooKeeper
received counted (pings included) over the actions. The real side runs benchmarks/rebalance.py's own scenario
(benchmarks/rebalancing/) on a real ZooKeeper for `--real-sizes`, one process per 25 members as that benchmark's
scaling runs do. Printed: per profile and size, requests per action simulated and real, their ratio, the simulated
requests by kind, the convergence times (simulated: no service time yet, so the simulator's are a floor) and the
simulator's wall time.
Run: .venv/bin/python benchmarks/herd_sim.py [--sizes 10 50 200] [--real-sizes 10 50] [--rounds 3]
"""

from __future__ import annotations

import argparse
import logging
import statistics

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
                "join / crash, sim (ms)", "join / crash p50, real (ms)", "sim wall (s)"):
        table.add_column(col)
    for profile in args.profiles:
        for size in args.sizes:
            with console.status(f"simulating {profile}, {size} members..."):
                sim = measure(profile, size, args.rounds, service=ServiceModel(args.zk_service).times)
            r = real.get((profile, size))
            kinds = ", ".join(f"{k} {n:g}" for k, n in sim.as_dict()["requests_by_kind"].items())
            real_n = r["zk_requests"] if r else None
            table.add_row(profile, str(size), f"{sim.per_action():,.1f}", f"{real_n:,.1f}" if real_n else "–",
                          f"{sim.per_action() / real_n:.3f}" if real_n else "–", kinds,
                          f"{statistics.median(sim.converge_ms['join']):g} / "
                          f"{statistics.median(sim.converge_ms['crash']):g}",
                          f"{r['join_p50_ms']:.0f} / {r['crash_p50_ms']:.0f}" if r else "–", f"{sim.wall_s:.1f}")
    console.print(table)


if __name__ == "__main__":
    main()
