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

Calibrated time (issue 41): on the lab's 2 cores a real herd is CPU-bound, so ``--machine lab`` runs the simulated
members and server on 2 shared cores at costs fitted to a real run's CPU (zkconsumer/sim/cpu.py, cpu_fit.py), and
the table gives simulated ÷ real convergence times. ``--fit`` prints those costs from the real groups' CPU (run
now, or ``--real-from`` a file an earlier ``--real-out`` wrote: the real groups need a quiet machine, the simulation
does not, its times being virtual).

Run: .venv/bin/python benchmarks/herd_sim.py [--sizes 10 50 200] [--real-sizes 10 50] [--rounds 3]
     [--budget-s 600] [--json FILE] [--machine lab] [--warmup 3] [--real-out FILE | --real-from FILE] [--fit]
     [--record FILE]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rebalancing.scenario import run_scenario, warm_up
from records import write_record
from rich.table import Table

from zkconsumer.consoles import make_console
from zkconsumer.results.record import Scope
from zkconsumer.sim.cpu import LAB_MACHINE
from zkconsumer.sim.cpu_fit import CpuSample, explained, fit_machine, reads_and_writes
from zkconsumer.sim.herd import measure
from zkconsumer.sim.zk_codes import RequestKind
from zkconsumer.sim.zk_service import INSTANT, ServiceModel
from zkconsumer.zk.server import ZooKeeperServer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[10, 50, 200])
    ap.add_argument("--real-sizes", type=int, nargs="*", default=[10, 50])
    ap.add_argument("--real-out", type=Path, help="write the real groups' figures there (to simulate later)")
    ap.add_argument("--real-from", type=Path,
                    help="the real groups' figures from an earlier --real-out instead of running them (the real "
                         "runs need a quiet machine, the simulation does not: its times are virtual)")
    ap.add_argument("--profiles", nargs="+", default=["default", "kafka-0.8"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=0,
                    help="real groups: at most N unmeasured scenarios first, until ZooKeeper's JIT is quiet "
                         "(benchmarks/rebalance.py's --warmup; 3 for times worth comparing)")
    ap.add_argument("--zk-service", choices=[m.value for m in ServiceModel], default=ServiceModel.NONE.value,
                    help="the simulated server's service times (none: answered at once; lab: measured)")
    ap.add_argument("--machine", choices=["none", "lab"], default="none",
                    help="lab: the members and the server share the lab machine's 2 cores, at the costs fitted to "
                         "a real run (zkconsumer/sim/cpu.py LAB_MACHINE; it replaces --zk-service); none: CPU is free")
    ap.add_argument("--fit", action="store_true",
                    help="fit the machine's costs to the real groups (run, or --real-from): simulate each real size "
                         "with CPU free, fit the CPU per action over its traffic, print the costs")
    ap.add_argument("--budget-s", type=float, default=600.0,
                    help="skip a size whose estimated wall time (the last size's, scaled by N²) exceeds this")
    ap.add_argument("--json", type=Path, help="write every figure there")
    ap.add_argument("--record", type=Path, metavar="FILE",
                    help="write the result record (results/README.md) there: the table's figures (--fit: the fit's)")
    args = ap.parse_args()
    console = make_console()
    logging.disable(logging.ERROR)
    real: dict[tuple[str, int], dict] = {}
    if args.real_from:
        real = {(r["profile"], r["size"]): r for r in json.loads(args.real_from.read_text())}
    elif args.real_sizes:
        with ZooKeeperServer(quick_start=False) as server:
            warm_up(console, server.connect_string, server.nodes[0].pid, argparse.Namespace(
                sizes=args.real_sizes, implementations=args.profiles, warmup=args.warmup, partitions_per_consumer=2,
                consumers_per_process=25))
            for size in args.real_sizes:
                for profile in args.profiles:
                    with console.status(f"real group: {profile}, {size} members..."):
                        real[(profile, size)] = run_scenario(server.connect_string, profile, size, 2 * size,
                                                             args.rounds, max(1, size // 25),
                                                             zk_pid=server.nodes[0].pid)
        if args.real_out:
            args.real_out.write_text(json.dumps(list(real.values()), indent=2, default=str))
    settings = vars(args)
    if args.fit:
        fitted = fit(console, real, args.rounds)
        if args.record:
            write_record(args.record, settings, fitted, Scope.SIM_AND_LAB)
        return
    machine = LAB_MACHINE if args.machine == "lab" else None
    service = machine.server if machine is not None else ServiceModel(args.zk_service).times
    table = Table(title="ZooKeeper requests per join or crash: simulated and real (same run)")
    for col in ("profile", "members", "simulated", "real", "sim ÷ real", "simulated by kind (per action)",
                "notifications / KB from server (per action)", "join / crash, sim (ms)",
                "join / crash p50, real (ms)", "time sim ÷ real: join / crash", "sim wall: cold / join / crash (s)"):
        table.add_column(col)
    out = []
    rows: list[dict[str, Any]] = []  # the table's figures, for the record
    for profile in args.profiles:
        last: tuple[int, float] | None = None
        for size in args.sizes:
            if last is not None and (estimate := last[1] * (size / last[0]) ** 2) > args.budget_s:
                console.print(f"{profile}: {size} members skipped: about {estimate:,.0f} s of wall time "
                              f"({last[0]} members took {last[1]:,.0f} s; N² from there), over --budget-s "
                              f"{args.budget_s:g}", highlight=False)
                out.append({"profile": profile, "size": size, "skipped_estimate_s": round(estimate)})
                rows.append({"profile": profile, "size": size, "skipped_estimate_s": estimate})
                continue
            with console.status(f"simulating {profile}, {size} members..."):
                sim = measure(profile, size, args.rounds, service=service, machine=machine)
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
                          f"{statistics.median(sim.converge_ms['join']) / r['join_p50_ms']:.2f} / "
                          f"{statistics.median(sim.converge_ms['crash']) / r['crash_p50_ms']:.2f}" if r else "–",
                          f"{sum(walls['cold']):.1f} / {statistics.median(walls['join']):.1f} / "
                          f"{statistics.median(walls['crash']):.1f}")
            out.append({**figures, "real": r})
            sim_join = statistics.median(sim.converge_ms["join"])
            sim_crash = statistics.median(sim.converge_ms["crash"])
            rows.append({
                "profile": profile, "size": size, "sim_requests_per_action": sim.per_action(),
                "real_requests_per_action": real_n,
                "requests_sim_to_real": sim.per_action() / real_n if real_n else None,
                "sim_requests_by_kind_per_action": figures["requests_by_kind"],
                "sim_notifications_per_action": figures["notifications_per_action"],
                "sim_bytes_from_server_per_action": figures["bytes_from_server_per_action"],
                "sim_join_ms": sim_join, "sim_crash_ms": sim_crash,
                "real_join_p50_ms": r["join_p50_ms"] if r else None,
                "real_crash_p50_ms": r["crash_p50_ms"] if r else None,
                "join_time_sim_to_real": sim_join / r["join_p50_ms"] if r else None,
                "crash_time_sim_to_real": sim_crash / r["crash_p50_ms"] if r else None,
                "sim_wall_cold_s": sum(walls["cold"]), "sim_wall_join_s": statistics.median(walls["join"]),
                "sim_wall_crash_s": statistics.median(walls["crash"])})
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2, default=str))
    if args.record:
        write_record(args.record, settings, {"rows": rows}, Scope.SIM_AND_LAB if real else Scope.SIM)


def per_action_cpu_us(r: dict, side: str) -> float:
    """A real group's CPU per action on ``side`` (consumers, zookeeper), joins and crashes alike, in all (until the
    group is quiet again, as the simulated traffic is counted), less ZooKeeper's JIT compiler."""
    figures = [r["cpu_join_ms"], r["cpu_crash_ms"]]
    ms = [f[side] - (f.get("jit") or 0.0 if side == "zookeeper" else 0.0) for f in figures]
    return 1000.0 * statistics.fmean(ms)


def fit(console, real: dict[tuple[str, int], dict], rounds: int) -> dict[str, Any]:  # noqa: ANN001
    """Simulate each real group with CPU free, fit the machine's costs to the real CPU, print both (and return
    them, as the record's figures)."""
    samples = []
    for (profile, size), r in sorted(real.items()):
        with console.status(f"simulating {profile}, {size} members (CPU free)..."):
            sim = measure(profile, size, rounds, service=INSTANT).as_dict()
        reads, writes = reads_and_writes(sim["requests_by_kind"])
        samples.append(CpuSample(profile, size, sim["notifications_per_action"],
                                 sim["requests_per_action"], sim["bytes_from_server_per_action"], reads, writes,
                                 per_action_cpu_us(r, "consumers"), per_action_cpu_us(r, "zookeeper")))
    machine = fit_machine(samples, cores=2, source="fitted by benchmarks/herd_sim.py --fit")
    table = Table(title="CPU per action (ms): the real groups, and what the fitted costs charge their simulated "
                        "traffic")
    for col in ("profile", "members", "notifications", "replies", "KB received", "reads", "writes",
                "consumers real", "consumers fitted", "ZooKeeper real", "ZooKeeper fitted"):
        table.add_column(col)
    rows = []
    for s in samples:
        consumers, server = explained(machine, s)
        rows.append({"profile": s.profile, "size": s.size, "notifications_per_action": s.notifications,
                     "replies_per_action": s.replies, "bytes_received_per_action": s.bytes_received,
                     "reads_per_action": s.reads, "writes_per_action": s.writes,
                     "consumers_real_cpu_ms": s.consumers_us / 1000, "consumers_fitted_cpu_ms": consumers / 1000,
                     "zookeeper_real_cpu_ms": s.server_us / 1000, "zookeeper_fitted_cpu_ms": server / 1000})
        table.add_row(s.profile, str(s.size), f"{s.notifications:,.1f}", f"{s.replies:,.1f}",
                      f"{s.bytes_received / 1024:,.1f}", f"{s.reads:,.1f}", f"{s.writes:,.1f}",
                      f"{s.consumers_us / 1000:,.1f}", f"{consumers / 1000:,.1f}", f"{s.server_us / 1000:,.1f}",
                      f"{server / 1000:,.1f}")
    console.print(table)
    console.print({p: c for p, c in machine.client.items()})
    server_costs = {"read_us": machine.server.total(RequestKind.GET_DATA),
                    "write_us": machine.server.total(RequestKind.CREATE)}
    console.print(server_costs)
    return {"rows": rows, "client_costs": {p: asdict(c) for p, c in machine.client.items()},
            "server_costs": server_costs}


if __name__ == "__main__":
    main()
