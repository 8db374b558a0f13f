"""``zkconsumer lab --faults [names…]``: run the fault matrix, live, then one verdict line per fault.

Each fault runs on a fresh lab (its own ZooKeeper, broker and consumer processes) under
``<out>/<fault>-<profile>/``; the traces of all of them are then judged in one Spark session.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from zkconsumer.lab.faults.matrix import FAULTS, run_fault
from zkconsumer.lab.faults.verdict import Verdict, judge

STYLE = {"PASS": "green", "FAIL": "bold red", "KAFKA-0.8": "yellow"}


def run_matrix(names: list[str], profiles: list[str], out: Path, console: Console, master: str | None = None,
               session_timeout_ms: int = 4000, herd: int | None = None) -> list[Verdict]:
    from zkconsumer.analysis.spark import build_session

    # the lab's own producer and monitors talk to a broker the faults kill on purpose: kafka-python's connection
    # errors would bury the verdicts (the members' logs keep theirs, under <out>/<fault>/logs)
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    runs = []
    for profile in profiles:
        for name in names:
            with console.status(f"[bold]{name}[/] ({profile}): {FAULTS[name].description}…") as status:
                def on_event(text: str, status=status, name=name, profile=profile) -> None:
                    console.print(f"  [dim]{name}/{profile}[/] {text}", highlight=False)

                started = time.monotonic()
                run = run_fault(FAULTS[name], out / f"{name}-{profile}", profile, session_timeout_ms, herd,
                                on_event=on_event)
                status.update(f"{name} done in {time.monotonic() - started:.0f}s")
            console.print(f"{name} ({profile}) driven in {run.seconds:.0f}s"
                          + (f" — [red]{run.error}[/]" if run.error else ""), highlight=False)
            runs.append(run)
    with console.status("judging the traces with Spark…"):
        spark = build_session(master or "local[2]", "zkconsumer-faults", shuffle_partitions=2, driver_memory="1g")
        verdicts = [judge(spark, run) for run in runs]
    console.print(verdict_table(verdicts))
    return verdicts


def verdict_table(verdicts: list[Verdict]) -> Table:
    table = Table(title="fault matrix: the lab's invariants per fault (docs/faults.md)")
    for col in ("fault", "profile", "verdict", "details"):
        table.add_column(col, overflow="fold")
    for v in verdicts:
        table.add_row(v.fault, v.profile, f"[{STYLE[v.status]}]{v.status}[/]", v.line)
    return table
