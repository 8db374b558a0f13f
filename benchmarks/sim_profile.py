"""Where a simulated schedule's time goes (issue 54, item 6): nemesis seeds of each world run under cProfile, their
functions' own time summed by the part of the system the code belongs to.

The parts: kafka-python (the coordinator-mode members' client and the lab's producer), the members' own code
(zkconsumer's consumer, migration, ZooKeeper and assignment layers), kazoo, the project's broker and coordinator, the
simulator's runtime (tasks, scheduler, network, the routing of sockets), its ZooKeeper model, its checkers and the
trace, and Python itself (the standard library and built-ins). The baseline, in the same run: the default profile's
0.8 members, whose broker is the simulator's own model (sim/broker.py) rather than the project's broker spoken to in
frames. Printed: simulated seconds per wall second and each part's share of the profiled time, per world; cProfile
slows everything about alike, so the shares, not the wall times, are the result.

Run: .venv/bin/python benchmarks/sim_profile.py [--seeds 3] [--first-seed 0] [--worlds default,coordinator,migrate]
     [--record results/sim-profile.json]
"""

from __future__ import annotations

import argparse
import cProfile
import logging
import pstats
import time
from collections import Counter
from pathlib import Path

from records import write_record
from rich.table import Table

from zkconsumer.consoles import make_console
from zkconsumer.results.record import Scope
from zkconsumer.scenario.model import LabMode
from zkconsumer.sim.runs import SimJob, SourceKind, run_seed

#: (part, path fragments): the first whose fragment a function's file contains names its part
PARTS: list[tuple[str, tuple[str, ...]]] = [
    ("kafka-python", ("site-packages/kafka/", "<codegen")),
    ("kazoo", ("site-packages/kazoo/",)),
    ("simulator: ZooKeeper model", ("zkconsumer/sim/zookeeper", "zkconsumer/sim/zk_")),
    ("simulator: checkers and trace", ("zkconsumer/sim/checkers", "zkconsumer/trace.py")),
    ("simulator: runtime (tasks, scheduler, network, routing)", ("zkconsumer/sim/",)),
    ("broker, coordinator, log", ("zkconsumer/broker/", "zkconsumer/coordinator/", "zkconsumer/log/",
                                  "zkconsumer/wire/")),
    ("members (consumer, migration, zk, assignment)", ("zkconsumer/",)),
    ("Python (standard library, built-ins)", ("",)),
]

WORLDS = {
    "default": SimJob("default", SourceKind.NEMESIS),
    "coordinator": SimJob(kind=SourceKind.NEMESIS, variant="coordinator", mode=LabMode.COORDINATOR),
    "migrate": SimJob(kind=SourceKind.NEMESIS, mode=LabMode.MIGRATE),
}


def part_of(filename: str) -> str:
    return next(name for name, fragments in PARTS if any(f in filename for f in fragments))


def profile_world(job: SimJob, seeds: list[int]) -> dict:
    shares: Counter[str] = Counter()
    wall = virtual = 0.0
    for seed in seeds:
        profiler = cProfile.Profile()
        started = time.perf_counter()
        profiler.enable()
        result = run_seed(job, seed)
        profiler.disable()
        wall += time.perf_counter() - started
        virtual += result.virtual_ms / 1000
        for (filename, _, _), (_, _, own, _, _) in pstats.Stats(profiler).stats.items():
            shares[part_of(filename)] += own
    total = sum(shares.values())
    return {"seeds": len(seeds), "wall_s": round(wall, 2), "simulated_s": round(virtual, 1),
            "simulated_per_wall": round(virtual / wall, 2),
            "shares": {name: round(shares[name] / total, 4) for name, _ in PARTS}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--worlds", default="default,coordinator,migrate")
    parser.add_argument("--record", type=Path, help="also write the result as JSON (results/README.md)")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the members' warnings under faults are expected; the profile is the output
    console = make_console()
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    worlds = [w.strip() for w in args.worlds.split(",") if w.strip()]
    figures = {}
    for world in worlds:
        with console.status(f"profiling {world}: seeds {seeds[0]}..{seeds[-1]}"):
            figures[world] = profile_world(WORLDS[world], seeds)
    table = Table(title=f"where a schedule's time goes ({args.seeds} nemesis seeds per world, under cProfile)")
    table.add_column("part")
    for world in worlds:
        table.add_column(world, justify="right")
    for name, _ in PARTS:
        table.add_row(name, *(f"{figures[w]['shares'][name]:.1%}" for w in worlds))
    table.add_row("simulated s per wall s", *(f"{figures[w]['simulated_per_wall']:.2f}" for w in worlds))
    base = figures.get("default")
    if base:
        table.add_row("÷ default's", *(f"{figures[w]['simulated_per_wall'] / base['simulated_per_wall']:.2f}"
                                       for w in worlds))
    console.print(table)
    if args.record:
        write_record(args.record, vars(args), figures, Scope.SIM)


if __name__ == "__main__":
    main()
