"""A 2 s pause in both worlds, run by run: how long before the pause the member last heard from ZooKeeper (δ), how
long its reconnect took after it woke, and whether its session survived (issue 54, item 4).

benchmarks/pause_phase.py compares the two worlds' breach rates over the same pause times. A rate mixes two things:
how often δ passes 0.67 s (the read timeout, 2.67 s, then runs out during the 2 s pause and the client drops its own
connection on waking), and, when it does, whether the reconnect (the Java client's 1 s + a random 0–1 s on the same
server, zk/handler.py) reaches the server before the session's expiry (4 s after the last request, rounded up to the
server's next 500 ms tick). This reads both from the traces: the real runs pause_phase.py left in its directory,
and ``--sim-seeds`` simulated interleavings of each of its scenario files, traced here. Per world: the runs by δ,
how many dropped their connection, how many lost their session, and the longest "last heard → reconnected" that
kept its session against the shortest that lost it. When the two worlds' rules agree run by run, a difference of
rates is a difference of δ, the start-up phase, which the real batch does not choose.

Run: .venv/bin/python benchmarks/pause_delta.py DIR [--sim-seeds 10] [--record FILE]
     (DIR: the zkconsumer-pause-phase-* directory benchmarks/pause_phase.py printed and left)
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
from pathlib import Path

from records import write_record
from rich.table import Table

from zkconsumer.consoles import make_console
from zkconsumer.sim.runs import SimJob, SourceKind, run_seed

#: the read timeout's share of the 2 s pause: past this δ the client drops its connection on waking (4 s × 2/3 − 2 s)
DROP_AFTER_MS = 667


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def wake(traces: Path) -> dict | None:
    """One run's δ and what followed the pause, from its trace directory (the lab's and c1's lines)."""
    lab = _lines(traces / "lab.jsonl")
    paused = next((r["ts"] for r in lab if r["event"] == "fault_injected"), None)
    if paused is None or not (traces / "lab_c1.jsonl").exists():
        return None
    c1 = _lines(traces / "lab_c1.jsonl")
    heard = [r["ts"] for r in c1 if r["event"] == "offset_committed" and r["ts"] < paused]
    after = [r for r in c1 if r["ts"] >= paused]
    suspended = next((r["ts"] for r in after if r["event"] == "connection_suspended"), None)
    reconnected = next((r for r in after if r["event"] == "reconnected"), None)
    expired = any(r["event"] == "session_expired" for r in after)
    delta = paused - heard[-1] if heard else None
    return {"delta_ms": delta, "dropped": suspended is not None, "expired": expired,
            "reconnect_after_wake_ms": (reconnected["ts"] - paused - 2000) if reconnected else None,
            "heard_to_reconnect_ms": (reconnected["ts"] - heard[-1]) if reconnected and heard else None}


def summary(rows: list[dict]) -> dict:
    late = [r for r in rows if r["delta_ms"] is not None and r["delta_ms"] >= DROP_AFTER_MS]
    kept = [r["heard_to_reconnect_ms"] for r in rows
            if r["dropped"] and not r["expired"] and r["heard_to_reconnect_ms"]]
    lost = [r["heard_to_reconnect_ms"] for r in rows if r["expired"] and r["heard_to_reconnect_ms"]]
    return {"runs": len(rows), "delta_past_drop": len(late), "dropped": sum(r["dropped"] for r in rows),
            "expired": sum(r["expired"] for r in rows),
            "dropped_with_delta_below_drop": sum(r["dropped"] for r in rows if (r["delta_ms"] or 0) < DROP_AFTER_MS),
            "expired_of_delta_past_drop": sum(r["expired"] for r in late),
            "longest_kept_ms": max(kept, default=None), "shortest_lost_ms": min(lost, default=None),
            "reconnect_after_wake_ms": sorted(r["reconnect_after_wake_ms"] for r in rows if r["dropped"]
                                              and r["reconnect_after_wake_ms"] is not None)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--sim-seeds", type=int, default=10)
    ap.add_argument("--record", type=Path)
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    console = make_console()
    real, sim = [], []
    for f in sorted(args.dir.glob("pause-phase-*.toml")):
        for traces in sorted((args.dir / f.stem).glob("run-*/*/traces")):
            if (w := wake(traces)) is not None:
                real.append({"file": f.stem, **w})
        job = SimJob("kafka-0.8", SourceKind.SCENARIO, scenario_text=f.read_text(), scenario_source=str(f))
        for seed in range(args.sim_seeds):
            with tempfile.TemporaryDirectory(prefix="zkconsumer-pause-delta-") as tmp:
                result = run_seed(job, seed, trace_dir=Path(tmp))
                if (w := wake(Path(tmp))) is not None:
                    sim.append({"file": f.stem, "seed": seed, "broken": list(result.broken), **w})
        console.print(f"{f.stem}: {len([r for r in real if r['file'] == f.stem])} real, "
                      f"{len([r for r in sim if r['file'] == f.stem])} simulated", highlight=False)
    both = {"real": summary(real), "simulated": summary(sim)}
    table = Table(title="a 2 s pause under a 4 s session: δ (last heard before the pause) and what followed")
    for col in ("world", "runs", f"δ ≥ {DROP_AFTER_MS} ms", "dropped on waking", "session lost",
                f"lost, of δ ≥ {DROP_AFTER_MS}", "heard → reconnected: longest kept / shortest lost (ms)",
                "reconnect after wake (ms)"):
        table.add_column(col)
    for world, s in both.items():
        waits = s["reconnect_after_wake_ms"]
        table.add_row(world, str(s["runs"]), str(s["delta_past_drop"]), str(s["dropped"]), str(s["expired"]),
                      f"{s['expired_of_delta_past_drop']} of {s['delta_past_drop']}",
                      f"{s['longest_kept_ms']} / {s['shortest_lost_ms']}",
                      f"{waits[0]}–{waits[-1]}" if waits else "-")
    console.print(table)
    if args.record:
        write_record(args.record, {"dir": str(args.dir), "sim_seeds": args.sim_seeds},
                     {**both, "real_runs": real, "simulated_runs": sim})


if __name__ == "__main__":
    main()
