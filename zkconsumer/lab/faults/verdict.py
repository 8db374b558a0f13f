"""One verdict per fault run: the analysis' invariants on its traces, in one line.

``PASS``: the fault was driven to the end and all five invariants hold. ``FAIL``: an invariant broke or the
fault could not be driven (a condition never came). ``KAFKA-0.8``: the kafka-0.8 profile broke an invariant on a
fault where Kafka 0.8 itself does (a consumer whose session expired keeps consuming what was given to
others): reported as Kafka's real behaviour, with its figures, not hidden and not counted as our failure.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from zkconsumer.lab.faults.matrix import FAULTS, FaultRun


@dataclass
class Verdict:
    fault: str
    profile: str
    status: str  # PASS | FAIL | KAFKA-0.8
    line: str
    figures: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status != "FAIL"


def judge(spark, run: FaultRun) -> Verdict:
    """Analyse ``run``'s traces (tables only, no plots) and turn the invariants into a verdict."""
    from zkconsumer.analysis.pipeline import run_analysis

    res = run_analysis(spark, str(Path(run.out) / "traces"), Path(run.out) / "report", Console(file=io.StringIO()),
                       from_zero=True, plots_and_report=False)
    inv = res.invariants
    reown = [f.get("latest_owner_since_heal_ms") for f in inv.faults]
    figures = {"deliveries": res.summary.get("deliveries", 0), "duplicates": inv.duplicates, "lost": inv.lost,
               "overlaps": inv.overlaps, "duplicates_committed": inv.duplicates_committed,
               "commits_backwards": inv.commits_backwards, "unowned_after_heal": inv.unowned_after_heal,
               "reowned_ms_after_heal": max((r for r in reown if r is not None), default=None),
               "group_rebalances": res.summary.get("group_rebalances", 0), "seconds": round(run.seconds, 1),
               "bad_lines": res.bad_lines}
    broken = inv.violations()
    if not inv.faults:
        broken.append("no fault_healed line in the trace")
    if run.error:
        broken.append(run.error)
    if not broken:
        status = "PASS"
        text = (f"all invariants hold: {figures['deliveries']:,} deliveries, {inv.duplicates} duplicates (all "
                f"uncommitted), owned again {figures['reowned_ms_after_heal']} ms after the heal")
    elif run.profile == "kafka-0.8" and FAULTS[run.fault].kafka08_known and not run.error:
        status = "KAFKA-0.8"
        text = "as Kafka 0.8 does: " + "; ".join(broken)
    else:
        status = "FAIL"
        text = "; ".join(broken)
    return Verdict(run.fault, run.profile, status, text, figures)
