"""What a paused member did between waking and learning it had been fenced: read from a catalogue run directory.

A member paused past its session is fenced by the coordinator, and its partitions go to others; it learns so only
from its next heartbeat's answer. Whatever it hands out before that is a zombie delivery, judged as "two live owners"
when another member already delivers the partition. For every run of a catalogue directory (``zkconsumer catalogue
--out DIR``) whose scenario pauses a member, this prints the overlaps the analysis found, the records the paused
member delivered from its wake until its first release, how many of them were fetched after the wake (offsets past
the log's end at the pause: no prefetch explains them), the milliseconds until it learned, and whether its offset
commit was refused (the fence that keeps a zombie's records from being committed). Issue 54 item 3 asked whether
KIP-848's owner-held breach on Kafka 4.1.1 is Kafka's behaviour or the harness's; docs/failure-modes.md, mode b, has
the answer this prints.

Run: .venv/bin/python benchmarks/zombie_window.py DIR [--variant consumer-protocol-kafka-4] [--record FILE]
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

from records import write_record
from rich.table import Table

from zkconsumer.consoles import make_console
from zkconsumer.results.record import Scope

#: the lab writes its heal line after SIGCONT: deliveries this close before it are after the wake
WAKE_SLACK_MS = 50


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def window(run: Path) -> dict | None:
    """One run's figures, or None when no member was paused in it."""
    traces = run / "traces"
    lab = _lines(traces / "lab.jsonl")
    paused = next((r for r in lab if r["event"] == "fault_injected" and r.get("fault") == "pause"), None)
    healed = next((r for r in lab if r["event"] == "fault_healed" and r.get("fault") == "pause"), None)
    if paused is None or healed is None:
        return None
    target = paused["target"]
    member = _lines(traces / f"{target}.jsonl")
    woke = healed["ts"] - WAKE_SLACK_MS
    learned = next((r["ts"] for r in member if r["ts"] >= woke and r["event"] in ("released", "session_expired")), None)
    last_before: dict[int, int] = {}
    for r in member:
        if r["event"] == "record_delivered" and r["ts"] < paused["ts"]:
            last_before[r["partition"]] = r["offset"]
    zombie = [r for r in member if r["event"] == "record_delivered" and r["ts"] >= woke
              and (learned is None or r["ts"] <= learned)]
    # 100 records a second over the topic's partitions: more than a second's worth past the last one handed out
    # before the pause cannot have been in the member's buffer then
    fetched_after = [r for r in zombie if r["offset"] > last_before.get(r["partition"], -1) + 20]
    overlaps = list(csv.DictReader((run / "report" / "tables" / "overlaps.csv").open()))
    log = (run / "logs" / f"{target.removeprefix('lab_')}.log")
    text = log.read_text() if log.exists() else ""
    return {"run": run.parent.name, "target": target, "overlaps": len(overlaps),
            "overlap_ms": [int(o["overlap_ms"]) for o in overlaps], "delivered_after_wake": len(zombie),
            "fetched_after_wake": len(fetched_after), "learned_after_ms": (learned - healed["ts"]) if learned else None,
            "commit_refused": "UNKNOWN_MEMBER_ID" in text or "FENCED" in text}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path, help="a catalogue run directory (zkconsumer catalogue --out DIR)")
    ap.add_argument("--variant", default="consumer-protocol-kafka-4")
    ap.add_argument("--record", type=Path, help="write the result record (results/README.md) there")
    args = ap.parse_args()
    runs = sorted(args.dir.glob(f"*/run-*/{args.variant}"), key=lambda p: (p.parent.parent.name,
                                                                          int(p.parent.name.split("-")[1])))
    rows = [w for w in map(window, runs) if w is not None]
    table = Table(title=f"{args.variant}: the paused member between its wake and learning it was fenced")
    for col in ("run", "overlaps (ms)", "delivered after wake", "of them fetched after wake", "learned after",
                "its commit refused"):
        table.add_column(col)
    for w in rows:
        table.add_row(w["run"], f"{w['overlaps']} {w['overlap_ms'] or ''}", str(w["delivered_after_wake"]),
                      str(w["fetched_after_wake"]), f"{w['learned_after_ms']} ms",
                      "yes" if w["commit_refused"] else "no")
    make_console().print(table)
    breaking = [w for w in rows if w["overlaps"]]
    summary = {"runs": len(rows), "with_overlaps": len(breaking),
               "overlaps_all_zombie": all(w["delivered_after_wake"] for w in breaking),
               "delivered_after_wake_in": sum(1 for w in rows if w["delivered_after_wake"]),
               "commit_refused_in": sum(1 for w in rows if w["commit_refused"])}
    make_console().print(summary, highlight=False)
    if args.record:
        write_record(args.record, {"dir": str(args.dir), "variant": args.variant}, {"summary": summary, "runs": rows},
                     Scope.LAB)


if __name__ == "__main__":
    main()
