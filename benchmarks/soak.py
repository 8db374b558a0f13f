"""Soak: a long lab run (30 minutes by default) with churn and the fault matrix's faults in rotation, then the
full Spark analysis; the run is clean when all five invariants hold (docs/faults.md).

One lab for the whole run: a 3-node ensemble, the broker in its own process, consumer c1 behind the TCP proxy,
records produced all along. Every ``--gap`` seconds the next fault of the rotation strikes: ZooKeeper leader
kill, two consumers kill -9'd and two fresh ones joining, follower kill, broker kill -9 and restart, c1 cut
off from ZooKeeper (blackhole) until its session expired, a join and a graceful stop, quorum loss. After each
fault the group must settle (every partition owned, Kafka's verify passing) before the next one.

Run: .venv/bin/python benchmarks/soak.py [--minutes 30] [--profile default] [--out soak-runs/<time>] [--record FILE]
(``make soak``; not part of ``make test``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

from records import write_record
from rich.console import Console

from zkconsumer.analysis.pipeline import run_analysis
from zkconsumer.analysis.spark import build_session
from zkconsumer.lab.faults import matrix
from zkconsumer.lab.faults.lab import FaultLab
from zkconsumer.results.record import Scope
from zkconsumer.scenario.plan import RunPlan


class Soak:
    def __init__(self, lab: FaultLab, console: Console) -> None:
        self.lab = lab
        self.console = console
        self.next_id = 2
        self.counts: dict[str, int] = {}

    def fresh(self) -> str:
        self.next_id += 1
        return f"c{self.next_id}"

    def kill_two(self, lab: FaultLab) -> None:
        victims = [m for m in lab.live_members() if m != "c1"][:2]
        lab.injected("consumers-kill", ",".join(victims), f"{' and '.join(victims)} killed with SIGKILL")
        for v in victims:
            lab.members.stop(v, kill=True)
        lab.wait(lambda: not {f"lab_{v}" for v in victims} & set(lab.registry.consumer_ids("lab")), 60,
                 "the killed consumers' sessions to expire")
        lab.healed("consumers-kill", "their sessions expired")
        for _ in victims:
            lab.members.start(self.fresh())

    def churn(self, lab: FaultLab) -> None:
        lab.members.start(self.fresh())
        lab.wait_settled(60)
        leaver = [m for m in lab.live_members() if m != "c1"][0]
        lab.members.stop(leaver)
        lab.wait(lambda: lab.procs[leaver].poll() is not None, 60, f"{leaver} to stop")
        lab.members.status[leaver] = "stopped"

    def rotation(self):
        return itertools.cycle([
            ("zk-leader", matrix.FAULTS["zk-leader"].drive), ("consumers-kill", self.kill_two),
            ("zk-follower", matrix.FAULTS["zk-follower"].drive), ("broker-kill", matrix.FAULTS["broker-kill"].drive),
            ("zk-cut", matrix.FAULTS["zk-cut"].drive), ("churn", self.churn),
            ("zk-quorum", matrix.FAULTS["zk-quorum"].drive)])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--gap", type=float, default=45.0, help="seconds between faults (after the group settled)")
    ap.add_argument("--consumers", type=int, default=4)
    ap.add_argument("--profile", default="default", choices=("default", "kafka-0.8"))
    ap.add_argument("--rate", type=float, default=50.0)
    ap.add_argument("--out", type=Path, default=Path("soak-runs") / time.strftime("%Y%m%d-%H%M%S"))
    ap.add_argument("--record", type=Path, metavar="FILE", help="write the result record (results/README.md) there")
    args = ap.parse_args()
    console = Console()
    plan = RunPlan(consumers=args.consumers, profile=args.profile, topics={"orders": 8, "payments": 4},
                   rate=args.rate, initial_records=50, session_timeout_ms=4000, commit_interval_ms=500, steps=[])
    started = time.monotonic()
    faults: list[dict] = []
    error = None
    lab = FaultLab(plan, args.out, zk_servers=3, broker_process=True, console=console)
    with lab:
        lab.behind_proxy("c1")
        lab.start_producing()
        for i in range(1, args.consumers + 1):
            lab.members.start(f"c{i}")
        soak = Soak(lab, console)
        soak.next_id = args.consumers
        try:
            lab.wait_settled(120)
            for name, drive in soak.rotation():
                if time.monotonic() - started > args.minutes * 60:
                    break
                t0 = time.monotonic()
                drive(lab)
                lab.wait_settled(120)
                faults.append({"fault": name, "seconds": round(time.monotonic() - t0, 1)})
                console.print(f"{time.strftime('%H:%M:%S')} {name}: settled after {faults[-1]['seconds']} s "
                              f"({len(lab.live_members())} consumers live)", highlight=False)
                # the next fault waits for this one's re-own deadline (heal + session timeout + 1 s) to pass
                spacing = plan.session_timeout_ms / 1000 + 2.0
                lab._stop_producing.wait(max(spacing, args.gap - (time.monotonic() - t0)))
            time.sleep(plan.session_timeout_ms / 1000 + 2.0)  # past the last fault's re-own deadline
            ends = lab.wait_caught_up(180)
        except Exception as e:  # noqa: BLE001 - reported, then the traces are analysed anyway
            error = f"{type(e).__name__}: {e}"
            ends = {}
            console.print(f"[red]{error}[/]")
    ran = time.monotonic() - started
    spark = build_session("local[2]", "zkconsumer-soak", shuffle_partitions=4, driver_memory="2g")
    res = run_analysis(spark, str(lab.traces), args.out / "report", console, from_zero=True)
    inv = res.invariants
    figures = {"minutes": round(ran / 60, 1), "profile": args.profile, "faults": len(faults),
               "by_fault": {k: sum(1 for f in faults if f["fault"] == k) for k in {f["fault"] for f in faults}},
               "max_settle_s": max((f["seconds"] for f in faults), default=None),
               "records_in_log": sum(ends.values()), "deliveries": res.summary.get("deliveries"),
               "duplicates": inv.duplicates, "lost": inv.lost, "overlaps": inv.overlaps,
               "duplicates_committed": inv.duplicates_committed, "commits_backwards": inv.commits_backwards,
               "unowned_after_heal": inv.unowned_after_heal,
               "max_reowned_ms_after_heal": max((f.get("latest_owner_since_heal_ms") or 0 for f in inv.faults),
                                                default=None),
               "group_rebalances": res.summary.get("group_rebalances"), "bad_lines": res.bad_lines,
               "analysis_s": round(res.seconds, 1), "error": error, "clean": inv.ok and error is None}
    (args.out / "soak.json").write_text(json.dumps(figures, indent=2))
    console.print_json(json.dumps(figures))
    console.print(f"report: {res.report_md}")
    if args.record:  # soak.json's figures, and each fault's settle time as printed
        write_record(args.record, vars(args),
                     {**figures, "settles": [{"fault": f["fault"], "settle_s": f["seconds"]} for f in faults]},
                     Scope.LAB)
    return 0 if figures["clean"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
