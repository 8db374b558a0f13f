"""A 2 s pause across the phase of the commits: simulated and real rates over the same phases (issue 54, item 4).

Nemesis seed 424203 of ``kafka-0.8`` shrinks to one 2 s pause of c1 under a 4 s session (2 members, 24.5 s). Whether
it costs the session depends on δ, how long before the pause the member last heard from the server (its last 1 s
offset commit): past 0.67 s the read timeout (2.67 s) runs out during the pause and the client drops its own
connection (docs/simulation.md, "A 2 s pause, and the phase of the commits"). A batch of real runs shares one start-up
latency, so one phase; the simulator draws each seed's. Here both sides sample the same phases: the pause is moved
across one commit period in ``--steps`` equal steps (14.5 s + k/steps), each file run ``--runs`` times on the real lab
(``compare`` on ``zookeeper-kafka-0.8``, judged on Spark) and over ``--sim-seeds`` interleavings in simulation.
The two rates, over all steps, are the comparison: the issue asks for agreement within a factor of 2.

Run: flock /tmp/zkc-bench.lock .venv/bin/python benchmarks/pause_phase.py [--steps 16] [--runs 1] [--sim-seeds 10]
     [--record results/pause-phase-sweep.json]
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path

from records import write_record
from rich.table import Table
from sim_replay import simulated

from zkconsumer.analysis.spark import build_session
from zkconsumer.consoles import make_console
from zkconsumer.lab.breach_rate import BreachRate
from zkconsumer.lab.catalogue import RunFigures
from zkconsumer.lab.compare import run_compare
from zkconsumer.scenario import reader as scenarios
from zkconsumer.scenario.plan import RunPlan

VARIANT = "zookeeper-kafka-0.8"
#: seed 424203's shrunk reproducer, its pause at ``{at}``
TEMPLATE = """name = "pause-phase-{k:02d}"
description = "nemesis seed 424203 of kafka-0.8, shrunk: one 2 s pause of c1, moved to {at:.4f} s"
duration = 24.5
members = 2
session_timeout_ms = 4000

[[actions]]
at = {at:.4f}
do = "pause"
member = "c1"
seconds = 2.0
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=16, help="pause times across one 1 s commit period")
    ap.add_argument("--runs", type=int, default=1, help="real runs per pause time")
    ap.add_argument("--sim-seeds", type=int, default=10, help="simulated interleavings per pause time")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--record", type=Path)
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    console = make_console()
    out = Path(tempfile.mkdtemp(prefix="zkconsumer-pause-phase-"))
    files = []
    for k in range(args.steps):
        path = out / f"pause-phase-{k:02d}.toml"
        path.write_text(TEMPLATE.format(k=k, at=14.5 + k / args.steps))
        files.append(path)
    rows = []
    session = build_session(args.master, "zkconsumer-pause-phase")
    try:
        for k, f in enumerate(files):
            sim_k, per = simulated(f, "kafka-0.8", args.sim_seeds)
            plan = RunPlan.from_scenario(scenarios.loads(f.read_text(), str(f)))
            runs = []
            for i in range(1, args.runs + 1):
                results = run_compare(plan, out / f.stem / f"run-{i}", [VARIANT], console, spark=session)
                runs += [RunFigures.of(r).judgement for r in results]
            rate = BreachRate(tuple(runs))
            rows.append({"pause_at": round(14.5 + k / args.steps, 4), "simulated_k": sim_k,
                         "simulated_n": args.sim_seeds, "simulated_invariants": per, "real_k": rate.k,
                         "real_n": rate.n, "real_broken": rate.broken_text})
            console.print(f"pause at {rows[-1]['pause_at']:.4f} s: simulated {sim_k}/{args.sim_seeds}, real "
                          f"{rate.k}/{rate.n} {rate.broken_text or ''}", highlight=False)
    finally:
        session.stop()
    sim_k, sim_n = sum(r["simulated_k"] for r in rows), sum(r["simulated_n"] for r in rows)
    real_k, real_n = sum(r["real_k"] for r in rows), sum(r["real_n"] for r in rows)
    table = Table(title=f"a 2 s pause across the commits' phase ({args.steps} pause times, {VARIANT})")
    for col in ("pause at (s)", "simulated", "real"):
        table.add_column(col)
    for r in rows:
        table.add_row(f"{r['pause_at']:.4f}", f"{r['simulated_k']}/{r['simulated_n']}", f"{r['real_k']}/{r['real_n']}")
    table.add_row("all", f"{sim_k}/{sim_n} ({sim_k / sim_n:.0%})", f"{real_k}/{real_n} ({real_k / real_n:.0%})")
    console.print(table)
    if args.record:
        write_record(args.record, {"steps": args.steps, "runs": args.runs, "sim_seeds": args.sim_seeds,
                                   "variant": VARIANT},
                     {"rows": rows, "simulated": {"k": sim_k, "n": sim_n}, "real": {"k": real_k, "n": real_n}})


if __name__ == "__main__":
    main()
