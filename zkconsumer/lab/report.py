"""What a lab run prints: the live view's tables (each partition's owner, commit and lag; each member's state), the
summary table at the end, and the Spark report on the run's traces.

Rendering only, from numbers the lab (runner.py) gathered: it reads no server and starts no member, so the lab's
class keeps to running the group.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

#: The summary's rows, in the table's order (a key missing from a run's summary is left out).
SUMMARY_ROWS = ("scenario", "mode", "profile", "strategy", "client", "produced", "delivered", "unique_delivered",
                "duplicates", "lost", "lost_never_readable", "unread_at_end", "consumer_rebalances",
                "failed_rebalances", "claim_conflicts", "join_stalls", "rebalance_ms_p50", "rebalance_ms_max",
                "zookeeper_requests", "broker_requests", "migration", "verify_ok")


def partitions_table(title: str, produced: Mapping[tuple[str, int], int], owners: Mapping[tuple[str, int], str],
                     committed: Mapping[tuple[str, int], int]) -> Table:
    """Each partition produced to: its owner, its committed offset, its log end (what was produced) and the lag."""
    table = Table(title=title, expand=False)
    for col in ("partition", "owner", "committed", "log end", "lag"):
        table.add_column(col, justify="right" if col in ("committed", "log end", "lag") else "left")
    for (t, p) in sorted(produced):
        offset = committed.get((t, p))
        end = produced[(t, p)]
        lag = end - offset if offset is not None else end
        table.add_row(f"{t}-{p}", owners.get((t, p), "[red]none[/]"), "-" if offset is None else str(offset),
                      str(end), str(lag))
    return table


def members_table(members: Mapping[str, tuple[str, int, int]]) -> Table:
    """Each member (``c1``, ``c2``, ...: in their order) with its state, records delivered and rebalances."""
    table = Table(title="consumers")
    for col in ("consumer", "state", "records", "rebalances"):
        table.add_column(col)
    for name in sorted(members, key=lambda n: int(n[1:])):
        state, records, rebalances = members[name]
        table.add_row(name, state, str(records), str(rebalances))
    return table


def print_summary(console: Console, summary: Mapping[str, object], traces: Path, out: Path) -> None:
    table = Table(title="lab summary")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key in SUMMARY_ROWS:
        if key in summary:
            table.add_row(key.replace("_", " "), str(summary.get(key)))
    console.print(table)
    for line in summary.get("not_applicable") or ():
        console.print(f"[yellow]skipped[/] {escape(line)}")
    console.print(f"traces: {traces}  (analyze them: zkconsumer analyze {traces} --out {out / 'report'})",
                  highlight=False)


def analyze(console: Console, traces: Path, out: Path, master: str | None) -> str | None:
    """``zkconsumer analyze`` on the traces, in its own process (Spark); the report's directory, None if it failed."""
    cmd = [sys.executable, "-m", "zkconsumer", "analyze", str(traces), "--out", str(out / "report")]
    if master:
        cmd += ["--master", master]
    with contextlib.suppress(FileNotFoundError):
        code = subprocess.call(cmd)
        if code == 0:
            return str(out / "report")
    console.print("[yellow]analysis failed; see the output above[/]")
    return None
