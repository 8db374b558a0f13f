"""Breaches the simulator found, replayed on the real lab: does each shrunk reproducer break real processes too?

Input: the reproducers ``zkconsumer sim --seeds N --shrink K --out DIR`` wrote (``DIR/reproducers/*.toml``, each a
scenario file). For each one, two rates:

* **simulated**: the reproducer over ``--sim-seeds`` interleavings (seeds 0..N-1; the seed it was shrunk under is
  only one of them), judged by the simulator's checkers;
* **real**: ``--runs`` runs of the same file on the real lab (``compare`` on ``--variant``: real members on a real
  ZooKeeper and the project's broker, judged on Spark), the baseline of the same run.

A reproducer agrees when it breaks in at least 1 of the real runs, as issue 39 asks; each that does not is a
difference for docs/simulation.md to explain by its mechanism. The invariants compared are the ones both judges
check (the lab's five); the simulator's extra ones (zombie deliveries, poll skips) are listed beside.

Run: flock /tmp/zkc-bench.lock .venv/bin/python benchmarks/sim_replay.py DIR [--runs 3] [--sim-seeds 50]
     [--variant zookeeper-kafka-0.8] [--pick 10] [--json FILE] [--record FILE]
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
from pathlib import Path

from records import write_record
from rich.table import Table

from zkconsumer.analysis.spark import build_session
from zkconsumer.consoles import make_console
from zkconsumer.lab.breach_rate import BreachRate
from zkconsumer.lab.catalogue import RunFigures
from zkconsumer.lab.compare import run_compare
from zkconsumer.results.record import Scope
from zkconsumer.scenario import reader as scenarios
from zkconsumer.scenario.plan import RunPlan
from zkconsumer.sim.many import run_local
from zkconsumer.sim.runs import SimJob, SourceKind


def simulated(path: Path, profile: str, seeds: int) -> tuple[int, dict[str, int]]:
    """Breaking interleavings of ``path`` out of ``seeds``, and per invariant how many broke it."""
    job = SimJob(profile, SourceKind.SCENARIO, scenario_text=path.read_text(), scenario_source=str(path))
    results = run_local(job, list(range(seeds)))
    per: dict[str, int] = {}
    for r in results:
        for i in r.broken:
            per[i] = per.get(i, 0) + 1
    return sum(1 for r in results if not r.ok), per


def actions_of(path: Path) -> str:
    s = scenarios.loads(path.read_text(), str(path))
    return "; ".join(f"{a.at}s {a.kind}{' ' + a.member if a.member else ''}"
                     f"{f' {a.seconds:g}s' if a.seconds else ''}" for a in s.actions) or "no action"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path, help="a zkconsumer sim --out directory (its reproducers/*.toml) or a folder "
                                           "of scenario files")
    ap.add_argument("--runs", type=int, default=3, help="real runs per reproducer (default 3; 0: "
                                                                 "the simulated half only)")
    ap.add_argument("--sim-seeds", type=int, default=50, help="simulated interleavings per reproducer (default 50)")
    ap.add_argument("--variant", default="zookeeper-kafka-0.8", help="the real lab's variant (default "
                                                                     "zookeeper-kafka-0.8)")
    ap.add_argument("--pick", type=int, default=10, help="replay the N reproducers that break most often in "
                                                         "simulation, one per schedule of actions (default 10)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--json", type=Path, help="write every figure there")
    ap.add_argument("--record", type=Path, help="write the result record (results/README.md) there")
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    console = make_console()
    folder = args.dir / "reproducers" if (args.dir / "reproducers").is_dir() else args.dir
    files = sorted(folder.glob("*.toml"))
    if not files:
        raise SystemExit(f"no reproducers (*.toml) in {folder}")
    profile = "kafka-0.8" if "kafka-0.8" in args.variant else "default"
    sims = {}
    for f in files:
        sims[f] = simulated(f, profile, args.sim_seeds)
        console.print(f"{f.name}: breaks in {sims[f][0]} of {args.sim_seeds} simulated interleavings "
                      f"({actions_of(f)})", highlight=False)
    chosen: list[Path] = []
    seen: set[str] = set()
    for f in sorted(files, key=lambda f: (-sims[f][0], f.name)):
        shape = actions_of(f)
        if sims[f][0] and shape not in seen and len(chosen) < args.pick:
            chosen.append(f)
            seen.add(shape)
    if args.runs <= 0:  # the simulated half alone (the real lab's rates are recorded elsewhere)
        rows = [{"reproducer": f.name, "actions": actions_of(f), "simulated_k": sims[f][0],
                 "simulated_n": args.sim_seeds, "simulated_invariants": sims[f][1]} for f in files]
        for r in rows:
            console.print(f"{r['reproducer']}: {r['simulated_k']}/{r['simulated_n']} "
                          f"{', '.join(f'{k} {v}' for k, v in sorted(r['simulated_invariants'].items()))}",
                          highlight=False)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=2))
        if args.record:
            write_record(args.record, {"runs": 0, "sim_seeds": args.sim_seeds,
                                       "reproducers": {f.name: f.read_text() for f in files}}, {"rows": rows},
                         Scope.SIM)
        return
    out = Path(tempfile.mkdtemp(prefix="zkconsumer-sim-replay-"))
    session = build_session(args.master, "zkconsumer-sim-replay")
    rows = []
    try:
        for f in chosen:
            plan = RunPlan.from_scenario(scenarios.loads(f.read_text(), str(f)))
            runs = []
            for i in range(1, args.runs + 1):
                console.rule(f"{f.name}: real run {i} of {args.runs}")
                results = run_compare(plan, out / f.stem / f"run-{i}", [args.variant], console, spark=session)
                runs += [RunFigures.of(r).judgement for r in results]
            rate = BreachRate(tuple(runs))
            k, per = sims[f]
            rows.append({"reproducer": f.name, "actions": actions_of(f), "simulated_k": k,
                         "simulated_n": args.sim_seeds, "simulated_invariants": per, "real_k": rate.k,
                         "real_n": rate.n, "real_broken": rate.broken_text, "agrees": rate.k >= 1})
    finally:
        session.stop()
    table = Table(title=f"shrunk reproducers: simulated vs real ({args.variant})")
    for col in ("reproducer", "actions", "simulated", "invariants (sim)", "real", "invariants (real)", "agrees"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["reproducer"], r["actions"], f"{r['simulated_k']}/{r['simulated_n']}",
                      ", ".join(f"{k} {v}" for k, v in sorted(r["simulated_invariants"].items())),
                      f"{r['real_k']}/{r['real_n']}", r["real_broken"] or "-", "yes" if r["agrees"] else "no")
    console.print(table)
    agree = sum(r["agrees"] for r in rows)
    console.print(f"{agree} of {len(rows)} reproducers break on the real lab in at least 1 of {args.runs} runs; "
                  f"runs under {out}", highlight=False)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    if args.record:
        write_record(args.record, {"runs": args.runs, "sim_seeds": args.sim_seeds, "variant": args.variant,
                                   "reproducers": {f.name: f.read_text() for f in chosen}}, {"rows": rows})


if __name__ == "__main__":
    main()
