"""Nemesis rates of the simulated worlds at a chosen number of seeds, as one result record (results/README.md).

Each world is one ``zkconsumer sim`` run on Spark (``--shrink 0``: a rate, not reproducers); its ``results.json``
becomes the world's figures, with the per-seed trace hashes so a later run can be checked seed by seed.

    .venv/bin/python benchmarks/sim_rates.py --seeds 200 --worlds coordinator,cooperative-sticky,static,migrate \
        --record results/sim-rates-200.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from records import write_record  # noqa: E402

from zkconsumer.results.record import Scope  # noqa: E402

# a world's name and the arguments of `zkconsumer sim` that select it
WORLDS: dict[str, list[str]] = {
    "kafka-0.8": ["--profile", "kafka-0.8"],
    "default": ["--profile", "default"],
    "coordinator": ["--variant", "coordinator"],
    "cooperative-sticky": ["--variant", "cooperative-sticky"],
    "static": ["--variant", "static"],
    # the migration's recorded 40 seeds ran with the zk-side actions of the lab's migrate mode
    "migrate": ["--mode", "migrate", "--actions", "join,stop,kill,restart,bounce,pause,expire,kill-broker"],
}


def run_world(name: str, seeds: int, first_seed: int, master: str, out: Path) -> dict:
    """Run one world's seeds and return its results.json, with the exact command that made it."""
    cmd = [str(Path(sys.executable).with_name("zkconsumer")), "sim", *WORLDS[name], "--seeds", str(seeds),
           "--first-seed", str(first_seed), "--shrink", "0", "--master", master, "--out", str(out)]
    started = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{name}: `{' '.join(cmd)}` failed ({done.returncode}):\n{done.stderr[-2000:]}")
    results = json.loads((out / "results.json").read_text())
    # per seed what a later run is checked against (its verdict, what broke, its trace's hash, how a migration
    # ended), not the whole plan each migrate seed carries
    keep = ("seed", "verdict", "broken", "trace_sha256")
    results["seeds"] = [{k: s[k] for k in keep if k in s}
                        | ({"migration": s["migration"].get("result")} if "migration" in s else {})
                        for s in results.get("seeds", [])]
    results["command"] = "zkconsumer " + " ".join(cmd[1:-2])
    results["elapsed_seconds"] = round(time.monotonic() - started, 1)
    return results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=200)
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--worlds", default="coordinator,cooperative-sticky,static,migrate",
                   help=f"comma-separated, of: {', '.join(WORLDS)}")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--record", type=Path, help="write the result record there")
    args = p.parse_args()
    worlds = args.worlds.split(",")
    unknown = [w for w in worlds if w not in WORLDS]
    if unknown:
        p.error(f"unknown world(s) {', '.join(unknown)}; known: {', '.join(WORLDS)}")
    figures: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="sim-rates-") as tmp:
        for name in worlds:
            print(f"{name}: {args.seeds} seeds from {args.first_seed} ...", flush=True)
            figures[name] = run_world(name, args.seeds, args.first_seed, args.master, Path(tmp) / name)
            r = figures[name]
            print(f"  {r['verdict']}; {r['schedules_per_minute']} schedules a minute; breaches {r['breaches']}",
                  flush=True)
            if args.record:  # written after each world, so an interrupted run keeps what it finished
                write_record(args.record, {"seeds": args.seeds, "first_seed": args.first_seed, "master": args.master,
                                           "worlds": worlds}, figures, Scope.SIM)


if __name__ == "__main__":
    main()
