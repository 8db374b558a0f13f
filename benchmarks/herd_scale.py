"""The herd at internet scale, in simulation: 0.8's ZooKeeper rebalance (both profiles) against the broker-side
coordinator (eager and cooperative), one member joining and one leaving, 10 to 10,000 members (issue 41).

Each design runs the same group as benchmarks/rebalance.py's: N members, one topic of 2N partitions, a cold start,
then ``--rounds`` × (a join, the first member in id order gone). 0.8: zkconsumer's own connector on the simulated
ZooKeeper (zkconsumer/sim/herd.py), the server charging its measured service times (``--zk-service lab``). The
coordinator: zkconsumer's own broker request path and coordinator on virtual time, the members' classic group loop
(zkconsumer/sim/coordinator_herd.py), the broker charging the CPU per request measured on this machine
(``LAB_COORDINATOR``; ``--fit-coordinator`` measures it again). The members' own CPU is free on both sides: each is
on a host of its own.

Printed per design and size: the server's requests per action (by kind), the watch notifications (0.8), the bytes
from the server, rebalance attempts (0.8) or generations (the coordinator) per action, the simulated convergence
time, the rebalances given up, and the wall time (cold start / per join / per crash). A size runs only when the
last one's wall, scaled by ``(size ratio)^SCALE_EXPONENT``, fits ``--budget-s``; a skipped size says what it would
have taken. Each row's ratios are to the default profile's row of the same size in the same run. ``--plot``
draws the log-log figure: requests per action and convergence time against members.

Run: .venv/bin/python benchmarks/herd_scale.py [--sizes 10 50 200 1000 5000 10000]
     [--designs default kafka-0.8 eager cooperative] [--rounds 3] [--budget-s 600] [--json F] [--plot F.png]
     [--fit-coordinator] [--from F.json ... --plot F.png]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
from pathlib import Path

from rich.table import Table

from zkconsumer.consoles import make_console
from zkconsumer.sim import coordinator_herd, herd
from zkconsumer.sim.coordinator_fit import measure_cost
from zkconsumer.sim.zk_service import ServiceModel

ZOOKEEPER = ("default", "kafka-0.8")
COORDINATOR = ("eager", "cooperative")
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
    ap.add_argument("--json", type=Path)
    ap.add_argument("--plot", type=Path)
    ap.add_argument("--from", dest="sources", type=Path, nargs="+",
                    help="draw --plot from these --json files (runs of other sizes or designs) instead of simulating")
    args = ap.parse_args()
    console = make_console()
    logging.disable(logging.ERROR)
    if args.fit_coordinator:
        with console.status("measuring the live coordinator at 10, 100 and 1,000 members, twice..."):
            cost, samples = measure_cost()
        for s in samples:
            console.print(f"{s.size:>5} members  {s.api:<10} {s.requests:>5} requests  "
                          f"{s.cpu_us / s.requests:8.1f} µs each  {s.bytes / s.requests:7.1f} B each", highlight=False)
        console.print(f"fit: {cost}", highlight=False)
        return
    if args.sources:
        rows = [r for f in args.sources for r in json.loads(f.read_text())]
        if args.plot:
            plot(rows, args.plot)
            console.print(f"plot: {args.plot} ({len(rows)} rows)")
        return
    service = ServiceModel(args.zk_service).times
    table = Table(title="The herd, simulated: requests per join or leave, by design and size")
    for col in ("design", "members", "server requests / action", "by kind", "notifications / action",
                "KB from server / action", "attempts or generations / action", "join / leave (ms, sim)",
                "given up", "÷ default (same run, size): requests / join time", "wall: cold / join / leave (s)"):
        table.add_column(col)
    out = []
    baseline: dict[int, dict] = {}  # the default profile's rows, by size: the ratios' baseline
    for design in args.designs:
        last: tuple[int, float] | None = None
        for size in args.sizes:
            if last is not None and (estimate := last[1] * (size / last[0]) ** SCALE_EXPONENT) > args.budget_s:
                console.print(f"{design}: {size:,} members skipped: about {estimate:,.0f} s of wall time "
                              f"({last[0]:,} took {last[1]:,.0f} s), over --budget-s {args.budget_s:g}",
                              highlight=False)
                out.append({"design": design, "size": size, "skipped_estimate_s": round(estimate)})
                continue
            rounds = args.rounds if size < 1000 else 1
            with console.status(f"simulating {design}, {size:,} members..."):
                row = (_zookeeper(design, size, rounds, service) if design in ZOOKEEPER
                       else _coordinator(design, size, rounds))
            last = (size, row["wall_s"])
            out.append(row)
            if "collapsed" in row:
                console.print(f"{design}, {size:,} members: collapsed: {row['collapsed']}; starts given up "
                              f"{row['starts_given_up']}, the first {row['first_given_up']}", highlight=False)
                last = (size, float("inf"))  # larger groups would not settle either
                if args.json:
                    args.json.write_text(json.dumps(out, indent=2))
                continue
            if design == "default":
                baseline[size] = row
            base = baseline.get(size)
            ratio = "–" if base is None else (f"{row['requests_per_action'] / base['requests_per_action']:.2f} / "
                                              f"{row['join_ms'] / max(1, base['join_ms']):.2f}")
            row["vs_default"] = ratio
            table.add_row(design, f"{size:,}", f"{row['requests_per_action']:,.1f}",
                          ", ".join(f"{k} {v:,.1f}" for k, v in row["by_kind"].items()),
                          "–" if row["notifications_per_action"] is None else f"{row['notifications_per_action']:,.1f}",
                          f"{row['kb_from_server_per_action']:,.1f}", f"{row['attempts_per_action']:,.2f}",
                          f"{row['join_ms']:,.0f} / {row['leave_ms']:,.0f}", str(row["given_up"]), ratio,
                          f"{row['wall_cold_s']:.1f} / {row['wall_join_s']:.1f} / {row['wall_leave_s']:.1f}")
            if args.json:
                args.json.write_text(json.dumps(out, indent=2))
    console.print(table)
    if args.plot:
        plot(out, args.plot)
        console.print(f"plot: {args.plot}")


def _zookeeper(profile: str, size: int, rounds: int, service) -> dict:  # noqa: ANN001
    r = herd.measure(profile, size, rounds, service=service)
    d = r.as_dict()
    walls = r.phase_wall_s
    if r.collapsed:  # the group never settled: the answer at this size, with who gave up first
        return {"design": profile, "size": size, "rounds": rounds, "collapsed": r.collapsed,
                "starts_given_up": len(r.starts_given_up), "first_given_up": r.starts_given_up[:1],
                "wall_s": r.wall_s, "wall_cold_s": sum(walls["cold"]), "detail": d}
    return {"design": profile, "size": size, "rounds": rounds, "requests_per_action": r.per_action(),
            "by_kind": {k: n / r.actions for k, n in sorted(r.requests.items())},
            "notifications_per_action": r.notifications / r.actions,
            "kb_from_server_per_action": r.bytes_from_server / r.actions / 1024,
            "attempts_per_action": r.stats["attempts"] / r.actions,
            "conflicts_per_action": r.stats["claim_conflicts"] / r.actions,
            "given_up": r.stats["failed_rebalances"],
            "join_ms": statistics.median(r.converge_ms["join"]), "leave_ms": statistics.median(r.converge_ms["crash"]),
            "wall_s": r.wall_s, "wall_cold_s": sum(walls["cold"]), "wall_join_s": statistics.median(walls["join"]),
            "wall_leave_s": statistics.median(walls["crash"]), "detail": d}


def _coordinator(protocol: str, size: int, rounds: int) -> dict:
    r = coordinator_herd.measure(protocol, size, rounds, cost=coordinator_herd.LAB_COORDINATOR)
    return {"design": protocol, "size": size, "rounds": rounds, "requests_per_action": r.per_action(),
            "by_kind": {k: n / r.actions for k, n in sorted(r.requests.items())},
            "notifications_per_action": None,
            "kb_from_server_per_action": r.bytes_from_server / r.actions / 1024,
            "attempts_per_action": sum(r.generations) / r.actions, "conflicts_per_action": 0, "given_up": 0,
            "join_ms": statistics.median(r.converge_ms["join"]), "leave_ms": statistics.median(r.converge_ms["crash"]),
            "wall_s": r.wall_s, "wall_cold_s": sum(r.phase_wall_s["cold"]),
            "wall_join_s": statistics.median(r.phase_wall_s["join"]),
            "wall_leave_s": statistics.median(r.phase_wall_s["crash"]), "detail": r.as_dict()}


def plot(rows: list[dict], path: Path) -> None:
    """Two log-log panels: the server's requests per action, and the simulated join's convergence, by members."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = {"default": "0.8, zkconsumer default profile", "kafka-0.8": "0.8, kafka-0.8 profile",
              "eager": "coordinator, eager (range)", "cooperative": "coordinator, cooperative-sticky"}
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    for design in labels:
        done = [r for r in rows if r["design"] == design and "requests_per_action" in r]
        if not done:
            continue
        sizes = [r["size"] for r in done]
        style = "-o" if design in ZOOKEEPER else "--s"
        left.plot(sizes, [r["requests_per_action"] for r in done], style, label=labels[design])
        right.plot(sizes, [max(1, r["join_ms"]) for r in done], style, label=labels[design])
    left.set(xscale="log", yscale="log", xlabel="members", ylabel="server requests per join or leave",
             title="The herd: requests per membership change")
    right.set(xscale="log", yscale="log", xlabel="members", ylabel="join converged after (ms, simulated)",
              title="Time to a settled group after a join")
    for ax in (left, right):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
