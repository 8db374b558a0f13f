"""A real lab run (ZooKeeper, broker, consumer processes, a kill -9) analysed by Spark: the report agrees
with what the lab itself counted."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from zkconsumer.analysis.pipeline import run_analysis
from zkconsumer.lab.runner import Lab, LabPlan, Step


@pytest.mark.slow
def test_lab_run_turns_into_a_report(spark, tmp_path) -> None:
    plan = LabPlan(consumers=2, duration=8, rate=100, initial_records=100, session_timeout_ms=3000,
                   topics={"orders": 4}, steps=[Step(2, "join", "c3"), Step(4, "kill", "c1")])
    quiet = Console(file=io.StringIO())
    summary = Lab(plan, tmp_path / "run", console=quiet).run()
    assert summary["verify_ok"] and summary["lost"] == 0
    result = run_analysis(spark, str(tmp_path / "run" / "traces"), tmp_path / "report", quiet)
    assert result.bad_lines == 0
    assert result.summary["consumers"] == 3
    assert result.summary["duplicates"] == summary["duplicates"]
    assert result.summary["lost_below_committed"] == 0 and result.summary["lost_gap"] == 0
    assert result.summary["group_rebalances"] >= 2
    assert result.report_md.exists() and result.report_html.exists()
    assert all(p.exists() and p.stat().st_size > 0 for p in result.plots)
